"""The process-wide VkInstance, with the Khronos validation layer and a debug messenger when asked for.

`VulkanOptions.validation` (PYGGML_VULKAN_VALIDATION=1) turns validation on (tests do); the instance is
process-wide, so the options of the first registry to enumerate decide it for all. Messages of severity ERROR are
collected in `Instance.errors` (and logged), so a test can assert that a run produced none.
"""

from __future__ import annotations

import logging

from pyggml_vulkan.vk import API_VERSION_1_2, NULL, C, CData, check, cstr, ffi, lib, new, out

log = logging.getLogger(__name__)

VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"
DEBUG_UTILS = "VK_EXT_debug_utils"


def _available_layers() -> set[str]:
    n = out("uint32_t")
    check(lib.vkEnumerateInstanceLayerProperties(n, NULL), "vkEnumerateInstanceLayerProperties")
    props = ffi.new("VkLayerProperties[]", n[0])
    check(lib.vkEnumerateInstanceLayerProperties(n, props), "vkEnumerateInstanceLayerProperties")
    return {cstr(props[i].layerName) for i in range(n[0])}


def _available_extensions() -> set[str]:
    n = out("uint32_t")
    check(lib.vkEnumerateInstanceExtensionProperties(NULL, n, NULL), "vkEnumerateInstanceExtensionProperties")
    props = ffi.new("VkExtensionProperties[]", n[0])
    check(lib.vkEnumerateInstanceExtensionProperties(NULL, n, props), "vkEnumerateInstanceExtensionProperties")
    return {cstr(props[i].extensionName) for i in range(n[0])}


class Instance:
    def __init__(self, validation: bool = False) -> None:
        want = validation
        layers = _available_layers()
        exts = _available_extensions()
        self.validation = want and VALIDATION_LAYER in layers
        if want and not self.validation:
            log.warning("Vulkan validation requested but %s is not installed", VALIDATION_LAYER)
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self._keep: list[CData] = []
        use_debug = self.validation and DEBUG_UTILS in exts
        layer_names = [ffi.new("char[]", VALIDATION_LAYER.encode())] if self.validation else []
        ext_names = [ffi.new("char[]", DEBUG_UTILS.encode())] if use_debug else []
        self._keep += layer_names + ext_names
        app = new("VkApplicationInfo", sType=C.VK_STRUCTURE_TYPE_APPLICATION_INFO,
                  pApplicationName=self._k(ffi.new("char[]", b"pyggml")), apiVersion=API_VERSION_1_2)
        layer_arr = self._k(ffi.new("char*[]", layer_names))
        ext_arr = self._k(ffi.new("char*[]", ext_names))
        info = new("VkInstanceCreateInfo", sType=C.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, pApplicationInfo=app,
                   enabledLayerCount=len(layer_names), ppEnabledLayerNames=layer_arr,
                   enabledExtensionCount=len(ext_names), ppEnabledExtensionNames=ext_arr)
        handle = out("VkInstance")
        check(lib.vkCreateInstance(info, NULL, handle), "vkCreateInstance")
        self.handle = handle[0]
        self._messenger: CData | None = None
        if use_debug:
            self._install_messenger()

    def _k(self, obj: CData) -> CData:
        self._keep.append(obj)
        return obj

    def _install_messenger(self) -> None:
        @ffi.callback("PFN_vkDebugUtilsMessengerCallbackEXT")
        def callback(severity: int, types: int, data: CData, user: CData) -> int:
            msg = cstr(data.pMessage) if data.pMessage != NULL else "?"
            if severity & C.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT:
                self.errors.append(msg)
                log.error("Vulkan validation: %s", msg)
            elif severity & C.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT:
                self.warnings.append(msg)
                log.warning("Vulkan validation: %s", msg)
            return 0

        self._k(callback)
        info = new("VkDebugUtilsMessengerCreateInfoEXT",
                   sType=C.VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
                   messageSeverity=C.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT
                   | C.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT,
                   messageType=C.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT
                   | C.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
                   pfnUserCallback=callback)
        fn = lib.vkGetInstanceProcAddr(self.handle, b"vkCreateDebugUtilsMessengerEXT")
        if fn == NULL:
            return
        create = ffi.cast("PFN_vkCreateDebugUtilsMessengerEXT", fn)
        handle = out("VkDebugUtilsMessengerEXT")
        check(create(self.handle, info, NULL, handle), "vkCreateDebugUtilsMessengerEXT")
        self._messenger = handle[0]
        self._k(info)

    def physical_devices(self) -> list[CData]:
        n = out("uint32_t")
        check(lib.vkEnumeratePhysicalDevices(self.handle, n, NULL), "vkEnumeratePhysicalDevices")
        arr = ffi.new("VkPhysicalDevice[]", n[0])
        check(lib.vkEnumeratePhysicalDevices(self.handle, n, arr), "vkEnumeratePhysicalDevices")
        return [arr[i] for i in range(n[0])]


_INSTANCE: Instance | None = None


def instance(validation: bool = False) -> Instance:
    """The process-wide instance, made on the first call: its `validation` decides (`VulkanOptions.validation` of
    the first registry to enumerate); later calls get that instance whatever they ask."""
    global _INSTANCE
    if _INSTANCE is None:
        _INSTANCE = Instance(validation)
    return _INSTANCE
