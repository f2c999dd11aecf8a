"""A llama decoder graph with real model shapes and metadata-only weights, built with pyggml.ops alone: for the
allocator, scheduler and graph-build benchmarks (no GGUF file, no example package needed).

    w = make_weights(SMOLLM2_135M)                  # no_alloc Context: weights + per-layer K/V caches
    alloc_ctx_tensors(w.ctx, buft)                  # place them (optional: graphs build without it)
    g = build_llama_graph(w, n_tokens=32, n_past=96)
    g.graph.n_nodes                                 # about 1,000 nodes for 30 layers

Per layer (llama.cpp's classic non-flash-attention path): rms_norm * norm weight; q/k/v mul_mat; reshape; rope
(NeoX); K written into a view of the K cache with cpy, V transposed into a view of the V cache with cpy; q
permuted; k, v read as views of the caches; kq = mul_mat(k, q); soft_max with mask and scale; kqv =
mul_mat(v, kq); permute + cont; mul_mat o; residual add; rms_norm * norm weight; SwiGLU FFN; residual add.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pyggml as gg
from pyggml import ops
from pyggml.tensor import Tensor
from pyggml.types import GGMLType


@dataclass(frozen=True, slots=True)
class LlamaShape:
    n_layer: int = 30
    n_embd: int = 576
    n_head: int = 9
    n_head_kv: int = 3
    head_dim: int = 64
    n_ff: int = 1536
    n_vocab: int = 49152
    n_ctx: int = 512
    """K/V cache length (cells)."""
    norm_eps: float = 1e-5
    rope_base: float = 100000.0

    @property
    def n_embd_kv(self) -> int:
        return self.head_dim * self.n_head_kv


SMOLLM2_135M = LlamaShape()


@dataclass(slots=True)
class Layer:
    attn_norm: Tensor
    wq: Tensor
    wk: Tensor
    wv: Tensor
    wo: Tensor
    ffn_norm: Tensor
    w_gate: Tensor
    w_up: Tensor
    w_down: Tensor
    k_cache: Tensor
    v_cache: Tensor
    """V is cached transposed: row i of [n_ctx, n_embd_kv] holds element i of every cached position."""


@dataclass(slots=True)
class LlamaWeights:
    shape: LlamaShape
    ctx: gg.Context
    tok_embd: Tensor
    output_norm: Tensor
    output: Tensor
    layers: list[Layer] = field(default_factory=list)


def make_weights(shape: LlamaShape = SMOLLM2_135M, wtype: GGMLType = GGMLType.F16,
                 kv_type: GGMLType = GGMLType.F16) -> LlamaWeights:
    """Weights and K/V caches as tensors of a no_alloc Context (no memory until placed)."""
    s = shape
    ctx = gg.Context(no_alloc=True)
    f32 = GGMLType.F32
    w = LlamaWeights(s, ctx, ctx.new_tensor(wtype, s.n_embd, s.n_vocab, name="token_embd.weight"),
                     ctx.new_tensor(f32, s.n_embd, name="output_norm.weight"),
                     ctx.new_tensor(wtype, s.n_embd, s.n_vocab, name="output.weight"))
    q_dim = s.head_dim * s.n_head
    for il in range(s.n_layer):
        def t(ttype: GGMLType, *ne: int, name: str, il: int = il) -> Tensor:
            return ctx.new_tensor(ttype, *ne, name=f"blk.{il}.{name}")

        w.layers.append(Layer(
            t(f32, s.n_embd, name="attn_norm.weight"), t(wtype, s.n_embd, q_dim, name="attn_q.weight"),
            t(wtype, s.n_embd, s.n_embd_kv, name="attn_k.weight"),
            t(wtype, s.n_embd, s.n_embd_kv, name="attn_v.weight"),
            t(wtype, q_dim, s.n_embd, name="attn_output.weight"), t(f32, s.n_embd, name="ffn_norm.weight"),
            t(wtype, s.n_embd, s.n_ff, name="ffn_gate.weight"), t(wtype, s.n_embd, s.n_ff, name="ffn_up.weight"),
            t(wtype, s.n_ff, s.n_embd, name="ffn_down.weight"),
            t(kv_type, s.n_embd_kv, s.n_ctx, name="cache_k"), t(kv_type, s.n_ctx, s.n_embd_kv, name="cache_v"),
        ))
    return w


@dataclass(slots=True)
class LlamaGraph:
    graph: gg.Graph
    ctx: gg.Context
    tokens: Tensor
    pos: Tensor
    mask: Tensor
    out_ids: Tensor | None
    logits: Tensor


def build_llama_graph(w: LlamaWeights, n_tokens: int, n_past: int = 0, n_outputs: int | None = None,
                      graph_size: int = 4096) -> LlamaGraph:
    """The decoder graph for `n_tokens` new tokens after `n_past` cached ones (attention over n_past + n_tokens
    cache cells). Inputs (INPUT flag): tokens, positions, mask [n_kv, n_tokens], and out_ids when only
    `n_outputs` < n_tokens rows of logits are wanted; logits (OUTPUT) are [n_vocab, n_outputs]."""
    s = w.shape
    n, n_kv = n_tokens, n_past + n_tokens
    if n_kv > s.n_ctx:
        raise ValueError(f"n_past + n_tokens = {n_kv} exceeds the cache of {s.n_ctx} cells")
    ctx = gg.Context(no_alloc=True)
    with ctx:
        tokens = ctx.new_tensor(GGMLType.I32, n, name="inp_tokens").set_input()
        pos = ctx.new_tensor(GGMLType.I32, n, name="inp_pos").set_input()
        mask = ctx.new_tensor(GGMLType.F32, n_kv, n, name="inp_kq_mask").set_input()
        out_ids = None
        if n_outputs is not None and n_outputs < n:
            out_ids = ctx.new_tensor(GGMLType.I32, n_outputs, name="inp_out_ids").set_input()
        graph = gg.Graph(graph_size)
        x = ops.get_rows(w.tok_embd, tokens).set_name("inp_embd")
        for il, layer in enumerate(w.layers):
            x = _layer(graph, s, il, layer, x, pos, mask, n, n_past)
            if il == s.n_layer - 1 and out_ids is not None:
                x = ops.get_rows(x, out_ids)
        x = ops.mul(ops.rms_norm(x, s.norm_eps), w.output_norm).set_name("result_norm")
        logits = ops.mul_mat(w.output, x).set_name("result_output").set_output()
        graph.build_forward_expand(logits)
    return LlamaGraph(graph, ctx, tokens, pos, mask, out_ids, logits)


def _layer(graph: gg.Graph, s: LlamaShape, il: int, lw: Layer, x: Tensor, pos: Tensor, mask: Tensor, n: int,
           n_past: int) -> Tensor:
    d, nh, nkv, n_kv = s.head_dim, s.n_head, s.n_head_kv, n_past + n
    h = ops.mul(ops.rms_norm(x, s.norm_eps), lw.attn_norm).set_name(f"attn_norm-{il}")
    rope = {"freq_base": s.rope_base, "n_ctx_orig": s.n_ctx}
    q = ops.rope(ops.reshape(ops.mul_mat(lw.wq, h), d, nh, n), pos, d, ops.ROPE_TYPE_NEOX, **rope)  # type: ignore[arg-type]
    k = ops.rope(ops.reshape(ops.mul_mat(lw.wk, h), d, nkv, n), pos, d, ops.ROPE_TYPE_NEOX, **rope)  # type: ignore[arg-type]
    v = ops.mul_mat(lw.wv, h)                                                # [d * nkv, n]
    kc, vc = lw.k_cache, lw.v_cache
    # store this batch: K rows n_past.. of the cache; V transposed into columns n_past..
    k_dst = ops.view(kc, (s.n_embd_kv * n,), offset=n_past * kc.nb[1])
    graph.build_forward_expand(ops.cpy(k, k_dst))
    v_dst = ops.view(vc, (n, s.n_embd_kv), (vc.nb[1],), n_past * vc.nb[0])
    graph.build_forward_expand(ops.cpy(ops.transpose(v), v_dst))
    # attend over the first n_kv cache cells
    qp = ops.permute(q, 0, 2, 1, 3)                                          # [d, n, nh]
    k_all = ops.view(kc, (d, n_kv, nkv), (kc.nb[1], d * kc.nb[0]))           # [d, n_kv, nkv]
    kq = ops.soft_max(ops.mul_mat(k_all, qp), mask, 1.0 / math.sqrt(d))      # [n_kv, n, nh]
    v_all = ops.view(vc, (n_kv, d, nkv), (vc.nb[1], d * vc.nb[1]))           # [n_kv, d, nkv]
    kqv = ops.mul_mat(v_all, kq)                                             # [d, n, nh]
    attn = ops.cont(ops.permute(kqv, 0, 2, 1, 3), d * nh, n)                 # [d * nh, n]
    x = ops.add(x, ops.mul_mat(lw.wo, attn)).set_name(f"ffn_inp-{il}")
    h = ops.mul(ops.rms_norm(x, s.norm_eps), lw.ffn_norm).set_name(f"ffn_norm-{il}")
    ff = ops.swiglu(ops.mul_mat(lw.w_gate, h), ops.mul_mat(lw.w_up, h))
    return ops.add(x, ops.mul_mat(lw.w_down, ff)).set_name(f"l_out-{il}")
