"""GRAPH_COMPUTE_PROFILED on the client (pyggml's own command, docs/rpc.md): the reply checked (`decode_profile`),
its times moved from the server's clock onto this host's (`clock_shift`), and reported to a profile
(`report_profile`) as the client's own graph's nodes.

The clock rule: the server's clock is another process's, maybe another machine's. The reply's header says when, on
that clock, the request had arrived and the reply was ready; the client knows when, on its own, it began sending and
the reply had arrived. The round trip less the server's part of it is the time on the wire, taken as half out and
half back: the server's "ready" falls at the reply's arrival less that half, and every time shifts with it. Times
shifted before the send or after the arrival (clocks whose rates differ a little) are clamped into that interval.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pyggml.profile.sink import NodeTime
from pyggml_rpc.connection import RPCError
from pyggml_rpc.wire import (
    PROFILE_HEAD,
    PROFILE_LANE_KINDS,
    PROFILE_RECORD,
    PROFILE_RECORDS_MAX,
    PROFILE_WHOLE_GRAPH,
)

if TYPE_CHECKING:
    from pyggml.graph import Graph
    from pyggml.profile.sink import ProfileSink


@dataclass(frozen=True, slots=True)
class ServerProfile:
    """A checked GRAPH_COMPUTE_PROFILED reply: the server's clock at the request's arrival and at the reply, and the
    records (PROFILE_RECORD), all inside that interval."""

    received_ns: int
    replied_ns: int
    records: np.ndarray


def decode_profile(reply: bytes, n_sent: int, peer: str) -> ServerProfile:
    """The reply to a graph of `n_sent` nodes, checked whole; RPCError naming the server `peer` for anything out of
    place (size, count, an index or lane kind out of range, a node ending before it starts or outside the header's
    interval)."""

    def bad(why: str) -> RPCError:
        return RPCError(f"RPC server {peer}: malformed GRAPH_COMPUTE_PROFILED reply: {why}")

    if len(reply) < PROFILE_HEAD.size:
        raise bad(f"{len(reply)} bytes is shorter than its header")
    received, replied, n = PROFILE_HEAD.unpack_from(reply)
    if n > PROFILE_RECORDS_MAX:
        raise bad(f"{n} records (at most {PROFILE_RECORDS_MAX})")
    if len(reply) != PROFILE_HEAD.size + n * PROFILE_RECORD.itemsize:
        raise bad(f"{len(reply)} bytes do not hold {n} records exactly")
    if received > replied:
        raise bad(f"the reply was ready at {replied} ns, before the request arrived at {received} ns")
    recs = np.frombuffer(reply, dtype=PROFILE_RECORD, count=n, offset=PROFILE_HEAD.size)
    index, start, end = recs["index"], recs["start"], recs["end"]

    def check(wrong: np.ndarray, say: Callable[[Any], str]) -> None:
        hits = np.flatnonzero(wrong)
        if hits.size:
            raise bad(say(recs[hits[0]]))

    check((index >= n_sent) & (index != PROFILE_WHOLE_GRAPH),
          lambda r: f"node index {r['index']} out of range ({n_sent} nodes sent)")
    check(recs["kind"] >= len(PROFILE_LANE_KINDS), lambda r: f"lane kind {r['kind']} of node {r['index']} unknown")
    check(start > end, lambda r: f"node {r['index']} ends at {r['end']} ns, before it starts at {r['start']} ns")
    check((start < received) | (end > replied),
          lambda r: f"node {r['index']} runs {r['start']}..{r['end']} ns, outside the server's "
                    f"{received}..{replied} ns")
    return ServerProfile(received, replied, recs)


def clock_shift(sent_ns: int, arrived_ns: int, prof: ServerProfile) -> int:
    """What moves a time of the server's clock onto this host's (the module's rule): the round trip from the send's
    start (`sent_ns`) to the reply's arrival (`arrived_ns`), less the server's part, is split evenly."""
    wire = max(0, (arrived_ns - sent_ns) - (prof.replied_ns - prof.received_ns))
    return arrived_ns - wire // 2 - prof.replied_ns


def report_profile(sink: ProfileSink, backend: str, graph: Graph, node_index: Sequence[int], prof: ServerProfile,
                   sent_ns: int, arrived_ns: int) -> None:
    """Report `prof` of the graph sent as `graph`'s nodes `node_index` (sent position -> graph index) to `sink`:
    node times per lane kind as lanes "server thread N" / "server queue N", whole-graph times (a server backend
    that cannot time its nodes) as `sink.graph`, which warns as for any such backend."""
    shift = clock_shift(sent_ns, arrived_ns, prof)

    def host(t: int) -> int:
        return min(max(t + shift, sent_ns), arrived_ns)

    recs = prof.records
    whole = recs[recs["index"] == PROFILE_WHOLE_GRAPH]
    if whole.size:
        sink.graph(backend, graph, host(int(whole["start"].min())), host(int(whole["end"].max())))
    nodes = recs[recs["index"] != PROFILE_WHOLE_GRAPH]
    if not nodes.size and whole.size:
        return
    for kind, lane in enumerate(PROFILE_LANE_KINDS):
        mine = nodes[nodes["kind"] == kind]
        if mine.size or (kind == 0 and not nodes.size):
            times = [NodeTime(graph.nodes[node_index[i]], node_index[i], host(s), host(e), thread)
                     for i, thread, s, e in zip(mine["index"].tolist(), mine["lane"].tolist(),
                                                mine["start"].tolist(), mine["end"].tolist(), strict=True)]
            sink.nodes(backend, graph, times, f"server {lane}")
