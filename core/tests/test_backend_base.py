"""What the protocol's base classes do for every plugin: the identity a device and a registry give their
constructors, LazyRegistry's once-only enumeration, the allocation tally and the host-array copy."""

from __future__ import annotations

import gc
import re
import threading
from collections.abc import Sequence

import numpy as np
import pytest

from pyggml.backend.accounting import AllocationTally, alloc_error
from pyggml.backend.host import HostBufferType
from pyggml.backend.protocol import Device, DeviceCaps, DeviceType, LazyRegistry
from pyggml.backend.registry import devices, get_device
from pyggml.errors import AllocationError, BackendParamsError
from pyggml_testing.devices import fake_device


class _Counting(LazyRegistry):
    def __init__(self, found: int, fail: bool = False) -> None:
        super().__init__("counting")
        self.found, self.fail, self.calls = found, fail, 0

    def _enumerate(self) -> Sequence[Device]:
        self.calls += 1
        if self.fail:
            self.fail = False
            raise OSError("driver busy")
        if not self.found:
            return self._unavailable("no counting device")
        return [fake_device(f"counting{i}") for i in range(self.found)]


def test_device_serves_the_identity_given_to_its_constructor() -> None:
    dev = fake_device("d0", dev_type=DeviceType.IGPU, async_ops=True)
    assert (dev.name, dev.type, dev.reg.name) == ("d0", DeviceType.IGPU, "d0")
    assert dev.caps == DeviceCaps(async_ops=True, events=True)
    assert dev.description == "d0" and dev.reg.devices() == [dev]
    props = dev.props()
    assert (props.name, props.type, props.caps) == ("d0", DeviceType.IGPU, dev.caps)
    assert fake_device("d1").caps == DeviceCaps()
    buft = dev.buffer_type()
    assert (buft.name, buft.device) == ("d0_mem", dev)
    assert (HostBufferType("h").name, HostBufferType("h").device) == ("h", None)


def test_a_device_without_options_refuses_params_and_takes_the_defaults() -> None:
    dev = fake_device("p0")
    assert dev.init_backend(None).device is dev and dev.init_backend("").device is dev
    with pytest.raises(BackendParamsError, match=r"^p0: the backend takes no parameters, got 'threads=4'$"):
        dev.init_backend("threads=4")


@pytest.mark.parametrize("name", [d.name for d in devices()])
def test_every_device_refuses_backend_params_it_does_not_take(name: str) -> None:
    """The protocol's rule, on every device installed here (numpy, cpu, blas, OpenCL, Vulkan, ...): an unknown
    option is an error naming the device, never silently ignored."""
    with pytest.raises(BackendParamsError, match=re.escape(name)):
        get_device(name).init_backend("no_such_option=1")


def test_lazy_registry_enumerates_once_on_first_use() -> None:
    reg = _Counting(2)
    assert reg.name == "counting" and reg.calls == 0
    devs = reg.devices()
    assert [d.name for d in devs] == ["counting0", "counting1"]
    assert reg.devices() is devs and reg.unavailable_reason() is None and reg.calls == 1


def test_lazy_registry_reason_enumerates_first() -> None:
    reg = _Counting(0)
    assert reg.unavailable_reason() == "no counting device" and reg.calls == 1
    assert list(reg.devices()) == [] and reg.calls == 1


def test_lazy_registry_does_not_cache_a_failure() -> None:
    reg = _Counting(1, fail=True)
    with pytest.raises(OSError, match="driver busy"):
        reg.devices()
    assert len(reg.devices()) == 1 and reg.calls == 2


def test_lazy_registry_asks_the_driver_once_across_threads() -> None:
    reg = _Counting(1)
    threads = [threading.Thread(target=reg.devices) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert reg.calls == 1


class _Owner:
    pass


def test_allocation_tally_counts_until_garbage_collected() -> None:
    tally = AllocationTally()
    a, b = _Owner(), _Owner()
    tally.track(a, 100)
    tally.track(b, 28)
    assert tally.bytes == 128 and tally.memory(1000) == (872, 1000) and tally.memory(100) == (0, 100)
    del a
    gc.collect()
    assert tally.bytes == 28


def test_allocation_tally_finalizer_inside_its_own_lock_does_not_deadlock() -> None:
    """Garbage collection may run a buffer's finalizer while the same thread is inside the tally's lock."""
    tally = AllocationTally()

    def freed_while_counting() -> None:
        owner = _Owner()
        tally.track(owner, 8)
        with tally._lock:
            del owner
            gc.collect()

    t = threading.Thread(target=freed_while_counting, daemon=True)
    t.start()
    t.join(timeout=10)
    assert not t.is_alive(), "the finalizer waited for the lock its own thread holds"
    assert tally.bytes == 0


def test_alloc_error_names_device_and_size() -> None:
    err = alloc_error(fake_device("gpu7"), 4096, "out of memory")
    assert isinstance(err, AllocationError)
    assert str(err) == "gpu7 (gpu7): cannot allocate a buffer of 4096 bytes: out of memory"


def test_write_from_host_copies_from_host_memory_only() -> None:
    host = HostBufferType("h").alloc_buffer(16)
    host.write(0, np.arange(16, dtype=np.uint8))
    dev = fake_device("mem0")
    dst = dev.buffer_type().alloc_buffer(16)
    assert dst.write_from_host(host, 4, 2, 6)
    assert list(dst.read(0, 10)) == [0, 0, 4, 5, 6, 7, 8, 9, 0, 0]
    other = fake_device("mem1").buffer_type().alloc_buffer(16)
    assert not dst.write_from_host(other, 0, 0, 4)  # private device memory has no host array
