"""Row reductions (norm.cl): NORM, RMS_NORM, L2_NORM, GROUP_NORM, SOFT_MAX."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_opencl.op_table import WG, PlanBuilder, f32, i32, i64, opt_src, rule, src, tname
from pyggml_opencl.programs import ProgramSpec

if TYPE_CHECKING:
    from pyggml_opencl.device import OpenCLDevice

FILE = "norm.cl"
T = GGMLType
KIND = {Op.NORM: 0, Op.RMS_NORM: 1, Op.L2_NORM: 2}


def spec(mask: GGMLType = T.F32) -> ProgramSpec:
    return ProgramSpec.of(FILE, WG=WG, TM=tname(mask))


def _f32_rows(node: Tensor, dev: OpenCLDevice) -> bool:
    a = node.src[0]
    return a is not None and a.type == T.F32 and node.type == T.F32


@rule(Op.NORM, Op.RMS_NORM, Op.L2_NORM, supports=_f32_rows)
def build_norm(node: Tensor, b: PlanBuilder) -> None:
    a = src(node, 0)
    n = a.nrows()
    b.launch(spec(), "k_norm", (n * WG,), (WG,), *b.tensor(a), *b.tensor(node), i32(KIND[node.op]),
             f32(node.params.eps))


@rule(Op.GROUP_NORM, supports=_f32_rows)
def build_group_norm(node: Tensor, b: PlanBuilder) -> None:
    a = src(node, 0)
    per_group = -(-a.ne[2] // node.params.n_groups)
    n_groups = -(-a.ne[2] // per_group)
    b.launch(spec(), "k_group_norm", (n_groups * a.ne[3] * WG,), (WG,), *b.tensor(a), *b.tensor(node),
             i64(per_group), f32(node.params.eps))


def alibi(n_head: int, max_bias: float) -> tuple[int, float, float]:
    """(n_head_log2, m0, m1) of the ALiBi slopes (see the reference's alibi_slopes)."""
    if max_bias <= 0.0 or n_head <= 0:
        return 1, 1.0, 1.0
    n = 1 << math.floor(math.log2(n_head))
    return n, 2.0 ** (-max_bias / n), 2.0 ** (-max_bias / 2.0 / n)


def _soft_max_ok(node: Tensor, dev: OpenCLDevice) -> bool:
    sinks = opt_src(node, 2)
    return _f32_rows(node, dev) and (sinks is None or sinks.is_contiguous())


@rule(Op.SOFT_MAX, supports=_soft_max_ok)
def build_soft_max(node: Tensor, b: PlanBuilder) -> None:
    a = src(node, 0)
    mask, sinks = opt_src(node, 1), opt_src(node, 2)
    p = node.params
    nlog2, m0, m1 = alibi(a.ne[2], p.max_bias)
    b.launch(spec(mask.type if mask is not None else T.F32), "k_soft_max", (a.nrows() * WG,), (WG,),
             *b.tensor(a), *b.tensor(mask if mask is not None else a), *b.tensor(sinks if sinks is not None else a),
             *b.tensor(node), f32(p.scale), f32(p.max_bias), i32(int(mask is not None)),
             i32(int(sinks is not None)), i32(nlog2), f32(m0), f32(m1))
