"""The RPC server's fuzzing kit (plugins/rpc: tests/test_server_fuzz.py, benchmarks/fuzz_server.py): valid messages
of every command, built against a live in-process `Session`, and mutators that break them byte by byte and field
by field.

`Harness` delivers each mutated message to `Session.handle` and judges it. Allowed: the valid thing, or
`ProtocolError` / another `PyGGMLError` (the socket loop closes the connection on those, and so does the harness: it
starts a fresh session). A bug: any other exception, a message slower than SLOW_S, or memory changed that the
message did not address. Memory is watched three ways: every buffer lies between inaccessible pages (a stray read
or write past either end faults at once) with pattern padding checked after each message; sentinel buffers, one
in the fuzzed session and one in another client's, keep a pattern that only a message naming the sentinel's
handle may change; and the server's allocation count must equal what the sessions hold.
"""

from __future__ import annotations

import faulthandler
import logging
import random
import socket
import tempfile
import threading
import time
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from pyggml_rpc.fnv import fnv1a64
from pyggml_rpc.server import serve_connection
from pyggml_rpc.server_tensors import ProtocolError
from pyggml_rpc.wire import (
    CONN_CAPS_SIZE,
    HEADER,
    NO_REPLY,
    RPC_TENSOR,
    TENSOR_SIZE,
    TWO_U64,
    U32,
    Cmd,
)

from pyggml.errors import PyGGMLError
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType, type_traits
from pyggml_rpc_testing.fuzz_messages import CPY_CODE, GENERATORS, Msg, graph_msg, graph_templates
from pyggml_rpc_testing.fuzz_world import HANG_S, MAIN_SIZE, REPLY_SIZES, RESET_EVERY, SLOW_S, World, make_served

# ---- mutators ------------------------------------------------------------------------------------------------

EDGES = (0, 1, 2, 3, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF, 1 << 32,
         (1 << 32) + 1, 1 << 62, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, (1 << 64) - 2)
FIELDS = [(f"{name}[{i}]" if dt.shape else name, off + i * dt.base.itemsize, dt.base.itemsize)
          for name, (dt, off, *_) in (RPC_TENSOR.fields or {}).items() if name != "name"
          for i in range(dt.shape[0] if dt.shape else 1)]
"""(name, offset, width) of every integer of an rpc_tensor, array elements one by one."""
OFFSETS = {name: off for name, (_, off, *_) in (RPC_TENSOR.fields or {}).items()}


def _get(buf: bytearray, at: int, width: int) -> int:
    return int.from_bytes(buf[at : at + width], "little")


def _put(buf: bytearray, at: int, width: int, value: int) -> None:
    buf[at : at + width] = (value & ((1 << 8 * width) - 1)).to_bytes(width, "little")


def _value(r: random.Random, width: int, old: int, likely: list[int]) -> int:
    c = r.random()
    if c < 0.4:
        return r.choice(EDGES)
    if c < 0.6:
        return old + r.choice((-1, 1, -2, 2, -64, 64, -4096, 4096, old))
    if c < 0.85 and likely:
        return r.choice(likely)
    return r.getrandbits(8 * width)


def _likely(name: str, buf: bytearray, msg: Msg, w: World) -> list[int]:
    """Values that pass some checks and not others: ids of the message, live handles, addresses near buffers."""
    if name.startswith(("id", "src", "view_src")):
        return [0] + [_get(buf, at, 8) for at in msg.tensors]
    if name == "buffer":
        return [0, *w.handles()]
    if name == "data":
        m = w.main.base
        return [0, m, m - 1, m + MAIN_SIZE - 1, m + MAIN_SIZE, m + MAIN_SIZE + 1, w.sent_a.base, w.sent_b.base]
    if name == "type":
        return list(range(45))
    if name == "op":
        return list(range(102))
    return [0, 1, 2, 4, 16, 31, 32, 33, 64, 256, 1024]


def _field(msg: Msg, buf: bytearray, r: random.Random, w: World) -> str:
    if not msg.tensors and not msg.scalars:
        return _bytes(msg, buf, r, w)
    if msg.tensors and (not msg.scalars or r.random() < 0.75):
        at = r.choice(msg.tensors)
        c = r.random()
        if c < 0.04:
            buf[at + OFFSETS["name"] :][:64] = b"\xff" * 64
            return "tensor.name"
        if c < 0.1:
            return _at_end(buf, at, r, w)
        if c < 0.16:  # every dimension and stride at once: extents past 2**64, overflowing products
            mode = r.choice(("big", "mixed", "virtual"))  # virtual: huge ne over zero strides, a few bytes
            for name, off, width in FIELDS:
                if name.startswith("ne") or (name.startswith("nb") and mode != "virtual"):
                    _put(buf, at + off, width, r.choice((0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF) if mode != "mixed"
                                                        else (0, 1, 2, 3, 64, 0x8000_0000, 0xFFFF_FFFF)))
                elif name.startswith("nb"):
                    _put(buf, at + off, width, 0)
            return "tensor.shape"
        name, off, width = r.choice(FIELDS)
        _put(buf, at + off, width, _value(r, width, _get(buf, at + off, width), _likely(name, buf, msg, w)))
        return f"tensor.{name}"
    at, width = r.choice(msg.scalars)
    _put(buf, at, width, _value(r, width, _get(buf, at, width), [0, *w.handles()]))
    return f"field@{at}"


def _at_end(buf: bytearray, at: int, r: random.Random, w: World) -> str:
    """The tensor (a stride shrunk, maybe) moved so that ggml_nbytes of it ends at the main buffer's last byte,
    which touches an inaccessible page: a kernel reading past what the server checked faults."""
    if len(buf) < at + TENSOR_SIZE:  # cut short by an earlier mutation
        return "tensor.at_end (truncated)"
    rec = np.frombuffer(bytes(buf[at : at + TENSOR_SIZE]), RPC_TENSOR)[0]
    ne, nb = tuple(int(v) for v in rec["ne"]), [int(v) for v in rec["nb"]]
    c = r.random()
    if c < 0.4:
        nb[r.randrange(4)] = r.choice((0, 1, 2, 4, nb[0] // 2))
    elif c < 0.8:  # rows spread apart, elements (blocks) squeezed: no overlap, an extent easy to miscount
        nb = [r.randrange(nb[0] + 1), *(2 * v + 64 for v in nb[1:])]
    try:
        n = Tensor(GGMLType(int(rec["type"])), ne, tuple(nb), op=Op.NONE).nbytes()  # type: ignore[arg-type]
    except (ValueError, KeyError, ZeroDivisionError):
        return "tensor.at_end (no type)"
    for k in range(4):
        _put(buf, at + OFFSETS["nb"] + 4 * k, 4, nb[k])
    _put(buf, at + OFFSETS["buffer"], 8, w.main.handle)
    _put(buf, at + OFFSETS["data"], 8, w.main.base + MAIN_SIZE - n)
    return "tensor.at_end"


def _swap(msg: Msg, buf: bytearray, r: random.Random, w: World) -> str:
    if len(msg.tensors) > 1 and r.random() < 0.3:
        i, j = r.sample(msg.tensors, 2)
        buf[i : i + TENSOR_SIZE], buf[j : j + TENSOR_SIZE] = buf[j : j + TENSOR_SIZE], buf[i : i + TENSOR_SIZE]
        return "swap tensors"
    if msg.tensors:
        at = r.choice(msg.tensors)
        (n1, o1, _), (n2, o2, _) = r.sample([f for f in FIELDS if f[2] == 8], 2)
        a, b = _get(buf, at + o1, 8), _get(buf, at + o2, 8)
        _put(buf, at + o1, 8, b)
        _put(buf, at + o2, 8, a)
        return f"swap tensor.{n1}/{n2}"
    return _field(msg, buf, r, w) if msg.scalars else "none"


def _bits(msg: Msg, buf: bytearray, r: random.Random, w: World) -> str:
    for _ in range(r.randint(1, 8)):
        if buf:
            buf[r.randrange(len(buf))] ^= 1 << r.randrange(8)
    return "bit flips"


def _bytes(msg: Msg, buf: bytearray, r: random.Random, w: World) -> str:
    for _ in range(r.randint(1, 4)):
        if buf:
            buf[r.randrange(len(buf))] = r.choice((0, 0xFF, 0x7F, 0x80, r.randrange(256)))
    return "byte overwrites"


def _graph(msg: Msg, r: random.Random, w: World) -> tuple[Msg, str]:
    """A structural change to a GRAPH_COMPUTE: ids pointing at nothing, cycles, self-reference, repeated or
    missing tensors, a ggml_cast, a leaf turned node, a source squeezed against the buffer's end, or a graph of
    thousands of nodes."""
    p = msg.payload
    n = U32.unpack_from(p, 4)[0]
    nodes = np.frombuffer(p, "<u8", n, 8).copy()
    recs = np.frombuffer(p, RPC_TENSOR, offset=12 + 8 * n).copy()
    ids = [int(v) for v in recs["id"]]
    i = r.randrange(len(recs))
    kind = r.choice(("node", "nodes+", "no nodes", "self src", "self view", "cycle", "dangling", "dup id", "zero id",
                     "drop", "dup rec", "shuffle", "cast", "leaf op", "view of", "many", "squeeze", "squeeze",
                     "node op", "node op", "inflate", "inflate"))
    if kind == "node":
        nodes[r.randrange(len(nodes))] = r.choice((0, r.getrandbits(64), r.choice(ids), int(nodes[0])))
    elif kind == "nodes+":
        nodes = np.concatenate([nodes, np.array([r.choice(ids) for _ in range(r.randint(1, 5))], np.uint64)])
    elif kind == "no nodes":
        nodes = nodes[:0]
    elif kind in ("self src", "dangling"):
        recs[i]["src"][r.randrange(3)] = ids[i] if kind == "self src" else r.getrandbits(64) | 1
    elif kind == "self view":
        recs[i]["view_src"] = ids[i]
    elif kind == "cycle":  # a node's source (or view source) now depends on the node
        users = [j for j in range(len(recs)) if recs[j]["src"][0]]
        j = r.choice(users or [i])
        dep = ids.index(int(recs[j]["src"][0])) if recs[j]["src"][0] in ids else i
        recs[dep]["src" if r.random() < 0.7 else "view_src"].flat[0] = ids[j]
    elif kind in ("dup id", "zero id"):
        recs[i]["id"] = r.choice(ids) if kind == "dup id" else 0
    elif kind == "drop":
        recs = np.delete(recs, i)
    elif kind == "dup rec":
        recs = np.concatenate([recs, recs[i : i + 1]])
    elif kind == "shuffle":
        recs = recs[r.sample(range(len(recs)), len(recs))]
    elif kind == "cast":
        cpys = [j for j in range(len(recs)) if recs[j]["op"] == CPY_CODE] or [i]
        j = r.choice(cpys)
        recs[j]["src"][1], recs[j]["view_src"] = ids[j], 0
    elif kind == "inflate":  # a source of ~2**32 elements per dimension over a few bytes (zero strides)
        j = r.choice([j for j in range(len(recs)) if recs[j]["op"] == 0] or [i])
        for k in r.sample(range(4), r.randint(1, 4)):
            recs[j]["ne"][k], recs[j]["nb"][k] = r.choice((1 << 16, 0x7FFF_FFFF, 0xFFFF_FFFF)), 0
    elif kind == "node op":  # another op over the same sources, params words edge values: opcodes and shape rules
        j = r.choice([j for j in range(len(recs)) if recs[j]["op"]] or [i])
        recs[j]["op"] = r.randrange(1, 101)
        for k in r.sample(range(16), r.randint(0, 6)):
            recs[j]["op_params"][k] = r.choice((0, 1, 2, 3, -1, 0x3F800000, 0x7FC00000, 0x7F800000, r.getrandbits(31)))
    elif kind == "leaf op":
        recs[i]["op"], recs[i]["src"][0] = r.randrange(1, 101), r.choice(ids)
    elif kind == "squeeze":  # a source, block-typed if there is one, with a stride shrunk, at the buffer's end
        leaves = [j for j in range(len(recs)) if recs[j]["op"] == 0]
        blocks = [j for j in leaves if type_traits(GGMLType(int(recs[j]["type"]))).blck_size > 1]
        j = r.choice(blocks if blocks and r.random() < 0.7 else leaves or [i])
        buf = bytearray(recs.tobytes())
        _at_end(buf, j * TENSOR_SIZE, r, w)
        recs = np.frombuffer(bytes(buf), RPC_TENSOR).copy()
    elif kind == "view of":
        recs[i]["view_src"] = r.choice(ids)
    else:  # a big graph: one computed node repeated under fresh ids
        j = r.choice([j for j in range(len(recs)) if int(recs[j]["id"]) in set(nodes.tolist())] or [i])
        extra = np.repeat(recs[j : j + 1], r.choice((100, 1000, 3000)))
        extra["id"] = np.arange(1, len(extra) + 1, dtype=np.uint64) + np.uint64(1 << 40)
        recs, nodes = np.concatenate([recs, extra]), np.concatenate([nodes, extra["id"]])
    return graph_msg(U32.unpack_from(p, 0)[0], nodes, recs), f"graph {kind}"


MUTATORS = ((_field, 5), (_bits, 2), (_bytes, 2), (_swap, 1))


def mutate(msg: Msg, r: random.Random, w: World) -> tuple[Cmd, bytes, str]:
    """One to three stacked mutations of a valid message: (command to send, payload, what was done)."""
    done = []
    if msg.cmd is Cmd.GRAPH_COMPUTE and not msg.framed and r.random() < 0.4:
        msg, how = _graph(msg, r, w)
        done.append(how)
        if r.random() < 0.5:
            return msg.cmd, msg.payload, how
    buf = bytearray(msg.payload)
    cmd = msg.cmd
    for _ in range(1 + (r.random() < 0.3) + (r.random() < 0.1)):
        c = r.random()
        if c < 0.07 and buf:
            del buf[r.randrange(len(buf)) :]
            done.append("truncated")
        elif c < 0.12:
            buf += r.choice((r.randbytes(r.randint(1, 64)), bytes(TENSOR_SIZE)))
            done.append("extended")
        elif c < 0.15:
            cmd = Cmd(r.choice(list(Cmd)))
            done.append(f"sent as {cmd.name}")
        else:
            fn = r.choices([m for m, _ in MUTATORS], [k for _, k in MUTATORS])[0]
            done.append(fn(msg, buf, r, w))
    return cmd, bytes(buf), ", ".join(done)


@dataclass
class Finding:
    cmd: str
    mutation: str
    outcome: str
    detail: str
    payload: str


class LogRecorder(logging.Handler):
    """The server's log lines, kept: how the socket loop closed a connection, and any last-resort error."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def frame(code: int, payload: bytes, size: int | None = None) -> bytes:
    return HEADER.pack(code, len(payload) if size is None else size) + payload


HELLO_FRAME = frame(Cmd.HELLO, bytes(CONN_CAPS_SIZE))
STREAM_SHARE = 0.05
"""Part of each command's cases sent as bytes to the socket loop (header mutations: command byte, size field)."""


def framed(msg: Msg) -> Msg:
    """`msg` framed after a valid HELLO (HELLO itself: framed, then DEVICE_COUNT), its header's fields mutable."""
    if msg.cmd is Cmd.HELLO:
        return Msg(msg.cmd, HELLO_FRAME + frame(Cmd.DEVICE_COUNT, b""), [(0, 1), (1, 8), (9, 8), (33, 1), (34, 8)],
                   framed=True)
    at = len(HELLO_FRAME) + HEADER.size
    return Msg(msg.cmd, HELLO_FRAME + frame(msg.cmd, msg.payload), [(at - 9, 1), (at - 8, 8)] * 3 +
               [(at + o, k) for o, k in msg.scalars], [at + o for o in msg.tensors], framed=True)


@dataclass
class Harness:
    """Runs campaigns: `run(cmd, n)` fuzzes n mutated messages of one command; counts land in `outcomes`."""

    seed: int = 0
    devices: tuple[str, ...] = ("cpu", "numpy")
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    slowest: dict[str, float] = field(default_factory=dict)
    """Seconds of the slowest case per command."""

    def __post_init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="rpc-fuzz-")
        cache = Path(self._tmp.name)
        self.served = make_served(self.devices, cache)
        rng = np.random.default_rng(self.seed)
        blobs = [rng.integers(0, 256, n, dtype=np.uint8) for n in (1, 64, 300, 1000)]
        for blob in blobs:
            (cache / f"{fnv1a64(blob):016x}").write_bytes(blob.tobytes())
        self.templates, graph_init = graph_templates()
        self.world = World(self.served, graph_init, blobs)
        self.rng = random.Random(self.seed)
        self.log = LogRecorder()
        self._logger = logging.getLogger("pyggml_rpc.server")
        self._saved = (self._logger.level, self._logger.propagate)
        self._logger.setLevel(logging.INFO)
        self._logger.propagate = False
        self._logger.addHandler(self.log)

    def close(self) -> None:
        self.world.a.close()
        self.world.b.close()
        self._logger.removeHandler(self.log)
        self._logger.setLevel(self._saved[0])
        self._logger.propagate = self._saved[1]
        self._tmp.cleanup()

    def run(self, cmd: Cmd, n: int) -> Counter[str]:
        counts = self.outcomes.setdefault(cmd.name, Counter())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the numpy device computing garbage inputs
            for _ in range(n):
                w = self.world
                if w.age >= RESET_EVERY:
                    w.reset()
                w.age += 1
                msg = GENERATORS[cmd](w, self.rng, self.templates)
                streamed = cmd is Cmd.HELLO or self.rng.random() < STREAM_SHARE
                send, payload, how = mutate(framed(msg) if streamed else msg, self.rng, w)
                faulthandler.dump_traceback_later(HANG_S, exit=True)  # a hang ends the run, loudly
                t0 = time.perf_counter()
                try:
                    outcome, detail = self.stream(payload) if streamed else self.deliver(send, payload)
                finally:
                    faulthandler.cancel_dump_traceback_later()
                self.slowest[cmd.name] = max(self.slowest.get(cmd.name, 0.0), time.perf_counter() - t0)
                counts[outcome] += 1
                if outcome.startswith("bug") and len(self.findings) < 50:
                    self.findings.append(Finding(cmd.name, how, outcome, detail, payload[:400].hex()))
        return counts

    def deliver(self, cmd: Cmd, payload: bytes) -> tuple[str, str]:
        """One message to the fuzzed session's `handle`, judged (see the module's docstring)."""
        w = self.world
        t0 = time.perf_counter()
        detail = ""
        try:
            reply = w.a.handle(cmd, payload)
            outcome = "ok"
            want = REPLY_SIZES.get(cmd)
            if cmd is Cmd.GET_TENSOR:
                want = TWO_U64.unpack_from(payload, TENSOR_SIZE)[1]
            if (reply is None) != (cmd in NO_REPLY) or (want is not None and reply is not None
                                                         and len(reply) != want):
                outcome, detail = "bug:reply", f"{cmd.name} replied {None if reply is None else len(reply)} bytes"
        except ProtocolError:
            outcome = "refused"
        except PyGGMLError as e:
            outcome = f"error:{type(e).__name__}"
        except Exception as e:  # the whole point: nothing else may escape a handler
            outcome, detail = f"bug:{type(e).__name__}", traceback.format_exc(limit=-4) + str(e)
        elapsed = time.perf_counter() - t0
        if elapsed > SLOW_S:
            outcome, detail = "bug:slow", f"{elapsed:.1f} s"
        problems, fresh = w.verify(payload)
        if problems:
            outcome, detail = "bug:memory", "; ".join(problems)
        if fresh or outcome != "ok":
            w.reset()
        return outcome, detail

    def stream(self, data: bytes) -> tuple[str, str]:
        """Bytes to a new connection's socket loop (`serve_connection` over a socketpair), then end of stream.
        Allowed: replies, then the server closing with a log line (warning: refused; info: the client went
        away). A bug: no close within SLOW_S, a last-resort error logged, memory not given back."""
        before = self.served.allocated
        mark = len(self.log.records)
        ours, theirs = socket.socketpair()
        t = threading.Thread(target=serve_connection, args=(theirs, self.served, "stream"), daemon=True)
        t.start()
        ours.settimeout(SLOW_S)
        try:
            ours.sendall(data)
            ours.shutdown(socket.SHUT_WR)
            while ours.recv(1 << 16):
                pass
        except OSError:  # the server closed first: its end reset ours
            pass
        finally:
            ours.close()
        t.join(SLOW_S)
        lines = self.log.records[mark:]
        if t.is_alive():
            return "bug:hang", "the socket loop did not close the connection"
        if any(r.levelno >= logging.ERROR for r in lines):
            return "bug:logged", "\n".join(r.getMessage() for r in lines)
        if self.served.allocated != before:
            return "bug:memory", f"{self.served.allocated - before} bytes left allocated after the connection"
        if any(r.levelno == logging.WARNING for r in lines):
            return "stream:refused", ""
        return ("stream:eof" if lines else "stream:ok"), ""


def bugs(h: Harness) -> int:
    return sum(n for c in h.outcomes.values() for k, n in c.items() if k.startswith("bug"))
