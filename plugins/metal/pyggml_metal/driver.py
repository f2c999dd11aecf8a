"""The small driver interface the Metal host code is written against, and the kernel layouts it binds by.

Three drivers implement it: `objc_driver` (Apple's Metal through PyObjC, macOS only), `pyggml_metal_sim.driver`
(the emulator, test tooling of its own distribution: the same MSL compiled as C++ and run on the CPU, device
MetalSim0) and the fake driver of the tests (records what is asked of it). The buffers, plans, command buffers and
events of `buffer.py` and `backend.py` are the same code on all three, so the tests and the emulator's conformance
run exercise the host code that runs on a Mac.

Shapes of the interface follow Metal's objects: a device makes shared-storage buffers (unified memory: the CPU
reads and writes them in place), compute pipelines (a kernel with its function constants) and command buffers; a
command buffer takes dispatches (pipeline, buffers and offsets by MSL index, threadgroups)
in order, is committed once and waited for; shared events order command buffers of different queues.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from pyggml.errors import ComputeError, PyGGMLError
from pyggml_glsl.builder import Spec as Spec  # function-constant values of a pipeline: the GLSL rules' constants


class MetalError(PyGGMLError, RuntimeError):
    """A Metal call failed (the message names the call and holds the driver's own error text)."""


class CommandBufferError(ComputeError):
    """A committed command buffer ended in error (MTLCommandBufferStatusError or the emulator's failure)."""


@dataclass(frozen=True)
class KernelLayout:
    """What spirv-cross's MSL of one shader binds at each buffer index (mslgen.layout_of)."""

    name: str
    bindings: tuple[tuple[int, int], ...]
    """(MSL buffer index, the GLSL shader's binding) for each storage buffer argument."""
    push_index: int | None
    """The MSL buffer index of the push constants (the bytes the GLSL rules pack), None if unused."""
    local_size: tuple[int, int, int]
    """The shader's local_size; where local_spec says so, the index of the constant that gives it."""
    local_spec: tuple[bool, bool, bool]
    barriers: bool
    array_spec: tuple[int, ...] = ()
    """Constants the MSL needs at compile time (they size arrays): each value is a compilation of its own."""

    def threads(self, spec: Spec) -> tuple[int, int, int]:
        """threadsPerThreadgroup of a pipeline with constants `spec` (a constant not given: 1, SPIR-V's default of
        a work-group size from a constant)."""
        x, y, z = (int(spec[v]) if by and v < len(spec) else (1 if by else v)
                   for v, by in zip(self.local_size, self.local_spec, strict=True))
        return x, y, z

    @property
    def n_buffers(self) -> int:
        idx = [i for i, _ in self.bindings] + ([self.push_index] if self.push_index is not None else [])
        return max(idx) + 1 if idx else 0

    @staticmethod
    def load(path: Path) -> KernelLayout:
        d = json.loads(path.read_text())
        bindings = tuple((int(i), int(b)) for i, kind, b in d["buffers"] if kind == "binding")
        push = [int(i) for i, kind, _ in d["buffers"] if kind == "push"]
        x, y, z = d["local_size"]
        sx, sy, sz = (bool(b) for b in d.get("local_size_spec", (False, False, False)))
        return KernelLayout(d["name"], bindings, push[0] if push else None, (x, y, z), (sx, sy, sz),
                            bool(d["barriers"]), tuple(int(i) for i in d.get("array_spec", ())))


@cache
def layouts(folder: Path) -> dict[str, KernelLayout]:
    return {p.stem: KernelLayout.load(p) for p in sorted(folder.glob("*.json"))}


class DriverBuffer(Protocol):
    """A shared-storage MTLBuffer."""

    @property
    def length(self) -> int: ...
    def contents(self) -> npt.NDArray[np.uint8]:
        """The buffer's bytes as a writable uint8 array over the same memory (no copy)."""
        ...
    def release(self) -> None: ...


class DriverPipeline(Protocol):
    """A compute pipeline state: one kernel specialised by its function constants."""

    @property
    def layout(self) -> KernelLayout: ...
    @property
    def threads(self) -> tuple[int, int, int]:
        """threadsPerThreadgroup (`layout.threads(constants)`)."""
        ...


Binding = tuple[DriverBuffer, int]
"""What one MSL buffer index gets: a buffer and a byte offset (setBuffer:offset:atIndex:). The push constants too:
the plan keeps every dispatch's parameters in one buffer of its own (no setBytes per dispatch per replay)."""


class DriverEvent(Protocol):
    """An MTLSharedEvent: a counter command buffers signal and wait for."""

    def signaled_value(self) -> int: ...
    def wait_host(self, value: int) -> None:
        """Block the calling thread until the counter reaches value."""
        ...


class DriverCommandBuffer(Protocol):
    def dispatch(self, pipeline: DriverPipeline, bindings: Sequence[Binding | None],
                 groups: tuple[int, int, int]) -> None:
        """Encode one dispatch of `groups` threadgroups (serial encoder: it sees every earlier dispatch's writes)."""
        ...
    def encode_wait(self, event: DriverEvent, value: int) -> None: ...
    def encode_signal(self, event: DriverEvent, value: int) -> None: ...
    def commit(self) -> None: ...
    def wait(self) -> None:
        """Block until the command buffer completed; CommandBufferError if it failed."""
        ...
    def gpu_times(self) -> tuple[int, int]:
        """(start, end) in ns of the completed command buffer's work on the device's clock (Metal's
        GPUStartTime/GPUEndTime; the emulator's host clock around its dispatches): what profiling reads."""
        ...


class DriverDevice(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def unified_memory(self) -> bool: ...
    @property
    def max_buffer_length(self) -> int: ...
    @property
    def working_set_bytes(self) -> int:
        """recommendedMaxWorkingSetSize: what the GPU may use of the system's memory."""
        ...
    def allocated_bytes(self) -> int:
        """currentAllocatedSize."""
        ...
    def new_buffer(self, size: int) -> DriverBuffer: ...
    def buffer_no_copy(self, memory: npt.NDArray[np.uint8]) -> DriverBuffer:
        """A buffer over existing page-aligned host memory whose length is a whole number of pages (Metal's
        newBufferWithBytesNoCopy); the caller keeps `memory` alive for the buffer's life."""
        ...
    def pipeline(self, kernel: str, spec: Spec) -> DriverPipeline: ...
    def command_buffer(self) -> DriverCommandBuffer: ...
    def new_event(self) -> DriverEvent: ...


class MetalDriver(Protocol):
    @property
    def name(self) -> str: ...
    def devices(self) -> Sequence[DriverDevice]: ...
