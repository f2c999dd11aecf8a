"""The gradients of IM2COL and POOL_2D checked as ordinary ops: IM2COL_BACK over the IM2COL grid of test-backend-ops
(2-D stride / padding / dilation, 1-D with whisper's shapes, F32 / F16 / BF16 kernels, whose shape alone is read,
a strided gradient, strides wider than the kernel so some inputs get nothing) and POOL_2D_BACK over the POOL_2D
grid (avg and max, kernel, stride and padding, F32 and F16 pool input, strided gradient and input, and MAX windows
with ties, -inf and values at -FLT_MAX, where ggml's scan decides which element gets the gradient). Thresholds are
ggml's default 1e-7: each output is a short float32 sum."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

import numpy as np

from pyggml import ops
from pyggml.ops import PoolOp
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import BF16, F16, F32, unique
from pyggml_conformance.inputs import Array, Init

Ne = Sequence[int]
FLT_MAX = float(np.finfo(np.float32).max)


def _conv_len(n: int, k: int, s: int, p: int, d: int) -> int:
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _pool_len(n: int, k: int, s: int, p: int) -> int:
    return (n + 2 * p - k) // s + 1


def im2col_back_case(tk: GGMLType, ne_in: Ne, ne_k: Ne, s0: int, s1: int, p0: int, p1: int, d0: int, d1: int,
                     is_2d: bool, v: int = 0) -> Case:
    """The gradient of IM2COL of an input ne_in with kernel ne_k; v 1: the gradient is a strided view."""
    ow = _conv_len(ne_in[0], ne_k[0], s0, p0, d0)
    if is_2d:
        ne_g = (ne_k[0] * ne_k[1] * ne_k[2], ow, _conv_len(ne_in[1], ne_k[1], s1, p1, d1), ne_in[3])
    else:
        ne_g = (ne_k[0] * ne_k[1], ow, ne_in[2], 1)
    params = fmt_params(type_kernel=tk, ne_input=ne_in, ne_kernel=ne_k, s0=s0, s1=s1, p0=p0, p1=p1, d0=d0, d1=d1,
                        is_2D=is_2d, v=v)

    def build(b: CaseBuilder) -> Tensor:
        g = b.strided(F32, ne_g, pad=(2, 1, 1, 0)) if v else b.input(F32, ne_g)
        return ops.im2col_back(g, b.input(tk, ne_k), ne_in, s0, s1, p0, p1, d0, d1, is_2d)

    return Case(Op.IM2COL_BACK, params, build)


def _max_edges(rng: np.random.Generator, t: Tensor) -> Array:
    """Values on a coarse grid (ties in most windows), with -inf and -FLT_MAX (the scan's start) sprinkled in."""
    shape = tuple(reversed(t.ne))
    x = np.round(rng.uniform(-2.0, 2.0, shape) * 2.0) / 2.0
    pick = rng.random(shape)
    x[pick < 0.1] = -np.inf
    x[(pick >= 0.1) & (pick < 0.2)] = -FLT_MAX if t.type == F32 else -np.inf  # (F16 holds no -FLT_MAX)
    out: Array = x
    return out


def pool_2d_back_case(op: PoolOp, t: GGMLType, ne: Ne, k0: int, k1: int, s0: int, s1: int, p0: int, p1: int,
                      v: int = 0, edges: bool = False) -> Case:
    """The gradient of POOL_2D of an input ne of type t; v 1: gradient and input strided; edges: ties, -inf and
    -FLT_MAX in the input (_max_edges)."""
    ne_g = (_pool_len(ne[0], k0, s0, p0), _pool_len(ne[1], k1, s1, p1), ne[2], ne[3])
    params = fmt_params(pool_type=op, type_input=t, ne_input=ne, k0=k0, k1=k1, s0=s0, s1=s1, p0=p0, p1=p1, v=v,
                        edges=int(edges))
    init: Init | None = _max_edges if edges else None

    def build(b: CaseBuilder) -> Tensor:
        if v:
            g, x = b.strided(F32, ne_g, pad=(3, 1, 1, 0)), b.strided(t, ne, pad=(2, 1, 1, 0), init=init)
        else:
            g, x = b.input(F32, ne_g), b.input(t, ne, init)
        return ops.pool_2d_back(g, x, op, k0, k1, s0, s1, p0, p1)

    return Case(Op.POOL_2D_BACK, params, build)


def _im2col_back_cases() -> list[Case]:
    out: list[Case] = []
    for tk in (F32, F16, BF16):
        out.append(im2col_back_case(tk, (10, 10, 3, 1), (3, 3, 3, 1), 1, 1, 1, 1, 1, 1, True))
    for s0, s1, p0, p1, d0, d1 in product((1, 3), (1, 3), (0, 3), (0, 3), (1, 3), (1, 3)):
        out.append(im2col_back_case(F16, (20, 20, 2, 2), (3, 3, 2, 2), s0, s1, p0, p1, d0, d1, True))
    for s0, p0, d0 in product((1, 3), (0, 3), (1, 3)):
        out.append(im2col_back_case(F32, (20, 2, 2, 1), (3, 2, 2, 1), s0, 0, p0, 0, d0, 0, False))
    out.append(im2col_back_case(F32, (300, 16, 1, 1), (3, 16, 64, 1), 1, 0, 1, 0, 1, 0, False))  # whisper
    out.append(im2col_back_case(F16, (300, 24, 2, 1), (3, 24, 24, 1), 2, 0, 1, 0, 1, 0, False))
    out.append(im2col_back_case(F16, (13, 11, 3, 2), (2, 3, 3, 4), 5, 4, 0, 1, 1, 1, True))  # stride > kernel
    out.append(im2col_back_case(F16, (5, 5, 1, 32), (3, 4, 1, 32), 1, 1, 0, 0, 1, 1, True))
    out.append(im2col_back_case(F32, (2, 2, 96, 73), (2, 2, 96, 8), 1, 1, 0, 0, 1, 1, True))
    out.append(im2col_back_case(F16, (11, 9, 3, 2), (3, 2, 3, 4), 2, 1, 1, 2, 2, 1, True, v=1))
    out.append(im2col_back_case(F16, (30, 5, 2, 1), (4, 5, 3, 1), 2, 0, 2, 0, 1, 0, False, v=1))
    return out


def _pool_2d_back_cases() -> list[Case]:
    out: list[Case] = []
    for op, k0, k1, s0, s1, p0, p1 in product(PoolOp, (1, 3), (1, 3), (1, 2), (1, 2), (0, 1), (0, 1)):
        out.append(pool_2d_back_case(op, F32, (10, 10, 3, 1), k0, k1, s0, s1, p0, p1))
    for op, t in product(PoolOp, (F32, F16)):
        out.append(pool_2d_back_case(op, t, (17, 13, 4, 2), 3, 2, 2, 1, 1, 1, v=1))
        out.append(pool_2d_back_case(op, t, (9, 7, 3, 2), 2, 2, 2, 2, 0, 0))
        out.append(pool_2d_back_case(op, t, (12, 11, 5, 3), 4, 3, 1, 2, 2, 1, edges=True))
        out.append(pool_2d_back_case(op, t, (8, 8, 2, 1), 3, 3, 3, 3, 1, 1, v=1, edges=True))
    return out


def eval_cases() -> list[Case]:
    return unique([*_im2col_back_cases(), *_pool_2d_back_cases()])


def perf_cases() -> list[Case]:
    return [im2col_back_case(F16, (64, 64, 64, 1), (3, 3, 64, 64), 1, 1, 1, 1, 1, 1, True),
            pool_2d_back_case(PoolOp.MAX, F32, (112, 112, 64, 1), 3, 3, 2, 2, 1, 1)]
