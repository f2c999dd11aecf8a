"""Every op family on the first OpenCL device against the numpy reference (NMSE, ggml's thresholds)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml.ops.elementwise import GluOp, UnaryOp
from pyggml.ops.reduce import SortOrder
from pyggml.tensor import Tensor
from pyggml.types import GGMLType as T
from pyggml_testing.activations import any_glu, any_unary
from pyggml_testing.compare import nmse
from pyggml_testing.devices import numpy_device
from pyggml_testing.on_device import run_on

Case = Callable[[Context], list[Tensor]]
CASES: dict[str, tuple[Case, float]] = {}


def case(name: str, tol: float = 1e-6) -> Callable[[Case], Case]:
    def deco(fn: Case) -> Case:
        CASES[name] = (fn, tol)
        return fn

    return deco


def nt(ctx: Context, t: T, *ne: int, name: str = "") -> Tensor:
    return ctx.new_tensor(t, *ne, name=name)


for _t in (T.F32, T.F16):
    for _op in (ops.add, ops.sub, ops.mul, ops.div):
        case(f"{_op.__name__}_{_t}")(lambda c, op=_op, t=_t: [op(nt(c, t, 16, 5, 3), nt(c, T.F32, 16, 1, 3))])
case("add_bcast_permuted")(lambda c: [ops.add(ops.permute(nt(c, T.F32, 8, 6, 4), 1, 0, 2, 3), nt(c, T.F32, 6, 8))])
case("add1")(lambda c: [ops.add1(nt(c, T.F32, 10, 3), nt(c, T.F32, 1))])
for _u in UnaryOp:
    case(f"unary_{_u.name}")(lambda c, u=_u: [any_unary(nt(c, T.F32, 33, 4), u)])
case("sqr_sqrt_log")(lambda c: [ops.sqr(a := nt(c, T.F32, 20, 3)), ops.sqrt(ops.sqr(a)), ops.log(ops.sqr(a)),
                                ops.sin(a), ops.cos(a)])
case("scale_clamp_leaky_fill")(lambda c: [ops.scale(a := nt(c, T.F32, 20, 3), 0.5, 1.0), ops.clamp(a, -0.5, 0.5),
                                          ops.leaky_relu(a, 0.1), ops.fill(a, 3.0)])
for _g in GluOp:
    case(f"glu_{_g.name}")(lambda c, g=_g: [any_glu(nt(c, T.F32, 32, 3), g), any_glu(a := nt(c, T.F32, 16, 3), g,
                                            nt(c, T.F32, 16, 3)), any_glu(a, g, nt(c, T.F32, 16, 3), swapped=True),
                                            any_glu(nt(c, T.F32, 32, 3), g, swapped=True)])
case("cpy_f32_f16_cont")(lambda c: [ops.cpy(a := nt(c, T.F32, 12, 5), nt(c, T.F16, 12, 5)),
                                    ops.cont(ops.transpose(a)), ops.cont(a, 60), ops.dup(a)])
case("cpy_i32")(lambda c: [ops.cpy(nt(c, T.I32, 7, 3), nt(c, T.I32, 21)), ops.cpy(nt(c, T.F32, 7, 3), nt(c, T.I32, 21)),
                            ops.cpy(nt(c, T.I32, 7, 3), nt(c, T.F16, 21))])
for _q in (T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.IQ4_NL):
    case(f"cpy_f32_{_q}", 1e-3)(lambda c, q=_q: [ops.cpy(nt(c, T.F32, 64, 3), nt(c, q, 64, 3))])
    case(f"get_rows_{_q}")(lambda c, q=_q: [ops.get_rows(nt(c, q, 64, 10), nt(c, T.I32, 4, name="ids10"))])
    case(f"set_rows_{_q}", 1e-3)(lambda c, q=_q: [ops.set_rows(nt(c, q, 64, 10), nt(c, T.F32, 64, 3),
                                                               nt(c, T.I64, 3, name="ids10"))])
for _t in (T.F32, T.F16, T.I32):
    case(f"get_rows_{_t}")(lambda c, t=_t: [ops.get_rows(nt(c, t, 9, 10, 2), nt(c, T.I32, 4, 2, name="ids10"))])
case("set_rows_f16")(lambda c: [ops.set_rows(nt(c, T.F16, 16, 10), nt(c, T.F32, 16, 3), nt(c, T.I32, 3, name="ids10"))])
for _op in (ops.norm, ops.rms_norm, ops.l2_norm):
    case(f"{_op.__name__}")(lambda c, op=_op: [op(nt(c, T.F32, 100, 3, 2), 1e-5)])
case("group_norm")(lambda c: [ops.group_norm(nt(c, T.F32, 6, 5, 7, 2), 3)])
case("soft_max")(lambda c: [ops.soft_max(nt(c, T.F32, 70, 4, 3), scale=0.7)])
case("soft_max_mask_alibi_sinks")(lambda c: [ops.soft_max(nt(c, T.F32, 70, 4, 4), nt(c, T.F16, 70, 5, name="mask"),
                                                           0.5, 8.0, nt(c, T.F32, 4))])
for _mode in (0, 2):
    for _t in (T.F32, T.F16):
        case(f"rope_{_mode}_{_t}")(lambda c, m=_mode, t=_t: [
            ops.rope(nt(c, t, 16, 3, 5), nt(c, T.I32, 5, name="ids100"), 12, m)])
    case(f"rope_yarn_ff_{_mode}")(lambda c, m=_mode: [ops.rope(
        nt(c, T.F32, 16, 3, 5), nt(c, T.I32, 5, name="ids4000"), 16, m, freq_factors=nt(c, T.F32, 8),
        n_ctx_orig=4096, freq_scale=0.25, ext_factor=1.0, attn_factor=1.1)])
for _w in (T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.IQ4_NL):
    for _n in (1, 3, 19):
        case(f"mul_mat_{_w}_n{_n}", 5e-4)(lambda c, w=_w, n=_n: [
            ops.mul_mat(nt(c, w, 96, 37, 2), nt(c, T.F32, 96, n, 4))])
for _k in (T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K):
    case(f"mul_mat_{_k}", 5e-4)(lambda c, k=_k: [ops.mul_mat(nt(c, k, 512, 9, 2), nt(c, T.F32, 512, 2, 2)),
                                                 ops.mul_mat(nt(c, k, 256, 33), nt(c, T.F32, 256, 12))])
    case(f"get_rows_{_k}")(lambda c, k=_k: [ops.get_rows(nt(c, k, 256, 10), nt(c, T.I32, 4, name="ids10"))])
case("mul_mat_f32_odd_k", 5e-4)(lambda c: [ops.mul_mat(nt(c, T.F32, 45, 33), nt(c, T.F32, 45, 17)),
                                           ops.mul_mat(nt(c, T.F32, 45, 3), nt(c, T.F16, 45, 2))])
case("mul_mat_permuted_b", 5e-4)(lambda c: [ops.mul_mat(nt(c, T.F16, 32, 20, 3),
                                                        ops.permute(nt(c, T.F32, 32, 3, 9), 0, 2, 1, 3))])
case("mul_mat_id", 5e-4)(lambda c: [ops.mul_mat_id(nt(c, T.Q4_0, 64, 16, 4), nt(c, T.F32, 64, 1, 5),
                                                   nt(c, T.I32, 2, 5, name="ids4"))])
case("out_prod", 5e-4)(lambda c: [ops.out_prod(nt(c, T.F32, 7, 9), nt(c, T.F32, 5, 9)),
                                  ops.out_prod(nt(c, T.Q4_0, 64, 9, 2), nt(c, T.F16, 5, 9, 2)),
                                  ops.out_prod(nt(c, T.Q6_K, 256, 3), nt(c, T.F32, 4, 3))])
for _kv in (T.F32, T.F16, T.Q8_0):
    case(f"flash_attn_{_kv}", 5e-4)(lambda c, kv=_kv: [ops.flash_attn_ext(
        nt(c, T.F32, 64, 3, 8), nt(c, kv, 64, 100, 2), nt(c, kv, 64, 100, 2), nt(c, T.F16, 100, 4, name="mask"),
        0.125)])
case("flash_attn_decode_split_keys", 5e-4)(lambda c: [ops.flash_attn_ext(  # 6 key splits and their merge
    nt(c, T.F32, 64, 1, 8), nt(c, T.F16, 64, 1500, 2), nt(c, T.F16, 64, 1500, 2), nt(c, T.F16, 1500, 1, name="mask"),
    0.125, sinks=nt(c, T.F32, 8))])
case("flash_attn_softcap_alibi_sinks", 5e-4)(lambda c: [ops.flash_attn_ext(
    nt(c, T.F32, 32, 2, 4), nt(c, T.F16, 32, 70, 4), nt(c, T.F16, 48, 70, 4), nt(c, T.F32, 70, 2, name="mask"),
    0.2, 4.0, 30.0, nt(c, T.F32, 4))])
case("repeat_concat_pad")(lambda c: [ops.repeat(a := nt(c, T.F32, 5, 2), nt(c, T.F32, 10, 4, 3)),
                                     ops.concat(a, nt(c, T.F32, 5, 3), 1), ops.pad(a, 2, 1, 1)])
case("set_acc")(lambda c: [ops.set_(a := nt(c, T.F32, 10, 6), nt(c, T.F32, 4, 2), 40, 240, 240, 8),
                           ops.acc(a, nt(c, T.F32, 4, 2), 40, 240, 240, 12)])
case("diag_masks_arange")(lambda c: [ops.diag(nt(c, T.F32, 6, 1, 2)), ops.diag_mask_inf(a := nt(c, T.F32, 8, 5), 2),
                                     ops.diag_mask_zero(a, 1), ops.arange(c, 1.0, 9.0, 0.5)])
case("reductions")(lambda c: [ops.sum(a := nt(c, T.F32, 50, 4)), ops.sum_rows(a), ops.mean(a), ops.cumsum(a),
                              ops.argmax(a)])
case("argsort_top_k")(lambda c: [ops.argsort(a := nt(c, T.F32, 30, 4), SortOrder.ASC),
                                 ops.argsort(a, SortOrder.DESC), ops.top_k(a, 5)])
case("count_equal")(lambda c: [ops.count_equal(nt(c, T.I32, 40, name="ids3"), nt(c, T.I32, 40, name="ids3"))])


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_reference(dev, name: str) -> None:  # type: ignore[no-untyped-def]
    build, tol = CASES[name]
    ref = run_on(numpy_device(), build)
    got = run_on(dev, build)
    for i, (r, g) in enumerate(zip(ref, got, strict=True)):
        assert r.shape == g.shape
        err = nmse(g, r)
        assert err <= tol, f"{name} output {i}: NMSE {err:.3g} > {tol:g}\nref={r.ravel()[:8]}\ngot={g.ravel()[:8]}"


def test_supports_declares_every_case(dev) -> None:  # type: ignore[no-untyped-def]
    for name, (build, _) in CASES.items():
        for out in build(Context(no_alloc=True)):
            assert dev.supports_op(out), name


def test_flash_attention_splits_the_keys_only_where_query_rows_are_few() -> None:
    from pyggml_dialect.ops.attention import n_split

    c = Context(no_alloc=True)
    k4096 = nt(c, T.F16, 64, 4096, 4)
    assert n_split(nt(c, T.F32, 64, 1, 32), k4096) == 16  # decode, 1.1B shape at depth 4096: 512 work-groups
    assert n_split(nt(c, T.F32, 64, 512, 32), k4096) == 1  # a prompt fills the device by its rows
    assert n_split(nt(c, T.F32, 64, 1, 32), nt(c, T.F16, 64, 200, 4)) == 1  # few keys: one split
    assert n_split(nt(c, T.F32, 64, 1, 8), nt(c, T.F16, 64, 1500, 2)) == 6  # the case above
