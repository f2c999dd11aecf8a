"""docs/ops.md is the generated support matrix, and it is current for the backends it lists (the ones CI
runs); regenerate it with `make docs-ops` (`pyggml conformance --mode support --format markdown`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyggml.backend.protocol import DeviceType
from pyggml_conformance.runner import available_names, open_target, support_case
from pyggml_conformance.support import build_matrix, cell, parse, render
from pyggml_testing.conformance import suite

DOC = Path(__file__).resolve().parents[2] / "docs" / "ops.md"


def test_cells() -> None:
    assert [cell(3, 3), cell(0, 3), cell(1, 3), cell(0, 0)] == ["all", "no", "some (1/3)", "n/a"]


def test_render_parse_round_trip() -> None:
    t = open_target("numpy")
    results = [r for c in suite()[::50] for r in support_case(c, [t])]
    m = build_matrix(results, [t])
    again = parse(render(m))
    assert again.devices == m.devices and again.rows == m.rows


def test_docs_ops_is_current() -> None:
    committed = parse(DOC.read_text(encoding="utf-8"))
    here = set(available_names())
    targets = []
    for name, desc in committed.devices.items():
        if name not in here:
            continue
        t = open_target(name)
        if t.device.type is not DeviceType.CPU and t.description != desc:
            continue  # another GPU than the one the matrix was made on: its support may differ
        targets.append(t)
    if not targets:
        pytest.skip(f"none of the backends of docs/ops.md ({', '.join(committed.devices)}) is installed here")
    fresh = build_matrix([r for c in suite() for r in support_case(c, targets)], targets)
    stale = []
    assert set(fresh.rows) == set(committed.rows), "the op table changed: run `make docs-ops`"
    for op, (n, cells) in fresh.rows.items():
        n_doc, doc_cells = committed.rows[op]
        if n != n_doc:
            stale.append(f"{op}: {n_doc} cases in the doc, {n} in the suite")
        stale += [f"{op} on {b}: doc says {doc_cells[b]!r}, now {cells[b]!r}"
                  for b in cells if cells[b] != doc_cells[b]]
    assert stale == [], "docs/ops.md is stale (run `make docs-ops`):\n" + "\n".join(stale)
