"""Layout ops: views (VIEW, RESHAPE, PERMUTE, TRANSPOSE), copies (DUP, CPY, CONT), REPEAT, CONCAT, PAD, SET,
ACC, DIAG, GET_ROWS, SET_ROWS, ARANGE."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyggml.errors import ShapeError
from pyggml.ops.base import (
    Op,
    ShapeRule,
    can_repeat,
    check_types,
    define,
    describe,
    fail,
    ne4,
    need,
    record,
    record_view,
    tiles,
)
from pyggml.tensor import Ne, Tensor, contiguous_strides
from pyggml.types import FLOAT_TYPES, GGMLType

if TYPE_CHECKING:  # the context module imports the ops; at run time arange only calls ctx.add_tensor
    from pyggml.context import Context

Srcs = tuple[Tensor | None, ...]
MAX_VIEW_BYTES = 1 << 62
INDEX_TYPES = frozenset({GGMLType.I32, GGMLType.I64})


@dataclass(frozen=True, slots=True)
class ViewParams:
    offset: int


@dataclass(frozen=True, slots=True)
class PermuteParams:
    axes: tuple[int, int, int, int]
    """src dim i becomes result dim axes[i] (ggml_permute's argument order)."""


# ---- views ------------------------------------------------------------------------------------------------


def _view(a: Tensor, op: Op, ne: Ne, nb: Ne, offset: int, params: object) -> Tensor:
    return record_view(op, (a,), a, ne, nb, offset, params)


define(Op.VIEW, (1, 1), None, ViewParams)
define(Op.RESHAPE, (1, 1), None)
define(Op.PERMUTE, (1, 1), None, PermuteParams)
define(Op.TRANSPOSE, (1, 1), None)


def _dims(op: Op, a: Tensor, ne: tuple[int, ...]) -> Ne:
    """`ne4(*ne)`, its ShapeError naming the op and its source."""
    try:
        return ne4(*ne)
    except ShapeError as e:
        raise fail(op, str(e), a) from None


def view(a: Tensor, ne: tuple[int, ...], nb: tuple[int, ...] | None = None, offset: int = 0) -> Tensor:
    """A view of `a` with shape ne, byte strides nb[1:] (nb[0] is the type size) and a byte offset.

    view(a, (n0,), offset=o) is ggml_view_1d; view(a, (n0, n1), (nb1,), o) is ggml_view_2d, and so on."""
    dims = _dims(Op.VIEW, a, ne)
    full = contiguous_strides(a.type, dims)
    strides = list(full)
    given = tuple(nb or ())
    if len(given) > len(ne) - 1:
        raise fail(Op.VIEW, f"{len(ne)}-d view takes {len(ne) - 1} strides, got {len(given)}", a)
    for i, s in enumerate(given):
        strides[i + 1] = _stride(a, i + 1, s)
    offset = _stride(a, -1, offset)
    for i in range(len(given) + 1, 4):
        strides[i] = strides[i - 1] * dims[i - 1]
    nb4: Ne = (strides[0], strides[1], strides[2], strides[3])
    probe = Tensor(a.type, dims, nb4, op=Op.VIEW)
    owner = a.data_owner
    if offset < 0 or a.view_offs + offset + probe.nbytes() > owner.nbytes():
        raise fail(Op.VIEW, f"view of {probe.nbytes()} bytes at offset {offset} is outside the data owner "
                   f"{describe(owner)} of {owner.nbytes()} bytes", a)
    return _view(a, Op.VIEW, dims, nb4, offset, ViewParams(offset))


def _stride(a: Tensor, dim: int, value: object, op: Op = Op.VIEW) -> int:
    """A view's byte stride nb[dim] (dim -1: its offset): an integer in [0, 2^62), so no size derived from it can
    wrap in a kernel's 64-bit arithmetic and the bounds check sees the real extent."""
    what = "offset" if dim < 0 else f"stride nb[{dim}]"
    try:
        v = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise fail(op, f"{what} must be an integer, got {value!r}", a) from None
    if not 0 <= v < MAX_VIEW_BYTES:
        raise fail(op, f"{what} = {v} is outside [0, 2^62)", a)
    unit = a.type.traits.type_size
    if v % unit:
        raise fail(op, f"{what} = {v} is not a multiple of the {a.type} element (block) size {unit}", a)
    return v


def reshape(a: Tensor, *ne: int) -> Tensor:
    """Same data, new shape (a must be contiguous, element counts equal)."""
    dims = _dims(Op.RESHAPE, a, ne)
    if not a.is_contiguous():
        raise fail(Op.RESHAPE, "src must be contiguous (use cont first)", a)
    if dims[0] * dims[1] * dims[2] * dims[3] != a.nelements():
        raise fail(Op.RESHAPE, f"cannot reshape {a.nelements()} elements to {list(dims)}", a)
    if dims[0] % a.type.traits.blck_size:
        raise fail(Op.RESHAPE, f"ne[0]={dims[0]} is not a multiple of the block size", a)
    return _view(a, Op.RESHAPE, dims, contiguous_strides(a.type, dims), 0, None)


def permute(a: Tensor, axis0: int, axis1: int, axis2: int, axis3: int) -> Tensor:
    """Source dim i moves to result dim axis_i (ggml_permute)."""
    axes = (axis0, axis1, axis2, axis3)
    if sorted(axes) != [0, 1, 2, 3]:
        raise fail(Op.PERMUTE, f"axes {list(axes)} are not a permutation of 0..3", a)
    ne = [0, 0, 0, 0]
    nb = [0, 0, 0, 0]
    for i, ax in enumerate(axes):
        ne[ax] = a.ne[i]
        nb[ax] = a.nb[i]
    return _view(a, Op.PERMUTE, (ne[0], ne[1], ne[2], ne[3]), (nb[0], nb[1], nb[2], nb[3]), 0,
                 PermuteParams(axes))


def transpose(a: Tensor) -> Tensor:
    """Swap dims 0 and 1 (a view)."""
    return _view(a, Op.TRANSPOSE, (a.ne[1], a.ne[0], a.ne[2], a.ne[3]), (a.nb[1], a.nb[0], a.nb[2], a.nb[3]), 0,
                 None)


# ---- copies -----------------------------------------------------------------------------------------------


def _dup(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.DUP, "src0")
    return a.type, a.ne


define(Op.DUP, (1, 1), _dup)


@dataclass(frozen=True, slots=True)
class ContParams:
    ne: Ne


def _cont(srcs: Srcs, params: ContParams | None) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.CONT, "src0")
    ne = params.ne if params is not None else a.ne
    if ne[0] * ne[1] * ne[2] * ne[3] != a.nelements():
        raise fail(Op.CONT, f"cannot lay {a.nelements()} elements out as {list(ne)}", a)
    return a.type, ne


define(Op.CONT, (1, 1), _cont, ContParams)


def _cpy(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.CPY, "src0")
    b = need(srcs[1], Op.CPY, "src1")
    if a.nelements() != b.nelements():
        raise fail(Op.CPY, "src and dst element counts differ", a, b)
    if b.type.traits.is_quantized and not b.is_contiguous():
        raise fail(Op.CPY, "a quantized destination must be contiguous", a, b)
    if a.type.traits.is_quantized and not a.is_contiguous():
        raise fail(Op.CPY, "a quantized source must be contiguous", a, b)
    return b.type, b.ne


define(Op.CPY, (2, 2), _cpy)


def dup(a: Tensor) -> Tensor:
    """A contiguous copy of a (same type and shape)."""
    return record(Op.DUP, (a,))


def cont(a: Tensor, *ne: int) -> Tensor:
    """A contiguous copy of a, optionally laid out with a new shape ne (ggml_cont_Nd)."""
    return record(Op.CONT, (a,), ContParams(_dims(Op.CONT, a, ne)) if ne else None)


def cpy(a: Tensor, b: Tensor) -> Tensor:
    """Copy a's elements (converting type, quantizing if b is quantized) into b; the result is a view of b."""
    _cpy((a, b), None)
    return record_view(Op.CPY, (a, b), b, b.ne, b.nb, 0)


# ---- repeat, concat, pad --------------------------------------------------------------------------------------


def _repeat(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.REPEAT, "src0")
    b = need(srcs[1], Op.REPEAT, "src1")
    if not can_repeat(a, b):
        raise fail(Op.REPEAT, "src1's shape must be a whole multiple of src0's in every dim", a, b)
    return a.type, b.ne


define(Op.REPEAT, (2, 2), _repeat)


def repeat(a: Tensor, b: Tensor) -> Tensor:
    """Tile a to b's shape (only b's shape is used)."""
    return record(Op.REPEAT, (a, b))


@dataclass(frozen=True, slots=True)
class ConcatParams:
    dim: int


def _concat(srcs: Srcs, params: ConcatParams) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.CONCAT, "src0")
    b = need(srcs[1], Op.CONCAT, "src1")
    d = params.dim
    if not 0 <= d < 4:
        raise fail(Op.CONCAT, f"dim {d} is outside 0..3", a, b)
    if a.type != b.type:
        raise fail(Op.CONCAT, "srcs must have the same type", a, b)
    if any(a.ne[i] != b.ne[i] for i in range(4) if i != d):
        raise fail(Op.CONCAT, f"srcs must agree in every dim but {d}", a, b)
    ne = list(a.ne)
    ne[d] += b.ne[d]
    return a.type, (ne[0], ne[1], ne[2], ne[3])


define(Op.CONCAT, (2, 2), _concat, ConcatParams)


def concat(a: Tensor, b: Tensor, dim: int) -> Tensor:
    return record(Op.CONCAT, (a, b), ConcatParams(dim))


@dataclass(frozen=True, slots=True)
class PadParams:
    lp: tuple[int, int, int, int]
    rp: tuple[int, int, int, int]


def _pad(srcs: Srcs, params: PadParams) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.PAD, "src0", frozenset({GGMLType.F32}))
    if any(x < 0 for x in params.lp + params.rp):
        raise fail(Op.PAD, f"negative padding {params}", a)
    lp, rp, n = params.lp, params.rp, a.ne
    return a.type, (n[0] + lp[0] + rp[0], n[1] + lp[1] + rp[1], n[2] + lp[2] + rp[2], n[3] + lp[3] + rp[3])


define(Op.PAD, (1, 1), _pad, PadParams)


def pad(a: Tensor, p0: int = 0, p1: int = 0, p2: int = 0, p3: int = 0) -> Tensor:
    """Zero-pad at the end of each dim."""
    return pad_ext(a, rp=(p0, p1, p2, p3))


def pad_ext(a: Tensor, lp: tuple[int, int, int, int] = (0, 0, 0, 0),
            rp: tuple[int, int, int, int] = (0, 0, 0, 0)) -> Tensor:
    """Zero-pad lp[i] elements before and rp[i] after each dim i."""
    return record(Op.PAD, (a,), PadParams(lp, rp))


# ---- set, acc, diag -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AccParams:
    """Write (SET) or add (ACC) src1 into a view of src0 with these strides and byte offset."""

    nb1: int
    nb2: int
    nb3: int
    offset: int


def _acc(op: Op) -> ShapeRule:
    def infer(srcs: Srcs, params: AccParams) -> tuple[GGMLType, Ne]:
        a = need(srcs[0], op, "src0", FLOAT_TYPES)
        b = need(srcs[1], op, "src1")
        if b.type != a.type and op is Op.SET:
            raise fail(op, "src1 must have src0's type", a, b)
        if not a.is_contiguous():
            raise fail(op, "src0 must be contiguous", a, b)
        for dim, v in ((1, params.nb1), (2, params.nb2), (3, params.nb3), (-1, params.offset)):
            _stride(a, dim, v, op)
        es = a.type.traits.type_size
        last = params.offset + (b.ne[0] - 1) * es + (b.ne[1] - 1) * params.nb1 + (b.ne[2] - 1) * params.nb2 \
            + (b.ne[3] - 1) * params.nb3 + es
        if params.offset < 0 or last > a.nbytes():
            raise fail(op, f"the view written ({params}) reaches byte {last} of {a.nbytes()}", a, b)
        return a.type, a.ne

    return infer


define(Op.SET, (2, 2), _acc(Op.SET), AccParams)
define(Op.ACC, (2, 2), _acc(Op.ACC), AccParams)


def set_(a: Tensor, b: Tensor, nb1: int, nb2: int, nb3: int, offset: int, *, inplace: bool = False) -> Tensor:
    """a with the view (a's element size, nb1..nb3 byte strides, byte offset) overwritten by b."""
    return record(Op.SET, (a, b), AccParams(nb1, nb2, nb3, offset), inplace=inplace)


def acc(a: Tensor, b: Tensor, nb1: int, nb2: int, nb3: int, offset: int, *, inplace: bool = False) -> Tensor:
    """a with b added into the view (nb1..nb3 byte strides, byte offset)."""
    return record(Op.ACC, (a, b), AccParams(nb1, nb2, nb3, offset), inplace=inplace)


def _diag(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.DIAG, "src0", frozenset({GGMLType.F32}))
    if a.ne[1] != 1:
        raise fail(Op.DIAG, "src0 must be a row vector (ne[1] == 1)", a)
    return a.type, (a.ne[0], a.ne[0], a.ne[2], a.ne[3])


define(Op.DIAG, (1, 1), _diag)


def diag(a: Tensor) -> Tensor:
    """Square matrices with a's rows on their diagonals."""
    return record(Op.DIAG, (a,))


# ---- rows -----------------------------------------------------------------------------------------------------


def _get_rows(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.GET_ROWS, "src0")
    b = need(srcs[1], Op.GET_ROWS, "src1")
    check_types(Op.GET_ROWS, b, frozenset({GGMLType.I32}), "src1 (row ids)")
    if a.ne[2] != b.ne[1] or b.ne[3] != 1 or a.ne[3] != b.ne[2]:
        raise fail(Op.GET_ROWS, "ids must be [n, src0.ne[2], src0.ne[3]]", a, b)
    out = GGMLType.I32 if a.type == GGMLType.I32 else GGMLType.F32
    return out, (a.ne[0], b.ne[0], b.ne[1], b.ne[2])


define(Op.GET_ROWS, (2, 2), _get_rows)


def get_rows(a: Tensor, ids: Tensor) -> Tensor:
    """Rows a[ids] as float32 (dequantized), per batch: result[:, i, j, k] = a[:, ids[i, j, k], j, k]."""
    return record(Op.GET_ROWS, (a, ids))


def _set_rows(srcs: Srcs, params: object) -> tuple[GGMLType, Ne]:
    a = need(srcs[0], Op.SET_ROWS, "src0 (destination)")
    b = need(srcs[1], Op.SET_ROWS, "src1 (rows)", frozenset({GGMLType.F32}))
    c = need(srcs[2], Op.SET_ROWS, "src2 (row ids)", INDEX_TYPES)
    if a.ne[0] != b.ne[0] or b.ne[1] != c.ne[0] or a.ne[2] != b.ne[2] or a.ne[3] != b.ne[3]:
        raise fail(Op.SET_ROWS, "rows must be [dst.ne0, n, dst.ne2, dst.ne3] with ids [n, ...]", a, b, c)
    if c.ne[3] != 1 or not (tiles(b.ne[2], c.ne[1]) and tiles(b.ne[3], c.ne[2])):
        raise fail(Op.SET_ROWS, "ids' dims 1 and 2 must broadcast into the rows' dims 2 and 3", b, c)
    if not b.is_contiguous_rows() or not a.is_contiguous_rows():
        raise fail(Op.SET_ROWS, "rows must be contiguous", a, b)
    return a.type, a.ne


define(Op.SET_ROWS, (3, 3), _set_rows)


def set_rows(a: Tensor, b: Tensor, ids: Tensor) -> Tensor:
    """a[ids[i]] = b[i] (converted to a's type) per batch; the result is a view of a (ggml_set_rows)."""
    _set_rows((a, b, ids), None)
    return record_view(Op.SET_ROWS, (a, b, ids), a, a.ne, a.nb, 0)


# ---- generators ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArangeParams:
    start: float
    stop: float
    step: float


define(Op.ARANGE, (0, 0), None, ArangeParams)


def arange(ctx: Context, start: float, stop: float, step: float = 1.0) -> Tensor:
    """float32 [start, start+step, ...) below stop, recorded in `ctx` (the one op without a src to take its
    context from)."""
    if step == 0 or (stop - start) / step < 0:
        raise fail(Op.ARANGE, f"start={start}, stop={stop}, step={step} gives no sequence")
    n = int(-(-(stop - start) // step))
    t = Tensor(GGMLType.F32, (n, 1, 1, 1), op=Op.ARANGE, params=ArangeParams(start, stop, step), ctx=ctx)
    ctx.add_tensor(t)
    return t
