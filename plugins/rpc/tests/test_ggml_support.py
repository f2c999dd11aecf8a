"""`ggml_cpu_runs` / `refusal`: what the RPC client may send to llama.cpp's ggml-rpc-server (ggml's CPU backend).

No server needed: each test records a node and checks the verdict, and for refusals the ggml reason. The
sweep that checks the same table against a real server is plugins/rpc/benchmarks/ggml_sweep.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import SimpleNamespace

import pytest
from pyggml_rpc.client import RPCDevice
from pyggml_rpc.ggml_support import RULES, VEC_DOT, ggml_cpu_runs, refusal

import pyggml as gg
from pyggml import ops
from pyggml.ops.base import Op
from pyggml.tensor import Tensor
from pyggml.types import GGMLType, type_traits

T = GGMLType
F32, F16, BF16, I32, I64 = T.F32, T.F16, T.BF16, T.I32, T.I64


@pytest.fixture
def ctx() -> Iterator[gg.Context]:
    with gg.Context(no_alloc=True) as c:
        yield c


def strided(ctx: gg.Context, t: GGMLType, *ne: int) -> Tensor:
    """A view of shape ne whose rows (and planes) are strided: not contiguous, not even ggml_is_contiguous_1."""
    blk = type_traits(t).blck_size
    big = ctx.new_tensor(t, ne[0] + blk, ne[1] + 1, *ne[2:])
    return ops.view(big, tuple(ne), big.nb[1:len(ne)])


def permuted(ctx: gg.Context, t: GGMLType, *ne: int) -> Tensor:
    """Shape ne with dims 0 and 1 swapped in memory (nb[0] is not the type size)."""
    leaf = ctx.new_tensor(t, ne[1], ne[0], *ne[2:])
    return ops.permute(leaf, 1, 0, 2, 3)


def test_every_op_has_a_rule() -> None:
    """A new pyggml op must get a deliberate entry (an op without one is refused, see the next test)."""
    assert set(RULES) == set(Op)


def test_an_op_without_a_rule_is_refused(ctx: gg.Context, monkeypatch: pytest.MonkeyPatch) -> None:
    node = ops.add(ctx.new_tensor(F32, 4), ctx.new_tensor(F32, 4))
    monkeypatch.delitem(RULES, Op.ADD)
    assert refusal(node) == "ADD: no rule for this op (not checked against ggml's CPU kernels)"


# ---- llama-family graphs stay supported --------------------------------------------------------------------------

LLAMA: dict[str, Callable[[gg.Context], Tensor]] = {
    "add f32": lambda c: ops.add(c.new_tensor(F32, 64, 8), c.new_tensor(F32, 64)),
    "mul f32 broadcast": lambda c: ops.mul(c.new_tensor(F32, 64, 8, 2), c.new_tensor(F32, 64, 1, 2)),
    "add f16 + f32": lambda c: ops.add(c.new_tensor(F16, 64, 8), c.new_tensor(F32, 64, 8)),
    "rms_norm": lambda c: ops.rms_norm(c.new_tensor(F32, 64, 8), 1e-6),
    "rope neox f16": lambda c: ops.rope(c.new_tensor(F16, 64, 4, 8), c.new_tensor(I32, 8), 64, ops.ROPE_TYPE_NEOX),
    "soft_max f16 mask": lambda c: ops.soft_max(c.new_tensor(F32, 32, 8, 4), c.new_tensor(F16, 32, 8), 0.125),
    "get_rows q4_K": lambda c: ops.get_rows(c.new_tensor(T.Q4_K, 256, 100), c.new_tensor(I32, 8)),
    "swiglu fused": lambda c: ops.swiglu(c.new_tensor(F32, 128, 8)),
    "swiglu split": lambda c: ops.swiglu(c.new_tensor(F32, 64, 8), c.new_tensor(F32, 64, 8)),
    "silu f32": lambda c: ops.silu(c.new_tensor(F32, 64, 8)),
    "gelu f16 (exact table)": lambda c: ops.gelu(c.new_tensor(F16, 64, 8)),
    "gelu f32 (f16 table, within the threshold)": lambda c: ops.gelu(c.new_tensor(F32, 64, 8)),
    "gelu_erf f32": lambda c: ops.gelu_erf(c.new_tensor(F32, 64, 8)),
    "cpy f32 -> f16 cache": lambda c: ops.cpy(c.new_tensor(F32, 64, 4), c.new_tensor(F16, 256)),
    "cpy f32 -> q8_0 cache": lambda c: ops.cpy(c.new_tensor(F32, 64, 4), c.new_tensor(T.Q8_0, 256)),
    "set_rows -> f16 cache": lambda c: ops.set_rows(c.new_tensor(F16, 64, 32), c.new_tensor(F32, 64, 4),
                                                   c.new_tensor(I64, 4)),
    "set_rows -> q8_0 cache": lambda c: ops.set_rows(c.new_tensor(T.Q8_0, 64, 32), c.new_tensor(F32, 64, 4),
                                                    c.new_tensor(I64, 4)),
    "flash_attn f16 kv": lambda c: ops.flash_attn_ext(c.new_tensor(F32, 64, 4, 8), c.new_tensor(F16, 64, 32, 2),
                                                      c.new_tensor(F16, 64, 32, 2), c.new_tensor(F16, 32, 4),
                                                      0.125),
    "mul_mat f16 x f16": lambda c: ops.mul_mat(c.new_tensor(F16, 64, 8), c.new_tensor(F16, 64, 4)),
    "mul_mat f32 x f16 (widened)": lambda c: ops.mul_mat(c.new_tensor(F32, 64, 8), c.new_tensor(F16, 64, 4)),
    "mul_mat permuted batches": lambda c: ops.mul_mat(ops.permute(c.new_tensor(F16, 64, 3, 8), 0, 2, 1, 3),
                                                      c.new_tensor(F32, 64, 4, 3)),
    "count_equal 2-D": lambda c: ops.count_equal(c.new_tensor(I32, 33, 7), c.new_tensor(I32, 33, 7)),
    "view": lambda c: ops.view(c.new_tensor(F32, 64, 8), (32, 8), (256,)),
    "pool_2d f16 input": lambda c: ops.pool_2d(c.new_tensor(F16, 16, 16, 3), ops.PoolOp.MAX, 2, 2, 2, 2),
    "interpolate bilinear, strided source": lambda c: ops.interpolate(strided(c, F32, 8, 4, 3), 16, 8, 3, 1, 1),
    "roll of permuted planes": lambda c: ops.roll(ops.permute(c.new_tensor(F32, 8, 4, 3), 0, 2, 1, 3), 1, 1, 1),
    "dsv4_hc_comb, 4 streams": lambda c: ops.dsv4_hc_comb(c.new_tensor(F32, 24, 5), c.new_tensor(F32, 3),
                                                          c.new_tensor(F32, 24), 1e-6, 20),
    "lightning_indexer q8_0 keys": lambda c: ops.lightning_indexer(c.new_tensor(F32, 64, 4, 3),
                                                                   c.new_tensor(T.Q8_0, 64, 1, 9),
                                                                   c.new_tensor(F32, 4, 3), c.new_tensor(F16, 9, 3)),
}


@pytest.mark.parametrize("name", list(LLAMA))
def test_accepted(ctx: gg.Context, name: str) -> None:
    node = LLAMA[name](ctx)
    assert refusal(node) is None
    assert ggml_cpu_runs(node)


@pytest.mark.parametrize("qtype", sorted(t for t in VEC_DOT if type_traits(t).is_quantized),
                         ids=str)
def test_every_quantized_mul_mat_with_f32_activations(ctx: gg.Context, qtype: GGMLType) -> None:
    k = type_traits(qtype).blck_size * 2
    assert ggml_cpu_runs(ops.mul_mat(ctx.new_tensor(qtype, k, 16), ctx.new_tensor(F32, k, 3)))
    assert ggml_cpu_runs(ops.mul_mat_id(ctx.new_tensor(qtype, k, 16, 4), ctx.new_tensor(F32, k, 2, 3),
                                        ctx.new_tensor(I32, 2, 3)))
    assert ggml_cpu_runs(ops.get_rows(ctx.new_tensor(qtype, k, 16), ctx.new_tensor(I32, 3)))


# ---- refusals, each with ggml's reason ---------------------------------------------------------------------------

REFUSED: dict[str, tuple[Callable[[gg.Context], Tensor], str]] = {
    "add f32 + f16": (lambda c: ops.add(c.new_tensor(F32, 8), c.new_tensor(F16, 8)),
                      "binary_op: unsupported types: dst f32, src0 f32, src1 f16"),
    "mul of permuted src0": (lambda c: ops.mul(permuted(c, F32, 8, 4), c.new_tensor(F32, 8)),
                             "needs nb[0] == type size"),
    "mul_mat q4_0 x f16": (lambda c: ops.mul_mat(c.new_tensor(T.Q4_0, 64, 8), c.new_tensor(F16, 64, 2)),
                           "src1 f16 is neither F32 nor q4_0's vec_dot type q8_0"),
    "mul_mat bf16 x f16": (lambda c: ops.mul_mat(c.new_tensor(BF16, 64, 8), c.new_tensor(F16, 64, 2)),
                           "vec_dot type bf16"),
    "mul_mat q8_1 weights": (lambda c: ops.mul_mat(c.new_tensor(T.Q8_1, 64, 8), c.new_tensor(F32, 64, 2)),
                             "q8_1 has no vec_dot kernel"),
    "mul_mat transposed src1": (lambda c: ops.mul_mat(c.new_tensor(F32, 8, 4), permuted(c, F32, 8, 3)),
                                "src1 f32"),
    "mul_mat_id f32 x f16": (lambda c: ops.mul_mat_id(c.new_tensor(F32, 64, 8, 4), c.new_tensor(F16, 64, 2, 3),
                                                      c.new_tensor(I32, 2, 3)), "mul_mat_id widens nothing"),
    "out_prod bf16": (lambda c: ops.out_prod(c.new_tensor(BF16, 8, 4), c.new_tensor(F32, 6, 4)),
                      "out_prod has no bf16 kernel"),
    "out_prod f16 src1": (lambda c: ops.out_prod(c.new_tensor(T.Q4_0, 32, 4), c.new_tensor(F16, 6, 4)),
                          "src1 must be F32"),
    "out_prod q4_0 broadcast": (lambda c: ops.out_prod(c.new_tensor(T.Q4_0, 32, 4), c.new_tensor(F32, 6, 4, 2)),
                                "cannot broadcast"),
    "scale f16": (lambda c: ops.scale(c.new_tensor(F16, 8), 2.0), "scale has no f16 kernel"),
    "scale strided": (lambda c: ops.scale(strided(c, F32, 8, 4), 2.0), "needs it contiguous"),
    "acc f16": (lambda c: ops.acc(c.new_tensor(F16, 8, 4), c.new_tensor(F16, 8), 16, 64, 64, 0),
                "acc has no f16 kernel"),
    "set bf16": (lambda c: ops.set_(c.new_tensor(BF16, 8, 4), c.new_tensor(BF16, 8), 16, 64, 64, 0),
                 "set has no bf16 kernel"),
    "fill bf16": (lambda c: ops.fill(c.new_tensor(BF16, 8), 1.0), "fill has no bf16 kernel"),
    "clamp bf16": (lambda c: ops.clamp(c.new_tensor(BF16, 8), -1.0, 1.0), "clamp has no bf16 kernel"),
    "clamp strided planes": (lambda c: ops.clamp(strided(c, F32, 8, 4, 3), -1.0, 1.0), "rows walked as i*nb[1]"),
    "leaky_relu strided planes": (lambda c: ops.leaky_relu(strided(c, F16, 8, 4, 3), 0.1), "rows walked"),
    "glu strided": (lambda c: ops.swiglu(strided(c, F32, 8, 4, 3)), "rows walked as i*nb[1]"),
    "unary of permuted": (lambda c: ops.exp(permuted(c, F32, 8, 4)), "needs nb[0] == type size"),
    "gelu_quick f32 table": (lambda c: ops.gelu_quick(c.new_tensor(F32, 8)), "f16 table"),
    "geglu f16 table": (lambda c: ops.geglu(c.new_tensor(F16, 16)), "GEGLU f16 rounds through ggml's f16 table"),
    "sum of permuted": (lambda c: ops.sum(permuted(c, F32, 8, 4)), "needs nb[0] == type size"),
    "top_k strided planes": (lambda c: ops.top_k(strided(c, F32, 8, 1, 2), 2), "rows walked as i*nb[1]"),
    "count_equal 3-D": (lambda c: ops.count_equal(c.new_tensor(I32, 33, 7, 3), c.new_tensor(I32, 33, 7, 3)),
                        "count_equal_i32 splits 3-D/4-D row indices wrongly"),
    "repeat i8": (lambda c: ops.repeat(c.new_tensor(T.I8, 8), c.new_tensor(T.I8, 8, 2)), "repeat has no i8 kernel"),
    "cpy f16 -> q8_0": (lambda c: ops.cpy(c.new_tensor(F16, 64), c.new_tensor(T.Q8_0, 64)),
                        "q8_0 SIMD quantizer rounds ties to even"),
    "cpy f16 -> i32": (lambda c: ops.cpy(c.new_tensor(F16, 8), c.new_tensor(I32, 8)), "does not reserve"),
    "cpy i32 -> f16": (lambda c: ops.cpy(c.new_tensor(I32, 8), c.new_tensor(F16, 8)), "no i32 -> f16 conversion"),
    "cpy f32 -> q4_K, partial blocks per row": (lambda c: ops.cpy(c.new_tensor(F32, 128, 4),
                                                                  c.new_tensor(T.Q4_K, 512)),
                                                "not a multiple of q4_K's 256"),
    "cpy f32 -> q4_0, longer src rows": (lambda c: ops.cpy(c.new_tensor(F32, 512), c.new_tensor(T.Q4_0, 256, 2)),
                                         "row buffer is sized by dst ne[0]"),
    "cpy f32 -> iq2_xxs": (lambda c: ops.cpy(c.new_tensor(F32, 256), c.new_tensor(T.IQ2_XXS, 256)),
                           "no CPU quantizer"),
    "cpy q8_k -> f32": (lambda c: ops.cpy(c.new_tensor(T.Q8_K, 256), c.new_tensor(F32, 256)), "no dequantizer"),
    "cont q4_0 strided, new shape": (lambda c: ops.cont(strided(c, T.Q4_0, 64, 4), 128, 2),
                                     "dup_bytes copies ne00*type_size bytes"),
    "set_rows -> iq2_xxs": (lambda c: ops.set_rows(c.new_tensor(T.IQ2_XXS, 256, 4), c.new_tensor(F32, 256, 1),
                                                   c.new_tensor(I64, 1)), "set_rows (from_float) has no iq2_xxs"),
    "get_rows q8_K": (lambda c: ops.get_rows(c.new_tensor(T.Q8_K, 256, 4), c.new_tensor(I32, 2)),
                      "get_rows has no q8_K kernel"),
    "pool_1d strided planes": (lambda c: ops.pool_1d(strided(c, F32, 8, 4, 3), ops.PoolOp.AVG, 2, 2),
                               "rows walked as i*nb[1]"),
    "win_part strided": (lambda c: ops.win_part(strided(c, F32, 8, 4, 3), 2), "needs it contiguous"),
    "dsv4_hc_comb, 3 streams": (lambda c: ops.dsv4_hc_comb(c.new_tensor(F32, 15, 5), c.new_tensor(F32, 3),
                                                           c.new_tensor(F32, 15), 1e-6, 4), "hc = 4 streams only"),
    "add_rel_pos permuted pw": (lambda c: ops.add_rel_pos(c.new_tensor(F32, 4, 6, 2), permuted(c, F32, 2, 3, 2, 2),
                                                          c.new_tensor(F32, 2, 3, 2, 2)), "src1"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused(ctx: gg.Context, name: str) -> None:
    build, reason = REFUSED[name]
    node = build(ctx)
    why = refusal(node)
    assert why is not None and reason in why, why
    assert not ggml_cpu_runs(node)


def test_same_type_quantized_copies(ctx: gg.Context) -> None:
    """dup_bytes copies strided block rows fine when the shape is kept (row by row); only a reshaping copy
    out of a strided source into a contiguous dst misreads."""
    assert ggml_cpu_runs(ops.cont(strided(ctx, T.Q4_0, 64, 4)))
    assert ggml_cpu_runs(ops.dup(strided(ctx, T.Q8_0, 64, 4)))
    assert ggml_cpu_runs(ops.cont(ctx.new_tensor(T.Q4_K, 512, 2), 256, 4))


def test_count_equal_square_planes_index_right(ctx: gg.Context) -> None:
    """ggml's row split happens to be right for ne[1] == ne[2] (ne[3] == 1)."""
    a = ctx.new_tensor(I32, 33, 7, 7)
    assert ggml_cpu_runs(ops.count_equal(a, ctx.new_tensor(I32, 33, 7, 7)))


def test_client_hook(ctx: gg.Context) -> None:
    """RPCDevice.supports_op asks the predicate of a ggml server, not of a pyggml one (no server needed: only the
    connection's HELLO mark is read)."""
    dev = object.__new__(RPCDevice)
    mixed = ops.add(ctx.new_tensor(F32, 8), ctx.new_tensor(F16, 8))
    for pyggml_server in (False, True):
        conn = SimpleNamespace(pyggml_server=pyggml_server, answers_supports_op=False)  # (test_supports_op.py)
        dev.server = SimpleNamespace(conn=conn)  # type: ignore[assignment]
        assert dev.supports_op(ops.add(ctx.new_tensor(F32, 8), ctx.new_tensor(F32, 8)))
        assert dev.supports_op(mixed) is pyggml_server


def test_training_ops(ctx: gg.Context) -> None:
    """ggml's training kernels: contiguous inputs run; SILU_BACK walks rows at one stride, SOFT_MAX_BACK and
    CROSS_ENTROPY_LOSS_BACK assert contiguity, the optimiser steps read the state at the parameter's strides."""
    g, x = ctx.new_tensor(F32, 16, 4, 3), ctx.new_tensor(F32, 16, 4, 3)
    assert ggml_cpu_runs(ops.silu_back(g, x))
    assert ggml_cpu_runs(ops.soft_max_ext_back(g, x, 0.5))
    assert ggml_cpu_runs(ops.cross_entropy_loss(g, x))
    assert ggml_cpu_runs(ops.repeat_back(ctx.new_tensor(F32, 16, 8, 3), g))
    assert "contiguous" in (refusal(ops.silu_back(strided(ctx, F32, 16, 4, 3), x)) or "")
    assert "contiguous" in (refusal(ops.soft_max_ext_back(strided(ctx, F32, 16, 4, 3), x)) or "")
    one = ctx.new_tensor(F32, 1)
    assert "contiguous" in (refusal(ops.cross_entropy_loss_back(one, strided(ctx, F32, 16, 4, 3), x)) or "")
    w = ctx.new_tensor(F32, 16, 4, 3).set_param()
    hp = ctx.new_tensor(F32, 7)
    assert ggml_cpu_runs(ops.opt_step_adamw(w, g, ctx.new_tensor(F32, 16, 4, 3), ctx.new_tensor(F32, 16, 4, 3), hp))
    why = refusal(ops.opt_step_adamw(w, g, strided(ctx, F32, 16, 4, 3), ctx.new_tensor(F32, 16, 4, 3), hp))
    assert why is not None and "src2" in why and "strides" in why
    assert "src1" in (refusal(ops.opt_step_sgd(w, strided(ctx, F32, 16, 4, 3), ctx.new_tensor(F32, 2))) or "")
