from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def cl_devices():  # type: ignore[no-untyped-def]
    from pyggml_opencl.registry import OpenCLRegistry

    reg = OpenCLRegistry()
    devs = list(reg.devices())
    if not devs:
        pytest.skip(f"no OpenCL device: {reg.unavailable_reason()}")
    return devs


@pytest.fixture(scope="session")
def dev(cl_devices):  # type: ignore[no-untyped-def]
    return cl_devices[0]


@pytest.fixture(scope="session")
def backend(dev):  # type: ignore[no-untyped-def]
    return dev.init_backend()
