"""Apple's Metal through PyObjC (pyobjc-framework-Metal, macOS only): the `pyggml_metal.driver` interface over
MTLDevice, MTLBuffer (shared storage), MTLComputePipelineState, MTLCommandBuffer and MTLSharedEvent.

Pipelines are made from the build's MSL specialised as text (`mslgen.specialize`: function constants as
program-scope constants), one MTLLibrary per (kernel, constants); so no call here passes a typed pointer through
PyObjC except buffers' contents. Written against Apple's documented API and checked on Linux only through the
fake driver of the tests (the same host code) and the emulator (the same MSL): `mac_check.sh` is the check on a
Mac.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import Metal  # type: ignore[import-not-found]  # macOS only: the registry imports this module there
import numpy as np
import numpy.typing as npt

from pyggml_metal import driver, mslgen
from pyggml_metal.options import MetalOptions

SHARED = Metal.MTLResourceStorageModeShared


def _check(obj: Any, what: str, error: Any = None) -> Any:
    if obj is None:
        detail = f": {error.localizedDescription()}" if error is not None else ""
        raise driver.MetalError(f"Metal: {what} failed{detail}")
    return obj


class ObjCBuffer:
    def __init__(self, mtl: Any, length: int, keep: object = None) -> None:
        self.mtl = mtl
        self.length = length
        self._keep = keep
        self._view: npt.NDArray[np.uint8] | None = None

    def contents(self) -> npt.NDArray[np.uint8]:
        if self.mtl is None:
            raise driver.MetalError("Metal: a released buffer was used")
        if self._view is None:
            self._view = np.frombuffer(self.mtl.contents().as_buffer(self.length), dtype=np.uint8)
        return self._view

    def release(self) -> None:
        self._view = None
        self.mtl = None
        self._keep = None


class ObjCPipeline:
    def __init__(self, layout: driver.KernelLayout, state: Any, threads: tuple[int, int, int]) -> None:
        self.layout = layout
        self.state = state
        self.threads = threads


class ObjCEvent:
    def __init__(self, mtl: Any) -> None:
        self.mtl = mtl

    def signaled_value(self) -> int:
        return int(self.mtl.signaledValue())

    def wait_host(self, value: int) -> None:
        delay = 1e-5
        while self.mtl.signaledValue() < value:
            time.sleep(delay)
            delay = min(delay * 2, 1e-3)


class ObjCCommandBuffer:
    """One MTLCommandBuffer; dispatches go to one serial compute encoder, ended before an event is encoded and
    before commit (Metal allows one active encoder per command buffer)."""

    def __init__(self, queue: Any) -> None:
        self.cb = _check(queue.commandBuffer(), "commandBuffer")
        self._enc: Any = None

    def _encoder(self) -> Any:
        if self._enc is None:
            self._enc = _check(self.cb.computeCommandEncoderWithDispatchType_(Metal.MTLDispatchTypeSerial),
                               "computeCommandEncoder")
        return self._enc

    def _end(self) -> None:
        if self._enc is not None:
            self._enc.endEncoding()
            self._enc = None

    def dispatch(self, pipeline: driver.DriverPipeline, bindings: Sequence[driver.Binding | None],
                 groups: tuple[int, int, int]) -> None:
        assert isinstance(pipeline, ObjCPipeline)
        enc = self._encoder()
        enc.setComputePipelineState_(pipeline.state)
        for index, b in enumerate(bindings):
            if b is not None:
                buf, offset = b
                assert isinstance(buf, ObjCBuffer)
                enc.setBuffer_offset_atIndex_(buf.mtl, offset, index)
        enc.dispatchThreadgroups_threadsPerThreadgroup_(groups, pipeline.threads)  # MTLSize as tuples

    def encode_wait(self, event: driver.DriverEvent, value: int) -> None:
        assert isinstance(event, ObjCEvent)
        self._end()
        self.cb.encodeWaitForEvent_value_(event.mtl, value)

    def encode_signal(self, event: driver.DriverEvent, value: int) -> None:
        assert isinstance(event, ObjCEvent)
        self._end()
        self.cb.encodeSignalEvent_value_(event.mtl, value)

    def commit(self) -> None:
        self._end()
        self.cb.commit()

    def wait(self) -> None:
        self.cb.waitUntilCompleted()
        if self.cb.status() == Metal.MTLCommandBufferStatusError:
            err = self.cb.error()
            raise driver.CommandBufferError(f"Metal: command buffer failed: "
                                            f"{err.localizedDescription() if err is not None else 'unknown error'}")

    def gpu_times(self) -> tuple[int, int]:
        """GPUStartTime and GPUEndTime (seconds, the host's mach time base) in ns."""
        return round(float(self.cb.GPUStartTime()) * 1e9), round(float(self.cb.GPUEndTime()) * 1e9)


class ObjCDevice:
    def __init__(self, mtl: Any, msl_dir: Path) -> None:
        self.mtl = mtl
        self.name = str(mtl.name())
        self.unified_memory = bool(mtl.hasUnifiedMemory())
        self.max_buffer_length = int(mtl.maxBufferLength())
        self.working_set_bytes = int(mtl.recommendedMaxWorkingSetSize())
        self._msl_dir = msl_dir
        self._layouts = driver.layouts(msl_dir)
        self._queue = _check(mtl.newCommandQueue(), "newCommandQueue")
        self._pipelines: dict[tuple[str, driver.Spec], ObjCPipeline] = {}
        self._lock = threading.Lock()

    def allocated_bytes(self) -> int:
        return int(self.mtl.currentAllocatedSize())

    def new_buffer(self, size: int) -> ObjCBuffer:
        return ObjCBuffer(_check(self.mtl.newBufferWithLength_options_(size, SHARED), f"a buffer of {size} bytes"),
                          size)

    def buffer_no_copy(self, memory: npt.NDArray[np.uint8]) -> ObjCBuffer:
        try:
            mtl = self.mtl.newBufferWithBytesNoCopy_length_options_deallocator_(memory, memory.size, SHARED, None)
        except (TypeError, ValueError) as e:  # PyObjC refusing the memory object as a pointer
            raise driver.MetalError(f"Metal: newBufferWithBytesNoCopy refused the memory: {e}") from e
        return ObjCBuffer(_check(mtl, f"wrapping {memory.size} bytes of host memory"), memory.size, keep=memory)

    def pipeline(self, kernel: str, spec: driver.Spec) -> ObjCPipeline:
        key = (kernel, spec)
        with self._lock:
            p = self._pipelines.get(key)
            if p is None:
                p = self._pipelines[key] = self._create(kernel, spec)
        return p

    def _create(self, kernel: str, spec: driver.Spec) -> ObjCPipeline:
        layout = self._layouts.get(kernel)
        if layout is None:
            raise driver.MetalError(f"Metal: no MSL for kernel {kernel} in {self._msl_dir}")
        src = mslgen.specialize((self._msl_dir / f"{kernel}.metal").read_text(), spec)
        opts = Metal.MTLCompileOptions.new()
        lib, err = self.mtl.newLibraryWithSource_options_error_(src, opts, None)
        _check(lib, f"compiling the MSL of {kernel} (constants {spec})", err)
        fn = _check(lib.newFunctionWithName_("main0"), f"{kernel}: function main0")
        state, err = self.mtl.newComputePipelineStateWithFunction_error_(fn, None)
        _check(state, f"the pipeline of {kernel}", err)
        threads = layout.threads(spec)
        total = threads[0] * threads[1] * threads[2]
        if total > int(state.maxTotalThreadsPerThreadgroup()):
            raise driver.MetalError(f"Metal: {kernel} needs {total} threads per threadgroup, the pipeline allows "
                                    f"{state.maxTotalThreadsPerThreadgroup()}")
        return ObjCPipeline(layout, state, threads)

    def command_buffer(self) -> ObjCCommandBuffer:
        return ObjCCommandBuffer(self._queue)

    def new_event(self) -> ObjCEvent:
        return ObjCEvent(_check(self.mtl.newSharedEvent(), "newSharedEvent"))


class ObjCDriver:
    name = "Metal"

    def __init__(self, options: MetalOptions) -> None:
        self.options = options
        """Where the MSL is generated when the built one is stale (`cache_dir`, `shader_dir`)."""

    def devices(self) -> list[ObjCDevice]:
        msl = mslgen.msl_dir(self.options.cache_dir, self.options.shader_dir)
        found = Metal.MTLCopyAllDevices() or []
        return [ObjCDevice(d, msl) for d in found]
