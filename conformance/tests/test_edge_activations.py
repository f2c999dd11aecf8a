"""The edge family's activation cases (issue 19): every UNARY and GLU activation reads infinities, NaN and huge
values in F32 and F16, and the limits hold on the reference and the cpu backend (GELU(-inf) = 0, TANH(+-inf)
exactly +-1). OpenCL0 gave GELU(-1e30) = -3e22 and TANH(inf) = 0.99999994; the suite runs these cases on every
backend (make conformance-all)."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml.ops.base import Op
from pyggml.ops.elementwise import GluOp, UnaryOp
from pyggml.reference.kernels.unary import UNARY
from pyggml_conformance.case import Case
from pyggml_conformance.cases.edge import eval_cases
from pyggml_conformance.runner import Status, compare_case, open_target


def _activation_cases() -> list[Case]:
    return [c for c in eval_cases() if c.op in (Op.UNARY, Op.GLU) and c.params.startswith("edge=special")]


def test_every_activation_meets_every_value_group() -> None:
    cases = _activation_cases()
    assert {c.sub for c in cases if c.op is Op.UNARY} == {u.name for u in UnaryOp}
    assert {c.sub for c in cases if c.op is Op.GLU} == {g.name for g in GluOp}
    assert {c.params.rsplit("values=", 1)[1] for c in cases} == {"inf", "neg", "pos", "saturated"}


def test_the_reference_gives_the_limits() -> None:
    x = np.array([-np.inf, np.inf, np.nan])
    gated = (UnaryOp.GELU, UnaryOp.GELU_ERF, UnaryOp.GELU_QUICK, UnaryOp.SILU, UnaryOp.HARDSWISH)
    with np.errstate(all="ignore"):
        for u in gated:
            y = UNARY[u](x)
            assert y[0] == 0.0 and y[1] == np.inf and np.isnan(y[2]), u
        assert list(UNARY[UnaryOp.TANH](x[:2])) == [-1.0, 1.0]


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_the_activation_cases_pass(backend: str) -> None:
    try:
        target = open_target(backend)
    except Exception as e:  # no such backend here
        pytest.skip(f"no {backend} backend: {e}")
    numpy = open_target("numpy")
    bad = [(r.name, r.error) for c in _activation_cases() for r in compare_case(c, [target], numpy)
           if r.status is not Status.PASS]
    assert bad == []
