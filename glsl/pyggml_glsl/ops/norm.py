"""Row ops: NORM, RMS_NORM, L2_NORM and SOFT_MAX (one work group per row), GROUP_NORM (one per group)."""

from __future__ import annotations

import struct

from pyggml.backend.op_table import RuleSet, opt_src, src
from pyggml.ops.attention import alibi
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_glsl.builder import Builder
from pyggml_glsl.ops.common import PLAIN, generic_pc, grid, loop_share, srcs_ok

rules: RuleSet[Builder] = RuleSet()

F32 = frozenset({GGMLType.F32})
NORM_CODE = {Op.NORM: 0, Op.RMS_NORM: 1, Op.L2_NORM: 2}
MAX_ROW = 128 * loop_share(3)
"""Longest row (GROUP_NORM: group) one work group of 128 threads normalises (2^21): three passes of n / 128
iterations per thread stay within LAVAPIPE_LOOPS; longer rows are left to another backend."""


def _norm_ok(node: Tensor) -> bool:
    a = node.src[0]
    if a is None:
        return False
    if node.op is Op.GROUP_NORM:
        n = a.ne[0] * a.ne[1] * -(-a.ne[2] // max(1, node.params.n_groups))
    else:
        n = a.ne[0]
    return n <= MAX_ROW and srcs_ok(node, (F32,)) and node.type == GGMLType.F32


@rules.rule(*NORM_CODE, accepts=_norm_ok)
def norm(node: Tensor, p: Builder) -> None:
    a = src(node, 0)
    p.dispatch("norm", (NORM_CODE[node.op],), [a], node, generic_pc(a, None, node, 0, (node.params.eps,)),
               grid(a.nrows()))


@rules.rule(Op.GROUP_NORM, accepts=_norm_ok)
def group_norm(node: Tensor, p: Builder) -> None:
    a = src(node, 0)
    per_group = -(-a.ne[2] // node.params.n_groups)
    groups = -(-a.ne[2] // per_group) * a.ne[3]
    p.dispatch("norm", (3,), [a], node, generic_pc(a, None, node, per_group, (node.params.eps,)), grid(groups))


def _soft_max_ok(node: Tensor) -> bool:
    a = node.src[0]
    return (a is not None and a.ne[0] <= MAX_ROW and srcs_ok(node, (F32, PLAIN, F32)) and a.is_contiguous_rows()
            and node.is_contiguous_rows() and node.type == GGMLType.F32)


@rules.rule(Op.SOFT_MAX, accepts=_soft_max_ok)
def soft_max(node: Tensor, p: Builder) -> None:
    a, mask, sinks = src(node, 0), opt_src(node, 1), opt_src(node, 2)
    prm = node.params
    nlog2, m0, m1 = alibi(a.ne[2], prm.max_bias)
    mt = mask if mask is not None else a
    push = struct.pack(
        "<19I3f2I", a.offset, mask.offset if mask else 0, sinks.offset if sinks else 0, node.offset,
        *a.ne, a.nb[1], a.nb[2], a.nb[3], mt.ne[2], mt.ne[3], mt.nb[1], mt.nb[2], mt.nb[3],
        node.nb[1], node.nb[2], node.nb[3], prm.scale, m0, m1, nlog2, int(prm.max_bias > 0.0))
    spec = (int(mt.type), int(mask is not None), int(sinks is not None))
    p.dispatch("soft_max", spec, [a, mask, sinks], node, push, grid(a.nrows()))
