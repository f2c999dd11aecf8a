"""pytest plugin (entry point `pytest11`): run the conformance suite inside a backend's own test run.

    pytest --pyggml-backend=opencl                       # every case, one pytest item each
    pytest --pyggml-backend=cpu --pyggml-op=MUL_MAT,ROPE --pyggml-params 'type_a=q4_0'

Items are named `<backend>::<case name>`; a case the backend does not support is skipped with the reason, a
failing case fails with the comparison's message. Each item is also matched by `-k` under its `k_name` (pytest's
-k grammar cannot take `(`, `)`, `=` or `,`): `-k 'ADD/ and type_a:f32/'`. A backend that refuses view ops gets a
`ViewOpsWarning` (pytest's warnings summary). Without --pyggml-backend the plugin adds nothing (and imports nothing
of pyggml).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyggml_conformance.case import Case
    from pyggml_conformance.runner import Target


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pyggml-conformance", "pyggml backend conformance suite")
    group.addoption("--pyggml-backend", action="append", default=[], metavar="NAME",
                    help="run the conformance cases on this backend (device or registry name; repeatable)")
    group.addoption("--pyggml-op", action="append", default=None, metavar="OPS",
                    help="only cases of these ops (comma-separated)")
    group.addoption("--pyggml-params", default=None, metavar="REGEX",
                    help="only cases whose parameter string matches REGEX")
    group.addoption("--pyggml-case-file", default=None, metavar="PATH",
                    help="replay the cases of a case file instead of the suite's")
    group.addoption("--pyggml-seed", type=int, default=0, help="seed of the random inputs")


_NOT_K = re.compile(r"[^\w:+\-.\[\]\\/]")
"""A character pytest's -k grammar does not take inside an identifier (_pytest/mark/expression.py: word
characters, ':', '+', '-', '.', '[', ']', backslash and '/' are the ones it takes)."""


def k_name(name: str) -> str:
    """`name` spelled so that -k can select it: '=' becomes ':' and every other character -k cannot take ('(',
    ')', ',', spaces, quotes, ';', braces) becomes '/'. `numpy::ADD(type=f32,v=0)` -> `numpy::ADD/type:f32/v:0/`."""
    return _NOT_K.sub(lambda m: ":" if m.group() == "=" else "/", name)


class CaseFailed(Exception):
    """A conformance case failed; the message is the comparison's."""


class ConformanceCollector(pytest.Collector):
    """Parent of the conformance items (they are generated, not collected from files)."""

    def collect(self) -> Iterator[pytest.Item]:
        return iter(())


class ConformanceItem(pytest.Item):
    def __init__(self, *, case: Case, target: Target, reference: Target, seed: int, **kw: Any) -> None:
        super().__init__(**kw)
        self.case = case
        self.target = target
        self.reference = reference
        self.seed = seed
        self.add_marker(pytest.mark.pyggml_conformance)
        self.extra_keyword_matches.add(k_name(self.name))

    def runtest(self) -> None:
        from pyggml_conformance.runner import Status, compare_case

        res = compare_case(self.case, [self.target], self.reference, self.seed)[0]
        if res.status is Status.UNSUPPORTED:
            pytest.skip(f"unsupported: {res.error}")
        if res.status is Status.SKIP:
            pytest.skip(res.error or "skipped")
        if res.status is Status.FAIL:
            raise CaseFailed(res.error or "failed")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: str | None = None) -> str:
        if isinstance(excinfo.value, CaseFailed):
            return f"{self.target.name}: {self.case.name}\n{excinfo.value}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int | None, str]:
        return "pyggml-conformance", None, f"{self.target.name}::{self.case.name}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "pyggml_conformance: a pyggml conformance case (generated item)")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    names = [n.strip() for v in config.getoption("pyggml_backend") for n in v.split(",") if n.strip()]
    if not names:
        return
    from pyggml.errors import PyGGMLError
    from pyggml_conformance.runner import REFERENCE, open_target
    from pyggml_conformance.suite import Options, load_cases
    from pyggml_conformance.viewops import ViewOpsWarning, view_ops_warnings

    opts = Options(ops=config.getoption("pyggml_op"), params=config.getoption("pyggml_params"),
                   case_file=config.getoption("pyggml_case_file"))
    try:
        cases = load_cases(opts)
        targets = [open_target(n) for n in names]
        reference = open_target(REFERENCE)
    except PyGGMLError as e:
        raise pytest.UsageError(f"pyggml conformance: {e}") from e
    for warning in view_ops_warnings(targets).values():
        try:
            warnings.warn(ViewOpsWarning(warning), stacklevel=1)
        except ViewOpsWarning as e:  # made an error by -W: stop with the message, not an internal error
            raise pytest.UsageError(f"pyggml conformance: {e}") from e
    parent = ConformanceCollector.from_parent(session, name="pyggml-conformance", nodeid="pyggml-conformance")
    seed = config.getoption("pyggml_seed")
    for target in targets:
        for case in cases:
            items.append(ConformanceItem.from_parent(parent, name=f"{target.name}::{case.name}", case=case,
                                                     target=target, reference=reference, seed=seed))
