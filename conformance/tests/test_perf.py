"""Perf mode: the op repeated in one graph, timed, with FLOP or byte rates."""

from __future__ import annotations

import pytest

from pyggml_conformance import perf
from pyggml_conformance.runner import Status, open_target, realize
from pyggml_testing.conformance import cases_of


def test_matmul_reports_gflops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(perf, "TARGET_FLOPS", 1e6)
    case = cases_of("MUL_MAT", "type_a=f32,type_b=f32,m=16,n=16,k=256,bs=\\[1,1\\],nr=\\[1,1\\],per=\\[0,1,2,3\\]")[0]
    r = perf.perf_case(case, open_target("numpy"), seconds=0.02)
    assert r.status is Status.PASS and r.gflops is not None and r.gflops > 0 and r.gbps is None
    assert r.runs is not None and r.runs >= 1 and r.time_us is not None and r.time_us > 0


def test_flop_and_byte_counts() -> None:
    case = cases_of("MUL_MAT", "type_a=f32,type_b=f32,m=16,n=16,k=256,bs=\\[1,1\\],nr=\\[1,1\\],per=\\[0,1,2,3\\]")[0]
    node = realize(case).outputs[0]
    assert perf.op_flops(node) == 2 * 16 * 16 * 256
    add = realize(cases_of("ADD", "type_a=f32,type_b=f32,ne=\\[10,5,4,3\\],nr=\\[1,1,1,1\\],v=0")[0]).outputs[0]
    assert perf.op_flops(add) == 0 and perf.op_bytes(add) == 3 * 600 * 4


def test_unsupported_in_perf_mode(register) -> None:  # type: ignore[no-untyped-def]
    from pyggml.ops.base import Op

    name = register("perf_no_scale", None, frozenset(), unsupported=frozenset({Op.SCALE}))
    r = perf.perf_case(cases_of("SCALE", None, 1)[0], open_target(name), seconds=0.01)
    assert r.status is Status.UNSUPPORTED


def test_every_perf_case_builds() -> None:
    from pyggml_conformance.cases import all_cases

    cases = all_cases("perf")
    assert len({c.name for c in cases}) == len(cases) > 100
    for c in cases:
        assert realize(c).outputs[0].op is c.op, c.name
