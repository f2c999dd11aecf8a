"""Gradient rules of the arithmetic ops: element-wise, UNARY / GLU activations, reductions, norms, products.

Each rule states d(loss)/d(src) in terms of the node's gradient `g`, its sources and its own value, as ggml's
ggml_compute_backward does; where ggml has no rule (NORM, OUT_PROD, LEAKY_RELU, CLAMP, UNARY TANH / SIGMOID /
GELU / GELU_QUICK, fused SWIGLU) the derivative is written here from the op's definition. Rules that need the
backward ops (REPEAT_BACK, SILU_BACK, RMS_NORM_BACK) use them exactly where ggml does. The element-wise ops whose
gradient is g f'(x) are one table, `DERIVATIVES`, of their derivatives f'; the other ops of one source whose
gradient is one term on it are another, `TERMS` (`NEGATED_TERMS` where the term is subtracted).
"""

from __future__ import annotations

from collections.abc import Callable

from pyggml import ops
from pyggml.autodiff.rules import NO_GRADIENT, UNARY_RULES, Backprop, GradientError, RuleFn, glu_rule, rule, unary_rule
from pyggml.ops.base import Op, describe
from pyggml.ops.elementwise import ClampParams, GluOp, GluParams, LeakyReluParams, UnaryOp
from pyggml.ops.norm import NormParams
from pyggml.reference.kernels.unary import GELU_COEF_A, GELU_QUICK_COEF, SQRT_2_OVER_PI
from pyggml.tensor import Tensor


def _unbroadcast(t: Tensor, like: Tensor) -> Tensor:
    """Sum t over the dims along which `like` was broadcast (REPEAT's backward), so it has like's shape."""
    return t if t.ne == like.ne else ops.repeat_back(t, like)


def _x(node: Tensor) -> Tensor:
    """The node's (first) source."""
    x = node.src[0]
    assert x is not None
    return x


# ---- binary element-wise ----------------------------------------------------------------------------------------


@rule(Op.ADD)
@rule(Op.SUB)
def _add_sub(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """y = a + b or a - b, b broadcast over a: grad(a) += g, grad(b) += or -= g summed back to b's shape."""
    b = node.src[1]
    assert b is not None
    if bp.needs(0):
        bp.add(0, g)
    if bp.needs(1):
        (bp.sub if node.op is Op.SUB else bp.add)(1, _unbroadcast(g, b))


@rule(Op.ADD1)
def _add1(node: Tensor, g: Tensor, bp: Backprop) -> None:
    if bp.needs(0):
        bp.add(0, g)
    if bp.needs(1):
        bp.add(1, ops.sum(g))  # src1 is a scalar added to every element: its gradient is the sum


@rule(Op.MUL)
def _mul(node: Tensor, g: Tensor, bp: Backprop) -> None:
    a, b = node.src[0], node.src[1]
    assert a is not None and b is not None
    if bp.needs(0):
        bp.add(0, ops.mul(g, b))
    if bp.needs(1):
        bp.add(1, _unbroadcast(ops.mul(g, a), b))


@rule(Op.DIV)
def _div(node: Tensor, g: Tensor, bp: Backprop) -> None:
    b = node.src[1]
    assert b is not None
    if bp.needs(0):
        bp.add(0, ops.div(g, b))
    if bp.needs(1):  # d(a/b)/db = -(a/b)/b
        bp.sub(1, _unbroadcast(ops.mul(g, ops.div(node, b)), b))


# ---- ops whose gradient is one term on their source --------------------------------------------------------------


Term = Callable[[Tensor, Tensor, Tensor], Tensor]
"""(y, x, g) -> what an op y = f(x) of one source adds to grad(x) given its own gradient g: made of ops on g, x and
the op's node y (which also holds the op's params)."""


def _source_rule(term: Term, *, subtract: bool = False) -> RuleFn:
    """The rule grad(x) += term(y, x, g) (-= where `subtract`) of an op y = f(x) of one source."""

    def fn(node: Tensor, g: Tensor, bp: Backprop) -> None:
        if bp.needs(0):
            (bp.sub if subtract else bp.add)(0, term(node, _x(node), g))

    return fn


def _register(op: Op | UnaryOp, fn: RuleFn) -> None:
    """Make fn the rule of `op` (a UNARY sub-op's rule where op is a UnaryOp)."""
    (unary_rule(op) if isinstance(op, UnaryOp) else rule(op))(fn)


Derivative = Callable[[Tensor, Tensor], Tensor]
"""(y, x) -> f'(x) of an element-wise op y = f(x): the derivative, x's shape, made of ops on x or on the op's own
node y (which also holds the op's params)."""


def _d_leaky_relu(y: Tensor, x: Tensor) -> Tensor:
    """(not in ggml's rules) 1 where x > 0, negative_slope elsewhere."""
    p: LeakyReluParams = y.params
    return ops.scale(ops.step(x), 1.0 - p.negative_slope, p.negative_slope)


def _d_clamp(y: Tensor, x: Tensor) -> Tensor:
    """(not in ggml's rules) 1 where min < x < max, 0 where the clamp holds x."""
    p: ClampParams = y.params
    return ops.mul(ops.step(ops.scale(x, 1.0, -p.min)), ops.step(ops.scale(x, -1.0, p.max)))


def _d_gelu(y: Tensor, x: Tensor) -> Tensor:
    """y = x (1 + t) / 2 with t = tanh(c (x + a x^3)) (the tanh form GELU computes; ggml has no rule):
    y' = (1 + t) / 2 + x (1 - t^2) c (1 + 3 a x^2) / 2."""
    x2 = ops.sqr(x)
    t = ops.tanh(ops.scale(ops.mul(x, ops.scale(x2, GELU_COEF_A, 1.0)), SQRT_2_OVER_PI))
    slope = ops.mul(ops.mul(x, ops.scale(ops.sqr(t), -1.0, 1.0)), ops.scale(x2, 3.0 * GELU_COEF_A, 1.0))
    return ops.add(ops.scale(t, 0.5, 0.5), ops.scale(slope, 0.5 * SQRT_2_OVER_PI))


def _d_gelu_quick(y: Tensor, x: Tensor) -> Tensor:
    """y = x s with s = sigmoid(k x) (ggml has no rule): y' = s (1 + k x (1 - s))."""
    s = ops.sigmoid(ops.scale(x, GELU_QUICK_COEF))
    inner = ops.scale(ops.mul(x, ops.scale(s, -1.0, 1.0)), GELU_QUICK_COEF, 1.0)
    return ops.mul(s, inner)


DERIVATIVES: dict[Op | UnaryOp, Derivative] = {
    Op.SIN: lambda y, x: ops.cos(x),
    Op.LEAKY_RELU: _d_leaky_relu,
    Op.CLAMP: _d_clamp,
    UnaryOp.ABS: lambda y, x: ops.sgn(x),
    UnaryOp.RELU: lambda y, x: ops.step(x),
    UnaryOp.EXP: lambda y, x: y,
    UnaryOp.EXPM1: lambda y, x: ops.exp(x),
    UnaryOp.SOFTPLUS: lambda y, x: ops.sigmoid(x),
    UnaryOp.SIGMOID: lambda y, x: ops.sub(y, ops.sqr(y)),  # s (1 - s)
    UnaryOp.GELU: _d_gelu,
    UnaryOp.GELU_QUICK: _d_gelu_quick,
}
"""The element-wise ops (an Op, or a UNARY sub-op) y = f(x) whose gradient is the plain chain rule
grad(x) += g f'(x), each with its derivative f'. An element-wise op whose gradient is written another way is in
`TERMS` or `NEGATED_TERMS` instead: as a quotient (SQRT, LOG) or a difference (COS, NEG, TANH), which a product with
f' would round differently, or with a backward op (SILU_BACK)."""


def _spread(y: Tensor, x: Tensor, g: Tensor) -> Tensor:
    """SUM's and SUM_ROWS's term: every element of x gets the gradient of the sum it went into."""
    return ops.repeat(g, x)


TERMS: dict[Op | UnaryOp, Term] = {
    Op.SQR: lambda y, x, g: ops.scale(ops.mul(x, g), 2.0),
    Op.SQRT: lambda y, x, g: ops.scale(ops.div(g, y), 0.5),
    Op.LOG: lambda y, x, g: ops.div(g, x),
    Op.SCALE: lambda y, x, g: ops.scale(g, y.params.s),
    Op.DUP: lambda y, x, g: g,
    Op.SUM: _spread,
    Op.SUM_ROWS: _spread,
    Op.MEAN: lambda y, x, g: ops.repeat(ops.scale(g, 1.0 / x.ne[0]), x),
    Op.RMS_NORM: lambda y, x, g: ops.rms_norm_back(g, x, y.params.eps),
    UnaryOp.SILU: lambda y, x, g: ops.silu_back(g, x),
    UnaryOp.TANH: lambda y, x, g: ops.sub(g, ops.mul(g, ops.sqr(y))),  # g (1 - tanh^2)
}
"""The other ops of one source (an Op, or a UNARY sub-op) whose gradient is one term added to grad(x), each with
that term; RMS_NORM's and SILU's through the backward ops, as ggml's."""
NEGATED_TERMS: dict[Op | UnaryOp, Term] = {
    Op.COS: lambda y, x, g: ops.mul(g, ops.sin(x)),
    UnaryOp.NEG: lambda y, x, g: g,
}
"""Likewise, the ops whose term is taken from grad(x)."""


def _chain_rule(derivative: Derivative) -> RuleFn:
    """The rule grad(x) += g f'(x) of an element-wise op with derivative f'."""
    return _source_rule(lambda y, x, g: ops.mul(g, derivative(y, x)))


for _op, _derivative in DERIVATIVES.items():
    _register(_op, _chain_rule(_derivative))
for _op, _term in TERMS.items():
    _register(_op, _source_rule(_term))
for _op, _term in NEGATED_TERMS.items():
    _register(_op, _source_rule(_term, subtract=True))


# ---- norms ---------------------------------------------------------------------------------------------------------


@rule(Op.NORM)
def _norm(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """y = (x - mean x) / s with s = sqrt(var x + eps) per row: dx = (g - mean g - y mean(g y)) / s."""
    p: NormParams = node.params
    if not bp.needs(0):
        return
    x = _x(node)
    xc = ops.sub(x, ops.mean(x))
    s = ops.sqrt(ops.scale(ops.mean(ops.sqr(xc)), 1.0, p.eps))
    num = ops.sub(ops.sub(g, ops.mean(g)), ops.mul(node, ops.mean(ops.mul(g, node))))
    bp.add(0, ops.div(num, s))


# ---- matrix products ---------------------------------------------------------------------------------------------


@rule(Op.MUL_MAT)
def _mul_mat(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """y = mul_mat(a, b): y[i, j] = sum_k a[k, i] b[k, j] (ggml order). da = out_prod(b, g) summed over the
    batches a was broadcast to; db = out_prod(a, g^T)."""
    a, b = node.src[0], node.src[1]
    assert a is not None and b is not None
    if bp.needs(0):
        t = ops.out_prod(b, g)
        if t.ne != a.ne:
            if t.ne[3] != 1 or t.ne[0:2] != a.ne[0:2]:
                raise GradientError(f"MUL_MAT: the gradient of {describe(a)} broadcast over dim 3 of "
                                    f"{describe(b)} is not implemented (as in ggml)")
            nr2 = t.ne[2] // a.ne[2]
            # batch i2 of b used a's batch i2 // nr2: regroup t's batches as [.., a.ne2, nr2] and sum the repeats
            t = ops.view(t, (a.ne[0], a.ne[1], nr2, a.ne[2]), (t.nb[1], t.nb[2], t.nb[2] * nr2))
            t = ops.repeat_back(ops.cont(ops.permute(t, 0, 1, 3, 2)), a)
        bp.add(0, t)
    if bp.needs(1):
        bp.add(1, ops.out_prod(a, ops.transpose(g)))


@rule(Op.OUT_PROD)
def _out_prod(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """y = out_prod(a, b): y[i, j] = sum_k a[i, k] b[j, k]. da = out_prod(g, b^T); db = mul_mat(g, a)."""
    a, b = node.src[0], node.src[1]
    assert a is not None and b is not None
    if a.ne[2:] != b.ne[2:]:
        raise GradientError(f"OUT_PROD: gradients with broadcast batches ({describe(a)}, {describe(b)}) are not "
                            "implemented")
    if bp.needs(0):
        bp.add(0, ops.out_prod(g, ops.transpose(b)))
    if bp.needs(1):
        bp.add(1, ops.mul_mat(g, a))


# ---- UNARY and GLU -----------------------------------------------------------------------------------------------


@rule(Op.UNARY)
def _unary(node: Tensor, g: Tensor, bp: Backprop) -> None:  # dispatched by sub-op in rules.lookup
    raise AssertionError("UNARY rules are looked up per sub-op")


for _u in (UnaryOp.SGN, UnaryOp.STEP, UnaryOp.FLOOR, UnaryOp.CEIL, UnaryOp.ROUND, UnaryOp.TRUNC):
    UNARY_RULES[_u] = NO_GRADIENT


@rule(Op.GLU)
def _glu(node: Tensor, g: Tensor, bp: Backprop) -> None:  # dispatched by sub-op in rules.lookup
    raise AssertionError("GLU rules are looked up per sub-op")


@glu_rule(GluOp.SWIGLU)
def _swiglu(node: Tensor, g: Tensor, bp: Backprop) -> None:
    """silu(x) * gate. Split: x = src0, gate = src1 (exchanged when swapped). Fused (one source, which ggml does
    not differentiate): x and gate are the first and second halves of each row of src0 (exchanged when swapped),
    and src0's gradient is the two halves' gradients concatenated back."""
    p: GluParams = node.params
    if len(node.src) < 2 or node.src[1] is None:
        if bp.needs(0):
            a = _x(node)
            n = node.ne[0]
            halves = [ops.cont(ops.view(a, node.ne, a.nb[1:], k * n * a.nb[0])) for k in (0, 1)]
            x, gate = (halves[1], halves[0]) if p.swapped else (halves[0], halves[1])
            dx, dgate = ops.silu_back(ops.mul(g, gate), x), ops.mul(ops.silu(x), g)
            bp.add(0, ops.concat(dgate, dx, 0) if p.swapped else ops.concat(dx, dgate, 0))
        return
    ix, ig = (1, 0) if p.swapped else (0, 1)
    xs, gs = node.src[ix], node.src[ig]
    assert xs is not None and gs is not None
    if bp.needs(ix):
        bp.add(ix, ops.silu_back(ops.mul(g, gs), xs))
    if bp.needs(ig):
        bp.add(ig, ops.mul(ops.silu(xs), g))
