"""The OpenCL backend (a stream on one device) and its per-graph launch plans.

`graph_compute` builds a plan for a graph once: every compute node's rule (from the op table) creates its kernel
objects with their arguments bound to the tensors' buffers and offsets. The plan stays with the graph
(`pyggml.backend.plan_cache.PlanCache`, checked against the graph's placement: node and source identities,
buffers and offsets), so a graph that is recomputed with the same allocation is replayed, however many
graphs run in turn: one `enqueue_nd_range_kernel` per launch, no per-node decisions. Work is queued on the
device's in-order queue and `graph_compute` returns without waiting (`synchronize` waits).

Profiled (`compute_profiled`), the same launches go to a second queue of the device's context, made with
CL_QUEUE_PROFILING_ENABLE on first use, after the device queue drained: each launch's event gives its start and end
on the device clock, moved onto the host's (`pyggml.profile.align_device_times`).
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyggml.backend.plan_cache import check_not_freed
from pyggml.backend.protocol import Backend, Bytes, Event
from pyggml.errors import AllocationError, ComputeError
from pyggml.profile.sink import NodeTime, ProfileSink, align_device_times, now_ns
from pyggml.tensor import Tensor
from pyggml_dialect.backend import DialectBackend
from pyggml_opencl.buffer import OpenCLBuffer, OpenCLHostBuffer, cl_mem_of, device_copy, src_device
from pyggml_opencl.device import OpenCLDevice, OpenCLEvent
from pyggml_opencl.op_table import TABLE, Launch, OpenCLLaunchBuilder

if TYPE_CHECKING:
    import pyopencl as cl

    from pyggml.backend.status import StatusWord
    from pyggml.graph import Graph

log = logging.getLogger(__name__)


@dataclass(slots=True)
class OpenCLGraphPlan:
    launches: list[Launch]
    scratch: list[cl.Buffer]
    """Device memory of the plan's own (intermediates of some kernels)."""
    checks: bool
    """Some launch checks indices: a replay arms the backend's status word."""
    buffers: list[weakref.ref[OpenCLBuffer | OpenCLHostBuffer]]
    """The distinct pyggml buffers of this plugin the kernels point into, weakly (a replay checks none was freed):
    the plan is replayed only while its graph's tensors name them, and so hold them (plan_cache), and a queued
    kernel keeps the memory it uses as OpenCL retains it."""

    def live_buffers(self) -> list[OpenCLBuffer | OpenCLHostBuffer]:
        bufs = [r() for r in self.buffers]
        return [b for b in bufs if b is not None]


def build_plan(dev: OpenCLDevice, status: StatusWord, graph: Graph) -> OpenCLGraphPlan:
    b = OpenCLLaunchBuilder(dev, status)
    nodes = TABLE.build(graph.nodes, b, dev.name, graph.use_count)
    own = {x.serial: x for node in nodes for s in (node, *node.src) if s is not None
           and isinstance(x := s.buffer, OpenCLBuffer | OpenCLHostBuffer)}
    return OpenCLGraphPlan(b.launches, b.scratch_mems, b.checks, [weakref.ref(x) for x in own.values()])


class OpenCLBackend(DialectBackend[OpenCLGraphPlan, OpenCLDevice]):
    table = TABLE

    def __init__(self, device: OpenCLDevice) -> None:
        super().__init__(device, lambda g: build_plan(device, self.status, g))
        self._profiling_queue: cl.CommandQueue | None = None
        """A queue with event profiling on, made by the first `compute_profiled`."""

    def replay(self, plan: OpenCLGraphPlan) -> None:
        self._enqueue(plan, self.dev.queue, None)

    def _enqueue(self, plan: OpenCLGraphPlan, q: cl.CommandQueue, events: list[cl.Event] | None) -> None:
        """Queue the plan's launches on `q`; with `events`, collect each launch's event (profiling)."""
        import pyopencl as cl

        enqueue = cl.enqueue_nd_range_kernel
        launch = None
        try:
            with self.dev.mem_lock:  # a free from another thread waits for the enqueueing, then for the kernels
                check_not_freed(plan.live_buffers(), self.dev.name)
                if plan.checks:
                    self.status.arm()
                for launch in plan.launches:
                    ev = enqueue(q, launch.kernel, launch.gsize, launch.lsize)
                    if events is not None:
                        events.append(ev)
        except cl.Error as e:
            n = launch.node if launch is not None else None
            where = f"node '{n.name}' ({n.op.name}, {n.type} ne={list(n.ne)})" if n is not None else "a node"
            raise ComputeError(f"{self.dev.name}: launching {where} failed: {e}") from e

    def compute_profiled(self, graph: Graph, sink: ProfileSink) -> None:
        """Each launch timed by OpenCL event profiling (a launch per node, or several: each reported)."""
        import pyopencl as cl

        with self.lock:
            if self.freed:
                raise self.freed_error()
            plan = self.plan(graph)
            self.synchronize()
            if self._profiling_queue is None:
                self._profiling_queue = cl.CommandQueue(self.dev.ctx, self.dev.queue.device,
                                                        properties=cl.command_queue_properties.PROFILING_ENABLE)
            events: list[cl.Event] = []
            self._enqueue(plan, self._profiling_queue, events)
            try:
                self._profiling_queue.finish()
                end = now_ns()
                pairs = align_device_times([(ev.profile.start, ev.profile.end) for ev in events], end)
            except cl.Error as e:
                raise ComputeError(f"{self.dev.name}: the profiling queue failed: {e}") from e
            self.status.check()
        index = {id(n): i for i, n in enumerate(graph.nodes)}
        times = [NodeTime(lc.node, index.get(id(lc.node), -1), s, e)
                 for lc, (s, e) in zip(plan.launches, pairs, strict=True)]
        sink.nodes(self.name, graph, times, "queue")

    def drain(self) -> None:
        import pyopencl as cl

        try:
            self.dev.queue.finish()
        except cl.Error as e:
            raise ComputeError(f"{self.dev.name}: the queue failed: {e}") from e

    # ---- async transfers ----------------------------------------------------------------------------------

    def set_tensor_async(self, tensor: Tensor, data: Bytes, offset: int = 0) -> None:
        import pyopencl as cl

        buf = tensor.buffer
        mem = cl_mem_of(buf) if buf is not None else None
        if buf is None or mem is None or src_device(buf) is not self.dev:
            super().set_tensor_async(tensor, data, offset)
            return
        arr, start = self.stage_upload(buf, tensor, data, offset)
        cl.enqueue_copy(self.dev.queue, mem, arr, dst_offset=start, is_blocking=False)

    def cpy_tensor_async(self, src_backend: Backend, src: Tensor, dst: Tensor) -> bool:
        sb, db = src.buffer, dst.buffer
        if sb is None or db is None:
            raise AllocationError(f"copy '{src.name}' -> '{dst.name}': both tensors need a buffer")
        smem, dmem = cl_mem_of(sb), cl_mem_of(db)
        if smem is None or dmem is None or src_device(sb).ctx is not self.dev.ctx or src.nbytes() != dst.nbytes():
            return False
        device_copy(self.dev, dmem, dst.offset, src_device(sb), smem, src.offset, src.nbytes(), wait=False)
        return True

    # ---- events -------------------------------------------------------------------------------------------

    def event_wait(self, event: Event) -> None:
        import pyopencl as cl

        if isinstance(event, OpenCLEvent) and event.cl_event is not None and event.dev.ctx is self.dev.ctx:
            cl.enqueue_barrier(self.dev.queue, wait_for=[event.cl_event])
        else:
            event.synchronize()
