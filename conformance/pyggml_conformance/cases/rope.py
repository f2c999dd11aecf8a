"""ROPE: normal and NeoX modes, full and partial rotation (n_dims < head size), freq factors, YaRN (freq_scale,
ext_factor, attn_factor, beta_fast/slow, n_ctx_orig, freq_base), F32/F16, strided, permuted and offset views,
in place, batch dims."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from itertools import product
from typing import Any

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.ops.rope import ROPE_TYPE_NEOX, ROPE_TYPE_NORMAL, RopeParams
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import F16, F32, HALF, I32, unique
from pyggml_conformance.inputs import integers, uniform

NORMAL, NEOX = ROPE_TYPE_NORMAL, ROPE_TYPE_NEOX
MAX_POS = 4096
N_CTX_ORIG = 512
"""n_ctx_orig where a case does not choose it (ops.rope's default is 0)."""
SCALED = {"freq_scale": 1.4245, "ext_factor": 0.7465, "attn_factor": 1.4245}
"""The YaRN scaling the cases try besides ggml's defaults, for `rope_params(n_dims, mode, **SCALED)`."""


def rope_params(n_dims: int, mode: int, **scaling: Any) -> RopeParams:
    """The op's parameters: `scaling` (RopeParams' YaRN fields) over ggml's defaults, n_ctx_orig N_CTX_ORIG unless
    `scaling` says otherwise."""
    return RopeParams(n_dims, mode, **({"n_ctx_orig": N_CTX_ORIG} | scaling))


def rope_case(t: GGMLType, ne: Sequence[int], p: RopeParams, ff: bool = False, v: int = 0,
              inplace: bool = False) -> Case:
    """a [head_dim, n_head, n_tokens, batch] rotated by positions [n_tokens] in [0, 4096).
    v: 1 strided rows, 2 a view starting 8 elements into each row, 3 heads and tokens swapped in memory."""
    params = fmt_params(type=t, ne=ne, n_dims=p.n_dims, mode=p.mode, fs=p.freq_scale, ef=p.ext_factor,
                        af=p.attn_factor, n_ctx_orig=p.n_ctx_orig, base=p.freq_base, beta=(p.beta_fast, p.beta_slow),
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
        factors = b.input(F32, (p.n_dims // 2,), uniform(0.9, 1.1)) if ff else None
        return ops.rope(a, pos, freq_factors=factors, inplace=inplace, **asdict(p))

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
        shapes = SHAPES if (fs, ef, af) == (1.0, 0.0, 1.0) else FEW
        out += [rope_case(t, ne, rope_params(nd, mode, freq_scale=fs, ext_factor=ef, attn_factor=af), ff, v)
                for ne, nd, mode in shapes]
    for t, mode, ff in product(HALF, (NORMAL, NEOX), (False, True)):
        out += [rope_case(t, ne, rope_params(128, mode, **SCALED), ff, v, inplace=True)
                for ne, v in (((128, 32, 2, 1), 0), ((128, 32, 2, 1), 1), ((128, 32, 2, 3), 1))]
        out += [rope_case(t, (36, 16, 33, 1), rope_params(28, mode, **y), ff, v=2) for y in ({}, SCALED)]
        out.append(rope_case(t, (64, 8, 5, 1), rope_params(64, mode, **SCALED), ff, v=3))
        out.append(rope_case(t, (64, 8, 5, 1), rope_params(32, mode), ff, v=3))
    for mode, beta, base, n_ctx, ef in product((NORMAL, NEOX), ((32.0, 1.0), (16.0, 2.0)), (1e4, 5e5),
                                               (512, 4096), (0.7465, 1.0)):
        y = rope_params(64, mode, freq_scale=0.25, ext_factor=ef, attn_factor=1.2, n_ctx_orig=n_ctx,
                        freq_base=base, beta_fast=beta[0], beta_slow=beta[1])
        out.append(rope_case(F32, (64, 4, 7, 1), y))
    return unique(out)


def perf_cases() -> list[Case]:
    scaled = {"freq_scale": 0.25, "ext_factor": 1.0, "attn_factor": 1.0, "n_ctx_orig": 4096, "freq_base": 5e5}
    return [rope_case(t, (128, 32, 512, 1), rope_params(128, mode, **y)) for t in (F32, F16)
            for mode in (NORMAL, NEOX) for y in ({}, scaled)]
