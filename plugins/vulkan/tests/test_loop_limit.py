"""Shaders past lavapipe's loop budget: llvmpipe ends a shader invocation's loops after 65535 iterations counted over
all its loops, silently. One thread per MUL_MAT row multiplied only the first 65535 elements (K = 70,000 was 6%
low, 131,072 50%; a Q4_K row of 65,536 0.8%, its dequantisation loop counting too): threads now share a row on
CPU-emulated devices, rows past MAX_K and OUT_PROD past LOOP_BUDGET are refused. FLASH_ATTN_EXT (head size 64) was
wrong from about 30,000 keys: its loops take four steps an iteration, decode splits the keys between work groups,
and a CPU-emulated device refuses what would still exceed the budget. Small M, N and heads keep these fast."""

from __future__ import annotations

import numpy as np
import pytest

from pyggml import ops
from pyggml.context import Context
from pyggml.quants import dequantize, quantize
from pyggml.tensor import Tensor
from pyggml.types import GGMLType
from pyggml_glsl.ops.attention import LOOP_LIMIT, loop_steps, n_split
from pyggml_glsl.ops.matmul import LOOP_BUDGET, MAX_K
from pyggml_testing.on_device import run_separately

T = GGMLType


def _weights(t: GGMLType, x: np.ndarray) -> np.ndarray:
    """x as the backend sees it after storing it as t (rounded or quantised), in float64."""
    if t == T.F32:
        return x.astype(np.float64)
    if t == T.F16:
        return x.astype(np.float16).astype(np.float64)
    return np.stack([np.asarray(dequantize(quantize(r, t), t), np.float64) for r in x])


@pytest.mark.parametrize(("ta", "k"), [(T.F32, 70_000), (T.F16, 131_075), (T.F32, 65_536), (T.Q4_K, 70_144),
                                      (T.Q8_0, 140_032)])
@pytest.mark.parametrize("n", [1, 3])
def test_mul_mat_of_long_rows(backend, ta: GGMLType, k: int, n: int) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(k + n)
    a_val = rng.uniform(0.5, 1.5, (2, k)).astype(np.float32)
    b_val = rng.uniform(0.5, 1.5, (n, k)).astype(np.float32)
    ctx = Context(no_alloc=True)
    a, b = ctx.new_tensor(ta, k, 2, name="a"), ctx.new_tensor("f32", k, n, name="b")
    got = run_separately(backend, ops.mul_mat(a, b), {a: a_val, b: b_val})
    ref = b_val.astype(np.float64) @ _weights(ta, a_val).T
    assert np.max(np.abs(got - ref) / ref) < 1e-4  # Q8 activations: about 1e-5; a lost tail: >= 1e-2


def test_mul_mat_id_of_long_rows(backend) -> None:  # type: ignore[no-untyped-def]
    k = 70_000
    rng = np.random.default_rng(1)
    e_val = rng.uniform(0.5, 1.5, (3, 2, k)).astype(np.float32)
    x_val = rng.uniform(0.5, 1.5, (2, 1, k)).astype(np.float32)
    ids_val = np.array([[2], [0]], np.int32)
    ctx = Context(no_alloc=True)
    e, x = ctx.new_tensor("f32", k, 2, 3, name="e"), ctx.new_tensor("f32", k, 1, 2, name="x")
    ids = ctx.new_tensor("i32", 1, 2, name="ids")
    got = run_separately(backend, ops.mul_mat_id(e, x, ids), {e: e_val, x: x_val, ids: ids_val})
    ref = np.stack([e_val[ids_val[t, 0]].astype(np.float64) @ x_val[t, 0].astype(np.float64) for t in range(2)])
    assert np.max(np.abs(got.reshape(2, 2) - ref) / ref) < 1e-5


def test_rows_past_the_budget_are_refused_not_wrong(backend) -> None:  # type: ignore[no-untyped-def]
    ctx = Context(no_alloc=True)
    dev = backend.device
    assert dev.supports_op(ops.mul_mat(ctx.new_tensor("f32", MAX_K, 2), ctx.new_tensor("f32", MAX_K, 1)))
    assert not dev.supports_op(ops.mul_mat(ctx.new_tensor("f32", MAX_K + 32, 2),
                                           ctx.new_tensor("f32", MAX_K + 32, 1)))
    ok, long = LOOP_BUDGET, LOOP_BUDGET + 1
    assert dev.supports_op(ops.out_prod(ctx.new_tensor("f32", 3, ok), ctx.new_tensor("f32", 2, ok)))
    assert not dev.supports_op(ops.out_prod(ctx.new_tensor("f32", 3, long), ctx.new_tensor("f32", 2, long)))


def _attention_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float) -> np.ndarray:
    """q [H, D], k and v [n, D] (one kv head) -> [H, D]."""
    s = scale * q.astype(np.float64) @ k.astype(np.float64).T
    w = np.exp(s - s.max(axis=1, keepdims=True))
    return (w / w.sum(axis=1, keepdims=True)) @ v.astype(np.float64)


def test_flash_attn_over_many_keys(backend) -> None:  # type: ignore[no-untyped-def]
    n, d = 70_000, 64  # 40,000 gave nmse 0.61 before the loop budget; 70,000 runs as key splits
    rng = np.random.default_rng(3)
    q_val = rng.standard_normal((2, d)).astype(np.float32)
    k_val = rng.standard_normal((n, d)).astype(np.float16)
    v_val = rng.standard_normal((n, d)).astype(np.float16)
    ctx = Context(no_alloc=True)
    q, k, v = ctx.new_tensor("f32", d, 1, 2, name="q"), ctx.new_tensor("f16", d, n, name="k"), \
        ctx.new_tensor("f16", d, n, name="v")
    out = ops.flash_attn_ext(q, k, v, scale=0.125)
    assert backend.device.supports_op(out)
    got = run_separately(backend, out, {q: q_val.reshape(2, 1, d), k: k_val, v: v_val}).reshape(2, d)
    ref = _attention_ref(q_val, k_val, v_val, 0.125)
    assert np.sum((got - ref) ** 2) / np.sum(ref**2) < 1e-8


def test_flash_attn_past_the_budget_is_refused_on_emulated_devices(backend) -> None:  # type: ignore[no-untyped-def]
    """A prompt (query rows enough for one split) past the budget is refused on a CPU-emulated device; decode (two
    rows) at that length has its keys split between work groups, each split within the budget, and runs."""
    ctx = Context(no_alloc=True)

    def fa(n: int, d: int, n_q: int) -> Tensor:
        q = ctx.new_tensor("f32", d, n_q, 2)
        return ops.flash_attn_ext(q, ctx.new_tensor("f16", d, n), ctx.new_tensor("f16", d, n))

    short, long = fa(30_000, 128, 256), fa(60_000, 128, 256)
    assert n_split(long) == 1
    assert loop_steps(short) <= LOOP_LIMIT < loop_steps(long)
    assert backend.device.supports_op(short)
    assert backend.device.supports_op(long) is not backend.device.info.is_cpu
    decode = fa(60_000, 128, 1)
    assert n_split(decode) > 1 and loop_steps(decode) <= LOOP_LIMIT
    assert backend.device.supports_op(decode)
