"""VulkanBackend: a stream on one Vulkan device. graph_compute plans the graph's dispatches, records them into ONE
command buffer and submits it; while the same graph is computed again with the same placement (the static
allocator keeps addresses stable), the recorded command buffer is resubmitted as is (Vulkan's counterpart of
CUDA graphs). Recordings are the backend's plans (core's `pyggml.backend.plan_cache.PlannedBackend`): they stay with
their graphs, checked against the graph's placement (node and source identities, buffers, offsets; the sources count
because a scheduler's pipeline slots rewire the same nodes to per-slot input copies), so the meta device's many
subgraphs per compute all replay.
Submissions signal a timeline semaphore; events are (semaphore, value) pairs.

Profiled (`compute_profiled`), the graph runs from a second recording of its own, kept like the plans: the same
dispatches with a timestamp query written before and after each node's dispatches (a query pool per timed recording,
made on its first profiled compute). The normal recordings write no query."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from pyggml.backend.plan_cache import PlanCache, PlannedBackend, check_tensors_not_freed
from pyggml.backend.protocol import Backend, Bytes, Event, synchronized_copy
from pyggml.backend.status import StatusWord
from pyggml.errors import AllocationError, ComputeError, PyGGMLError
from pyggml.graph import Graph
from pyggml.profile.sink import node_times, now_ns, run_nodes
from pyggml.tensor import Tensor
from pyggml_vulkan.recorder import DispatchBuilder, Recording

if TYPE_CHECKING:
    from pyggml.profile.sink import ProfileSink
    from pyggml_vulkan.buffer import VulkanBuffer
    from pyggml_vulkan.context import DeviceContext
    from pyggml_vulkan.device import VulkanDevice
    from pyggml_vulkan.options import VulkanOptions
    from pyggml_vulkan.vk import CData

log = logging.getLogger(__name__)
R = TypeVar("R")


@dataclass(slots=True)
class TimedRecording:
    """A graph's recording with timestamps around each node's dispatches (`Recording(timed=True)`), and the graph
    index of the node of each of its runs."""

    rec: Recording
    nodes: list[int]


class VulkanBackend(PlannedBackend[Recording]):
    def __init__(self, device: VulkanDevice, ctx: DeviceContext, options: VulkanOptions) -> None:
        super().__init__(device, self.record, self._retire)
        self.ctx = ctx
        self.options = options
        """The device's options with this backend's own `tpr` (`VulkanDevice.init_backend`)."""
        self.timeline = ctx.timeline()
        self.submitted = 0
        self._pending_waits: list[tuple[CData, int]] = []
        self._scratch: VulkanBuffer | None = None
        self.status = StatusWord(device.buffer_type(), self.name)
        """Where this backend's shaders report out-of-range indices (read by its synchronize)."""
        self.replay_enabled = True
        """False: record a fresh command buffer on every compute (for measuring what replay saves)."""
        self._timed: PlanCache[TimedRecording] | None = None
        """The timed recordings of profiled computes, made by the first one."""

    # ---- compute --------------------------------------------------------------------------------------------

    def record(self, graph: Graph) -> Recording:
        return self._record(graph, False)[0]

    def _record(self, graph: Graph, timed: bool) -> tuple[Recording, DispatchBuilder]:
        from pyggml_vulkan.op_table import plan_graph

        check_tensors_not_freed(graph.nodes, self.name)
        planner = DispatchBuilder(self.ctx, self._scratch_buffer, self.status, self.options.tpr)
        plan_graph(graph, planner, self.name)
        # Descriptor sets name each VkBuffer by its handle: writing the handle of a destroyed buffer makes the driver
        # read freed memory (lavapipe segfaulted), or bind whichever newer buffer got the same handle (the backend's
        # status word, say). free() marks its buffer freed under ctx.lock before destroying it, so checked under
        # that lock every bound buffer outlives the recording (one freed after it is refused at replay).
        with self.ctx.lock:
            check_tensors_not_freed(graph.nodes, self.name)
            return Recording(self.ctx, planner.dispatches, self.name, timed), planner

    def record_timed(self, graph: Graph) -> TimedRecording:
        rec, planner = self._record(graph, True)
        return TimedRecording(rec, run_nodes(graph, [d.node for d in planner.dispatches], rec.runs))

    def _scratch_buffer(self, nbytes: int) -> VulkanBuffer:
        """The backend's scratch buffer, grown (a new one; recordings keep the old alive) to nbytes."""
        from pyggml_vulkan.buffer import VulkanBuffer

        if self._scratch is None or self._scratch.size < nbytes:
            buft = self.device.buffer_type()
            if nbytes > buft.max_size:
                raise AllocationError(f"{self.name}: an op needs {nbytes} bytes of scratch memory, more than the "
                                      f"device's largest buffer ({buft.max_size} bytes)")
            size = max(nbytes, 1 << 20, 2 * self._scratch.size if self._scratch else 0)
            self._scratch = VulkanBuffer(buft, self.ctx, min(size, buft.max_size))  # type: ignore[arg-type]
        return self._scratch

    def plan(self, graph: Graph) -> Recording:
        """The graph's command buffer: recorded now if the graph is new or moved, else the one recorded before."""
        self.ctx.ensure_alive()
        if not self.replay_enabled:
            self.plans.clear()
        return self._named_failure(graph, super().plan)

    def _named_failure(self, graph: Graph, get: Callable[[Graph], R]) -> R:
        try:
            return get(graph)
        except PyGGMLError:
            raise
        except Exception as e:  # a Vulkan or planning failure: name it, keep the backend usable
            raise ComputeError(f"{self.name}: recording graph {graph.uid} failed: {type(e).__name__}: {e}") from e

    def _retire(self, rec: Recording) -> None:
        self._wait()
        rec.free()

    def replay(self, rec: Recording) -> None:
        """Submit the recorded command buffer after the events it waits for; it signals the next timeline value."""
        with self.ctx.lock:  # a buffer freed from another thread is either refused here or waited for by free()
            rec.check_alive(self.name)
            if rec.cb is None:  # a cached recording is freed only when retired, so never seen here
                raise ComputeError(f"{self.name}: a graph's recording was freed")
            waits, self._pending_waits = self._pending_waits, []
            value = self.submitted + 1
            self.ctx.submit(rec.cb, waits, (self.timeline, value))
            self.submitted = value  # only once submitted: synchronize() must never wait for a value never signalled
            if rec.checks:
                self.status.arm()
            self.ctx.track(self.timeline, value, rec.handles)

    def compute_profiled(self, graph: Graph, sink: ProfileSink) -> None:
        """Each node timed on the device by timestamp queries around its dispatches: its first dispatch's start to
        its last's end, moved onto the host clock (`align_device_times`); a node without dispatches (a view) is not
        reported. A device whose compute queue writes no timestamps (`timestampValidBits` 0) gets the protocol's
        whole-graph time and its ProfileWarning."""
        if not self.ctx.info.can_timestamp:
            super().compute_profiled(graph, sink)
            return
        with self.lock:
            if self.freed:
                raise self.freed_error()
            self.synchronize()  # earlier submissions done: the first stamp waits for this graph's work only
            self.ctx.ensure_alive()
            if self._timed is None:
                self._timed = PlanCache(self.record_timed, lambda t: self._retire(t.rec))
            timed = self._named_failure(graph, self._timed.get)
            self.replay(timed.rec)
            self._wait()
            end = now_ns()
            device = timed.rec.timestamps()
            self.status.check()
        sink.nodes(self.name, graph, node_times(graph, timed.nodes, device, end), "queue")

    def synchronize(self) -> None:
        """Wait for the submitted work; raise ComputeError if a shader found an index out of range. After free()
        there is nothing to wait for (free waited)."""
        with self.lock:
            if self.freed:
                return
            self._wait()
            self.status.check()

    def _wait(self) -> None:
        if self.submitted:
            self.ctx.wait_timeline(self.timeline, self.submitted)

    # ---- transfers (ordered after queued work) ------------------------------------------------------------

    def set_tensor_async(self, tensor: Tensor, data: Bytes, offset: int = 0) -> None:
        self.synchronize()
        super().set_tensor_async(tensor, data, offset)

    def get_tensor_async(self, tensor: Tensor, offset: int = 0, size: int | None = None) -> Bytes:
        self.synchronize()
        return super().get_tensor_async(tensor, offset, size)

    def cpy_tensor_async(self, src_backend: Backend, src: Tensor, dst: Tensor) -> bool:
        return synchronized_copy(src_backend, self, src, dst)

    # ---- events -------------------------------------------------------------------------------------------

    def event_record(self, event: Event) -> None:
        with self.lock:
            if self.freed:
                raise self.freed_error()
            if isinstance(event, VulkanEvent):
                event.ctx, event.semaphore, event.value = self.ctx, self.timeline, self.submitted
                return
        event.record(self)

    def event_wait(self, event: Event) -> None:
        with self.lock:
            if self.freed:
                raise self.freed_error()
            if isinstance(event, VulkanEvent) and event.ctx is self.ctx and event.semaphore is not None:
                if event.value:
                    self._pending_waits.append((event.semaphore, event.value))
                return
        event.synchronize()

    def release_resources(self) -> None:
        """Once, from free() under `lock`: wait for the submissions, then the recordings, the status word and the
        timeline semaphore go (synchronize and events check `freed` under the lock: none of them reaches the
        destroyed semaphore)."""
        try:
            self._wait()
        except PyGGMLError:  # a lost device: nothing runs any more, the recordings are freed without waiting
            self.submitted = 0
        if self._timed is not None:
            self._timed.clear()
        super().release_resources()  # the recordings
        self.status.free()
        self.ctx.destroy_semaphore(self.timeline)


class VulkanEvent(Event):
    """A point on a backend's timeline semaphore; waits on the GPU when the waiter is on the same device."""

    def __init__(self) -> None:
        self.ctx: DeviceContext | None = None
        self.semaphore: CData | None = None
        self.value = 0

    def record(self, backend: Backend) -> None:
        backend.event_record(self)

    def synchronize(self) -> None:
        if self.ctx is not None and self.semaphore is not None and self.value:
            self.ctx.wait_timeline(self.semaphore, self.value)
