"""The pytest11 plugin: `pytest --pyggml-backend=NAME` turns every case into a pytest item."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pyggml.ops.base import Op
from pyggml_testing.conformance import cases_of, off_by_one_percent

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


def test_k_selects_a_case_by_its_parameters(pytester: pytest.Pytester) -> None:
    """-k cannot take '=', '(' or ',' (issue 24); each item is also matched under its k_name."""
    from pyggml_conformance.pytest_plugin import k_name

    case = cases_of("ADD", PARAMS)[0]
    res = pytester.runpytest_inprocess("--pyggml-backend=numpy", "--pyggml-op=ADD,MUL", "-k", k_name(case.name),
                                       "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    some = pytester.runpytest_inprocess("--pyggml-backend=numpy", "--pyggml-op=ADD,MUL", "-p", "no:cacheprovider",
                                        "-k", "ADD/ and type_b:f32/ and ne:[10/5/4/3]/ and not v:1/")
    n = len([c for c in cases_of("ADD", "type_b=f32,ne=\\[10,5,4,3\\],") if ",v=1," not in c.name])
    assert n > 1
    some.assert_outcomes(passed=n)


def test_a_backend_refusing_view_ops_is_warned_about(pytester: pytest.Pytester,
                                                     register: Callable[..., str]) -> None:
    views = frozenset({Op.VIEW, Op.RESHAPE, Op.PERMUTE, Op.TRANSPOSE})
    name = register("pt_noviews", None, frozenset(), unsupported=views)
    res = pytester.runpytest_inprocess(f"--pyggml-backend={name}", "--pyggml-op=ADD", f"--pyggml-params={PARAMS}",
                                       "-p", "no:cacheprovider")
    out = res.stdout.str()
    assert "ViewOpsWarning" in out and "pt_noviews refuses VIEW, RESHAPE, PERMUTE, TRANSPOSE" in out
    quiet = pytester.runpytest_inprocess("--pyggml-backend=numpy", "--pyggml-op=ARANGE", "-p", "no:cacheprovider")
    assert "ViewOpsWarning" not in quiet.stdout.str()
