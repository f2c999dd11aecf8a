"""Metal runs the Vulkan plugin's rules, so it keeps their 32-bit size limit too (issue 33: MetalSim0 summed a view
of 2^32 + 6 elements to 12 and refused row ids in range, as Vulkan0 did); the limit's cases are in
plugins/vulkan/tests/test_u32_limits.py."""

from __future__ import annotations

from pyggml import ops
from pyggml.context import Context
from pyggml_metal.op_table import TABLE
from pyggml_vulkan.op_table import TABLE as VULKAN_TABLE


def test_metal_keeps_the_vulkan_limit() -> None:
    assert TABLE.fits is VULKAN_TABLE.fits is not None
    a = Context(no_alloc=True).new_tensor("f32", 4)
    assert not TABLE.supports(ops.sum(ops.view(a, (2, (1 << 31) + 3), (0,))))
    assert TABLE.supports(ops.sum(ops.view(a, (2, 3), (0,))))
