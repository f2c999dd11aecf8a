"""The sequence-model ops on OpenCL (seq.cl, shared with CUDA) beyond the conformance suite: long sequences,
larger heads and every src strided (pyggml_testing.seq_cases) against the numpy reference, and the heads and state
sizes the kernels refuse (a lane holds a head's row of state in registers) left to another backend."""

from __future__ import annotations

import pytest

from pyggml import ops
from pyggml.backend.kernel_geometry import MAX_D_STATE, MAX_HEAD
from pyggml.context import Context
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml_conformance.case import Case
from pyggml_conformance.cases.seq import gdn_case, linear_case, ssm_scan_case
from pyggml_testing import seq_cases

CASES = [
    ssm_scan_case(16, 1, 8, 1, 3_000, 1),
    ssm_scan_case(512, 2, 2, 1, 40, 2, k=2),  # four state elements a lane
    linear_case(Op.RWKV_WKV6, 1, 128, 300, 2),
    linear_case(Op.GATED_LINEAR_ATTN, 2, 100, 200, 1),
    linear_case(Op.RWKV_WKV7, 1, 128, 300, 1),
    gdn_case(2, 128, 300, 2, k=3),
]


@pytest.mark.parametrize("case", CASES + seq_cases.STRIDED, ids=lambda c: f"{c.op.name}({c.params})")
def test_long_and_strided_match_the_reference(dev, case: Case) -> None:  # type: ignore[no-untyped-def]
    seq_cases.check(dev, case)


def test_past_the_register_budget_is_refused(dev) -> None:  # type: ignore[no-untyped-def]
    c = Context(no_alloc=True)

    def wkv7(size: int) -> Tensor:
        r, w, k, v, a, b = (c.new_tensor("f32", size, 2, 4) for _ in range(6))
        return ops.rwkv_wkv7(r, w, k, v, a, b, c.new_tensor("f32", size * size * 2, 1))

    def scan(d_state: int) -> Tensor:
        x = c.new_tensor("f32", 2, 3, 4, 1)
        b = c.new_tensor("f32", d_state, 1, 4, 1)
        return ops.ssm_scan(c.new_tensor("f32", d_state, 2, 3, 1), x, c.new_tensor("f32", 3, 4, 1),
                            c.new_tensor("f32", 1, 3), b, b, c.new_tensor("i32", 1))

    assert dev.supports_op(wkv7(MAX_HEAD)) and not dev.supports_op(wkv7(MAX_HEAD + 1))
    assert dev.supports_op(scan(MAX_D_STATE)) and not dev.supports_op(scan(MAX_D_STATE + 1))
