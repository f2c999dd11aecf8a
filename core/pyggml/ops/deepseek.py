"""ggml's newest ops, from the DeepSeek family: LIGHTNING_INDEXER (the key scorer of DeepSeek sparse attention)
and the hyper-connection ops of DeepSeek V4 (DSV4_HC_COMB, DSV4_HC_PRE, DSV4_HC_POST), which replace the residual
connection x + f(x) by hc mixed residual streams.

src order and op_params words are ggml's (llama-cpp-python 0.3.36); docs/op-semantics.md states the formulas.
pyggml's DSV4_HC_COMB takes any stream count hc where ggml's kernels are written for hc = 4 only (ggml asserts).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyggml.ops.base import Op, check_types, define, fail, need, record
from pyggml.tensor import Ne, Tensor
from pyggml.types import INT_TYPES, GGMLType

Srcs = tuple[Tensor | None, ...]
F32_ONLY = frozenset({GGMLType.F32})
F16_ONLY = frozenset({GGMLType.F16})


def hc_streams(mix_dim: int) -> int:
    """hc with (2 + hc) * hc == mix_dim (the pre, post and comb mixes of one token), 0 if there is none."""
    hc = 1
    while hc * hc + 2 * hc <= mix_dim:
        if (2 + hc) * hc == mix_dim:
            return hc
        hc += 1
    return 0


def _lightning_indexer(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    op = Op.LIGHTNING_INDEXER
    q, k = need(srcs[0], op, "src0 (q)"), need(srcs[1], op, "src1 (k)")
    w = need(srcs[2] if len(srcs) > 2 else None, op, "src2 (weights)", F32_ONLY)
    m = need(srcs[3] if len(srcs) > 3 else None, op, "src3 (mask)", F16_ONLY)
    check_types(op, q, F32_ONLY, "src0 (q)")
    if k.type in INT_TYPES:
        raise fail(op, "k must be a float or block type", k)
    n_embd, n_head, n_tok, n_str = q.ne
    if k.ne[0] != n_embd or k.ne[1] != 1 or k.ne[3] != n_str:
        raise fail(op, "k must be [n_embd, 1, n_kv, n_stream] for q [n_embd, n_head, n_tokens, n_stream]", q, k)
    if w.ne != (n_head, n_tok, 1, n_str):
        raise fail(op, "weights must be [n_head, n_tokens, 1, n_stream]", q, w)
    n_kv = k.ne[2]
    if m.ne[0] != n_kv or m.ne[1] != n_tok or m.ne[2] != 1 or m.ne[3] == 0 or n_str % m.ne[3]:
        raise fail(op, "mask must be [n_kv, n_tokens, 1, M] with n_stream a multiple of M", k, m)
    return GGMLType.F32, (n_kv, n_tok, 1, n_str)


@dataclass(frozen=True, slots=True)
class HcCombParams:
    """ggml's words: eps (f32), n_iter (i32)."""

    eps: float
    n_iter: int


def _hc_comb(srcs: Srcs, p: HcCombParams) -> tuple[GGMLType, Ne]:
    op = Op.DSV4_HC_COMB
    mixes, scale = need(srcs[0], op, "src0 (mixes)"), need(srcs[1], op, "src1 (scale)")
    base = need(srcs[2] if len(srcs) > 2 else None, op, "src2 (base)")
    for t, slot in ((mixes, "src0 (mixes)"), (scale, "src1 (scale)"), (base, "src2 (base)")):
        check_types(op, t, F32_ONLY, slot)
    hc = hc_streams(mixes.ne[0])
    if hc == 0 or mixes.ne[2] != 1 or mixes.ne[3] != 1:
        raise fail(op, "mixes must be [(2 + hc) * hc, n_tokens]", mixes)
    if scale.ne[0] < 3 or scale.ne[1:] != (1, 1, 1):
        raise fail(op, "scale must be a vector of at least 3 (element 2 scales the comb mixes)", scale)
    if base.ne != (mixes.ne[0], 1, 1, 1):
        raise fail(op, "base must be a vector as long as a mixes row", mixes, base)
    if isinstance(p.n_iter, bool) or not isinstance(p.n_iter, int) or p.n_iter <= 0:
        raise fail(op, f"n_iter={p.n_iter} must be positive", mixes)
    return GGMLType.F32, (hc, hc, mixes.ne[1], 1)


@dataclass(frozen=True, slots=True)
class HcPreParams:
    """ggml's words: scale (f32), gated (i32 0/1: src1 is a per-element gate, else per-stream weights)."""

    scale: float = 1.0
    gated: bool = False


def _hc_pre(srcs: Srcs, p: HcPreParams) -> tuple[GGMLType, Ne]:
    op = Op.DSV4_HC_PRE
    x, w = need(srcs[0], op, "src0 (x)"), need(srcs[1], op, "src1 (weights or gate)")
    check_types(op, x, F32_ONLY, "src0 (x)")
    check_types(op, w, F32_ONLY, "src1 (weights or gate)")
    n_embd, hc, n_tok, one = x.ne
    if hc == 0 or one != 1:
        raise fail(op, "x must be [n_embd, hc, n_tokens] with hc > 0", x)
    want = (n_embd, hc, n_tok, 1) if p.gated else (hc, n_tok, 1, 1)
    if w.ne != want:
        what = "gate [n_embd, hc, n_tokens]" if p.gated else "weights [hc, n_tokens]"
        raise fail(op, f"src1 must be the {what}", x, w)
    return GGMLType.F32, (n_embd, n_tok, 1, 1)


def _hc_post(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    op = Op.DSV4_HC_POST
    x, res = need(srcs[0], op, "src0 (x)"), need(srcs[1], op, "src1 (residual)")
    post = need(srcs[2] if len(srcs) > 2 else None, op, "src2 (post)")
    comb = srcs[3] if len(srcs) > 3 else None
    for t, slot in ((x, "src0 (x)"), (res, "src1 (residual)"), (post, "src2 (post)"), (comb, "src3 (comb)")):
        if t is not None:
            check_types(op, t, F32_ONLY, slot)
    n_embd, n_tok, hc = x.ne[0], x.ne[1], res.ne[1]
    if x.ne[2:] != (1, 1) or hc == 0 or res.ne != (n_embd, hc, n_tok, 1):
        raise fail(op, "x must be [n_embd, n_tokens] and residual [n_embd, hc, n_tokens]", x, res)
    if post.ne != (hc, n_tok, 1, 1):
        raise fail(op, "post must be [hc, n_tokens]", res, post)
    if comb is not None and comb.ne != (hc, hc, n_tok, 1):
        raise fail(op, "comb must be [hc, hc, n_tokens]", res, comb)
    return GGMLType.F32, (n_embd, hc, n_tok, 1)


define(Op.LIGHTNING_INDEXER, (4, 4), _lightning_indexer)
define(Op.DSV4_HC_COMB, (3, 3), _hc_comb, HcCombParams)
define(Op.DSV4_HC_PRE, (2, 2), _hc_pre, HcPreParams)
define(Op.DSV4_HC_POST, (3, 4), _hc_post)


def lightning_indexer(q: Tensor, k: Tensor, weights: Tensor, mask: Tensor) -> Tensor:
    """Index scores of DeepSeek sparse attention, F32 [n_kv, n_tokens, 1, n_stream]:
    score[j, t, s] = sum_h relu(q[:, h, t, s] . k[:, 0, j, s]) * weights[h, t, 0, s] + mask[j, t, 0, s mod M].
    q F32 [n_embd, n_head, n_tokens, n_stream]; k [n_embd, 1, n_kv, n_stream] of any float or block type;
    weights F32 [n_head, n_tokens, 1, n_stream] (the softmax scale already folded in, as ggml expects); mask F16
    [n_kv, n_tokens, 1, M] tiled over the streams."""
    return record(Op.LIGHTNING_INDEXER, (q, k, weights, mask))


def dsv4_hc_comb(mixes: Tensor, scale: Tensor, base: Tensor, eps: float, n_iter: int) -> Tensor:
    """The stream-mixing matrices of DeepSeek V4's hyper-connections, F32 [hc, hc, n_tokens] from mixes
    [(2 + hc) * hc, n_tokens]: logits[d, s] = mixes[2*hc + d + hc*s] * scale[2] + base[2*hc + d + hc*s]; a softmax
    over d for each s, plus eps; then each row d divided by (eps + its sum over s); then n_iter - 1 more rounds of
    columns (over d, for each s) then rows, each divided by eps + its sum (Sinkhorn normalisation)."""
    return record(Op.DSV4_HC_COMB, (mixes, scale, base), HcCombParams(float(eps), n_iter))


def dsv4_hc_pre(x: Tensor, weights: Tensor) -> Tensor:
    """The hc residual streams mixed into one layer input: dst[i, t] = sum_h x[i, h, t] * weights[h, t]
    (x [n_embd, hc, n_tokens], weights [hc, n_tokens]) -> F32 [n_embd, n_tokens]."""
    return record(Op.DSV4_HC_PRE, (x, weights), HcPreParams())


def dsv4_hc_pre_gated(x: Tensor, gate: Tensor, scale: float) -> Tensor:
    """dst[i, t] = scale * sum_h x[i, h, t] * sigmoid(gate[i, h, t]) (gate [n_embd, hc, n_tokens])."""
    return record(Op.DSV4_HC_PRE, (x, gate), HcPreParams(float(scale), True))


def dsv4_hc_post(x: Tensor, residual: Tensor, post: Tensor, comb: Tensor | None = None) -> Tensor:
    """The layer output spread back over the streams, F32 [n_embd, hc, n_tokens]:
    dst[i, d, t] = x[i, t] * post[d, t] + sum_s residual[i, s, t] * comb[d, s, t] (x [n_embd, n_tokens], residual
    [n_embd, hc, n_tokens], post [hc, n_tokens], comb [hc, hc, n_tokens]); without comb, + residual[i, d, t]."""
    return record(Op.DSV4_HC_POST, (x, residual, post, comb))
