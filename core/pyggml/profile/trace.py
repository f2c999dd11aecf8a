"""The Chrome trace event format (what chrome://tracing and ui.perfetto.dev open): one process per backend (and
one for the scheduler), one thread per lane of it (a cpu pool thread, a device queue, "copies", "graph"), nodes as
complete events ("X", ts and dur in microseconds from the profile's start) named `OP tensor`, copies as a flow
("s" on the source backend's copy, "f" on the destination's), lanes named by metadata events ("M")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyggml.profile.collect import TraceEvent

TRACE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["traceEvents", "displayTimeUnit"],
    "properties": {
        "displayTimeUnit": {"enum": ["ms", "ns"]},
        "traceEvents": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["ph", "pid", "tid", "name"],
                "properties": {
                    "ph": {"enum": ["X", "M", "s", "f"]},
                    "pid": {"type": "integer", "minimum": 0},
                    "tid": {"type": "integer", "minimum": 0},
                    "name": {"type": "string"},
                    "cat": {"type": "string"},
                    "ts": {"type": "number", "minimum": 0},
                    "dur": {"type": "number", "minimum": 0},
                    "id": {"type": "integer"},
                    "args": {"type": "object"},
                },
                "allOf": [
                    {"if": {"properties": {"ph": {"const": "X"}}}, "then": {"required": ["ts", "dur", "cat"]}},
                    {"if": {"properties": {"ph": {"enum": ["s", "f"]}}}, "then": {"required": ["ts", "id", "cat"]}},
                    {"if": {"properties": {"ph": {"const": "M"}}},
                     "then": {"properties": {"name": {"enum": ["process_name", "thread_name", "process_sort_index"]}},
                              "required": ["args"]}},
                ],
            },
        },
    },
}
"""A JSON schema of the traces `chrome_trace` writes (the subset of the format they use)."""


def chrome_trace(events: Sequence[TraceEvent], start_ns: int) -> dict[str, Any]:
    pids: dict[str, int] = {}
    tids: dict[tuple[str, str], int] = {}
    out: list[dict[str, Any]] = []
    for e in sorted(events, key=lambda e: e.start_ns):
        pid = pids.setdefault(e.process, len(pids))
        tid = tids.setdefault((e.process, e.thread), len(tids))
        ts = max(0.0, (e.start_ns - start_ns) / 1000)
        dur = max(0.0, (e.end_ns - e.start_ns) / 1000)
        out.append({"ph": "X", "name": e.name, "cat": e.category, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
                    "args": e.args})
        if e.flow is not None:
            fid, phase = e.flow
            flow: dict[str, Any] = {"ph": phase, "name": "copy", "cat": "copy", "id": fid, "pid": pid, "tid": tid,
                                    "ts": ts}
            if phase == "f":
                flow["bp"] = "e"
            out.append(flow)
    meta: list[dict[str, Any]] = []
    for name, pid in pids.items():
        meta.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
        meta.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
    for (process, thread), tid in tids.items():
        meta.append({"ph": "M", "name": "thread_name", "pid": pids[process], "tid": tid, "args": {"name": thread}})
    return {"traceEvents": meta + out, "displayTimeUnit": "ms"}


def trace_lanes(trace: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Read back a trace: process name -> lane name -> number of node events on it (tests, tools)."""
    events = trace["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    out: dict[str, dict[str, int]] = {}
    for e in events:
        if e["ph"] == "X":
            lane = out.setdefault(procs[e["pid"]], {}).setdefault(threads[e["tid"]], 0)
            out[procs[e["pid"]]][threads[e["tid"]]] = lane + (e["cat"] == "node")
    return out


def check_trace(trace: dict[str, Any]) -> None:
    """ValueError naming the first event that breaks `TRACE_SCHEMA` (the structural check, for where the jsonschema
    package is not installed), or a flow without both ends, or an event on an unnamed lane."""
    if not isinstance(trace.get("traceEvents"), list) or trace.get("displayTimeUnit") not in ("ms", "ns"):
        raise ValueError("a trace is an object with a traceEvents list and displayTimeUnit 'ms' or 'ns'")
    named: set[tuple[str, int, int]] = set()
    flows: dict[int, set[str]] = {}
    for i, e in enumerate(trace["traceEvents"]):
        ph = e.get("ph")
        need = {"X": ("ts", "dur", "cat"), "s": ("ts", "id", "cat"), "f": ("ts", "id", "cat"), "M": ("args",)}.get(ph)
        if need is None:
            raise ValueError(f"event {i}: phase {ph!r} is not one of X, M, s, f")
        missing = [k for k in ("pid", "tid", "name", *need) if k not in e]
        if missing:
            raise ValueError(f"event {i} ({ph} {e.get('name')!r}): missing {', '.join(missing)}")
        if any(not isinstance(e[k], int) or e[k] < 0 for k in ("pid", "tid")):
            raise ValueError(f"event {i}: pid and tid must be integers >= 0")
        if any(not isinstance(e.get(k, 0), int | float) or e.get(k, 0) < 0 for k in ("ts", "dur")):
            raise ValueError(f"event {i} ({e['name']!r}): ts and dur must be numbers >= 0")
        if ph == "M":
            named.add((e["name"], e["pid"], e["tid"] if e["name"] == "thread_name" else 0))
        elif ph in ("s", "f"):
            flows.setdefault(e["id"], set()).add(ph)
    for e in trace["traceEvents"]:
        if e["ph"] == "X" and (("process_name", e["pid"], 0) not in named or
                               ("thread_name", e["pid"], e["tid"]) not in named):
            raise ValueError(f"event {e['name']!r} is on a lane without process_name and thread_name metadata")
    broken = [fid for fid, ends in flows.items() if ends != {"s", "f"}]
    if broken:
        raise ValueError(f"flows {broken} lack a start or an end")
