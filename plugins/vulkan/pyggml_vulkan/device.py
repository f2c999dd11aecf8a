"""The Vulkan device: one physical device (`registry.py` lists them), its memory, buffer types and backends.

A CPU-emulated device (llvmpipe/lavapipe) is marked `emulated` in its details.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from pyggml.backend.accounting import AllocationTally
from pyggml.backend.protocol import (
    FALLBACK_PRIORITY,
    Backend,
    BackendParams,
    BufferType,
    Device,
    DeviceCaps,
    DeviceType,
    Event,
    Registry,
)
from pyggml_vulkan.options import VulkanOptions

if TYPE_CHECKING:
    from pyggml.tensor import Tensor
    from pyggml_vulkan.context import DeviceContext
    from pyggml_vulkan.physical import PhysicalInfo

log = logging.getLogger(__name__)

class VulkanDevice(Device):
    def __init__(self, reg: Registry, info: PhysicalInfo, number: int, options: VulkanOptions) -> None:
        from pyggml_vulkan.buffer import VulkanBufferType

        super().__init__(reg, f"Vulkan{number}", DeviceType.GPU, DeviceCaps(async_ops=True, events=True))
        self.info = info
        self._options = options
        self._ctx: DeviceContext | None = None
        self._lock = threading.Lock()
        self._buft = VulkanBufferType(self)
        self.allocations = AllocationTally()
        """Bytes this plugin's live buffers hold on the device: `memory()` reports the rest as free."""

    @property
    def description(self) -> str:
        suffix = " (CPU-emulated)" if self.info.is_cpu else ""
        return f"{self.info.name}{suffix}"

    @property
    def emulated(self) -> bool:
        return self.info.is_cpu

    @property
    def priority(self) -> int:
        """A CPU-emulated device (llvmpipe) is not the default while a real GPU or the cpu device is there (ggml's
        Vulkan backend does not even list it)."""
        return FALLBACK_PRIORITY if self.emulated else super().priority

    def memory(self) -> tuple[int, int]:
        return self.allocations.memory(self.info.device_local_bytes)

    def details(self) -> dict[str, str]:
        i = self.info
        return {
            "device_type": i.type_name,
            "emulated": "cpu" if i.is_cpu else "no",
            "api_version": i.api_version,
            "driver": i.driver,
            "heaps": ", ".join(f"{s >> 20} MiB{' local' if f & 1 else ''}" for s, f in i.heaps),
            "unified_memory": str(i.unified_memory),
            "max_storage_buffer_range": str(i.max_storage_buffer_range),
            "max_allocation": str(i.max_allocation),
            "subgroup_size": str(i.subgroup_size),
            "fp16_storage": str(i.fp16_storage),
            "int8_storage": str(i.int8_storage),
            "fp16_math": str(i.fp16_math),
            "int8_math": str(i.int8_math),
        }

    def context(self) -> DeviceContext:
        """The logical device, created on first use and again after a device loss."""
        with self._lock:
            if self._ctx is None or self._ctx.lost:
                from pyggml_vulkan.context import DeviceContext

                if self._ctx is not None:
                    log.warning("Vulkan device %s was lost; creating a new logical device", self.name)
                self._ctx = DeviceContext(self.info, self._options.cache_dir)
            return self._ctx

    def options(self) -> VulkanOptions:
        return self._options

    def init_backend(self, params: BackendParams = None) -> Backend:
        """A backend (queue submissions, recordings) with the device's options, `tpr` as `params` say
        (`VulkanOptions`)."""
        from pyggml_vulkan.backend import VulkanBackend

        return VulkanBackend(self, self.context(), self._options.with_params(params, self.name))

    def buffer_type(self) -> BufferType:
        return self._buft

    def supports_op(self, op: Tensor) -> bool:
        from pyggml_glsl.ops.attention import fits_cpu_emulated
        from pyggml_vulkan.op_table import TABLE

        return TABLE.supports(op) and (not self.info.is_cpu or fits_cpu_emulated(op))

    def offload_op(self, op: Tensor) -> bool:
        return not self.info.is_cpu and op.ne[1] >= 32

    def event_new(self) -> Event:
        from pyggml_vulkan.backend import VulkanEvent

        return VulkanEvent()

