"""The sequence-model ops on Vulkan beyond the conformance suite: sequences whose token loop would take one shader
invocation past lavapipe's loop limit (65535 iterations, then the loops end silently) are split over several
dispatches on a CPU-emulated device, each continuing from the state the previous one left in the result (snapshot
slots included); SOLVE_TRI's rows likewise. Strided srcs are packed into scratch first. Each case is compared with
the numpy reference as the conformance suite does."""

from __future__ import annotations

from itertools import pairwise

import pytest

from pyggml.backend.kernel_geometry import MAX_D_STATE, MAX_HEAD
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml_conformance.case import Case
from pyggml_conformance.cases.seq import gdn_case, linear_case, solve_tri_case, ssm_scan_case
from pyggml_glsl.ops.seq import LOOP_BUDGET, WKV_PASSES, token_chunks
from pyggml_testing import seq_cases

LONG = [
    ssm_scan_case(16, 1, 8, 1, 12_000, 1),  # Mamba-1: one dispatch ends in NaN from about token 11,000
    ssm_scan_case(16, 4, 4, 2, 12_000, 2, k=3),  # Mamba-2 with snapshots, the last ones in the last chunk
    linear_case(Op.RWKV_WKV6, 1, 64, 2_000, 1),  # one dispatch: NaN from token 992
    linear_case(Op.GATED_LINEAR_ATTN, 1, 128, 1_200, 1),  # from token 504
    linear_case(Op.RWKV_WKV7, 1, 64, 1_200, 2),  # from token 500
    gdn_case(1, 64, 1_500, 1, k=2),  # from token 496
    gdn_case(1, 128, 600, 2, kda=True),  # from token 252
    solve_tri_case((300, 300, 1, 1), (2, 300, 1, 1)),  # rows in three dispatches
]


@pytest.mark.parametrize("case", LONG, ids=lambda c: f"{c.op.name}({c.params})")
def test_long_sequences_match_the_reference(device, case: Case) -> None:  # type: ignore[no-untyped-def]
    seq_cases.check(device, case)


@pytest.mark.parametrize("case", seq_cases.STRIDED, ids=lambda c: f"{c.op.name}({c.params})")
def test_strided_srcs_are_packed(device, case: Case) -> None:  # type: ignore[no-untyped-def]
    seq_cases.check(device, case)


def test_token_chunks_cover_the_tokens_within_the_budget() -> None:
    per_token, fixed = WKV_PASSES[Op.RWKV_WKV7] * 64 + 4, 2 * 64 + 8
    chunks = token_chunks(1000, per_token, fixed, emulated=True)
    assert chunks[0][0] == 0 and chunks[-1][1] == 1000 and len(chunks) > 1
    assert all(a[1] == b[0] for a, b in pairwise(chunks))
    assert all(fixed + (t1 - t0) * per_token <= LOOP_BUDGET for t0, t1 in chunks)
    assert token_chunks(1000, per_token, fixed, emulated=False) == [(0, 1000)]
    assert token_chunks(0, per_token, fixed, emulated=True) == [(0, 0)]


def test_past_the_register_budget_is_refused(device) -> None:  # type: ignore[no-untyped-def]
    """wkv.comp keeps a head's row of state in registers (S <= 128), ssm_scan.comp up to 8 state elements a thread:
    larger ones go to another backend."""
    from pyggml import ops
    from pyggml.context import Context

    c = Context(no_alloc=True)

    def wkv6(size: int) -> Tensor:
        tok = [c.new_tensor("f32", size, 2, 4) for _ in range(4)]
        return ops.rwkv_wkv6(tok[0], tok[1], tok[2], c.new_tensor("f32", size, 2), tok[3],
                             c.new_tensor("f32", size * size * 2, 1))

    def scan(d_state: int) -> Tensor:
        b = c.new_tensor("f32", d_state, 1, 4, 1)
        return ops.ssm_scan(c.new_tensor("f32", d_state, 2, 3, 1), c.new_tensor("f32", 2, 3, 4, 1),
                            c.new_tensor("f32", 3, 4, 1), c.new_tensor("f32", 1, 3), b, b, c.new_tensor("i32", 1))

    assert device.supports_op(wkv6(MAX_HEAD)) and not device.supports_op(wkv6(MAX_HEAD + 1))
    assert device.supports_op(scan(MAX_D_STATE)) and not device.supports_op(scan(MAX_D_STATE + 1))
