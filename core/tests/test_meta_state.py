"""Split states: shares from ratios (granularity, rotation of the remainder, zero shares), validation of stored
tensors' states, and the per-op rules that derive computed tensors' states (an op without a rule is refused)."""

from __future__ import annotations

import pytest

import pyggml as gg
from pyggml import ops
from pyggml.backend.meta import MIRRORED, PARTIAL, RULES, Axis, SplitRuleError, segmented, split, split_shares
from pyggml.backend.meta.layout import map_by_elements, map_by_strides
from pyggml.backend.meta.rules import derive
from pyggml.backend.meta.state import check_state, partial
from pyggml.errors import ShapeError
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType

F32 = GGMLType.F32


def new(*ne: int, ttype: GGMLType = F32, name: str = "") -> Tensor:
    ctx = gg.Context(no_alloc=True)
    return ctx.new_tensor(ttype, *ne, name=name)


# ---- shares ---------------------------------------------------------------------------------------------------


def test_shares_even_uneven_and_rotated() -> None:
    assert split_shares(12, 3) == (4, 4, 4)
    assert split_shares(3 * 64, 2, granularity=64) in ((128, 64), (64, 128))
    assert {split_shares(3 * 64, 2, granularity=64, rotation=r) for r in (0, 1)} == {(128, 64), (64, 128)}
    assert split_shares(4 * 32, 2, [3, 1], granularity=32) == (96, 32)  # llama.cpp's -ts 3,1
    assert split_shares(3, 2, [3, 1]) == (2, 1)  # the remainder goes to the largest fraction (0.75)
    assert split_shares(10, 3, [1, 1, 0]) == (5, 5, 0)  # a zero-share device
    assert sum(split_shares(1000, 7, [0.3, 1, 2, 0, 5, 1, 1], granularity=8)) == 1000


@pytest.mark.parametrize(("total", "n", "ratios", "gran", "match"), [
    (100, 2, None, 32, "not a whole number of units"),
    (64, 2, [1, 2, 3], 1, "does not fit 2 devices"),
    (64, 2, [0, 0], 1, "not all zero"),
    (64, 2, [1, -1], 1, "non-negative"),
    (64, 17, None, 1, "1 to 16"),
])
def test_bad_shares(total: int, n: int, ratios: list[float] | None, gran: int, match: str) -> None:
    with pytest.raises(ShapeError, match=match):
        split_shares(total, n, ratios, gran)


def test_stored_states_are_validated() -> None:
    w = new(64, 10, ttype=GGMLType.Q4_1, name="w")
    assert check_state(w, split(0, (32, 32)), 2, "cb") == split(0, (32, 32))
    assert check_state(w, split(1, (7, 3)), 2, "cb").extents() == (7, 3)
    with pytest.raises(ShapeError, match=r"breaks the granularity.*blocks of 32"):
        check_state(w, split(0, (48, 16)), 2, "cb")
    with pytest.raises(ShapeError, match="covers 12 elements of dimension 1"):
        check_state(w, split(1, (6, 6)), 2, "cb")
    with pytest.raises(ShapeError, match="one entry per device"):
        check_state(w, split(1, (10,)), 2, "cb")
    with pytest.raises(ShapeError, match="not a SplitState"):
        check_state(w, "AXIS_0", 2, "cb")  # type: ignore[arg-type]
    s = segmented(1, [((2, 1), 1), ((1, 2), 2)])  # 3 + 2 x 3 = 9 rows
    with pytest.raises(ShapeError, match="covers 9"):
        check_state(w, s, 2, "cb")
    assert check_state(new(4, 9), s, 2, "cb").extents() == (4, 5)
    assert check_state(w, partial([1, 0]), 2, "cb").contributes(1) is False


# ---- layout mapping ---------------------------------------------------------------------------------------------


def test_reshape_moves_the_split_through_element_counts() -> None:
    heads = split(0, (384, 192))  # 6 + 3 heads of 64
    assert map_by_elements((576, 5, 1, 1), (64, 9, 5, 1), heads, "t") == split(1, (6, 3))
    assert map_by_elements((64, 9, 5, 1), (576, 5, 1, 1), split(1, (6, 3)), "t") == heads
    assert map_by_elements((64, 3, 1, 1), (192, 1, 1, 1), split(1, (2, 1)), "t") == split(0, (128, 64))
    rows = map_by_elements((8, 4, 1, 1), (32, 1, 1, 1), split(0, (6, 2)), "t")  # merged with 4 rows: repeats
    assert rows == split(0, (6, 2), nr=4)
    with pytest.raises(ShapeError, match="whole units"):
        map_by_elements((576, 5, 1, 1), (64, 9, 5, 1), split(0, (300, 276)), "t")
    with pytest.raises(ShapeError, match="cuts across"):
        map_by_elements((6, 5, 1, 1), (10, 3, 1, 1), split(0, (3, 3)), "t")


def test_strided_view_of_a_head_split_cache_lands_on_the_heads_dimension() -> None:
    cache = new(192, 32, ttype=GGMLType.F16)  # [n_embd_kv, n_ctx], split by KV heads of 64
    k = ops.view(cache, (64, 16, 3), (cache.nb[1], 64 * 2))  # [d, n_kv, kv heads]: heads have the small stride
    assert map_by_strides(k, cache, split(0, (128, 64)), 0, "v") == split(2, (2, 1))
    rows = ops.view(cache, (192, 8), (cache.nb[1],), offset=4 * cache.nb[1])
    assert map_by_strides(rows, cache, split(0, (128, 64)), 4 * cache.nb[1], "v") == split(0, (128, 64))
    one_head = ops.view(cache, (64, 32), (cache.nb[1],), offset=128)
    with pytest.raises(ShapeError, match="does not cover"):
        map_by_strides(one_head, cache, split(0, (128, 64)), 128, "v")


def test_strided_view_of_a_head_split_quantised_cache_counts_blocks() -> None:
    cache = new(192, 32, ttype=GGMLType.Q8_0)  # a q8_0 KV cache: 6 blocks of 34 bytes per row, heads of 2 blocks
    head = 2 * GGMLType.Q8_0.traits.type_size
    k = ops.view(cache, (64, 16, 3), (cache.nb[1], head))
    assert map_by_strides(k, cache, split(0, (128, 64)), 0, "v") == split(2, (2, 1))
    half_head = ops.view(cache, (32, 16, 6), (cache.nb[1], head // 2))
    assert map_by_strides(half_head, cache, split(0, (128, 64)), 0, "v") == split(2, (4, 2))
    with pytest.raises(ShapeError, match="whole units"):  # a split inside a block cannot follow
        map_by_strides(k, cache, split(0, (96, 96)), 0, "v")


# ---- rules ----------------------------------------------------------------------------------------------------


def test_mul_mat_four_cases_and_refusal() -> None:
    w, x = new(64, 96, name="w"), new(64, 5, name="x")
    y = ops.mul_mat(w, x)
    col = split(1, (48, 48))
    assert derive(y, [col, MIRRORED], False) == split(0, (48, 48))  # column parallel
    assert derive(y, [MIRRORED, MIRRORED], False) == MIRRORED
    x2 = new(64, 6)
    assert derive(ops.mul_mat(w, x2), [MIRRORED, split(1, (4, 2))], False) == split(1, (4, 2))
    rows = split(0, (32, 32))
    assert derive(y, [rows, rows], False).axis == Axis.PARTIAL  # row parallel: partial sums
    assert derive(y, [rows, rows], True) == MIRRORED  # ... that are whole once reduced
    with pytest.raises(SplitRuleError, match="split alike"):
        derive(y, [rows, split(0, (0, 64))], False)
    with pytest.raises(SplitRuleError, match=r"MUL_MAT node .*unsupported combination"):
        derive(y, [split(1, (48, 48)), split(0, (32, 32))], False)


def test_per_row_ops_refuse_split_rows_and_partial_sums() -> None:
    x = new(64, 8, name="x")
    n = ops.rms_norm(x, 1e-5)
    assert derive(n, [split(1, (4, 4))], True) == split(1, (4, 4))
    with pytest.raises(SplitRuleError, match="rows are processed whole"):
        derive(n, [split(0, (32, 32))], True)
    with pytest.raises(SplitRuleError, match="not linear"):
        derive(n, [PARTIAL], True)
    assert derive(ops.sum_rows(x), [PARTIAL], False) == PARTIAL  # a sum of partial sums is one
    assert derive(ops.sum_rows(x), [PARTIAL], True) == MIRRORED  # ... and whole once reduced
    assert derive(ops.argmax(x), [split(1, (5, 3))], True) == split(0, (5, 3))


def test_binary_broadcast_and_partial_linearity() -> None:
    a, bias, b = new(64, 8), new(64), new(64, 8)
    s = split(1, (6, 2))
    assert derive(ops.add(a, bias), [s, MIRRORED], True) == s  # broadcast along the split
    assert derive(ops.add(a, b), [s, s], True) == s
    with pytest.raises(SplitRuleError, match="share one split state"):
        derive(ops.add(a, b), [s, MIRRORED], True)
    assert derive(ops.add(a, b), [PARTIAL, PARTIAL], False) == PARTIAL
    assert derive(ops.mul(a, b), [PARTIAL, MIRRORED], False) == PARTIAL
    with pytest.raises(SplitRuleError, match="not linear"):
        derive(ops.mul(a, b), [PARTIAL, PARTIAL], True)
    with pytest.raises(SplitRuleError, match="share one split state"):
        derive(ops.add(a, b), [MIRRORED, PARTIAL], True)  # x + partial would add x once per device


def test_flash_attention_needs_whole_gqa_groups_per_device() -> None:
    q = new(64, 5, 9)  # [d, n, heads]
    k, v = new(64, 32, 3), new(64, 32, 3)
    mask = new(32, 5, ttype=GGMLType.F16)
    fa = ops.flash_attn_ext(q, k, v, mask, 0.125)
    assert derive(fa, [split(2, (6, 3)), split(2, (2, 1)), split(2, (2, 1)), MIRRORED], True) == split(1, (6, 3))
    with pytest.raises(SplitRuleError, match="whole GQA groups"):
        derive(fa, [split(2, (6, 3)), split(2, (1, 2)), split(2, (1, 2)), MIRRORED], True)
    with pytest.raises(SplitRuleError, match="mask must be MIRRORED"):
        derive(fa, [split(2, (6, 3)), split(2, (2, 1)), split(2, (2, 1)), split(1, (3, 2))], True)
    assert derive(fa, [MIRRORED] * 4, True) == MIRRORED


def test_rope_get_rows_set_rows_glu_concat() -> None:
    x, pos = new(64, 9, 5), new(5, ttype=GGMLType.I32)
    s = split(1, (6, 3))
    assert derive(ops.rope(x, pos, 64, 0), [s, MIRRORED], True) == s
    with pytest.raises(SplitRuleError, match="positions"):
        derive(ops.rope(x, pos, 64, 0), [s, split(0, (3, 2))], True)
    emb, ids = new(64, 100), new(4, ttype=GGMLType.I32)
    assert derive(ops.get_rows(emb, ids), [split(0, (32, 32)), MIRRORED], True) == split(0, (32, 32))
    with pytest.raises(SplitRuleError, match="src0 must be MIRRORED or split on axis 0"):
        derive(ops.get_rows(emb, ids), [split(1, (50, 50)), MIRRORED], True)
    cache, rows, idx = new(192, 32), new(192, 4), new(4, ttype=GGMLType.I64)
    h = split(0, (128, 64))
    assert derive(ops.set_rows(cache, rows, idx), [h, h, MIRRORED], True) == h
    with pytest.raises(SplitRuleError, match="row ids"):
        derive(ops.set_rows(cache, rows, idx), [h, h, split(0, (2, 2))], True)
    gu = new(128, 5)  # gate and up fused along dim 0
    fused = segmented(0, [((32, 32), 2)])
    assert derive(ops.swiglu(gu), [fused], True) == split(0, (32, 32))
    with pytest.raises(SplitRuleError, match="fused GLU"):
        derive(ops.swiglu(gu), [split(0, (64, 64))], True)
    a, b = new(8, 4), new(8, 6)
    assert derive(ops.concat(a, b, 1), [split(1, (2, 2)), split(1, (3, 3))], True).extents() == (5, 5)


def test_an_op_without_a_rule_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    x = new(8, 4)
    node = ops.sqr(x)
    monkeypatch.delitem(RULES, Op.SQR)
    with pytest.raises(SplitRuleError, match=r"SQR node .* has no split rule"):
        derive(node, [MIRRORED], True)


def test_rules_cover_the_op_table() -> None:
    free = {Op.NONE}
    missing = [op.name for op in Op if op not in RULES and op not in free]
    assert not missing, f"ops without a meta split rule: {missing}"
