"""Fuzzing `pyggml rpc-server`: mutated messages of every command straight into `Session.handle` (and now and then
as bytes through the socket loop), the bugs the fuzzing found kept as regression cases, and abusive clients
(silent, truncating, trickling, claiming huge payloads, sending garbage) against a real server process while a
well-behaved client keeps computing on it.

The full campaign (10,000 messages per command) is `benchmarks/fuzz_server.py`; PYGGML_RPC_FUZZ_CASES sets the
cases per command here (default 300).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from pyggml_rpc.graph_codec import build_plan
from pyggml_rpc.server import GRAPH_PAYLOAD_MAX, Served, Session
from pyggml_rpc.server_tensors import ProtocolError
from pyggml_rpc.wire import (
    RPC_TENSOR,
    TENSOR_SIZE,
    TWO_U64,
    U32,
    Cmd,
    graph_payload,
)

import pyggml as gg
from pyggml import ops
from pyggml.backend.protocol import Device, DeviceType
from pyggml.backend.registry import get_device
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_rpc_testing.abuse import TIMEOUT, GoodClient, run_scenarios, vm_peak_rss
from pyggml_rpc_testing.fuzz import Harness, framed
from pyggml_rpc_testing.fuzz_messages import GENERATORS, graph_templates
from pyggml_rpc_testing.fuzz_world import MAIN_SIZE, MEMORY_LIMIT, GuardedDevice, alloc
from pyggml_testing.rpc_servers import start_pyggml_server, stop

CASES = int(os.environ.get("PYGGML_RPC_FUZZ_CASES", "300"))


@pytest.fixture(scope="module")
def harness() -> Iterator[Harness]:
    h = Harness(seed=20240611)
    yield h
    h.close()


def test_valid_messages_do_the_valid_thing(harness: Harness) -> None:
    """The generators' messages are valid: without mutation, every one succeeds (HELLO through the socket loop)."""
    r = random.Random(1)
    for cmd in Cmd:
        for _ in range(5):
            msg = GENERATORS[cmd](harness.world, r, harness.templates)
            outcome = harness.stream(framed(msg).payload)[0] if cmd is Cmd.HELLO else harness.deliver(
                cmd, msg.payload)[0]
            assert outcome == ("stream:ok" if cmd is Cmd.HELLO else "ok"), cmd.name


@pytest.mark.parametrize("cmd", list(Cmd), ids=lambda c: c.name)
def test_mutated_messages(harness: Harness, cmd: Cmd) -> None:
    counts = harness.run(cmd, CASES)
    found = [f for f in harness.findings if f.cmd == cmd.name]
    assert not found, "\n\n".join(f"{f.mutation} -> {f.outcome}\n{f.detail}\npayload {f.payload}" for f in found)
    assert sum(counts.values()) == CASES
    assert counts["refused"] + counts["stream:refused"] > 0  # the mutations do break messages


# ---- the bugs the fuzzing found, kept ------------------------------------------------------------------------


def _graph(outputs: list[Tensor], offsets: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(node ids, rpc_tensors) of a graph whose tensors sit at `offsets` (id -> byte) of the main buffer; `data`
    holds the offsets: `_send` places them (a refused message starts a new session, with a new main buffer)."""
    plan = build_plan(gg.build_graph(*outputs), 0, lambda t: (1, offsets[id(t)]), "test")
    n = U32.unpack_from(plan.payload, 4)[0]
    return np.frombuffer(plan.payload, "<u8", n, 8).copy(), np.frombuffer(plan.payload, RPC_TENSOR,
                                                                            offset=12 + 8 * n).copy()


def _send(h: Harness, device: int, nodes: np.ndarray, recs: np.ndarray) -> str:
    placed = recs.copy()
    placed["buffer"], placed["data"] = h.world.main.handle, recs["data"] + np.uint64(h.world.main.base)
    return h.deliver(Cmd.GRAPH_COMPUTE, graph_payload(device, nodes, placed))[0]


def test_handle_checks_the_payload_size(harness: Harness) -> None:
    """Was struct.error / AssertionError: `handle` trusted its caller with the size."""
    a = harness.world.a
    for cmd in (Cmd.ALLOC_BUFFER, Cmd.BUFFER_GET_BASE, Cmd.GET_TENSOR, Cmd.COPY_TENSOR, Cmd.MEMSET_TENSOR):
        with pytest.raises(ProtocolError, match="payload of"):
            a.handle(cmd, bytes(3))


def test_extent_beyond_64_bits_is_refused(harness: Harness) -> None:
    """Was struct.error: GET_ALLOC_SIZE of a buffer-less tensor whose ne and nb span ~2**66 bytes."""
    rec = np.zeros(1, RPC_TENSOR)
    rec["ne"] = rec["nb"] = 0xFFFF_FFFF
    payload = U32.pack(0) + rec.tobytes() + bytes(10 * TENSOR_SIZE)
    assert harness.deliver(Cmd.GET_ALLOC_SIZE, payload)[0] == "refused"


def test_block_source_squeezed_against_the_buffer_end_is_refused(harness: Harness) -> None:
    """Was a read past the buffer (a segfault here, next to the guard page): ggml_nbytes undercounts a block type
    whose nb[0] is less than a block, and the numpy device's CONCAT reads whole blocks."""
    with gg.Context(no_alloc=True) as ctx:
        a = ctx.new_tensor(GGMLType.Q8_0, 32, 2)
        c = ops.concat(a, a, 1)
    nodes, recs = _graph([c], {id(a): 1024, id(c): 0})
    leaf = recs["id"] == id(a)
    assert _send(harness, 1, nodes, recs) == "ok"
    recs["nb"][leaf] = (0, 200, 400, 400)  # rows apart, a row's one block at nb[0] = 0: 200 bytes by ggml_nbytes
    for end, outcome in ((200, "refused"), (200 + 34, "ok")):  # the second row's block ends 34 bytes further
        recs["data"][leaf] = MAIN_SIZE - end
        assert _send(harness, 1, nodes, recs) == outcome


def test_overlapping_strides_are_refused(harness: Harness) -> None:
    """Was a hang: four bytes with ne = (2**32-1)**4 and nb = 0 let a SUM loop ~2**128 times, holding the device."""
    with gg.Context(no_alloc=True) as ctx:
        x = ctx.new_tensor(GGMLType.F32, 4)
        s = ops.sum(x)
    nodes, recs = _graph([s], {id(x): 1024, id(s): 0})
    assert _send(harness, 0, nodes, recs) == "ok"
    recs["ne"][recs["id"] == id(x)] = 0xFFFF_FFFF
    recs["nb"][recs["id"] == id(x)] = 0
    t0 = time.perf_counter()
    assert _send(harness, 0, nodes, recs) == "refused"
    assert time.perf_counter() - t0 < 1


def test_set_tensor_hash_checks_the_tensor_before_the_cache(harness: Harness) -> None:
    """Was a reply of 0 (not cached) to a malformed tensor, the connection kept: now closed, hit or miss."""
    rec = np.zeros(1, RPC_TENSOR)
    rec["buffer"], rec["type"] = harness.world.main.handle, 99
    assert harness.deliver(Cmd.SET_TENSOR_HASH, rec.tobytes() + TWO_U64.pack(0, 12345))[0] == "refused"


def test_buffers_of_another_device_are_refused() -> None:
    """Was unchecked: a GRAPH_COMPUTE for one device over tensors in a buffer of another device of the server
    (ggml's scheduler never sends one; a GPU's kernels would take host memory for their own)."""
    devs: list[Device] = [GuardedDevice(get_device("cpu")),
                          GuardedDevice(get_device("numpy"), DeviceType.GPU)]  # takes only its own buffers
    session = Session(Served(devs, [d.init_backend() for d in devs], MEMORY_LIMIT))
    templates, init = graph_templates()
    try:
        for device in (0, 1):
            sb = alloc(session, device, MAIN_SIZE)
            sb.buffer.write(0, init)
            recs = templates[0].recs.copy()
            recs["buffer"], recs["data"] = sb.handle, recs["data"] + np.uint64(sb.base)
            for target in (0, 1):
                payload = graph_payload(target, templates[0].nodes, recs)
                if device == 1 and target == 0:  # the cpu device reads any host memory: a GPU's would not be
                    continue
                if device == target:
                    assert session.handle(Cmd.GRAPH_COMPUTE, payload) is None
                else:
                    with pytest.raises(ProtocolError, match="in a buffer of"):
                        session.handle(Cmd.GRAPH_COMPUTE, payload)
    finally:
        session.close()


# ---- abusive clients against a server process (pyggml_rpc_testing.abuse) --------------------------------------


@pytest.fixture(scope="module")
def abused_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, str, Path]]:
    log = tmp_path_factory.mktemp("fuzz") / "server.log"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYGGML_RPC_MESSAGE_TIMEOUT", str(TIMEOUT))
        proc, endpoint = start_pyggml_server("cpu", "--threads", "1", log=log)
    yield proc.pid, endpoint, log
    assert proc.poll() is None, "the server died"
    stop(proc)


def test_abusive_clients(abused_server: tuple[int, str, Path]) -> None:
    pid, endpoint, log = abused_server
    good = GoodClient(endpoint)
    good.start()
    peak = vm_peak_rss(pid)
    results = run_scenarios(endpoint)
    time.sleep(0.2)
    good.stop.set()
    good.join(30)
    assert {k: v for k, v in results.items() if v != "ok"} == {}
    assert good.rounds > 10 and not good.errors, good.errors
    assert vm_peak_rss(pid) - peak < GRAPH_PAYLOAD_MAX // 2, "memory was set aside for a claimed payload"
    text = log.read_text()
    assert "closing" in text and "Traceback" not in text and "unexpected" not in text
