"""Metal runs the GLSL rules (pyggml-glsl), so it keeps their 32-bit size limit too, as Vulkan does (issue 33:
MetalSim0 summed a view of 2^32 + 6 elements to 12 and refused row ids in range, as Vulkan0 did); the limit's cases
are in plugins/vulkan/tests/test_u32_limits.py."""

from __future__ import annotations

from pyggml import ops
from pyggml.context import Context
from pyggml_glsl.ops.common import fits_u32
from pyggml_metal.op_table import TABLE


def test_metal_keeps_the_shaders_limit() -> None:
    assert TABLE.fits is fits_u32
    a = Context(no_alloc=True).new_tensor("f32", 4)
    assert not TABLE.supports(ops.sum(ops.view(a, (2, (1 << 31) + 3), (0,))))
    assert TABLE.supports(ops.sum(ops.view(a, (2, 3), (0,))))
