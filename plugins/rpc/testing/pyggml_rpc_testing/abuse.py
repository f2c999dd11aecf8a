"""Abusive clients against a `pyggml rpc-server` process (silent, truncating, trickling, claiming huge payloads,
sending garbage, out of order), each a function of the server's endpoint that fails if the server did not cope, and
a well-behaved client that keeps computing on the server meanwhile: for plugins/rpc's tests/test_server_fuzz.py and
benchmarks/fuzz_server.py."""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from pyggml_rpc.registry import RPCRegistry
from pyggml_rpc.server import GRAPH_PAYLOAD_MAX
from pyggml_rpc.wire import DEVICE_U64, HEADER, HELLO_RSP, REQUEST_SIZES, TWO_U64, U32, U64, Cmd

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.types import GGMLType
from pyggml_rpc_testing.fuzz import HELLO_FRAME, frame

TIMEOUT = 2.0
"""PYGGML_RPC_MESSAGE_TIMEOUT of the server the abusive clients meet."""


def _hello(s: socket.socket) -> None:
    s.sendall(HELLO_FRAME)
    assert _read(s, 8 + HELLO_RSP.size)[8] == 7


def _read(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, "the server closed the connection"
        out += chunk
    return out


def _closed_within(s: socket.socket, seconds: float) -> float:
    """Seconds until the server closed the connection (what it sent before is skipped; a reset, when it closed
    with bytes unread, counts as closed); fails after `seconds`."""
    t0 = time.monotonic()
    s.settimeout(seconds)
    try:
        while s.recv(4096):
            pass
    except ConnectionError:
        pass
    except TimeoutError:
        pytest.fail(f"the server kept the connection past {seconds} s")
    return time.monotonic() - t0


def silent(ep: str) -> None:
    """Connects and says nothing: dropped after the HELLO timeout."""
    with _connect(ep) as s:
        assert _closed_within(s, TIMEOUT + 3) >= TIMEOUT - 0.5


def huge_claim(ep: str) -> None:
    """A GRAPH_COMPUTE header claiming the largest payload allowed, a few bytes of it, then nothing: dropped after
    the timeout (it does not get the claimed size's slack), and no memory is set aside for the claim."""
    with _connect(ep) as s:
        _hello(s)
        s.sendall(frame(Cmd.GRAPH_COMPUTE, bytes(100), GRAPH_PAYLOAD_MAX))
        _closed_within(s, TIMEOUT + 3)


def oversize_claim(ep: str) -> None:
    for cmd, size in ((Cmd.GRAPH_COMPUTE, GRAPH_PAYLOAD_MAX + 1), (Cmd.SET_TENSOR, 1 << 63), (Cmd.HELLO, 1 << 40)):
        with _connect(ep) as s:
            if cmd is not Cmd.HELLO:
                _hello(s)
            s.sendall(HEADER.pack(cmd, size))
            assert _closed_within(s, TIMEOUT + 3) < TIMEOUT - 0.5  # refused at once, not timed out


def trickle(ep: str) -> None:
    """A message sent a byte every TIMEOUT / 4 s: each byte in time, the whole not: dropped at the deadline."""
    with _connect(ep) as s:
        _hello(s)
        s.sendall(HEADER.pack(Cmd.SET_TENSOR, 300))
        t0 = time.monotonic()
        try:
            for _ in range(300):
                time.sleep(TIMEOUT / 4)
                s.sendall(b"\0")
        except OSError:
            pass
        assert time.monotonic() - t0 < TIMEOUT + 3
        _closed_within(s, 3)


def slow_valid(ep: str) -> None:
    """Valid requests sent a byte at a time with pauses, each within the timeout: served as usual."""
    replies = []
    with _connect(ep) as s:
        for msg in (HELLO_FRAME, frame(Cmd.DEVICE_COUNT, b""), frame(Cmd.ALLOC_BUFFER, DEVICE_U64.pack(0, 1000))):
            for i in range(len(msg)):
                s.sendall(msg[i : i + 1])
                time.sleep(TIMEOUT / 2 / len(msg))
            replies.append(_read(s, U64.unpack(_read(s, 8))[0]))
    assert U32.unpack(replies[1])[0] == 1
    handle, size = TWO_U64.unpack(replies[2])
    assert handle and size == 1000


def truncated(ep: str) -> None:
    """Every command: its header and half its payload, then the end of the stream: closed, no reply."""
    for cmd in Cmd:
        size = REQUEST_SIZES[cmd] or 1000
        with _connect(ep) as s:
            if cmd is not Cmd.HELLO:
                _hello(s)
            with contextlib.suppress(OSError):  # the server may have refused the header already
                s.sendall(HEADER.pack(cmd, size) + bytes(size // 2))
                s.shutdown(socket.SHUT_WR)
            _closed_within(s, 3)


def garbage(ep: str) -> None:
    r = random.Random(5)
    for _ in range(20):
        with _connect(ep) as s:
            _hello(s)
            with contextlib.suppress(OSError):
                s.sendall(r.randbytes(r.randint(1, 2000)))
            _closed_within(s, TIMEOUT + 3)


def out_of_order(ep: str) -> None:
    """A command before HELLO, and HELLO twice: closed (the first HELLO answered)."""
    with _connect(ep) as s:
        s.sendall(frame(Cmd.DEVICE_COUNT, b""))
        assert _closed_within(s, TIMEOUT + 3) < TIMEOUT - 0.5
    with _connect(ep) as s:
        _hello(s)
        s.sendall(HELLO_FRAME)
        assert _closed_within(s, TIMEOUT + 3) < TIMEOUT - 0.5


def _connect(ep: str) -> socket.socket:
    host, port = ep.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


SCENARIOS: dict[str, Callable[[str], None]] = {
    "silent": silent, "silent 2": silent, "silent 3": silent, "huge claim": huge_claim, "huge claim 2": huge_claim,
    "oversize claim": oversize_claim, "trickle": trickle, "slow valid": slow_valid, "truncated": truncated,
    "garbage": garbage, "out of order": out_of_order,
}
"""Abusive clients, each a function of the server's endpoint that fails (AssertionError) if the server did not
cope; run concurrently."""


class GoodClient(threading.Thread):
    """pyggml's client computing y = 2x + 1 on the server, with fresh x, in a loop: every result is checked."""

    def __init__(self, endpoint: str) -> None:
        super().__init__(daemon=True)
        self.endpoint = endpoint
        self.rounds = 0
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            dev = RPCRegistry().add_server(self.endpoint)[0]  # not the hub's registry: the server goes away
            ctx = gg.Context(no_alloc=True)
            x = ctx.new_tensor(GGMLType.F32, 256, 4)
            y = ops.scale(x, 2.0, 1.0)
            graph = gg.build_graph(y)
            alloc_ctx_tensors(ctx, dev.buffer_type())
            backend = dev.init_backend()
            rng = np.random.default_rng(0)
            while not self.stop.is_set():
                xv = rng.standard_normal((4, 256)).astype(np.float32)
                x.set(xv)
                backend.graph_compute(graph)
                if not np.allclose(y.numpy(), 2 * xv + 1):
                    self.errors.append(f"round {self.rounds}: wrong result")
                self.rounds += 1
                time.sleep(0.02)
        except Exception as e:
            self.errors.append(f"round {self.rounds}: {type(e).__name__}: {e}")


def vm_peak_rss(pid: int) -> int:
    """The peak resident set of process `pid` (bytes, from /proc; 0 where unknown)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def run_scenarios(endpoint: str) -> dict[str, str]:
    """Every scenario at once: name -> 'ok' or what went wrong."""
    with ThreadPoolExecutor(len(SCENARIOS)) as pool:
        futures = {name: pool.submit(fn, endpoint) for name, fn in SCENARIOS.items()}
    out = {}
    for name, fut in futures.items():
        e = fut.exception()
        out[name] = "ok" if e is None else f"{type(e).__name__}: {e}"
    return out
