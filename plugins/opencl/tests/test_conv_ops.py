"""The convolution and spatial kernels on OpenCL beyond the conformance suite (pyggml_testing.conv_graphs): model
front ends as whole graphs on the device, repeatable sums, ggml's nearest pixel at a float32 rounding boundary."""

from __future__ import annotations

import pytest

from pyggml.backend.protocol import Device
from pyggml_testing.conv_graphs import ConvGraphTests


@pytest.fixture
def device(dev: Device) -> Device:
    return dev


class TestConvGraphs(ConvGraphTests):
    pass
