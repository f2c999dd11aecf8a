"""Sequence-model ops in the style of test-backend-ops: SSM_CONV (ggml's d_conv / d_inner / token grid, strided
rows), SSM_SCAN (Mamba 1 and 2, Falcon-H1-like groups, x/B/C as views of one tensor, state snapshots K > 1, more
state rows than sequences picked by ids), RWKV_WKV6 / GATED_LINEAR_ATTN / RWKV_WKV7 (ggml's head grids, 1 to 4
sequences), GATED_DELTA_NET (scalar and KDA gates, v heads repeating q/k heads, permuted q/k/v, long sequences,
snapshots), SOLVE_TRI (ggml's shapes; well-conditioned A beyond n = 80, where float32 forward substitution of
ggml's matrices loses the digits an NMSE of 1e-7 needs) and TRI (the four triangles, strided input)."""

from __future__ import annotations

from itertools import product

import numpy as np

from pyggml import ops
from pyggml.ops import TriType
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import F32, I32
from pyggml_conformance.inputs import Array, Init, distinct_ids, integers, uniform


def tril(lo: float, hi: float, scaled: bool) -> Init:
    """Lower-triangular square matrices (dims 0, 1): ggml's init_tensor_tril (uniform [lo, hi] on and below the
    diagonal), or, scaled, off-diagonal entries uniform [-1, 1] / sqrt(n) with the diagonal in [lo, hi]."""

    def init(rng: np.random.Generator, t: Tensor) -> Array:
        shape = tuple(reversed(t.ne))
        n = shape[-1]
        if not scaled:
            ggml: Array = np.tril(rng.uniform(lo, hi, shape))
            return ggml
        a: Array = np.tril(rng.uniform(-1.0, 1.0, shape)) / np.sqrt(n)
        a[..., np.arange(n), np.arange(n)] = rng.uniform(lo, hi, (*shape[:-2], n))
        return a

    init.__qualname__ = f"tril({lo:g},{hi:g},{'scaled' if scaled else 'ggml'})"
    return init


def tri_case(kind: TriType, ne: tuple[int, int, int, int], v: int = 0) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        a = b.strided(F32, ne, pad=(3, 1, 1, 0)) if v else b.input(F32, ne)
        return ops.tri(a, kind)

    return Case(Op.TRI, fmt_params(type=F32, ne=ne, tri_type=kind, v=v), build)


def solve_tri_case(ne_lhs: tuple[int, int, int, int], ne_rhs: tuple[int, int, int, int], v: int = 0) -> Case:
    scaled = ne_lhs[0] > 80

    def build(b: CaseBuilder) -> Tensor:
        a = b.input(F32, ne_lhs, tril(0.1 if not scaled else 0.5, 1.0 if not scaled else 1.5, scaled))
        rhs = b.strided(F32, ne_rhs, pad=(2, 0, 1, 0)) if v else b.input(F32, ne_rhs)
        return ops.solve_tri(a, rhs)

    return Case(Op.SOLVE_TRI, fmt_params(type=F32, ne_lhs=ne_lhs, ne_rhs=ne_rhs, v=v), build)


def ssm_conv_case(ne_a: tuple[int, int, int], ne_b: tuple[int, int], v: int = 0) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        sx = b.strided(F32, ne_a, pad=(2, 1, 0, 0)) if v else b.input(F32, ne_a)
        return ops.ssm_conv(sx, b.input(F32, ne_b))

    return Case(Op.SSM_CONV, fmt_params(type=F32, ne_a=ne_a, ne_b=ne_b, v=v), build)


def ssm_scan_case(d_state: int, head_dim: int, n_head: int, n_group: int, n_tok: int, n_seqs: int,
                  overlap: bool = False, k: int = 1, spare: int = 0, bad_ids: bool = False) -> Case:
    """test_ssm_scan's graph; `spare` extra state rows that ids never pick (ids a permutation of a subset);
    bad_ids: ids past the state rows, an error on every backend."""
    params = fmt_params(type=F32, d_state=d_state, head_dim=head_dim, n_head=n_head, n_group=n_group,
                        n_seq_tokens=n_tok, n_seqs=n_seqs, xbc_overlap=overlap, K=k, spare=spare)
    params += ",bad_ids=1" if bad_ids else ""

    def build(b: CaseBuilder) -> Tensor:
        s = b.input(F32, (d_state, head_dim, n_head, n_seqs + spare))
        dt = b.input(F32, (n_head, n_tok, n_seqs))
        a = b.input(F32, (1 if head_dim > 1 else d_state, n_head), uniform(-1.0, -0.5))
        if overlap:  # x, B and C are views into one tensor, as test-backend-ops' xbc_overlap
            xbc = b.input(F32, (d_state, n_head, n_tok, 2 * n_seqs))
            nb = xbc.nb
            x = ops.view(xbc, (head_dim, n_head, n_tok, n_seqs), (nb[1], nb[2], nb[3]), nb[3])
            bb = ops.view(xbc, (d_state, n_group, n_tok, n_seqs), (nb[1], nb[2], nb[3]), 0)
            cc = ops.view(xbc, (d_state, n_group, n_tok, n_seqs), (nb[1], nb[2], nb[3]), 2 * nb[3])
        else:
            x = b.input(F32, (head_dim, n_head, n_tok, n_seqs))
            bb = b.input(F32, (d_state, n_group, n_tok, n_seqs))
            cc = b.input(F32, (d_state, n_group, n_tok, n_seqs))
        ids = b.input(I32, (n_seqs,), integers(n_seqs + spare, n_seqs + spare + 3) if bad_ids
                      else distinct_ids(n_seqs + spare))
        return ops.ssm_scan(s, x, dt, a, bb, cc, ids, k)

    return Case(Op.SSM_SCAN, params, build, threshold=2e-7 if head_dim > 1 else 1e-7, expect_error=bad_ids)


def linear_case(op: Op, heads: int, size: int, per_seq: int, n_seqs: int) -> Case:
    """test_rwkv_wkv6 / test_gla / test_rwkv_wkv7: token tensors [size, heads, tokens], state [size^2 heads,
    n_seqs]; WKV7's a and b are L2-normalised first (long sequences stay finite), as ggml's test does."""
    n_tok = per_seq * n_seqs
    params = fmt_params(type=F32, head_count=heads, head_size=size, n_seq_tokens=per_seq, n_seqs=n_seqs)

    def build(b: CaseBuilder) -> Tensor:
        def tok() -> Tensor:
            return b.input(F32, (size, heads, n_tok))

        state = b.input(F32, (size * size * heads, n_seqs))
        if op is Op.RWKV_WKV6:
            k, v, r = tok(), tok(), tok()
            return ops.rwkv_wkv6(k, v, r, b.input(F32, (size, heads)), tok(), state)
        if op is Op.GATED_LINEAR_ATTN:
            k, v, q, g = tok(), tok(), tok(), tok()
            return ops.gated_linear_attn(k, v, q, g, state, size ** -0.5)
        r, w, k, v = tok(), tok(), tok(), tok()
        a, bb = ops.l2_norm(tok(), 1e-7), ops.l2_norm(tok(), 1e-7)
        return ops.rwkv_wkv7(r, w, k, v, a, bb, state)

    return Case(op, params, build)


def gdn_case(heads: int, size: int, n_tok: int, n_seqs: int, v_repeat: int = 1, permuted: bool = False,
             kda: bool = False, k: int = 1) -> Case:
    """test_gated_delta_net: q, k L2-normalised (permuted: read through their strides instead, smaller values)."""
    params = fmt_params(type=F32, head_count=heads, head_size=size, n_seq_tokens=n_tok, n_seqs=n_seqs,
                        v_repeat=v_repeat, permuted=permuted, kda=kda, K=k)

    def build(b: CaseBuilder) -> Tensor:
        hv = heads * v_repeat
        if permuted:
            small = uniform(-1.0 / np.sqrt(size), 1.0 / np.sqrt(size))
            q = b.permuted(F32, (size, heads, n_tok, n_seqs), (0, 2, 1, 3), small)
            kk = b.permuted(F32, (size, heads, n_tok, n_seqs), (0, 2, 1, 3), small)
            v = b.permuted(F32, (size, hv, n_tok, n_seqs), (0, 2, 1, 3), uniform(-0.3, 5.0))
        else:
            q = ops.l2_norm(b.input(F32, (size, heads, n_tok, n_seqs)), 1e-6)
            kk = ops.l2_norm(b.input(F32, (size, heads, n_tok, n_seqs)), 1e-6)
            v = b.input(F32, (size, hv, n_tok, n_seqs), uniform(-0.3, 5.0))
        g = b.input(F32, (size if kda else 1, hv, n_tok, n_seqs), uniform(-20.0, -1e-4))
        beta = b.input(F32, (1, hv, n_tok, n_seqs), uniform(0.0, 1.0))
        state = b.input(F32, (size, size, hv, n_seqs))
        return ops.gated_delta_net(q, kk, v, g, beta, state, k)

    return Case(Op.GATED_DELTA_NET, params, build)


def eval_cases() -> list[Case]:
    out: list[Case] = []
    for kind in TriType:
        out += [tri_case(kind, (10, 10, 4, 3)), tri_case(kind, (33, 33, 2, 1), v=1)]
    out.append(tri_case(TriType.LOWER, (1, 1, 1, 1)))
    for lhs, rhs in (((10, 10, 4, 3), (3, 10, 4, 3)), ((11, 11, 1, 1), (5, 11, 1, 1)),
                     ((17, 17, 2, 4), (9, 17, 2, 4)), ((30, 30, 7, 1), (8, 30, 7, 1)), ((42, 42, 5, 2), (10, 42, 5, 2)),
                     ((64, 64, 2, 2), (10, 64, 2, 2)), ((64, 64, 2, 2), (64, 64, 2, 2)),
                     ((79, 79, 5, 3), (417, 79, 5, 3)), ((128, 128, 4, 2), (32, 128, 4, 2)),
                     ((80, 80, 2, 8), (79, 80, 2, 8)), ((80, 80, 2, 8), (81, 80, 2, 8))):
        out.append(solve_tri_case(lhs, rhs))
    out.append(solve_tri_case((17, 17, 2, 1), (9, 17, 2, 1), v=1))
    for d_conv, d_inner in product((3, 4), (1536, 2048)):
        for n_t, n_s in ((1, 1), (d_conv + 1, 1), (1, 4), (64, 1), (64, 4)):
            out.append(ssm_conv_case((d_conv - 1 + n_t, d_inner, n_s), (d_conv, d_inner)))
    out.append(ssm_conv_case((10, 10, 10), (3, 10)))
    out.append(ssm_conv_case((12, 96, 3), (4, 96), v=1))
    out += [
        ssm_scan_case(16, 1, 1024, 1, 32, 4),  # Mamba-1
        ssm_scan_case(16, 1, 96, 1, 7, 2, spare=2),
        ssm_scan_case(128, 64, 16, 2, 32, 4),  # Mamba-2
        ssm_scan_case(256, 64, 8, 2, 32, 4),  # Falcon-H1
        ssm_scan_case(128, 128, 4, 4, 16, 2, overlap=True),
        ssm_scan_case(128, 64, 16, 2, 4, 2, k=4),  # snapshots
        ssm_scan_case(128, 64, 16, 2, 8, 2, k=3),
        ssm_scan_case(96, 64, 16, 8, 33, 2, spare=1),
        ssm_scan_case(16, 4, 6, 3, 1, 1),
        ssm_scan_case(20, 8, 4, 2, 5, 2), ssm_scan_case(12, 1, 40, 1, 6, 1),  # state rows not whole vectors
        ssm_scan_case(16, 1, 8, 1, 3, 2, bad_ids=True),
    ]
    for op in (Op.RWKV_WKV6, Op.GATED_LINEAR_ATTN, Op.RWKV_WKV7):
        for per_seq, n_seqs in ((1, 1), (32, 1), (32, 4), (128, 4)):
            out.append(linear_case(op, 32, 64, per_seq, n_seqs))
        out += [linear_case(op, 3, 16, 5, 2), linear_case(op, 2, 12, 3, 3)]  # 12: heads not whole vectors
    # the delta net's grid as test-backend-ops lists it (a few long ones dropped)
    out += [gdn_case(32, 128, 1, 1), gdn_case(32, 16, 1, 1), gdn_case(32, 16, 1, 1, 1, True, True),
            gdn_case(32, 16, 1, 1, 1, False, True), gdn_case(16, 64, 1, 2), gdn_case(4, 64, 4, 1),
            gdn_case(4, 64, 4, 2), gdn_case(8, 32, 4, 2, 2), gdn_case(4, 64, 4, 2, 1, True),
            gdn_case(4, 64, 4, 1, 1, True), gdn_case(4, 64, 1, 2, 1, False, True),
            gdn_case(4, 32, 4, 1, 1, False, True), gdn_case(8, 32, 4, 2, 2, False, True),
            gdn_case(4, 16, 4, 2, 1, True, True), gdn_case(4, 64, 64, 1), gdn_case(4, 64, 127, 2),
            gdn_case(4, 64, 33, 1, 1, False, True), gdn_case(4, 16, 2, 1, k=2), gdn_case(4, 32, 4, 1, k=4),
            gdn_case(4, 64, 4, 2, 1, False, True, k=4), gdn_case(8, 32, 4, 2, 2, False, True, k=4),
            gdn_case(4, 32, 8, 1, k=3), gdn_case(4, 64, 16, 2, k=4)]
    return out


def perf_cases() -> list[Case]:
    return [
        ssm_conv_case((515, 3328, 1), (4, 3328)), ssm_conv_case((4, 3328, 1), (4, 3328)),
        ssm_scan_case(16, 1, 1536, 1, 128, 1),  # Mamba-130M's layer, a 128-token prompt
        ssm_scan_case(128, 64, 48, 1, 512, 1), ssm_scan_case(128, 64, 48, 1, 1, 1),
        linear_case(Op.RWKV_WKV6, 32, 64, 128, 4), linear_case(Op.RWKV_WKV7, 32, 64, 128, 4),
        linear_case(Op.GATED_LINEAR_ATTN, 32, 64, 128, 4),
        gdn_case(32, 128, 1, 1), gdn_case(16, 64, 1, 1), gdn_case(32, 128, 1, 1, 1, False, True),
        solve_tri_case((128, 128, 4, 2), (32, 128, 4, 2)),
    ]
