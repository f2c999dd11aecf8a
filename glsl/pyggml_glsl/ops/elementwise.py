"""Element-wise ops: ADD/SUB/MUL/DIV/ADD1 (broadcasting), the UNARY family and friends, SCALE, CLAMP, LEAKY_RELU,
FILL, GLU."""

from __future__ import annotations

from pyggml.backend.op_table import RuleSet, opt_src, src
from pyggml.ops.base import Op
from pyggml.ops.elementwise import SwigluClampParams, SwigluOaiParams, XieluParams
from pyggml.tensor import Tensor
from pyggml_glsl.builder import Builder
from pyggml_glsl.ops.common import PLAIN, generic_pc, grid, groups_for, srcs_ok

rules: RuleSet[Builder] = RuleSet()

BINARY_CODE = {Op.ADD: 0, Op.SUB: 1, Op.MUL: 2, Op.DIV: 3, Op.ADD1: 0}


def _binary_ok(node: Tensor) -> bool:
    return srcs_ok(node, (PLAIN, PLAIN)) and node.type in PLAIN


@rules.rule(Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.ADD1, accepts=_binary_ok)
def binary(node: Tensor, p: Builder) -> None:
    a, b = src(node, 0), src(node, 1)
    spec = (int(a.type), int(b.type), int(node.type), BINARY_CODE[node.op])
    p.dispatch("binary", spec, [a, b], node, generic_pc(a, b, node), grid(groups_for(node.nelements())))


MATH_CODE = {Op.SQR: 32, Op.SQRT: 33, Op.LOG: 34, Op.SIN: 35, Op.COS: 36, Op.SCALE: 40, Op.CLAMP: 41,
             Op.LEAKY_RELU: 42, Op.FILL: 43}


def _unary_code(node: Tensor) -> int:
    if node.op is Op.UNARY:
        return int(node.params.op.value) - 1
    return MATH_CODE[node.op]


def _unary_params(node: Tensor) -> tuple[float, ...]:
    p = node.params
    if isinstance(p, XieluParams):
        return (p.alpha_n, p.alpha_p, p.beta, p.eps)
    if node.op is Op.SCALE:
        return (p.s, p.b)
    if node.op is Op.CLAMP:
        return (p.min, p.max)
    if node.op is Op.LEAKY_RELU:
        return (p.negative_slope,)
    if node.op is Op.FILL:
        return (p.value,)
    return ()


def _unary_ok(node: Tensor) -> bool:
    a = node.src[0]
    return a is not None and srcs_ok(node, (PLAIN,)) and node.type in PLAIN and a.ne == node.ne


@rules.rule(Op.UNARY, *MATH_CODE, accepts=_unary_ok)
def unary(node: Tensor, p: Builder) -> None:
    a = src(node, 0)
    spec = (int(a.type), int(node.type), _unary_code(node))
    p.dispatch("unary", spec, [a], node, generic_pc(a, None, node, 0, _unary_params(node)),
               grid(groups_for(node.nelements())))


def _glu_ok(node: Tensor) -> bool:
    return srcs_ok(node, (PLAIN, PLAIN)) and node.type in PLAIN


@rules.rule(Op.GLU, accepts=_glu_ok)
def glu(node: Tensor, p: Builder) -> None:
    a, b = src(node, 0), opt_src(node, 1)
    prm = node.params
    spec = (int(a.type), int(node.type), int(prm.op.value) - 1, int(b is not None), int(prm.swapped))
    f = (prm.alpha, prm.limit) if isinstance(prm, SwigluOaiParams) else \
        (0.0, prm.limit) if isinstance(prm, SwigluClampParams) else ()
    p.dispatch("glu", spec, [a, b], node, generic_pc(a, b, node, 0, f), grid(groups_for(node.nelements())))
