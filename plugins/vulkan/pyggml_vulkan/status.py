"""A backend's status word: shaders that read indices (GET_ROWS, SET_ROWS, MUL_MAT_ID) store a code there when an
index is out of range (common.glsl `DECLARE_STATUS`) and skip the write; after the graph has run the backend reads
the word and raises ComputeError naming the node, as the numpy reference, the cpu and OpenCL backends do.

Codes are assigned when a command buffer is recorded (one per distinct node description, so replays and re-records
of the same graph reuse them) and travel in the push constants' last float (f3) as its bits (`ops.common.patch_pc`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from pyggml.backend.launch import ErrorSites
from pyggml.errors import ComputeError
from pyggml.tensor import Tensor

if TYPE_CHECKING:
    from pyggml_vulkan.buffer import VulkanBufferType
    from pyggml_vulkan.context import DeviceContext

class StatusWord:
    def __init__(self, buft: VulkanBufferType, ctx: DeviceContext, name: str) -> None:
        from pyggml_vulkan.buffer import VulkanBuffer

        self.name = name
        self.buffer = VulkanBuffer(buft, ctx, 16)
        self.buffer.write(0, np.zeros(16, np.uint8))
        self.errors = ErrorSites()
        self.armed = False
        """A submitted command buffer has index checks: the next synchronize reads the word."""

    def code(self, node: Tensor, what: str) -> int:
        """The code (>= 1) that names node and the violated condition."""
        return self.errors.code(node, what)

    def check(self) -> None:
        """After the backend's work finished: raise ComputeError if a shader reported an index (and clear)."""
        if not self.armed:
            return
        self.armed = False
        code = int(self.buffer.read(0, 4).view(np.uint32)[0])
        if code:
            self.buffer.write(0, np.zeros(4, np.uint8))
            raise ComputeError(f"{self.name}: {self.errors.describe(code)}; the node's output is incomplete")

    def free(self) -> None:
        self.buffer.free()
