"""Tensor: ggml's tensor record (type, ne, nb, op, params, srcs, view, flags, buffer + offset).

A Tensor is metadata. Its data lives in a backend `Buffer` at `offset` once something (a context with memory,
the graph allocator, a weights loader) places it there. ne[0] is the innermost dimension, as in ggml;
`shape` gives the numpy order.
"""

from __future__ import annotations

from contextvars import ContextVar
from enum import IntFlag
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from pyggml.errors import AllocationError, ShapeError, UnsupportedTypeError
from pyggml.serial import PLACEMENT, new_serial
from pyggml.tensor_operators import TensorOperators
from pyggml.types import GGMLType, from_f32, to_f32, type_traits

if TYPE_CHECKING:
    from typing_extensions import CapsuleType

    from pyggml.backend.protocol import Buffer
    from pyggml.context import Context
    from pyggml.ops.base import Op

MAX_DIMS = 4
MAX_SRC = 10
MAX_NAME = 64

Ne = tuple[int, int, int, int]

INT64_MAX = (1 << 63) - 1
"""ggml counts elements and bytes in int64_t (ggml_nelements, ggml_nbytes), and so do the compiled kernels: a
tensor whose counts do not fit is refused where it is recorded (`check_extent`)."""

ACTIVE_CONTEXT: ContextVar[Context | None] = ContextVar("pyggml_active_context", default=None)
"""The context entered with `with ctx:`; op results are created there (see `context_for`)."""


def context_for(src: Tensor) -> Context | None:
    """Where a node built from `src` goes: the context entered with `with ctx:`, else src's own context."""
    active = ACTIVE_CONTEXT.get()
    return active if active is not None else src.ctx


def check_extent(t: Tensor) -> None:
    """ShapeError unless every count of `t` fits int64 (INT64_MAX): its element count, each ne[i] * nb[i] and the
    bytes it spans (nbytes), and, for a view of an element type, unless those bytes lie inside its data owner.
    `Context.add_tensor` runs it for every tensor recorded (leaves, op results, views), so no backend ever sees
    a count its 64-bit arithmetic would wrap (a view of 4 floats as ne=[4, 2^62] with nb[1] = 0 has 2^64
    elements). Block-type views are bounded by `ops.view` itself, whose extent rule knows their blocks."""
    ne, nb = t.ne, t.nb
    n = ne[0] * ne[1] * ne[2] * ne[3]
    if n > INT64_MAX:
        raise ShapeError(f"{_what(t)} has {n} elements, more than int64 counts (2^63 - 1){_from(t)}")
    size = t.nbytes()
    if t.view_offs + size > INT64_MAX:
        raise ShapeError(f"{_what(t)} spans {size} bytes at offset {t.view_offs}, more than int64 counts "
                         f"(2^63 - 1){_from(t)}")
    dim = next((i for i in range(MAX_DIMS) if ne[i] * nb[i] > INT64_MAX), None)
    if dim is not None:
        raise ShapeError(f"{_what(t)}: ne[{dim}] * nb[{dim}] = {ne[dim] * nb[dim]} bytes, more than int64 counts "
                         f"(2^63 - 1){_from(t)}")
    owner = t.view_src
    if owner is not None and type_traits(t.type).blck_size == 1 and n > 0 and t.view_offs + size > owner.nbytes():
        raise ShapeError(f"{_what(t)}: a view of {size} bytes at offset {t.view_offs} lies outside its data owner "
                         f"{_describe(owner)} of {owner.nbytes()} bytes{_from(t)}")


def label(t: Tensor) -> str:
    """How messages name a tensor: `'name'`, or what it is when it has no name (`<unnamed ADD node>`,
    `<unnamed leaf>`, `<unnamed view>`)."""
    if t.name:
        return f"'{t.name}'"
    if t.op.name != "NONE":
        return f"<unnamed {t.op.name} node>"
    return "<unnamed view>" if t.view_src is not None else "<unnamed leaf>"


def _describe(t: Tensor) -> str:
    name = f"'{t.name}' " if t.name else ""
    return f"{name}{t.type} ne={list(t.ne)}"


def _what(t: Tensor) -> str:
    op = "new tensor" if t.op.name == "NONE" and t.view_src is None else t.op.name
    return f"{op}: tensor {_describe(t)} nb={list(t.nb)}"


def _from(t: Tensor) -> str:
    srcs = [s for s in t.src if s is not None]
    return f" (sources: {', '.join(_describe(s) for s in srcs)})" if srcs else ""


def _placement_hint(t: Tensor) -> str:
    """What to call so that `t` gets memory (and, for a node, a value)."""
    if t.op.name == "NONE" and t.view_src is None:
        return ("place it first: alloc_ctx_tensors(ctx, buffer_type) for weights and other tensors that keep "
                "their values, or (a graph input) Scheduler.alloc_graph(graph) / GraphAllocator.alloc_graph(graph)")
    return ("it is a node of a graph: place the graph with Scheduler.alloc_graph(graph) (or "
            "GraphAllocator.alloc_graph(graph)), run it with Scheduler.graph_compute(graph), then read it; mark it "
            "set_output() so that later nodes do not reuse its memory")


class TensorFlag(IntFlag):
    INPUT = 1
    OUTPUT = 2
    PARAM = 4
    LOSS = 8
    COMPUTE = 16


def contiguous_strides(t: GGMLType, ne: Ne) -> Ne:
    tr = type_traits(t)
    nb0 = tr.type_size
    nb1 = nb0 * (ne[0] // tr.blck_size)
    nb2 = nb1 * ne[1]
    return (nb0, nb1, nb2, nb2 * ne[2])


class Tensor(TensorOperators):
    """One node or leaf of a compute graph. Create tensors through a `Context` or the `pyggml.ops` functions; the
    Python operators (`+ - * / @`, `.T`) record ops with numpy's meaning (`pyggml.tensor_operators`)."""

    __slots__ = (
        "__weakref__",
        "_buffer",
        "_offset",
        "_src",
        "ctx",
        "extra",
        "flags",
        "name",
        "nb",
        "ne",
        "op",
        "params",
        "serial",
        "type",
        "view_offs",
        "view_src",
        "written",
    )

    type: GGMLType
    ne: Ne
    nb: Ne
    op: Op
    params: Any
    view_src: Tensor | None
    view_offs: int
    flags: TensorFlag
    name: str
    ctx: Context | None
    serial: int
    """Never reused in this process (`pyggml.serial`): what caches that outlive a call key on, not `id()`."""
    extra: Any
    written: bool
    """Whether data was written into this tensor's memory since the graph allocator (or the scheduler) last
    placed it or a compute consumed it: set by `mark_written` (Tensor.set, Buffer.set_tensor / memset_tensor,
    tensor_copy, every write path of the backends); the scheduler refuses to compute a graph whose inputs are
    not written (docs/scheduler.md, "Graph inputs"). Kept on the data owner."""

    def __init__(
        self,
        ttype: GGMLType,
        ne: Ne,
        nb: Ne | None = None,
        *,
        op: Op,
        params: Any = None,
        src: tuple[Tensor | None, ...] = (),
        view_src: Tensor | None = None,
        view_offs: int = 0,
        ctx: Context | None = None,
    ) -> None:
        self.type = ttype
        self.ne = ne
        self.nb = contiguous_strides(ttype, ne) if nb is None else nb
        self.op = op
        self.params = params
        self._src = src
        self.view_src = view_src
        self.view_offs = view_offs
        self.flags = TensorFlag(0)
        self.name = ""
        self._buffer: Buffer | None = None
        self._offset = 0
        self.ctx = ctx
        self.extra = None
        self.written = False
        self.serial = new_serial()

    # ---- placement: every change advances the placement clock (pyggml.serial) -------------------------------

    @property
    def buffer(self) -> Buffer | None:
        """The buffer holding the data (None until placed)."""
        return self._buffer

    @buffer.setter
    def buffer(self, buf: Buffer | None) -> None:
        if buf is not self._buffer:
            self._buffer = buf
            PLACEMENT.advance()

    @property
    def offset(self) -> int:
        """Bytes from the start of `buffer` to the data."""
        return self._offset

    @offset.setter
    def offset(self, off: int) -> None:
        if off != self._offset:
            self._offset = off
            PLACEMENT.advance()

    @property
    def src(self) -> tuple[Tensor | None, ...]:
        """The sources (fixed when the node is recorded; the scheduler points them at its copies)."""
        return self._src

    @src.setter
    def src(self, srcs: tuple[Tensor | None, ...]) -> None:
        if srcs != self._src:
            self._src = srcs
            PLACEMENT.advance()

    # ---- shape facts -------------------------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        """numpy order (outermost first) over ggml_n_dims dimensions."""
        return tuple(reversed(self.ne[: self.n_dims]))

    @property
    def n_dims(self) -> int:
        for i in range(MAX_DIMS - 1, 0, -1):
            if self.ne[i] > 1:
                return i + 1
        return 1

    def nelements(self) -> int:
        ne = self.ne
        return ne[0] * ne[1] * ne[2] * ne[3]

    def nrows(self) -> int:
        ne = self.ne
        return ne[1] * ne[2] * ne[3]

    def nbytes(self) -> int:
        """Bytes spanned by the tensor in memory (ggml_nbytes, strides included)."""
        ne, nb = self.ne, self.nb
        if any(n <= 0 for n in ne):
            return 0
        tr = type_traits(self.type)
        if tr.blck_size == 1:
            size = tr.type_size
            for i in range(MAX_DIMS):
                size += (ne[i] - 1) * nb[i]
            return size
        size = ne[0] * nb[0] // tr.blck_size
        for i in range(1, MAX_DIMS):
            size += (ne[i] - 1) * nb[i]
        return size

    def row_size(self) -> int:
        tr = type_traits(self.type)
        return self.ne[0] // tr.blck_size * tr.type_size

    def is_contiguous(self) -> bool:
        """Dense row-major layout (dimensions of size 1 may carry any stride), as ggml_is_contiguous."""
        tr = type_traits(self.type)
        expected = tr.type_size
        for i in range(MAX_DIMS):
            if self.ne[i] != 1:
                if self.nb[i] != expected:
                    return False
                expected *= self.ne[i] // tr.blck_size if i == 0 else self.ne[i]
        return True

    def is_contiguous_rows(self) -> bool:
        """Elements of each row are adjacent (nb[0] == type size); rows may be strided."""
        return self.nb[0] == type_traits(self.type).type_size

    def is_permuted(self) -> bool:
        nb = self.nb
        return nb[0] > nb[1] or nb[1] > nb[2] or nb[2] > nb[3]

    def is_transposed(self) -> bool:
        return self.nb[0] > self.nb[1]

    def same_shape(self, other: Tensor) -> bool:
        return self.ne == other.ne

    def same_layout(self, other: Tensor) -> bool:
        return self.type == other.type and self.ne == other.ne and self.nb == other.nb

    def is_view(self) -> bool:
        return self.view_src is not None

    # ---- naming and flags --------------------------------------------------------------------------------

    def set_name(self, name: str) -> Tensor:
        self.name = name[: MAX_NAME - 1]
        return self

    def set_input(self) -> Tensor:
        self.flags |= TensorFlag.INPUT
        return self

    def set_output(self) -> Tensor:
        """Mark as a graph output; views mark their whole view_src chain so the data owner is kept too."""
        t: Tensor | None = self
        while t is not None:
            t.flags |= TensorFlag.OUTPUT
            t = t.view_src
        return self

    def set_param(self) -> Tensor:
        """Mark a leaf as trainable (ggml_set_param): build_backward computes its gradient. Only F32 / F16 leafs
        carry gradients, so anything else is refused here, before any graph is built."""
        from pyggml.ops.base import Op

        if self.op is not Op.NONE:
            raise ShapeError(f"set_param: '{self.name}' is the result of {self.op.name}; only leaf tensors "
                             "(op NONE) can be parameters")
        if self.type not in (GGMLType.F32, GGMLType.F16):
            raise UnsupportedTypeError(f"set_param: '{self.name}' is {self.type}; parameters must be F32 or F16 "
                                       "(gradients of other types are not defined)")
        self.flags |= TensorFlag.PARAM
        return self

    def set_loss(self) -> Tensor:
        """Mark the scalar the backward pass differentiates (ggml_set_loss): a one-element F32 tensor."""
        if self.nelements() != 1:
            raise ShapeError(f"set_loss: '{self.name}' ne={list(self.ne)} is not a scalar; reduce it first "
                             "(e.g. ops.sum or ops.mean)")
        if self.type != GGMLType.F32:
            raise UnsupportedTypeError(f"set_loss: '{self.name}' is {self.type}; the loss must be F32")
        self.flags |= TensorFlag.LOSS
        return self

    @property
    def data_owner(self) -> Tensor:
        return self.view_src if self.view_src is not None else self

    # ---- data ----------------------------------------------------------------------------------------------

    @property
    def is_allocated(self) -> bool:
        return self.buffer is not None

    def require_buffer(self, action: str = "read or write its data") -> Buffer:
        """The tensor's buffer; AllocationError naming the tensor and what to call to place it when it has none."""
        if self.buffer is None:
            raise AllocationError(
                f"tensor {label(self)} {self.type} ne={list(self.ne)} has no buffer yet, so nothing can "
                f"{action}: {_placement_hint(self)}"
            )
        return self.buffer

    def mark_written(self) -> None:
        """Note that data was written into this tensor's memory (on its data owner; see `written`)."""
        owner = self.view_src if self.view_src is not None else self
        owner.written = True

    def element_view(self, raw: npt.NDArray[np.uint8]) -> npt.NDArray[Any]:
        """Strided numpy view (numpy order) over `raw`, whose byte 0 is the tensor's first element."""
        tr = type_traits(self.type)
        if tr.np_dtype is None:
            raise UnsupportedTypeError(f"{self.type} is a block type; no element view of {label(self)}")
        return np.lib.stride_tricks.as_strided(
            raw.view(tr.np_dtype), shape=self.ne[::-1], strides=self.nb[::-1], writeable=raw.flags.writeable
        )

    def numpy(self) -> npt.NDArray[Any]:
        """A copy of the data in numpy order (`shape`); BF16 and block types come back as float32."""
        buf = self.require_buffer("read it")
        raw = buf.get_tensor(self)
        tr = type_traits(self.type)
        if tr.is_quantized:
            from pyggml.quants import dequantize

            if not self.is_contiguous_rows():
                raise ShapeError(f"tensor {label(self)}: quantized rows must be contiguous to read back")
            rows = [
                dequantize(raw[self._row_offset(i1, i2, i3) :][: self.row_size()], self.type)
                for i3 in range(self.ne[3])
                for i2 in range(self.ne[2])
                for i1 in range(self.ne[1])
            ]
            return np.concatenate(rows).reshape(self.shape)
        arr = self.element_view(raw)
        if self.type == GGMLType.BF16:
            arr = to_f32(arr, self.type)
        return np.array(arr).reshape(self.shape)

    def _row_offset(self, i1: int, i2: int, i3: int) -> int:
        return i1 * self.nb[1] + i2 * self.nb[2] + i3 * self.nb[3]

    def set(self, values: npt.ArrayLike, *, flat: bool = False) -> Tensor:
        """Write `values`, converted to the tensor's type (float values into a quantised tensor are quantised).

        `values` is a 1-D array of `nelements()` values in memory order (ne[0] fastest), or an array of the
        tensor's numpy shape: `shape`, which is ne reversed (ne=(64, 128) is numpy shape (128, 64)); leading
        size-1 dimensions may be added or left out (a tensor of ne=(4, 3, 1, 1) takes (3, 4), (1, 3, 4) or
        (1, 1, 3, 4)). Any other shape raises ShapeError, even with the right element count (a transposed
        matrix would be written silently wrong); `flat=True` takes any shape of the right count, in C order."""
        buf = self.require_buffer("write into it")
        if not self.is_contiguous():
            raise ShapeError(f"tensor {label(self)}: set() needs a contiguous tensor, nb={list(self.nb)}")
        arr = np.asarray(values)
        self._check_set_shape(arr, flat)
        tr = type_traits(self.type)
        if tr.is_quantized:
            from pyggml.quants import quantize

            raw = quantize(np.ascontiguousarray(arr, dtype=np.float32).reshape(-1), self.type)
        elif self.type == GGMLType.BF16 and arr.dtype != np.uint16:
            raw = from_f32(arr.reshape(-1), self.type).view(np.uint8)
        else:
            raw = np.ascontiguousarray(arr.reshape(-1), dtype=tr.np_dtype).view(np.uint8)
        buf.set_tensor(self, raw)
        self.mark_written()
        return self

    def _check_set_shape(self, arr: npt.NDArray[Any], flat: bool) -> None:
        """ShapeError unless `arr` fits `set`: the element count, and (unless flat) a 1-D array or the tensor's
        numpy shape up to leading size-1 dimensions."""
        n = self.nelements()
        if arr.size != n:
            raise ShapeError(f"tensor {label(self)} {self.type} ne={list(self.ne)} holds {n} elements (numpy shape "
                             f"{self.shape}), got an array of shape {arr.shape} ({arr.size} elements)")
        if flat or arr.ndim <= 1:
            return
        full = self.ne[::-1]
        if len(arr.shape) <= MAX_DIMS and arr.shape == full[MAX_DIMS - len(arr.shape) :] \
                and all(d == 1 for d in full[: MAX_DIMS - len(arr.shape)]):
            return
        raise ShapeError(
            f"tensor {label(self)} {self.type} ne={list(self.ne)} has numpy shape {self.shape} (numpy order is ne "
            f"reversed), got an array of shape {arr.shape}; pass an array of shape {self.shape}, a 1-D array in "
            f"memory order (ne[0] fastest), or flat=True to write any shape's elements in C order"
        )

    # ---- DLPack -----------------------------------------------------------------------------------------------

    def __dlpack__(self, *, stream: int | None = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> CapsuleType:
        """A DLPack capsule over this tensor's memory, no copy (`np.from_dlpack(t)`, `torch.from_dlpack(t)`):
        see `pyggml.dlpack.export_tensor`."""
        from pyggml.dlpack import export_tensor

        return export_tensor(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        """(DLPack device type, device number) of this tensor's memory."""
        from pyggml.dlpack import dlpack_device

        return dlpack_device(self)

    def __repr__(self) -> str:
        opname = self.op.name
        return f"Tensor({self.name!r}, {self.type}, ne={list(self.ne)}, op={opname})"


def shares_bytes(a: Tensor, b: Tensor) -> bool:
    """Whether a's and b's bytes may overlap: one buffer, overlapping byte spans; not placed yet, one's data is the
    other's (a view and what it views). What a kernel writing a while reading b must rule out."""
    if a.buffer is None or b.buffer is None:
        return a.data_owner is b.data_owner
    return a.buffer is b.buffer and a.offset < b.offset + b.nbytes() and b.offset < a.offset + a.nbytes()
