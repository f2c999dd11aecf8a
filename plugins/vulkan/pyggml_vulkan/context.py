"""One logical VkDevice with its compute queue, command pool, the shared descriptor-set and pipeline layouts, the
pipeline cache, memory allocation and a one-shot submit path for transfers (staging, device copies, fills)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pyggml.errors import AllocationError
from pyggml_glsl.builder import N_BINDINGS
from pyggml_vulkan.physical import PhysicalInfo
from pyggml_vulkan.vk import NULL, WHOLE_SIZE, C, CData, DeviceLostError, check, ffi, lib, new, out

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

log = logging.getLogger(__name__)

PUSH_CONSTANT_BYTES = 128
MAX_SETS_PER_POOL = 4096

HOST_FLAGS = C.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | C.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT


class DeviceContext:
    def __init__(self, info: PhysicalInfo, cache_dir: Path) -> None:
        """`cache_dir`: where SPIR-V compiled at first use goes (`VulkanOptions.cache_dir`)."""
        self.info = info
        self.lost = False
        self.lock = threading.RLock()
        self._keep: list[CData] = []
        self._in_flight: list[tuple[CData, int, frozenset[int]]] = []
        """Submitted graphs not known to be done: (timeline semaphore, value it signals, bound buffer handles)."""
        self._done: dict[CData, int] = {}
        """The highest value each timeline semaphore is known to have reached (waits below it return at once)."""
        prio = ffi.new("float[]", [1.0])
        qinfo = new("VkDeviceQueueCreateInfo", sType=C.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                    queueFamilyIndex=info.compute_queue_family, queueCount=1, pQueuePriorities=prio)
        v11 = new("VkPhysicalDeviceVulkan11Features", sType=C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                  storageBuffer16BitAccess=1)
        v12 = new("VkPhysicalDeviceVulkan12Features", sType=C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                  pNext=v11, storageBuffer8BitAccess=1, timelineSemaphore=1,
                  shaderInt8=1, shaderFloat16=int(info.fp16_math))
        feats = new("VkPhysicalDeviceFeatures2", sType=C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, pNext=v12)
        feats.features.shaderInt16 = 1
        dinfo = new("VkDeviceCreateInfo", sType=C.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, pNext=feats,
                    queueCreateInfoCount=1, pQueueCreateInfos=qinfo)
        handle = out("VkDevice")
        check(lib.vkCreateDevice(info.handle, dinfo, NULL, handle), f"vkCreateDevice({info.name})")
        self.device = handle[0]
        q = out("VkQueue")
        lib.vkGetDeviceQueue(self.device, info.compute_queue_family, 0, q)
        self.queue = q[0]
        pool = out("VkCommandPool")
        check(lib.vkCreateCommandPool(self.device, new(
            "VkCommandPoolCreateInfo", sType=C.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
            flags=C.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
            queueFamilyIndex=info.compute_queue_family), NULL, pool), "vkCreateCommandPool")
        self.command_pool = pool[0]
        self.set_layout, self.pipeline_layout = self._layouts()
        self._one_shot_cb = self.allocate_command_buffer()
        fence = out("VkFence")
        check(lib.vkCreateFence(self.device, new("VkFenceCreateInfo", sType=C.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO),
                                NULL, fence), "vkCreateFence")
        self._fence = fence[0]
        self._staging: tuple[CData, CData, npt.NDArray[np.uint8]] | None = None
        from pyggml_vulkan.pipelines import PipelineCache

        self.pipelines = PipelineCache(self, cache_dir)

    # ---- layouts ------------------------------------------------------------------------------------------

    def _layouts(self) -> tuple[CData, CData]:
        bindings = ffi.new("VkDescriptorSetLayoutBinding[]", [
            {"binding": i, "descriptorType": C.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, "descriptorCount": 1,
             "stageFlags": C.VK_SHADER_STAGE_COMPUTE_BIT} for i in range(N_BINDINGS)])
        sl = out("VkDescriptorSetLayout")
        check(lib.vkCreateDescriptorSetLayout(self.device, new(
            "VkDescriptorSetLayoutCreateInfo", sType=C.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
            bindingCount=N_BINDINGS, pBindings=bindings), NULL, sl), "vkCreateDescriptorSetLayout")
        pc = new("VkPushConstantRange", stageFlags=C.VK_SHADER_STAGE_COMPUTE_BIT, offset=0,
                 size=min(PUSH_CONSTANT_BYTES, self.info.max_push_constants))
        layouts = ffi.new("VkDescriptorSetLayout[]", [sl[0]])
        pl = out("VkPipelineLayout")
        check(lib.vkCreatePipelineLayout(self.device, new(
            "VkPipelineLayoutCreateInfo", sType=C.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, setLayoutCount=1,
            pSetLayouts=layouts, pushConstantRangeCount=1, pPushConstantRanges=pc), NULL, pl),
            "vkCreatePipelineLayout")
        return sl[0], pl[0]

    # ---- memory -------------------------------------------------------------------------------------------

    def check(self, code: int, what: str) -> int:
        return check(code, what, on_lost=self.mark_lost)

    def mark_lost(self) -> None:
        self.lost = True

    def ensure_alive(self) -> None:
        if self.lost:
            raise DeviceLostError(f"Vulkan device {self.info.name} was lost; init a new backend to recreate it")

    def memory_type(self, bits: int, host_visible: bool) -> int:
        """Index of the memory type to use: device-local (+ host-visible coherent when asked)."""
        want = C.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | (HOST_FLAGS if host_visible else 0)
        for flags in (want, HOST_FLAGS if host_visible else C.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0):
            for t in self.info.memory_types:
                if bits & (1 << t.index) and t.has(flags):
                    return t.index
        raise AllocationError(f"Vulkan {self.info.name}: no memory type fits (bits {bits:#x}, host {host_visible})")

    def create_buffer(self, size: int, host_visible: bool) -> tuple[CData, CData, CData | None]:
        """(VkBuffer, VkDeviceMemory, mapped cffi pointer or None) of `size` bytes."""
        self.ensure_alive()
        usage = (C.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | C.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
                 | C.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
        buf = out("VkBuffer")
        self.check(lib.vkCreateBuffer(self.device, new(
            "VkBufferCreateInfo", sType=C.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=size, usage=usage,
            sharingMode=C.VK_SHARING_MODE_EXCLUSIVE), NULL, buf), f"vkCreateBuffer({size} bytes)")
        req = new("VkMemoryRequirements")
        lib.vkGetBufferMemoryRequirements(self.device, buf[0], req)
        mem = out("VkDeviceMemory")
        try:
            idx = self.memory_type(req.memoryTypeBits, host_visible)
            self.check(lib.vkAllocateMemory(self.device, new(
                "VkMemoryAllocateInfo", sType=C.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, allocationSize=req.size,
                memoryTypeIndex=idx), NULL, mem), f"vkAllocateMemory({req.size} bytes on {self.info.name})")
        except Exception:
            lib.vkDestroyBuffer(self.device, buf[0], NULL)
            raise
        self.check(lib.vkBindBufferMemory(self.device, buf[0], mem[0], 0), "vkBindBufferMemory")
        ptr = None
        if host_visible and self.info.memory_types[idx].has(HOST_FLAGS):
            pp = ffi.new("void**")
            self.check(lib.vkMapMemory(self.device, mem[0], 0, WHOLE_SIZE, 0, pp), "vkMapMemory")
            ptr = pp[0]
        return buf[0], mem[0], ptr

    def staging(self, size: int) -> tuple[CData, npt.NDArray[np.uint8]]:
        """(VkBuffer, uint8 numpy view) of the context's host-visible staging buffer, grown to `size`; used
        under one_shot's serialisation by the buffers' transfers."""
        import numpy as np

        if self._staging is None or self._staging[2].size < size:
            if self._staging is not None:
                self.destroy_buffer(self._staging[0], self._staging[1])
            n = max(size, 1 << 20)
            buf, mem, ptr = self.create_buffer(n, host_visible=True)
            if ptr is None:
                raise AllocationError(f"Vulkan {self.info.name}: no host-visible memory for a staging buffer")
            self._staging = (buf, mem, np.frombuffer(ffi.buffer(ptr, n), dtype=np.uint8))
        return self._staging[0], self._staging[2]

    def destroy_buffer(self, buf: CData, mem: CData) -> None:
        if self.lost:
            return
        lib.vkDestroyBuffer(self.device, buf, NULL)
        lib.vkFreeMemory(self.device, mem, NULL)

    # ---- command buffers ----------------------------------------------------------------------------------

    def allocate_command_buffer(self) -> CData:
        cb = out("VkCommandBuffer")
        self.check(lib.vkAllocateCommandBuffers(self.device, new(
            "VkCommandBufferAllocateInfo", sType=C.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
            commandPool=self.command_pool, level=C.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1), cb),
            "vkAllocateCommandBuffers")
        handle: CData = cb[0]
        return handle

    def free_command_buffer(self, cb: CData) -> None:
        if not self.lost:
            lib.vkFreeCommandBuffers(self.device, self.command_pool, 1, ffi.new("VkCommandBuffer[]", [cb]))

    def one_shot(self, record: Callable[[CData], object]) -> None:
        """Record `record(cb)` into a command buffer, submit it and wait (transfers outside graphs)."""
        with self.lock:
            self.ensure_alive()
            cb = self._one_shot_cb
            self.check(lib.vkResetCommandBuffer(cb, 0), "vkResetCommandBuffer")
            self.check(lib.vkBeginCommandBuffer(cb, new(
                "VkCommandBufferBeginInfo", sType=C.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                flags=C.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)), "vkBeginCommandBuffer")
            record(cb)
            self.check(lib.vkEndCommandBuffer(cb), "vkEndCommandBuffer")
            cbs = ffi.new("VkCommandBuffer[]", [cb])
            submit = new("VkSubmitInfo", sType=C.VK_STRUCTURE_TYPE_SUBMIT_INFO, commandBufferCount=1,
                         pCommandBuffers=cbs)
            fences = ffi.new("VkFence[]", [self._fence])
            self.check(lib.vkResetFences(self.device, 1, fences), "vkResetFences")
            self.check(lib.vkQueueSubmit(self.queue, 1, submit, self._fence), "vkQueueSubmit (transfer)")
            self.check(lib.vkWaitForFences(self.device, 1, fences, 1, 0xFFFFFFFFFFFFFFFF), "vkWaitForFences")

    def submit(self, cb: CData, wait: list[tuple[CData, int]], signal: tuple[CData, int]) -> None:
        """Submit a recorded command buffer, waiting on and signalling timeline semaphore values."""
        with self.lock:
            self.ensure_alive()
            wsems = ffi.new("VkSemaphore[]", [s for s, _ in wait] or [NULL])
            wvals = ffi.new("uint64_t[]", [v for _, v in wait] or [0])
            stages = ffi.new("VkPipelineStageFlags[]", [C.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT] * max(1, len(wait)))
            ssems = ffi.new("VkSemaphore[]", [signal[0]])
            svals = ffi.new("uint64_t[]", [signal[1]])
            tl = new("VkTimelineSemaphoreSubmitInfo", sType=C.VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                     waitSemaphoreValueCount=len(wait), pWaitSemaphoreValues=wvals, signalSemaphoreValueCount=1,
                     pSignalSemaphoreValues=svals)
            cbs = ffi.new("VkCommandBuffer[]", [cb])
            submit = new("VkSubmitInfo", sType=C.VK_STRUCTURE_TYPE_SUBMIT_INFO, pNext=tl,
                         waitSemaphoreCount=len(wait), pWaitSemaphores=wsems, pWaitDstStageMask=stages,
                         commandBufferCount=1, pCommandBuffers=cbs, signalSemaphoreCount=1, pSignalSemaphores=ssems)
            self.check(lib.vkQueueSubmit(self.queue, 1, submit, NULL), "vkQueueSubmit (graph)")

    # ---- timeline semaphores ------------------------------------------------------------------------------

    def timeline(self) -> CData:
        ti = new("VkSemaphoreTypeCreateInfo", sType=C.VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                 semaphoreType=C.VK_SEMAPHORE_TYPE_TIMELINE, initialValue=0)
        s = out("VkSemaphore")
        self.check(lib.vkCreateSemaphore(self.device, new(
            "VkSemaphoreCreateInfo", sType=C.VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, pNext=ti), NULL, s),
            "vkCreateSemaphore")
        sem: CData = s[0]
        return sem

    def wait_timeline(self, sem: CData, value: int) -> None:
        if self._done.get(sem, 0) >= value:
            return
        sems = ffi.new("VkSemaphore[]", [sem])
        vals = ffi.new("uint64_t[]", [value])
        info = new("VkSemaphoreWaitInfo", sType=C.VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, semaphoreCount=1,
                   pSemaphores=sems, pValues=vals)
        self.ensure_alive()
        self.check(lib.vkWaitSemaphores(self.device, info, 0xFFFFFFFFFFFFFFFF), "vkWaitSemaphores")
        self._note_done(sem, value)

    def _note_done(self, sem: CData, value: int) -> None:
        with self.lock:
            if self._done.get(sem, 0) < value:
                self._done[sem] = value

    def destroy_semaphore(self, sem: CData) -> None:
        self.forget(sem)
        if not self.lost:
            lib.vkDestroySemaphore(self.device, sem, NULL)

    # ---- work in flight: host access to mapped memory waits for the graphs that bind it --------------------

    def track(self, sem: CData, value: int, handles: frozenset[int]) -> None:
        """Note a submitted graph that signals sem = value and binds the buffers `handles`."""
        with self.lock:
            self._in_flight = [e for e in self._in_flight if not self._reached(e[0], e[1])]
            self._in_flight.append((sem, value, handles))

    def wait_for_buffer(self, handle_id: int) -> None:
        """Block until every submitted graph that binds the buffer has finished (before the host reads or writes
        its mapped memory: a tensor set right after graph_compute_async must not change what the graph reads)."""
        with self.lock:
            pending = [(s, v) for s, v, h in self._in_flight if handle_id in h and self._done.get(s, 0) < v]
        for s, v in pending:
            self.wait_timeline(s, v)

    def forget(self, sem: CData) -> None:
        """Drop what is known of a timeline semaphore about to be destroyed (its backend synchronised): a new one
        may get the same handle."""
        with self.lock:
            self._in_flight = [e for e in self._in_flight if e[0] != sem]
            self._done.pop(sem, None)

    def _reached(self, sem: CData, value: int) -> bool:
        if self.lost or self._done.get(sem, 0) >= value:
            return True
        v = ffi.new("uint64_t*")
        self.check(lib.vkGetSemaphoreCounterValue(self.device, sem, v), "vkGetSemaphoreCounterValue")
        if v[0] >= value:
            self._done[sem] = int(v[0])
            return True
        return False

    def wait_idle(self) -> None:
        if not self.lost:
            with self.lock:
                self.check(lib.vkDeviceWaitIdle(self.device), "vkDeviceWaitIdle")
