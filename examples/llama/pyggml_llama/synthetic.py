"""A llama model with the shapes of a real one but metadata-only weights (no data): for graph, allocator and
scheduler benchmarks and tests that need the real graph structure without a GGUF file.

    llama = synthetic_llama()                         # weights + KV cache in one no_alloc context
    alloc_ctx_tensors(llama.ctx, buft)                # place them (optional: graphs build without memory)
    built = llama.graph(n_tokens=32, n_past=96)       # the example's own graph builder (model.py)
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pyggml as gg
from pyggml.gguf import Weights
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_llama.hparams import HParams
from pyggml_llama.model import BuiltGraph, GraphKey, LlamaModel

SMOLLM2_135M = HParams(arch="llama", n_layer=30, n_embd=576, n_head=9, n_head_kv=3, n_ff=1536, n_vocab=49152,
                       n_ctx_train=8192, head_dim=64, rope_dims=64, rope_type=0, rope_freq_base=100000.0,
                       rope_freq_scale=1.0, norm_eps=1e-5)


class SyntheticKV:
    """Per-layer K/V cache tensors (metadata only unless placed)."""

    def __init__(self, ctx: gg.Context, hp: HParams, n_ctx: int, dtype: GGMLType = GGMLType.F16,
                 v_trans: bool = True) -> None:
        self.n_ctx = n_ctx
        self.v_trans = v_trans
        v_ne = (n_ctx, hp.n_embd_kv) if v_trans else (hp.n_embd_kv, n_ctx)
        self.k = [ctx.new_tensor(dtype, hp.n_embd_kv, n_ctx, name=f"cache_k_l{i}") for i in range(hp.n_layer)]
        self.v = [ctx.new_tensor(dtype, *v_ne, name=f"cache_v_l{i}") for i in range(hp.n_layer)]


def synthetic_weights(hp: HParams = SMOLLM2_135M, wtype: GGMLType = GGMLType.Q4_1,
                      embd_type: GGMLType = GGMLType.Q8_0) -> tuple[gg.Context, dict[str, Tensor]]:
    ctx = gg.Context(no_alloc=True)
    w: dict[str, Tensor] = {
        "token_embd.weight": ctx.new_tensor(embd_type, hp.n_embd, hp.n_vocab, name="token_embd.weight"),
        "output_norm.weight": ctx.new_tensor(GGMLType.F32, hp.n_embd, name="output_norm.weight"),
    }
    shapes = {
        "attn_norm.weight": (GGMLType.F32, (hp.n_embd,)),
        "attn_q.weight": (wtype, (hp.n_embd, hp.n_head * hp.head_dim)),
        "attn_k.weight": (wtype, (hp.n_embd, hp.n_embd_kv)),
        "attn_v.weight": (wtype, (hp.n_embd, hp.n_embd_kv)),
        "attn_output.weight": (wtype, (hp.n_head * hp.head_dim, hp.n_embd)),
        "ffn_norm.weight": (GGMLType.F32, (hp.n_embd,)),
        "ffn_gate.weight": (wtype, (hp.n_embd, hp.n_ff)),
        "ffn_up.weight": (wtype, (hp.n_embd, hp.n_ff)),
        "ffn_down.weight": (wtype, (hp.n_ff, hp.n_embd)),
    }
    for il in range(hp.n_layer):
        for name, (t, ne) in shapes.items():
            full = f"blk.{il}.{name}"
            w[full] = ctx.new_tensor(t, *ne, name=full)
    return ctx, w


def _model(hp: HParams, ctx: gg.Context, tensors: dict[str, Tensor]) -> LlamaModel:
    return LlamaModel(hp, Weights(SimpleNamespace(path="<synthetic>"), ctx, tensors))  # type: ignore[arg-type]


def synthetic_model(hp: HParams = SMOLLM2_135M, wtype: GGMLType = GGMLType.Q4_1) -> LlamaModel:
    ctx, tensors = synthetic_weights(hp, wtype)
    return _model(hp, ctx, tensors)


@dataclass
class SyntheticLlama:
    """The model, and its weights and KV cache as tensors of one no_alloc context (`ctx`)."""

    hp: HParams
    ctx: gg.Context
    model: LlamaModel
    kv: SyntheticKV

    def graph(self, n_tokens: int, n_past: int = 0, n_outputs: int | None = None) -> BuiltGraph:
        """The graph of `n_tokens` new tokens after `n_past` cached ones (attention over n_past + n_tokens cells),
        with logits for the last `n_outputs` rows (default: every row); flash attention if the llama was made
        with it (its V cache layout follows)."""
        key = GraphKey(n_tokens, n_past + n_tokens, n_tokens if n_outputs is None else n_outputs)
        if key.n_kv > self.kv.n_ctx:
            raise ValueError(f"n_past + n_tokens = {key.n_kv} exceeds the KV cache of {self.kv.n_ctx} cells")
        return self.model.build_graph(key, self.kv, flash_attn=not self.kv.v_trans)


def synthetic_llama(hp: HParams = SMOLLM2_135M, wtype: GGMLType = GGMLType.Q4_1,
                    embd_type: GGMLType = GGMLType.Q8_0, n_ctx: int = 512,
                    kv_type: GGMLType = GGMLType.F16, flash_attn: bool = False) -> SyntheticLlama:
    ctx, tensors = synthetic_weights(hp, wtype, embd_type)
    kv = SyntheticKV(ctx, hp, n_ctx, kv_type, v_trans=not flash_attn)
    return SyntheticLlama(hp, ctx, _model(hp, ctx, tensors), kv)
