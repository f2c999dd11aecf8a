"""Compute pipelines, created once per (shader, specialisation constants) and cached for the device's life.

Every pipeline shares the context's descriptor-set layout (7 storage buffers) and pipeline layout (128 bytes of
push constants). Specialisation constant i gets constant_id i; each is a 32-bit value (uint, int or float bits).
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from pyggml_glsl.builder import Spec
from pyggml_vulkan.shaderc import spirv
from pyggml_vulkan.vk import NULL, C, CData, ffi, lib, new, out

if TYPE_CHECKING:
    from pyggml_vulkan.context import DeviceContext

log = logging.getLogger(__name__)


def spec_bytes(spec: Spec) -> bytes:
    return b"".join(struct.pack("<f", v) if isinstance(v, float) else struct.pack("<I", v & 0xFFFFFFFF)
                    for v in spec)


class PipelineCache:
    def __init__(self, ctx: DeviceContext, cache_dir: Path) -> None:
        self.ctx = ctx
        self.cache_dir = cache_dir
        """Where SPIR-V compiled at first use is cached (`VulkanOptions.cache_dir`)."""
        self._modules: dict[str, CData] = {}
        self._pipelines: dict[tuple[str, Spec], CData] = {}
        self._lock = threading.Lock()
        pc = out("VkPipelineCache")
        ctx.check(lib.vkCreatePipelineCache(ctx.device, new(
            "VkPipelineCacheCreateInfo", sType=C.VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO), NULL, pc),
            "vkCreatePipelineCache")
        self.vk_cache = pc[0]
        self.compile_seconds = 0.0

    def __len__(self) -> int:
        return len(self._pipelines)

    def module(self, name: str) -> CData:
        m = self._modules.get(name)
        if m is None:
            code = spirv(name, self.cache_dir)
            buf = ffi.from_buffer("uint32_t[]", code)
            h = out("VkShaderModule")
            self.ctx.check(lib.vkCreateShaderModule(self.ctx.device, new(
                "VkShaderModuleCreateInfo", sType=C.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, codeSize=len(code),
                pCode=buf), NULL, h), f"vkCreateShaderModule({name})")
            m = self._modules[name] = h[0]
        return m

    def get(self, name: str, spec: Spec = ()) -> CData:
        key = (name, spec)
        p = self._pipelines.get(key)
        if p is not None:
            return p
        with self._lock:
            p = self._pipelines.get(key)
            if p is None:
                p = self._pipelines[key] = self._create(name, spec)
        return p

    def _create(self, name: str, spec: Spec) -> CData:
        t0 = time.perf_counter()
        module = self.module(name)
        data = spec_bytes(spec)
        entries = ffi.new("VkSpecializationMapEntry[]", [
            {"constantID": i, "offset": 4 * i, "size": 4} for i in range(len(spec))] or 1)
        blob = ffi.new("char[]", data or b"\0")
        sinfo = new("VkSpecializationInfo", mapEntryCount=len(spec), pMapEntries=entries, dataSize=len(data),
                    pData=blob)
        entry = ffi.new("char[]", b"main")
        stage = {"sType": C.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                 "stage": C.VK_SHADER_STAGE_COMPUTE_BIT, "module": module, "pName": entry,
                 "pSpecializationInfo": sinfo}
        info = new("VkComputePipelineCreateInfo", sType=C.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                   stage=stage, layout=self.ctx.pipeline_layout)
        h = out("VkPipeline")
        self.ctx.check(lib.vkCreateComputePipelines(self.ctx.device, self.vk_cache, 1, info, NULL, h),
                       f"vkCreateComputePipelines({name}, spec={spec})")
        dt = time.perf_counter() - t0
        self.compile_seconds += dt
        log.debug("pipeline %s%s created in %.1f ms", name, spec, dt * 1e3)
        pipeline: CData = h[0]
        return pipeline
