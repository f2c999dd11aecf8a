"""`Profile`: the one `ProfileSink`. It gathers what backends and schedulers report into one timeline of events
(lanes: a backend and one of its threads or queues), from which `trace.py` writes a Chrome/Perfetto trace and
`summary.py` a table by op type.

    with Profile() as prof:          # active: every Scheduler computes profiled while it is
        sched.graph_compute(graph)
        prof.compute(backend, graph2)  # a graph run on one backend, without a scheduler
    prof.write_trace("trace.json")
    print(prof.summary().text())
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pyggml.profile.cost import node_cost
from pyggml.profile.sink import NodeTime, ProfileWarning, now_ns, pop_sink, push_sink

if TYPE_CHECKING:
    from pyggml.backend.protocol import Backend
    from pyggml.graph import Graph
    from pyggml.profile.summary import Summary
    from pyggml.tensor import Tensor

SCHEDULER = "scheduler"
"""The process name of the scheduler's lanes (splits, waits) in the trace."""


@dataclass(slots=True)
class TraceEvent:
    """One interval on one lane: `process` is a backend's name (or SCHEDULER), `thread` one of its lanes."""

    process: str
    thread: str
    name: str
    category: str
    start_ns: int
    end_ns: int
    args: dict[str, Any] = field(default_factory=dict)
    flow: tuple[int, str] | None = None
    """(flow id, "s" or "f"): a copy's start on its source lane or its end on its destination lane."""
    op: str | None = None
    """The op of a node event (or "(whole graph)" for a backend that timed only graphs): the summary's row."""
    group: tuple[int, int] | None = None
    """(report number, node index): one node's events on several threads share it; the summary takes their span."""
    flops: int = 0
    nbytes: int = 0


class Profile:
    """Collects a timeline; active (picked up by schedulers, `active_sink()`) inside `with`."""

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []
        self.start_ns = now_ns()
        self.untimed: set[str] = set()
        """Backends that reported whole-graph times only (each warned about once)."""
        self._reports = 0
        self._lock = threading.Lock()

    def __enter__(self) -> Profile:
        push_sink(self)
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        pop_sink(self)

    # ---- the sink ---------------------------------------------------------------------------------------------

    def nodes(self, backend: str, graph: Graph, times: Sequence[NodeTime], lane: str = "queue") -> None:
        with self._lock:
            self._reports += 1
            report = self._reports
            for t in times:
                n = t.node
                cost = node_cost(n)
                args = {"op": n.op.name, "tensor": n.name, "type": str(n.type), "ne": list(n.ne),
                        "index": t.index, "graph": graph.uid, "flops": cost.flops, "bytes": cost.nbytes}
                self.events.append(TraceEvent(backend, f"{lane} {t.thread}", f"{n.op.name} {n.name}", "node",
                                              t.start_ns, t.end_ns, args, op=n.op.name, group=(report, t.index),
                                              flops=cost.flops, nbytes=cost.nbytes))

    def graph(self, backend: str, graph: Graph, start_ns: int, end_ns: int) -> None:
        with self._lock:
            warn = backend not in self.untimed
            self.untimed.add(backend)
            self._reports += 1
            args = {"graph": graph.uid, "nodes": len(graph.nodes)}
            self.events.append(TraceEvent(backend, "graph", f"graph {graph.uid} ({len(graph.nodes)} nodes)",
                                          "graph", start_ns, end_ns, args, op="(whole graph)",
                                          group=(self._reports, -1)))
        if warn:
            warnings.warn(f"profile: backend '{backend}' cannot time its nodes; the profile holds its whole-graph "
                          "times instead", ProfileWarning, stacklevel=3)

    def span(self, lane: str, name: str, start_ns: int, end_ns: int, category: str) -> None:
        with self._lock:
            self.events.append(TraceEvent(SCHEDULER, lane, name, category, start_ns, end_ns))

    def copy(self, src_backend: str, dst_backend: str, tensor: Tensor, start_ns: int, end_ns: int) -> None:
        args = {"tensor": tensor.name, "bytes": tensor.nbytes(), "from": src_backend, "to": dst_backend}
        with self._lock:
            self._reports += 1
            flow = self._reports
            self.events.append(TraceEvent(src_backend, "copies", f"copy out {tensor.name}", "copy", start_ns, end_ns,
                                          args, flow=(flow, "s")))
            self.events.append(TraceEvent(dst_backend, "copies", f"copy in {tensor.name}", "copy", start_ns, end_ns,
                                          args, flow=(flow, "f")))

    # ---- use --------------------------------------------------------------------------------------------------

    def compute(self, backend: Backend, graph: Graph) -> None:
        """Compute `graph` on `backend` (already allocated), profiled: `Backend.compute_profiled`."""
        backend.compute_profiled(graph, self)

    def node_events(self) -> list[TraceEvent]:
        return [e for e in self.events if e.category == "node"]

    def lanes(self) -> dict[str, set[str]]:
        """Each process (backend or SCHEDULER) and its lanes."""
        out: dict[str, set[str]] = {}
        for e in self.events:
            out.setdefault(e.process, set()).add(e.thread)
        return out

    def summary(self) -> Summary:
        from pyggml.profile.summary import summarize

        return summarize(self.events)

    def trace(self) -> dict[str, Any]:
        """The Chrome trace event JSON object (`traceEvents`); a ProfileWarning when nothing was recorded."""
        from pyggml.profile.trace import chrome_trace

        if not self.events:
            warnings.warn("profile: nothing was recorded (no compute ran through a Scheduler or Profile.compute "
                          "while the profile was active)", ProfileWarning, stacklevel=2)
        return chrome_trace(self.events, self.start_ns)

    def write_trace(self, path: str | Path) -> Path:
        import json

        out = Path(path)
        out.write_text(json.dumps(self.trace()))
        return out
