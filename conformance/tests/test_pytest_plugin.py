"""The pytest11 plugin: `pytest --pyggml-backend=NAME` turns every case into a pytest item."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from conftest import off_by_one_percent
from helpers import cases_of

from pyggml.ops.base import Op

PARAMS = "type_a=f32,type_b=f32,ne=\\[10,5,4,3\\],nr=\\[2"


def test_items_per_case(pytester: pytest.Pytester) -> None:
    res = pytester.runpytest_inprocess("--pyggml-backend=numpy", "--pyggml-op=ADD", f"--pyggml-params={PARAMS}",
                                       "-p", "no:cacheprovider")
    res.assert_outcomes(passed=len(cases_of("ADD", PARAMS)))


def test_collected_names(pytester: pytest.Pytester) -> None:
    res = pytester.runpytest_inprocess("--pyggml-backend=numpy", "--pyggml-op=ARANGE", "--collect-only", "-q",
                                       "-p", "no:cacheprovider")
    assert "pyggml-conformance::numpy::ARANGE(type=f32,start=0,stop=3,step=1)" in res.stdout.str()


def test_failures_and_unsupported(pytester: pytest.Pytester, register: Callable[..., str]) -> None:
    wrong = register("pt_wrong", off_by_one_percent, frozenset({Op.ADD}))
    res = pytester.runpytest_inprocess(f"--pyggml-backend={wrong}", "--pyggml-op=ADD", f"--pyggml-params={PARAMS}",
                                       "-p", "no:cacheprovider")
    n = len(cases_of("ADD", PARAMS))
    res.assert_outcomes(failed=n)
    assert "NMSE" in res.stdout.str()
    lacking = register("pt_lacking", None, frozenset(), unsupported=frozenset({Op.ADD}))
    res = pytester.runpytest_inprocess(f"--pyggml-backend={lacking}", "--pyggml-op=ADD",
                                       f"--pyggml-params={PARAMS}", "-p", "no:cacheprovider", "-rs")
    res.assert_outcomes(skipped=n)
    assert "unsupported" in res.stdout.str()


def test_without_the_option_nothing_is_added(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_one():\n    pass\n")
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_unknown_backend_is_a_usage_error(pytester: pytest.Pytester) -> None:
    res = pytester.runpytest_inprocess("--pyggml-backend=nosuch", "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "no backend named 'nosuch'" in res.stderr.str()
