"""What the recurrent models (Mamba: mamba.py, RWKV: rwkv.py) share: the graph of one micro-batch and a session that
feeds tokens in micro-batches with the model's state carried between them and between calls.

Unlike a transformer's KV cache, the state has a fixed size however long the history, and each graph ends by
copying the state after its last token over the old one: a prompt fed in pieces, or token by token, gives the logits
of one pass over the whole sequence. A graph is rebuilt only when (n_tokens, n_outputs) changes; otherwise it is
replayed with new token ids."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

import pyggml as gg
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.protocol import Buffer, BufferType, BufferUsage
from pyggml.backend.sched import Scheduler
from pyggml.errors import PyGGMLError
from pyggml.gguf import GGUFFile, Weights, load_weights
from pyggml.tensor import Tensor
from pyggml_llama.model import GRAPH_SIZE
from pyggml_llama.sampling import Sampler, SamplingParams
from pyggml_llama.session import Session


@dataclass
class RecurrentGraph:
    n_tokens: int
    n_outputs: int
    ctx: gg.Context
    graph: gg.Graph
    tokens: Tensor
    out_ids: Tensor | None
    """Rows whose logits are computed (None when every row is)."""
    logits: Tensor
    ids: Tensor | None = None
    """SSM_SCAN's state index per sequence (always 0: one sequence), where the graph has one."""


@dataclass(frozen=True)
class RecurrentHParams:
    """What every recurrent family's hyper-parameters hold (Mamba's and RWKV's extend them): the architecture, the
    depth and width, the vocabulary and the norms' epsilon."""

    arch: str
    n_layer: int
    n_embd: int
    n_vocab: int
    norm_eps: float


class RecurrentState:
    """A model's state tensors, made by the subclass in `ctx` (no_alloc), in one buffer of `buft`, F32; zero means
    an empty history."""

    def __init__(self, ctx: gg.Context, buft: BufferType) -> None:
        self.ctx = ctx
        self.buffer: Buffer | None = alloc_ctx_tensors(ctx, buft)
        if self.buffer is not None:
            self.buffer.usage = BufferUsage.ANY
        self.clear()

    def clear(self) -> None:
        """Zero the state: an empty history."""
        if self.buffer is not None:
            self.buffer.clear(0)


HP = TypeVar("HP", bound=RecurrentHParams)
ST = TypeVar("ST", bound=RecurrentState)
ST_contra = TypeVar("ST_contra", bound=RecurrentState, contravariant=True)


class RecurrentModel(Protocol[ST_contra]):
    def build_graph(self, n_tokens: int, n_outputs: int, state: ST_contra) -> RecurrentGraph: ...


@dataclass(frozen=True)
class RecurrentArch(Generic[HP, ST]):
    """How a recurrent family is read from its GGUF: its hyperparameters, its graph builder over the loaded weights
    and its state, the three pieces a session holds."""

    hparams: Callable[[GGUFFile], HP]
    model: Callable[[HP, Weights], RecurrentModel[ST]]
    state: Callable[[HP, BufferType], ST]


class RecurrentSession(Generic[HP, ST]):
    """A recurrent GGUF model on one device (plus the CPU for what it cannot run). Subclasses name their family's
    pieces (`arch`); the session loads them, builds a micro-batch's graph and zeroes the state on reset."""

    arch: RecurrentArch[HP, ST]

    def __init__(self, model_path: str | Path, backends: Sequence[str] = ("cpu",), *, n_batch: int = 256,
                 n_threads: int | None = None) -> None:
        if n_batch <= 0:
            raise PyGGMLError(f"n_batch ({n_batch}) must be positive")
        self.gguf = GGUFFile(model_path)
        self.n_batch = n_batch
        self.backends = Session._init_backends(backends, n_threads)
        self.n_vocab = self._setup(self.backends[0].device.buffer_type())
        self.sched = Scheduler(self.backends, graph_size=2 * GRAPH_SIZE)
        self.n_past = 0
        self.graph_builds = 0
        self._graph: RecurrentGraph | None = None

    def _setup(self, buft: BufferType) -> int:
        """Load the weights and allocate the state in `buft`; returns the vocabulary size."""
        self.hp = self.arch.hparams(self.gguf)
        self.weights = load_weights(self.gguf, buft)
        self.model = self.arch.model(self.hp, self.weights)
        self.state = self.arch.state(self.hp, buft)
        return self.hp.n_vocab

    def reset(self) -> None:
        """Forget the history: the next eval starts from an empty state."""
        self.n_past = 0
        self.state.clear()

    def eval(self, tokens: Sequence[int], all_logits: bool = False) -> npt.NDArray[np.float32]:
        """Run tokens after the history; returns the logits of the last token (or of every token) [n, n_vocab]."""
        if not tokens:
            raise PyGGMLError("eval needs at least one token")
        bad = [t for t in tokens if not 0 <= t < self.n_vocab]
        if bad:
            raise PyGGMLError(f"token ids {bad[:5]} are outside the vocabulary of {self.n_vocab}")
        out: list[npt.NDArray[np.float32]] = []
        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start : start + self.n_batch]
            logits = self._eval_ubatch(chunk, len(chunk) if all_logits else 1)
            if all_logits or start + len(chunk) == len(tokens):
                out.append(logits)
        return np.concatenate(out) if len(out) > 1 else out[0]

    def generate(self, prompt_tokens: Sequence[int], n_predict: int,
                 sampling: SamplingParams | None = None) -> Iterator[int]:
        """Yield up to n_predict new tokens after the prompt (stops at the vocabulary's end-of-generation token);
        each step feeds one token, the history living in the state."""
        sampler = Sampler(sampling or SamplingParams())
        eos = self.gguf.get("tokenizer.ggml.eos_token_id")
        logits = self.eval(prompt_tokens)[-1]
        for i in range(n_predict):
            tok = sampler(logits)
            yield tok
            if tok == eos or i == n_predict - 1:
                return
            logits = self.eval([tok])[-1]

    def _eval_ubatch(self, tokens: Sequence[int], n_outputs: int) -> npt.NDArray[np.float32]:
        n = len(tokens)
        g = self._graph
        if g is None or (g.n_tokens, g.n_outputs) != (n, n_outputs):
            g = self.model.build_graph(n, n_outputs, self.state)
            self.sched.reset()
            self.sched.alloc_graph(g.graph)
            self._graph = g
            self.graph_builds += 1
        g.tokens.set(np.asarray(tokens, dtype=np.int32))
        if g.ids is not None:
            g.ids.set(np.zeros(1, dtype=np.int32))
        if g.out_ids is not None:
            g.out_ids.set(np.arange(n - n_outputs, n, dtype=np.int32))
        self.sched.graph_compute(g.graph)
        self.n_past += n
        return g.logits.numpy().reshape(-1, self.n_vocab)
