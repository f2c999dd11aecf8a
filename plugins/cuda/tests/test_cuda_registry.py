"""Device enumeration through the (fake) driver: names, facts, CUDA_VISIBLE_DEVICES, failures with reasons."""

from __future__ import annotations

import pytest

from pyggml.backend.extensions import COMM_INIT
from pyggml.backend.protocol import DeviceType
from pyggml_cuda.registry import CudaRegistry
from pyggml_cuda_testing.fakedriver import GPU, State


def test_devices_are_named_in_driver_order(gpu_state: State) -> None:
    gpu_state.gpus.append(GPU(name="Fake A100", cc=(8, 0), memory=2 << 30))
    reg = CudaRegistry()
    devs = list(reg.devices())
    assert [d.name for d in devs] == ["CUDA0", "CUDA1"]
    assert reg.unavailable_reason() is None
    p = devs[1].props()
    assert (p.description, p.type, p.memory_total) == ("Fake A100 (sm_80)", DeviceType.GPU, 2 << 30)
    assert p.caps.async_ops and p.caps.events and p.caps.host_buffer
    assert p.details["compute_capability"] == "8.0" and p.details["pci_bus_id"] == "0000:02:00.0"
    assert gpu_state.stack == []  # every driver call left the context stack as it found it


@pytest.mark.parametrize("value", ["", "-1"])
def test_cuda_visible_devices_can_hide_everything(gpu_state: State, monkeypatch: pytest.MonkeyPatch,
                                                  value: str) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    gpu_state.init_error = "the driver must not be asked"
    reg = CudaRegistry()
    assert list(reg.devices()) == []
    assert reg.unavailable_reason() == f"CUDA_VISIBLE_DEVICES={value!r} hides every CUDA device"


def test_driver_failure_is_the_reason(gpu_state: State) -> None:
    gpu_state.init_error = "cuInit failed: no CUDA-capable device is detected"
    reg = CudaRegistry()
    assert list(reg.devices()) == []
    assert reg.unavailable_reason() == "the CUDA driver did not initialise: cuInit failed: no CUDA-capable device " \
                                       "is detected"


def test_no_device(gpu_state: State, monkeypatch: pytest.MonkeyPatch) -> None:
    gpu_state.gpus.clear()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    reg = CudaRegistry()
    assert list(reg.devices()) == []
    assert reg.unavailable_reason() == "the CUDA driver sees no device (CUDA_VISIBLE_DEVICES='7')"


def test_old_devices_are_left_out(gpu_state: State) -> None:
    gpu_state.gpus[0] = GPU(name="Fake V100", cc=(7, 0))
    reg = CudaRegistry()
    assert list(reg.devices()) == []
    assert "compute capability 7.5 or newer: Fake V100 (compute capability 7.0)" in (reg.unavailable_reason() or "")
    gpu_state.gpus.append(GPU(name="Fake T4", cc=(7, 5)))
    assert [d.description for d in CudaRegistry().devices()] == ["Fake T4 (sm_75)"]


def test_extensions() -> None:
    reg = CudaRegistry()
    assert callable(reg.get_extension(COMM_INIT))
    assert reg.get_extension("set_n_threads") is None


def test_memory_and_supports(fake_devices) -> None:  # type: ignore[no-untyped-def]
    d0, d1 = fake_devices
    free, total = d0.memory()
    assert free == total == 1 << 30
    assert d0.supports_buft(d0.buffer_type()) and not d0.supports_buft(d1.buffer_type())
    assert not d0.supports_buft(d0.host_buffer_type())
