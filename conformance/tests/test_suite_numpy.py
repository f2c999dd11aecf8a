"""The numpy backend passes the suite against itself (a sample of every op here; the whole suite is
`pyggml conformance --backend numpy`), and the case list itself is sound."""

from __future__ import annotations

from collections import Counter

from pyggml.ops.base import OPS, Op
from pyggml_conformance.cases.common import QUANTS
from pyggml_conformance.runner import Status, compare_case, open_target, realize
from pyggml_testing.conformance import suite

# Cases per op in ggml's test-backend-ops (eval mode, ggml-org/ggml d99724f2, UNARY and GLU summed over the
# sub-ops pyggml has): the suite aims for at least as many.
GGML_CASES = {
    "FLASH_ATTN_EXT": 5158, "MUL_MAT": 1562, "OUT_PROD": 1415, "MUL_MAT_ID": 872, "SET_ROWS": 703, "CPY": 581,
    "ROPE": 466, "TOP_K": 305, "SOFT_MAX": 212, "CONCAT": 192, "UNARY": 184, "GLU": 120, "GET_ROWS": 119,
    "ARGSORT": 98, "ADD": 90, "SUB": 90, "MUL": 90, "DIV": 90, "CONT": 78, "NORM": 60, "RMS_NORM": 51,
    "L2_NORM": 30, "PAD": 28, "REPEAT": 18, "CUMSUM": 15, "SET": 12, "SUM_ROWS": 10, "DUP": 10, "SUM": 8,
    "MEAN": 7, "LEAKY_RELU": 7, "ARGMAX": 7, "SQRT": 6, "SQR": 6, "SIN": 6, "LOG": 6, "COS": 6, "CLAMP": 6,
    "ACC": 6, "SCALE": 4, "FILL": 4, "DIAG_MASK_INF": 3, "DIAG": 3, "GROUP_NORM": 2, "COUNT_EQUAL": 2,
    "ARANGE": 2,
}
SAMPLE_PER_OP = 6


def test_names_are_unique_and_every_op_has_cases() -> None:
    cases = suite()
    names = Counter(c.name for c in cases)
    assert [n for n, k in names.items() if k > 1] == []
    per_op = Counter(c.op for c in cases)
    assert [op.name for op in OPS if per_op[op] == 0] == []


def test_at_least_as_many_cases_as_ggml() -> None:
    per_op = Counter(c.op.name for c in suite())
    short = {op: (per_op[op], n) for op, n in GGML_CASES.items() if per_op[op] < n}
    assert short == {}


def test_every_quantised_type_is_covered_where_required() -> None:
    for op in ("MUL_MAT", "MUL_MAT_ID", "GET_ROWS", "CPY", "SET_ROWS"):
        params = " ".join(c.params for c in suite() if c.op.name == op)
        missing = [str(t) for t in QUANTS if f"={t}," not in params]
        assert missing == [], op


def test_names_are_stable() -> None:
    names = {c.name for c in suite()}
    assert "MUL_MAT(type_a=q4_0,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],v=0)" in names
    assert "UNARY(op=silu,type=f32,ne=[128,2,2,2],v=0,inplace=0,range=[-5,5])" in names


def test_every_case_builds_a_graph() -> None:
    """A sample of the cases: each graph has a node of the op the case is filed under (a misuse case's output may be
    another op that consumes it)."""
    for c in suite()[::7]:
        r = realize(c)
        assert c.op is Op.NONE or any(n.op is c.op for n in r.graph.nodes), c.name


def test_numpy_passes_against_itself_on_a_sample_of_every_op() -> None:
    ref, tgt = open_target("numpy"), open_target("numpy")
    seen: Counter[Op] = Counter()
    bad = []
    for c in suite():
        if seen[c.op] >= SAMPLE_PER_OP:
            continue
        seen[c.op] += 1
        r = compare_case(c, [tgt], ref)[0]
        if r.status is not Status.PASS:
            bad.append((r.name, r.status.value, r.error))
    assert bad == []
    assert set(seen) == set(OPS)


def test_numpy_passes_quantised_cases() -> None:
    ref = open_target("numpy")
    picked = [c for c in suite() if c.op.name in ("MUL_MAT", "GET_ROWS", "CPY", "SET_ROWS", "MUL_MAT_ID")
              and any(f"={t}," in c.params for t in QUANTS)][::97]
    assert len(picked) > 10
    bad = [(r.name, r.error) for c in picked for r in compare_case(c, [ref], ref) if r.status is not Status.PASS]
    assert bad == []
