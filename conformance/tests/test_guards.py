"""The suite catches broken backends: out-of-bounds writes (guards), wrong numbers, NaN, unwritten results,
writes into inputs, crashes; and reports unsupported ops as unsupported, not failed."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from pyggml.ops.base import Op
from pyggml_conformance.cli import main
from pyggml_conformance.runner import Status, compare_case, open_target
from pyggml_conformance.suite import Options, run
from pyggml_testing.conformance import (
    cases_of,
    crash,
    make_nan,
    nothing,
    off_by_one_percent,
    scaled,
    scribble_on_input,
    write_before_start,
    write_past_end,
)

ADD = frozenset({Op.ADD})


def _results(name: str, op: str = "ADD", params: str | None = "v=0,inplace=0", n: int = 4) -> list:
    ref, tgt = open_target("numpy"), open_target(name)
    return [compare_case(c, [tgt], ref)[0] for c in cases_of(op, params, n)]


def test_a_faithful_wrapper_passes(register: Callable[..., str]) -> None:
    name = register("faithful", None, ADD)
    assert all(r.status is Status.PASS for r in _results(name, n=8))


def test_guard_catches_a_write_past_the_end(register: Callable[..., str]) -> None:
    name = register("oob_after", write_past_end, ADD)
    for r in _results(name):
        assert r.status is Status.FAIL
        assert "guard after" in (r.error or "") and "out-of-bounds" in (r.error or "")


def test_guard_catches_a_write_before_the_start(register: Callable[..., str]) -> None:
    name = register("oob_before", write_before_start, ADD)
    for r in _results(name):
        assert r.status is Status.FAIL and "out-of-bounds" in (r.error or "")


def test_in_place_result_writing_past_its_view_is_caught(register: Callable[..., str]) -> None:
    name = register("oob_inplace", write_past_end, frozenset({Op.SCALE}))
    results = _results(name, "SCALE", "inplace=1", 3)
    assert results and all(r.status is Status.FAIL for r in results)


def test_a_wrong_kernel_fails_its_case(register: Callable[..., str]) -> None:
    name = register("wrong", off_by_one_percent, ADD)
    for r in _results(name):
        assert r.status is Status.FAIL
        assert r.nmse is not None and r.nmse > r.threshold
        assert "NMSE" in (r.error or "")


def test_a_wrong_matmul_fails_despite_the_loose_threshold(register: Callable[..., str]) -> None:
    name = register("wrong_mm", scaled(1.05), frozenset({Op.MUL_MAT}))
    for r in _results(name, "MUL_MAT", "type_a=f32,type_b=f32", 3):
        assert r.status is Status.FAIL and r.threshold == pytest.approx(5e-4)


@pytest.mark.parametrize(("bug", "text"), [
    (make_nan, "NaN"),
    (scribble_on_input, "an input no node writes"),
])
def test_nan_and_input_corruption_fail(register: Callable[..., str], bug: Callable, text: str) -> None:
    name = register(f"bug_{bug.__name__}", bug, ADD)
    for r in _results(name, n=2):
        assert r.status is Status.FAIL and text in (r.error or "")


def test_a_result_never_written_fails(register: Callable[..., str]) -> None:
    name = register("lazy", nothing, ADD, replace=True)
    for r in _results(name, n=2):
        assert r.status is Status.FAIL and "NaN" in (r.error or "")


def test_a_crash_fails_the_case_and_the_run_goes_on(register: Callable[..., str]) -> None:
    name = register("crashy", crash, ADD)
    cases = cases_of("ADD", "v=0", 3) + cases_of("SCALE", None, 2)
    got: list = []
    run(cases, [open_target(name)], Options(), got.append)
    assert [r.status for r in got] == [Status.FAIL] * 3 + [Status.PASS] * 2
    assert all("RuntimeError: kernel exploded" in (r.error or "") for r in got[:3])


def test_unsupported_is_reported_not_failed(register: Callable[..., str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    name = register("no_add", None, frozenset(), unsupported=ADD)
    rc = main(["--backend", name, "--op", "ADD", "--params", "ne=\\[10,5,4,3\\],nr=\\[1,1,1,1\\]", "--format",
               "json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert doc["results"] and {r["status"] for r in doc["results"]} == {"unsupported"}
    assert "does not support" in doc["results"][0]["error"]


def test_failures_set_the_exit_status(register: Callable[..., str], capsys: pytest.CaptureFixture[str]) -> None:
    name = register("wrong_cli", off_by_one_percent, ADD)
    rc = main(["--backend", name, "--op", "ADD", "--params", "type_a=f32,type_b=f32,ne=\\[10,5,4,3\\],nr=\\[2"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "0/11 cases passed (0 unsupported, 0 skipped)" in out and "Failing cases (11)" in out
    assert "ADD(type_a=f32,type_b=f32,ne=[10,5,4,3],nr=[2,1,1,1],v=0,inplace=0)" in out
