"""The meta device's own props: memory summed, caps AND-ed, buffer type limits, device count and nesting."""

from __future__ import annotations

import pytest

from pyggml.backend.meta import MetaDevice
from pyggml.backend.protocol import DeviceCaps, DeviceType
from pyggml.errors import PyGGMLError
from pyggml_testing.devices import fake_device
from pyggml_testing.meta import devices


def test_device_props_sum_memory_and_and_caps() -> None:
    devs = [fake_device("a", async_ops=True), fake_device("b", async_ops=True), fake_device("c")]
    meta = MetaDevice(devs)
    p = meta.props()
    assert p.type is DeviceType.META
    assert p.name == "Meta(a,b,c)"
    assert (p.memory_free, p.memory_total) == (3 << 34, 3 << 34)
    assert p.caps == DeviceCaps(async_ops=False)
    assert MetaDevice(devs[:2]).caps == DeviceCaps(async_ops=True)  # events and host buffers stay off
    assert meta.reg.devices() == [meta]


def test_buffer_type_alignment_max_alloc_size_and_full_size_per_device() -> None:
    meta = MetaDevice(devices(3))
    buft = meta.buffer_type()
    assert buft.device is meta and not buft.is_host
    assert buft.alignment == max(b.alignment for b in buft.simple_bufts)
    assert buft.max_size == min(b.max_size for b in buft.simple_bufts)
    buf = buft.alloc_buffer(1000)
    assert [p.size for p in buf.parts] == [1000] * 3
    assert meta.supports_buft(buft) and not meta.supports_buft(buft.simple_bufts[0])
    with pytest.raises(PyGGMLError, match="no flat bytes"):
        buf.read(0, 4)


def test_device_count_and_nesting_are_checked() -> None:
    with pytest.raises(PyGGMLError, match="1 to 16"):
        MetaDevice([])
    with pytest.raises(PyGGMLError, match="1 to 16"):
        MetaDevice(devices(17))
    with pytest.raises(PyGGMLError, match="another meta device"):
        MetaDevice([MetaDevice(devices(2))])
