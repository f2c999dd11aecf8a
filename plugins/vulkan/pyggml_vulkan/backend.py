"""VulkanBackend: a stream on one Vulkan device. graph_compute plans the graph's dispatches, records them into ONE
command buffer and submits it; while the same graph is computed again with the same placement (the static
allocator keeps addresses stable), the recorded command buffer is resubmitted as is (Vulkan's counterpart of
CUDA graphs). Submissions signal a timeline semaphore; events are (semaphore, value) pairs."""

from __future__ import annotations

import contextlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyggml.backend.protocol import Backend, Bytes, Event
from pyggml.errors import AllocationError, ComputeError, PyGGMLError
from pyggml.graph import Graph
from pyggml.tensor import Tensor
from pyggml_vulkan.recorder import Planner, Recording

if TYPE_CHECKING:
    from pyggml_vulkan.buffer import VulkanBuffer
    from pyggml_vulkan.context import DeviceContext
    from pyggml_vulkan.device import VulkanDevice

log = logging.getLogger(__name__)

MAX_CACHED_GRAPHS = 16


@dataclass
class Stats:
    records: int = 0
    replays: int = 0
    record_seconds: float = 0.0
    last_dispatches: int = 0
    last_barriers: int = 0
    computes: int = 0
    host_seconds: float = 0.0
    """Host time inside graph_compute_async (signature check + record or replay + submit); the GPU runs after."""
    extra: dict[str, float] = field(default_factory=dict)


def graph_signature(graph: Graph) -> tuple[Any, ...]:
    """What a recorded command buffer depends on, and the key it is cached under: each node's identity, params,
    flags, shape, strides and placement, and the same for every src. Srcs count because a scheduler's split graph
    holds no leafs and its pipeline slots rewire the same nodes' srcs to per-slot input copies: a recording made
    for slot 0 must not be replayed for slot 1. The recording keeps every object named here alive, so an id
    cannot stand for another object while it is cached."""
    return tuple((id(t), id(t.params), t.flags, t.ne, t.nb, id(t.buffer), t.offset,
                  tuple((id(s), s.ne, s.nb, id(s.buffer), s.offset) for s in t.src if s is not None))
                 for t in graph.nodes)


def _referenced(graph: Graph) -> list[object]:
    objs: list[object] = []
    for t in graph.nodes:
        objs += (t, t.params, t.buffer)
        objs += [x for s in t.src if s is not None for x in (s, s.buffer)]
    return objs


class VulkanBackend(Backend):
    def __init__(self, device: VulkanDevice, ctx: DeviceContext) -> None:
        super().__init__(device)
        self.ctx = ctx
        self.timeline = ctx.timeline()
        self.submitted = 0
        self._pending_waits: list[tuple[Any, int]] = []
        self._recordings: OrderedDict[tuple[Any, ...], Recording] = OrderedDict()
        self.stats = Stats()
        self._scratch: VulkanBuffer | None = None
        self.replay_enabled = True
        """False: record a fresh command buffer on every compute (for measuring what replay saves)."""

    # ---- compute --------------------------------------------------------------------------------------------

    def record(self, graph: Graph) -> Recording:
        from pyggml_vulkan.ops import plan_graph

        t0 = time.perf_counter()
        planner = Planner(self.ctx, self._scratch_buffer)
        plan_graph(graph, planner)
        rec = Recording(self.ctx, planner.dispatches)
        rec.keep = _referenced(graph)  # ids in the signature stay unique while cached
        self.stats.records += 1
        self.stats.record_seconds += time.perf_counter() - t0
        self.stats.last_dispatches = rec.n_dispatches
        self.stats.last_barriers = rec.n_barriers
        return rec

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

    def _recording_for(self, graph: Graph) -> Recording:
        key = graph_signature(graph)
        rec = self._recordings.get(key) if self.replay_enabled else None
        if rec is not None:
            self._recordings.move_to_end(key)
            self.stats.replays += 1
            return rec
        old = self._recordings.pop(key, None)
        if old is not None:
            self._retire(old)
        rec = self.record(graph)
        self._recordings[key] = rec
        while len(self._recordings) > MAX_CACHED_GRAPHS:
            self._retire(self._recordings.popitem(last=False)[1])
        return rec

    def _retire(self, rec: Recording) -> None:
        self.synchronize()
        rec.free()

    def graph_compute_async(self, graph: Graph) -> None:
        t0 = time.perf_counter()
        self.ctx.ensure_alive()
        try:
            rec = self._recording_for(graph)
        except PyGGMLError:
            raise
        except Exception as e:  # a Vulkan or planning failure: name it, keep the backend usable
            raise ComputeError(f"{self.name}: recording graph {graph.uid} failed: {type(e).__name__}: {e}") from e
        waits, self._pending_waits = self._pending_waits, []
        value = self.submitted + 1
        self.ctx.submit(rec.cb, waits, (self.timeline, value))
        self.submitted = value  # only once submitted: synchronize() must never wait for a value never signalled
        self.ctx.track(self.timeline, value, rec.handles)
        self.stats.computes += 1
        self.stats.host_seconds += time.perf_counter() - t0

    def graph_compute(self, graph: Graph) -> None:
        self.graph_compute_async(graph)
        self.synchronize()

    def synchronize(self) -> None:
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
        from pyggml.backend.protocol import tensor_copy

        src_backend.synchronize()
        self.synchronize()
        tensor_copy(src, dst)
        return True

    # ---- events -------------------------------------------------------------------------------------------

    def event_record(self, event: Event) -> None:
        if isinstance(event, VulkanEvent):
            event.ctx, event.semaphore, event.value = self.ctx, self.timeline, self.submitted
        else:
            event.record(self)

    def event_wait(self, event: Event) -> None:
        if isinstance(event, VulkanEvent) and event.ctx is self.ctx and event.semaphore is not None:
            if event.value:
                self._pending_waits.append((event.semaphore, event.value))
        else:
            event.synchronize()

    def free(self) -> None:
        with contextlib.suppress(PyGGMLError):
            self.synchronize()
        for rec in self._recordings.values():
            rec.free()
        self._recordings.clear()
        self.ctx.destroy_semaphore(self.timeline)


class VulkanEvent(Event):
    """A point on a backend's timeline semaphore; waits on the GPU when the waiter is on the same device."""

    def __init__(self) -> None:
        self.ctx: DeviceContext | None = None
        self.semaphore: Any = None
        self.value = 0

    def record(self, backend: Backend) -> None:
        backend.event_record(self)

    def synchronize(self) -> None:
        if self.ctx is not None and self.value:
            self.ctx.wait_timeline(self.semaphore, self.value)
