"""LoRA adapters on a llama model: for each chosen projection W (frozen, quantised as in the GGUF), two F32
parameters A [n_in, rank] and B [rank, n_out], and the projection becomes W x + (alpha / rank) B (A x), the term
llama.cpp's build_lora_mm adds. A starts uniform in +-1/sqrt(n_in) and B at zero, so a fresh adapter leaves the
model's output unchanged and training starts from the base model.

Saved and loaded as a GGUF in llama.cpp's adapter layout: general.type = "adapter", adapter.type = "lora",
adapter.lora.alpha, general.architecture of the base model, and tensors `blk.N.attn_q.weight.lora_a` /
`.lora_b` with the shapes above (llama.cpp checks a.ne[0] == W.ne[0], b.ne[1] == W.ne[1], a.ne[1] == b.ne[0]).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.protocol import Buffer, BufferType
from pyggml.errors import GGUFError, PyGGMLError
from pyggml.gguf import GGUFFile
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_llama.gguf_writer import write_gguf
from pyggml_llama.model import LayerWeights, LlamaModel

TARGETS = {"attn_q": "wq", "attn_k": "wk", "attn_v": "wv", "attn_output": "wo", "ffn_gate": "w_gate",
           "ffn_up": "w_up", "ffn_down": "w_down"}
"""Projections an adapter may target: llama.cpp's tensor name -> LayerWeights field."""
DEFAULT_TARGETS = ("attn_q", "attn_v")


@dataclass(frozen=True)
class LoraConfig:
    rank: int = 8
    alpha: float = 16.0
    """The update is scaled by alpha / rank (adapter.lora.alpha)."""
    targets: tuple[str, ...] = DEFAULT_TARGETS
    layers: tuple[int, ...] | None = None
    """Layers that get adapters (None: all)."""
    seed: int = 0

    def check(self, model: LlamaModel) -> None:
        bad = [t for t in self.targets if t not in TARGETS]
        if bad or not self.targets:
            raise PyGGMLError(f"LoRA targets {bad or '(none)'}: choose among {', '.join(TARGETS)}")
        if self.rank <= 0 or self.alpha <= 0:
            raise PyGGMLError(f"LoRA rank ({self.rank}) and alpha ({self.alpha}) must be positive")
        n = model.hp.n_layer
        if self.layers is not None and any(not 0 <= i < n for i in self.layers):
            raise PyGGMLError(f"LoRA layers {list(self.layers)}: the model has layers 0..{n - 1}")
        if model.hp.n_expert and any(t.startswith("ffn_") for t in self.targets):
            raise PyGGMLError("LoRA on the FFN of a mixture of experts (MUL_MAT_ID) is not supported")


class LoraAdapter:
    """The A and B parameters of every targeted weight, in one no_alloc context (`ctx`) placed by `alloc`."""

    def __init__(self, model: LlamaModel, cfg: LoraConfig) -> None:
        cfg.check(model)
        self.cfg = cfg
        self.model = model
        self.ctx = gg.Context(no_alloc=True)
        self.pairs: dict[str, tuple[Tensor, Tensor]] = {}
        """Base weight name -> (A, B)."""
        layers = cfg.layers if cfg.layers is not None else range(model.hp.n_layer)
        for il in layers:
            lw: LayerWeights = model.layers[il]
            for target in cfg.targets:
                w: Tensor = getattr(lw, TARGETS[target])
                a = self.ctx.new_tensor(GGMLType.F32, w.ne[0], cfg.rank, name=f"{w.name}.lora_a").set_param()
                b = self.ctx.new_tensor(GGMLType.F32, cfg.rank, w.ne[1], name=f"{w.name}.lora_b").set_param()
                self.pairs[w.name] = (a, b)
        self.buffer: Buffer | None = None

    @property
    def scale(self) -> float:
        return self.cfg.alpha / self.cfg.rank

    @property
    def params(self) -> list[Tensor]:
        return [t for pair in self.pairs.values() for t in pair]

    def n_params(self) -> int:
        return sum(t.nelements() for t in self.params)

    def alloc(self, buft: BufferType) -> LoraAdapter:
        """Place the parameters in one buffer of `buft` and initialise them (A uniform, B zero; seeded)."""
        self.buffer = alloc_ctx_tensors(self.ctx, buft)
        rng = np.random.default_rng(self.cfg.seed)
        for a, b in self.pairs.values():
            bound = 1.0 / np.sqrt(a.ne[0])
            a.set(rng.uniform(-bound, bound, a.nelements()).astype(np.float32))
            b.set(np.zeros(b.nelements(), dtype=np.float32))
        return self

    def attach(self) -> None:
        """Route the model's targeted projections through the adapter (LlamaModel.adapters); graphs recorded
        from now on include it."""
        for name, (a, b) in self.pairs.items():
            self.model.adapters[name] = _lora_term(a, b, self.scale)

    def detach(self) -> None:
        for name in self.pairs:
            self.model.adapters.pop(name, None)

    # ---- GGUF ----------------------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the adapter as a llama.cpp LoRA adapter GGUF."""
        meta: dict[str, str | int | float] = {
            "general.architecture": self.model.hp.arch, "general.type": "adapter", "adapter.type": "lora",
            "adapter.lora.alpha": float(self.cfg.alpha), "general.name": "pyggml LoRA adapter"}
        tensors = {t.name: (t.ne[:2], t.numpy()) for t in self.params}
        write_gguf(path, meta, tensors)

    @classmethod
    def load(cls, path: str | os.PathLike[str], model: LlamaModel, buft: BufferType) -> LoraAdapter:
        """Read an adapter GGUF written by `save` (or llama.cpp's F32 adapters) for `model`, placed in `buft`."""
        gf = GGUFFile(path)
        if gf.metadata.get("general.type") != "adapter" or gf.metadata.get("adapter.type") != "lora":
            raise GGUFError(f"{path}: not a LoRA adapter (general.type / adapter.type are "
                            f"{gf.metadata.get('general.type')!r} / {gf.metadata.get('adapter.type')!r})")
        if gf.metadata.get("general.architecture") != model.hp.arch:
            raise GGUFError(f"{path}: adapter for {gf.metadata.get('general.architecture')!r}, model is "
                            f"{model.hp.arch!r}")
        names = sorted(gf.tensors)
        targets, layers, ranks = set(), set(), set()
        for n in names:
            parts = n.split(".")
            if len(parts) != 5 or parts[0] != "blk" or parts[2] not in TARGETS or parts[4] not in ("lora_a", "lora_b"):
                raise GGUFError(f"{path}: tensor {n!r} is not blk.N.<{'|'.join(TARGETS)}>.weight.lora_a/b")
            if gf.tensors[n].type != GGMLType.F32:
                raise GGUFError(f"{path}: tensor {n!r} is {gf.tensors[n].type}; only F32 adapters are read")
            targets.add(parts[2])
            layers.add(int(parts[1]))
            if parts[4] == "lora_a":
                ranks.add(gf.tensors[n].ne[1])
        if len(ranks) != 1:
            raise GGUFError(f"{path}: adapters of ranks {sorted(ranks)}; one rank is supported")
        alpha = float(gf.metadata.get("adapter.lora.alpha", 0.0)) or float(next(iter(ranks)))
        cfg = LoraConfig(rank=int(next(iter(ranks))), alpha=alpha, targets=_ordered(targets),
                         layers=tuple(sorted(layers)))
        ad = cls(model, cfg)
        have = {t.name for t in ad.params}
        if have != set(names):
            raise GGUFError(f"{path}: expected the tensors of {len(have)} adapters "
                            f"({', '.join(sorted(have - set(names))[:4]) or 'none'} missing)")
        ad.buffer = alloc_ctx_tensors(ad.ctx, buft)
        for t in ad.params:
            info = gf.tensors[t.name]
            if info.ne[:2] != t.ne[:2]:
                raise GGUFError(f"{path}: {t.name} has ne={list(info.ne)}, the model needs {list(t.ne[:2])}")
            t.set(gf.data(t.name).view(np.float32))
        return ad


def _ordered(targets: set[str]) -> tuple[str, ...]:
    return tuple(t for t in TARGETS if t in targets)


def _lora_term(a: Tensor, b: Tensor, scale: float) -> Callable[[Tensor], Tensor]:
    def term(x: Tensor) -> Tensor:
        return ops.scale(ops.mul_mat(b, ops.mul_mat(a, x)), scale)

    return term


def parse_targets(text: str) -> tuple[str, ...]:
    """'attn_q,attn_v' (or the short q, k, v, o, gate, up, down) -> llama.cpp names."""
    short = {"q": "attn_q", "k": "attn_k", "v": "attn_v", "o": "attn_output", "gate": "ffn_gate", "up": "ffn_up",
             "down": "ffn_down"}
    out = [short.get(t.strip(), t.strip()) for t in text.split(",") if t.strip()]
    bad = [t for t in out if t not in TARGETS]
    if bad:
        raise PyGGMLError(f"unknown LoRA target(s) {bad}: {', '.join(TARGETS)} (or q, k, v, o, gate, up, down)")
    return tuple(out)


def layer_list(text: str | None) -> Sequence[int] | None:
    """'0-3,10' -> [0, 1, 2, 3, 10] (None: every layer)."""
    if not text:
        return None
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        try:
            out.extend(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise PyGGMLError(f"LoRA layers {text!r}: expected numbers and ranges such as 0-9,20") from None
    return out
