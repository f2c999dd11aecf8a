"""Looking a device up by name when no registry has it (issue 33, item 8): the error names why the registries the
name belongs to lack it (their enumeration's failure or `unavailable_reason()`), and those offering the
`rescan_devices` extension look again first, so a device that appeared since enumeration (an RPC server back up)
is found by the next lookup."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from pyggml.backend.extensions import RESCAN_DEVICES
from pyggml.backend.protocol import Device
from pyggml.backend.registry import BackendHub
from pyggml.errors import PyGGMLError
from pyggml_testing.devices import FakeDevice, FakeRegistry


class Remote(FakeRegistry):
    """Devices behind a link that may be down; `rescan_devices` looks again and counts the calls."""

    def __init__(self, name: str, *, rescan: bool = True) -> None:
        super().__init__(name)
        self.up = False
        self.rescans = 0
        self.offers_rescan = rescan

    def devices(self) -> Sequence[Device]:
        if self.up and not self._devices:
            self._devices.append(FakeDevice(self, f"{self.name}0"))
        return self._devices

    def unavailable_reason(self) -> str | None:
        return None if self.up else f"{self.name}'s link is down (host 192.0.2.7: connection refused)"

    def get_extension(self, name: str) -> object | None:
        return self.rescan if name == RESCAN_DEVICES and self.offers_rescan else None

    def rescan(self) -> bool:
        self.rescans += 1
        return self.up


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[BackendHub]:
    monkeypatch.setenv("PYGGML_BACKENDS", "numpy")
    yield BackendHub()


def test_the_error_names_the_reason_of_the_registry_the_name_belongs_to(hub: BackendHub) -> None:
    hub.register(Remote("Far"))
    hub.register(Remote("Away"))
    with pytest.raises(PyGGMLError) as e:
        hub.device("Far0")
    assert str(e.value) == ("no device named 'Far0'; available: numpy; registry 'Far': Far's link is down (host "
                            "192.0.2.7: connection refused)")  # before: only "...; available: numpy"
    with pytest.raises(PyGGMLError) as e:
        hub.device("nothing")
    assert str(e.value) == "no device named 'nothing'; available: numpy"


def test_a_miss_rescans_and_finds_a_device_that_appeared(hub: BackendHub) -> None:
    far = Remote("Far")
    hub.register(far)
    with pytest.raises(PyGGMLError, match="link is down"):
        hub.device("Far0")
    far.up = True
    assert hub.device("Far0").name == "Far0"  # the hub had cached "no devices" before
    assert [d.name for d in hub.devices()] == ["numpy", "Far0"]
    assert far.rescans == 2  # once per missing lookup


def test_only_the_registries_a_name_belongs_to_rescan(hub: BackendHub) -> None:
    far, away, quiet = Remote("Far"), Remote("Away"), Remote("Quiet", rescan=False)
    for reg in (far, away, quiet):
        hub.register(reg)
    for name in ("Far3", "numpy2", "Quiet0"):
        with pytest.raises(PyGGMLError):
            hub.device(name)
    assert (far.rescans, away.rescans) == (1, 0)
    assert hub.device("numpy").name == "numpy"  # found: nothing rescans
    assert (far.rescans, away.rescans) == (1, 0)


class Exploding(Remote):
    def rescan(self) -> bool:
        raise RuntimeError("driver exploded")


def test_a_failing_rescan_is_logged_not_raised(hub: BackendHub, caplog: pytest.LogCaptureFixture) -> None:
    hub.register(Exploding("Far"))
    with pytest.raises(PyGGMLError, match=r"no device named 'Far0'.*link is down"):
        hub.device("Far0")
    assert "driver exploded" in caplog.text
