"""Sequence-model cases beyond the conformance suite for the GPU plugins' tests (OpenCL / CUDA's seq.cl, Vulkan's
seq.comp, ssm_scan.comp, wkv.comp): every src of the recurrences read through strides (the Vulkan plugin packs such
srcs into scratch first), and `check` to run any case on a device against the numpy reference as the suite does."""

from __future__ import annotations

from pyggml import ops
from pyggml.backend.protocol import Device
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml_conformance.case import Case, CaseBuilder
from pyggml_conformance.cases.common import F32, I32
from pyggml_conformance.inputs import distinct_ids, uniform
from pyggml_conformance.runner import Status, Target, compare_case, open_target

PAD = (3, 1, 1, 0)


def strided_scan(d_state: int, head_dim: int, n_head: int, n_tok: int, n_seqs: int) -> Case:
    """SSM_SCAN with every float src a strided view (Mamba 2 when head_dim > 1, else Mamba 1)."""

    def build(b: CaseBuilder) -> Tensor:
        def v(*ne: int) -> Tensor:
            return b.strided(F32, ne, pad=PAD)

        a = b.strided(F32, (1 if head_dim > 1 else d_state, n_head), pad=PAD, init=uniform(-1.0, -0.5))
        return ops.ssm_scan(v(d_state, head_dim, n_head, n_seqs + 1), v(head_dim, n_head, n_tok, n_seqs),
                            v(n_head, n_tok, n_seqs), a, v(d_state, 1, n_tok, n_seqs), v(d_state, 1, n_tok, n_seqs),
                            b.input(I32, (n_seqs,), distinct_ids(n_seqs + 1)))

    return Case(Op.SSM_SCAN, f"strided,d_state={d_state},head_dim={head_dim},n_tok={n_tok}", build)


def strided_linear(op: Op, heads: int, size: int, per_seq: int, n_seqs: int) -> Case:
    """RWKV_WKV6 / GATED_LINEAR_ATTN / RWKV_WKV7 / GATED_DELTA_NET with strided token tensors and state."""
    n_tok = per_seq * n_seqs

    def build(b: CaseBuilder) -> Tensor:
        def tok(lo: float = -1.0, hi: float = 1.0) -> Tensor:
            ne = (size, heads, per_seq, n_seqs) if op is Op.GATED_DELTA_NET else (size, heads, n_tok)
            return b.strided(F32, ne, pad=PAD, init=uniform(lo, hi))

        if op is Op.GATED_DELTA_NET:
            q, k, v = tok(-0.25, 0.25), tok(-0.25, 0.25), tok()
            g = b.strided(F32, (1, heads, per_seq, n_seqs), pad=PAD, init=uniform(-2.0, -0.01))
            beta = b.strided(F32, (1, heads, per_seq, n_seqs), pad=PAD, init=uniform(0.0, 1.0))
            return ops.gated_delta_net(q, k, v, g, beta, b.strided(F32, (size, size, heads, n_seqs), pad=PAD), 2)
        state = b.strided(F32, (size * size * heads, n_seqs), pad=PAD)
        if op is Op.RWKV_WKV6:
            k, v, r = tok(), tok(), tok()
            return ops.rwkv_wkv6(k, v, r, b.strided(F32, (size, heads), pad=PAD), tok(0.5, 1.0), state)
        if op is Op.GATED_LINEAR_ATTN:
            k, v, q = tok(), tok(), tok()
            return ops.gated_linear_attn(k, v, q, tok(0.5, 1.0), state, size ** -0.5)
        r, w, k, v = tok(), tok(0.5, 1.0), tok(), tok()
        return ops.rwkv_wkv7(r, w, k, v, tok(-0.1, 0.1), tok(-0.1, 0.1), state)

    return Case(op, f"strided,heads={heads},size={size},per_seq={per_seq},n_seqs={n_seqs}", build)


STRIDED = [
    strided_scan(16, 1, 6, 9, 2),
    strided_scan(40, 8, 4, 7, 2),
    *(strided_linear(op, 3, 16, 5, 2)
      for op in (Op.RWKV_WKV6, Op.GATED_LINEAR_ATTN, Op.RWKV_WKV7, Op.GATED_DELTA_NET)),
]


def check(device: Device, case: Case) -> None:
    """The case on `device` passes against the numpy reference (AssertionError with the suite's verdict)."""
    (res,) = compare_case(case, [Target(device.name, device)], open_target("numpy"))
    assert res.status is Status.PASS, (case.op.name, case.params, res.status, res.error, res.nmse)
