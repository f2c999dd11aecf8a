"""The op table: one OpDef per op (arity, params dataclass, shape rule, in-place ability), and `record`, the
single path by which every op constructor creates a lazy node.

Op semantics live in two places only: the OpDef's shape rule here (with the constructor that documents it) and the
numpy reference kernel in `pyggml.reference`. Backends derive their support from this table.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum, auto
from typing import Any

from pyggml.errors import PyGGMLError, ShapeError, UnsupportedTypeError
from pyggml.tensor import Ne, Tensor, context_for
from pyggml.types import GGMLType


class Op(Enum):
    NONE = auto()
    DUP = auto()
    ADD = auto()
    ADD_ID = auto()
    ADD1 = auto()
    ACC = auto()
    SUB = auto()
    MUL = auto()
    DIV = auto()
    SQR = auto()
    SQRT = auto()
    LOG = auto()
    SIN = auto()
    COS = auto()
    SUM = auto()
    SUM_ROWS = auto()
    CUMSUM = auto()
    MEAN = auto()
    ARGMAX = auto()
    COUNT_EQUAL = auto()
    REPEAT = auto()
    REPEAT_BACK = auto()
    CONCAT = auto()
    SILU_BACK = auto()
    NORM = auto()
    RMS_NORM = auto()
    RMS_NORM_BACK = auto()
    GROUP_NORM = auto()
    L2_NORM = auto()
    MUL_MAT = auto()
    MUL_MAT_ID = auto()
    OUT_PROD = auto()
    SCALE = auto()
    SET = auto()
    CPY = auto()
    CONT = auto()
    RESHAPE = auto()
    VIEW = auto()
    PERMUTE = auto()
    TRANSPOSE = auto()
    GET_ROWS = auto()
    GET_ROWS_BACK = auto()
    SET_ROWS = auto()
    DIAG = auto()
    DIAG_MASK_INF = auto()
    DIAG_MASK_ZERO = auto()
    SOFT_MAX = auto()
    SOFT_MAX_BACK = auto()
    ROPE = auto()
    ROPE_BACK = auto()
    CLAMP = auto()
    CONV_TRANSPOSE_1D = auto()
    IM2COL = auto()
    IM2COL_BACK = auto()
    IM2COL_3D = auto()
    COL2IM_1D = auto()
    CONV_2D = auto()
    CONV_3D = auto()
    CONV_2D_DW = auto()
    CONV_TRANSPOSE_2D = auto()
    ARANGE = auto()
    POOL_1D = auto()
    POOL_2D = auto()
    POOL_2D_BACK = auto()
    UPSCALE = auto()
    PAD = auto()
    PAD_REFLECT_1D = auto()
    ROLL = auto()
    TIMESTEP_EMBEDDING = auto()
    ARGSORT = auto()
    TOP_K = auto()
    LEAKY_RELU = auto()
    TRI = auto()
    FILL = auto()
    FLASH_ATTN_EXT = auto()
    SSM_CONV = auto()
    SSM_SCAN = auto()
    WIN_PART = auto()
    WIN_UNPART = auto()
    GET_REL_POS = auto()
    ADD_REL_POS = auto()
    RWKV_WKV6 = auto()
    GATED_LINEAR_ATTN = auto()
    RWKV_WKV7 = auto()
    SOLVE_TRI = auto()
    GATED_DELTA_NET = auto()
    LIGHTNING_INDEXER = auto()
    DSV4_HC_COMB = auto()
    DSV4_HC_PRE = auto()
    DSV4_HC_POST = auto()
    UNARY = auto()
    MAP_CUSTOM1 = auto()
    MAP_CUSTOM2 = auto()
    MAP_CUSTOM3 = auto()
    CUSTOM = auto()
    CROSS_ENTROPY_LOSS = auto()
    CROSS_ENTROPY_LOSS_BACK = auto()
    OPT_STEP_ADAMW = auto()
    OPT_STEP_SGD = auto()
    GLU = auto()


VIEW_OPS = frozenset({Op.VIEW, Op.RESHAPE, Op.PERMUTE, Op.TRANSPOSE})
"""Ops that do no work: the result is a view of src[0]'s data (ggml_op_is_empty, with NONE)."""

ShapeRule = Callable[[tuple[Tensor | None, ...], Any], tuple[GGMLType, Ne]]


@dataclass(frozen=True, slots=True)
class OpDef:
    op: Op
    n_src: tuple[int, int]
    """(required, maximum) number of src slots; optional slots may hold None."""
    params: type | None
    """The params dataclass the node carries (None: the op has no params)."""
    infer: ShapeRule | None
    """Validates srcs/params and returns the result (type, ne); None for view ops, which build themselves."""
    can_inplace: bool = False
    """ggml's in-place list: the graph allocator may give the result the memory of a dying src (users may ask
    for an in-place result of other element-wise ops too: that is a view of src[0], decided at build time)."""

    @property
    def name(self) -> str:
        return self.op.name


OPS: dict[Op, OpDef] = {}


def define(
    op: Op,
    n_src: tuple[int, int],
    infer: ShapeRule | None,
    params: type | None = None,
    *,
    can_inplace: bool = False,
) -> OpDef:
    d = OpDef(op, n_src, params, infer, can_inplace)
    OPS[op] = d
    return d


def record(
    op: Op,
    srcs: tuple[Tensor | None, ...],
    params: Any = None,
    *,
    inplace: bool = False,
) -> Tensor:
    """Validate through the op's shape rule and create the lazy result node (a view of src[0] when in place)."""
    d = OPS[op]
    a = srcs[0]
    if a is None:
        raise ShapeError(f"{op.name}: src[0] is required")
    infer = d.infer
    assert infer is not None
    try:
        ttype, ne = infer(srcs, params)
    except PyGGMLError:
        raise
    except (ArithmeticError, ValueError, TypeError) as e:  # a shape rule tripped on what it did not expect
        raise fail(op, f"invalid sources or params ({type(e).__name__}: {e})", *srcs) from e
    while srcs and srcs[-1] is None:
        srcs = srcs[:-1]
    if inplace:
        if ttype != a.type or ne != a.ne:
            raise ShapeError(f"{op.name} in place: result {ttype} {list(ne)} differs from src[0] {describe(a)}")
        if overlapping(a):
            raise ShapeError(f"{op.name} in place: src[0] {describe(a)} nb={list(a.nb)} has elements that share "
                             "bytes (a stride of 0 or smaller than what it steps over); the result would depend on "
                             "the order the backend writes them in")
        return record_view(op, srcs, a, a.ne, a.nb, 0, params)
    ctx = context_for(a)
    if ctx is None:
        raise ShapeError(f"{op.name}: src '{a.name}' belongs to no context")
    t = Tensor(ttype, ne, op=op, params=params, src=srcs, ctx=ctx)
    ctx.add_tensor(t)
    return t


def overlapping(t: Tensor) -> bool:
    """Whether two elements of t may share bytes: taken by increasing stride, each dim of more than one element
    (dim 0 in blocks) must step at least over everything the smaller strides span. (A conservative test: an
    interleaving that happens not to collide also counts, which no op's destination needs.)"""
    if t.nelements() == 0:
        return False
    tr = t.type.traits
    counts = (t.ne[0] // tr.blck_size if tr.blck_size > 1 else t.ne[0], *t.ne[1:])
    span = tr.type_size
    for nb, n in sorted((nb, n) for nb, n in zip(t.nb, counts, strict=True) if n > 1):
        if nb < span:
            return True
        span += nb * (n - 1)
    return False


def record_view(op: Op, srcs: tuple[Tensor | None, ...], of: Tensor, ne: Ne, nb: Ne, offset: int,
                params: Any = None) -> Tensor:
    """A node whose result is a view of `of`'s data at byte `offset` (views, CPY, SET_ROWS, in-place results);
    view_src is always the root data owner."""
    first = srcs[0]
    assert first is not None
    ctx = context_for(first)
    if ctx is None:
        raise ShapeError(f"{op.name}: src '{first.name}' belongs to no context")
    owner = of.view_src if of.view_src is not None else of
    t = Tensor(of.type, ne, nb, op=op, params=params, src=srcs, view_src=owner, view_offs=of.view_offs + offset,
               ctx=ctx)
    if of.name:
        t.name = f"{of.name} ({op.name.lower()})"
    ctx.add_tensor(t)
    return t


# ---- helpers for shape rules and messages -----------------------------------------------------------------


def describe(t: Tensor | None) -> str:
    if t is None:
        return "None"
    name = f"'{t.name}' " if t.name else ""
    return f"{name}{t.type} ne={list(t.ne)}"


def fail(op: Op, msg: str, *tensors: Tensor | None) -> ShapeError:
    parts = ", ".join(describe(t) for t in tensors)
    return ShapeError(f"{op.name}: {msg}" + (f" ({parts})" if parts else ""))


def need(t: Tensor | None, op: Op, slot: str, allowed: frozenset[GGMLType] | None = None) -> Tensor:
    """The tensor in `slot`, which must be present and, when `allowed` is given, of one of those types."""
    if t is None:
        raise ShapeError(f"{op.name}: {slot} is required")
    if allowed is not None:
        check_types(op, t, allowed, slot)
    return t


def check_types(op: Op, t: Tensor, allowed: frozenset[GGMLType], slot: str) -> None:
    if t.type not in allowed:
        names = ", ".join(sorted(str(x) for x in allowed))
        raise UnsupportedTypeError(f"{op.name}: {slot} {describe(t)} must be one of {names}")


def tiles(big: int, small: int) -> bool:
    """big is a whole multiple of small (a zero-size dim tiles only a zero-size one)."""
    return big % small == 0 if small else big == 0


def can_repeat(small: Tensor, big: Tensor) -> bool:
    """ggml_can_repeat: every dim of `big` is a whole multiple of `small`'s."""
    s, b = small.ne, big.ne
    if 0 in s:
        return 0 in b and s == b
    return b[0] % s[0] == 0 and b[1] % s[1] == 0 and b[2] % s[2] == 0 and b[3] % s[3] == 0


def ne4(*ne: int) -> Ne:
    if not 1 <= len(ne) <= 4:
        raise ShapeError(f"a tensor has 1 to 4 dimensions, got {len(ne)}")
    try:
        dims = tuple(operator.index(n) for n in ne)
    except TypeError:
        raise ShapeError(f"dimensions must be integers, got {list(ne)}") from None
    if any(n < 0 for n in dims):
        raise ShapeError(f"dimensions must be non-negative, got {list(dims)}")
    dims = (*dims, 1, 1, 1)
    return (dims[0], dims[1], dims[2], dims[3])
