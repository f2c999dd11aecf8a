"""The ops of training graphs: the backward ops (backward.cl: SILU_BACK, REPEAT_BACK, GET_ROWS_BACK, RMS_NORM_BACK,
SOFT_MAX_BACK), the cross-entropy loss and its gradient (loss.cl: CROSS_ENTROPY_LOSS, CROSS_ENTROPY_LOSS_BACK) and
the optimiser steps (optim.cl: OPT_STEP_ADAMW, OPT_STEP_SGD, in place on the parameter and AdamW's moments)."""

from __future__ import annotations

from pyggml.backend.launch import WG, f32, i64
from pyggml.backend.op_table import RuleSet, src
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_dialect.source import ProgramSpec
from pyggml_dialect.types import Builder, tname

rules: RuleSet[Builder] = RuleSet()

T = GGMLType
F32 = frozenset({T.F32})
F32_F16 = frozenset({T.F32, T.F16})


def spec(t0: GGMLType = T.F32, t1: GGMLType = T.F32, td: GGMLType = T.F32) -> ProgramSpec:
    return ProgramSpec.of("backward.cl", T0=tname(t0), T1=tname(t1), TD=tname(td), WG=WG)


def _types_ok(node: Tensor, types: frozenset[GGMLType]) -> bool:
    return node.type in types and all(s is not None and s.type in types for s in node.src[:2])


@rules.rule(Op.SILU_BACK, accepts=lambda n: _types_ok(n, F32_F16))
def build_silu_back(node: Tensor, b: Builder) -> None:
    dy, x = src(node, 0), src(node, 1)
    b.launch_1d(spec(dy.type, x.type, node.type), "k_silu_back", node.nelements(), *b.tensor(dy), *b.tensor(x),
                *b.tensor(node))


@rules.rule(Op.REPEAT_BACK, accepts=lambda n: _types_ok(n, F32_F16))
def build_repeat_back(node: Tensor, b: Builder) -> None:
    a = src(node, 0)
    b.launch_1d(spec(a.type, a.type, node.type), "k_repeat_back", node.nelements(), *b.tensor(a), *b.tensor(node))


def _get_rows_back_ok(node: Tensor) -> bool:
    g, ids = node.src[0], node.src[1]
    return g is not None and ids is not None and g.type in F32_F16 and ids.type == T.I32 and node.type == T.F32


@rules.rule(Op.GET_ROWS_BACK, accepts=_get_rows_back_ok)
def build_get_rows_back(node: Tensor, b: Builder) -> None:
    g, ids = src(node, 0), src(node, 1)
    b.launch(spec(g.type), "k_get_rows_back", (node.ne[1] * WG,), (WG,), *b.tensor(g), *b.tensor(ids),
             *b.tensor(node), *b.error_args(f"a row id outside 0..{node.ne[1] - 1}"))


@rules.rule(Op.RMS_NORM_BACK, Op.SOFT_MAX_BACK, accepts=lambda n: _types_ok(n, F32))
def build_row_grad(node: Tensor, b: Builder) -> None:
    """One work-group per row; the scalar is RMS_NORM's eps or SOFT_MAX's scale."""
    g, x = src(node, 0), src(node, 1)
    kernel, k = (("k_rms_norm_back", node.params.eps) if node.op is Op.RMS_NORM_BACK
                 else ("k_soft_max_back", node.params.scale))
    b.launch(spec(), kernel, (x.nrows() * WG,), (WG,), *b.tensor(g), *b.tensor(x), *b.tensor(node), f32(k))


LOSS = ProgramSpec.of("loss.cl", WG=WG)


def _f32(node: Tensor) -> bool:
    return node.type == T.F32 and all(s is not None and s.type == T.F32 for s in node.src)


@rules.rule(Op.CROSS_ENTROPY_LOSS, accepts=_f32)
def build_cross_entropy_loss(node: Tensor, b: Builder) -> None:
    """Each row's sum into scratch, then one work-group adds them in order (deterministic, no atomics)."""
    x, t = src(node, 0), src(node, 1)
    rows = x.nrows()
    part = b.scratch(4 * rows)
    b.launch(LOSS, "k_cross_entropy_rows", (rows * WG,), (WG,), *b.tensor(x), *b.tensor(t), part)
    b.launch(LOSS, "k_cross_entropy_sum", (WG,), (WG,), part, i64(rows), *b.tensor(node))


@rules.rule(Op.CROSS_ENTROPY_LOSS_BACK, accepts=_f32)
def build_cross_entropy_loss_back(node: Tensor, b: Builder) -> None:
    dl, x, t = src(node, 0), src(node, 1), src(node, 2)
    b.launch(LOSS, "k_cross_entropy_back", (x.nrows() * WG,), (WG,), *b.tensor(dl), *b.tensor(x), *b.tensor(t),
             *b.tensor(node))


OPTIM = ProgramSpec.of("optim.cl")


def _opt_ok(node: Tensor) -> bool:
    """Every tensor f32 (the core rule's types); the hyper-parameters (the last src, as in ggml) contiguous: the
    kernels index them."""
    hp = node.src[-1] if node.src else None
    return hp is not None and hp.is_contiguous() and _f32(node)


@rules.rule(Op.OPT_STEP_ADAMW, accepts=_opt_ok)
def build_adamw(node: Tensor, b: Builder) -> None:
    g, m, v, hp = src(node, 1), src(node, 2), src(node, 3), src(node, 4)
    b.launch_1d(OPTIM, "k_opt_step_adamw", node.nelements(), *b.tensor(g), *b.tensor(m), *b.tensor(v), *b.tensor(hp),
                *b.tensor(node))


@rules.rule(Op.OPT_STEP_SGD, accepts=_opt_ok)
def build_sgd(node: Tensor, b: Builder) -> None:
    g, hp = src(node, 1), src(node, 2)
    b.launch_1d(OPTIM, "k_opt_step_sgd", node.nelements(), *b.tensor(g), *b.tensor(hp), *b.tensor(node))
