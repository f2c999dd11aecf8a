"""Reference kernels: row normalisations (NORM, RMS_NORM, L2_NORM) and GROUP_NORM, in float64."""

from __future__ import annotations

import numpy as np

from pyggml.ops.base import Op
from pyggml.reference.access import load, store
from pyggml.reference.kernels.rules import KernelRules
from pyggml.reference.kernels.util import src
from pyggml.tensor import Tensor

rules = KernelRules()


@rules.kernel(Op.NORM)
def norm(dst: Tensor) -> None:
    """(x - mean) / sqrt(var + eps), var the biased variance of the row."""
    x = load(src(dst, 0))
    c = x - x.mean(axis=-1, keepdims=True)
    store(dst, c / np.sqrt((c * c).mean(axis=-1, keepdims=True) + dst.params.eps))


@rules.kernel(Op.RMS_NORM)
def rms_norm(dst: Tensor) -> None:
    """x / sqrt(mean(x^2) + eps)."""
    x = load(src(dst, 0))
    store(dst, x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + dst.params.eps))


@rules.kernel(Op.L2_NORM)
def l2_norm(dst: Tensor) -> None:
    """x / max(||x||_2, eps)."""
    x = load(src(dst, 0))
    store(dst, x / np.maximum(np.sqrt((x * x).sum(axis=-1, keepdims=True)), dst.params.eps))


@rules.kernel(Op.GROUP_NORM)
def group_norm(dst: Tensor) -> None:
    """NORM over each group of ceil(ne2 / n_groups) consecutive channels (dim 2; the last group may be smaller,
    groups past ne2 are empty), all ne0 * ne1 elements of the group's channels together, per ne3 batch."""
    x = load(src(dst, 0))
    n_ch = x.shape[1]
    per_group = -(-n_ch // dst.params.n_groups)
    out = np.empty_like(x)
    for start in range(0, n_ch, per_group):
        g = x[:, start : start + per_group]
        c = g - g.mean(axis=(1, 2, 3), keepdims=True)
        var = (c * c).mean(axis=(1, 2, 3), keepdims=True)
        out[:, start : start + per_group] = c / np.sqrt(var + dst.params.eps)
    store(dst, out)
