"""Quantising stores (CPY and SET_ROWS into every writable block type) give the bytes of the numpy reference
quantisers (pyggml.quants, ggml's reference algorithms) exactly, rounding ties and degenerate blocks included;
CONCAT of block types moves whole blocks."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml.graph import build_graph
from pyggml.quants import quantize
from pyggml.tensor import Tensor
from pyggml.types import GGMLType as T
from pyggml_dialect.types import KQUANTS, QUANT32, QUANT_WRITE
from pyggml_testing.on_device import place

F32 = npt.NDArray[np.float32]


def hard_blocks(n_random: int, row: int, seed: int) -> F32:
    """Rows of `row` values made of 32-value groups that stress the quantisers: random ones; integers and
    half-integers (scales of 1, values on rounding ties); all zeros and signed zeros; a single non-zero value;
    one-signed groups (minimum 0); wide dynamic ranges; constant groups; ramps; and rows with a NaN or an
    infinity (the block holding one becomes pyggml.quants.nan_block)."""
    rng = np.random.default_rng(seed)
    groups = [
        rng.uniform(-1, 1, (n_random, 32)),
        rng.integers(-8, 8, (3, 32)),
        rng.integers(-32, 32, (3, 32)) / 2,
        rng.integers(-126, 127, (2, 32)) + 0.5,
        np.zeros((1, 32)),
        np.full((1, 32), -0.0),
        np.eye(1, 32, 7) * -2.75,
        np.eye(1, 32, 31) * 1e-3,
        np.abs(rng.standard_normal((2, 32))),
        -np.abs(rng.standard_normal((2, 32))),
        rng.standard_normal((4, 32)) * 10.0 ** rng.integers(-5, 5, (4, 1)),
        np.full((2, 32), 0.37) * np.array([[1.0], [-1.0]]),
        np.linspace(-1, 1, 64).reshape(2, 32),
    ]
    x = np.concatenate(groups).astype(np.float32)
    rng.shuffle(x)  # mix the kinds inside each 256-value super-block
    per_row = row // 32
    pad = -len(x) % per_row
    x = np.concatenate([x, rng.uniform(-2, 2, (pad, 32)).astype(np.float32)]).reshape(-1, row)
    whole = [np.zeros(row), np.full(row, 0.5), rng.uniform(-1, 1, row) * 1e-16,  # zero scales everywhere
             rng.integers(0, 4, row), np.where(np.arange(row) % 7, 0.0, 3.0)]
    special = rng.uniform(-1, 1, (3, row))
    special[0, 5], special[1, row - 1], special[2, 40], special[2, row // 2] = np.nan, np.inf, -np.inf, np.nan
    return np.concatenate([x, np.stack(whole + list(special)).astype(np.float32)])


def compute_bytes(dev, ctx: Context, out: Tensor, inputs: dict[Tensor, np.ndarray]) -> np.ndarray:  # type: ignore[no-untyped-def]
    g = build_graph(out)
    place(ctx, dev.buffer_type())
    for t, v in inputs.items():
        assert t.buffer is not None
        t.buffer.set_tensor(t, np.ascontiguousarray(v).view(np.uint8).reshape(-1))
    dev.init_backend().graph_compute(g)
    assert out.buffer is not None
    return np.asarray(out.buffer.get_tensor(out)).view(np.uint8).reshape(-1)


WRITABLE = sorted(QUANT_WRITE, key=str)


def test_k_quants_are_writable() -> None:
    assert KQUANTS <= QUANT_WRITE and QUANT32 <= QUANT_WRITE


@pytest.mark.parametrize("qtype", WRITABLE, ids=str)
@pytest.mark.parametrize("src_type", [T.F32, T.F16])
def test_cpy_into_block_type_is_byte_exact(dev, qtype: T, src_type: T) -> None:  # type: ignore[no-untyped-def]
    row = 256
    x = hard_blocks(24, row, seed=1)
    if src_type == T.F16:
        x = x.astype(np.float16)
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor(src_type, row, x.shape[0], name="a")
    out = ops.cpy(a, ctx.new_tensor(qtype, row, x.shape[0], name="q"))
    got = compute_bytes(dev, ctx, out, {a: x})
    want = quantize(x.astype(np.float32).reshape(-1), qtype).reshape(x.shape[0], -1)
    got = got.reshape(want.shape)
    if qtype == T.IQ4_NL:
        # ggml leaves the nibbles of an all-zero IQ4_NL block as the previous block's (a stale buffer; its scale
        # is 0, so the values are 0 either way): this kernel writes zeros there, compare the scales only
        blocks, ref = got.reshape(-1, 18), want.reshape(-1, 18).copy()
        stale = ~ref[:, :2].any(axis=1)
        ref[stale, 2:] = blocks[stale, 2:]
        assert not blocks[stale, 2:].any()
        want = ref.reshape(want.shape)
    bad = [i for i, w in enumerate(want) if not np.array_equal(got[i], w)]
    assert not bad, f"{qtype}: rows {bad} of {len(want)} differ from the reference quantiser"


@pytest.mark.parametrize("qtype", WRITABLE, ids=str)
@pytest.mark.parametrize("idx_type", [T.I32, T.I64])
def test_set_rows_into_block_type_is_byte_exact(dev, qtype: T, idx_type: T) -> None:  # type: ignore[no-untyped-def]
    x = hard_blocks(8, 512, seed=2)
    n, k = x.shape
    ids = np.random.default_rng(3).permutation(n).astype(idx_type.traits.np_dtype)
    ctx = Context(no_alloc=True)
    dst = ctx.new_tensor(qtype, k, n, name="dst")
    rows = ctx.new_tensor(T.F32, k, n, name="rows")
    idx = ctx.new_tensor(idx_type, n, name="ids")
    q = quantize(x, qtype).reshape(n, -1)
    if qtype == T.IQ4_NL:  # the nibbles of all-zero blocks: see test_cpy_into_block_type_is_byte_exact
        blocks = q.reshape(-1, 18)
        blocks[~blocks[:, :2].any(axis=1), 2:] = 0
    want = np.empty_like(q)
    want[ids] = q
    got = compute_bytes(dev, ctx, ops.set_rows(dst, rows, idx), {dst: np.zeros_like(q), rows: x, idx: ids})
    assert np.array_equal(got, want.reshape(-1))


@pytest.mark.parametrize("qtype", [T.Q4_0, T.Q8_0, T.Q3_K, T.Q6_K], ids=str)
@pytest.mark.parametrize("dim", [0, 1, 2, 3])
def test_concat_of_block_types_moves_blocks(dev, qtype: T, dim: int) -> None:  # type: ignore[no-untyped-def]
    tr = qtype.traits
    ne_a = [2 * tr.blck_size, 3, 2, 2]
    ne_b = list(ne_a)
    ne_b[dim] = tr.blck_size if dim == 0 else 1
    ctx = Context(no_alloc=True)
    a = ctx.new_tensor(qtype, *ne_a, name="a")
    b = ctx.new_tensor(qtype, *ne_b, name="b")
    rng = np.random.default_rng(dim)

    def raw(ne: list[int]) -> np.ndarray:  # random bytes, as (ne3, ne2, ne1, bytes per row)
        return rng.integers(0, 256, (ne[3], ne[2], ne[1], ne[0] // tr.blck_size * tr.type_size), dtype=np.uint8)

    ra, rb = raw(ne_a), raw(ne_b)
    got = compute_bytes(dev, ctx, ops.concat(a, b, dim), {a: ra, b: rb})
    assert np.array_equal(got, np.concatenate([ra, rb], axis=3 - dim).reshape(-1))
