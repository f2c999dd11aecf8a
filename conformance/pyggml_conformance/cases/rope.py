"""ROPE: normal and NeoX modes, full and partial rotation (n_dims < head size), freq factors, YaRN (freq_scale,
ext_factor, attn_factor, beta_fast/slow, n_ctx_orig, freq_base), F32/F16, strided, permuted and offset views,
in place, batch dims."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.ops.rope import ROPE_TYPE_NEOX, ROPE_TYPE_NORMAL
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import F16, F32, HALF, I32, unique
from pyggml_conformance.inputs import integers, uniform

NORMAL, NEOX = ROPE_TYPE_NORMAL, ROPE_TYPE_NEOX
MAX_POS = 4096


@dataclass(frozen=True)
class Yarn:
    freq_scale: float = 1.0
    ext_factor: float = 0.0
    attn_factor: float = 1.0
    n_ctx_orig: int = 512
    freq_base: float = 10000.0
    beta_fast: float = 32.0
    beta_slow: float = 1.0


def rope_case(t: GGMLType, ne: Sequence[int], n_dims: int, mode: int, yarn: Yarn | None = None, ff: bool = False,
              v: int = 0, inplace: bool = False) -> Case:
    """a [head_dim, n_head, n_tokens, batch] rotated by positions [n_tokens] in [0, 4096).
    v: 1 strided rows, 2 a view starting 8 elements into each row, 3 heads and tokens swapped in memory."""
    y = yarn if yarn is not None else Yarn()
    params = fmt_params(type=t, ne=ne, n_dims=n_dims, mode=mode, fs=y.freq_scale, ef=y.ext_factor,
                        af=y.attn_factor, n_ctx_orig=y.n_ctx_orig, base=y.freq_base, beta=(y.beta_fast, y.beta_slow),
                        ff=ff, v=v, inplace=inplace)

    def build(b: CaseBuilder) -> Tensor:
        if v == 1:
            a = b.strided(t, ne, pad=(4, 1, 0, 0))
        elif v == 2:
            a = b.strided(t, ne, pad=(0, 0, 0, 0), offset=8)
        elif v == 3:
            a = b.permuted(t, ne, (0, 2, 1, 3))
        else:
            a = b.input(t, ne)
        pos = b.input(I32, (ne[2],), integers(0, MAX_POS))
        factors = b.input(F32, (n_dims // 2,), uniform(0.9, 1.1)) if ff else None
        return ops.rope(a, pos, n_dims, mode, freq_factors=factors, n_ctx_orig=y.n_ctx_orig,
                        freq_base=y.freq_base, freq_scale=y.freq_scale, ext_factor=y.ext_factor,
                        attn_factor=y.attn_factor, beta_fast=y.beta_fast, beta_slow=y.beta_slow, inplace=inplace)

    return Case(Op.ROPE, params, build)


SHAPES: tuple[tuple[tuple[int, int, int, int], int, int], ...] = (
    ((128, 32, 2, 1), 128, NORMAL),  # llama 7B
    ((128, 40, 2, 1), 128, NORMAL),
    ((128, 52, 2, 1), 128, NORMAL),
    ((128, 64, 2, 1), 128, NORMAL),
    ((16, 16, 512, 1), 16, NORMAL),
    ((64, 1, 2, 1), 64, NEOX),
    ((64, 71, 2, 1), 64, NEOX),
    ((64, 8, 2, 1), 64, NEOX),
    ((80, 32, 2, 1), 20, NORMAL),
    ((80, 32, 2, 1), 32, NORMAL),
    ((80, 32, 4, 1), 32, NORMAL),
    ((80, 32, 2, 1), 20, NEOX),
    ((80, 32, 2, 1), 32, NEOX),
    ((80, 32, 4, 1), 32, NEOX),
    ((16, 16, 512, 1), 16, NEOX),
    ((64, 128, 2, 1), 64, NEOX),
    ((64, 4, 6, 3), 64, NORMAL),
)
FEW = (SHAPES[0], SHAPES[8], SHAPES[11], SHAPES[15], SHAPES[16])
FS, EF, AF = (1.0, 1.4245), (0.0, 0.7465), (1.0, 1.4245)


def eval_cases() -> list[Case]:
    out: list[Case] = []
    for fs, ef, af, t, ff, v in product(FS, EF, AF, HALF, (False, True), (0, 1)):
        y = Yarn(fs, ef, af)
        shapes = SHAPES if (fs, ef, af) == (1.0, 0.0, 1.0) else FEW
        out += [rope_case(t, ne, nd, mode, y, ff, v) for ne, nd, mode in shapes]
    yarn = Yarn(1.4245, 0.7465, 1.4245)
    for t, mode, ff in product(HALF, (NORMAL, NEOX), (False, True)):
        out += [rope_case(t, ne, 128, mode, yarn, ff, v, inplace=True)
                for ne, v in (((128, 32, 2, 1), 0), ((128, 32, 2, 1), 1), ((128, 32, 2, 3), 1))]
        out += [rope_case(t, (36, 16, 33, 1), 28, mode, y, ff, v=2) for y in (Yarn(), yarn)]
        out.append(rope_case(t, (64, 8, 5, 1), 64, mode, yarn, ff, v=3))
        out.append(rope_case(t, (64, 8, 5, 1), 32, mode, Yarn(), ff, v=3))
    for mode, beta, base, n_ctx, ef in product((NORMAL, NEOX), ((32.0, 1.0), (16.0, 2.0)), (1e4, 5e5),
                                               (512, 4096), (0.7465, 1.0)):
        y = Yarn(0.25, ef, 1.2, n_ctx, base, beta[0], beta[1])
        out.append(rope_case(F32, (64, 4, 7, 1), 64, mode, y))
    return unique(out)


def perf_cases() -> list[Case]:
    yarn = Yarn(0.25, 1.0, 1.0, 4096, 5e5)
    return [rope_case(t, (128, 32, 512, 1), 128, mode, y) for t in (F32, F16) for mode in (NORMAL, NEOX)
            for y in (Yarn(), yarn)]
