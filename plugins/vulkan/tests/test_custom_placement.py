"""Custom ops on a Vulkan device: refused, so the scheduler runs them on the host (pyggml_testing.custom_sched)."""

from __future__ import annotations

from pyggml.backend.protocol import Device
from pyggml_testing.custom_sched import run_custom_placement
from pyggml_testing.devices import numpy_backend


def test_scheduler_places_custom_ops_on_the_host(device: Device) -> None:
    run_custom_placement(device, numpy_backend())
