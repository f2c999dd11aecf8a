"""The convolution and spatial kernels on OpenCL beyond the conformance suite (pyggml_testing.conv_graphs): model
front ends as whole graphs on the device, repeatable sums, ggml's nearest pixel at a float32 rounding boundary."""

from __future__ import annotations

from pyggml_testing.conv_graphs import ConvGraphTests


class TestConvGraphs(ConvGraphTests):
    pass
