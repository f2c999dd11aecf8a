"""Facts about one VkPhysicalDevice, read once: type, limits, memory heaps/types, subgroup size, features."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyggml_vulkan.vk import C, CData, cstr, ffi, lib, new

TYPE_NAMES = {
    C.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: "discrete GPU",
    C.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: "integrated GPU",
    C.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: "virtual GPU",
    C.VK_PHYSICAL_DEVICE_TYPE_CPU: "CPU (emulated)",
    C.VK_PHYSICAL_DEVICE_TYPE_OTHER: "other",
}
PREFERENCE = [C.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, C.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU,
              C.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU, C.VK_PHYSICAL_DEVICE_TYPE_OTHER, C.VK_PHYSICAL_DEVICE_TYPE_CPU]


@dataclass(frozen=True)
class MemoryType:
    index: int
    flags: int
    heap: int

    def has(self, flags: int) -> bool:
        return self.flags & flags == flags


@dataclass(frozen=True)
class PhysicalInfo:
    handle: CData
    index: int
    name: str
    device_type: int
    api_version: str
    driver: str
    vendor_id: int
    heaps: tuple[tuple[int, int], ...]
    """(size, flags) per memory heap."""
    memory_types: tuple[MemoryType, ...]
    max_storage_buffer_range: int
    max_allocation: int
    min_storage_offset_alignment: int
    max_push_constants: int
    max_workgroup_count: tuple[int, int, int]
    max_workgroup_invocations: int
    subgroup_size: int
    fp16_storage: bool
    int8_storage: bool
    fp16_math: bool
    int8_math: bool
    int16_math: bool
    timeline_semaphore: bool
    compute_queue_family: int
    extra: dict[str, str] = field(default_factory=dict)
    timestamp_period: float = 0.0
    """Nanoseconds per timestamp tick (`VkPhysicalDeviceLimits.timestampPeriod`)."""
    timestamp_valid_bits: int = 0
    """The compute queue family's `timestampValidBits`: 0 when its queue cannot write timestamps (then profiling
    reports whole-graph times)."""

    @property
    def can_timestamp(self) -> bool:
        """The compute queue writes timestamps (`compute_profiled` times each node)."""
        return self.timestamp_valid_bits > 0 and self.timestamp_period > 0

    @property
    def is_cpu(self) -> bool:
        """llvmpipe/lavapipe and other software rasterisers: usable, but a real GPU is preferred."""
        return bool(self.device_type == C.VK_PHYSICAL_DEVICE_TYPE_CPU)

    @property
    def type_name(self) -> str:
        return TYPE_NAMES.get(self.device_type, "unknown")

    @property
    def device_local_bytes(self) -> int:
        local = [s for s, f in self.heaps if f & C.VK_MEMORY_HEAP_DEVICE_LOCAL_BIT]
        return sum(local) if local else sum(s for s, _ in self.heaps)

    @property
    def unified_memory(self) -> bool:
        """Every device-local memory type is also host visible (UMA, lavapipe)."""
        local = [t for t in self.memory_types if t.has(C.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)]
        return bool(local) and all(t.has(C.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) for t in local)


def _version(v: int) -> str:
    return f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def query(handle: CData, index: int) -> PhysicalInfo:
    v11p = new("VkPhysicalDeviceVulkan11Properties", sType=C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES)
    v12p = new("VkPhysicalDeviceVulkan12Properties", sType=C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES,
               pNext=v11p)
    props2 = new("VkPhysicalDeviceProperties2", sType=C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, pNext=v12p)
    lib.vkGetPhysicalDeviceProperties2(handle, props2)
    v11f = new("VkPhysicalDeviceVulkan11Features", sType=C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES)
    v12f = new("VkPhysicalDeviceVulkan12Features", sType=C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
               pNext=v11f)
    feats2 = new("VkPhysicalDeviceFeatures2", sType=C.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, pNext=v12f)
    lib.vkGetPhysicalDeviceFeatures2(handle, feats2)
    mem = new("VkPhysicalDeviceMemoryProperties")
    lib.vkGetPhysicalDeviceMemoryProperties(handle, mem)
    nq = ffi.new("uint32_t*")
    lib.vkGetPhysicalDeviceQueueFamilyProperties(handle, nq, ffi.NULL)
    qprops = ffi.new("VkQueueFamilyProperties[]", nq[0])
    lib.vkGetPhysicalDeviceQueueFamilyProperties(handle, nq, qprops)
    compute = [i for i in range(nq[0]) if qprops[i].queueFlags & C.VK_QUEUE_COMPUTE_BIT]
    # prefer a compute family without graphics (async compute) when there is one
    dedicated = [i for i in compute if not qprops[i].queueFlags & C.VK_QUEUE_GRAPHICS_BIT]
    family = (dedicated or compute or [-1])[0]
    p = props2.properties
    lim = p.limits
    heaps = tuple((int(mem.memoryHeaps[i].size), int(mem.memoryHeaps[i].flags)) for i in range(mem.memoryHeapCount))
    types = tuple(MemoryType(i, int(mem.memoryTypes[i].propertyFlags), int(mem.memoryTypes[i].heapIndex))
                  for i in range(mem.memoryTypeCount))
    return PhysicalInfo(
        handle=handle, index=index, name=cstr(p.deviceName), device_type=int(p.deviceType),
        api_version=_version(p.apiVersion),
        driver=f"{cstr(v12p.driverName)} {cstr(v12p.driverInfo)}".strip(), vendor_id=int(p.vendorID),
        heaps=heaps, memory_types=types,
        max_storage_buffer_range=int(lim.maxStorageBufferRange),
        max_allocation=int(v11p.maxMemoryAllocationSize),
        min_storage_offset_alignment=int(lim.minStorageBufferOffsetAlignment),
        max_push_constants=int(lim.maxPushConstantsSize),
        max_workgroup_count=(int(lim.maxComputeWorkGroupCount[0]), int(lim.maxComputeWorkGroupCount[1]),
                             int(lim.maxComputeWorkGroupCount[2])),
        max_workgroup_invocations=int(lim.maxComputeWorkGroupInvocations),
        subgroup_size=int(v11p.subgroupSize),
        fp16_storage=bool(v11f.storageBuffer16BitAccess), int8_storage=bool(v12f.storageBuffer8BitAccess),
        fp16_math=bool(v12f.shaderFloat16), int8_math=bool(v12f.shaderInt8),
        int16_math=bool(feats2.features.shaderInt16),
        timeline_semaphore=bool(v12f.timelineSemaphore), compute_queue_family=family,
        timestamp_period=float(lim.timestampPeriod),
        timestamp_valid_bits=int(qprops[family].timestampValidBits) if family >= 0 else 0,
    )
