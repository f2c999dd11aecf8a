"""Buffers: byte I/O, fill, 2-D forms, device copies (same device, two devices, host), limits, host-visible type."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.backend.protocol import tensor_copy
from pyggml.context import Context
from pyggml.errors import AllocationError
from pyggml.types import GGMLType as T
from pyggml_testing.devices import numpy_device
from pyggml_testing.on_device import place, run


def test_write_read_fill(dev) -> None:  # type: ignore[no-untyped-def]
    buf = dev.buffer_type().alloc_buffer(1000)
    data = np.arange(200, dtype=np.uint8)
    buf.write(100, data)
    assert np.array_equal(buf.read(100, 200), data)
    buf.fill(150, 10, 7)
    assert np.all(buf.read(150, 10) == 7) and buf.read(149, 1)[0] == 49 and buf.read(160, 1)[0] == 60
    buf.clear(0)
    assert not buf.read(0, 1000).any()


def test_two_d_forms(dev) -> None:  # type: ignore[no-untyped-def]
    buf = dev.buffer_type().alloc_buffer(256)
    buf.clear(0)
    rows = np.arange(24, dtype=np.uint8) + 1
    buf.write_2d(8, rows, 3, 8, 32)  # 3 rows of 8 bytes, 32 bytes apart
    full = buf.read(0, 256)
    for r in range(3):
        assert np.array_equal(full[8 + 32 * r : 16 + 32 * r], rows[8 * r : 8 * r + 8])
    assert full[16:40].sum() == 0
    assert np.array_equal(buf.read_2d(8, 3, 8, 32), rows)


def test_copies_same_device_other_device_and_host(dev, dev2) -> None:  # type: ignore[no-untyped-def]
    ctx = Context(no_alloc=True)
    a, b, c, h = (ctx.new_tensor(T.F32, 33, 3) for _ in range(4))
    place(ctx, dev.buffer_type(), [a, b])
    place(ctx, dev2.buffer_type(), [c])
    place(ctx, numpy_device().buffer_type(), [h])
    x = np.random.default_rng(1).standard_normal((3, 33)).astype(np.float32)
    a.set(x)
    tensor_copy(a, b)
    tensor_copy(b, c)
    tensor_copy(c, h)
    assert np.array_equal(h.numpy(), x)
    h.set(x * 2)
    tensor_copy(h, a)
    assert np.array_equal(a.numpy(), x * 2)


def test_too_large_allocation_names_size_and_limit(dev) -> None:  # type: ignore[no-untyped-def]
    limit = dev.buffer_type().max_size
    with pytest.raises(AllocationError, match=rf"{limit + 1} bytes.*{limit} bytes"):
        dev.buffer_type().alloc_buffer(limit + 1)


def test_host_visible_buffer_is_shared_with_kernels(dev, backend) -> None:  # type: ignore[no-untyped-def]
    buft = dev.host_buffer_type()
    if buft is None:
        pytest.skip("device memory is not shared with the host")
    assert buft.is_host and dev.supports_buft(buft)
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor(T.F32, 64)
    y = ops.scale(a, 3.0)
    buf = place(ctx, buft)
    x = np.arange(64, dtype=np.float32)
    a.set(x)
    run(backend, y)
    host = buf.host_array()
    got = host[y.offset : y.offset + 256].view(np.float32)
    assert np.array_equal(got, x * 3)


def test_buffer_from_host_ptr(dev, backend) -> None:  # type: ignore[no-untyped-def]
    if not dev.caps.buffer_from_host_ptr:
        pytest.skip("device cannot wrap host memory")
    mem = np.zeros(4096, dtype=np.uint8)
    mem[:256] = np.arange(64, dtype=np.float32).view(np.uint8)
    buf = dev.buffer_from_host_ptr(mem, 4096)
    ctx = Context(no_alloc=True)
    w = ctx.new_tensor(T.F32, 64)
    w.buffer, w.offset = buf, 0
    y = ops.scale(w, 2.0)
    place(ctx, dev.buffer_type(), [y])
    run(backend, y)
    assert np.array_equal(y.numpy(), np.arange(64, dtype=np.float32) * 2)
