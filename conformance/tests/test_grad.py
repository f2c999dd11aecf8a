"""Gradient mode: every grad case passes on the numpy backend, every op with a gradient rule has a case, a wrong
rule is caught, and the CLI runs the mode."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest

from pyggml import ops
from pyggml.autodiff import differentiable
from pyggml.autodiff.rules import RULES, UNARY_RULES, Backprop, Rule
from pyggml.errors import PyGGMLError
from pyggml.ops.base import Op
from pyggml.ops.elementwise import UnaryOp
from pyggml.tensor import Tensor
from pyggml_conformance.cli import main
from pyggml_conformance.grad import GradCase, grad_case, mean_abs_asymm
from pyggml_conformance.grad_cases import grad_cases
from pyggml_conformance.runner import Status, Target, open_target

ZERO_GRADIENT = {"UNARY FLOOR", "UNARY CEIL", "UNARY ROUND", "UNARY TRUNC"}
"""Rules that only say 'no gradient' and whose finite differences would jump: not worth a case."""


@pytest.fixture(scope="module")
def numpy_target() -> Target:
    return open_target("numpy")


def test_every_rule_has_a_case() -> None:
    covered = {c.op.name if c.sub is None else f"{c.op.name} {c.sub}" for c in grad_cases()}
    missing = set(differentiable()) - covered - ZERO_GRADIENT
    assert missing == set()
    names = [c.name for c in grad_cases()]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_every_grad_case_passes(numpy_target: Target, backend: str) -> None:
    """The numpy backend against itself, and the cpu plugin (when installed: its backward kernels included)."""
    try:
        target = open_target(backend)
    except PyGGMLError as e:
        pytest.skip(f"no {backend} backend here: {e}")
    bad = [(r.name, r.status.value, r.error) for c in grad_cases() for r in grad_case(c, [target], numpy_target)
           if r.status is not Status.PASS]
    assert bad == []


@pytest.fixture
def wrong_sin_rule() -> Iterator[None]:
    """SIN's rule replaced by one with the wrong sign (grad * -cos x)."""
    saved = RULES[Op.SIN]

    def wrong(node: Tensor, g: Tensor, bp: Backprop) -> None:
        x = node.src[0]
        assert x is not None
        bp.sub(0, ops.mul(g, ops.cos(x)))

    RULES[Op.SIN] = Rule(wrong)
    try:
        yield
    finally:
        RULES[Op.SIN] = saved


def test_a_wrong_rule_fails(numpy_target: Target, wrong_sin_rule: None) -> None:
    case = next(c for c in grad_cases() if c.op.name == "SIN")
    (r,) = grad_case(case, [numpy_target], numpy_target)
    assert r.status is Status.FAIL and "mean asymmetric error" in (r.error or "")


def test_a_wrong_unary_rule_fails(numpy_target: Target) -> None:
    case = next(c for c in grad_cases() if c.sub == "TANH")
    saved = UNARY_RULES[UnaryOp.TANH]
    UNARY_RULES[UnaryOp.TANH] = Rule(lambda node, g, bp: bp.add(0, g))  # forgot the 1 - tanh^2 factor
    try:
        (r,) = grad_case(case, [numpy_target], numpy_target)
    finally:
        UNARY_RULES[UnaryOp.TANH] = saved
    assert r.status is Status.FAIL


def test_mean_abs_asymm() -> None:
    a = np.array([1.0, 2.0, 0.0])
    assert mean_abs_asymm(a, a) == 0.0
    assert mean_abs_asymm(np.array([1.0]), np.array([3.0])) == pytest.approx(0.5)
    # only elements whose numeric value is an expected one (kinks elsewhere)
    assert mean_abs_asymm(np.array([1.0, 0.5]), np.array([1.0, 9.0]), expect=(1.0,)) == 0.0


def test_tighter_threshold_is_honoured(numpy_target: Target) -> None:
    case = next(c for c in grad_cases() if c.op.name == "EXP" or c.sub == "EXP")
    assert isinstance(case, GradCase)
    (r,) = grad_case(replace(case, max_err=1e-15, precise=False), [numpy_target], numpy_target)
    assert r.status is Status.FAIL


def test_cli_grad_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--mode", "grad", "--backend", "numpy", "--op", "MUL_MAT,SOFT_MAX", "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert '"MUL_MAT' in out and '"SOFT_MAX' in out
    assert main(["--mode", "list", "--op", "ROPE"]) == 0
