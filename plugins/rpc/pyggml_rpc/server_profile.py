"""GRAPH_COMPUTE_PROFILED on the server (pyggml's own command, docs/rpc.md): the served backend's
`compute_profiled` reports into a `CollectingSink`, and `profile_reply` packs what it reported as the reply: the
server's clock when the request had arrived and when the reply was ready (PROFILE_HEAD), then one PROFILE_RECORD per
node and lane (wire.py).

What goes back is bounded: times are clamped into the header's interval (a device clock aligned onto this host's
can stray a little outside it), nodes not of the graph sent (a backend reporting a subgraph's) are left out, and a
compute that reported more than PROFILE_RECORDS_MAX records (many threads times many nodes) is sent as one record per
node, its first start to its last end on lane 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from pyggml.profile.sink import NodeTime, now_ns
from pyggml_rpc.wire import PROFILE_HEAD, PROFILE_LANE_KINDS, PROFILE_RECORD, PROFILE_RECORDS_MAX, PROFILE_WHOLE_GRAPH

if TYPE_CHECKING:
    from pyggml.graph import Graph
    from pyggml.tensor import Tensor


class CollectingSink:
    """A `ProfileSink` that keeps what the served backend reports of one compute: node times with their lane kind
    (an index into PROFILE_LANE_KINDS) and whole-graph times. Scheduler spans and copies have no place in the reply."""

    def __init__(self) -> None:
        self.times: list[tuple[NodeTime, int]] = []
        self.whole: list[tuple[int, int]] = []

    def nodes(self, backend: str, graph: Graph, times: Sequence[NodeTime], lane: str = "queue") -> None:
        kind = PROFILE_LANE_KINDS.index(lane) if lane in PROFILE_LANE_KINDS else 0
        self.times.extend((t, kind) for t in times)

    def graph(self, backend: str, graph: Graph, start_ns: int, end_ns: int) -> None:
        self.whole.append((start_ns, end_ns))

    def span(self, lane: str, name: str, start_ns: int, end_ns: int, category: str) -> None:
        pass

    def copy(self, src_backend: str, dst_backend: str, tensor: Tensor, start_ns: int, end_ns: int) -> None:
        pass


def profile_records(graph: Graph, sink: CollectingSink, received_ns: int, done_ns: int,
                    cap: int = PROFILE_RECORDS_MAX) -> np.ndarray:
    """The records of what `sink` collected while `graph` (as decoded from the request) computed between
    `received_ns` and `done_ns`: in graph order, then lane; at most `cap` (see the module's docstring)."""
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    rows = [(position[id(t.node)], kind, min(max(t.thread, 0), 0xFFFF), t.start_ns, t.end_ns)
            for t, kind in sink.times if id(t.node) in position]
    rows += [(PROFILE_WHOLE_GRAPH, 0, 0, s, e) for s, e in sink.whole]
    if len(rows) > cap:
        spans: dict[int, tuple[int, int]] = {}
        for i, _, _, s, e in rows:
            s0, e0 = spans.get(i, (s, e))
            spans[i] = (min(s0, s), max(e0, e))
        rows = [(i, 0, 0, s, e) for i, (s, e) in spans.items()][:cap]
    recs = np.zeros(len(rows), dtype=PROFILE_RECORD)
    if rows:
        cols = np.array(rows, dtype=np.int64).T
        start = np.clip(cols[3], received_ns, done_ns)
        recs["index"], recs["kind"], recs["lane"] = cols[0], cols[1], cols[2]
        recs["start"], recs["end"] = start, np.clip(cols[4], start, done_ns)
        recs.sort(order=["index", "kind", "lane", "start"])
    return recs


def profile_reply(records: np.ndarray, received_ns: int) -> bytes:
    """The reply: the header (its second time read now, as the reply is ready) and the records."""
    return PROFILE_HEAD.pack(received_ns, now_ns(), len(records)) + records.tobytes()
