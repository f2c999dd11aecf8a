"""The ops of training graphs: the backward ops on backward.comp (SILU_BACK, REPEAT_BACK, GET_ROWS_BACK,
RMS_NORM_BACK, SOFT_MAX_BACK), the cross-entropy loss and its gradient on loss.comp (CROSS_ENTROPY_LOSS,
CROSS_ENTROPY_LOSS_BACK) and the optimiser steps on optim.comp (OPT_STEP_ADAMW, OPT_STEP_SGD, in place on the
parameter and AdamW's moments, which the dispatch declares as written so later reads wait for it). Loops stay within
LAVAPIPE_LOOPS; longer ones are left to another backend."""

from __future__ import annotations

import struct

from pyggml.backend.op_table import RuleSet, opt_src, src
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_glsl.builder import Builder
from pyggml_glsl.ops.common import generic_pc, grid, groups_for, loop_share, patch_pc, srcs_ok

rules: RuleSet[Builder] = RuleSet()

T = GGMLType
F32 = frozenset({T.F32})
F32_F16 = frozenset({T.F32, T.F16})
I32 = frozenset({T.I32})
CODE = {Op.SILU_BACK: 0, Op.REPEAT_BACK: 1, Op.GET_ROWS_BACK: 2, Op.RMS_NORM_BACK: 3, Op.SOFT_MAX_BACK: 4}
LANES = 128
"""Threads of a work group in backward.comp and loss.comp."""
MAX_ROW = LANES * loop_share(3)
"""Longest row a work group reduces: three passes of ne0 / 128 iterations per thread within LAVAPIPE_LOOPS."""
MAX_LOOP = loop_share(2)
"""Iterations of one thread's own loop (REPEAT_BACK's tiles, GET_ROWS_BACK's ids and columns), leaving half of
LAVAPIPE_LOOPS to the rest."""


def _types(node: Tensor) -> tuple[int, int, int]:
    a, b = src(node, 0), opt_src(node, 1)
    return int(a.type), int((b if b is not None else a).type), int(node.type)


def _ok(node: Tensor) -> bool:
    a = node.src[0]
    if a is None:
        return False
    if node.op is Op.SILU_BACK:
        return srcs_ok(node, (F32_F16, F32_F16)) and node.type in F32_F16
    if node.op is Op.REPEAT_BACK:
        tiles = a.nelements() // max(1, node.nelements())
        return tiles <= MAX_LOOP and srcs_ok(node, (F32_F16,)) and node.type in F32_F16
    if node.op is Op.GET_ROWS_BACK:
        n_ids = a.ne[1]
        return (n_ids * (1 + -(-a.ne[0] // LANES)) <= MAX_LOOP and srcs_ok(node, (F32_F16, I32))
                and node.type == T.F32)
    return a.ne[0] <= MAX_ROW and srcs_ok(node, (F32, F32)) and node.type == T.F32


@rules.rule(*CODE, accepts=_ok)
def backward(node: Tensor, p: Builder) -> None:
    a, b = src(node, 0), opt_src(node, 1)
    code = CODE[node.op]
    scalar = (node.params.eps if node.op is Op.RMS_NORM_BACK
              else node.params.scale if node.op is Op.SOFT_MAX_BACK else 0.0)
    push = generic_pc(a, b, node, 0, (scalar,))
    if node.op in (Op.SILU_BACK, Op.REPEAT_BACK):
        groups = groups_for(node.nelements(), LANES)
    else:
        groups = node.ne[1] if node.op is Op.GET_ROWS_BACK else a.nrows()
    checks = f"a row id outside 0..{node.ne[1] - 1}" if node.op is Op.GET_ROWS_BACK else ""
    p.dispatch("backward", (code, *_types(node)), [a, b], node, push, grid(groups), checks=checks)


def _loss_ok(node: Tensor) -> bool:
    x = node.src[1] if node.op is Op.CROSS_ENTROPY_LOSS_BACK else node.src[0]
    return (x is not None and x.ne[0] <= MAX_ROW and x.nrows() <= LANES * MAX_LOOP and node.type == T.F32
            and srcs_ok(node, (F32, F32, F32)))


@rules.rule(Op.CROSS_ENTROPY_LOSS, accepts=_loss_ok)
def cross_entropy_loss(node: Tensor, p: Builder) -> None:
    """Each row's sum into scratch (OP 0), then one work group adds them in order (OP 1)."""
    x, t = src(node, 0), src(node, 1)
    rows = x.nrows()
    part = p.scratch(4 * rows)
    push = generic_pc(x, t, node)
    p.dispatch("loss", (0,), [x, t], part, patch_pc(push, od=part.offset), grid(rows))
    p.dispatch("loss", (1,), [part], node, patch_pc(push, oa=part.offset, u0=rows), grid(1))


@rules.rule(Op.CROSS_ENTROPY_LOSS_BACK, accepts=_loss_ok)
def cross_entropy_loss_back(node: Tensor, p: Builder) -> None:
    dl, x, t = src(node, 0), src(node, 1), src(node, 2)
    p.dispatch("loss", (2,), [x, t, dl], node, generic_pc(x, t, node, dl.offset), grid(x.nrows()))


OPT_CODE = {Op.OPT_STEP_ADAMW: 0, Op.OPT_STEP_SGD: 1}


def _opt_ok(node: Tensor) -> bool:
    """Every tensor f32; the hyper-parameters (the last src, as in ggml; bound at binding 4) contiguous."""
    hp = node.src[-1] if node.src else None
    return hp is not None and hp.is_contiguous() and node.type == T.F32 and srcs_ok(node, [F32] * 5)


@rules.rule(*OPT_CODE, accepts=_opt_ok)
def opt_step(node: Tensor, p: Builder) -> None:
    adamw = node.op is Op.OPT_STEP_ADAMW
    a, g, hp = src(node, 0), src(node, 1), src(node, len(node.src) - 1)
    m, v = (src(node, 2), src(node, 3)) if adamw else (None, None)

    def strides(t: Tensor | None) -> tuple[int, ...]:
        return tuple(t.nb) if t is not None else (0, 0, 0, 0)

    push = struct.pack("<25I", g.offset, m.offset if m else 0, v.offset if v else 0, hp.offset, node.offset,
                       *node.ne, *strides(g), *strides(m), *strides(v), *node.nb)
    p.dispatch("optim", (OPT_CODE[node.op],), [a, g, m, v, hp], node, push, grid(groups_for(node.nelements())),
               extra_writes=tuple(t for t in (m, v) if t is not None))
