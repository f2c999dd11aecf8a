"""The default device (`pyggml.backend.choice`): ggml_backend_init_best's order by device type, a plugin's priority
over it, PYGGML_DEVICE over both, and `pyggml devices` marking the one chosen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from pyggml.backend import best_device, default_device, get_device, hub, init_best
from pyggml.backend.choice import DEVICE_ENV, rank_devices
from pyggml.backend.protocol import DEFAULT_PRIORITY, FALLBACK_PRIORITY, Device, DeviceType
from pyggml.errors import PyGGMLError
from pyggml_testing.devices import FakeDevice, FakeRegistry


class RankedRegistry(FakeRegistry):
    """A plugin's registry that declares a priority."""

    def __init__(self, name: str, priority: int = DEFAULT_PRIORITY) -> None:
        super().__init__(name)
        self._priority = priority

    @property
    def priority(self) -> int:
        return self._priority


def make(reg: RankedRegistry, name: str, dev_type: DeviceType) -> FakeDevice:
    d = FakeDevice(reg, name, dev_type=dev_type)
    reg._devices.append(d)
    return d


def names(devs: list[Device]) -> list[str]:
    return [d.name for d in devs]


def test_ggml_order_gpu_then_integrated_then_cpu_and_never_an_accelerator() -> None:
    reg = RankedRegistry("Order")
    cpu = make(reg, "Cpu0", DeviceType.CPU)
    accel = make(reg, "Accel0", DeviceType.ACCEL)
    igpu = make(reg, "Igpu0", DeviceType.IGPU)
    gpu0 = make(reg, "Gpu0", DeviceType.GPU)
    gpu1 = make(reg, "Gpu1", DeviceType.GPU)
    assert names(rank_devices([cpu, accel, igpu, gpu0, gpu1])) == ["Gpu0", "Gpu1", "Igpu0", "Cpu0"]
    assert best_device([cpu, accel, igpu]) is igpu
    assert best_device([accel, cpu]) is cpu
    with pytest.raises(PyGGMLError, match=r"no GPU, integrated GPU or CPU device.*Accel0 \(accel\)"):
        best_device([accel])


def test_a_plugin_priority_goes_before_the_device_type() -> None:
    plain, eager, shy = RankedRegistry("Plain"), RankedRegistry("Eager", 10), RankedRegistry("Shy", FALLBACK_PRIORITY)
    gpu = make(plain, "PlainGpu", DeviceType.GPU)
    eager_cpu = make(eager, "EagerCpu", DeviceType.CPU)
    shy_gpu = make(shy, "ShyGpu", DeviceType.GPU)
    cpu = make(plain, "PlainCpu", DeviceType.CPU)
    assert names(rank_devices([shy_gpu, gpu, cpu, eager_cpu])) == ["EagerCpu", "PlainGpu", "PlainCpu", "ShyGpu"]
    assert best_device([shy_gpu, cpu]) is cpu  # a fallback device only where nothing else is
    assert best_device([shy_gpu]) is shy_gpu


def test_the_reference_and_emulated_devices_fall_back() -> None:
    numpy_dev = get_device("numpy")
    assert numpy_dev.priority == FALLBACK_PRIORITY  # the oracle is slow on purpose
    emulated = [d for d in hub().devices() if getattr(d, "emulated", False)]  # Vulkan's llvmpipe, Metal's emulator
    for d in emulated:
        assert d.priority == FALLBACK_PRIORITY, d.name
    # among this machine's own devices (other tests may have registered fakes and remotes in the shared hub)
    here = [d for d in hub().devices() if d.name in ("cpu", "blas", "numpy")] + emulated
    if any(d.name == "cpu" for d in here):
        assert best_device(here).name == "cpu"


@pytest.fixture
def registered() -> Iterator[RankedRegistry]:
    reg = RankedRegistry("Pick", priority=1000)
    make(reg, "Pick0", DeviceType.CPU)
    make(reg, "Pick1", DeviceType.GPU)
    hub().register(reg)
    try:
        yield reg
    finally:
        hub().unregister("Pick")


def test_default_device_takes_the_best_a_name_or_pyggml_device(registered: RankedRegistry,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    assert default_device().name == "Pick1"  # the highest priority, then a GPU before a CPU
    assert init_best().device.name == "Pick1"
    assert default_device("numpy").name == "numpy"
    monkeypatch.setenv(DEVICE_ENV, "Pick0")
    assert default_device().name == "Pick0"
    assert init_best().device.name == "Pick0"
    monkeypatch.setenv(DEVICE_ENV, "numpy")
    assert default_device().name == "numpy"
    assert default_device("Pick1").name == "Pick1"  # the caller's name goes first
    monkeypatch.setenv(DEVICE_ENV, "  ")
    assert default_device().name == "Pick1"  # empty: unset


def test_pyggml_device_naming_no_device_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DEVICE_ENV, "Nosuch7")
    with pytest.raises(PyGGMLError) as e:
        default_device()
    msg = str(e.value)
    assert "PYGGML_DEVICE='Nosuch7'" in msg and "no device named 'Nosuch7'" in msg
    assert "available:" in msg and "numpy" in msg
    with pytest.raises(PyGGMLError, match="PYGGML_DEVICE='Nosuch7'"):
        init_best()


def _devices_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    e = {k: v for k, v in os.environ.items() if k != DEVICE_ENV}
    e.update(env)
    return subprocess.run([sys.executable, "-m", "pyggml.cli", "devices", *args], capture_output=True, text=True,
                          env=e, timeout=300)


def test_pyggml_devices_marks_the_default_device() -> None:
    r = _devices_cli("--json", PYGGML_DEVICE="numpy")
    assert r.returncode == 0, r.stderr
    rows = [row for row in json.loads(r.stdout) if row["device"]]
    assert [row["device"] for row in rows if row["default"]] == ["numpy"]
    text = _devices_cli(PYGGML_DEVICE="numpy")
    assert text.returncode == 0, text.stderr
    marked = [line.split()[2] for line in text.stdout.splitlines() if line.startswith("* ")]
    assert marked == ["numpy"]
    bad = _devices_cli("--json", PYGGML_DEVICE="Nosuch7")
    assert bad.returncode == 0, bad.stderr  # the list is still there to read
    assert not any(row.get("default") for row in json.loads(bad.stdout))
    assert "no default device" in bad.stderr and "PYGGML_DEVICE='Nosuch7'" in bad.stderr
