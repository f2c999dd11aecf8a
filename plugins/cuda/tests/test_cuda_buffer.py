"""Buffers over the (fake) driver: bytes in and out, copies between devices, pinned host memory, errors."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml.context import Context
from pyggml.errors import AllocationError
from pyggml.types import GGMLType
from pyggml_cuda.buffer import ALIGNMENT, CudaBuffer
from pyggml_cuda_testing.fakedriver import State


def _tensor(buf, offset: int = 0, n: int = 16):  # type: ignore[no-untyped-def]
    t = Context(no_alloc=True).new_tensor(GGMLType.F32, n, name="t")
    t.buffer, t.offset = buf, offset
    return t


def test_write_read_fill(fake_devices, gpu_state: State) -> None:  # type: ignore[no-untyped-def]
    d0 = fake_devices[0]
    buf = d0.buffer_type().alloc_buffer(1000)
    assert isinstance(buf, CudaBuffer) and buf.ptr % ALIGNMENT == 0
    t = _tensor(buf, 256)
    x = np.arange(16, dtype=np.float32)
    buf.set_tensor(t, x.view(np.uint8))
    assert np.array_equal(buf.get_tensor(t).view(np.float32), x)
    buf.memset_tensor(t, 0, 8, 8)
    assert np.array_equal(buf.get_tensor(t).view(np.float32), np.r_[x[:2], 0, 0, x[4:]])
    buf.clear(7)
    assert (buf.read(0, 1000) == 7).all()
    assert d0.memory()[0] == (1 << 30) - 1000
    assert gpu_state.stack == []


def test_out_of_memory_names_device_and_sizes(fake_devices) -> None:  # type: ignore[no-untyped-def]
    d0 = fake_devices[0]
    d0.buffer_type().alloc_buffer(1 << 29)
    with pytest.raises(AllocationError) as ei:
        d0.buffer_type().alloc_buffer((1 << 29) + 4096)
    msg = str(ei.value)
    assert msg.startswith("CUDA0 (Fake H200 (sm_90)): cannot allocate a buffer of 536875008 bytes")
    assert "out of device memory (536870912 of 1073741824 bytes free)" in msg
    with pytest.raises(AllocationError, match="the device has 1073741824 bytes"):
        d0.buffer_type().alloc_buffer(1 << 31)


def test_copies_between_devices_go_peer_to_peer(fake_devices, gpu_state: State) -> None:  # type: ignore[no-untyped-def]
    d0, d1 = fake_devices
    a, b = d0.buffer_type().alloc_buffer(64), d1.buffer_type().alloc_buffer(64)
    a.write(0, np.arange(64, dtype=np.uint8))
    assert b.copy_from(a, 8, 16, 32)
    assert np.array_equal(b.read(16, 32), np.arange(8, 40, dtype=np.uint8))
    assert ("enable_peer_access", 1, 0) in gpu_state.calls and ("cuMemcpyPeer",) in gpu_state.calls
    assert a.copy_from(a, 0, 32, 8) and np.array_equal(a.read(32, 8), np.arange(8, dtype=np.uint8))
    host = d0.host_buffer_type().alloc_buffer(64)
    host.write(0, np.full(64, 5, np.uint8))
    assert b.copy_from(host, 0, 0, 64) and (b.read(0, 64) == 5).all()
    gpu_state.peer = False  # no peer access: the driver stages the copy, still device to device for us
    c = d0.buffer_type().alloc_buffer(64)
    d1._peers.clear()
    assert c.copy_from(b, 0, 0, 64) and (c.read(0, 64) == 5).all()


def test_pinned_host_buffers(fake_devices) -> None:  # type: ignore[no-untyped-def]
    d0 = fake_devices[0]
    hbt = d0.host_buffer_type()
    assert hbt.is_host and hbt.name == "CUDA0_Host" and hbt.alignment == ALIGNMENT
    hb = hbt.alloc_buffer(100)
    arr = hb.host_array()
    assert arr is not None and arr.size == 100
    arr[:] = 3
    assert (hb.read(0, 100) == 3).all()


def test_free_returns_memory(fake_devices) -> None:  # type: ignore[no-untyped-def]
    d0 = fake_devices[0]
    buf = d0.buffer_type().alloc_buffer(4096)
    buf.free()
    assert d0.memory()[0] == 1 << 30
    buf.free()  # twice is harmless
