"""Training ops checked as ordinary ops (test-backend-ops' grids for them): REPEAT_BACK (each dim tiled, strided
gradient), SILU_BACK (F32/F16, strided), RMS_NORM_BACK (ggml's eps sweep, long rows), GET_ROWS_BACK (repeated ids,
F16 gradient, ids a view, more rows than a GPU grid's y limit), SOFT_MAX_BACK (scale, odd sizes, batches; the
gradient y a real softmax output), ROPE_BACK (modes, partial rotation, YaRN, freq factors, F16, strided),
CROSS_ENTROPY_LOSS and its BACK (labels normalised by a softmax as ggml's test does, one 30000-class row), and the
optimiser steps OPT_STEP_ADAMW (the parameter and both moments compared after the step) and OPT_STEP_SGD."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

from pyggml import ops
from pyggml.ops.base import Op
from pyggml.ops.rope import RopeParams
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_conformance.case import Case, CaseBuilder, fmt_params
from pyggml_conformance.cases.common import F32, HALF, I32, mul, unique
from pyggml_conformance.cases.rope import NEOX, NORMAL, SCALED, rope_params
from pyggml_conformance.inputs import integers, uniform


def repeat_back_case(ne: Sequence[int], nr: Sequence[int], v: int = 0) -> Case:
    """The gradient of repeat(x [ne], nr times): a [ne * nr] summed back to ne. v: 1 strided gradient."""
    big = mul(ne, nr)

    def build(b: CaseBuilder) -> Tensor:
        g = b.strided(F32, big, pad=(2, 1, 1, 0)) if v else b.input(F32, big)
        like = b.input(F32, ne)
        return ops.repeat_back(g, like)

    return Case(Op.REPEAT_BACK, fmt_params(type=F32, ne=ne, nr=nr, v=v), build)


def silu_back_case(t: GGMLType, ne: Sequence[int], v: int = 0) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        g = b.strided(t, ne, pad=(3, 1, 0, 0)) if v else b.input(t, ne)
        x = b.input(t, ne, uniform(-6.0, 6.0))
        return ops.silu_back(g, x)

    return Case(Op.SILU_BACK, fmt_params(type=t, ne=ne, v=v), build)


def rms_norm_back_case(ne: Sequence[int], eps: float) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        return ops.rms_norm_back(b.input(F32, ne), b.input(F32, ne), eps)

    return Case(Op.RMS_NORM_BACK, fmt_params(type=F32, ne=ne, eps=eps), build)


def get_rows_back_case(t: GGMLType, n: int, m: int, r: int, v: bool = False) -> Case:
    """grad [n, r] of get_rows(x [n, m], rows [r]) summed into [n, m]; v: rows a view of a wider id tensor."""

    def build(b: CaseBuilder) -> Tensor:
        like = b.input(F32, (n, m))
        if v:
            rows = b.sub_view(b.input(I32, (2 * r,), integers(0, m)), (r,))
        else:
            rows = b.input(I32, (r,), integers(0, m))
        return ops.get_rows_back(b.input(t, (n, r)), rows, like)

    return Case(Op.GET_ROWS_BACK, fmt_params(type=t, n=n, m=m, r=r, v=v), build)


def soft_max_back_case(ne: Sequence[int], scale: float) -> Case:
    """dy, and y = soft_max(x * scale) computed in the graph (so rows of y sum to 1, as in training)."""

    def build(b: CaseBuilder) -> Tensor:
        y = ops.soft_max(b.input(F32, ne, uniform(-4.0, 4.0)), scale=scale)
        return ops.soft_max_ext_back(b.input(F32, ne), y, scale)

    return Case(Op.SOFT_MAX_BACK, fmt_params(type=F32, ne=ne, scale=scale), build)


def rope_back_case(t: GGMLType, ne: Sequence[int], p: RopeParams, ff: bool = False, v: int = 0) -> Case:
    params = fmt_params(type=t, ne=ne, n_dims=p.n_dims, mode=p.mode, fs=p.freq_scale, ef=p.ext_factor,
                        af=p.attn_factor, n_ctx_orig=p.n_ctx_orig, ff=ff, v=v)

    def build(b: CaseBuilder) -> Tensor:
        a = b.strided(t, ne, pad=(4, 1, 0, 0)) if v else b.input(t, ne)
        pos = b.input(I32, (ne[2],), integers(0, 4096))
        factors = b.input(F32, (p.n_dims // 2,), uniform(0.9, 1.1)) if ff else None
        return ops.rope_back(a, pos, p, factors)

    return Case(Op.ROPE_BACK, params, build)


def cross_entropy_case(ne: Sequence[int], back: bool) -> Case:
    """Logits in [-100, 100] (ggml's range), labels a softmax of uniform values (rows summing to 1)."""

    def build(b: CaseBuilder) -> Tensor:
        grad = b.input(F32, (1,)) if back else None
        logits = b.input(F32, ne, uniform(-100.0, 100.0))
        labels = ops.soft_max(b.input(F32, ne))
        if grad is not None:
            return ops.cross_entropy_loss_back(grad, logits, labels)
        return ops.cross_entropy_loss(logits, labels)

    op = Op.CROSS_ENTROPY_LOSS_BACK if back else Op.CROSS_ENTROPY_LOSS
    return Case(op, fmt_params(type=F32, ne=ne), build)


def adamw_case(ne: Sequence[int]) -> Case:
    """Every input uniform in [0, 1] as ggml's test (v and the hyper-parameters must be non-negative); the outputs
    are the updated parameter, m and v (the parameter is a leaf: only leafs can be parameters)."""

    def build(b: CaseBuilder) -> Sequence[Tensor]:
        init = uniform(0.0, 1.0)
        param = b.input(F32, ne, init).set_param()
        m, v = b.input(F32, ne, init), b.input(F32, ne, init)
        out = ops.opt_step_adamw(param, b.input(F32, ne, init), m, v, b.input(F32, (7,), init))
        return out, m, v

    return Case(Op.OPT_STEP_ADAMW, fmt_params(type=F32, ne=ne), build)


def sgd_case(ne: Sequence[int]) -> Case:
    def build(b: CaseBuilder) -> Tensor:
        init = uniform(0.0, 1.0)
        param = b.input(F32, ne, init).set_param()
        return ops.opt_step_sgd(param, b.input(F32, ne, init), b.input(F32, (2,), init))

    return Case(Op.OPT_STEP_SGD, fmt_params(type=F32, ne=ne), build)


def eval_cases() -> list[Case]:
    out: list[Case] = []
    for nr, v in product(((1, 1, 1, 1), (2, 1, 1, 1), (1, 2, 1, 1), (1, 1, 2, 1), (1, 1, 1, 2), (3, 2, 2, 2)),
                         (0, 1)):
        out.append(repeat_back_case((8, 6, 4, 2), nr, v))
    for t, v in product(HALF, (0, 1)):
        out.append(silu_back_case(t, (10, 5, 4, 3), v))
        out.append(silu_back_case(t, (129, 3, 1, 1), v))
    for eps, n in product((0.0, 1e-6, 1e-4, 1e-1, 10.0), (64, 1025)):
        out.append(rms_norm_back_case((n, 5, 4, 3), eps))
    out.append(get_rows_back_case(F32, 1, 8, 2))
    out.append(get_rows_back_case(F32, 1, 70000, 4))
    for t, v in product(HALF, (False, True)):
        out.append(get_rows_back_case(t, 256, 5, 4, v))
        out.append(get_rows_back_case(t, 33, 7, 40, v))
    for scale, ne0, ne1 in product((1.0, 0.1), (16, 1024), (16, 1024)):
        out.append(soft_max_back_case((ne0, ne1, 1, 1), scale))
        out.append(soft_max_back_case((ne0 - 1, ne1 - 1, 1, 1), scale))
        out.append(soft_max_back_case((ne0, ne1, 2, 3), scale))
    for t, (ne, nd, mode), ff, v in product(HALF, (((128, 4, 3, 1), 128, NORMAL), ((80, 3, 5, 2), 32, NEOX),
                                                   ((64, 2, 4, 1), 20, NORMAL)), (False, True), (0, 1)):
        out.append(rope_back_case(t, ne, rope_params(nd, mode), ff, v))
        out.append(rope_back_case(t, ne, rope_params(nd, mode, **SCALED), ff, v))
    for back in (False, True):
        out.append(cross_entropy_case((10, 5, 4, 3), back))
        out.append(cross_entropy_case((30000, 1, 1, 1), back))
    for ne in ((10, 5, 4, 3), (1000, 3, 1, 1)):
        out.append(adamw_case(ne))
        out.append(sgd_case(ne))
    return unique(out)


def perf_cases() -> list[Case]:
    return [cross_entropy_case((32000, 64, 1, 1), False), cross_entropy_case((32000, 64, 1, 1), True),
            adamw_case((4096, 4096, 1, 1)), rms_norm_back_case((4096, 512, 1, 1), 1e-6),
            soft_max_back_case((1024, 1024, 8, 1), 1.0)]
