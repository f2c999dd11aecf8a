"""Case files: the ops of a real graph (op, result type, shape, strides, params, in place, and each src's type,
shape and strides), written as JSON lines, and replayed as conformance cases.

    from pyggml_conformance.casefile import write_case_file
    write_case_file(graph, "llama-decode.cases.jsonl")      # every compute node, identical ones once
    $ pyggml conformance --case-file llama-decode.cases.jsonl --backend cpu

A replayed src is a fresh input with the recorded layout (a strided view into a flat leaf, permuted back when its
strides are not increasing); inputs whose values matter (ids, positions, masks, sort keys) get in-range values
(`inputs.domain_init`). Srcs that shared memory in the model graph (views of one cache) are independent here.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any

from pyggml import ops
from pyggml.errors import PyGGMLError
from pyggml.graph import Graph
from pyggml.ops.base import OPS, VIEW_OPS, Op, ne4, record
from pyggml.tensor import Tensor, contiguous_strides
from pyggml.types import parse_type
from pyggml_conformance.case import BuildFn, Case, CaseBuilder, fmt_params
from pyggml_conformance.inputs import domain_init

FORMAT = "pyggml-conformance-cases"
VERSION = 1
_BUILT_ELSEWHERE = frozenset({Op.CPY, Op.SET_ROWS, Op.ARANGE})
"""Ops whose result is not made by `record` (views of a destination, or no srcs)."""


class CaseFileError(PyGGMLError, ValueError):
    """A case file is unreadable, of another format, or describes a node that cannot be rebuilt."""


# ---- params <-> JSON -------------------------------------------------------------------------------------------


def _to_json(v: object) -> object:
    if isinstance(v, Enum):
        return v.name
    if isinstance(v, tuple | list):
        return [_to_json(x) for x in v]
    return v


def params_to_json(p: object) -> dict[str, object] | None:
    if p is None:
        return None
    if not dataclasses.is_dataclass(p) or isinstance(p, type):
        raise CaseFileError(f"op params {p!r} are not a dataclass")
    return {f.name: _to_json(getattr(p, f.name)) for f in dataclasses.fields(p)}


def _from_json(hint: object, v: object) -> object:
    origin = typing.get_origin(hint)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint[str(v)]
    if origin is tuple and isinstance(v, list):
        return tuple(v)
    return v


def params_from_json(op: Op, d: dict[str, object] | None) -> object:
    cls = OPS[op].params
    if d is None or cls is None:
        return None
    hints = typing.get_type_hints(cls)
    try:
        return cls(**{k: _from_json(hints.get(k), v) for k, v in d.items()})
    except (TypeError, KeyError) as e:
        raise CaseFileError(f"{op.name}: params {d} do not fit {cls.__name__}: {e}") from e


# ---- export -----------------------------------------------------------------------------------------------------


def _tensor_json(t: Tensor) -> dict[str, object]:
    return {"type": str(t.type), "ne": list(t.ne), "nb": list(t.nb)}


def node_record(node: Tensor) -> dict[str, object]:
    inplace = node.view_src is not None and node.op not in _BUILT_ELSEWHERE
    return {
        "op": node.op.name,
        "name": node.name,
        **_tensor_json(node),
        "params": params_to_json(node.params),
        "inplace": inplace,
        "srcs": [None if s is None else _tensor_json(s) for s in node.src],
    }


def export_graph(graph: Graph) -> list[dict[str, object]]:
    """One record per compute node of `graph` (views and leafs are not cases), identical nodes once, with the
    number of nodes each stands for in 'count'."""
    out: dict[str, dict[str, object]] = {}
    for node in graph.nodes:
        if node.op is Op.NONE or node.op in VIEW_OPS:
            continue
        rec = node_record(node)
        key = json.dumps({k: v for k, v in rec.items() if k != "name"}, sort_keys=True)
        if key in out:
            out[key]["count"] = int(out[key]["count"]) + 1  # type: ignore[call-overload]
        else:
            out[key] = {**rec, "count": 1}
    return list(out.values())


def write_case_file(graph: Graph, path: str | Path, source: str = "") -> int:
    """Write `graph`'s ops as a case file (JSON lines); returns the number of cases written."""
    records = export_graph(graph)
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps({"format": FORMAT, "version": VERSION, "source": source}) + "\n")
        for r in records:
            f.write(json.dumps(r) + "\n")
    return len(records)


# ---- replay -----------------------------------------------------------------------------------------------------


def _src(b: CaseBuilder, d: dict[str, Any], op: Op, slot: int, done: Sequence[Tensor | None]) -> Tensor:
    t = parse_type(d["type"])
    ne = ne4(*(int(x) for x in d["ne"]))
    nb = ne4(*(int(x) for x in d["nb"]))
    init = domain_init(op, slot, done, t)
    if nb == contiguous_strides(t, ne) or 0 in ne:
        return b.input(t, ne, init)
    order = sorted(range(4), key=lambda i: (nb[i], i))
    ne_s = ne4(*(ne[i] for i in order))
    nb_s = ne4(*(nb[i] for i in order))
    tr = t.traits
    if nb_s[0] != tr.type_size:
        return b.input(t, ne, init)  # elements not adjacent in any dim: replayed contiguous
    span = Tensor(t, ne_s, nb_s, op=Op.NONE).nbytes()
    n_blocks = -(-span // tr.type_size)
    flat = b.input(t, (n_blocks * tr.blck_size,), init)
    view = ops.view(flat, ne_s, nb_s[1:], 0)
    if tuple(order) == (0, 1, 2, 3):
        return view
    axes = [0, 0, 0, 0]
    for pos, dim in enumerate(order):
        axes[pos] = dim
    return ops.permute(view, axes[0], axes[1], axes[2], axes[3])


def _replay_build(rec: dict[str, Any], op: Op) -> BuildFn:
    params = params_from_json(op, rec.get("params"))

    def build(b: CaseBuilder) -> Tensor:
        srcs: list[Tensor | None] = []
        for slot, d in enumerate(rec.get("srcs") or []):
            srcs.append(None if d is None else _src(b, d, op, slot, srcs))
        if op is Op.CPY:
            return ops.cpy(_need(srcs, 0, op), _need(srcs, 1, op))
        if op is Op.SET_ROWS:
            return ops.set_rows(_need(srcs, 0, op), _need(srcs, 1, op), _need(srcs, 2, op))
        if op is Op.ARANGE:
            p = params
            return ops.arange(b.ctx, p.start, p.stop, p.step)  # type: ignore[attr-defined]
        return record(op, tuple(srcs), params, inplace=bool(rec.get("inplace")))

    return build


def _need(srcs: Sequence[Tensor | None], i: int, op: Op) -> Tensor:
    t = srcs[i] if i < len(srcs) else None
    if t is None:
        raise CaseFileError(f"{op.name}: src {i} is missing in the case file")
    return t


def _sig(d: dict[str, Any] | None) -> str:
    if d is None:
        return "none"
    t = parse_type(str(d["type"]))
    ne = ne4(*(int(x) for x in d["ne"]))
    nb = d.get("nb")
    strides = f"/nb={_list(nb)}" if nb and tuple(nb) != contiguous_strides(t, ne) else ""
    return f"{t}{_list(ne)}{strides}"


def _list(v: Sequence[object]) -> str:
    return "[" + ",".join(str(x) for x in v) + "]"


def case_from_record(rec: dict[str, Any], source: str) -> Case:
    try:
        op = Op[str(rec["op"])]
    except KeyError:
        raise CaseFileError(f"{source}: unknown op {rec.get('op')!r}") from None
    if op not in OPS or op in VIEW_OPS:
        raise CaseFileError(f"{source}: op {op.name} is not a computing op of the op table")
    parse_type(str(rec.get("type", "f32")))
    srcs = "[" + ";".join(_sig(d) for d in rec.get("srcs") or []) + "]"
    p = json.dumps(rec.get("params"), separators=(",", ":"), sort_keys=True) if rec.get("params") else "{}"
    params = fmt_params(node=rec.get("name", "?"), type=str(rec.get("type")), ne=rec.get("ne"), srcs=srcs,
                        params=p, inplace=bool(rec.get("inplace")))
    return Case(op, params, _replay_build(rec, op), source=source)


def load_case_file(path: str | Path) -> list[Case]:
    """The cases of a case file written by `write_case_file`."""
    p = Path(path)
    with open(p, encoding="utf-8") as f:
        lines = [ln for ln in f.read().splitlines() if ln.strip()]
    if not lines:
        raise CaseFileError(f"{p}: empty case file")
    try:
        head = json.loads(lines[0])
    except json.JSONDecodeError as e:
        raise CaseFileError(f"{p}:1: not JSON: {e}") from e
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise CaseFileError(f"{p}: not a {FORMAT} file (first line {lines[0][:80]!r})")
    if head.get("version") != VERSION:
        raise CaseFileError(f"{p}: case file version {head.get('version')}, this suite reads {VERSION}")
    cases: list[Case] = []
    for i, line in enumerate(lines[1:], start=2):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise CaseFileError(f"{p}:{i}: not JSON: {e}") from e
        cases.append(case_from_record(rec, f"{p.name}:{i}"))
    return cases
