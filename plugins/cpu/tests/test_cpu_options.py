"""The cpu and blas devices' options: read once at enumeration, given in code, and the backend's thread count."""

from __future__ import annotations

import pytest

from pyggml.errors import BackendParamsError, OptionError
from pyggml_cpu import native
from pyggml_cpu.options import BlasOptions, CpuOptions
from pyggml_cpu.registry import BlasRegistry, CpuRegistry


def test_threads_from_the_environment_or_the_cores() -> None:
    assert CpuOptions.from_env({"PYGGML_CPU_THREADS": "3"}).n_threads == 3
    assert CpuOptions.from_env({}).n_threads == native.available_cores()
    with pytest.raises(OptionError, match=r"^PYGGML_CPU_THREADS='abc': not a thread count .*\(cpu option n_threads\)"):
        CpuOptions.from_env({"PYGGML_CPU_THREADS": "abc"})


def test_a_registry_made_in_code_gives_its_devices_and_backends_the_object(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYGGML_CPU_THREADS", "not read")  # the registry has its options: no environment read
    dev = CpuRegistry(options=CpuOptions(n_threads=1)).devices()[0]
    assert dev.options() == CpuOptions(n_threads=1)
    assert dev.init_backend().n_threads == 1  # type: ignore[attr-defined]
    assert dev.init_backend({"n_threads": 2}).n_threads == min(2, native.available_cores())  # type: ignore[attr-defined]
    assert dev.init_backend(CpuOptions(n_threads=1)).n_threads == 1  # type: ignore[attr-defined]
    with pytest.raises(BackendParamsError, match="cpu: backend options are CpuOptions, not BlasOptions"):
        dev.init_backend(BlasOptions(n_threads=1))


def test_blas_backends_take_no_options() -> None:
    devs = BlasRegistry(options=BlasOptions(n_threads=1)).devices()
    if not devs:
        pytest.skip("no OpenBLAS here")
    assert devs[0].options().n_threads == 1
    with pytest.raises(BackendParamsError, match=r"^blas: the backend takes no parameters, got 'n_threads=2'$"):
        devs[0].init_backend("n_threads=2")
