"""The reference covers the whole op table: every op but the views has a kernel and the numpy device says it
supports them; shape rules the kernels rely on refuse what ggml asserts against."""

from __future__ import annotations

import pytest

from pyggml import ops
from pyggml.backend import get_device
from pyggml.errors import ShapeError
from pyggml.ops import OPS, VIEW_OPS
from pyggml.reference.table import TABLE
from pyggml_testing.graphs import new_ctx, tensor


def test_every_op_has_a_kernel() -> None:
    assert set(TABLE) == set(OPS) - VIEW_OPS


def test_numpy_device_supports_computed_and_view_ops() -> None:
    ctx = new_ctx()
    a = tensor(ctx, [[1.0, 2.0], [3.0, 4.0]])
    dev = get_device("numpy")
    for t in (ops.add(a, a), ops.transpose(a), ops.soft_max(a), ops.arange(ctx, 0.0, 3.0)):
        assert dev.supports_op(t), t


def test_negative_n_past_is_refused() -> None:
    ctx = new_ctx()
    with pytest.raises(ShapeError, match="DIAG_MASK_INF: n_past=-1"):
        ops.diag_mask_inf(tensor(ctx, [[1.0]]), -1)
