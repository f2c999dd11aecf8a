"""The suite's cases, one module per op family. Each module has `eval_cases()` (small sizes, for test and support
modes) and `perf_cases()` (realistic sizes, for perf mode)."""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Sequence

from pyggml.errors import PyGGMLError
from pyggml.ops.base import OPS
from pyggml_conformance.case import Case

FAMILIES = (
    "binary",
    "unary",
    "glu",
    "moe",
    "scalar",
    "norm",
    "matmul",
    "matmul_id",
    "copy",
    "rows",
    "layout",
    "reduce",
    "sort",
    "softmax",
    "rope",
    "attention",
    "conv",
    "spatial",
    "deepseek",
    "seq",
    "views",
    "custom",
    "backward",
    "back2",
    "edge",
    "misuse",
    "lifetime",
    "int64",
)


class UnknownOpError(PyGGMLError):
    """An --op name matches no op of the table (nor a UNARY / GLU sub-op)."""


def all_cases(mode: str = "test") -> list[Case]:
    """Every case of the suite: eval cases for test/support/list, perf cases for perf."""
    return list(_all_cases(mode == "perf"))


@functools.cache
def _all_cases(perf: bool) -> tuple[Case, ...]:
    out: list[Case] = []
    for fam in FAMILIES:
        mod = importlib.import_module(f"pyggml_conformance.cases.{fam}")
        out.extend(mod.perf_cases() if perf else mod.eval_cases())
    return tuple(out)


def op_names() -> list[str]:
    """Names --op accepts: the core op table's, then UNARY and GLU sub-ops."""
    from pyggml.ops.elementwise import GluOp, UnaryOp

    return [op.name for op in OPS] + [u.name for u in UnaryOp] + [g.name for g in GluOp]


def parse_ops(spec: Sequence[str] | str | None) -> set[str] | None:
    """Upper-cased op names from 'A,B' strings; an unknown name raises UnknownOpError listing the known ones."""
    if spec is None:
        return None
    items = [spec] if isinstance(spec, str) else list(spec)
    names = {p.strip().upper() for s in items for p in s.split(",") if p.strip()}
    if not names:
        return None
    known = op_names()
    bad = sorted(n for n in names if n not in known)
    if bad:
        raise UnknownOpError(f"unknown op name(s) {', '.join(bad)}; known: {', '.join(known)}")
    return names


def select(cases: Sequence[Case], ops: set[str] | None = None, params: str | None = None) -> list[Case]:
    """Cases whose op (or sub-op) is in `ops` and whose params string matches the regex `params`."""
    rx = re.compile(params) if params else None
    return [c for c in cases
            if (ops is None or c.op.name in ops or (c.sub is not None and c.sub in ops))
            and (rx is None or rx.search(c.params))]
