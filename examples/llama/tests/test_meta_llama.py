"""Tensor parallelism of llama models (pyggml_llama.split_states): the name-pattern table, a small random llama (two
layers) through the scheduler on 2 and 3 fake devices against one device, two allreduces per layer, and bad input
refused up front."""

from __future__ import annotations

import pytest

import pyggml as gg
from pyggml.backend.meta import MIRRORED, Axis, MetaBackend, split
from pyggml.errors import PyGGMLError, ShapeError
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_llama import synthetic
from pyggml_llama.split_states import LlamaSplit, llama_meta_device
from pyggml_testing.compare import nmse
from pyggml_testing.devices import numpy_backend
from pyggml_testing.llama import STEPS, TINY, run_tiny, tiny_values
from pyggml_testing.meta import devices

# ---- the table ---------------------------------------------------------------------------------------------


def smollm2_states(n: int, ts: tuple[float, ...] | None = None) -> tuple[LlamaSplit, dict[str, Tensor]]:
    _, w = synthetic.synthetic_weights()
    return LlamaSplit(synthetic.SMOLLM2_135M, n, ts, {k: t.type for k, t in w.items()}), w


def test_smollm2_table_splits_heads_ffn_and_cache() -> None:
    fn, w = smollm2_states(3)
    st = {name: fn(t) for name, t in w.items()}
    assert st["token_embd.weight"] == MIRRORED and st["blk.0.attn_norm.weight"] == MIRRORED
    assert st["blk.0.attn_q.weight"] == split(1, (192, 192, 192))  # 3 query heads of 64 per KV head
    assert st["blk.0.attn_k.weight"] == split(1, (64, 64, 64))
    assert st["blk.0.attn_output.weight"] == split(0, (192, 192, 192))
    assert st["blk.7.ffn_up.weight"] == split(1, (512, 512, 512)) == st["blk.7.ffn_gate.weight"]
    assert st["blk.7.ffn_down.weight"] == split(0, (512, 512, 512))
    ctx = gg.Context(no_alloc=True)
    cache = ctx.new_tensor(GGMLType.F16, 192, 256, name="cache_k_l4")
    assert fn(cache) == split(0, (64, 64, 64))


def test_uneven_shares_rotate_by_layer_and_follow_tensor_split() -> None:
    fn, w = smollm2_states(2)
    q0, q1 = fn(w["blk.0.attn_q.weight"]), fn(w["blk.1.attn_q.weight"])
    assert {q0.extents(), q1.extents()} == {(384, 192), (192, 384)}  # 3 KV heads: the extra one rotates
    assert fn(w["blk.0.attn_k.weight"]).extents() == tuple(e // 3 for e in q0.extents())
    fn31, _ = smollm2_states(2, (3, 1))
    assert fn31(w["blk.5.ffn_down.weight"]).extents() == (1152, 384)
    assert fn31(w["blk.5.attn_v.weight"]).extents() == (128, 64)
    fn0, _ = smollm2_states(3, (1, 1, 0))
    assert fn0(w["blk.3.attn_q.weight"]).extents()[2] == 0 and fn0(w["blk.3.ffn_up.weight"]).extents()[2] == 0


def test_fused_qkv_and_gate_up_get_segments() -> None:
    fn = LlamaSplit(TINY, 3)
    ctx = gg.Context(no_alloc=True)
    qkv = fn(ctx.new_tensor(GGMLType.F32, 96, 96 + 2 * 48, name="blk.0.attn_qkv.weight"))
    assert qkv.axis == Axis.AXIS_1 and [s.nr for s in qkv.segments] == [1, 2]
    assert qkv.extents() == (64, 64, 64)  # per device 32 query rows + 2 x 16 KV rows
    gu = fn(ctx.new_tensor(GGMLType.F32, 96, 256, name="blk.1.ffn_gate_up.weight"))
    assert gu.segments[0].nr == 2 and sum(gu.extents()) == 256


def test_bad_llama_splits() -> None:
    with pytest.raises(ShapeError, match="4 devices but only 3 groups of KV heads"):
        smollm2_states(4)
    with pytest.raises(ShapeError, match="3 entries for 2 devices"):
        smollm2_states(2, (1, 1, 1))
    wide = {"blk.0.attn_output.weight": GGMLType.Q4_K}  # 256-element blocks: no group of 3 x 64 rows fills one
    with pytest.raises(ShapeError, match="blocks of 256"):
        LlamaSplit(synthetic.SMOLLM2_135M, 2, None, wide)


# ---- a small random llama through the scheduler -----------------------------------------------------------------


@pytest.mark.parametrize(("n", "ts"), [(2, None), (3, None), (2, (3.0, 1.0)), (3, (1.0, 0.0, 2.0))])
def test_tiny_llama_on_meta_equals_one_device(n: int, ts: tuple[float, ...] | None) -> None:
    cpu = numpy_backend()
    ref = run_tiny([cpu], cpu.device.buffer_type(), STEPS)
    types = {name: t for name, (t, _, _) in tiny_values(TINY).items()}
    meta = llama_meta_device(devices(n), TINY, ts, types)
    backend = MetaBackend(meta)
    got = run_tiny([backend, numpy_backend()], meta.buffer_type(), STEPS)
    for a, b in zip(got, ref, strict=True):
        assert nmse(a, b) < 1e-10
    assert backend.last_plan.n_allreduce == 2 * TINY.n_layer  # attention output and FFN down, per layer
    assert backend.plans_built == len(STEPS)


def test_shares_that_break_quantisation_blocks_are_refused_when_weights_load() -> None:
    meta = llama_meta_device(devices(3), TINY, None, {})  # block sizes not told: FFN split in 43/43/42
    cpu = numpy_backend()
    with pytest.raises(ShapeError, match=r"ffn_down.weight' q8_0 .* breaks the granularity"):
        run_tiny([MetaBackend(meta), cpu], meta.buffer_type(), STEPS[:1])


def test_attention_without_flash_attn_is_refused_before_compute() -> None:
    devs = devices(3)
    meta = llama_meta_device(devs, TINY, None, {name: t for name, (t, _, _) in tiny_values(TINY).items()})
    # the transposed V cache's one-value rows cannot follow a head split: refused with the node and its states
    with pytest.raises(PyGGMLError, match=r"SET_ROWS node 'cache_v_l0 .* must be split alike"):
        run_tiny([MetaBackend(meta), numpy_backend()], meta.buffer_type(), STEPS[:1], flash_attn=False)
    assert all(not d.computed for d in devs)
