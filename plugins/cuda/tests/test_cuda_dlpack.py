"""DLPack on CUDA over the fake driver: device memory exports as kDLCUDA of its device (ready for the consumer's
stream), a free() leaves exported memory to the last export, memory of the same GPU imports in place and other
memory is copied. On a real GPU with CuPy (skipped elsewhere, with the reason): CuPy sees the same memory."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from pyggml import ops
from pyggml.dlpack import DLDeviceType, from_dlpack, tensor_from_dlpack
from pyggml.errors import DLPackError
from pyggml_cuda.buffer import CudaBuffer, CudaForeignBuffer
from pyggml_cuda_testing.fakedriver import State
from pyggml_testing.devices import devices_or_skip
from pyggml_testing.dlpack import placed

VALUES = np.arange(16, dtype=np.float32)


def test_device_memory_exports_as_cuda_memory_of_its_device(fake_devices, gpu_state: State) -> None:  # type: ignore[no-untyped-def]
    d0, d1 = fake_devices
    t0, t1 = placed(d0.buffer_type(), VALUES, "on0"), placed(d1.buffer_type(), VALUES, "on1")
    assert t0.__dlpack_device__() == (DLDeviceType.CUDA, 0) and t1.__dlpack_device__() == (DLDeviceType.CUDA, 1)
    d = from_dlpack(t1)
    assert t1.buffer is not None and isinstance(t1.buffer, CudaBuffer)
    assert d.address == t1.buffer.ptr + t1.offset and d.device == (DLDeviceType.CUDA, 1) and d.shape == (16,)
    with pytest.raises((BufferError, RuntimeError), match="Unsupported device"):  # numpy takes host memory only
        np.from_dlpack(t0)
    assert np.array_equal(np.from_dlpack(t0, device="cpu", copy=True), VALUES)  # or a copy to the host
    with pytest.raises(DLPackError, match="stream 0 is ambiguous"):
        t0.__dlpack__(stream=0)
    gpu_state.calls.clear()
    t0.__dlpack__(stream=1)  # the legacy default stream: ordered after the device's streams by CUDA
    assert ("context_sync", 0) not in gpu_state.calls
    t0.__dlpack__(stream=0x5000)  # another stream: the device's work is waited for first
    assert ("context_sync", 0) in gpu_state.calls


def test_a_free_leaves_exported_memory_to_the_last_export(fake_devices, gpu_state: State) -> None:  # type: ignore[no-untyped-def]
    t = placed(fake_devices[0].buffer_type(), VALUES, "held")
    buf = t.buffer
    assert isinstance(buf, CudaBuffer)
    address = buf.ptr
    capsule = t.__dlpack__(max_version=(1, 0))
    buf.free()
    assert buf.freed and address in gpu_state.memory  # the capsule still holds the allocation
    with pytest.raises(DLPackError, match=r"tensor 'held'.*used after free"):
        t.__dlpack__()
    del capsule
    gc.collect()
    assert address not in gpu_state.memory


def test_memory_of_the_same_gpu_imports_in_place_and_other_memory_is_copied(fake_devices) -> None:  # type: ignore[no-untyped-def]
    d0, d1 = fake_devices
    t = placed(d0.buffer_type(), VALUES, "producer")
    assert t.buffer is not None and isinstance(t.buffer, CudaBuffer)
    same = tensor_from_dlpack(t, device=d0)
    assert isinstance(same.buffer, CudaForeignBuffer) and same.buffer.ptr == t.buffer.ptr + t.offset
    t.set(VALUES * 3)
    assert np.array_equal(same.numpy(), VALUES * 3)  # one memory
    same.buffer.free()  # lets go of the producer's memory, frees nothing of it
    assert np.array_equal(t.numpy(), VALUES * 3)
    other = tensor_from_dlpack(t, device=d1)  # another GPU: through the host
    assert isinstance(other.buffer, CudaBuffer) and other.buffer.dev is d1
    assert np.array_equal(other.numpy(), VALUES * 3)
    host = tensor_from_dlpack(VALUES.copy(), device=d0)  # host memory onto the GPU: a copy
    assert isinstance(host.buffer, CudaBuffer) and np.array_equal(host.numpy(), VALUES)
    odd = ops.view(t, (8,), offset=4)  # 4 bytes past a 256-byte boundary
    with pytest.raises(DLPackError, match=r"copy=False.*not 256-byte aligned"):
        tensor_from_dlpack(odd, device=d0, copy=False)
    with pytest.raises(DLPackError, match=r"copy=False.*memory of CUDA device 0 \(CUDA:0\), not CUDA:1"):
        tensor_from_dlpack(placed(d1.buffer_type(), VALUES), device=d0, copy=False)


def test_cupy_sees_the_same_memory_on_a_gpu() -> None:
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed: the CuPy half of DLPack is untested here")
    from pyggml_cuda.registry import CudaRegistry

    dev = devices_or_skip(CudaRegistry(), "no CUDA device")[0]
    t = placed(dev.buffer_type(), VALUES, "shared")
    c = cupy.from_dlpack(t)
    c[0] = 100.0
    assert t.numpy()[0] == 100.0
    src = cupy.arange(16, dtype=cupy.float32)
    u = tensor_from_dlpack(src, device=dev)
    src[1] = -1.0
    assert u.numpy()[1] == -1.0
