"""The edge-case, lifetime and concurrency families (issue 19): they pass on the numpy reference, and each kind of
check fails a backend that misbehaves (the negative controls)."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.ops.base import Op
from pyggml_conformance.case import Case, Compare
from pyggml_conformance.compare import check
from pyggml_conformance.inputs import integers
from pyggml_conformance.runner import Status, compare_case, open_target
from pyggml_testing.conformance import suite


def _family(tag: str) -> list[Case]:
    return [c for c in suite() if c.params.startswith(tag)]


def test_the_families_are_in_the_suite() -> None:
    assert len(_family("edge=special")) > 200 and len(_family("edge=bad_id")) >= 30
    assert {c.op for c in _family("edge=long")} >= {Op.SUM, Op.SUM_ROWS, Op.MEAN, Op.ARGMAX, Op.COUNT_EQUAL}
    assert {c.params for c in _family("misuse=")} == {
        "misuse=use_after_free", "misuse=free_during_compute", "misuse=two_threads_one_backend",
        "misuse=free_during_compute_loop", "misuse=reuse_freed_memory", "misuse=alloc_free_cycles",
        "misuse=two_threads_one_buffer", "misuse=backend_use_after_free", "misuse=free_backend_during_compute",
        "misuse=two_threads_one_scheduler"}
    assert {c.params for c in _family("edge=int64")} == {f"edge=int64,check={k}" for k in ("refused", "largest",
                                                                                         "computed")}


@pytest.mark.parametrize("tag", ["edge=special", "edge=bad_id", "edge=size", "misuse=", "edge=int64"])
def test_families_pass_on_the_reference(tag: str) -> None:
    numpy = open_target("numpy")
    bad = [(r.name, r.error) for c in _family(tag)[::3] for r in compare_case(c, [numpy], numpy)
           if r.status is not Status.PASS]
    assert bad == []


def test_an_index_case_that_computes_fails() -> None:
    """expect_error: a graph whose ids are all in range computes, so the case fails (for the reference too)."""
    def build(b):  # type: ignore[no-untyped-def]
        return ops.get_rows(b.input("f32", (8, 5)), b.input("i32", (3,), integers(0, 5)))

    numpy = open_target("numpy")
    (r,) = compare_case(Case(Op.GET_ROWS, "control=1", build, expect_error=True), [numpy], numpy)
    assert r.status is Status.FAIL and "computed without an error" in (r.error or "")


def test_nan_ok_matches_nan_positions() -> None:
    ref = np.array([1.0, np.nan, np.inf])
    assert check(Compare.NMSE, ref, ref.copy(), 1e-7, nan_ok=True).ok
    assert not check(Compare.NMSE, ref, ref.copy(), 1e-7).ok  # without nan_ok any NaN fails
    moved = np.array([np.nan, 1.0, np.inf])
    v = check(Compare.NMSE, ref, moved, 1e-7, nan_ok=True)
    assert not v.ok and "NaN where the reference has none" in (v.error or "")
    assert not check(Compare.NMSE, ref, np.array([1.0, np.nan, -np.inf]), 1e-7, nan_ok=True).ok


def test_a_failing_scenario_is_reported() -> None:
    numpy = open_target("numpy")
    case = Case(Op.MUL_MAT, "control=2", lambda b: ops.mul_mat(b.input("f32", (4, 4)), b.input("f32", (4, 2))),
                scenario=lambda dev: f"{dev.name} misbehaved")
    (r,) = compare_case(case, [numpy], numpy)
    assert r.status is Status.FAIL and r.error == "numpy misbehaved"
