"""Reference kernels: MUL_MAT, MUL_MAT_ID and OUT_PROD, on dequantised values, accumulating in float64."""

from __future__ import annotations

import numpy as np

from pyggml.ops.base import Op
from pyggml.reference.access import load, store
from pyggml.reference.kernels.rules import KernelRules
from pyggml.reference.kernels.util import Array, check_index, src
from pyggml.tensor import Tensor

rules = KernelRules()


def broadcast_batches(a: Array, batch: tuple[int, int]) -> Array:
    """src0's batch dims stretched to src1's: src1 batch i uses src0 batch i // (B / A) (each src0 matrix serves
    a run of consecutive src1 batches, as in grouped-query attention)."""
    a = np.repeat(a, batch[0] // a.shape[0], axis=0)
    return np.repeat(a, batch[1] // a.shape[1], axis=1)


@rules.kernel(Op.MUL_MAT)
def mul_mat(dst: Tensor) -> None:
    """dst[i, j] = sum_k src0[k, i] * src1[k, j] per batch (numpy: src1 @ src0.T)."""
    b = load(src(dst, 1))
    a = broadcast_batches(load(src(dst, 0)), b.shape[:2])
    store(dst, b @ np.swapaxes(a, -1, -2))


@rules.kernel(Op.MUL_MAT_ID)
def mul_mat_id(dst: Tensor) -> None:
    """For token t and slot e: dst[:, e, t] = expert ids[e, t] (a matrix of src0) times src1 row
    [:, e % src1.ne[1], t]."""
    experts = load(src(dst, 0))[0]  # (n_expert, m, k)
    b = load(src(dst, 1))[0]  # (n_tokens, n_b, k)
    ids = load(src(dst, 2), None)[0, 0].astype(np.int64)  # (n_tokens, n_used)
    check_index(Op.MUL_MAT_ID, ids, experts.shape[0], "expert id")
    n_used = ids.shape[1]
    rows = b[:, np.arange(n_used) % b.shape[1], :]  # (n_tokens, n_used, k)
    chosen = experts[ids]  # (n_tokens, n_used, m, k)
    store(dst, np.einsum("teik,tek->tei", chosen, rows)[np.newaxis])


@rules.kernel(Op.OUT_PROD)
def out_prod(dst: Tensor) -> None:
    """dst[i, j] = sum_k src0[i, k] * src1[j, k] per batch (numpy: src1.T @ src0), src0 batches broadcast as
    MUL_MAT's."""
    b = load(src(dst, 1))
    a = broadcast_batches(load(src(dst, 0)), b.shape[:2])
    store(dst, np.swapaxes(b, -1, -2) @ a)
