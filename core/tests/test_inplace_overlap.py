"""In-place results into a view whose elements share bytes are refused at record time (found by the fuzz soak,
benchmarks/fuzz_soak.py): `mul(view(a, (1, 2), (0,)), b, inplace=True)` writes both rows into a's one element, and
the result depended on the order of the writes (the reference a * b1, the cpu backend a * b0 * b1)."""

from __future__ import annotations

import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml.errors import ShapeError
from pyggml.ops.base import overlapping
from pyggml.types import GGMLType as T


def test_the_soak_recipe_is_refused() -> None:
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor(T.F32, 1)
    v = ops.view(a, (1, 2), (0,), 0)
    with pytest.raises(ShapeError, match="share bytes"):
        ops.mul(v, ctx.new_tensor(T.F32, 1, 2), inplace=True)
    assert ops.mul(v, ctx.new_tensor(T.F32, 1, 2)).view_src is None  # into a new tensor: fine


@pytest.mark.parametrize(("ne", "nb", "expected"), [
    ((4, 3), (16,), False),            # contiguous
    ((4, 3), (20,), False),            # padded rows
    ((2, 2, 2), (16, 8), False),       # planes between the rows, no collision
    ((4, 3), (8,), True),              # rows overlap
    ((4, 3), (0,), True),              # a stride of 0
    ((4, 1), (0,), False),             # ... over a single row
    ((0, 3), (0,), False),             # no elements
])
def test_overlapping(ne: tuple[int, ...], nb: tuple[int, ...], expected: bool) -> None:
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor(T.F32, 64)
    assert overlapping(ops.view(a, ne, nb, 0)) is expected
    assert not overlapping(ops.transpose(ctx.new_tensor(T.F32, 4, 3)))


def test_block_rows_count_in_blocks() -> None:
    ctx = Context(no_alloc=True)
    q = ctx.new_tensor(T.Q8_0, 64, 4)  # 2 blocks of 34 bytes a row
    assert not overlapping(q) and not overlapping(ops.transpose(q))
    assert overlapping(ops.view(q, (64, 2), (34,), 0))
