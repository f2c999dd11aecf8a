"""The fuzzing kit's world (see fuzz.py): buffers between inaccessible pages with pattern padding, a device
whose buffers they are, and the live in-process sessions the messages are built against and delivered to."""

from __future__ import annotations

import ctypes
import mmap
from pathlib import Path

import numpy as np
from pyggml_rpc.server import Served, Session
from pyggml_rpc.server_tensors import ServedBuffer
from pyggml_rpc.wire import (
    DEVICE_U64,
    TWO_U64,
    U64,
    Cmd,
)

from pyggml.backend.host import HostBuffer, HostBufferType
from pyggml.backend.options import Options
from pyggml.backend.protocol import Backend, BackendParams, BufferType, Bytes, Device, DeviceType
from pyggml.backend.registry import get_device
from pyggml.errors import AllocationError
from pyggml.tensor import Tensor

PAGE = mmap.PAGESIZE
GUARD_BYTE = 0xA5
SLOW_S = 5.0
"""Seconds one message may take before it counts as a bug (the templates compute in milliseconds)."""
HANG_S = 120.0
"""Seconds after which a message is taken to hang: the process prints every thread's stack and exits."""
MAIN_SIZE = 64 * 1024
SENTINEL_SIZE = 4096
MEMORY_LIMIT = 8 << 20
RESET_EVERY = 200
"""Messages after which the fuzzed session starts afresh, so state (buffers, stored graphs) stays small."""
SENTINEL = ((np.arange(SENTINEL_SIZE) * 37 + 11) & 0xFF).astype(np.uint8)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
REPLY_SIZES = {Cmd.DEVICE_COUNT: 4, Cmd.ALLOC_BUFFER: 16, Cmd.GET_ALIGNMENT: 8, Cmd.GET_MAX_SIZE: 8,
               Cmd.BUFFER_GET_BASE: 8, Cmd.SET_TENSOR_HASH: 1, Cmd.COPY_TENSOR: 1, Cmd.GET_DEVICE_MEMORY: 16,
               Cmd.GET_ALLOC_SIZE: 8, Cmd.SUPPORTS_OP: 1}
"""What ggml's client reads back for each command with a fixed reply (GET_TENSOR: its size field)."""


class GuardedBuffer(HostBuffer):
    """Host memory whose last byte (for sizes a multiple of 64, else the padding's) touches an inaccessible page,
    with another such page before the padding in front: an access past either end faults instead of going
    unnoticed, and a write into the padding shows in `guards_intact()`."""

    def __init__(self, buft: BufferType, size: int) -> None:
        padded = -(-size // 64) * 64
        body = max(-(-padded // PAGE) * PAGE, PAGE)
        self._map = mmap.mmap(-1, body + 2 * PAGE)
        whole = np.frombuffer(self._map, np.uint8)
        addr = int(whole.ctypes.data)
        for at in (addr, addr + PAGE + body):
            if _libc.mprotect(at, PAGE, 0):  # PROT_NONE
                raise OSError(ctypes.get_errno(), "mprotect failed")
        start = PAGE + body - padded
        self._pads = (whole[PAGE:start], whole[start + size : PAGE + body])
        for pad in self._pads:
            pad[:] = GUARD_BYTE
        super().__init__(buft, whole[start : start + size])

    def guards_intact(self) -> bool:
        return all(bool(np.all(pad == GUARD_BYTE)) for pad in self._pads)


class GuardedBufferType(HostBufferType):
    def alloc_buffer(self, size: int) -> HostBuffer:
        try:
            return GuardedBuffer(self, size)
        except (OSError, ValueError, OverflowError) as e:
            raise AllocationError(f"guarded buffer of {size} bytes: {e}") from e


class GuardedDevice(Device):
    """A pyggml device whose buffers are `GuardedBuffer`s; compute, op support and memory are the device's (its
    type too, unless `type` dresses it as another)."""

    def __init__(self, inner: Device, type: DeviceType | None = None) -> None:
        super().__init__(inner.reg, inner.name, type or inner.type, inner.caps)
        self.inner = inner
        self._buft = GuardedBufferType(f"guarded {inner.name}", self)

    def memory(self) -> tuple[int, int]:
        return self.inner.memory()

    def options(self) -> Options:
        return self.inner.options()

    def init_backend(self, params: BackendParams = None) -> Backend:
        return self.inner.init_backend(params)

    def buffer_type(self) -> BufferType:
        return self._buft

    def supports_op(self, op: Tensor) -> bool:
        return self.inner.supports_op(op)


def make_served(devices: tuple[str, ...], cache_dir: Path | None) -> Served:
    devs: list[Device] = [GuardedDevice(get_device(n)) for n in devices]
    backends = [d.init_backend("n_threads=1" if d.name == "cpu" else None) for d in devs]  # only cpu has threads
    return Served(devs, backends, MEMORY_LIMIT, cache_dir)


def alloc(session: Session, device: int, size: int) -> ServedBuffer:
    handle = TWO_U64.unpack(session.handle(Cmd.ALLOC_BUFFER, DEVICE_U64.pack(device, size)) or b"")[0]
    if not handle:
        raise AllocationError(f"setup: {size} bytes on device {device} refused")
    return session.table.by_handle[handle]


class World:
    """The fuzzed session `a` (main buffer: where valid messages point; sentinel; scratch buffers to free) and a
    bystander client `b` whose sentinel no message of `a` may change."""

    def __init__(self, served: Served, graph_init: Bytes, cache_blobs: list[Bytes]) -> None:
        self.served = served
        self.n_devices = len(served.devices)
        self.graph_init = graph_init
        self.cache_blobs = cache_blobs
        self.b = Session(served, "bystander")
        self.sent_b = alloc(self.b, 0, SENTINEL_SIZE)
        self.sent_b.buffer.write(0, SENTINEL)
        self.a = Session(served, "fuzzed")
        self.reset()

    def reset(self) -> None:
        self.a.close()
        self.a = Session(self.served, "fuzzed")
        self.main = alloc(self.a, 0, MAIN_SIZE)
        self.main.buffer.write(0, np.zeros(MAIN_SIZE, np.uint8))
        self.sent_a = alloc(self.a, self.n_devices - 1, SENTINEL_SIZE)
        self.sent_a.buffer.write(0, SENTINEL)
        self.age = 0

    def handles(self) -> list[int]:
        return [self.main.handle, self.sent_a.handle, self.sent_b.handle]

    def verify(self, payload: bytes) -> tuple[list[str], bool]:
        """(what went wrong, whether the fuzzed session must start afresh) after one message."""
        problems: list[str] = []
        for who, s in (("fuzzed", self.a), ("bystander", self.b)):
            for sb in s.table.by_handle.values():
                if isinstance(sb.buffer, GuardedBuffer) and not sb.buffer.guards_intact():
                    problems.append(f"{who} buffer {sb.handle:#x}: guard bytes changed")
        if self.b.table.by_handle.get(self.sent_b.handle) is not self.sent_b:
            problems.append("bystander's sentinel buffer is gone")
        elif not np.array_equal(self.sent_b.buffer.read(0, SENTINEL_SIZE), SENTINEL):
            problems.append("bystander's sentinel buffer changed")
        named = U64.pack(self.sent_a.handle) in payload
        if self.sent_a.handle not in self.a.table.by_handle:
            if not named:
                problems.append("sentinel buffer freed by a message that does not name it")
        elif not np.array_equal(self.sent_a.buffer.read(0, SENTINEL_SIZE), SENTINEL):
            if not named:
                problems.append("sentinel buffer changed by a message that does not name it")
            self.sent_a.buffer.write(0, SENTINEL)
        main_gone = self.main.handle not in self.a.table.by_handle
        if main_gone and U64.pack(self.main.handle) not in payload:
            problems.append("main buffer freed by a message that does not name it")
        held = self.a.table.total() + self.b.table.total()
        if self.served.allocated != held:
            problems.append(f"server counts {self.served.allocated} bytes allocated, sessions hold {held}")
        return problems, main_gone or self.sent_a.handle not in self.a.table.by_handle

