"""Fixtures: the cpu device and backend, the SIMD level (every numerics test runs on both kernel paths), and
ggml's own CPU library with a fresh context per test for the tests that compare an op with ggml's."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import pytest

from pyggml.backend.protocol import Backend, Device
from pyggml.backend.registry import get_device
from pyggml_cpu import native
from pyggml_testing.ggml_ctypes import GgmlCtx
from pyggml_testing.llama_cpp_ref import load_ggml_cpu

LEVELS = ["best", "portable"]


@pytest.fixture(scope="session")
def cpu_device() -> Device:
    return get_device("cpu")


@pytest.fixture
def cpu_backend(cpu_device: Device) -> Iterator[Backend]:
    be = cpu_device.init_backend("n_threads=2")
    yield be
    be.free()


@pytest.fixture(params=LEVELS)
def simd(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test with the SIMD kernels, then with the portable ones (restored afterwards)."""
    before = native.simd_level()
    level = native.set_simd_level(0 if request.param == "portable" else -1)
    yield level
    native.set_simd_level(-1 if before != "portable" else 0)


@pytest.fixture(scope="session")
def ggml_cpu() -> ctypes.CDLL:
    """libggml-cpu of `make llama-cpp-ref` (the tests that ask for it skip where it is not built)."""
    return load_ggml_cpu()


@pytest.fixture
def gg(ggml_cpu: ctypes.CDLL) -> Iterator[GgmlCtx]:
    """A ggml context on that library, freed after the test."""
    g = GgmlCtx(ggml_cpu)
    yield g
    g.close()
