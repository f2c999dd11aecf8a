"""A fuzz test of the public op API (issue 19): pyggml_testing.fuzz_ops's random recipes (ops over random shapes,
zero-size included, types, views with random strides and offsets, permutes, in-place results, random ids). Every
outcome must be a PyGGMLError (at record time or at compute) or the numpy reference's result; never a crash, a hang
or another exception. A backend may not compute a graph the reference refuses.

PYGGML_FUZZ_EXAMPLES sets the number of examples (default 200); benchmarks/fuzz_soak.py is the long run."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

from pyggml.errors import PyGGMLError
from pyggml_conformance.runner import open_target
from pyggml_testing.fuzz_ops import Recipe, outcome, recipes

EXAMPLES = int(os.environ.get("PYGGML_FUZZ_EXAMPLES", "200"))


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_random_ops_give_the_reference_result_or_a_pyggml_error(backend: str) -> None:
    try:
        target = open_target(backend)
    except PyGGMLError:
        pytest.skip(f"no {backend} backend")
    reference = open_target("numpy")

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(recipes())
    def one(r: Recipe) -> None:
        outcome(r, target, reference)

    one()
