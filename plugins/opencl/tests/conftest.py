from __future__ import annotations

import os

import pytest

# PoCL: two CPU devices, so the multi-device paths run everywhere PoCL does (other ICDs ignore this)
os.environ.setdefault("POCL_DEVICES", "pthread pthread")


@pytest.fixture(scope="session")
def cl_devices():  # type: ignore[no-untyped-def]
    from pyggml_opencl.registry import OpenCLRegistry
    from pyggml_testing.devices import devices_or_skip

    return devices_or_skip(OpenCLRegistry(), "no OpenCL device")


@pytest.fixture(scope="session")
def dev(cl_devices):  # type: ignore[no-untyped-def]
    return cl_devices[0]


@pytest.fixture(scope="session")
def device(dev):  # type: ignore[no-untyped-def]
    """`dev` under the name the shared test classes of pyggml_testing (TrainOpsTests, ConvGraphTests) ask for."""
    return dev


@pytest.fixture(scope="session")
def backend(dev):  # type: ignore[no-untyped-def]
    return dev.init_backend()


@pytest.fixture(scope="session")
def dev2(cl_devices):  # type: ignore[no-untyped-def]
    if len(cl_devices) < 2:
        pytest.skip("only one OpenCL device (PoCL: POCL_DEVICES='pthread pthread' gives two)")
    return cl_devices[1]
