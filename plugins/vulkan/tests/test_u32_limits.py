"""The shaders count elements and bytes in 32 bits, so the op table refuses (`OpTable.fits`: `fits_u32`) any node
whose counts pass 2^32 - 1, and a scheduler runs it elsewhere (issue 33, the int64 edge family: a SUM over a
broadcast view of 2^32 + 6 elements returned 12 in 0.6 s, a GET_ROWS from a view of 2^32 + 1 or 2^60 rows refused
row ids in range). Ordinary nodes are not refused. Metal runs these rules (plugins/metal/tests/test_metal_limits.py)."""

from __future__ import annotations

import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml.tensor import Tensor
from pyggml_vulkan.op_table import TABLE


def _leaves() -> tuple[Tensor, Tensor]:
    ctx = Context(no_alloc=True)
    return ctx.new_tensor("f32", 4, name="a"), ctx.new_tensor("i32", 3, name="ids")


@pytest.mark.parametrize("rows", [(1 << 31) + 3, 1 << 32, 1 << 40])
def test_counts_past_32_bits_are_refused(rows: int) -> None:
    a, ids = _leaves()
    wide = ops.view(a, (2, rows), (0,))
    assert not TABLE.supports(ops.sum(wide))
    assert not TABLE.supports(ops.scale(wide, 2.0))
    assert not TABLE.supports(ops.get_rows(ops.view(a, (4, rows), (0,)), ids))
    assert TABLE.supports(ops.cont(ops.view(wide, (2, 3), (0,))))  # a small view of a wide one is fine


def test_strides_past_32_bits_are_refused() -> None:
    a, _ = _leaves()
    assert not TABLE.supports(ops.sum(ops.view(a, (4, 1, 1, 1), (1 << 40, 1 << 40, 1 << 40))))
    assert TABLE.supports(ops.sum(ops.view(a, (4, 1, 1, 1), (16, 16, 16))))


def test_the_largest_32_bit_counts_are_taken() -> None:
    a, ids = _leaves()
    assert TABLE.supports(ops.sum(ops.view(a, (1, (1 << 32) - 1), (0,))))
    assert TABLE.supports(ops.get_rows(ops.view(a, (1, (1 << 32) - 1), (0,)), ids))
