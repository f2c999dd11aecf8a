"""The gradient mode's cases: every op with a gradient rule, on small shapes (each parameter element costs two to
four reference forward passes), with broadcasts, views and non-contiguous sources where the rule has a branch
for them. Inputs that would put a kink (ABS, RELU, LEAKY_RELU, CLAMP) or a pole (LOG, SQRT, DIV) within eps are
drawn away from it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from itertools import product

import numpy as np

from pyggml import ops
from pyggml.ops import PoolOp
from pyggml.ops.base import Op
from pyggml.ops.elementwise import UnaryOp
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import CaseBuilder, fmt_params
from pyggml_conformance.grad import MAX_MAA, GradCase
from pyggml_conformance.inputs import Array, Init, away_from_zero, uniform

F32 = GGMLType.F32
Build = Callable[[CaseBuilder], Tensor]


def _p(b: CaseBuilder, ne: tuple[int, ...], init: Init | None = None) -> Tensor:
    """A parameter input."""
    return b.input(F32, ne, init).set_param()


def _labels() -> Init:
    """Rows of a probability distribution (cross-entropy targets)."""

    def init(rng: np.random.Generator, t: Tensor) -> Array:
        x = rng.uniform(0.0, 1.0, tuple(reversed(t.ne)))
        out: Array = x / x.sum(axis=-1, keepdims=True)
        return out

    return init


def _off_bounds(bound: float, gap: float) -> Init:
    """Values at least `gap` away from -bound, 0 and +bound (CLAMP's kinks), in [-2 bound, 2 bound]."""

    def init(rng: np.random.Generator, t: Tensor) -> Array:
        shape = tuple(reversed(t.ne))
        inside, outside = rng.uniform(gap, bound - gap, shape), rng.uniform(bound + gap, 2 * bound, shape)
        mag = np.where(rng.random(shape) < 0.5, inside, outside)
        out: Array = mag * rng.choice(np.array([-1.0, 1.0]), shape)
        return out

    return init


def _gelu_x() -> Init:
    """Values in [-2, 2] at least 0.2 away from -0.75, near where the GELUs' slopes cross zero: there the error
    measure, relative to |numeric + analytic|, would weigh a rounding-level difference like a wrong slope."""

    def init(rng: np.random.Generator, t: Tensor) -> Array:
        shape = tuple(reversed(t.ne))
        out: Array = np.where(rng.random(shape) < 0.3, rng.uniform(-2.0, -0.95, shape), rng.uniform(-0.55, 2.0, shape))
        return out

    return init


def _ids(n_rows: int) -> Init:
    def init(rng: np.random.Generator, t: Tensor) -> Array:
        out: Array = rng.integers(0, n_rows, tuple(reversed(t.ne)))
        return out

    return init


def _case(op: Op, params: str, build: Build, sub: str | None = None, max_err: float = MAX_MAA) -> GradCase:
    return GradCase(op, params, build, sub=sub, max_err=max_err)


def _apply(f: Callable[[Tensor], Tensor], ne: tuple[int, ...], init: Init | None = None) -> Build:
    """f of one parameter of shape ne."""

    def build(b: CaseBuilder) -> Tensor:
        return f(_p(b, ne, init))

    return build


def _apply2(f: Callable[[Tensor, Tensor], Tensor], ne_a: tuple[int, ...], ne_b: tuple[int, ...],
            init_b: Init | None = None) -> Build:
    """f of two parameters."""

    def build(b: CaseBuilder) -> Tensor:
        return f(_p(b, ne_a), _p(b, ne_b, init_b))

    return build


def _flash_attn(mask: int = 0, gqa: int = 1, softcap: float = 0.0, sinks: int = 0, max_bias: float = 0.0) -> Build:
    """q [4, 3, 2 heads], k [4, 5, 2 / gqa kv heads], v [3, 5, same], all parameters; mask and sinks constants."""

    def build(b: CaseBuilder) -> Tensor:
        q, k, v = _p(b, (4, 3, 2)), _p(b, (4, 5, 2 // gqa)), _p(b, (3, 5, 2 // gqa))
        m = b.input(F32, (5, 4)) if mask else None
        s = b.input(F32, (2,)) if sinks else None
        return ops.flash_attn_ext(q, k, v, m, scale=0.6, max_bias=max_bias, logit_softcap=softcap, sinks=s)

    return build


def _permuted(t: Tensor, axes: tuple[int, int, int, int]) -> Tensor:
    return ops.cont(ops.permute(t, *axes))


def _rope(mode: int) -> Build:
    def build(b: CaseBuilder) -> Tensor:
        return ops.rope(_p(b, (8, 2, 3)), b.input(GGMLType.I32, (3,), _ids(50)), 8, mode)

    return build


def _binary() -> list[GradCase]:
    out: list[GradCase] = []
    fns = {Op.ADD: ops.add, Op.SUB: ops.sub, Op.MUL: ops.mul, Op.DIV: ops.div}
    for op, fn in fns.items():
        for ne_a, ne_b in (((4, 3, 2, 1), (4, 3, 2, 1)), ((4, 3, 2, 1), (4, 1, 1, 1)), ((4, 3, 2, 2), (1, 3, 1, 2))):
            init_b = away_from_zero(0.5, 2.0) if op is Op.DIV else None

            out.append(_case(op, fmt_params(ne_a=list(ne_a), ne_b=list(ne_b)), _apply2(fn, ne_a, ne_b, init_b)))
    out.append(_case(Op.ADD1, fmt_params(ne=[4, 3]), lambda b: ops.add1(_p(b, (4, 3)), _p(b, (1,)))))
    return out


def _math() -> list[GradCase]:
    pos = uniform(0.5, 2.0)
    ne = (4, 3, 2, 1)
    one = {
        Op.SQR: (ops.sqr, None), Op.SQRT: (ops.sqrt, pos), Op.LOG: (ops.log, pos), Op.SIN: (ops.sin, None),
        Op.COS: (ops.cos, None), Op.SUM: (ops.sum, None), Op.SUM_ROWS: (ops.sum_rows, None),
        Op.MEAN: (ops.mean, None), Op.DUP: (ops.dup, None), Op.CONT: (ops.cont, None),
    }
    out = [_case(op, fmt_params(ne=list(ne)), _apply(f, ne, i)) for op, (f, i) in one.items()]
    out.append(_case(Op.SCALE, fmt_params(ne=list(ne), s=1.5), lambda b: ops.scale(_p(b, ne), 1.5, 0.25)))
    kink = away_from_zero(0.2, 1.5)
    out.append(_case(Op.LEAKY_RELU, fmt_params(ne=list(ne), slope=0.1),
                     _apply(partial(ops.leaky_relu, negative_slope=0.1), ne, kink)))
    out.append(_case(Op.CLAMP, fmt_params(ne=list(ne), min=-0.7, max=0.7),
                     _apply(partial(ops.clamp, min=-0.7, max=0.7), ne, _off_bounds(0.7, 0.15))))
    for eps in (1e-5, 1e-1):
        out.append(_case(Op.RMS_NORM, fmt_params(ne=[6, 3], eps=eps), _apply(partial(ops.rms_norm, eps=eps), (6, 3))))
        out.append(_case(Op.NORM, fmt_params(ne=[6, 3], eps=eps), _apply(partial(ops.norm, eps=eps), (6, 3))))
    return out


def _unary() -> list[GradCase]:
    kink = away_from_zero(0.2, 1.5)
    table: dict[UnaryOp, tuple[Callable[[Tensor], Tensor], Init | None]] = {
        UnaryOp.ABS: (ops.abs_, kink), UnaryOp.NEG: (ops.neg, None), UnaryOp.RELU: (ops.relu, kink),
        UnaryOp.SILU: (ops.silu, None), UnaryOp.EXP: (ops.exp, None), UnaryOp.EXPM1: (ops.expm1, None),
        UnaryOp.SOFTPLUS: (ops.softplus, None), UnaryOp.TANH: (ops.tanh, None), UnaryOp.SIGMOID: (ops.sigmoid, None),
        UnaryOp.SGN: (ops.sgn, kink), UnaryOp.STEP: (ops.step, kink), UnaryOp.GELU: (ops.gelu, _gelu_x()),
        UnaryOp.GELU_QUICK: (ops.gelu_quick, _gelu_x()),
    }
    out: list[GradCase] = []
    loose = {UnaryOp.GELU: 5e-4, UnaryOp.GELU_QUICK: 5e-4}
    """The GELUs' outputs grow with x and curve at every scale: the float32 loss's rounding (small eps) or the
    four-point formula's remainder (large eps) puts the numeric slope of some seeds' small elements ~1e-4 off;
    a wrong rule is off by O(1)."""
    for u, (f, init) in table.items():
        for ne in ((5, 3), (4, 3, 2)):
            out.append(_case(Op.UNARY, fmt_params(op=u.name.lower(), ne=list(ne)), _apply(f, ne, init), sub=u.name,
                             max_err=loose.get(u, MAX_MAA)))
    for swapped in (False, True):
        out.append(_case(Op.GLU, fmt_params(op="swiglu", ne=[5, 3], swapped=swapped),
                         _apply2(partial(ops.swiglu, swapped=swapped), (5, 3), (5, 3)), sub="SWIGLU"))
        out.append(_case(Op.GLU, fmt_params(op="swiglu", ne=[10, 3, 2], swapped=swapped, fused=1),
                         _apply(partial(ops.swiglu, swapped=swapped), (10, 3, 2)), sub="SWIGLU"))
    return out


def _matmul() -> list[GradCase]:
    out: list[GradCase] = []
    for na, nb in (((4, 3), (4, 5)), ((6, 2, 2), (6, 3, 2)), ((4, 3, 1), (4, 2, 3)), ((4, 3, 2), (4, 2, 4))):
        out.append(_case(Op.MUL_MAT, fmt_params(ne_a=list(na), ne_b=list(nb)),
                         _apply2(ops.mul_mat, na, nb)))
    for na, nb in (((4, 3), (5, 3)), ((3, 2, 2), (4, 2, 2))):
        out.append(_case(Op.OUT_PROD, fmt_params(ne_a=list(na), ne_b=list(nb)),
                         _apply2(ops.out_prod, na, nb)))
    for ne_as, ne_b, n_used in (((4, 3, 5), (4, 1, 6), 2), ((4, 3, 5), (4, 2, 6), 2), ((4, 3, 5), (4, 2, 3), 4)):
        out.append(_case(Op.MUL_MAT_ID, fmt_params(ne_as=list(ne_as), ne_b=list(ne_b), n_used=n_used),
                         _mul_mat_id(ne_as, ne_b, n_used)))
    out.append(_case(Op.MUL_MAT_ID, fmt_params(ne_as=[4, 3, 5], ne_b=[4, 1, 6], n_used=2, ids_view=1),
                     _mul_mat_id((4, 3, 5), (4, 1, 6), 2, view=True)))
    return out


def _mul_mat_id(ne_as: tuple[int, int, int], ne_b: tuple[int, int, int], n_used: int, view: bool = False) -> Build:
    """Experts and src1 parameters, expert ids a constant (repeats within a token allowed: the rule does not
    assume them distinct); with `view`, the ids are the first n_used rows of a taller tensor, as a model's top-k
    view of ARGSORT is (non-contiguous)."""

    def build(b: CaseBuilder) -> Tensor:
        if view:
            full = b.input(GGMLType.I32, (ne_as[2], ne_b[2]), _ids(ne_as[2]))
            ids = ops.view(full, (n_used, ne_b[2]), (full.nb[1],))
        else:
            ids = b.input(GGMLType.I32, (n_used, ne_b[2]), _ids(ne_as[2]))
        return ops.mul_mat_id(_p(b, ne_as), _p(b, ne_b), ids)

    return build


def _distinct_ids(n_rows: int) -> Init:
    """Row ids without repeats along dim 0 (SET_ROWS' gradient assumes each row written once)."""

    def init(rng: np.random.Generator, t: Tensor) -> Array:
        shape = tuple(reversed(t.ne))
        flat = [rng.permutation(n_rows)[: shape[-1]] for _ in range(int(np.prod(shape[:-1])))]
        out: Array = np.array(flat).reshape(shape)
        return out

    return init


def _set_rows(ne_a: tuple[int, ...], n: int) -> Build:
    def build(b: CaseBuilder) -> Tensor:
        ids = b.input(GGMLType.I32, (n, *ne_a[2:]), _distinct_ids(ne_a[1]))
        return ops.set_rows(_p(b, ne_a), _p(b, (ne_a[0], n, *ne_a[2:])), ids)

    return build


def _layout() -> list[GradCase]:
    out: list[GradCase] = []
    out.append(_case(Op.REPEAT, fmt_params(ne=[2, 1, 2], to=[4, 3, 2]),
                     lambda b: ops.repeat(_p(b, (2, 1, 2)), b.input(F32, (4, 3, 2)))))
    out.append(_case(Op.REPEAT_BACK, fmt_params(ne=[4, 3, 2], to=[2, 1, 2]),
                     lambda b: ops.repeat_back(_p(b, (4, 3, 2)), b.input(F32, (2, 1, 2)))))
    for dim in range(4):
        na = [3, 2, 2, 1]
        nb = list(na)
        nb[dim] = 2
        out.append(_case(Op.CONCAT, fmt_params(ne_a=na, ne_b=nb, dim=dim),
                         _apply2(partial(ops.concat, dim=dim), tuple(na), tuple(nb))))
    out.append(_case(Op.RESHAPE, fmt_params(ne=[6, 2], to=[4, 3]), lambda b: ops.reshape(_p(b, (6, 2)), 4, 3)))
    out.append(_case(Op.PAD, fmt_params(ne=[3, 2, 2], lp=[1, 0, 1, 0], rp=[2, 1, 0, 0]),
                     _apply(partial(ops.pad_ext, lp=(1, 0, 1, 0), rp=(2, 1, 0, 0)), (3, 2, 2))))
    out.append(_case(Op.TRANSPOSE, fmt_params(ne=[4, 3]), lambda b: ops.cont(ops.transpose(_p(b, (4, 3))))))
    for perm in ((1, 0, 2, 3), (2, 0, 1, 3), (0, 2, 3, 1)):
        out.append(_case(Op.PERMUTE, fmt_params(ne=[3, 2, 4, 2], axes=list(perm)),
                         _apply(partial(_permuted, axes=perm), (3, 2, 4, 2))))
    out.append(_case(Op.VIEW, fmt_params(ne=[5, 4], view=[3, 2], offset=1),
                     lambda b: ops.cont(ops.view(_p(b, (5, 4)), (3, 2), (20,), 4))))
    out.append(_case(Op.CPY, fmt_params(ne=[4, 3]),
                     lambda b: ops.cpy(_p(b, (4, 3)), b.input(F32, (3, 4)))))
    out.append(_case(Op.SET, fmt_params(ne_a=[5, 4], ne_b=[2, 2], offset=4),
                     lambda b: ops.set_(_p(b, (5, 4)), _p(b, (2, 2)), 20, 40, 40, 4)))
    out.append(_case(Op.ACC, fmt_params(ne_a=[5, 4], ne_b=[2, 2], offset=8),
                     lambda b: ops.acc(_p(b, (5, 4)), _p(b, (2, 2)), 20, 40, 40, 8)))
    out.append(_case(Op.GET_ROWS, fmt_params(ne=[4, 5], n=6),
                     lambda b: ops.get_rows(_p(b, (4, 5)), b.input(GGMLType.I32, (6,), _ids(5)))))
    for ne_a, n in (((5, 7), 3), ((4, 6, 2), 3)):
        out.append(_case(Op.SET_ROWS, fmt_params(ne=list(ne_a), n=n), _set_rows(ne_a, n)))
    return out


def _attention() -> list[GradCase]:
    out: list[GradCase] = []
    for scale in (1.0, 0.5):
        out.append(_case(Op.SOFT_MAX, fmt_params(ne=[5, 3, 2], scale=scale),
                         _apply(partial(ops.soft_max, scale=scale), (5, 3, 2))))
    out.append(_case(Op.SOFT_MAX, fmt_params(ne=[5, 3], mask=1),
                     lambda b: ops.soft_max(_p(b, (5, 3)), b.input(F32, (5, 3)), scale=0.7)))
    out.append(_case(Op.SOFT_MAX, fmt_params(ne=[5, 3, 4], mask=1, max_bias=8.0),
                     lambda b: ops.soft_max(_p(b, (5, 3, 4)), b.input(F32, (5, 3)), scale=0.5, max_bias=8.0)))
    out.append(_case(Op.SOFT_MAX, fmt_params(ne=[5, 3, 2], sinks=1),
                     lambda b: ops.soft_max(_p(b, (5, 3, 2)), sinks=b.input(F32, (2,)))))
    for kw in ({}, {"mask": 1}, {"gqa": 2}, {"softcap": 2.0}, {"sinks": 1, "mask": 1}, {"max_bias": 8.0, "mask": 1}):
        out.append(_case(Op.FLASH_ATTN_EXT, fmt_params(d=4, dv=3, n_q=3, n_kv=5, heads=2, **kw), _flash_attn(**kw)))
    out.append(_case(Op.DIAG_MASK_INF, fmt_params(ne=[4, 4, 2], n_past=1),
                     lambda b: ops.soft_max(ops.diag_mask_inf(_p(b, (4, 4, 2)), 1))))
    out.append(_case(Op.DIAG_MASK_ZERO, fmt_params(ne=[4, 4, 2], n_past=0),
                     lambda b: ops.diag_mask_zero(_p(b, (4, 4, 2)), 0)))
    for mode in (ops.ROPE_TYPE_NORMAL, ops.ROPE_TYPE_NEOX):
        out.append(_case(Op.ROPE, fmt_params(ne=[8, 2, 3], mode=mode),
                         _rope(mode),
                         max_err=1e-3))
    out.append(_case(Op.CROSS_ENTROPY_LOSS, fmt_params(ne=[5, 4]),
                     lambda b: ops.cross_entropy_loss(_p(b, (5, 4)), b.input(F32, (5, 4), _labels()))))
    return out


def _spaced() -> Init:
    """Distinct values 0.25 apart in random order: moving one by eps never changes which one a max pool picks."""

    def init(rng: np.random.Generator, t: Tensor) -> Array:
        n = t.nelements()
        out: Array = ((rng.permutation(n) - n / 2) * 0.25).reshape(tuple(reversed(t.ne)))
        return out

    return init


def _conv() -> list[GradCase]:
    """IM2COL (2-D and 1-D, stride, padding, dilation), POOL_2D (avg, max) and POOL_1D through their backward ops,
    and ggml's composite conv_2d / conv_1d (IM2COL with F16 patches, MUL_MAT, layout ops) with kernel and input
    parameters. The composites' forward rounds the patches to F16, which the finite differences of the input see
    (the backward is that of the unrounded function): the loss is linear in each element, so a step of 1 (exact for
    any step) shrinks the rounding's share of the quotient, and the threshold is 5e-4 (the rounding alone gives
    ~1e-4)."""
    def im2col(ne: tuple[int, ...], nk: tuple[int, ...], w: tuple[int, ...], is_2d: bool) -> Build:
        return lambda b: ops.im2col(b.input(F32, nk), _p(b, ne), w[0], w[1], w[2], w[3], w[4], w[5], is_2d, F32)

    out: list[GradCase] = []
    for ne, nk, w, is_2d in (((6, 5, 2, 1), (3, 2, 2, 1), (1, 1, 1, 0, 1, 1), True),
                             ((7, 6, 2, 2), (2, 3, 2, 1), (2, 1, 1, 2, 2, 1), True),
                             ((9, 2, 2, 1), (3, 2, 1, 1), (2, 0, 1, 0, 2, 0), False)):
        out.append(_case(Op.IM2COL, fmt_params(ne=list(ne), ne_k=list(nk), s=list(w[0:2]), p=list(w[2:4]),
                                               d=list(w[4:6]), is_2D=is_2d), im2col(ne, nk, w, is_2d)))
    for pool, (k0, k1, s0, s1, p0, p1) in product(PoolOp, ((3, 3, 1, 1, 1, 1), (2, 3, 2, 1, 0, 1), (3, 2, 3, 2, 1, 0))):
        out.append(_case(Op.POOL_2D, fmt_params(op=pool.name.lower(), ne=[7, 6, 2], k=[k0, k1], s=[s0, s1],
                                                p=[p0, p1]),
                         _apply(partial(ops.pool_2d, op=pool, k0=k0, k1=k1, s0=s0, s1=s1, p0=p0, p1=p1), (7, 6, 2),
                                _spaced() if pool is PoolOp.MAX else None)))
    for pool, k0, s0, p0 in ((PoolOp.MAX, 3, 1, 1), (PoolOp.MAX, 2, 2, 0), (PoolOp.AVG, 3, 2, 0)):
        out.append(_case(Op.POOL_1D, fmt_params(op=pool.name.lower(), ne=[9, 3, 2], k=k0, s=s0, p=p0),
                         _apply(partial(ops.pool_1d, op=pool, k0=k0, s0=s0, p0=p0), (9, 3, 2),
                                _spaced() if pool is PoolOp.MAX else None)))
    out.append(_case(Op.IM2COL, fmt_params(net="conv_2d", ne=[6, 5, 2, 2], ne_k=[3, 3, 2, 3], s=1, p=1, d=1),
                     _apply2(lambda k, x: ops.conv_2d(k, x, 1, 1, 1, 1, 1, 1), (3, 3, 2, 3), (6, 5, 2, 2))))
    out.append(_case(Op.IM2COL, fmt_params(net="conv_2d", ne=[7, 6, 2, 1], ne_k=[2, 3, 2, 2], s=2, p=1, d=2),
                     _apply2(lambda k, x: ops.conv_2d(k, x, 2, 2, 1, 1, 2, 2), (2, 3, 2, 2), (7, 6, 2, 1))))
    out.append(_case(Op.IM2COL, fmt_params(net="conv_1d", ne=[9, 3], ne_k=[3, 3, 2], s=2, p=1, d=1),
                     _apply2(lambda k, x: ops.conv_1d(k, x, 2, 1, 1), (3, 3, 2), (9, 3, 1))))
    return [*out[:-3], *(dataclasses.replace(c, eps=1.0, max_err=5e-4) for c in out[-3:])]


def grad_cases() -> list[GradCase]:
    """Every gradient case, in a stable order."""
    return [*_binary(), *_math(), *_unary(), *_matmul(), *_layout(), *_attention(), *_conv(), mlp_case()]


def mlp_case() -> GradCase:
    """A whole small network (matmul, bias broadcast, SILU, cross-entropy): the rules composed."""

    def build(b: CaseBuilder) -> Tensor:
        x = b.input(F32, (4, 6))
        h = ops.silu(ops.add(ops.mul_mat(_p(b, (4, 5)), x), _p(b, (5,))))
        logits = ops.mul_mat(_p(b, (5, 3)), h)
        return ops.cross_entropy_loss(logits, b.input(F32, (3, 6), _labels()))

    return _case(Op.CROSS_ENTROPY_LOSS, fmt_params(net="mlp", ne=[4, 5, 3]), build)
