"""MUL_MAT: every float and quantised type for src0, F32/F16/BF16 src1, batch broadcast in ne[2] and ne[3],
permuted and strided srcs, transposed src1, sizes that are not multiples of blocks or work-group tiles; and MUL_MAT
followed by the ADD of a residual or a bias, and two MUL_MATs of one src1 followed by the GLU of both (which
backends may fuse into a mat-vec), with variants where they must not fuse."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import ALL_TYPES, BF16, F16, F32, FLOATS, QUANTS, T, unique

IDENTITY = (0, 1, 2, 3)
# (n, bs, nr) batch layouts, as ggml's test-backend-ops covers them
BATCH_LAYOUTS = (((1, 1), (1, 1)), ((1, 1), (2, 1)), ((1, 1), (1, 2)), ((3, 1), (1, 1)), ((3, 1), (2, 1)),
                 ((3, 2), (1, 1)), ((3, 2), (2, 1)), ((3, 2), (1, 2)), ((3, 2), (2, 2)))
BATCHES: tuple[tuple[int, tuple[int, int], tuple[int, int]], ...] = (
    *((n, bs, nr) for n in (1, 16) for bs, nr in BATCH_LAYOUTS),
    (4, (3, 2), (2, 2)),
)
PERMUTED: tuple[tuple[int, tuple[int, int, int, int]], ...] = (
    (1, (0, 2, 1, 3)), (1, (0, 1, 3, 2)), (1, (0, 3, 2, 1)), (4, (0, 3, 2, 1)),
    (8, (0, 2, 1, 3)), (8, (0, 1, 3, 2)), (8, (0, 3, 2, 1)),
    (16, (0, 2, 1, 3)), (16, (0, 1, 3, 2)), (16, (0, 3, 2, 1)),
)


def mul_mat_case(ta: GGMLType, tb: GGMLType, m: int, n: int, k: int, bs: Sequence[int] = (1, 1),
                 nr: Sequence[int] = (1, 1), per: Sequence[int] = IDENTITY, v: int = 0) -> Case:
    """src0 [k, m, bs0, bs1] x src1 [k, n, bs0*nr0, bs1*nr1]. per: both srcs laid out permuted in memory.
    v bits: 1 src0 rows strided (one extra block per row), 2 src1 rows strided, 4 src1 transposed."""
    params = fmt_params(type_a=ta, type_b=tb, m=m, n=n, k=k, bs=bs, nr=nr, per=per, v=v)

    def build(b: CaseBuilder) -> Tensor:
        ne_a = (k, m, bs[0], bs[1])
        ne_b = (k, n, bs[0] * nr[0], bs[1] * nr[1])
        if tuple(per) != IDENTITY:
            return ops.mul_mat(b.permuted(ta, ne_a, per), b.permuted(tb, ne_b, per))
        a = b.strided(ta, ne_a, pad=(ta.traits.blck_size, 0, 0, 0)) if v & 1 else b.input(ta, ne_a)
        if v & 4:
            src1 = b.permuted(tb, ne_b, (1, 0, 2, 3))
        elif v & 2:
            src1 = b.strided(tb, ne_b, pad=(3, 0, 0, 0))
        else:
            src1 = b.input(tb, ne_b)
        return ops.mul_mat(a, src1)

    return Case(Op.MUL_MAT, params, build)


ADDENDS = ("residual", "residual_first", "bias", "bias_rows", "kept")
"""What mul_mat_add_case adds: a tensor of the product's shape (as ADD's src1, or its src0 with the product as
src1), a bias broadcast over the columns (and batches), one broadcast over the rows; 'kept': a residual, the product
also an output."""


def mul_mat_add_case(ta: GGMLType, n: int, addend: str, m: int = 40, k: int = 256, batch: int = 1) -> Case:
    """ADD(MUL_MAT(src0 [k, m, batch], src1 [k, n, batch]), e) and its variants (ADDENDS)."""
    params = fmt_params(type_a=ta, type_b=F32, m=m, n=n, k=k, bs=(batch, 1), add=addend)

    def build(b: CaseBuilder) -> Tensor | list[Tensor]:
        y = ops.mul_mat(b.input(ta, (k, m, batch, 1)), b.input(F32, (k, n, batch, 1)))
        e_ne = {"bias": (m, 1, 1, 1), "bias_rows": (1, n, batch, 1)}.get(addend, (m, n, batch, 1))
        e = b.input(F32, e_ne)
        out = ops.add(e, y) if addend == "residual_first" else ops.add(y, e)
        return [y, out] if addend == "kept" else out

    return Case(Op.MUL_MAT, params, build)


GLU_VARIANTS = ("swiglu", "geglu", "swapped", "kept", "two_src1", "oai")
"""mul_mat_glu_case's GLUs of (gate, up): SWIGLU and GEGLU; SWIGLU swapped (act(up) * gate), with the gate product
also an output, with up of another src1; SWIGLU_OAI (parameters)."""


def mul_mat_glu_case(ta: GGMLType, n: int, variant: str, m: int = 40, k: int = 256) -> Case:
    """GLU(MUL_MAT(w_gate, x), MUL_MAT(w_up, x)), a feed-forward block's first half, and its variants."""
    params = fmt_params(type_a=ta, type_b=F32, m=m, n=n, k=k, glu=variant)

    def build(b: CaseBuilder) -> Tensor | list[Tensor]:
        x = b.input(F32, (k, n, 1, 1))
        gate = ops.mul_mat(b.input(ta, (k, m, 1, 1)), x)
        up = ops.mul_mat(b.input(ta, (k, m, 1, 1)), b.input(F32, (k, n, 1, 1)) if variant == "two_src1" else x)
        if variant == "geglu":
            return ops.geglu(gate, up)
        if variant == "oai":
            return ops.swiglu_oai(gate, up)
        out = ops.swiglu(gate, up, swapped=variant == "swapped")
        return [gate, out] if variant == "kept" else out

    return Case(Op.MUL_MAT, params, build)


def _specific() -> list[Case]:
    c = mul_mat_case
    out = [
        c(F16, F32, 64, 2, 128, (8, 1)), c(F16, F32, 83, 2, 128, (8, 1), (4, 1)),
        c(F16, F32, 64, 2, 64, (8, 1), (4, 1)), c(F16, F32, 83, 2, 64, (8, 1), (4, 1)),
        c(F16, F32, 64, 45, 128, (8, 1), (4, 1)), c(F16, F32, 128, 45, 64, (8, 1), (4, 1)),
        c(F16, F32, 257, 1, 193, (1, 1), (4, 1), (0, 2, 1, 3)), c(F16, F32, 257, 1, 67, (1, 1), (4, 1), (0, 2, 1, 3)),
        c(F32, F32, 64, 77, 77, (12, 1)), c(F32, F32, 32, 4, 96, (3, 2), v=4),
        c(F16, F16, 64, 32, 65), c(F16, F16, 64, 32, 80), c(F16, F32, 64, 32, 80), c(F32, F32, 64, 32, 80),
        c(F16, F16, 64, 32, 588), c(F16, F16, 64, 32, 80, (4, 1)), c(BF16, F32, 64, 32, 80),
        c(T.Q4_0, F32, 96, 64, 576), c(T.Q8_0, F32, 6, 128, 1024), c(T.Q4_0, F32, 1, 256, 1024),
    ]
    out += [c(F32, F32, 1, n, 2048) for n in (1, 7, 8, 9, 16, 128, 512)]
    out += [c(t, F32, 1, 64, 256) for t in ALL_TYPES]
    return out


def _strided_batches() -> list[Case]:
    """Rows longer than common tiles, odd by one, with batch broadcast; src0 permuted or with strided rows."""
    out: list[Case] = []
    for bs2, bs, nr, mo, ko, t in product((1, 3), (1, 2, 4), (1, 4), (0, 1), (0, 1), FLOATS):
        out.append(mul_mat_case(t, F32, 129 + mo, 1, 64 + ko, (bs, bs2), (nr, 1), (0, 2, 1, 3)))
        out.append(mul_mat_case(t, F32, 64 + mo, 1, 129 + ko, (bs, bs2), (nr, 1), v=1))
    return out


def eval_cases() -> list[Case]:
    out: list[Case] = []
    for ta, n in product(ALL_TYPES, range(1, 10)):
        out.append(mul_mat_case(ta, F32, 16, n, 256))
    for ta, tb in product(ALL_TYPES, (F32, F16)):
        ks = (256, 4) if ta.traits.blck_size == 1 else (256,)
        for k in ks:
            out.extend(mul_mat_case(ta, tb, 16, n, k, bs, nr) for n, bs, nr in BATCHES)
            out.extend(mul_mat_case(ta, tb, 16, n, k, (2, 3), (1, 1), per) for n, per in PERMUTED)
        out.extend(mul_mat_case(ta, tb, 16, n, 1024, (3, 2)) for n in (1, 8, 16))
        out.append(mul_mat_case(ta, tb, 16, 8, 256, (64, 1)))
    for ta in FLOATS:
        out.extend(mul_mat_case(ta, BF16, 16, n, 256, bs, nr) for n, bs, nr in BATCHES)
        out.extend(mul_mat_case(ta, BF16, 16, n, 256, (2, 3), (1, 1), per) for n, per in PERMUTED)
    for ta, v in product(ALL_TYPES, (1, 2, 3)):
        out.append(mul_mat_case(ta, F32, 16, 5, 256, (2, 1), (1, 1), v=v))
    for ta in FLOATS:
        out.append(mul_mat_case(ta, F32, 16, 7, 64, (2, 1), (1, 2), v=4))
    for ta, n, addend in product((F16, F32, T.Q4_0, T.Q8_0, T.Q4_K, T.Q6_K), (1, 3, 9), ADDENDS):
        out.append(mul_mat_add_case(ta, n, addend, batch=2 if n == 3 else 1))
    out.append(mul_mat_add_case(F16, 2, "residual", k=64))  # the short-row mat-vec
    for ta, n, variant in product((F16, T.Q4_0, T.Q4_K, T.Q6_K), (1, 3, 9), GLU_VARIANTS):
        out.append(mul_mat_glu_case(ta, n, variant))
    out.append(mul_mat_glu_case(F16, 2, "swiglu", k=64))
    return unique(out + _specific() + _strided_batches())


def perf_cases() -> list[Case]:
    out: list[Case] = []
    for ta, n in product((F16, F32, *QUANTS), (1, 512)):
        out.append(mul_mat_case(ta, F32, 4096, n, 4096))
    out.append(mul_mat_case(F16, F32, 128, 512, 128, (32, 1)))
    return out
