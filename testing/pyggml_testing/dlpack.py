"""DLPack checks every plugin's tests share: a tensor in a buffer type exports its memory to numpy without a copy
(or, where numpy cannot take that memory, is refused by name and copied on request), and an array imported onto a
device computes there (in place where the device can use the memory)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.protocol import BufferType, Device, DeviceType
from pyggml.backend.registry import get_device
from pyggml.backend.sched import Scheduler
from pyggml.dlpack import tensor_from_dlpack
from pyggml.errors import DLPackError
from pyggml.tensor import Tensor


def placed(buft: BufferType, values: npt.NDArray[np.float32], name: str = "t") -> Tensor:
    """An F32 tensor of `values`' shape (numpy order) in a new buffer of `buft`, holding them."""
    ctx = gg.Context(no_alloc=True)
    t = ctx.new_tensor(gg.F32, *reversed(values.shape), name=name)
    alloc_ctx_tensors(ctx, buft)
    t.set(values)
    return t


def assert_exports_in_place(buft: BufferType) -> Tensor:
    """`np.from_dlpack` of a tensor in `buft` is its memory: writes go both ways. Returns the tensor."""
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = placed(buft, values, "exported")
    a = np.from_dlpack(t)
    assert a.shape == (3, 4) and np.array_equal(a, values)
    a[1, 2] = 99.0
    assert t.numpy()[1, 2] == 99.0
    t.set(np.zeros((3, 4), np.float32))
    assert not a.any()
    return t


def assert_refused_and_copied(buft: BufferType, name: str, refusal: str) -> Tensor:
    """`np.from_dlpack` of a tensor called `name` in `buft`, memory numpy cannot take in place, raises DLPackError
    matching `refusal` (a regular expression); a copy to the host (`device="cpu", copy=True`) holds its values.
    Returns the tensor."""
    values = np.arange(4, dtype=np.float32)
    t = placed(buft, values, name)
    with pytest.raises(DLPackError, match=refusal):
        np.from_dlpack(t)
    assert np.array_equal(np.from_dlpack(t, device="cpu", copy=True), values)
    return t


def assert_computes_on_import(device: Device, in_place: bool) -> Tensor:
    """An array imported onto `device` (`tensor_from_dlpack`) computes there; `in_place`: the device uses the
    array's memory, so a change to the array is seen by the next compute without writing the tensor again."""
    x = np.arange(8, dtype=np.float32)
    before = x.copy()
    a = tensor_from_dlpack(x, device=device, name="imported")
    assert a.buffer is not None and a.buffer.buft.device is device
    y = ops.scale(a, 2.0).set_output()
    graph = gg.build_graph(y)
    backends = [device.init_backend()]
    if device.type is not DeviceType.CPU:
        backends.append(get_device("numpy").init_backend())
    sched = Scheduler(backends)
    sched.graph_compute(graph)
    assert np.array_equal(y.numpy(), 2 * x)
    x[:] = 1.0
    sched.graph_compute(graph)
    assert np.array_equal(y.numpy(), 2 * (x if in_place else before))
    return a
