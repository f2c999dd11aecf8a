"""Fixtures: the Vulkan device (tests skip when no Vulkan device is present), validation on, and a check that a
test produced no validation errors."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from pyggml_testing.devices import devices_or_skip

os.environ.setdefault("PYGGML_VULKAN_VALIDATION", "1")


def _device():  # type: ignore[no-untyped-def]
    try:
        from pyggml_vulkan.registry import VulkanRegistry
    except OSError as e:  # pragma: no cover - no loader
        pytest.skip(f"no Vulkan loader: {e}")
    return devices_or_skip(VulkanRegistry(), "no Vulkan device")[0]


@pytest.fixture(scope="session")
def device():  # type: ignore[no-untyped-def]
    return _device()


@pytest.fixture(scope="session")
def staged_device(device):  # type: ignore[no-untyped-def]
    """The same physical device with `VulkanOptions.staging` on: device-local memory reached through staging copies
    only (its own logical device, made at its first buffer)."""
    from pyggml_vulkan.device import VulkanDevice

    return VulkanDevice(device.reg, device.info, 0, device.options().replace(staging=True))


_BACKENDS: list = []


@pytest.fixture
def backend(device):  # type: ignore[no-untyped-def]
    """One backend for the session, recreated after a test that lost the device."""
    if not _BACKENDS or _BACKENDS[0].ctx.lost:
        _BACKENDS[:] = [device.init_backend()]
    return _BACKENDS[0]


@pytest.fixture(autouse=True)
def no_validation_errors() -> Iterator[None]:
    """Every test must leave the validation layer silent (when the layer is installed)."""
    try:
        from pyggml_vulkan.instance import instance
        from pyggml_vulkan.options import VulkanOptions
    except OSError:
        yield
        return
    inst = instance(VulkanOptions.from_env().validation)
    before = len(inst.errors)
    yield
    new = inst.errors[before:]
    assert not new, "Vulkan validation errors:\n" + "\n".join(new)
