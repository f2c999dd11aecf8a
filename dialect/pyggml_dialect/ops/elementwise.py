"""Element-wise ops (elementwise.cl): binary with broadcasting, unary math, GLU, converting copies."""

from __future__ import annotations

from pyggml.backend.launch import f32, i32
from pyggml.backend.op_table import RuleSet, opt_src, src
from pyggml.ops.base import Op, can_repeat
from pyggml.ops.elementwise import GluOp, GluParams, SwigluClampParams, SwigluOaiParams, UnaryOp, XieluParams
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_dialect.ops.layout import build_copy_raw
from pyggml_dialect.ops.rows import block_copy_ok, build_block_copy
from pyggml_dialect.source import ProgramSpec, set_prelude
from pyggml_dialect.types import COPY_TYPES, PLAIN, Builder, tname

rules: RuleSet[Builder] = RuleSet()

FILE = "elementwise.cl"
EXTRA_UNARY = ("SQR", "SQRT", "LOG", "SIN", "COS", "SCALE", "CLAMP", "LEAKY_RELU", "FILL")
UOPS = [u.name for u in UnaryOp] + list(EXTRA_UNARY)
BINOPS = {Op.ADD: 0, Op.SUB: 1, Op.MUL: 2, Op.DIV: 3, Op.ADD1: 0}
GLUOPS = [g.name for g in GluOp]

set_prelude(FILE, "".join(f"#define UOP_{n} {i}\n" for i, n in enumerate(UOPS))
            + "#define BIN_ADD 0\n#define BIN_SUB 1\n#define BIN_MUL 2\n#define BIN_DIV 3\n"
            + "".join(f"#define GLU_{n} {i}\n" for i, n in enumerate(GLUOPS)))


def spec(t0: GGMLType, t1: GGMLType, td: GGMLType) -> ProgramSpec:
    raw = int(t0 == td)
    return ProgramSpec.of(FILE, T0=tname(t0), T1=tname(t1), TD=tname(td), RAWCOPY=raw)


def _plain_all(*ts: Tensor | None) -> bool:
    return all(t is None or t.type in PLAIN for t in ts)


def _binary_ok(node: Tensor) -> bool:
    a, b = node.src[0], node.src[1]
    return a is not None and b is not None and _plain_all(node, a, b) and can_repeat(b, a)


@rules.rule(Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.ADD1, accepts=_binary_ok)
def build_binary(node: Tensor, b: Builder) -> None:
    a, c = src(node, 0), src(node, 1)
    b.launch_1d(spec(a.type, c.type, node.type), "k_binary", node.nelements(), *b.tensor(a), *b.tensor(c),
                *b.tensor(node), i32(BINOPS[node.op]))


def _unary_ok(node: Tensor) -> bool:
    return _plain_all(node, node.src[0])


def _unary_code_params(node: Tensor) -> tuple[str, float, float, float, float]:
    p = node.params
    match node.op:
        case Op.UNARY:
            if isinstance(p, XieluParams):
                return "XIELU", p.alpha_n, p.alpha_p, p.beta, p.eps
            return p.op.name, 0.0, 0.0, 0.0, 0.0
        case Op.SCALE:
            return "SCALE", p.s, p.b, 0.0, 0.0
        case Op.CLAMP:
            return "CLAMP", p.min, p.max, 0.0, 0.0
        case Op.LEAKY_RELU:
            return "LEAKY_RELU", p.negative_slope, 0.0, 0.0, 0.0
        case Op.FILL:
            return "FILL", p.value, 0.0, 0.0, 0.0
    return node.op.name, 0.0, 0.0, 0.0, 0.0


@rules.rule(Op.SQR, Op.SQRT, Op.LOG, Op.SIN, Op.COS, Op.UNARY, Op.SCALE, Op.CLAMP, Op.LEAKY_RELU, Op.FILL,
            accepts=_unary_ok)
def build_unary(node: Tensor, b: Builder) -> None:
    a = src(node, 0)
    name, *fp = _unary_code_params(node)
    b.launch_1d(spec(a.type, a.type, node.type), "k_unary", node.nelements(), *b.tensor(a), *b.tensor(node),
                i32(UOPS.index(name)), *map(f32, fp))


def _glu_ok(node: Tensor) -> bool:
    return _plain_all(node, node.src[0], opt_src(node, 1))


@rules.rule(Op.GLU, accepts=_glu_ok)
def build_glu(node: Tensor, b: Builder) -> None:
    a = src(node, 0)
    g = opt_src(node, 1)
    p: GluParams = node.params
    b.launch_1d(spec(a.type, a.type, node.type), "k_glu", node.nelements(), *b.tensor(a),
                *b.tensor(g if g is not None else a), *b.tensor(node), i32(GLUOPS.index(p.op.name)),
                i32(int(p.swapped)), i32(int(g is not None)), *map(f32, _glu_floats(p)))


def _glu_floats(p: GluParams) -> tuple[float, float]:
    """k_glu's p0, p1: SWIGLU_OAI's alpha and limit, SWIGLU_CLAMP's limit (in p1)."""
    if isinstance(p, SwigluOaiParams):
        return p.alpha, p.limit
    if isinstance(p, SwigluClampParams):
        return 0.0, p.limit
    return 0.0, 0.0


def _copy_ok(node: Tensor) -> bool:
    a = node.src[0]
    if a is None:
        return False
    if a.type in COPY_TYPES and node.type in COPY_TYPES:
        return True  # converted through float (F16/BF16 round to nearest even, integers truncate)
    if a.type == node.type:
        return a.is_contiguous() and node.is_contiguous()
    return block_copy_ok(a, node)


@rules.rule(Op.DUP, Op.CONT, Op.CPY, accepts=_copy_ok)
def build_copy(node: Tensor, b: Builder) -> None:
    a = src(node, 0)
    if a.type in COPY_TYPES and node.type in COPY_TYPES:
        b.launch_1d(spec(a.type, a.type, node.type), "k_cpy", node.nelements(), *b.tensor(a), *b.tensor(node))
        return
    if a.type == node.type:
        build_copy_raw(node, b)
        return
    build_block_copy(node, b)
