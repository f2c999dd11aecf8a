"""The CUDA backend (one stream on one device), its per-graph plans and CUDA graph capture.

`graph_compute` builds a plan for a graph once: every compute node's rule (op table) gives its launches, which are
bound to compiled kernels with their arguments packed. Plans stay with their graph
(`pyggml.backend.plan_cache.PlanCache`, checked against the graph's placement: node and source identities,
buffers, offsets): thanks to the static allocator a reused graph keeps its placement, so its kernels read and
write the same addresses every time, and any number of graphs run in turn (the meta device's
subgraphs) replay without rebuilding. Such a plan is
run directly the first time (a failing launch names its node), captured into a CUDA graph the second time, and from
then on replayed with one cuGraphLaunch. `CudaOptions.graphs` off (`PYGGML_CUDA_GRAPHS=0`, or
`init_backend("graphs=0")` for one backend) turns capture off. Work is queued on the backend's
stream; `graph_compute` waits for it, `graph_compute_async` does not.

Profiled (`compute_profiled`), the plan's launches run directly, never as a captured CUDA graph (a graph's launch
cannot be timed per node), with a CUDA event recorded on the stream before and after each node's launches; the
events' elapsed times (`Event.time_till`, ms) give each node's start and end, moved onto the host clock.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyggml.backend.op_table import describe_node
from pyggml.backend.plan_cache import check_not_freed
from pyggml.backend.protocol import Backend, Bytes, Event
from pyggml.errors import AllocationError, ComputeError
from pyggml.profile.sink import node_times, now_ns, run_nodes, runs_of
from pyggml.tensor import Tensor
from pyggml_cuda.buffer import CudaBuffer, device_alloc, device_copy, device_ptr, drv
from pyggml_cuda.cudalib import CudaDriverError, cudalib
from pyggml_cuda.device import CudaDevice, CudaEvent
from pyggml_cuda.launch import CudaLaunchBuilder, DevPtr
from pyggml_cuda.modules import Bound
from pyggml_cuda.op_table import TABLE, build_launches
from pyggml_cuda.options import CudaOptions
from pyggml_dialect.backend import DialectBackend

if TYPE_CHECKING:
    from pyggml.backend.status import StatusWord
    from pyggml.graph import Graph
    from pyggml.profile.sink import ProfileSink

log = logging.getLogger(__name__)


@dataclass(slots=True)
class CudaGraphPlan:
    launches: list[Bound]
    keep: list[Any]
    """Buffers and scratch memory the launches point at, kept alive so the addresses stay valid."""
    runs: int = 0
    graph: int = 0
    graph_exec: int = 0
    capture_failed: bool = False
    stats: dict[str, int] = field(default_factory=dict)


def build_plan(dev: CudaDevice, status: StatusWord, graph: Graph, mma: bool = True) -> CudaGraphPlan:
    def ptr_of(t: Tensor) -> DevPtr | None:
        p = device_ptr(t.buffer, dev)
        return None if p is None else DevPtr(p)

    def alloc(n: int) -> tuple[DevPtr, Any]:
        mem = device_alloc(dev, n)
        return DevPtr(int(mem)), mem

    word = device_ptr(status.buffer, dev)
    assert word is not None  # from this device's buffer type
    b = CudaLaunchBuilder(dev, ptr_of, alloc, DevPtr(word), status.errors, mma)
    launches = build_launches(graph.nodes, b, dev.name, graph.use_count)
    bound = dev.modules.bind(launches)
    buffers = {s.buffer.serial: s.buffer for la in launches for s in (la.node, *la.node.src)
               if s is not None and s.buffer is not None}  # distinct: a replay checks each once
    return CudaGraphPlan(bound, [*buffers.values(), *b.scratch_mems])


class CudaBackend(DialectBackend[CudaGraphPlan, CudaDevice]):
    table = TABLE

    def __init__(self, device: CudaDevice, options: CudaOptions) -> None:
        super().__init__(device, lambda g: build_plan(device, self.status, g, options.mma), self._destroy_graph)
        with device.active():
            self.stream: Any = drv().Stream()
        self.use_graphs = options.graphs
        self.graph_launches = 0
        """Computes that ran as one cuGraphLaunch."""
        self.captures = 0
        self._timing_events: list[Any] = []
        """CUDA events for profiled computes (two per node), made as the first ones need them and reused."""

    def replay(self, plan: CudaGraphPlan) -> None:
        with self.dev.mem_lock, self.dev.active():
            check_not_freed(plan.keep, self.dev.name)
            self.status.arm()  # the plan's kernels may check indices into this backend's word
            if plan.graph_exec:
                try:
                    cudalib().graph_launch(plan.graph_exec, self.stream.handle)
                except CudaDriverError as e:
                    raise ComputeError(f"{self.dev.name}: replaying the captured graph failed: {e}") from e
                self.graph_launches += 1
            elif self.use_graphs and plan.runs >= 1 and not plan.capture_failed and plan.launches:
                self._capture(plan)
            else:
                self._launch_all(plan)
        plan.runs += 1

    def _launch_all(self, plan: CudaGraphPlan) -> None:
        cuda = drv()
        la: Bound | None = None
        try:
            for la in plan.launches:
                la.fire(self.stream)
        except cuda.Error as e:
            raise self._launch_failed(la, e) from e

    def _launch_timed(self, plan: CudaGraphPlan, before: dict[int, Any], after: dict[int, Any]) -> None:
        """Launch the plan's kernels with an event recorded before launch i (`before[i]`) and after it
        (`after[i]`): profiling's stamps around each node's run of launches."""
        cuda = drv()
        la: Bound | None = None
        try:
            for i, la in enumerate(plan.launches):
                if i in before:
                    before[i].record(self.stream)
                la.fire(self.stream)
                if i in after:
                    after[i].record(self.stream)
        except cuda.Error as e:
            raise self._launch_failed(la, e) from e

    def _launch_failed(self, la: Bound | None, e: Exception) -> ComputeError:
        where = describe_node(la.node) if la is not None else "a node"
        return ComputeError(f"{self.dev.name}: launching {where} (kernel {la.symbol if la else '?'}, grid "
                            f"{la.grid if la else '?'}, block {la.block if la else '?'}) failed: {e}")

    def _capture(self, plan: CudaGraphPlan) -> None:
        """Record the plan's launches into a CUDA graph and launch it; on any failure run them directly and never
        try this plan again."""
        lib = cudalib()
        h = self.stream.handle
        try:
            lib.begin_capture(h)
        except CudaDriverError as e:
            log.warning("%s: CUDA graph capture unavailable (%s); launching directly", self.dev.name, e)
            plan.capture_failed = True
            self._launch_all(plan)
            return
        try:
            self._launch_all(plan)
        except Exception:
            _end_quietly(lib, h)
            plan.capture_failed = True
            raise
        try:
            plan.graph = lib.end_capture(h)
            plan.graph_exec = lib.instantiate(plan.graph)
        except CudaDriverError as e:
            log.warning("%s: CUDA graph capture failed (%s); launching directly", self.dev.name, e)
            plan.capture_failed = True
            self._destroy_graph(plan)
            self._launch_all(plan)
            return
        self.captures += 1
        lib.graph_launch(plan.graph_exec, h)
        self.graph_launches += 1

    def compute_profiled(self, graph: Graph, sink: ProfileSink) -> None:
        """Each node timed by CUDA events around its launches (its first launch's start to its last's end); the
        launches run directly, not as the plan's CUDA graph; a node without launches (a view) is not reported."""
        with self.lock:
            if self.freed:
                raise self.freed_error()
            plan = self.plan(graph)
            self.synchronize()  # the events time this graph's kernels, not work queued before
            work = [la.node for la in plan.launches]
            runs = runs_of(work)
            with self.dev.mem_lock, self.dev.active():
                check_not_freed(plan.keep, self.dev.name)
                while len(self._timing_events) < 2 * len(runs):
                    self._timing_events.append(drv().Event())
                ev = self._timing_events
                self.status.arm()
                self._launch_timed(plan, {first: ev[2 * r] for r, (first, _) in enumerate(runs)},
                                   {last: ev[2 * r + 1] for r, (_, last) in enumerate(runs)})
            self.synchronize()
            end = now_ns()
            with self.dev.active():  # ms since the first event, to ns
                device = [(round(ev[0].time_till(ev[2 * r]) * 1e6), round(ev[0].time_till(ev[2 * r + 1]) * 1e6))
                          for r in range(len(runs))]
        sink.nodes(self.name, graph, node_times(graph, run_nodes(graph, work, runs), device, end), "queue")

    def drain(self) -> None:
        cuda = drv()
        try:
            with self.dev.active():
                self.stream.synchronize()
        except cuda.Error as e:
            raise ComputeError(f"{self.dev.name}: the stream failed: {e}") from e

    # ---- async transfers --------------------------------------------------------------------------------------

    def set_tensor_async(self, tensor: Tensor, data: Bytes, offset: int = 0) -> None:
        buf = tensor.buffer
        if not isinstance(buf, CudaBuffer) or buf.dev is not self.dev:
            super().set_tensor_async(tensor, data, offset)
            return
        arr, start = self.stage_upload(buf, tensor, data, offset)
        with self.dev.active():
            drv().memcpy_htod_async(buf.at(start), arr, self.stream)

    def cpy_tensor_async(self, src_backend: Backend, src: Tensor, dst: Tensor) -> bool:
        sb, db = src.buffer, dst.buffer
        if sb is None or db is None:
            raise AllocationError(f"copy '{src.name}' -> '{dst.name}': both tensors need a buffer")
        if not isinstance(sb, CudaBuffer) or not isinstance(db, CudaBuffer) or db.dev is not self.dev \
                or src.nbytes() != dst.nbytes():
            return False
        if src_backend is not self and isinstance(src_backend, CudaBackend):
            ev = CudaEvent(src_backend.dev)
            ev.record(src_backend)
            self.event_wait(ev)
        elif src_backend is not self:
            src_backend.synchronize()
        device_copy(self.dev, db.at(dst.offset), sb.dev, sb.at(src.offset), src.nbytes(), self.stream)
        return True

    # ---- events -------------------------------------------------------------------------------------------

    def event_wait(self, event: Event) -> None:
        if isinstance(event, CudaEvent) and event.recorded:
            with self.dev.active():
                self.stream.wait_for_event(event.event)
        else:
            event.synchronize()

    # ---- teardown -----------------------------------------------------------------------------------------

    def _destroy_graph(self, plan: CudaGraphPlan) -> None:
        lib = cudalib()
        with self.dev.active():
            try:
                if plan.graph_exec:
                    lib.graph_exec_destroy(plan.graph_exec)
                if plan.graph:
                    lib.graph_destroy(plan.graph)
            except CudaDriverError as e:
                log.debug("%s: freeing a CUDA graph: %s", self.dev.name, e)
        plan.graph = plan.graph_exec = 0


def _end_quietly(lib: Any, stream: int) -> None:
    try:
        g = lib.end_capture(stream)
        lib.graph_destroy(g)
    except CudaDriverError:
        pass
