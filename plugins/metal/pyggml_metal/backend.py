"""MetalBackend: a stream on one Metal device. A graph's plan (pipelines, what each MSL buffer index binds, the
parameters, threadgroups per dispatch) is built once by the GLSL op rules (pyggml-glsl) over `MetalDispatchBuilder`,
Metal's implementation of their `Builder` protocol, and kept with the graph while its placement holds (core's
PlanCache); every compute replays it into ONE command buffer with one serial compute encoder (each dispatch sees the
writes of the ones before it) and commits it. Events are MTLSharedEvent counters, signalled and waited for by
command buffers.

Kernels that read indices (GET_ROWS, SET_ROWS, MUL_MAT_ID) report an out-of-range one to the backend's status
word, as on Vulkan (the code travels in the push constants' f3: `pyggml_glsl.builder.status_push`); synchronize()
reads it and raises ComputeError naming the node.

Profiled (`compute_profiled`), each node's dispatches go into a command buffer of their own, committed in order:
Metal times command buffers (GPUStartTime/GPUEndTime), not dispatches. The emulator reports the host time around
each command buffer's dispatches, through the same code.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from pyggml.backend.plan_cache import PlannedBackend, check_not_freed
from pyggml.backend.protocol import Backend, Event, synchronized_copy
from pyggml.backend.status import StatusWord
from pyggml.errors import AllocationError, ComputeError
from pyggml.graph import Graph
from pyggml.ops.base import Op
from pyggml.profile.sink import node_times, now_ns, run_nodes, runs_of
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_glsl.builder import Groups, Spec, bound, status_push
from pyggml_metal.buffer import MetalBuffer
from pyggml_metal.driver import Binding, DriverEvent, DriverPipeline

if TYPE_CHECKING:
    from pyggml.profile.sink import ProfileSink
    from pyggml_metal.device import MetalDevice, Submission

log = logging.getLogger(__name__)


@dataclass(slots=True)
class PlannedDispatch:
    pipeline: DriverPipeline
    bindings: list[Binding | None]
    groups: tuple[int, int, int]
    name: str
    node: Tensor | None = None
    """The node the dispatch computes (profiling gives each node's dispatches a command buffer)."""


PARAMS_ALIGN = 256
"""Offsets of the dispatches' parameters in the plan's params buffer (Metal's constant-buffer offset rule)."""


@dataclass
class MetalPlan:
    dispatches: list[PlannedDispatch] = field(default_factory=list)
    params: MetalBuffer | None = None
    """Every dispatch's push-constant bytes, each at a PARAMS_ALIGN offset, bound at the kernel's push index."""
    buffers: dict[int, MetalBuffer] = field(default_factory=dict)
    """Every buffer the plan binds (by handle id): a replay refuses freed ones."""
    checks: bool = False
    """Some dispatch reports out-of-range indices to the status word."""


def _buffer_of(t: Tensor, dev: MetalDevice) -> MetalBuffer:
    buf = t.buffer
    if not isinstance(buf, MetalBuffer) or buf.dev is not dev:
        raise AllocationError(f"{dev.name}: tensor '{t.name}' {t.type} ne={list(t.ne)} is not in a buffer of this "
                              f"device ({buf!r})")
    return buf


class MetalDispatchBuilder:
    """What the GLSL op rules build into (pyggml_glsl.builder.Builder): each `dispatch` becomes a PlannedDispatch,
    the shader's bindings mapped to MSL buffer indices by the kernel's layout and its push constants bound as bytes
    at the layout's push index."""

    cpu_emulated = False
    """The rules size per-thread work smaller for lavapipe (one thread per matrix row, not 32); Metal, its emulator
    included, takes the GPUs' path, so that what runs on a Mac is what CI checks."""
    forced_threads_per_row: int | None = None
    """Metal has no override: the rules choose."""

    def __init__(self, backend: MetalBackend) -> None:
        self.backend = backend
        self.dev = backend.device
        self.plan = MetalPlan()
        self.node: Tensor | None = None
        self._params: list[tuple[int, int, bytes]] = []
        """(dispatch number, MSL index, bytes) of each dispatch's push constants, placed by finish()."""

    def error_code(self, what: str) -> int:
        return 0 if self.node is None else self.backend.status.code(self.node, what)

    def scratch(self, nbytes: int) -> Tensor:
        t = Tensor(GGMLType.I8, (max(nbytes, 4), 1, 1, 1), op=Op.NONE)
        t.name = "metal scratch"
        t.buffer = self.backend.scratch_buffer(nbytes)
        return t

    def dispatch(self, shader: str, spec: Spec, srcs: Sequence[Tensor | None], dst: Tensor, push: bytes,
                 groups: Groups, extra_writes: tuple[Tensor, ...] = (), checks: str = "") -> None:
        tensors = bound(shader, srcs, dst)
        by_binding = [_buffer_of(t, self.dev) for t in tensors] + [self.backend.status_buffer]
        if checks:
            push = status_push(push, self.error_code(checks))
            self.plan.checks = True
        pipeline = self.dev.driver_device.pipeline(shader, spec)
        lay = pipeline.layout
        bindings: list[Binding | None] = [None] * lay.n_buffers
        for index, binding in lay.bindings:
            buf = by_binding[binding]
            assert buf.mem is not None
            bindings[index] = (buf.mem, 0)
            self.plan.buffers[buf.handle_id] = buf
        if lay.push_index is not None:
            self._params.append((len(self.plan.dispatches), lay.push_index, push))
        name = self.node.name if self.node is not None else shader
        self.plan.dispatches.append(PlannedDispatch(pipeline, bindings, groups, name, self.node))


    def finish(self) -> MetalPlan:
        """The plan, its dispatches' parameters written into one buffer and bound."""
        offsets, end = [], 0
        for _, _, push in self._params:
            offsets.append(end)
            end += -(-max(len(push), 16) // PARAMS_ALIGN) * PARAMS_ALIGN
        if self._params:
            params = self.plan.params = self.dev.buffer_type().alloc_buffer(end)
            blob = np.zeros(end, np.uint8)
            for (_, _, push), off in zip(self._params, offsets, strict=True):
                blob[off : off + len(push)] = np.frombuffer(push, np.uint8)
            params.write(0, blob)
            assert params.mem is not None
            for (k, index, _), off in zip(self._params, offsets, strict=True):
                self.plan.dispatches[k].bindings[index] = (params.mem, off)
        return self.plan


def _release(plan: MetalPlan) -> None:
    if plan.params is not None:
        plan.params.free()


class MetalBackend(PlannedBackend[MetalPlan]):
    def __init__(self, device: MetalDevice) -> None:
        super().__init__(device, self._build, _release)
        self.device: MetalDevice = device
        self.status = StatusWord(device.buffer_type(), self.name)
        """Where this backend's kernels report out-of-range indices (read by its synchronize)."""
        self._scratch: MetalBuffer | None = None
        self._pending: list[Submission] = []
        self._waits: list[tuple[DriverEvent, int]] = []
        self.replays = 0

    @property
    def status_buffer(self) -> MetalBuffer:
        """The status word's buffer, as the kernels bind it."""
        buf = self.status.buffer
        assert isinstance(buf, MetalBuffer)  # from this device's buffer type
        return buf

    # ---- plans ------------------------------------------------------------------------------------------------

    def _build(self, graph: Graph) -> MetalPlan:
        from pyggml_metal.op_table import TABLE

        builder = MetalDispatchBuilder(self)
        TABLE.build(graph.nodes, builder, self.name)
        return builder.finish()

    def scratch_buffer(self, nbytes: int) -> MetalBuffer:
        """The backend's scratch buffer, grown (a new one; plans keep the old one alive) to nbytes."""
        if self._scratch is None or self._scratch.size < nbytes:
            size = max(nbytes, 1 << 20, 2 * self._scratch.size if self._scratch else 0)
            self._scratch = self.device.buffer_type().alloc_buffer(min(size, self.device.buffer_type().max_size))
        return self._scratch

    def replay(self, plan: MetalPlan) -> None:
        self._commit(plan, [(0, len(plan.dispatches) - 1)])

    def _commit(self, plan: MetalPlan, runs: list[tuple[int, int]]) -> list[Submission]:
        """Commit the plan's dispatches, one command buffer per (first, last) run of them (the first waits for
        the events `event_wait` asked for)."""
        check_not_freed(plan.buffers.values(), self.name)
        waits, self._waits = self._waits, []
        subs = []
        for first, last in runs:
            cb = self.device.driver_device.command_buffer()
            for event, value in waits:
                cb.encode_wait(event, value)
            waits = []
            for d in itertools.islice(plan.dispatches, first, last + 1):
                cb.dispatch(d.pipeline, d.bindings, d.groups)
            subs.append(self.device.commit(cb))
        self._pending.extend(subs)
        if plan.checks:
            self.status.arm()
        self.replays += 1
        return subs

    def compute_profiled(self, graph: Graph, sink: ProfileSink) -> None:
        """Each node timed by the GPU start and end of a command buffer of its own (`gpu_times`), moved onto the host
        clock; a node without dispatches (a view) is not reported."""
        with self.lock:
            if self.freed:
                raise self.freed_error()
            plan = self.plan(graph)
            self._finish()  # the work queued before is done: the first command buffer times this graph's only
            work = [d.node for d in plan.dispatches]
            runs = runs_of(work)
            subs = self._commit(plan, runs or [(0, -1)])
            self._finish()
            end = now_ns()
            device = [s.cb.gpu_times() for s in subs] if runs else []
        sink.nodes(self.name, graph, node_times(graph, run_nodes(graph, work, runs), device, end), "queue")

    def synchronize(self) -> None:
        """Wait for the committed command buffers; ComputeError if one failed or a kernel found a bad index. After
        free() there is nothing to wait for (free waited)."""
        with self.lock:
            if not self.freed:
                self._finish()

    def _finish(self) -> None:
        pending, self._pending = self._pending, []
        self.device.finish(pending)
        failed = [s.error for s in pending if s.error is not None]
        if failed:
            raise ComputeError(f"{self.name}: a command buffer failed: {failed[0]}") from failed[0]
        self.status.check()

    # ---- transfers: shared memory, ordered after the queued work ---------------------------------------------

    def cpy_tensor_async(self, src_backend: Backend, src: Tensor, dst: Tensor) -> bool:
        return synchronized_copy(src_backend, self, src, dst)

    # ---- events -------------------------------------------------------------------------------------------

    def event_record(self, event: Event) -> None:
        if isinstance(event, MetalEvent) and event.device is self.device:
            event.value += 1
            cb = self.device.driver_device.command_buffer()
            cb.encode_signal(event.driver_event, event.value)
            self._pending.append(self.device.commit(cb))
        else:
            event.record(self)

    def event_wait(self, event: Event) -> None:
        if isinstance(event, MetalEvent) and event.device is self.device:
            if event.value:
                self._waits.append((event.driver_event, event.value))
        else:
            event.synchronize()

    def release_resources(self) -> None:
        """Once, from free() under `lock`: wait for the committed work, then the plans, the status word and the
        scratch buffer go."""
        try:
            self._finish()
        except ComputeError as e:
            log.warning("%s: freeing after a failed compute: %s", self.name, e)
        super().release_resources()
        self.status.free()
        if self._scratch is not None:  # the plans that bound it are released above
            self._scratch.free()
            self._scratch = None


class MetalEvent(Event):
    """A value of an MTLSharedEvent: recorded by a backend's command buffer signalling it, waited for by another's
    command buffer (same device) or by the host."""

    def __init__(self, device: MetalDevice) -> None:
        self.device = device
        self.driver_event = device.driver_device.new_event()
        self.value = 0

    def record(self, backend: Backend) -> None:
        backend.event_record(self)

    def synchronize(self) -> None:
        if self.value:
            self.driver_event.wait_host(self.value)
