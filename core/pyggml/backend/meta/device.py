"""The META device: N devices seen as one (ggml_backend_meta_device), with its buffer type and buffers.

    meta = MetaDevice([dev0, dev1], split_state=LlamaSplit(hp, 2))   # the llama example's callback
    weights = load_weights(gguf, meta.buffer_type())     # every tensor split per its state
    sched = Scheduler([meta.init_backend(), cpu_backend])

Props: memory summed over the devices, caps AND-ed (host buffers, wrapping host memory and events are off: a meta
tensor is never one piece of memory). A meta buffer holds one buffer of the full size per device; each tensor in
it is split when it is placed, per its state (tensors.py). Byte access by offset has no meaning for a meta
buffer; tensors are read and written through their states (transfer.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from math import lcm

import numpy as np

from pyggml.alloc.buffers import PartedBuffer
from pyggml.backend.core_options import MetaOptions
from pyggml.backend.meta import transfer
from pyggml.backend.meta.rules import RULES
from pyggml.backend.meta.spmd import Spmd
from pyggml.backend.meta.state import MAX_DEVICES, SplitState
from pyggml.backend.meta.tensors import SplitStateFn, TensorTable
from pyggml.backend.op_table import FREE_OPS
from pyggml.backend.options import split_params
from pyggml.backend.protocol import (
    Backend,
    BackendParams,
    Buffer,
    BufferType,
    BufferUsage,
    Bytes,
    Device,
    DeviceCaps,
    DeviceType,
    Registry,
)
from pyggml.errors import AllocationError, PyGGMLError, UnsupportedOpError
from pyggml.ops.base import Op
from pyggml.tensor import Tensor

log = logging.getLogger(__name__)


class MetaRegistry(Registry[MetaOptions]):
    """The registry of one meta device (meta devices are made by the user, not discovered)."""

    name = "meta"
    options_type = MetaOptions

    def __init__(self, device: MetaDevice, options: MetaOptions | None = None) -> None:
        super().__init__(options=options)
        self._device = device

    def devices(self) -> Sequence[Device]:
        return [self._device]


class MetaDevice(Device):
    def __init__(self, devices: Sequence[Device], split_state: SplitStateFn | None = None,
                 name: str | None = None, spmd: Spmd | None = None, options: MetaOptions | None = None) -> None:
        """`spmd`: this process holds only some of `devices` (the others are `PeerDevice`s of other processes);
        see pyggml.backend.meta.spmd. `options`: default `MetaOptions` read from the environment when the first
        backend is made."""
        devs = list(devices)
        if not 1 <= len(devs) <= MAX_DEVICES:
            raise PyGGMLError(f"a meta device wraps 1 to {MAX_DEVICES} devices, got {len(devs)}")
        nested = [d.name for d in devs if d.type is DeviceType.META]
        if nested:
            raise PyGGMLError(f"a meta device cannot wrap another meta device ({', '.join(nested)})")
        self.devices = devs
        super().__init__(MetaRegistry(self, options), name or f"Meta({','.join(d.name for d in devs)})",
                         DeviceType.META, DeviceCaps(async_ops=all(d.caps.async_ops for d in devs),
                                                     checks_indices=all(d.caps.checks_indices for d in devs)))
        self._buft = MetaBufferType(self)
        self.table = TensorTable(len(devs), split_state, self._is_own, _simple_buffer, _packed_offset)
        self.table.spmd = spmd

    @property
    def n_devices(self) -> int:
        return len(self.devices)

    def _is_own(self, buf: Buffer) -> bool:
        return isinstance(buf, MetaBuffer) and buf.buft is self._buft

    @property
    def description(self) -> str:
        return f"Meta({','.join(d.description for d in self.devices)})"

    def memory(self) -> tuple[int, int]:
        mem = [d.memory() for d in self.devices]
        return sum(m[0] for m in mem), sum(m[1] for m in mem)

    def options(self) -> MetaOptions:
        return MetaOptions.narrow(self.reg.options())

    def init_backend(self, params: BackendParams = None) -> Backend:
        """A backend over every device: the meta device's own options (`MetaOptions`: allreduce) taken from
        `params`, the rest given to every device's `init_backend`."""
        from pyggml.backend.meta.backend import MetaBackend

        own, rest = split_params(params, MetaOptions)
        return MetaBackend(self, rest, comm=self.options().with_params(own, self.name).allreduce)

    def buffer_type(self) -> MetaBufferType:
        return self._buft

    def supports_op(self, op: Tensor) -> bool:
        """Every device runs the op and the op has a split rule (its states are checked when it is planned)."""
        if op.op not in FREE_OPS and op.op not in RULES:
            return False
        return all(d.supports_op(op) for d in self.devices)

    # ---- inspection --------------------------------------------------------------------------------------

    def split_state(self, t: Tensor, assume_sync: bool = True) -> SplitState:
        """t's split state (assume_sync=False: PARTIAL where an allreduce is still due)."""
        return self.table.state(t, assume_sync)

    def simple_tensors(self, t: Tensor) -> list[Tensor]:
        """t's tensor on each device."""
        return self.table.simple(t)


class MetaBufferType(BufferType):
    def __init__(self, device: MetaDevice) -> None:
        self._meta = device
        super().__init__(f"Meta({','.join(b.name for b in self.simple_bufts)})", device)

    @property
    def simple_bufts(self) -> list[BufferType]:
        return [d.buffer_type() for d in self._meta.devices]

    @property
    def device(self) -> MetaDevice:
        """The meta device (typed: its buffers reach the tensor table through it)."""
        return self._meta

    @property
    def alignment(self) -> int:
        return lcm(*(b.alignment for b in self.simple_bufts))

    @property
    def max_size(self) -> int:
        return min(b.max_size for b in self.simple_bufts)

    @property
    def is_host(self) -> bool:
        """Never: a meta tensor is spread over several memories, even when all of them are host memory."""
        return False

    def alloc_size(self, tensor: Tensor) -> int:
        return max(b.alloc_size(tensor) for b in self.simple_bufts)

    def alloc_buffer(self, size: int) -> MetaBuffer:
        bufs: list[Buffer] = []
        try:
            for bt in self.simple_bufts:
                bufs.append(bt.alloc_buffer(size))
        except Exception as e:
            for b in bufs:
                b.free()
            raise AllocationError(f"meta buffer of {size} bytes: device {len(bufs)} "
                                  f"({self._meta.devices[len(bufs)].name}) failed: {e}") from e
        return MetaBuffer(self, size, bufs)


class MetaBuffer(PartedBuffer):
    """One buffer per device, each of the full size; tensors are split when placed (init_tensor).

    A stored tensor's slices (weights, KV caches) are packed at the front of each device's part, one after the
    other in the order they are first placed, rather than at the tensor's own offset: a device then touches only as
    many bytes as its slices hold, not a strip of every tensor's range, which transparent huge pages would make
    resident whole (a rank of an MPI split held all the weights' memory so). Compute tensors keep the allocator's
    offsets, which change every graph."""

    buft: MetaBufferType

    def __init__(self, buft: MetaBufferType, size: int, parts: list[Buffer]) -> None:
        self.parts = parts
        super().__init__(buft, size)
        self._packed: list[dict[tuple[int, int], int]] = [{} for _ in parts]
        self._packed_end = [0] * len(parts)
        self._align = [max(p.buft.alignment, 1) for p in parts]

    def packed_offset(self, device: int, offset: int, size: int) -> int:
        """Where device `device`'s slice (`size` bytes) of the stored tensor at `offset` lives in its part."""
        placed = self._packed[device]
        key = (offset, size)
        at = placed.get(key)
        if at is None:
            align = self._align[device]
            at = -(-self._packed_end[device] // align) * align
            if at + size > self.parts[device].size:
                raise AllocationError(f"{self!r}: device {device}'s slices outgrow its part of {self.size} bytes")
            placed[key] = at
            self._packed_end[device] = at + size
        return at

    @property
    def usage(self) -> BufferUsage:
        return self._usage

    @usage.setter
    def usage(self, value: BufferUsage) -> None:
        self._usage = value
        for p in getattr(self, "parts", ()):
            p.usage = value

    @property
    def _table(self) -> TensorTable:
        return self.buft.device.table

    def _refuse(self, what: str) -> UnsupportedOpError:
        return UnsupportedOpError(f"{what}: a meta buffer has no flat bytes; access its tensors (set_tensor, "
                                  f"get_tensor) so they are split and gathered per their states")

    def write(self, offset: int, data: Bytes) -> None:
        raise self._refuse("write")

    def read(self, offset: int, size: int) -> Bytes:
        raise self._refuse("read")

    def fill(self, offset: int, size: int, value: int) -> None:
        raise self._refuse("fill")

    def init_tensor(self, tensor: Tensor) -> None:
        """A tensor placed here: forget what was known of it; a stored tensor's state is checked now."""
        self._table.forget(tensor)
        if tensor.op is Op.NONE and tensor.view_src is None and self.usage is not BufferUsage.COMPUTE:
            self._table.state(tensor)

    def _mine(self, tensor: Tensor) -> None:
        if tensor.buffer is not self:
            raise AllocationError(f"tensor '{tensor.name}' is not in buffer {self!r}")

    def set_tensor(self, tensor: Tensor, data: Bytes | bytes, offset: int = 0) -> None:
        self._mine(tensor)
        arr = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes | bytearray) else data.view(np.uint8)
        transfer.set_tensor(self._table, tensor, arr.reshape(-1), offset)
        tensor.mark_written()

    def get_tensor(self, tensor: Tensor, offset: int = 0, size: int | None = None) -> Bytes:
        self._mine(tensor)
        return transfer.get_tensor(self._table, tensor, offset, tensor.nbytes() - offset if size is None else size)

    def memset_tensor(self, tensor: Tensor, value: int, offset: int = 0, size: int | None = None) -> None:
        self._mine(tensor)
        transfer.memset_tensor(self._table, tensor, value, offset,
                               tensor.nbytes() - offset if size is None else size)
        tensor.mark_written()

    def __repr__(self) -> str:
        return f"<MetaBuffer {self.buft.name} {self.size} bytes x {len(self.parts)}>"


def _packed_offset(buf: Buffer, j: int, offset: int, size: int) -> int:
    assert isinstance(buf, MetaBuffer)
    return buf.packed_offset(j, offset, size)


def _simple_buffer(buf: Buffer, j: int) -> Buffer:
    assert isinstance(buf, MetaBuffer)
    return buf.parts[j]
