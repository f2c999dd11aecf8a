"""Reference kernels: the backward ops (REPEAT_BACK, SILU_BACK, RMS_NORM_BACK, GET_ROWS_BACK, SOFT_MAX_BACK) and
the cross-entropy loss with its gradient, in float64. ROPE_BACK shares ROPE's kernel (kernels/rope.py): the same
rotation with the sine negated."""

from __future__ import annotations

import numpy as np

from pyggml.ops.base import Op
from pyggml.reference.access import load, store
from pyggml.reference.kernels.rules import KernelRules
from pyggml.reference.kernels.unary import sigmoid
from pyggml.reference.kernels.util import Array, check_index, src
from pyggml.tensor import Tensor

rules = KernelRules()


@rules.kernel(Op.REPEAT_BACK)
def repeat_back(dst: Tensor) -> None:
    """Sum every tile: src0 viewed as (r3, n3, r2, n2, r1, n1, r0, n0) with n the result's dims (numpy order),
    summed over the r axes."""
    a = load(src(dst, 0))
    n = dst.ne[::-1]
    split: list[int] = []
    for big, small in zip(a.shape, n, strict=True):
        split += [big // small if small else 0, small]
    if 0 in n:
        store(dst, np.zeros(n))
        return
    store(dst, a.reshape(split).sum(axis=(0, 2, 4, 6)))


@rules.kernel(Op.SILU_BACK)
def silu_back(dst: Tensor) -> None:
    """grad * d/dx (x * sigmoid(x)) = grad * s * (1 + x * (1 - s))."""
    g = load(src(dst, 0))
    x = load(src(dst, 1))
    with np.errstate(invalid="ignore", over="ignore"):
        s = sigmoid(x)
        store(dst, g * s * (1.0 + x * (1.0 - s)))


@rules.kernel(Op.RMS_NORM_BACK)
def rms_norm_back(dst: Tensor) -> None:
    """Per row of n elements: (dz - x * sum(x dz) / (sum(x^2) + n eps)) / sqrt(sum(x^2) / n + eps)."""
    dz = load(src(dst, 0))
    x = load(src(dst, 1))
    eps = dst.params.eps
    n = x.shape[-1]
    sum_xx = (x * x).sum(axis=-1, keepdims=True)
    sum_xdz = (x * dz).sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        store(dst, (dz - x * sum_xdz / (sum_xx + n * eps)) / np.sqrt(sum_xx / n + eps))


@rules.kernel(Op.GET_ROWS_BACK)
def get_rows_back(dst: Tensor) -> None:
    """Zero, then dst row rows[i] += grad row i for every i (repeated ids accumulate)."""
    g = load(src(dst, 0))[0, 0]  # (n, ne0)
    rows = load(src(dst, 1), None).reshape(-1)
    check_index(Op.GET_ROWS_BACK, rows, dst.ne[1], "row id")
    out = np.zeros((dst.ne[1], dst.ne[0]))
    np.add.at(out, rows, g)
    store(dst, out[np.newaxis, np.newaxis])


@rules.kernel(Op.SOFT_MAX_BACK)
def soft_max_back(dst: Tensor) -> None:
    """scale * y * (dy - sum(y * dy)) per row: the Jacobian of softmax(scale * x) applied to dy."""
    dy = load(src(dst, 0))
    y = load(src(dst, 1))
    store(dst, dst.params.scale * y * (dy - (y * dy).sum(axis=-1, keepdims=True)))


def _log_softmax(z: Array) -> Array:
    with np.errstate(invalid="ignore", over="ignore"):
        c = z - z.max(axis=-1, keepdims=True)
        return np.asarray(c - np.log(np.exp(c).sum(axis=-1, keepdims=True)))


@rules.kernel(Op.CROSS_ENTROPY_LOSS)
def cross_entropy_loss(dst: Tensor) -> None:
    """-sum(labels * log_softmax(logits)) over all rows, divided by the number of rows."""
    logits = load(src(dst, 0))
    labels = load(src(dst, 1))
    nr = logits.size // logits.shape[-1]
    with np.errstate(invalid="ignore", over="ignore"):
        store(dst, -(labels * _log_softmax(logits)).sum() / nr)


@rules.kernel(Op.CROSS_ENTROPY_LOSS_BACK)
def cross_entropy_loss_back(dst: Tensor) -> None:
    """(softmax(logits) - labels) * grad / nr, grad the loss's scalar gradient, nr the number of rows."""
    grad = float(load(src(dst, 0)).reshape(-1)[0])
    logits = load(src(dst, 1))
    labels = load(src(dst, 2))
    nr = logits.size // logits.shape[-1]
    with np.errstate(invalid="ignore", over="ignore"):
        store(dst, (np.exp(_log_softmax(logits)) - labels) * (grad / nr))
