"""What the cpu and blas backends share: a thread pool, a plan cache over one op table, and graph_compute.

One executor runs one graph at a time: the C pool's threads meet at a barrier per node, so two Python threads
computing on the same backend at once would both spin in it forever. A lock serialises computes (and thread-count
changes and free) per backend; separate backends still run in parallel.

Custom ops (MAP_CUSTOM1/2/3, CUSTOM) call Python, so a graph holding them runs as several C calls: the rows before a
custom node, the node's callable (its tasks on Python threads, `pyggml.backend.custom_call`), the rows after it.
Why not a cffi callback from the C workers: those threads would each take the GIL for a callable that numpy
already parallelises, the other workers would spin at the node's barrier for as long as Python runs, and an
exception would have to be parked in C and the pool unwound. Splitting costs one extra C call per custom node,
keeps C free of Python, and a raising callable fails only its node: the pool is idle between C calls, so the
backend stays usable. (A callable must not compute on the backend that runs it: the compute lock is held.)

C reaches the graph's buffers by address, so a compute holds them (`CpuGraphPlan.hold`) from before the first C
call to after the last: a `free()` of one of them from another thread waits for the compute, and a compute over a
freed buffer raises AllocationError before C runs (the free used to drop the memory under the running kernels).
"""

from __future__ import annotations

import threading

from pyggml.backend.custom_call import run_custom
from pyggml.backend.host import release_buffers
from pyggml.backend.op_table import OpTable
from pyggml.backend.plan_cache import PlanCache
from pyggml.backend.protocol import Backend
from pyggml.errors import ComputeError, PyGGMLError
from pyggml.graph import Graph
from pyggml.profile.sink import ProfileSink, now_ns
from pyggml_cpu.graph_plan import CpuGraphPlan, build_plan
from pyggml_cpu.native import ERRORS, Pool
from pyggml_cpu.op_table import Descriptors
from pyggml_cpu.profiling import Stamps


class Executor:
    def __init__(self, table: OpTable[Descriptors], name: str, n_threads: int) -> None:
        self.name = name
        self.plans: PlanCache[CpuGraphPlan] = PlanCache(lambda g: build_plan(g, table, name))
        self.pool = Pool(n_threads)
        self.profile: dict[str, int] | None = None
        """Set to {} to accumulate nanoseconds per (op, src0 type) over the following computes (each node's span
        over the pool's threads; `pyggml.profile` gives the whole timeline)."""
        self._lock = threading.Lock()
        self.freed = False

    @property
    def n_threads(self) -> int:
        return self.pool.n_threads

    def set_n_threads(self, n: int) -> None:
        with self._lock:
            if self.freed:
                raise ComputeError(f"{self.name}: the backend was freed (backend used after free)")
            if n != self.pool.n_threads:
                pool = Pool(n)
                self.pool.free()
                self.pool = pool

    def compute(self, graph: Graph, backend: Backend, sink: ProfileSink | None = None) -> None:
        """Run `graph` for `backend` (the one this executor serves): ComputeError once it was freed. With `sink`,
        each node's time on each pool thread is reported to it (`pyggml.profile`)."""
        with self._lock:
            if self.freed:
                raise backend.freed_error()
            self._compute(graph, sink)

    def _compute(self, graph: Graph, sink: ProfileSink | None) -> None:
        plan = self.plans.get(graph)
        held = plan.hold(self.name)
        try:
            stamps = None
            if sink is not None or self.profile is not None:
                stamps = Stamps(len(plan.names), self.pool.n_threads)
            self._run(plan, stamps)
        finally:
            release_buffers(held)
        if stamps is not None and self.profile is not None:
            stamps.by_op(plan.names, self.profile)
        if stamps is not None and sink is not None:
            sink.nodes(self.name, graph, stamps.node_times(plan.names, graph), "thread")

    def _run(self, plan: CpuGraphPlan, stamps: Stamps | None) -> None:
        n = len(plan.names)
        start = 0
        for stop in (*plan.host, n):  # C runs the rows between custom ops; Python runs each custom op
            if stop > start:
                rc, failed = self.pool.run(plan.ptr + start, stop - start, None if stamps is None else stamps.at(start))
                if rc:
                    self._fail(plan, rc, start + failed)
            if stop < n:
                node = plan.names[stop]
                t0 = now_ns()
                try:
                    run_custom(node, self.pool.n_threads)
                except PyGGMLError as e:
                    raise ComputeError(f"{self.name}: node '{node.name}' ({node.op.name}, {node.type} "
                                       f"ne={list(node.ne)}): {e}") from e
                if stamps is not None:
                    stamps.set_host(stop, t0, now_ns())
            start = stop + 1

    def _fail(self, plan: CpuGraphPlan, rc: int, failed: int) -> None:
        n = len(plan.names)
        bad = plan.names[failed] if 0 <= failed < n else None
        what = ERRORS.get(rc, f"error {rc}")
        if bad is None:
            raise ComputeError(f"{self.name}: graph failed: {what}")
        srcs = ", ".join(f"'{s.name}' {s.type} ne={list(s.ne)}" for s in bad.src if s is not None)
        raise ComputeError(f"{self.name}: node '{bad.name}' ({bad.op.name}, {bad.type} ne={list(bad.ne)};"
                           f" srcs {srcs}) failed: {what}")

    def free(self) -> None:
        """Wait for the compute in progress (the lock), then drop the plans and the pool; a second free does
        nothing."""
        with self._lock:
            self.freed = True
            self.plans.clear()
            self.pool.free()
