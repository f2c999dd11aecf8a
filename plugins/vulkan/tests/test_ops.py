"""Vulkan ops against the numpy reference (the conformance suite does this at scale)."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml.ops.elementwise import GluOp, UnaryOp
from pyggml_testing.activations import any_glu, any_unary
from pyggml_testing.on_device import compare, rand

QTYPES = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K"]


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
@pytest.mark.parametrize("btype", ["f32", "f16"])
def test_binary_broadcast(backend, op, btype):
    def build(ctx: Context):
        a = ctx.new_tensor("f32", 37, 4, 3, name="a")
        b = ctx.new_tensor(btype, 37, 1, 3, name="b")
        return [a, b], getattr(ops, op)(a, b)

    compare(build, backend, {"a": rand(3, 4, 37), "b": rand(3, 1, 37, seed=1) + 3})


@pytest.mark.parametrize("uop", list(UnaryOp))
def test_unary(backend, uop):
    def build(ctx: Context):
        a = ctx.new_tensor("f32", 129, 3, name="a")
        return [a], any_unary(a, uop)

    compare(build, backend, {"a": rand(3, 129, scale=3)}, tol=1e-6)


@pytest.mark.parametrize("name,args", [("scale", (0.5, 2.0)), ("clamp", (-0.5, 0.7)), ("leaky_relu", (0.1,)),
                                       ("sqr", ()), ("sin", ()), ("cos", ()), ("fill", (3.5,))])
def test_math(backend, name, args):
    def build(ctx: Context):
        a = ctx.new_tensor("f32", 64, 5, name="a")
        return [a], getattr(ops, name)(a, *args)

    compare(build, backend, {"a": rand(5, 64)})


@pytest.mark.parametrize("glu", list(GluOp))
@pytest.mark.parametrize("split,swapped", [(False, False), (False, True), (True, False), (True, True)])
def test_glu(backend, glu, split, swapped):
    def build(ctx: Context):
        a = ctx.new_tensor("f32", 64 if split else 128, 3, name="a")
        b = ctx.new_tensor("f32", 64, 3, name="b") if split else None
        return [a] + ([b] if b is not None else []), any_glu(a, glu, b, swapped=swapped)

    data = {"a": rand(3, 64 if split else 128), "b": rand(3, 64, seed=2)}
    compare(build, backend, data, tol=1e-6)


@pytest.mark.parametrize("name", ["norm", "rms_norm", "l2_norm"])
def test_norms(backend, name):
    def build(ctx: Context):
        a = ctx.new_tensor("f32", 300, 3, 2, name="a")
        return [a], getattr(ops, name)(a, 1e-5)

    compare(build, backend, {"a": rand(2, 3, 300)})


@pytest.mark.parametrize("mask_type", [None, "f32", "f16"])
@pytest.mark.parametrize("max_bias", [0.0, 8.0])
def test_soft_max(backend, mask_type, max_bias):
    if mask_type is None and max_bias:
        pytest.skip("ALiBi needs a mask")

    def build(ctx: Context):
        a = ctx.new_tensor("f32", 70, 5, 4, name="a")
        m = ctx.new_tensor(mask_type, 70, 8, name="m") if mask_type else None
        ins = [a] + ([m] if m is not None else [])
        return ins, ops.soft_max(a, m, scale=0.3, max_bias=max_bias)

    mask = np.where(np.random.default_rng(3).random((8, 70)) < 0.2, -np.inf, 0.0).astype(np.float32)
    compare(build, backend, {"a": rand(4, 5, 70, scale=3), "m": mask}, tol=1e-6)


def test_soft_max_sinks(backend):
    def build(ctx: Context):
        a = ctx.new_tensor("f32", 33, 2, 4, name="a")
        s = ctx.new_tensor("f32", 4, name="s")
        return [a, s], ops.soft_max(a, None, scale=1.0, sinks=s)

    compare(build, backend, {"a": rand(4, 2, 33), "s": rand(4, seed=5)}, tol=1e-6)


@pytest.mark.parametrize("mode", [0, 2])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("yarn", [False, True])
def test_rope(backend, mode, dtype, yarn):
    def build(ctx: Context):
        a = ctx.new_tensor(dtype, 64, 4, 6, name="a")
        pos = ctx.new_tensor("i32", 6, name="pos")
        kw = dict(n_ctx_orig=512, ext_factor=1.0, freq_scale=0.25, beta_fast=32, beta_slow=1) if yarn else {}
        return [a, pos], ops.rope(a, pos, 48, mode, **kw)

    tol = 1e-6 if dtype == "f32" else 1e-5
    compare(build, backend, {"a": rand(6, 4, 64), "pos": np.array([0, 3, 7, 100, 513, 2000], np.int32)}, tol=tol)


@pytest.mark.parametrize("qtype", ["f32", "f16", "bf16", *QTYPES])
def test_get_rows(backend, qtype):
    def build(ctx: Context):
        a = ctx.new_tensor(qtype, 256, 10, name="a")
        ids = ctx.new_tensor("i32", 4, name="ids")
        return [a, ids], ops.get_rows(a, ids)

    compare(build, backend, {"a": rand(10, 256), "ids": np.array([3, 0, 9, 3], np.int32)})


@pytest.mark.parametrize("src,dst", [("f32", "f16"), ("f16", "f32"), ("f32", "bf16"), ("f32", "f32"),
                                     ("q8_0", "f32"), ("q4_K", "f32")])
def test_cpy(backend, src, dst):
    def build(ctx: Context):
        a = ctx.new_tensor(src, 256, 3, name="a")
        b = ctx.new_tensor(dst, 256, 3, name="b")
        return [a, b], ops.cpy(a, b)

    compare(build, backend, {"a": rand(3, 256), "b": np.zeros((3, 256), np.float32)})


def test_cont_transposed(backend):
    def build(ctx: Context):
        a = ctx.new_tensor("f32", 7, 5, 3, name="a")
        return [a], ops.cont(ops.transpose(a))

    compare(build, backend, {"a": rand(3, 5, 7)})


@pytest.mark.parametrize("dst", ["f32", "f16"])
@pytest.mark.parametrize("idt", ["i32", "i64"])
def test_set_rows(backend, dst, idt):
    def build(ctx: Context):
        a = ctx.new_tensor(dst, 32, 8, name="a")
        b = ctx.new_tensor("f32", 32, 3, name="b")
        ids = ctx.new_tensor(idt, 3, name="ids")
        return [a, b, ids], ops.set_rows(a, b, ids)

    compare(build, backend, {"a": rand(8, 32), "b": rand(3, 32, seed=1), "ids": np.array([5, 0, 7])})


@pytest.mark.parametrize("atype", ["f32", "f16", "bf16", *QTYPES])
@pytest.mark.parametrize("n", [1, 13])
def test_mul_mat(backend, atype, n):
    def build(ctx: Context):
        a = ctx.new_tensor(atype, 256, 40, 2, name="a")
        b = ctx.new_tensor("f32", 256, n, 4, name="b")
        return [a, b], ops.mul_mat(a, b)

    compare(build, backend, {"a": rand(2, 40, 256), "b": rand(4, n, 256, seed=1)}, tol=5e-4)


@pytest.mark.parametrize("kv", ["f16", "f32", "q8_0"])
@pytest.mark.parametrize("masked,softcap,max_bias", [(True, 0.0, 0.0), (False, 0.0, 0.0), (True, 30.0, 0.0),
                                                     (True, 0.0, 8.0)])
def test_flash_attn(backend, kv, masked, softcap, max_bias):
    d, n_q, n_kv, h, hk = 64, 3, 70, 4, 2

    def build(ctx: Context):
        q = ctx.new_tensor("f32", d, n_q, h, name="q")
        k = ctx.new_tensor(kv, d, n_kv, hk, name="k")
        v = ctx.new_tensor(kv, d, n_kv, hk, name="v")
        m = ctx.new_tensor("f16", n_kv, 8, name="m") if masked else None
        ins = [q, k, v] + ([m] if m is not None else [])
        return ins, ops.flash_attn_ext(q, k, v, m, scale=0.125, max_bias=max_bias, logit_softcap=softcap)

    mask = np.zeros((8, n_kv), np.float32)
    mask[:, 60:] = -np.inf
    mask[1, :] = -np.inf
    data = {"q": rand(h, n_q, d), "k": rand(hk, n_kv, d, seed=1), "v": rand(hk, n_kv, d, seed=2), "m": mask}
    compare(build, backend, data, tol=5e-4)


@pytest.mark.parametrize("name", ["sum_rows", "mean", "argmax", "cumsum", "sum"])
def test_reductions(backend, name):
    def build(ctx: Context):
        a = ctx.new_tensor("f32", 300, 7, name="a")
        return [a], getattr(ops, name)(a)

    compare(build, backend, {"a": rand(7, 300)}, tol=1e-6)


def test_index_ops(backend):
    def build(ctx: Context):
        a = ctx.new_tensor("f32", 5, 3, name="a")
        b = ctx.new_tensor("f32", 5, 2, name="b")
        x = ops.concat(ops.repeat(a, ctx.new_tensor("f32", 10, 6)), ops.pad(b, 5, 4), 1)
        y = ops.diag_mask_inf(ops.acc(x, b, x.nb[1], x.nb[2], x.nb[3], 4 * x.nb[0]), 3)
        return [a, b], y

    compare(build, backend, {"a": rand(3, 5), "b": rand(2, 5, seed=1)})


def test_out_prod(backend):
    def build(ctx: Context):
        a = ctx.new_tensor("q8_0", 64, 10, name="a")
        b = ctx.new_tensor("f32", 7, 10, name="b")
        return [a, b], ops.out_prod(a, b)

    compare(build, backend, {"a": rand(10, 64), "b": rand(10, 7, seed=1)}, tol=5e-4)


@pytest.mark.parametrize("n_groups", [1, 3, 7])
def test_group_norm(backend, n_groups):
    def build(ctx: Context):
        a = ctx.new_tensor("f32", 9, 5, 20, 2, name="a")
        return [a], ops.group_norm(a, n_groups, 1e-6)

    compare(build, backend, {"a": rand(2, 20, 5, 9, scale=2) + 1})


@pytest.mark.parametrize("atype", ["f16", "q4_0", "q4_K"])
@pytest.mark.parametrize("bcast", [False, True])
def test_mul_mat_id(backend, atype, bcast):
    def build(ctx: Context):
        a = ctx.new_tensor(atype, 256, 24, 4, name="a")
        b = ctx.new_tensor("f32", 256, 1 if bcast else 2, 5, name="b")
        ids = ctx.new_tensor("i32", 2, 5, name="ids")
        return [a, b, ids], ops.mul_mat_id(a, b, ids)

    ids = np.array([[0, 3], [1, 2], [3, 3], [2, 0], [1, 0]], np.int32)
    compare(build, backend, {"a": rand(4, 24, 256), "b": rand(5, 1 if bcast else 2, 256, seed=1), "ids": ids},
            tol=5e-4)
