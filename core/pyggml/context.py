"""Context: owns tensor metadata (with a budget, as ggml's mem_size) and, unless no_alloc, the tensors' data."""

from __future__ import annotations

from collections.abc import Iterator
from contextvars import Token
from types import TracebackType

from pyggml.backend.host import HOST_ALIGNMENT, HostBuffer, HostBufferType
from pyggml.errors import AllocationError, ShapeError
from pyggml.ops.base import Op, ne4
from pyggml.tensor import ACTIVE_CONTEXT, Tensor, check_extent
from pyggml.types import GGMLType, parse_type

TENSOR_OVERHEAD = 368
"""Bytes of metadata charged per tensor against the budget (ggml_tensor_overhead on 64-bit)."""

_context_host_buft = HostBufferType("context")


class Context:
    """Creates tensors. Op results go to the context entered with `with ctx:` (ggml passes ctx to every op;
    a model builder keeps its compute nodes out of the weights' context this way), else to src0's context.

    With `no_alloc=False` every non-view tensor gets its data in the context's own host
    buffer of `mem_size` bytes (metadata charged too), as ggml_init does; with `no_alloc=True` tensors carry
    no data until a buffer is allocated for them, and `mem_size` (None: unlimited) bounds the metadata only."""

    def __init__(self, mem_size: int | None = None, *, no_alloc: bool = False) -> None:
        if not no_alloc and mem_size is None:
            raise AllocationError("a Context that holds data (no_alloc=False) needs mem_size")
        if mem_size is not None and (isinstance(mem_size, bool) or not isinstance(mem_size, int) or mem_size < 0):
            raise AllocationError(f"Context mem_size must be a byte count >= 0 (or None), got {mem_size!r}")
        self.mem_size = mem_size
        self.no_alloc = no_alloc
        self.used = 0
        self._tensors: list[Tensor] = []
        self._data_offset = 0
        self._tokens: list[Token[Context | None]] = []
        self.buffer: HostBuffer | None = None
        if not no_alloc:
            assert mem_size is not None
            self.buffer = _context_host_buft.alloc_buffer(mem_size)

    def __enter__(self) -> Context:
        self._tokens.append(ACTIVE_CONTEXT.set(self))
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        ACTIVE_CONTEXT.reset(self._tokens.pop())

    # ---- bookkeeping -----------------------------------------------------------------------------------

    def add_tensor(self, t: Tensor) -> None:
        """Check that `t`'s counts fit int64 (`check_extent`: ShapeError naming the op, tensor and shape), charge
        it to the budget and (with memory) place its data; called by every tensor constructor."""
        check_extent(t)
        cost = TENSOR_OVERHEAD
        place = self.buffer is not None and t.view_src is None
        aligned = 0
        if place:
            aligned = (t.nbytes() + HOST_ALIGNMENT - 1) // HOST_ALIGNMENT * HOST_ALIGNMENT
            cost += aligned
        if self.mem_size is not None and self.used + cost > self.mem_size:
            raise AllocationError(
                f"context budget exceeded: {self.used} of {self.mem_size} bytes used, tensor "
                f"{repr(t.name) if t.name else f'(unnamed, op {t.op.name})'} {t.type} ne={list(t.ne)} needs {cost} more"
            )
        self.used += cost
        self._tensors.append(t)
        if place:
            assert self.buffer is not None
            t.buffer = self.buffer
            t.offset = self._data_offset
            self._data_offset += aligned
        elif self.buffer is not None and t.view_src is not None:
            init_view(t)

    def __iter__(self) -> Iterator[Tensor]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)

    def get_tensor(self, name: str) -> Tensor | None:
        for t in self._tensors:
            if t.name == name:
                return t
        return None

    # ---- constructors ----------------------------------------------------------------------------------

    def new_tensor(self, ttype: GGMLType | str, *ne: int, name: str = "") -> Tensor:
        """A new leaf tensor, ne[0] first (ggml order): new_tensor(F32, 4096, 32) is 32 rows of 4096."""
        tt = parse_type(ttype)
        try:
            dims = ne4(*ne)
        except ShapeError as e:
            raise ShapeError(f"new tensor{f' {name!r}' if name else ''} of {tt}: {e}") from None
        tr = tt.traits
        if dims[0] % tr.blck_size:
            raise ShapeError(f"new tensor{f' {name!r}' if name else ''}: {tt} stores rows in blocks of {tr.blck_size} "
                             f"elements, so ne[0] must be a multiple of {tr.blck_size}, got ne={list(dims)}"
                             f"{_block_hint(tr.blck_size)}")
        t = Tensor(tt, dims, op=Op.NONE, ctx=self)
        t.name = name
        self.add_tensor(t)
        return t

    def new_f32(self, value: float) -> Tensor:
        t = self.new_tensor(GGMLType.F32, 1)
        if t.buffer is not None:
            t.set([value])
        return t

    def new_i32(self, value: int) -> Tensor:
        t = self.new_tensor(GGMLType.I32, 1)
        if t.buffer is not None:
            t.set([value])
        return t

    def dup_tensor(self, src: Tensor) -> Tensor:
        """A new leaf with src's type and shape (no data copied)."""
        return self.new_tensor(src.type, *src.ne)

    def view_tensor(self, src: Tensor) -> Tensor:
        """A NONE-op view of src with the same shape and strides (ggml_view_tensor)."""
        owner = src.view_src if src.view_src is not None else src
        t = Tensor(src.type, src.ne, src.nb, op=Op.NONE, src=(src,), view_src=owner,
                   view_offs=src.view_offs, ctx=self)
        t.name = f"{src.name} (view)" if src.name else ""
        self.add_tensor(t)
        return t


def _block_hint(blck_size: int) -> str:
    if blck_size == 256:
        return (" (K-quants such as Q4_K and Q6_K take rows of 256, 512, ... elements; a narrower weight can use "
                "a 32-element type such as Q4_0 or Q8_0, as llama.cpp does)")
    return ""


def init_view(t: Tensor) -> None:
    """Place a view in its data owner's buffer (ggml_backend_view_init)."""
    owner = t.view_src
    assert owner is not None
    if owner.buffer is None:
        raise AllocationError(f"view '{t.name}' of '{owner.name}': the owner has no buffer yet")
    t.buffer = owner.buffer
    t.offset = owner.offset + t.view_offs
    owner.buffer.init_tensor(t)
