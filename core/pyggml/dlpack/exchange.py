"""Tensors out through `__dlpack__`, arrays in through `buffer_from_dlpack` / `tensor_from_dlpack` (see the
package's docstring for the rules)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from pyggml.backend.host import HostBufferType
from pyggml.context import Context, init_view
from pyggml.dlpack.capsule import FLAG_IS_COPIED, Described, amend, consume
from pyggml.dlpack.memory import (
    CPU_DEVICE,
    DLDataTypeCode,
    DLDevice,
    DLDeviceType,
    DLPackMemory,
    dl_dtype,
    ggml_type,
    host_array,
)
from pyggml.errors import AllocationError, DLPackError, UnsupportedOpError
from pyggml.tensor import label
from pyggml.types import GGMLType

if TYPE_CHECKING:
    from typing_extensions import CapsuleType

    from pyggml.backend.protocol import Buffer, Device
    from pyggml.tensor import Tensor

HOST_BUFT = HostBufferType("DLPack_Host")
"""The buffer type of imported host memory that no device was named for: any CPU device uses it."""


# ---- out ------------------------------------------------------------------------------------------------------

def _check_exportable(t: Tensor, who: str) -> None:
    """DLPackError for what DLPack cannot say: a block-quantised type, strides that are not whole elements."""
    if dl_dtype(t.type) is None:
        raise DLPackError(f"{who} is {t.type}, a block-quantised type: DLPack has no element type for its blocks; "
                          "read it dequantised with numpy(), or convert it (ops.cpy into an F32 tensor) first")
    size = t.type.traits.type_size
    if any(t.ne[i] > 1 and t.nb[i] % size for i in range(t.n_dims)):
        raise DLPackError(f"{who} {t.type} ne={list(t.ne)} nb={list(t.nb)} is a view whose strides are not whole "
                          f"{size}-byte elements; DLPack counts strides in elements (make it contiguous with "
                          "ops.cont first)")


def _memory(t: Tensor, who: str, stream: int | None) -> tuple[Buffer, DLPackMemory | None, DLPackError | None]:
    """The tensor's buffer and the buffer's exportable memory (or why there is none); DLPackError naming the
    tensor when it has no memory or its buffer was freed. A view of a placed tensor is placed here."""
    if t.buffer is None and t.view_src is not None and t.view_src.buffer is not None:
        init_view(t)  # a view of placed memory: placed as an allocator would
    try:
        buf = t.require_buffer("export it through DLPack")
        return buf, buf.dlpack_memory(stream), None
    except DLPackError as e:
        if t.buffer is None:
            raise
        return t.buffer, None, e
    except (AllocationError, UnsupportedOpError) as e:
        raise DLPackError(f"{who}: cannot export it through DLPack: {e}") from e


def dlpack_device(t: Tensor) -> tuple[int, int]:
    """`Tensor.__dlpack_device__`: (DLPack device type, device number) of the tensor's memory."""
    who = f"tensor {label(t)}"
    _, mem, err = _memory(t, who, None)
    if mem is None:
        raise DLPackError(f"{who}: {err}")
    return mem.device.type, mem.device.id


class _View:
    """Memory as numpy sees it (`__array_interface__`: any address, never read here), holding what keeps it valid
    for as long as numpy's array over it lives."""

    def __init__(self, address: int, t: Tensor, keep: object, readonly: bool) -> None:
        dtype = t.type.traits.np_dtype
        assert dtype is not None
        n = t.n_dims
        self.keep = keep
        self.__array_interface__ = {"shape": t.shape, "typestr": dtype.str, "version": 3, "data": (address, readonly),
                                    "strides": tuple(t.nb[i] for i in reversed(range(n)))}


def export_tensor(t: Tensor, *, stream: int | None = None, max_version: tuple[int, int] | None = None,
                  dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> CapsuleType:
    """`Tensor.__dlpack__`: a DLPack capsule over the tensor's memory (versioned when `max_version >= (1, 0)`).
    `copy=True`, or `dl_device=(kDLCPU, 0)` for memory elsewhere, gives a copy in host memory; `copy=False` refuses
    any copy. Nothing waits here for queued work of a host-memory backend: compute before exporting."""
    who = f"tensor {label(t)}"
    _check_exportable(t, who)
    buf, mem, err = _memory(t, who, stream)
    target = DLDevice(int(dl_device[0]), int(dl_device[1])) if dl_device is not None else None
    keep: object
    if mem is not None and not copy and target in (None, mem.device):
        address, keep, device, readonly, flags = mem.address + t.offset, (mem.owner, buf), mem.device, mem.readonly, 0
    else:
        where = f"its memory is on {mem.device}" if mem is not None else str(err)
        if copy is False:
            raise DLPackError(f"{who}: cannot export it without a copy (copy=False): {where}, {target} was asked for")
        if target not in (None, CPU_DEVICE) or (target is None and not copy):
            raise DLPackError(f"{who}: {where}; a copy can only go to the host: ask with dl_device=(1, 0) or copy=True "
                              "(np.from_dlpack(t, device='cpu', copy=True)), or read it with numpy()")
        try:
            raw = buf.get_tensor(t)
        except AllocationError as e:
            raise DLPackError(f"{who}: cannot copy it out for DLPack: {e}") from e
        address, keep, device, readonly, flags = int(raw.ctypes.data), raw, CPU_DEVICE, False, FLAG_IS_COPIED
    view = np.asarray(_View(address, t, keep, readonly))
    capsule = view.__dlpack__(max_version=max_version)  # numpy's capsule: C destructor and deleter
    bf16 = DLDataTypeCode.BFLOAT if t.type == GGMLType.BF16 else None  # numpy has no bfloat16: exported as uint16
    return amend(capsule, device=None if device == CPU_DEVICE else device, code=bf16, flags=flags)


# ---- in -------------------------------------------------------------------------------------------------------

def _what(obj: object) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def from_dlpack(obj: Any, *, dl_device: DLDevice | None = None, copy: bool | None = None) -> Described:
    """Consume `obj.__dlpack__(...)`: the array it describes, its memory held until the result's `holder` goes.
    CUDA memory is asked for ready on the legacy default stream, the stream pyggml's CUDA buffers order with."""
    what = _what(obj)
    if not hasattr(obj, "__dlpack__"):
        raise DLPackError(f"{what} does not export DLPack (it has no __dlpack__)")
    kwargs: dict[str, Any] = {"max_version": (1, 0)}
    dev = obj.__dlpack_device__() if hasattr(obj, "__dlpack_device__") else None
    if dev is not None and int(dev[0]) == DLDeviceType.CUDA and dl_device is None:
        kwargs["stream"] = 1
    if dl_device is not None:
        kwargs["dl_device"] = (int(dl_device.type), int(dl_device.id))
    if copy is not None:
        kwargs["copy"] = copy
    try:
        capsule = obj.__dlpack__(**kwargs)
    except TypeError:
        if dl_device is not None or copy is not None:
            raise DLPackError(f"{what}.__dlpack__ takes no dl_device or copy (an exporter older than DLPack 1.0): it "
                              "cannot be asked for a host copy") from None
        capsule = obj.__dlpack__(stream=kwargs["stream"]) if "stream" in kwargs else obj.__dlpack__()
    d = consume(capsule, what)
    if d.lanes != 1 or d.bits % 8 or d.bits == 0:
        raise DLPackError(f"{what}: DLPack type (code {d.code}, {d.bits} bits, {d.lanes} lanes) is not whole bytes "
                          "of one lane")
    if d.strides is not None and any(s < 0 for n, s in zip(d.shape, d.strides, strict=True) if n > 1):
        raise DLPackError(f"{what}: negative strides {d.strides}; ggml strides are unsigned (copy it first)")
    return d


def _strides(d: Described) -> tuple[int, ...]:
    if d.strides is not None:
        return d.strides
    out, step = [], 1
    for n in reversed(d.shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def _span(d: Described) -> int:
    """Bytes from the first element to the end of the last."""
    if any(n == 0 for n in d.shape):
        return 0
    item = d.bits // 8
    return item + sum((n - 1) * s for n, s in zip(d.shape, _strides(d), strict=True)) * item


def _in_place(d: Described, size: int, device: Device | None) -> Buffer:
    memory = DLPackMemory(d.address, d.device, d.holder, d.readonly)
    if d.readonly:
        raise DLPackError("the array is read-only, and pyggml's kernels write into their buffers")
    if device is None:
        if not memory.host:
            raise DLPackError(f"its memory is on {d.device}: name the pyggml device to use it with "
                              "(buffer_from_dlpack(x, get_device('CUDA0')))")
        return HOST_BUFT.wrap(host_array(memory, size))
    return device.buffer_from_dlpack(memory, size)


def _buffer(d: Described, obj: Any, device: Device | None, copy: bool | None) -> Buffer:
    size = _span(d)
    if copy is not True:
        try:
            return _in_place(d, size, device)
        except DLPackError as e:
            if copy is False:
                raise DLPackError(f"{_what(obj)}: cannot be used without a copy (copy=False): {e}") from e
    src = d if d.device.host else from_dlpack(obj, dl_device=CPU_DEVICE, copy=True)
    buf = (HOST_BUFT if device is None else device.buffer_type()).alloc_buffer(size)
    if size:
        buf.write(0, host_array(DLPackMemory(src.address, src.device, src.holder, True), size))
    return buf


def buffer_from_dlpack(obj: Any, device: Device | None = None, *, copy: bool | None = None) -> Buffer:
    """A pyggml buffer over the memory of `obj` (anything with `__dlpack__`: a numpy array, a torch or CuPy tensor,
    a pyggml tensor), from its first element to the end of its last. In place where `device` can use that memory
    (default: host memory, in a buffer any CPU device reads), holding `obj`'s export until the buffer is garbage
    collected; else a copy into a new buffer of the device (host memory first, for memory elsewhere). `copy=True`
    always copies, `copy=False` raises DLPackError instead of copying. Read-only arrays are always copied."""
    return _buffer(from_dlpack(obj), obj, device, copy)


def tensor_from_dlpack(obj: Any, ctx: Context | None = None, *, device: Device | None = None,
                       copy: bool | None = None, name: str = "") -> Tensor:
    """A leaf tensor of `obj`'s type, shape (ne reversed) and strides, in `buffer_from_dlpack(obj, device, copy)`;
    made in `ctx` (a no_alloc Context; default: a new one). DLPackError for an array with more than 4 dimensions or
    of a type ggml has not (unsigned, bool, complex)."""
    what = _what(obj)
    d = from_dlpack(obj)
    ttype = ggml_type(d.code, d.bits)
    if ttype is None:
        raise DLPackError(f"{what}: DLPack type code {d.code} of {d.bits} bits has no ggml type (F32, F16, BF16, F64, "
                          "I8, I16, I32, I64)")
    if len(d.shape) > 4:
        raise DLPackError(f"{what}: {len(d.shape)} dimensions {d.shape}; a ggml tensor has at most 4")
    ne = [*reversed(d.shape), 1, 1, 1, 1][:4]
    nb = [s * (d.bits // 8) for s in reversed(_strides(d))]
    for i in range(len(nb), 4):
        nb.append(nb[i - 1] * ne[i - 1] if i else d.bits // 8)
    buf = _buffer(d, obj, device, copy)
    ctx = Context(no_alloc=True) if ctx is None else ctx
    if not ctx.no_alloc:
        raise DLPackError("tensor_from_dlpack needs a no_alloc Context: the tensor's memory is the array's")
    t = ctx.new_tensor(ttype, *ne, name=name)
    t.nb = (nb[0], nb[1], nb[2], nb[3])
    t.buffer, t.offset = buf, 0
    buf.init_tensor(t)
    t.mark_written()
    return t
