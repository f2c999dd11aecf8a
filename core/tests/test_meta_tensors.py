"""Meta tensors in meta buffers: per-device simple tensors (shapes, strides, offsets, views), and set/get per state
(AXIS chunks, segments, MIRRORED, PARTIAL divided by contributors and refused on read), zero-share devices."""

from __future__ import annotations

import numpy as np
import pytest

import pyggml as gg
from pyggml import ops
from pyggml.alloc import alloc_ctx_tensors
from pyggml.backend.meta import MIRRORED, SplitRuleError, partial, segmented, split
from pyggml.context import init_view
from pyggml.errors import ShapeError, UnsupportedOpError, UnsupportedTypeError
from pyggml.types import GGMLType
from pyggml_testing.meta import leaf, make_meta, place


def _device_values(meta_tensor: object, meta: object) -> list[np.ndarray]:
    return [t.numpy() for t in meta.simple_tensors(meta_tensor)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("n", [2, 3])
def test_axis_splits_round_trip_and_land_on_each_device(n: int) -> None:
    states = {
        "a0": split(0, (64,) * (n - 1) + (128 - 64 * (n - 1),) if n == 2 else (32, 64, 32)),
        "a1": split(1, (3, 2) if n == 2 else (2, 2, 1)),
        "a2": split(2, (1, 3) if n == 2 else (2, 1, 1)),
    }
    meta, _, _ = make_meta(n, states)
    leafs = [leaf("a0", (128, 3)), leaf("a1", (8, 5, 2), seed=1), leaf("a2", (4, 3, 4), seed=2),
             leaf("m", (6, 2), seed=3)]
    ts = place(leafs, meta.buffer_type())
    for lf in leafs:
        np.testing.assert_array_equal(ts[lf.name].numpy(), lf.value)
    parts = _device_values(ts["a1"], meta)
    ext = states["a1"].extents()
    bounds = np.cumsum((0, *ext))
    for j, p in enumerate(parts):
        np.testing.assert_array_equal(p, leafs[1].value[:, bounds[j] : bounds[j + 1], :])
    for p in _device_values(ts["m"], meta):  # MIRRORED: a full copy on every device
        np.testing.assert_array_equal(p, leafs[3].value)


def test_quantised_rows_split_in_whole_blocks() -> None:
    meta, _, _ = make_meta(2, {"w": split(0, (64, 32))})
    v = np.random.default_rng(0).standard_normal((4, 96)).astype(np.float32)
    w = place([leaf("w", (96, 4), GGMLType.Q4_1, value=v)], meta.buffer_type())["w"]
    d0, d1 = meta.simple_tensors(w)
    assert (d0.ne, d1.ne) == ((64, 4, 1, 1), (32, 4, 1, 1))
    assert d0.nb[1] == 2 * 20 and d1.nb[1] == 20  # Q4_1: 20 bytes per block of 32
    ref = place([leaf("w", (96, 4), GGMLType.Q4_1, value=v)], gg_numpy_buft())["w"].numpy()
    np.testing.assert_array_equal(w.numpy(), ref)
    np.testing.assert_array_equal(np.concatenate([d0.numpy(), d1.numpy()], axis=1), ref)


def gg_numpy_buft() -> object:
    from pyggml.reference.backend import NumpyRegistry

    return NumpyRegistry().devices()[0].buffer_type()


def test_segments_give_every_device_whole_pieces_of_each_part() -> None:
    # fused QKV rows: Q (4 rows) once, K/V (2 rows each) twice; device 0 gets 3+1+1 rows, device 1 gets 1+1+1
    s = segmented(1, [((3, 1), 1), ((1, 1), 2)])
    meta, _, _ = make_meta(2, {"qkv": s})
    v = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)
    t = place([leaf("qkv", (6, 8), value=v)], meta.buffer_type())["qkv"]
    np.testing.assert_array_equal(t.numpy(), v)
    d0, d1 = _device_values(t, meta)
    np.testing.assert_array_equal(d0, v[[0, 1, 2, 4, 6]])  # Q0 Q1 Q2 | K0 | V0
    np.testing.assert_array_equal(d1, v[[3, 5, 7]])  # Q3 | K1 | V1


def test_partial_set_divides_among_contributors_and_get_is_refused() -> None:
    meta, _, _ = make_meta(3, {"p": partial([1, 1, 0]), "q": partial()})
    v = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    ts = place([leaf("p", (3, 2), value=v), leaf("q", (3, 2), value=v)], meta.buffer_type())
    p = _device_values(ts["p"], meta)
    np.testing.assert_allclose(p[0], v / 2)
    np.testing.assert_allclose(p[1], v / 2)
    np.testing.assert_array_equal(p[2], 0)
    np.testing.assert_allclose(sum(_device_values(ts["q"], meta)), v, rtol=1e-6)
    with pytest.raises(UnsupportedOpError, match="partial sum"):
        ts["p"].numpy()
    meta16, _, _ = make_meta(2, {"h": partial()})
    with pytest.raises(UnsupportedTypeError, match="only F32"):
        place([leaf("h", (4,), GGMLType.F16)], meta16.buffer_type())


def test_ranges_memset_and_bad_ranges() -> None:
    meta, _, _ = make_meta(2, {"a": split(0, (3, 5))})
    v = np.arange(32, dtype=np.float32).reshape(4, 8)
    t = place([leaf("a", (8, 4), value=v)], meta.buffer_type())["a"]
    buf = t.buffer
    assert buf is not None
    raw = buf.get_tensor(t, 2 * 32, 32).view(np.float32)
    np.testing.assert_array_equal(raw, v[2])
    buf.memset_tensor(t, 0, 32, 64)
    np.testing.assert_array_equal(t.numpy()[1:3], 0)
    np.testing.assert_array_equal(t.numpy()[3], v[3])
    with pytest.raises(ShapeError, match="whole blocks"):
        buf.get_tensor(t, 4, 8)
    tr = ops.transpose(t)
    init_view(tr)
    with pytest.raises(ShapeError, match="must be contiguous"):
        tr.numpy()
    half = ops.view(t, (4, 4), (t.nb[1],), 0)
    init_view(half)
    with pytest.raises(SplitRuleError, match="does not cover split dimension 0"):
        half.numpy()


def test_views_of_meta_tensors_are_views_of_the_device_slices() -> None:
    meta, _, _ = make_meta(2, {"cache": split(0, (128, 64))})
    ctx = gg.Context(no_alloc=True)
    cache = ctx.new_tensor(GGMLType.F32, 192, 6, name="cache")
    rows = ops.view(cache, (192, 2), (cache.nb[1],), 3 * cache.nb[1])  # rows 3..4 of every head
    heads = ops.view(cache, (64, 6, 3), (cache.nb[1], 64 * 4))  # [d, n_ctx, heads]
    alloc_ctx_tensors(ctx, meta.buffer_type())
    v = np.random.default_rng(0).standard_normal((6, 192)).astype(np.float32)
    cache.set(v)
    assert meta.split_state(rows) == split(0, (128, 64))
    assert meta.split_state(heads) == split(2, (2, 1))
    r0, r1 = meta.simple_tensors(rows)
    c0, c1 = meta.simple_tensors(cache)
    assert (r0.offset - c0.offset, r1.offset - c1.offset) == (3 * 128 * 4, 3 * 64 * 4)  # offsets scaled per slice
    np.testing.assert_array_equal(rows.numpy(), v[3:5])
    h0, h1 = (t.numpy() for t in meta.simple_tensors(heads))  # numpy order [heads, n_ctx, d]
    full = v.reshape(6, 3, 64).transpose(1, 0, 2)
    np.testing.assert_array_equal(h0, full[:2])
    np.testing.assert_array_equal(h1, full[2])


def test_zero_share_device_holds_nothing_and_results_still_assemble() -> None:
    meta, _, _ = make_meta(3, {"a": split(1, (3, 0, 2))})
    v = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    t = place([leaf("a", (4, 5), value=v)], meta.buffer_type())["a"]
    assert [s.ne[1] for s in meta.simple_tensors(t)] == [3, 0, 2]
    np.testing.assert_array_equal(t.numpy(), v)


def test_callback_errors_surface_when_weights_are_placed() -> None:
    meta, _, _ = make_meta(2, {"w": split(0, (16, 48))})
    with pytest.raises(ShapeError, match="breaks the granularity"):
        place([leaf("w", (64, 2), GGMLType.Q8_0)], meta.buffer_type())
    meta2, _, _ = make_meta(2, lambda t: split(1, (1, 1)))
    with pytest.raises(ShapeError, match="covers 2 elements of dimension 1, which has 3"):
        place([leaf("x", (4, 3))], meta2.buffer_type())
    meta3, _, _ = make_meta(2)
    x = place([leaf("x", (4, 3))], meta3.buffer_type())["x"]
    assert meta3.split_state(x) == MIRRORED  # no callback: everything mirrored
    with pytest.raises(SplitRuleError, match="not in a buffer of this meta device"):
        meta.split_state(x)
