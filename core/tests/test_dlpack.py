"""DLPack both ways on host memory (`pyggml.dlpack`): numpy sees a tensor's memory and pyggml an array's, without a
copy; capsules and buffers hold what they use; what cannot be exported is refused with an error naming it. torch
and the other plugins' memory are tested where installed (here: torch; plugins/*/tests for cpu, OpenCL, Vulkan,
CUDA)."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend import get_device
from pyggml.backend.host import HostBuffer
from pyggml.dlpack import HOST_BUFT, DLDeviceType, buffer_from_dlpack, tensor_from_dlpack
from pyggml.errors import DLPackError
from pyggml.tensor import Tensor
from pyggml_testing.devices import fake_device
from pyggml_testing.dlpack import assert_computes_on_import, assert_exports_in_place

NUMPY_TYPES = {gg.F32: np.float32, gg.F16: np.float16, gg.GGMLType.F64: np.float64, gg.GGMLType.I8: np.int8,
               gg.GGMLType.I16: np.int16, gg.I32: np.int32, gg.GGMLType.I64: np.int64}


def host_tensor(ttype: gg.GGMLType = gg.F32, *ne: int, name: str = "t") -> Tensor:
    ctx = gg.Context(no_alloc=True)
    t = ctx.new_tensor(ttype, *(ne or (4, 3)), name=name)
    alloc_ctx_tensors(ctx, get_device("numpy").buffer_type())
    return t


def capsule_name(capsule: object) -> str:
    return repr(capsule).split('"')[1]


@pytest.mark.parametrize("ttype", list(NUMPY_TYPES), ids=str)
def test_numpy_sees_the_tensors_memory(ttype: gg.GGMLType) -> None:
    t = host_tensor(ttype, 4, 3)
    t.set(np.arange(12).reshape(3, 4))
    a = np.from_dlpack(t)
    assert a.dtype == NUMPY_TYPES[ttype] and a.shape == (3, 4) and a.flags.writeable
    assert np.array_equal(a, np.arange(12).reshape(3, 4))
    a[1, 2] = 99  # one memory: written through numpy, read through pyggml
    assert t.numpy()[1, 2] == 99
    t.set(np.zeros((3, 4)))
    assert not a.any()
    assert t.__dlpack_device__() == (DLDeviceType.CPU, 0)


def test_every_host_buffer_type_exports_in_place() -> None:
    assert_exports_in_place(get_device("numpy").buffer_type())
    assert_exports_in_place(HOST_BUFT)


def test_bf16_exports_as_dlpack_bfloat16() -> None:
    t = host_tensor(gg.BF16, 4, name="b")
    t.set(np.array([1.0, -2.0, 0.5, 3.0], np.float32))
    u = tensor_from_dlpack(t)  # pyggml reads kDLBfloat back as BF16, in the same memory
    assert u.type == gg.BF16 and np.array_equal(u.numpy(), t.numpy())
    with pytest.raises((BufferError, RuntimeError), match="Unsupported dtype"):  # numpy has no bfloat16 ...
        np.from_dlpack(t)  # ... and its error comes through as numpy raised it


def test_capsules_versioned_when_asked_and_torn_down_when_unconsumed() -> None:
    t = host_tensor()
    assert capsule_name(t.__dlpack__()) == "dltensor"
    assert capsule_name(t.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    assert capsule_name(t.__dlpack__(max_version=(0, 8))) == "dltensor"
    buf = t.buffer
    assert buf is not None
    alive = weakref.ref(buf)
    capsule = t.__dlpack__(max_version=(1, 2))
    t.buffer = None  # only the capsule holds the buffer now
    del buf
    gc.collect()
    assert alive() is not None  # an exported capsule keeps the pyggml buffer alive
    del capsule  # never consumed: its destructor lets go
    gc.collect()
    assert alive() is None


def test_an_array_keeps_the_memory_after_the_tensor_and_its_buffer_go() -> None:
    t = host_tensor()
    t.set(np.arange(12, dtype=np.float32))
    buf = t.buffer
    assert isinstance(buf, HostBuffer)
    a = np.from_dlpack(t)
    buf.free()  # pyggml lets go; the export still holds the memory
    del t, buf
    gc.collect()
    assert np.array_equal(a.reshape(-1), np.arange(12, dtype=np.float32))


def test_strided_views_export_their_element_strides() -> None:
    t = host_tensor(gg.F32, 4, 3)
    t.set(np.arange(12, dtype=np.float32).reshape(3, 4))
    tt = ops.transpose(t)  # a view: ne (3, 4), strides swapped
    assert np.array_equal(np.from_dlpack(tt), np.arange(12, dtype=np.float32).reshape(3, 4).T)
    col = ops.view(t, (1, 3), (16,), 8)  # column 2 of each row
    assert np.array_equal(np.from_dlpack(col).reshape(-1), [2, 6, 10])


def test_what_dlpack_cannot_say_is_refused_naming_the_tensor() -> None:
    t = host_tensor(gg.F32, 4, 3)
    odd = ops.view(t, (2, 3), (8,)).set_name("odd_rows")
    odd.nb = (4, 6, 18, 18)  # rows 6 bytes apart, as a hand-made view may have them: not whole elements
    with pytest.raises(DLPackError, match=r"tensor 'odd_rows' f32 .*strides are not whole 4-byte elements"):
        np.from_dlpack(odd)
    q = host_tensor(gg.GGMLType.Q4_0, 32, 2, name="wq")
    with pytest.raises(DLPackError, match="tensor 'wq' is q4_0, a block-quantised type"):
        np.from_dlpack(q)
    with pytest.raises(BufferError):  # what the array API asks of __dlpack__
        q.__dlpack__()
    lazy = gg.Context(no_alloc=True).new_tensor(gg.F32, 4, name="lazy")
    with pytest.raises(DLPackError, match=r"tensor 'lazy'.*has no buffer yet"):
        np.from_dlpack(lazy)
    buf = t.buffer
    assert buf is not None
    buf.free()
    t.set_name("gone")
    with pytest.raises(DLPackError, match=r"tensor 'gone'.*used after free"):
        np.from_dlpack(t)
    with pytest.raises(DLPackError, match=r"tensor 'gone'.*used after free"):
        t.__dlpack_device__()


def test_copies_on_request_only() -> None:
    t = host_tensor()
    t.set(np.ones(12, dtype=np.float32))
    c = np.from_dlpack(t, copy=True)
    c[:] = 5
    assert (t.numpy() == 1).all()
    same = np.from_dlpack(t, copy=False)
    same[0, 0] = 7
    assert t.numpy()[0, 0] == 7
    with pytest.raises(DLPackError, match="without a copy"):
        t.__dlpack__(dl_device=(DLDeviceType.CUDA, 0), copy=False)
    with pytest.raises(DLPackError, match="a copy can only go to the host"):
        t.__dlpack__(dl_device=(DLDeviceType.CUDA, 0))


def test_memory_numpy_cannot_address_says_so_and_copies_to_the_host_on_request() -> None:
    dev = fake_device("Fake0")  # private "device" memory, no host_array
    ctx = gg.Context(no_alloc=True)
    t = ctx.new_tensor(gg.F32, 4, name="on_device")
    alloc_ctx_tensors(ctx, dev.buffer_type())
    t.set(np.arange(4, dtype=np.float32))
    with pytest.raises(DLPackError, match=r"tensor 'on_device'.*not host memory.*does not export it through DLPack"):
        np.from_dlpack(t)
    c = np.from_dlpack(t, device="cpu", copy=True)  # dl_device=(kDLCPU, 0): a host copy
    assert np.array_equal(c, np.arange(4, dtype=np.float32))
    with pytest.raises(DLPackError, match="copy=False"):
        np.from_dlpack(t, device="cpu", copy=False)


# ---- in ---------------------------------------------------------------------------------------------------------

def test_buffer_from_dlpack_wraps_host_memory_and_holds_the_producer() -> None:
    x = np.arange(16, dtype=np.float32)
    alive = weakref.ref(x)
    buf = buffer_from_dlpack(x)
    assert buf.buft is HOST_BUFT and buf.size == 64
    host = buf.host_array()
    assert host is not None and host.ctypes.data == x.ctypes.data  # no copy
    x[3] = 42
    assert buf.read(12, 4).view(np.float32)[0] == 42
    del x, host
    gc.collect()
    assert alive() is not None  # the buffer holds the producer
    del buf
    gc.collect()
    assert alive() is None


def test_tensor_from_dlpack_places_the_arrays_type_shape_and_strides() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = tensor_from_dlpack(x, name="x")
    assert t.type == gg.F32 and t.ne == (4, 3, 1, 1) and t.name == "x" and np.array_equal(t.numpy(), x)
    xt = tensor_from_dlpack(x.T)
    assert xt.ne == (3, 4, 1, 1) and xt.nb[:2] == (16, 4) and np.array_equal(xt.numpy(), x.T)
    x[0, 0] = -1
    assert t.numpy()[0, 0] == -1 and xt.numpy()[0, 0] == -1
    back = np.from_dlpack(t)  # pyggml -> numpy of an import: the same memory again
    assert back.ctypes.data == x.ctypes.data
    i64 = tensor_from_dlpack(np.arange(3, dtype=np.int64))
    assert i64.type == gg.GGMLType.I64
    with pytest.raises(DLPackError, match="no ggml type"):
        tensor_from_dlpack(np.zeros(3, np.uint8))
    with pytest.raises(DLPackError, match="5 dimensions"):
        tensor_from_dlpack(np.zeros((1, 2, 1, 2, 1), np.float32))
    with pytest.raises(DLPackError, match="negative strides"):
        tensor_from_dlpack(x[:, ::-1])
    with pytest.raises(DLPackError, match="does not export DLPack"):
        buffer_from_dlpack([1.0, 2.0])


def test_pyggml_to_pyggml_is_the_same_memory() -> None:
    t = host_tensor()
    t.set(np.arange(12, dtype=np.float32))
    u = tensor_from_dlpack(t)
    assert u.ne == (4, 3, 1, 1)
    ub, tb = u.buffer, t.buffer
    assert ub is not None and tb is not None
    assert ub.read(0, 4).tobytes() == tb.get_tensor(t)[:4].tobytes()
    u.set(np.full(12, 3.0, np.float32))
    assert (t.numpy() == 3).all()


def test_read_only_arrays_are_copied_and_copy_false_refuses() -> None:
    x = np.arange(8, dtype=np.float32)
    x.flags.writeable = False
    buf = buffer_from_dlpack(x)
    host = buf.host_array()
    assert host is not None and host.ctypes.data != x.ctypes.data and host.flags.writeable
    assert np.array_equal(host.view(np.float32), x)
    with pytest.raises(DLPackError, match=r"without a copy.*read-only"):
        buffer_from_dlpack(x, copy=False)
    y = np.arange(8, dtype=np.float32)
    copied = buffer_from_dlpack(y, copy=True).host_array()
    assert copied is not None and copied.ctypes.data != y.ctypes.data


def test_a_device_that_cannot_use_the_memory_gets_a_copy() -> None:
    dev = fake_device("Fake0")
    x = np.arange(4, dtype=np.float32)
    t = tensor_from_dlpack(x, device=dev)
    assert t.buffer is not None and t.buffer.buft is dev.buffer_type()
    assert np.array_equal(t.numpy(), x)
    with pytest.raises(DLPackError, match=r"copy=False.*Fake0 cannot use memory on DLPack device CPU:0 in place"):
        buffer_from_dlpack(x, dev, copy=False)


def test_imported_memory_computes_in_place_on_a_device() -> None:
    a = assert_computes_on_import(get_device("numpy"), in_place=True)  # it wraps host memory: buffer_from_host_ptr
    assert a.buffer is not None and a.buffer.buft is get_device("numpy").buffer_type()


def test_torch_sees_the_same_memory() -> None:
    torch: Any = pytest.importorskip("torch", reason="torch is not installed: the torch half of DLPack is untested")
    t = host_tensor()
    t.set(np.arange(12, dtype=np.float32))
    tt = torch.from_dlpack(t)
    assert tuple(tt.shape) == (3, 4)
    tt[0, 1] = 50.0
    assert t.numpy()[0, 1] == 50
    src = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    u = tensor_from_dlpack(src)
    src[1, 1] = -7.0
    assert u.numpy()[1, 1] == -7
