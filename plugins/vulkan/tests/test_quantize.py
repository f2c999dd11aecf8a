"""Quantising copies (CPY, SET_ROWS into Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) are byte-exact with ggml's reference
quantisers (pyggml.quants), rounding ties included; block moves (CONCAT, same-type CPY) keep bytes as they are."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml.graph import build_graph
from pyggml.quants import quantize as _quantize
from pyggml.types import parse_type
from pyggml_testing.on_device import place_graph


def quantize(x: np.ndarray, qtype: str) -> np.ndarray:
    return _quantize(x, parse_type(qtype))


Q32 = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0"]
KQ = ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K"]


def tricky_blocks(n_random: int, per_row: int, seed: int = 0) -> np.ndarray:
    """Rows of per_row 32-value blocks: random ones and blocks that hit rounding ties, zero scales, one-value
    blocks, signed zeros and wide ranges; then a row whose first blocks hold a NaN, an infinity, and both (they
    become pyggml.quants.nan_block)."""
    rng = np.random.default_rng(seed)
    ints = rng.integers(-8, 8, (4, 32)).astype(np.float32)
    one = np.zeros((2, 32), np.float32)
    one[0, 5], one[1, 31] = -3.25, 1e-3
    halves = rng.integers(-32, 32, (5, 32)).astype(np.float32) / 2
    halves[0] = rng.integers(-126, 126, 32) + 0.5  # Q8_0: d = 1 (amax 127), x / d on .5 ties
    halves[0, 0] = 127.0
    halves[1, 0], halves[2, 0] = -8.0, -16.0  # Q4_0 / Q5_0: d = 1, x + 8.5 (16.5) on integers
    halves[3] = np.clip(halves[3], 0, 15)
    halves[4] = np.clip(halves[4] + 16, 0, 31)
    halves[3, :2], halves[4, :2] = (0.0, 15.0), (0.0, 31.0)  # Q4_1 / Q5_1: d = 1, min 0
    blocks = [rng.uniform(-1, 1, (n_random, 32)), halves, ints + 0.5, ints, ints * 127.0 / 8.0 + 0.5,
              np.zeros((1, 32)), np.full((1, 32), -0.0), one,
              rng.standard_normal((4, 32)) * 10.0 ** rng.integers(-6, 6, (4, 1)),
              np.linspace(-1, 1, 64).reshape(2, 32)]
    x = np.concatenate(blocks).astype(np.float32)
    pad = -len(x) % per_row
    x = np.concatenate([x, rng.uniform(-2, 2, (pad, 32)).astype(np.float32)])
    special = rng.uniform(-1, 1, (per_row, 32)).astype(np.float32)
    special[0, 3] = np.nan
    special[1 % per_row, 31] = np.inf
    special[-1, 0], special[-1, 17] = -np.inf, np.nan
    return np.concatenate([x, special]).reshape(-1, per_row * 32)


def run_bytes(backend, build, inputs: dict[str, np.ndarray]) -> np.ndarray:
    ctx = Context(no_alloc=True)
    ins, out = build(ctx)
    g = build_graph(out)
    place_graph(g, backend.device.buffer_type())
    for t in ins:
        t.buffer.set_tensor(t, np.ascontiguousarray(inputs[t.name]).view(np.uint8).reshape(-1))
    backend.graph_compute(g)
    return np.asarray(out.buffer.get_tensor(out))


@pytest.mark.parametrize("qtype", Q32)
def test_cpy_quantise_byte_exact(backend, qtype):
    rows = tricky_blocks(64, 4)

    def build(ctx: Context):
        a = ctx.new_tensor("f32", 128, rows.shape[0], name="a")
        b = ctx.new_tensor(qtype, 128, rows.shape[0], name="b")
        return [a], ops.cpy(a, b)

    got = run_bytes(backend, build, {"a": rows})
    assert np.array_equal(got, quantize(rows.reshape(-1), qtype).reshape(-1))


@pytest.mark.parametrize("qtype", KQ)
@pytest.mark.parametrize("src", ["f32", "f16"])
def test_cpy_k_quantise_byte_exact(backend, qtype, src):
    """256-value super-blocks: random ones, and ones made of the tricky 32-value blocks (ties, zeros, one-value
    sub-blocks, wide ranges)."""
    rng = np.random.default_rng(5)
    rows = np.concatenate([rng.standard_normal((3, 256)).astype(np.float32), tricky_blocks(8, 8, seed=4)])
    if src == "f16":
        rows = rows.astype(np.float16)

    def build(ctx: Context):
        a = ctx.new_tensor(src, 256, rows.shape[0], name="a")
        b = ctx.new_tensor(qtype, 256, rows.shape[0], name="b")
        return [a], ops.cpy(a, b)

    got = run_bytes(backend, build, {"a": rows})
    want = quantize(rows.astype(np.float32).reshape(-1), qtype).reshape(rows.shape[0], -1)
    bad = [i for i in range(rows.shape[0]) if not np.array_equal(got.reshape(want.shape)[i], want[i])]
    assert not bad, f"rows {bad} differ"


@pytest.mark.parametrize("qtype", Q32 + KQ)
@pytest.mark.parametrize("idt", ["i32", "i64"])
def test_set_rows_quantise_byte_exact(backend, qtype, idt):
    x = tricky_blocks(16, 8 if qtype in KQ else 2, seed=1)
    n, k = x.shape
    ids = np.random.default_rng(2).permutation(n).astype(np.int32 if idt == "i32" else np.int64)

    def build(ctx: Context):
        dst = ctx.new_tensor(qtype, k, n, name="dst")
        src = ctx.new_tensor("f32", k, n, name="src")
        idx = ctx.new_tensor(idt, n, name="ids")
        return [dst, src, idx], ops.set_rows(dst, src, idx)

    q = quantize(x.reshape(-1), qtype).reshape(n, -1)
    want = np.empty_like(q)
    want[ids] = q
    got = run_bytes(backend, build, {"dst": np.zeros_like(q), "src": x, "ids": ids})
    assert np.array_equal(got, want.reshape(-1))


@pytest.mark.parametrize("qtype,block_bytes", [("q3_K", 110), ("q5_K", 176), ("q8_0", 34)])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_concat_blocks_moves_bytes(backend, qtype, block_bytes, dim):
    ne = (256, 2, 3)
    row = ne[0] // (256 if qtype.endswith("K") else 32) * block_bytes

    def build(ctx: Context):
        a = ctx.new_tensor(qtype, *ne, name="a")
        b = ctx.new_tensor(qtype, *ne, name="b")
        return [a, b], ops.concat(a, b, dim)

    rng = np.random.default_rng(dim)
    a, b = (rng.integers(0, 256, (3, 2, row), dtype=np.uint8) for _ in range(2))
    got = run_bytes(backend, build, {"a": a, "b": b})
    assert np.array_equal(got, np.concatenate([a, b], axis=2 - dim).reshape(-1))
