"""Recipes of element-wise ops: every same-shaped op (also through ggml's `_inplace` constructor, a view of the src
with an op), binary ops, ADD1, GLU, ACC and SET, CPY, and the training ops that ggml may run in place. Each takes
the Pool and the tensor `a` it was drawn for and returns its result, or None when it does not apply to `a`."""

from __future__ import annotations

from pyggml import ops
from pyggml_testing.alloc_twin.ggml import Twin
from pyggml_testing.alloc_twin.pool import F16, F32, Pool

SAME_SHAPE: tuple[tuple[str, str, tuple[float | int, ...], bool], ...] = (
    ("silu", "silu", (), True), ("gelu", "gelu", (), True), ("gelu_quick", "gelu_quick", (), True),
    ("gelu_erf", "gelu_erf", (), True), ("tanh", "tanh", (), True), ("neg", "neg", (), True),
    ("abs", "abs_", (), True), ("sgn", "sgn", (), True), ("step", "step", (), True), ("relu", "relu", (), True),
    ("elu", "elu", (), True), ("sigmoid", "sigmoid", (), True), ("exp", "exp", (), True),
    ("hardswish", "hardswish", (), False), ("hardsigmoid", "hardsigmoid", (), False),
    ("floor", "floor", (), True), ("ceil", "ceil", (), True), ("round", "round_", (), True),
    ("trunc", "trunc", (), True), ("softplus", "softplus", (), True), ("expm1", "expm1", (), True),
    ("xielu", "xielu", (0.8, 0.8, 0.5, 1e-6), False),
    ("sqr", "sqr", (), True), ("sqrt", "sqrt", (), True), ("log", "log", (), True), ("sin", "sin", (), True),
    ("cos", "cos", (), True), ("scale", "scale", (0.5,), True), ("scale_bias", "scale", (0.5, 0.25), True),
    ("clamp", "clamp", (-0.5, 1.25), True), ("norm", "norm", (1e-5,), True), ("rms_norm", "rms_norm", (1e-6,), True),
    ("l2_norm", "l2_norm", (1e-12,), True), ("group_norm", "group_norm", (1, 1e-6), False),
    ("diag_mask_inf", "diag_mask_inf", (0,), True), ("diag_mask_zero", "diag_mask_zero", (1,), True),
    ("soft_max", "soft_max", (), True), ("fill", "fill", (0.75,), True), ("cumsum", "cumsum", (), False),
)
"""Ops whose result has src0's shape: (ggml name, pyggml function, arguments after the tensor, whether ggml has
an `_inplace` constructor)."""
BINARY = ("add", "sub", "mul", "div")
GLU = ("swiglu", "geglu", "reglu")


def op_args() -> dict[str, str]:
    """Argument kinds (see ggml.OP_ARGS) of the ggml constructors of this module's tables."""
    out: dict[str, str] = {}
    for gg, _, args, inplace in SAME_SHAPE:
        kinds = "t" + "".join("f" if isinstance(a, float) else "i" for a in args)
        out[gg] = kinds
        if inplace:
            out[f"{gg}_inplace"] = kinds
    for name in (*BINARY, "add1"):
        out[name] = out[f"{name}_inplace"] = "tt"
    for name in GLU:
        out[name], out[f"{name}_split"] = "t", "tt"
    out["leaky_relu"] = "tfb"
    return out


def _suffix(inplace: bool) -> str:
    return "_inplace" if inplace else ""


def same_shape(g: Pool, a: Twin) -> Twin | None:
    if g.chance(0.05):
        inplace = g.chance(0.15)
        return g.both(ops.leaky_relu(a.py, 0.1, inplace=inplace), "leaky_relu", a, 0.1, inplace)
    gg, py, args, has_inplace = g.choice(SAME_SHAPE)
    inplace = has_inplace and g.chance(0.15)
    fn = getattr(ops, py)
    t = fn(a.py, *args, inplace=True) if inplace else fn(a.py, *args)
    return g.both(t, gg + _suffix(inplace), a, *args)


def binary(g: Pool, a: Twin) -> Twin | None:
    """A binary op with a same-shaped operand (a pool tensor or a leaf; either may come first) or a broadcast one;
    ADD1 with a scalar leaf or a SUM."""
    ne = a.py.ne
    inplace = g.chance(0.15)
    kind = g.rng.random()
    if kind < 0.1:
        s = sum_of(g, a) if g.chance(0.3) else g.leaf((1,), ("input", "const", "weight"), (0.4, 0.3, 0.3))
        return g.both(ops.add1(a.py, s.py, inplace=inplace), "add1" + _suffix(inplace), a, s)
    if kind < 0.5:
        other = g.operand(ne)
    else:
        other = g.leaf((ne[0], 1) if kind < 0.75 else ne[:2], ("weight", "input", "const"), (0.6, 0.2, 0.2))
    x, y = (other, a) if other.py.ne == ne and g.chance(0.5) else (a, other)
    name = g.choice(BINARY)
    return g.both(getattr(ops, name)(x.py, y.py, inplace=inplace), name + _suffix(inplace), x, y)


def sum_of(g: Pool, a: Twin) -> Twin:
    """SUM of a: a scalar that ends a branch or feeds ADD1."""
    return g.both(ops.sum(a.py), "sum", a, pool=False)


def glu(g: Pool, a: Twin) -> Twin | None:
    """SWIGLU, GEGLU, REGLU fused (halves of a's rows) or split (a second same-shaped operand); SWIGLU_OAI."""
    name = g.choice(GLU)
    r = g.rng.random()
    if r < 0.4:
        if a.py.ne[0] % 2:
            return None
        return g.both(getattr(ops, name)(a.py), name, a)
    b = g.operand(a.py.ne)
    if r < 0.8:
        return g.both(getattr(ops, name)(a.py, b.py), f"{name}_split", a, b)
    return g.both(ops.swiglu_oai(a.py, b.py, 1.702, 7.0), "swiglu_oai", a, b, 1.702, 7.0)


def copy(g: Pool, a: Twin) -> Twin | None:
    """CPY into a new F32 or F16 tensor or into a same-shaped intermediate; an F16 result comes back to F32
    through CPY or GET_ROWS."""
    ne, r = a.py.ne, g.rng.random()
    into = g.peer(a) if r < 0.3 else None
    into = into or g.leaf(ne, ("const", "input"), (0.8, 0.2), F16 if r < 0.7 else F32)
    t = g.both(ops.cpy(a.py, into.py), "cpy", a, into, pool=into.py.type == F32)
    if t.py.type == F32:
        return t
    if g.chance(0.5) and ne[3] == 1:
        ids = g.ids((int(g.rng.integers(1, 9)), ne[2]), ne[1])
        return g.both(ops.get_rows(t.py, ids.py), "get_rows", t, ids)
    dst = g.leaf(ne, ("const",), (1.0,))
    return g.both(ops.cpy(t.py, dst.py), "cpy", t, dst)


def acc_set(g: Pool, a: Twin) -> Twin | None:
    """ACC or SET of a smaller tensor into rows of a (also in place)."""
    ne = a.py.ne
    if ne[2] != 1 or ne[1] < 2:
        return None
    n = int(g.rng.integers(1, ne[1]))
    first = int(g.rng.integers(0, ne[1] - n + 1))
    b = g.operand((ne[0], n, 1, 1), ("input", "const", "weight"), (0.4, 0.3, 0.3))
    name = g.choice(("acc", "set"))
    inplace = g.chance(0.3)
    _, nb1, nb2, nb3 = a.py.nb
    fn = ops.acc if name == "acc" else ops.set_
    return g.both(fn(a.py, b.py, nb1, nb2, nb3, first * nb1, inplace=inplace), name + _suffix(inplace),
                  a, b, nb1, nb2, nb3, first * nb1)


def backward(g: Pool, a: Twin) -> Twin | None:
    """The training ops ggml may run in place (SILU_BACK, RMS_NORM_BACK, SOFT_MAX_BACK, ROPE_BACK), the
    CROSS_ENTROPY_LOSS pair, GET_ROWS_BACK."""
    ne, r = a.py.ne, g.rng.random()
    if r < 0.6:
        b = g.operand(ne)
        if r < 0.2:
            return g.both(ops.silu_back(a.py, b.py), "silu_back", a, b)
        if r < 0.4:
            return g.both(ops.rms_norm_back(a.py, b.py, 1e-6), "rms_norm_back", a, b, 1e-6)
        return g.both(ops.soft_max_ext_back(a.py, b.py, 0.5, 0.0), "soft_max_ext_back", a, b, 0.5, 0.0)
    if r < 0.75:
        if ne[0] % 2 or ne[2] < 2:
            return None
        pos = g.ids((ne[2],), 1 << 10)
        n_dims = g.choice([d for d in (2, 4, ne[0]) if d <= ne[0]])
        return g.both(ops.rope_back(a.py, pos.py, ops.RopeParams(n_dims, 0)), "rope_ext_back", a, pos, None,
                      n_dims, 0, 0, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0)
    if r < 0.9:
        b = g.operand(ne)
        loss = g.both(ops.cross_entropy_loss(a.py, b.py), "cross_entropy_loss", a, b, pool=False)
        return g.both(ops.cross_entropy_loss_back(loss.py, a.py, b.py), "cross_entropy_loss_back", loss, a, b)
    if ne[2] != 1 or ne[1] < 2:
        return None
    rows = g.ids((ne[1],), 2 * ne[1])
    like = g.operand((ne[0], 2 * ne[1], 1, 1), ("const",), (1.0,))
    return g.both(ops.get_rows_back(a.py, rows.py, like.py), "get_rows_back", a, rows, like)
