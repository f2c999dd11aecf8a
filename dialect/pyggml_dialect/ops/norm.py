"""Row reductions (norm.cl): NORM, RMS_NORM, L2_NORM, GROUP_NORM, SOFT_MAX; NORM and RMS_NORM fused with the MUL by
their weight that follows (ggml's backends fuse RMS_NORM and MUL alike)."""

from __future__ import annotations

from pyggml.backend.launch import WG, f32, i32, i64
from pyggml.backend.op_table import RuleSet, opt_src, src
from pyggml.ops.attention import alibi
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_dialect.source import ProgramSpec
from pyggml_dialect.types import Builder, tname

rules: RuleSet[Builder] = RuleSet()

FILE = "norm.cl"
T = GGMLType
KIND = {Op.NORM: 0, Op.RMS_NORM: 1, Op.L2_NORM: 2}


def spec(mask: GGMLType = T.F32) -> ProgramSpec:
    return ProgramSpec.of(FILE, WG=WG, TM=tname(mask))


def _f32_rows(node: Tensor) -> bool:
    a = node.src[0]
    return a is not None and a.type == T.F32 and node.type == T.F32


def _launch_norm(norm: Tensor, w: Tensor | None, out: Tensor, b: Builder) -> None:
    a = src(norm, 0)
    b.launch(spec(), "k_norm", (a.nrows() * WG,), (WG,), *b.tensor(a), *b.tensor(w if w is not None else a),
             *b.tensor(out), i32(KIND[norm.op]), f32(norm.params.eps), i32(int(w is not None)))


@rules.rule(Op.NORM, Op.RMS_NORM, Op.L2_NORM, accepts=_f32_rows)
def build_norm(node: Tensor, b: Builder) -> None:
    _launch_norm(node, None, node, b)


def _scaled_by_weight(run: tuple[Tensor, ...]) -> bool:
    """mul = norm * w, w an F32 tensor broadcast over the rows (MUL's own support says the shapes broadcast)."""
    norm, mul = run
    w = opt_src(mul, 1)
    return mul.src[0] is norm and w is not None and w.type == T.F32 and mul.type == T.F32


@rules.fusion(Op.RMS_NORM, Op.MUL, accepts=_scaled_by_weight)
@rules.fusion(Op.NORM, Op.MUL, accepts=_scaled_by_weight)
def build_norm_mul(run: tuple[Tensor, ...], b: Builder) -> None:
    norm, mul = run
    _launch_norm(norm, src(mul, 1), mul, b)


@rules.rule(Op.GROUP_NORM, accepts=_f32_rows)
def build_group_norm(node: Tensor, b: Builder) -> None:
    a = src(node, 0)
    per_group = -(-a.ne[2] // node.params.n_groups)
    n_groups = -(-a.ne[2] // per_group)
    b.launch(spec(), "k_group_norm", (n_groups * a.ne[3] * WG,), (WG,), *b.tensor(a), *b.tensor(node),
             i64(per_group), f32(node.params.eps))


def _soft_max_ok(node: Tensor) -> bool:
    sinks = opt_src(node, 2)
    return _f32_rows(node) and (sinks is None or sinks.is_contiguous())


@rules.rule(Op.SOFT_MAX, accepts=_soft_max_ok)
def build_soft_max(node: Tensor, b: Builder) -> None:
    a = src(node, 0)
    mask, sinks = opt_src(node, 1), opt_src(node, 2)
    p = node.params
    nlog2, m0, m1 = alibi(a.ne[2], p.max_bias)
    b.launch(spec(mask.type if mask is not None else T.F32), "k_soft_max", (a.nrows() * WG,), (WG,),
             *b.tensor(a), *b.tensor(mask if mask is not None else a), *b.tensor(sinks if sinks is not None else a),
             *b.tensor(node), f32(p.scale), f32(p.max_bias), i32(int(mask is not None)),
             i32(int(sinks is not None)), i32(nlog2), f32(m0), f32(m1))
