"""The plugin's entry point and its driver-free import."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from pyggml.backend.hookspec import ENTRY_POINT_GROUP


def test_entry_point_names_the_hook_module() -> None:
    eps = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    assert eps["cuda"].value == "pyggml_cuda.plugin"


def test_import_and_registration_touch_no_driver() -> None:
    code = ("import sys, pyggml_cuda.plugin as p; regs = p.pyggml_backend_registries(); "
            "import pyggml_cuda.op_table, pyggml_cuda.compile, pyggml_cuda.backend, pyggml_cuda.allreduce; "
            "print(regs[0].name, 'pycuda' in sys.modules, 'pyopencl' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["CUDA", "False", "False"]


def test_without_pycuda_zero_devices_and_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyggml_cuda.registry import CudaRegistry

    monkeypatch.setitem(sys.modules, "pycuda", None)  # import pycuda.driver now raises ImportError
    monkeypatch.delitem(sys.modules, "pycuda.driver", raising=False)
    reg = CudaRegistry()
    assert list(reg.devices()) == []
    reason = reg.unavailable_reason()
    assert reason is not None and "pycuda is not importable" in reason and "pyggml-cuda[runtime]" in reason


def test_the_hub_loads_the_plugin_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyggml.backend.registry import BackendHub

    monkeypatch.setitem(sys.modules, "pycuda", None)
    monkeypatch.setenv("PYGGML_STRICT_PLUGINS", "1")
    monkeypatch.delenv("PYGGML_BACKENDS", raising=False)
    hub = BackendHub()
    info = next(i for i in hub.registries() if i.registry.name == "CUDA")
    assert hub.devices_of(info) == []
    assert "pycuda" in (hub.reason(info) or "")
    assert next(p for p in hub.plugins if p.name == "cuda").status == "loaded"
