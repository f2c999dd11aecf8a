"""The sequence-model ops, f32 as in ggml: TRI, SOLVE_TRI and SSM_CONV on seq.comp, SSM_SCAN (Mamba 1 and 2) on
ssm_scan.comp, RWKV_WKV6, GATED_LINEAR_ATTN, RWKV_WKV7 and GATED_DELTA_NET on wkv.comp.

The recurrent shaders read contiguous inputs from five bindings: a src that is not contiguous, and the srcs beyond
what five bindings hold (SSM_SCAN and RWKV_WKV7 have seven), are first copied into scratch by seq.comp's PACK (small
ones: dt, A, ids, gates; a model's views of one projection: x, B, C). On a CPU-emulated device the token loop is
split over several dispatches (each continuing from the state the previous one left in the result) so that no
invocation passes lavapipe's loop limit; SOLVE_TRI's rows likewise."""

from __future__ import annotations

import struct

from pyggml.backend.kernel_geometry import MAX_D_STATE, MAX_HEAD, scan_lanes
from pyggml.backend.op_table import RuleSet, opt_src, src
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_glsl.builder import Builder
from pyggml_glsl.ops.common import generic_pc, grid, groups_for, loop_share, patch_pc, srcs_ok

rules: RuleSet[Builder] = RuleSet()

T = GGMLType
F32 = frozenset({T.F32})
I32 = frozenset({T.I32})
PACK, TRI, SOLVE_TRI, SSM_CONV = range(4)
"""seq.comp's OP codes."""
LOOP_BUDGET = loop_share(2)
"""Loop iterations one invocation may take on a CPU-emulated device (2^15): half of LAVAPIPE_LOOPS, the rest is the
estimates' margin."""
BINDINGS: dict[Op, tuple[int, ...]] = {
    Op.SSM_SCAN: (0, 1, 4, 4, 2, 3, 4),  # s x dt A B C ids
    Op.RWKV_WKV6: (0, 1, 2, 4, 4, 3),  # k v r tf td state
    Op.GATED_LINEAR_ATTN: (0, 1, 2, 4, 3),  # k v q g state
    Op.RWKV_WKV7: (0, 4, 1, 2, 4, 4, 3),  # r w k v a b state
    Op.GATED_DELTA_NET: (0, 1, 2, 4, 4, 3),  # q k v g beta state
}
"""The binding each src of a recurrent op is read from (as the shaders' headers list them); binding 4 holds the
packed srcs when more than one src is read there."""
WKV_OP = {Op.RWKV_WKV6: 0, Op.GATED_LINEAR_ATTN: 1, Op.RWKV_WKV7: 2, Op.GATED_DELTA_NET: 3}
WKV_PASSES = {Op.RWKV_WKV6: 1, Op.GATED_LINEAR_ATTN: 1, Op.RWKV_WKV7: 2, Op.GATED_DELTA_NET: 3}
"""Loops over the head's S state values per token in wkv.comp (GATED_DELTA_NET: decay + dot, update, snapshot)."""


def _f32_ok(node: Tensor) -> bool:
    types = [I32 if node.op is Op.SSM_SCAN and i == 6 else F32 for i in range(len(node.src))]
    return node.type == T.F32 and node.is_contiguous() and srcs_ok(node, types)


def _seq_ok(node: Tensor) -> bool:
    c = node.src[1] if node.op is Op.SSM_CONV else None
    return _f32_ok(node) and (c is None or c.ne[0] <= LOOP_BUDGET) and (
        node.op is not Op.SOLVE_TRI or node.ne[1] <= LOOP_BUDGET)


@rules.rule(Op.TRI, Op.SSM_CONV, Op.SOLVE_TRI, accepts=_seq_ok)
def seq(node: Tensor, p: Builder) -> None:
    a, b = src(node, 0), opt_src(node, 1)
    if node.op is not Op.SOLVE_TRI:
        code, u0 = (TRI, int(node.params.tri_type)) if node.op is Op.TRI else (SSM_CONV, 0)
        push = generic_pc(a, b, node, u0)
        p.dispatch("seq", (code,), [a, b], node, push, grid(groups_for(node.nelements())))
        return
    n = node.ne[1]
    rows = max(1, LOOP_BUDGET // max(1, n)) if p.cpu_emulated else n
    push = generic_pc(a, b, node)
    for r0 in range(0, n, rows):
        p.dispatch("seq", (SOLVE_TRI,), [a, b], node, patch_pc(push, u0=r0, f1=min(n, r0 + rows)),
                   grid(groups_for(node.ne[0] * node.ne[2] * node.ne[3])))


def _placed(node: Tensor, p: Builder) -> tuple[list[Tensor | None], list[int]]:
    """The tensors bound at bindings 0..4 for a recurrent op and the word offset of each src: a src read as it is
    where it is contiguous and alone at its binding, else its contiguous copy in scratch (PACK dispatches)."""
    bind = BINDINGS[node.op]
    srcs = [s for s in node.src if s is not None]
    shared4 = bind.count(4) > 1
    packed = [i for i, s in enumerate(srcs) if not s.is_contiguous() or (bind[i] == 4 and shared4)]
    packed.sort(key=lambda i: bind[i] != 4)  # binding 4's copies first: one range covers them
    sizes = [-(-4 * srcs[i].nelements() // 16) * 16 for i in packed]
    scratch = p.scratch(sum(sizes)) if packed else None
    placed: list[Tensor] = list(srcs)
    off = 0
    for i, size in zip(packed, sizes, strict=True):
        assert scratch is not None
        s = srcs[i]
        copy = Tensor(s.type, s.ne, op=Op.NONE)
        copy.name, copy.buffer, copy.offset = f"{node.name} src{i} packed", scratch.buffer, scratch.offset + off
        off += size
        p.dispatch("seq", (PACK,), [s], copy, generic_pc(s, None, copy), grid(groups_for(s.nelements())))
        placed[i] = copy
    bound: list[Tensor | None] = [None] * 5
    for i, t in enumerate(placed):
        bound[bind[i]] = t
    if shared4 and scratch is not None:
        n4 = sum(size for i, size in zip(packed, sizes, strict=True) if bind[i] == 4)
        cover = Tensor(T.I8, (n4, 1, 1, 1), op=Op.NONE)
        cover.name, cover.buffer, cover.offset = f"{node.name} packed srcs", scratch.buffer, scratch.offset
        bound[4] = cover
    return bound, [t.offset // 4 for t in placed]


def _push(words: list[int]) -> bytes:
    """31 uint words (the srcs' word offsets, d's, then the op's sizes) and the status float."""
    w = (words + [0] * 31)[:31]
    return struct.pack("<31If", *(x & 0xFFFFFFFF for x in w), 0.0)


def token_chunks(n_tok: int, per_token: int, fixed: int, emulated: bool) -> list[tuple[int, int]]:
    """Token ranges of the dispatches: all at once, or on a CPU-emulated device as many as keep an invocation's
    loop iterations (fixed + per_token per token) within LOOP_BUDGET."""
    step = max(1, (LOOP_BUDGET - fixed) // per_token) if emulated else max(1, n_tok)
    return [(t, min(n_tok, t + step)) for t in range(0, n_tok, step)] or [(0, 0)]


def _scan_ok(node: Tensor) -> bool:
    s = node.src[0] if node.src else None
    return _f32_ok(node) and s is not None and s.ne[0] <= MAX_D_STATE


@rules.rule(Op.SSM_SCAN, accepts=_scan_ok)
def ssm_scan(node: Tensor, p: Builder) -> None:
    s, x, a, b = src(node, 0), src(node, 1), src(node, 3), src(node, 4)
    bound, offs = _placed(node, p)
    d_state, head_dim, n_head, n_tok, n_seqs = s.ne[0], x.ne[0], x.ne[1], x.ne[2], x.ne[3]
    lanes = scan_lanes(d_state)
    ns = -(-d_state // lanes)
    sizes = [d_state, head_dim, n_head, b.ne[1], n_tok, n_seqs, int(a.ne[0] != 1), node.params.k, s.ne[3]]
    checks = f"a state id outside 0..{s.ne[3] - 1}"
    for t0, t1 in token_chunks(n_tok, 2 * ns + lanes.bit_length() + 4, 2 * ns + 8, p.cpu_emulated):
        push = _push([*offs, node.offset // 4, *sizes, t0, t1])
        p.dispatch("ssm_scan", (lanes, ns), bound, node, push, grid(head_dim * n_head * n_seqs), checks=checks)


def _wkv_ok(node: Tensor) -> bool:
    """f32; S within MAX_HEAD; WKV6 / GLA / WKV7's state [S*S*H, n_seqs] as ggml lays it out."""
    v = node.src[2 if node.op is Op.GATED_DELTA_NET else 1]
    st = node.src[-1]
    if v is None or st is None or not _f32_ok(node) or not 1 <= v.ne[0] <= MAX_HEAD:
        return False
    return node.op is Op.GATED_DELTA_NET or (st.ne[2] == 1 and st.ne[3] == 1)


@rules.rule(*WKV_OP, accepts=_wkv_ok)
def wkv(node: Tensor, p: Builder) -> None:
    gdn = node.op is Op.GATED_DELTA_NET
    v, st = src(node, 2 if gdn else 1), src(node, len(node.src) - 1)
    bound, offs = _placed(node, p)
    size, heads = v.ne[0], v.ne[1]
    if gdn:
        q, g = src(node, 0), src(node, 3)
        n_seqs, n_tok = v.ne[3], v.ne[2]
        sizes = [heads, n_tok, n_seqs, q.ne[1], q.ne[3], int(g.ne[0] != 1), node.params.k]
    else:
        n_seqs, n_tok = st.ne[1], v.ne[2] // st.ne[1]
        scale = node.params.scale if node.op is Op.GATED_LINEAR_ATTN else 0.0
        sizes = [heads, v.ne[2], n_seqs, 0, 0, 0, 0]
    words = [*(offs + [0] * 7)[:7], node.offset // 4, *sizes]
    passes = WKV_PASSES[node.op]
    for t0, t1 in token_chunks(n_tok, passes * size + 4, 2 * size + 8, p.cpu_emulated):
        tail = [t0, t1] if gdn else [t0, t1, struct.unpack("<I", struct.pack("<f", scale))[0]]
        p.dispatch("wkv", (WKV_OP[node.op], size), bound, node, _push(words + tail), grid(heads * n_seqs))
