"""The Vulkan registry: `Vulkan0`, `Vulkan1`, ... over the physical devices, real GPUs first.

`VulkanOptions.devices` (PYGGML_VULKAN_DEVICES=0,2: physical device indices, or =llvmpipe,RTX: name substrings)
filters the list.
A CPU-emulated device (llvmpipe/lavapipe) is listed last.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyggml.backend.env import is_selected
from pyggml.backend.protocol import Device, LazyRegistry
from pyggml_vulkan.device import VulkanDevice
from pyggml_vulkan.options import DEVICES_ENV, VulkanOptions

if TYPE_CHECKING:
    from pyggml_vulkan.physical import PhysicalInfo

log = logging.getLogger(__name__)

def _selected(infos: list[PhysicalInfo], selection: tuple[str, ...]) -> list[PhysicalInfo]:
    return [info for info in infos if is_selected(selection, info.index, info.name)]


class VulkanRegistry(LazyRegistry[VulkanOptions]):
    name = "Vulkan"
    options_type = VulkanOptions

    def _enumerate(self) -> Sequence[Device]:
        try:
            from pyggml_vulkan.instance import instance
            from pyggml_vulkan.physical import PREFERENCE, query
        except OSError as e:  # libvulkan missing
            return self._unavailable(f"cannot load the Vulkan loader: {e}")
        opts = self.options()
        inst = instance(opts.validation)
        infos = [query(h, i) for i, h in enumerate(inst.physical_devices())]
        usable = []
        for info in infos:
            missing = [f for f, ok in (("storageBuffer16BitAccess", info.fp16_storage),
                                        ("storageBuffer8BitAccess", info.int8_storage),
                                        ("shaderInt8", info.int8_math), ("shaderInt16", info.int16_math),
                                        ("timelineSemaphore", info.timeline_semaphore),
                                        ("a compute queue", info.compute_queue_family >= 0)) if not ok]
            if missing:
                log.info("Vulkan device %s skipped: lacks %s", info.name, ", ".join(missing))
            else:
                usable.append(info)
        chosen = _selected(usable, opts.devices)
        chosen.sort(key=lambda i: (PREFERENCE.index(i.device_type) if i.device_type in PREFERENCE else 9, i.index))
        if not chosen:
            return self._unavailable("no Vulkan device with compute, 8/16-bit storage and arithmetic, timeline "
                                     "semaphores" if not infos or not usable
                                     else f"{DEVICES_ENV} selects none of the devices")
        return [VulkanDevice(self, info, n, opts) for n, info in enumerate(chosen)]
