"""Typed options (issue 34, item 5): declared once, read from the environment once where a group enters, errors that
name the variable and its value, one check of init_backend params on every device, and `pyggml options`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from pyggml.backend.core_options import MetaOptions, PluginOptions, SchedulerOptions
from pyggml.backend.meta import MetaDevice
from pyggml.backend.option_parsers import choice, count, names, seconds
from pyggml.backend.options import Options, option, split_params
from pyggml.backend.protocol import Backend, Device, LazyRegistry
from pyggml.backend.registry import BackendHub
from pyggml.errors import BackendParamsError, OptionError
from pyggml_testing.devices import FakeBackend, FakeDevice, fake_device


@dataclass(frozen=True)
class DemoOptions(Options):
    """Read when the demo devices are enumerated."""

    label = "demo"
    positional = "lanes"
    lanes: int = option(4, env="PYGGML_DEMO_LANES", parse=count, per_backend=True, aliases=("n",), doc="lanes")
    mode: str = option("fast", env="PYGGML_DEMO_MODE", parse=choice("fast", "exact"), per_backend=True, doc="mode")
    timeout: float = option(5.0, env="PYGGML_DEMO_TIMEOUT", parse=seconds, doc="seconds")
    only: tuple[str, ...] = option((), env="PYGGML_DEMO_ONLY", parse=names, doc="devices")
    verbose: bool = option(False, env="PYGGML_DEMO_VERBOSE", doc="talk")


class DemoRegistry(LazyRegistry[DemoOptions]):
    name = "demo"
    options_type = DemoOptions

    def _enumerate(self) -> Sequence[Device]:
        return [DemoDevice(self)]


class DemoDevice(FakeDevice):
    def __init__(self, reg: DemoRegistry) -> None:
        super().__init__(reg, "demo0")
        self.opts = reg.options()

    def init_backend(self, params: object = None) -> Backend:
        be = FakeBackend(self)
        be.opts = self.opts.with_params(params, self.name)  # type: ignore[attr-defined, arg-type]
        return be


class LazyDevice(FakeDevice):
    """Declares per-backend options but forgets to override init_backend."""


def test_the_environment_sets_the_group_and_empty_means_unset() -> None:
    env = {"PYGGML_DEMO_LANES": " 8 ", "PYGGML_DEMO_MODE": "EXACT", "PYGGML_DEMO_ONLY": " a, b ,,",
           "PYGGML_DEMO_VERBOSE": "yes", "PYGGML_DEMO_TIMEOUT": ""}
    opts = DemoOptions.from_env(env)
    assert opts == DemoOptions(lanes=8, mode="exact", timeout=5.0, only=("a", "b"), verbose=True)
    assert DemoOptions.from_env({}) == DemoOptions()


@pytest.mark.parametrize(("var", "value", "why"), [
    ("PYGGML_DEMO_LANES", "many", "not an integer"),
    ("PYGGML_DEMO_LANES", "0", "must be at least 1"),
    ("PYGGML_DEMO_MODE", "slow", "not one of fast, exact"),
    ("PYGGML_DEMO_TIMEOUT", "abc", "not a number of seconds"),
    ("PYGGML_DEMO_VERBOSE", "2", "not a flag"),
])
def test_a_bad_value_names_the_variable_the_value_and_the_option(var: str, value: str, why: str) -> None:
    with pytest.raises(OptionError) as e:
        DemoOptions.from_env({var: value})
    assert str(e.value).startswith(f"{var}={value!r}: {why}") and "(demo option " in str(e.value)
    assert isinstance(e.value, ValueError)


def test_values_given_in_code_are_checked_like_text() -> None:
    with pytest.raises(OptionError, match=r"^demo option lanes=0: must be at least 1"):
        DemoOptions(lanes=0)
    with pytest.raises(OptionError, match="expected int, got str"):
        DemoOptions(lanes="4")  # type: ignore[arg-type]
    assert DemoOptions(timeout=2).timeout == 2.0 and isinstance(DemoOptions(timeout=2).timeout, float)
    assert DemoOptions().replace(only=["x"]).only == ("x",)  # type: ignore[arg-type]


def test_a_registry_reads_its_group_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYGGML_DEMO_LANES", "2")
    reg = DemoRegistry()
    dev = reg.devices()[0]
    monkeypatch.setenv("PYGGML_DEMO_LANES", "3")  # too late: the devices have their options
    assert reg.options().lanes == 2 and reg.options() is dev.options() is reg.options()
    assert dev.init_backend().opts.lanes == 2  # type: ignore[attr-defined]
    given = DemoRegistry(options=DemoOptions(lanes=7))  # made in code: no environment read
    assert given.options().lanes == 7 and given.devices()[0].options().lanes == 7
    assert (given.name, DemoRegistry("other").name) == ("demo", "other")
    with pytest.raises(TypeError, match="expected DemoOptions"):
        DemoRegistry(options=MetaOptions())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="options go as options="):
        DemoRegistry(DemoOptions())  # type: ignore[arg-type]


def test_a_bad_variable_fails_the_enumeration_and_the_next_one_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYGGML_DEMO_TIMEOUT", "soon")
    reg = DemoRegistry()
    for _ in range(2):
        with pytest.raises(OptionError, match="PYGGML_DEMO_TIMEOUT='soon'"):
            reg.devices()


def test_backend_params_as_text_mapping_or_object() -> None:
    dev = DemoRegistry().devices()[0]
    assert dev.init_backend("lanes=2,mode=exact").opts == DemoOptions(lanes=2, mode="exact")  # type: ignore[attr-defined]
    assert dev.init_backend("3").opts.lanes == 3  # type: ignore[attr-defined]  # the positional option
    assert dev.init_backend({"n": 5}).opts.lanes == 5  # type: ignore[attr-defined]  # an alias, a typed value
    assert dev.init_backend({"mode": "exact"}).opts.mode == "exact"  # type: ignore[attr-defined]
    assert dev.init_backend(DemoOptions(lanes=6)).opts.lanes == 6  # type: ignore[attr-defined]
    assert dev.init_backend("").opts == dev.init_backend(None).opts == DemoOptions()  # type: ignore[attr-defined]


@pytest.mark.parametrize(("params", "message"), [
    ("lanez=2", "demo0: unknown backend option 'lanez' in 'lanez=2' (it takes lanes, mode)"),
    ("timeout=1", "demo0: option 'timeout' is fixed when its devices are enumerated (PYGGML_DEMO_TIMEOUT), not "
                  "per backend (it takes lanes, mode)"),
    ("lanes=0", "demo0: option lanes='0': must be at least 1"),
    ({"lanes": 2.5}, "demo0: option lanes=2.5: expected int, got float"),
    (DemoOptions(timeout=9.0), "demo0: option(s) timeout are fixed when its devices are enumerated, not per backend"),
    (SchedulerOptions(), "demo0: backend options are DemoOptions, not SchedulerOptions"),
])
def test_bad_backend_params_name_the_device_and_the_option(params: object, message: str) -> None:
    dev = DemoRegistry().devices()[0]
    with pytest.raises(BackendParamsError) as e:
        dev.init_backend(params)
    assert str(e.value) == message


def test_a_device_must_apply_the_per_backend_options_it_declares() -> None:
    reg = DemoRegistry()
    dev = LazyDevice(reg, "lazy0")
    assert dev.init_backend("lanes=4").device is dev  # the device's own values: nothing to apply
    with pytest.raises(BackendParamsError, match="does not override init_backend"):
        dev.init_backend("lanes=2")
    with pytest.raises(BackendParamsError, match=r"^p1: the backend takes no parameters, got \{'x': 1\}$"):
        fake_device("p1").init_backend({"x": 1})


def test_the_meta_device_takes_its_own_options_and_passes_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    assert split_params("allreduce=butterfly, lanes=2", MetaOptions) == ({"allreduce": "butterfly"}, {"lanes": "2"})
    assert split_params(MetaOptions(), MetaOptions) == (MetaOptions(), None)
    assert split_params(None, MetaOptions) == (None, None)
    dev = DemoRegistry().devices()[0]
    monkeypatch.setenv("PYGGML_META_ALLREDUCE", "inprocess")
    meta = MetaDevice([dev, dev])
    be = meta.init_backend("lanes=2")
    assert be.comm.name == "inprocess"  # type: ignore[attr-defined]  # the variable, read for this meta device
    assert [b.opts.lanes for b in be.backends] == [2, 2]  # type: ignore[attr-defined]
    assert meta.init_backend({"allreduce": "butterfly"}).comm.name == "butterfly"  # type: ignore[attr-defined]
    with pytest.raises(BackendParamsError, match="option allreduce='ring': not one of auto, inprocess, butterfly"):
        meta.init_backend("allreduce=ring")
    with pytest.raises(BackendParamsError, match="demo0: unknown backend option 'ring'"):
        meta.init_backend("ring=1")


def test_the_hub_reads_its_options_when_it_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYGGML_PLUGIN_TIMEOUT", "soon")
    with pytest.raises(OptionError, match="PYGGML_PLUGIN_TIMEOUT='soon': not a number of seconds"):
        BackendHub().load()
    h = BackendHub(PluginOptions(backends=("numpy",), timeout=None))  # given in code: the variables are not read
    assert [d.name for d in h.devices()] == ["numpy"]
    assert PluginOptions.from_env({"PYGGML_PLUGIN_TIMEOUT": "0"}).timeout is None  # 0: no limit


def test_pyggml_options_lists_every_group_with_its_values() -> None:
    env = {**os.environ, "PYGGML_BACKENDS": "cpu,numpy", "PYGGML_CPU_THREADS": "1", "PYGGML_SCHED_DEBUG": "2"}
    out = subprocess.run([sys.executable, "-m", "pyggml.cli", "options", "--json"], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    groups = {g["group"]: g for g in report["groups"]}
    assert {"plugins", "default device", "scheduler", "meta", "mpi", "cpu"} <= set(groups)
    cpu = groups["cpu"]
    assert cpu["devices"] == ["cpu"] and cpu["class"] == "CpuOptions"
    assert cpu["options"][0] | {"doc": ""} == {"name": "n_threads", "variable": "PYGGML_CPU_THREADS",
                                              "per_backend": True, "default": "the cores this process may use",
                                              "value": "1", "doc": ""}
    assert groups["scheduler"]["options"][0]["value"] == "2"
    assert "numpy" in report["undeclared"]
    text = subprocess.run([sys.executable, "-m", "pyggml.cli", "options"], capture_output=True, text=True,
                          env={**env, "PYGGML_SCHED_DEBUG": "x"}, timeout=300)
    assert text.returncode == 0, text.stderr
    assert "  error: PYGGML_SCHED_DEBUG='x': not an integer (scheduler option debug)" in text.stdout
    assert "  * n_threads        PYGGML_CPU_THREADS           1" in text.stdout
