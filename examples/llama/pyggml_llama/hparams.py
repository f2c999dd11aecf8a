"""Llama hyper-parameters read from GGUF metadata (`<arch>.*` keys)."""

from __future__ import annotations

from dataclasses import dataclass

from pyggml.errors import GGUFError
from pyggml.gguf import GGUFFile
from pyggml.ops import ROPE_TYPE_NEOX, ROPE_TYPE_NORMAL

SUPPORTED_ARCHS = {"llama": ROPE_TYPE_NORMAL, "smollm3": ROPE_TYPE_NORMAL, "qwen2": ROPE_TYPE_NEOX}
NO_ROPE_LAYER_STEP = {"smollm3": 4}
"""Architectures whose every n-th layer attends without RoPE (llama.cpp's n_no_rope_layer_step)."""


@dataclass(frozen=True)
class HParams:
    arch: str
    n_layer: int
    n_embd: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_vocab: int
    n_ctx_train: int
    head_dim: int
    rope_dims: int
    rope_type: int
    rope_freq_base: float
    rope_freq_scale: float
    norm_eps: float
    n_expert: int = 0
    """Experts per MoE feed-forward (0: dense)."""
    n_expert_used: int = 0
    """Experts each token goes through."""
    no_rope_layer_step: int = 0
    """Layers il with (il + 1) % step == 0 skip RoPE (0: every layer uses it)."""

    def uses_rope(self, il: int) -> bool:
        return not self.no_rope_layer_step or (il + 1) % self.no_rope_layer_step != 0

    @classmethod
    def from_gguf(cls, gf: GGUFFile) -> HParams:
        arch = gf.architecture
        if arch not in SUPPORTED_ARCHS:
            raise GGUFError(f"{gf.path}: architecture {arch!r} is not supported (known: {sorted(SUPPORTED_ARCHS)})")

        def key(name: str, kind: type | tuple[type, ...] = int) -> object:
            return gf.require(f"{arch}.{name}", kind)

        n_embd = int(key("embedding_length"))  # type: ignore[call-overload]
        n_head = int(key("attention.head_count"))  # type: ignore[call-overload]
        n_head_kv = int(gf.get(f"{arch}.attention.head_count_kv", n_head))
        if n_head <= 0 or n_embd % n_head or n_head % max(n_head_kv, 1):
            raise GGUFError(f"{gf.path}: {n_head} heads, {n_head_kv} kv heads and n_embd {n_embd} do not fit")
        head_dim = int(gf.get(f"{arch}.attention.key_length", n_embd // n_head))
        vocab = gf.get(f"{arch}.vocab_size") or len(gf.get("tokenizer.ggml.tokens", []))
        experts = int(gf.get(f"{arch}.expert_count", 0) or 0)
        used = int(gf.get(f"{arch}.expert_used_count", 0) or 0)
        if experts and not 0 < used <= experts:
            raise GGUFError(f"{gf.path}: {arch}.expert_used_count = {used} does not fit {experts} experts")
        scaling = gf.get(f"{arch}.rope.scaling.type", "linear")  # llama.cpp's default
        scale = gf.get(f"{arch}.rope.scaling.factor")
        if scaling not in ("none", "linear") and scale not in (None, 1.0):
            raise GGUFError(f"{gf.path}: RoPE scaling {scaling!r} ({arch}.rope.scaling.type) is not supported "
                            "(none and linear are)")
        return cls(
            arch=arch,
            n_layer=int(key("block_count")),  # type: ignore[call-overload]
            n_embd=n_embd,
            n_head=n_head,
            n_head_kv=n_head_kv,
            n_ff=int(key("feed_forward_length")),  # type: ignore[call-overload]
            n_vocab=int(vocab),
            n_ctx_train=int(gf.number(f"{arch}.context_length", 2048, integer=True, lo=1, hi=2**31 - 1)),
            head_dim=head_dim,
            rope_dims=int(gf.get(f"{arch}.rope.dimension_count", head_dim)),
            rope_type=SUPPORTED_ARCHS[arch],
            rope_freq_base=float(gf.number(f"{arch}.rope.freq_base", 10000.0, lo=0, lo_open=True)),
            rope_freq_scale=1.0 / float(scale) if scale and scaling != "none" else 1.0,
            norm_eps=float(gf.number(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5, lo=0, lo_open=True)),
            n_expert=experts,
            n_expert_used=used if experts else 0,
            no_rope_layer_step=NO_ROPE_LAYER_STEP.get(arch, 0),
        )

    @property
    def n_embd_kv(self) -> int:
        return self.head_dim * self.n_head_kv
