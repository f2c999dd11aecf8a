"""The convolution and spatial kernels on OpenCL beyond the conformance suite (pyggml_testing.conv_graphs): model
front ends as whole graphs on the device, repeatable sums, ggml's nearest pixel at a float32 rounding boundary."""

from __future__ import annotations

import pytest

from pyggml_testing import conv_graphs


@pytest.mark.parametrize("name", sorted(conv_graphs.MODEL_GRAPHS))
def test_model_graph(dev, name: str) -> None:  # type: ignore[no-untyped-def]
    conv_graphs.check_model_graph(dev, name)


def test_sums_are_deterministic(dev) -> None:  # type: ignore[no-untyped-def]
    conv_graphs.check_deterministic(dev)


def test_nearest_pixel_at_a_rounding_boundary(dev) -> None:  # type: ignore[no-untyped-def]
    conv_graphs.check_nearest_boundary(dev)
