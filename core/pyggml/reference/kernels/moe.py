"""Reference kernels: ADD_ID (a + b[ids] row by row, the per-expert bias of gpt-oss)."""

from __future__ import annotations

import numpy as np

from pyggml.ops.base import Op
from pyggml.reference.access import load, store
from pyggml.reference.kernels.rules import KernelRules
from pyggml.reference.kernels.util import check_index, src
from pyggml.tensor import Tensor

rules = KernelRules()


@rules.kernel(Op.ADD_ID)
def add_id(dst: Tensor) -> None:
    """dst[i3, i2, i1, :] = a[i3, i2, i1, :] + b[ids[i2, i1], :] (numpy order; every i3 uses the same ids)."""
    a = load(src(dst, 0))
    b = load(src(dst, 1))[0, 0]  # [n_rows, ne0]
    ids = load(src(dst, 2), dtype=None)[0, 0]  # [a.ne[2], a.ne[1]]
    check_index(Op.ADD_ID, ids, b.shape[0], "row id of src1")
    with np.errstate(over="ignore", invalid="ignore"):
        store(dst, a + b[ids][np.newaxis])
