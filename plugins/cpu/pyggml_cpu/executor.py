"""What the cpu and blas backends share: a thread pool, a plan cache over one op table, and graph_compute.

One executor runs one graph at a time: the C pool's threads meet at a barrier per node, so two Python threads
computing on the same backend at once would both spin in it forever. A lock serialises computes (and thread-count
changes and free) per backend; separate backends still run in parallel.
"""

from __future__ import annotations

import threading

from pyggml.backend.op_table import OpTable
from pyggml.backend.plan_cache import PlanCache
from pyggml.errors import ComputeError
from pyggml.graph import Graph
from pyggml_cpu._pgc import ffi
from pyggml_cpu.kernels import ERRORS, Pool
from pyggml_cpu.op_table import Descriptors
from pyggml_cpu.plan import Plan, build_plan


class Executor:
    def __init__(self, table: OpTable[Descriptors], name: str, n_threads: int) -> None:
        self.name = name
        self.plans: PlanCache[Plan] = PlanCache(lambda g: build_plan(g, table, name))
        self.pool = Pool(n_threads)
        self.profile: dict[str, int] | None = None
        """Set to {} to accumulate nanoseconds per (op, src0 type) over the following computes."""
        self._lock = threading.Lock()

    @property
    def n_threads(self) -> int:
        return self.pool.n_threads

    def set_n_threads(self, n: int) -> None:
        with self._lock:
            if n != self.pool.n_threads:
                pool = Pool(n)
                self.pool.free()
                self.pool = pool

    def compute(self, graph: Graph) -> None:
        with self._lock:
            self._compute(graph)

    def _compute(self, graph: Graph) -> None:
        plan = self.plans.get(graph)
        plan.check_alive()
        n = len(plan.names)
        if n == 0:
            return
        ns = None
        if self.profile is not None:
            ns = ffi.new("int64_t[]", n)
        rc, failed = self.pool.run(plan.ptr, n, ns)
        if ns is not None and self.profile is not None:
            for node, t in zip(plan.names, ns, strict=True):
                key = f"{node.op.name} {node.src[0].type if node.src and node.src[0] is not None else ''}"
                self.profile[key] = self.profile.get(key, 0) + int(t)
        if rc:
            node = plan.names[failed] if 0 <= failed < n else None
            what = ERRORS.get(rc, f"error {rc}")
            if node is None:
                raise ComputeError(f"{self.name}: graph failed: {what}")
            srcs = ", ".join(f"'{s.name}' {s.type} ne={list(s.ne)}" for s in node.src if s is not None)
            raise ComputeError(f"{self.name}: node '{node.name}' ({node.op.name}, {node.type} ne={list(node.ne)};"
                               f" srcs {srcs}) failed: {what}")

    def free(self) -> None:
        with self._lock:
            self.plans.clear()
            self.pool.free()
