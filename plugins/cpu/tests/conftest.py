"""Fixtures: the cpu device and backend, and the SIMD level (every numerics test runs on both kernel paths)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pyggml.backend.protocol import Backend, Device
from pyggml.backend.registry import get_device
from pyggml_cpu import native

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
