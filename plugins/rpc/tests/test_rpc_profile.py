"""Per-node profiles through RPC: GRAPH_COMPUTE_PROFILED, pyggml's own command, against `pyggml rpc-server` (the
server's times per node, moved onto this host's clock); against llama.cpp's server and an older pyggml server (mark
0x71) the whole-graph default with its ProfileWarning, the command never sent; a malformed reply is an RPCError
naming the server."""

from __future__ import annotations

import itertools
import re
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import cast

import numpy as np
import pytest
from pyggml_rpc import client as client_mod
from pyggml_rpc import server as server_mod
from pyggml_rpc.client import RPCBackend, RPCDevice
from pyggml_rpc.client_profile import ServerProfile, clock_shift, decode_profile, report_profile
from pyggml_rpc.connection import RPCError
from pyggml_rpc.registry import RPCRegistry
from pyggml_rpc.server import RPCServer, Served, Session
from pyggml_rpc.server_profile import CollectingSink, profile_records, profile_reply
from pyggml_rpc.server_tensors import ProtocolError
from pyggml_rpc.wire import (
    CONN_CAPS_SIZE,
    HELLO_RSP,
    PROFILE_HEAD,
    PROFILE_RECORD,
    PROFILE_RECORDS_MAX,
    PROFILE_WHOLE_GRAPH,
    PROTO_VERSION,
    PYGGML_SUPPORTS_OP_MARK,
    U32,
    Cmd,
)

import pyggml as gg
from pyggml import ops
from pyggml.backend.registry import get_device, get_registry
from pyggml.backend.sched import Scheduler
from pyggml.graph import Graph
from pyggml.ops.base import VIEW_OPS
from pyggml.profile import NodeTime, Profile, ProfileWarning, TraceEvent, check_trace, now_ns, trace_lanes
from pyggml_testing.devices import numpy_backend
from pyggml_testing.on_device import place_graph
from pyggml_testing.profiling import profile_graph
from pyggml_testing.rpc_servers import start_pyggml_server, stop
from pyggml_testing.sched import inp, weight

COMPUTES = 2


@pytest.fixture(scope="module")
def one_thread_server() -> Iterator[str]:
    """`pyggml rpc-server --device cpu --threads 1`: one lane, so one event per computing node."""
    proc, endpoint = start_pyggml_server("cpu", "--threads", "1")
    try:
        yield endpoint
    finally:
        stop(proc)


@contextmanager
def in_process_server() -> Iterator[str]:
    """A `pyggml rpc-server` of the numpy device in this process (so a test can patch it), stopped on leaving."""
    dev = get_device("numpy")
    srv = RPCServer(Served([dev], [dev.init_backend()], 1 << 30), port=0)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"{srv.address[0]}:{srv.address[1]}"
    finally:
        srv.shutdown()
        t.join(10)


def _device(endpoint: str, shared: bool = False) -> RPCDevice:
    """The first device of the server at `endpoint`, through a registry of its own, or (`shared`: the session's
    servers; llama.cpp's serves one client at a time) through the hub's, whose connection the other tests share."""
    reg = cast(RPCRegistry, get_registry("RPC")) if shared else RPCRegistry()
    return reg.add_server(endpoint)[0]


def _profile(device: RPCDevice, computes: int = COMPUTES) -> tuple[Profile, RPCBackend, Graph, int, int]:
    """profile_graph computed `computes` times under a Profile on `device` (results checked): (profile, backend,
    graph, host clock before, after). Its buffer is freed before returning: a buffer left to the garbage collector
    would be freed whenever a cycle is collected, in another test, whose GRAPH_RECOMPUTE (on the shared connection)
    would then become a GRAPH_COMPUTE."""
    g, data, want = profile_graph()
    buf = place_graph(g, device.buffer_type())
    try:
        byname = {t.name: t for t in g.leafs + g.nodes}
        for k, v in data.items():
            byname[k].set(v)
        backend = device.new_backend()
        before = now_ns()
        with Profile() as prof:
            for _ in range(computes):
                prof.compute(backend, g)
        after = now_ns()
        np.testing.assert_allclose(g.nodes[-1].numpy().reshape(want.shape), want, rtol=1e-4, atol=1e-4)
    finally:
        buf.free()
    return prof, backend, g, before, after


def _computing(g: Graph) -> list[tuple[int, str]]:
    return [(i, n.op.name) for i, n in enumerate(g.nodes) if n.op not in VIEW_OPS]


def _check_times(events: list[TraceEvent], before: int, after: int) -> None:
    for e in events:
        assert before <= e.start_ns <= e.end_ns <= after, e


def test_pyggml_server_times_each_node(one_thread_server: str) -> None:
    device = _device(one_thread_server)
    assert device.server.conn.profiles_nodes
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProfileWarning)
        prof, backend, g, before, after = _profile(device)
        trace = prof.trace()
    computing = _computing(g)
    assert len(computing) < len(g.nodes)  # the view is not timed
    events = prof.node_events()
    assert not prof.untimed and all(e.category == "node" for e in prof.events)
    assert [(e.args["index"], e.op) for e in events] == computing * COMPUTES
    assert {e.process for e in events} == {backend.name} and {e.thread for e in events} == {"server thread 0"}
    _check_times(events, before, after)
    for run in (events[: len(computing)], events[len(computing) :]):
        for earlier, later in itertools.pairwise(run):
            assert earlier.end_ns <= later.start_ns, (earlier, later)
    check_trace(trace)
    assert trace_lanes(trace)[backend.name] == {"server thread 0": COMPUTES * len(computing)}
    assert backend.plans_built == 1 and backend.recomputes == COMPUTES - 1  # the second went as 4 bytes


def test_scheduler_split_over_the_server_and_numpy(one_thread_server: str) -> None:
    """A layer split, RPC then numpy: the RPC split's nodes on the server's lane, numpy's on its own, a valid trace."""
    backends = [_device(one_thread_server).new_backend(), numpy_backend()]
    y = x = inp(32, 4)
    for i, b in enumerate(backends):
        w = weight(b.device.buffer_type(), 32, 32, name=f"w{i}")
        w.set(np.full(32 * 32, 1.0 / 32, dtype=np.float32))
        y = ops.relu(ops.mul_mat(w, y)).set_name(f"l{i}")
    y.set_output()
    g = gg.build_graph(y)
    sched = Scheduler(backends)
    sched.alloc_graph(g)
    assert sched.n_splits == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProfileWarning)
        with Profile() as prof:
            for _ in range(COMPUTES):
                x.set(np.ones(x.nelements(), dtype=np.float32))
                sched.graph_compute(g)
        trace = prof.trace()
    np.testing.assert_allclose(y.numpy(), np.ones((4, 32)), rtol=1e-5)
    check_trace(trace)
    lanes = trace_lanes(trace)
    rpc, ref = (b.name for b in backends)
    assert lanes[rpc]["server thread 0"] == lanes[ref]["thread 0"] == 2 * COMPUTES and "graph" not in lanes[rpc]
    assert {e.args["tensor"] for e in prof.node_events() if e.process == rpc} == {"l0", g.nodes[0].name}


def test_pyggml_server_threads_are_lanes(pyggml_server: str) -> None:
    """The session's server (cpu, its default threads): each computing node on one or more "server thread N"
    lanes, at most once per lane and compute."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProfileWarning)
        prof, _backend, g, before, after = _profile(_device(pyggml_server, shared=True), computes=1)
        check_trace(prof.trace())
    events = prof.node_events()
    assert {(e.args["index"], e.op) for e in events} == set(_computing(g))
    lanes = [(e.args["index"], e.thread) for e in events]
    assert len(lanes) == len(set(lanes)) and all(re.fullmatch(r"server thread \d+", t) for _, t in lanes)
    _check_times(events, before, after)


def test_llama_cpp_server_gives_whole_graph_times(ggml_server: str) -> None:
    device = _device(ggml_server, shared=True)
    assert not device.server.conn.profiles_nodes
    with pytest.warns(ProfileWarning, match=r"backend 'RPC\d+' cannot time its nodes"):
        prof, backend, _g, before, after = _profile(device)
    assert prof.untimed == {backend.name} and not prof.node_events()
    assert [e.thread for e in prof.events] == ["graph"] * COMPUTES
    _check_times(prof.events, before, after)
    check_trace(prof.trace())


def test_older_pyggml_server_gives_whole_graph_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server with SUPPORTS_OP's mark but not the profile's: never sent GRAPH_COMPUTE_PROFILED."""
    monkeypatch.setattr(server_mod, "hello_reply",
                        lambda: HELLO_RSP.pack(*PROTO_VERSION, PYGGML_SUPPORTS_OP_MARK, bytes(CONN_CAPS_SIZE)))
    asked: list[bytes] = []
    monkeypatch.setitem(server_mod.HANDLERS, Cmd.GRAPH_COMPUTE_PROFILED, lambda s, p: asked.append(p))
    with in_process_server() as endpoint:
        device = _device(endpoint)
        assert device.server.conn.answers_supports_op and not device.server.conn.profiles_nodes
        with pytest.warns(ProfileWarning, match="cannot time its nodes"):
            prof, backend, _g, _b, _a = _profile(device)
        device.server.conn.close()
    assert prof.untimed == {backend.name} and not asked


Reply = Callable[[np.ndarray, int], bytes]
REAL_REPLY: Reply = profile_reply


def _corrupt(field: str, value: Callable[[np.void], int]) -> Reply:
    """The server's reply with `field` of its last record set to `value(record)`."""

    def reply(records: np.ndarray, received: int) -> bytes:
        recs = records.copy()
        recs[field][-1] = value(recs[-1])
        return REAL_REPLY(recs, received)

    return reply


@pytest.mark.parametrize(("reply", "says"), [
    (_corrupt("index", lambda r: 99), "node index 99 out of range"),
    (_corrupt("kind", lambda r: 7), "lane kind 7 of node"),
    (_corrupt("start", lambda r: 0), r"node \d+ runs 0\.\.\d+ ns, outside the server's"),
    (_corrupt("end", lambda r: int(r["start"]) - 1), r"node \d+ ends at \d+ ns, before it starts"),
    (lambda recs, received: REAL_REPLY(recs, received)[:-1], r"\d+ bytes do not hold \d+ records exactly"),
], ids=["index", "kind", "outside", "order", "size"])
def test_malformed_reply_names_the_server(monkeypatch: pytest.MonkeyPatch, reply: Reply, says: str) -> None:
    with in_process_server() as endpoint:
        device = _device(endpoint)
        monkeypatch.setattr(server_mod, "profile_reply", reply)
        with pytest.raises(RPCError, match=f"RPC server {re.escape(endpoint)}: malformed GRAPH_COMPUTE_PROFILED "
                           f"reply: {says}"):
            _profile(device, computes=1)
        device.server.conn.close()


def test_oversized_reply_closes_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    with in_process_server() as endpoint:
        device = _device(endpoint)
        monkeypatch.setattr(client_mod, "PROFILE_REPLY_MAX", 30)
        with pytest.raises(RPCError, match=f"{re.escape(endpoint)}: GRAPH_COMPUTE_PROFILED replied \\d+ bytes, at "
                           "most 30 expected"):
            _profile(device, computes=1)
        assert device.server.conn.broken is not None


def _reply(received: int, replied: int, rows: list[tuple[int, int, int, int, int]], n: int | None = None) -> bytes:
    recs = np.array(rows, dtype=PROFILE_RECORD)
    return PROFILE_HEAD.pack(received, replied, len(rows) if n is None else n) + recs.tobytes()


@pytest.mark.parametrize(("reply", "says"), [
    (b"\x00" * 10, "10 bytes is shorter than its header"),
    (_reply(0, 10, [], n=PROFILE_RECORDS_MAX + 1), f"{PROFILE_RECORDS_MAX + 1} records"),
    (_reply(0, 10, [(0, 0, 0, 1, 2)], n=2), "44 bytes do not hold 2 records exactly"),
    (_reply(10, 5, []), "the reply was ready at 5 ns, before the request arrived at 10 ns"),
    (_reply(0, 10, [(0, 0, 0, 1, 2), (3, 0, 0, 2, 3)]), r"node index 3 out of range \(3 nodes sent\)"),
], ids=["short", "count", "size", "clock", "index"])
def test_decode_checks_the_reply(reply: bytes, says: str) -> None:
    with pytest.raises(RPCError, match=f"RPC server peer:1: malformed GRAPH_COMPUTE_PROFILED reply: {says}"):
        decode_profile(reply, 3, "peer:1")


def test_clock_shift_splits_the_wire_time() -> None:
    """Sent at 1000, back at 2000 on the client; the server had it at 50,000 and replied at 50,600: 400 ns on the
    wire, 200 each way, so the server's 50,000 is the client's 1,200 and its 50,600 the client's 1,800."""
    prof = ServerProfile(50_000, 50_600, np.zeros(0, PROFILE_RECORD))
    shift = clock_shift(1000, 2000, prof)
    assert (50_000 + shift, 50_600 + shift) == (1200, 1800)
    assert 50_600 + clock_shift(1000, 1300, prof) == 1300  # a server slower than the round trip: no wire time


def test_report_maps_indices_lanes_and_whole_graphs() -> None:
    """Sent positions map to the client's graph indices (a node left out of the payload shifts them), lane kinds to
    lanes, a whole-graph record to the sink's whole-graph time (and its warning); times land on the host clock."""
    g, _data, _want = profile_graph()
    recs = np.array([(0, 0, 1, 50_100, 50_200), (2, 1, 0, 50_300, 50_400)], dtype=PROFILE_RECORD)
    with Profile() as prof:
        report_profile(prof, "RPCx", g, (0, 1, 3), ServerProfile(50_000, 50_600, recs), 1000, 2000)
    assert [(e.thread, e.args["index"], e.start_ns, e.end_ns) for e in prof.node_events()] == [
        ("server thread 1", 0, 1300, 1400), ("server queue 0", 3, 1500, 1600)]
    whole = np.array([(PROFILE_WHOLE_GRAPH, 0, 0, 50_000, 50_600)], dtype=PROFILE_RECORD)
    with Profile() as prof, pytest.warns(ProfileWarning, match="'RPCx' cannot time its nodes"):
        report_profile(prof, "RPCx", g, (0, 1, 3), ServerProfile(50_000, 50_600, whole), 1000, 2000)
    assert [(e.thread, e.start_ns, e.end_ns) for e in prof.events] == [("graph", 1200, 1800)]


def test_server_caps_and_clamps_its_records() -> None:
    g, _data, _want = profile_graph()
    sink = CollectingSink()
    sink.nodes("cpu", g, [NodeTime(n, i, 100 + 10 * i + t, 105 + 10 * i + t, t) for i, n in enumerate(g.nodes)
                          for t in range(2)], "thread")
    sink.nodes("cpu", Graph(), [NodeTime(profile_graph()[0].nodes[0], 0, 0, 1)], "thread")  # not of the graph
    assert len(profile_records(g, sink, 0, 1 << 20)) == 2 * len(g.nodes)
    merged = profile_records(g, sink, 0, 1 << 20, cap=len(g.nodes))
    assert merged[["index", "lane", "start", "end"]].tolist() == [(i, 0, 100 + 10 * i, 106 + 10 * i)
                                                                  for i in range(len(g.nodes))]
    clamped = profile_records(g, sink, 112, 121)
    assert clamped["start"].min() == 112 and clamped["end"].max() == 121
    assert np.all(clamped["start"] <= clamped["end"])


def test_profiled_replay_needs_a_kept_graph() -> None:
    dev = get_device("numpy")
    session = Session(Served([dev], [dev.init_backend()], 1 << 20))
    with pytest.raises(ProtocolError, match="GRAPH_COMPUTE_PROFILED: no graph kept for device 0"):
        session.handle(Cmd.GRAPH_COMPUTE_PROFILED, U32.pack(0))
