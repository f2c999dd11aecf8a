"""The `register` fixture: a backend with a deliberate bug (pyggml_testing.conformance), registered in-process
through `pyggml.backend.hub().register(reg)` for one test, so the suite can be shown to catch each kind of
failure."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from pyggml.backend import hub
from pyggml.ops.base import Op
from pyggml_testing.conformance import Bug, BuggyRegistry

pytest_plugins = ["pytester"]


@pytest.fixture
def register() -> Iterator[Callable[..., str]]:
    """register(name, bug, ops, unsupported=frozenset(), replace=False) -> name; unregistered after the test."""
    names: list[str] = []

    def add(name: str, bug: Bug | None, ops: frozenset[Op], unsupported: frozenset[Op] = frozenset(),
            replace: bool = False) -> str:
        hub().register(BuggyRegistry(name, bug, ops, unsupported, replace))
        names.append(name)
        return name

    yield add
    for n in names:
        hub().unregister(n)
