"""Shared helpers of the conformance tests."""

from __future__ import annotations

from functools import lru_cache

from pyggml_conformance.case import Case
from pyggml_conformance.cases import all_cases, select


@lru_cache(maxsize=1)
def suite() -> tuple[Case, ...]:
    return tuple(all_cases())


def cases_of(op: str, params: str | None = None, n: int | None = None) -> list[Case]:
    picked = select(suite(), {op}, params)
    return picked[:n] if n is not None else picked
