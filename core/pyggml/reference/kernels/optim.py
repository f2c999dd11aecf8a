"""Reference kernels: the optimiser steps OPT_STEP_ADAMW and OPT_STEP_SGD, in float64, writing the parameter
(the result is its view) and AdamW's moments m and v in place."""

from __future__ import annotations

import numpy as np

from pyggml.ops.base import Op
from pyggml.reference.access import load, store
from pyggml.reference.kernels.rules import KernelRules
from pyggml.reference.kernels.util import src
from pyggml.tensor import Tensor

rules = KernelRules()


@rules.kernel(Op.OPT_STEP_ADAMW)
def opt_step_adamw(dst: Tensor) -> None:
    """m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
    w = w (1 - alpha wd) - alpha (m beta1h) / (sqrt(v beta2h) + eps)."""
    w = load(src(dst, 0))
    g = load(src(dst, 1))
    m_t, v_t = src(dst, 2), src(dst, 3)
    alpha, beta1, beta2, eps, wd, beta1h, beta2h = (float(x) for x in load(src(dst, 4)).reshape(-1))
    with np.errstate(all="ignore"):
        m = load(m_t) * beta1 + g * (1.0 - beta1)
        v = load(v_t) * beta2 + g * g * (1.0 - beta2)
        w = w * (1.0 - alpha * wd) - alpha * (m * beta1h) / (np.sqrt(v * beta2h) + eps)
    store(m_t, m)
    store(v_t, v)
    store(dst, w)


@rules.kernel(Op.OPT_STEP_SGD)
def opt_step_sgd(dst: Tensor) -> None:
    """w = w (1 - alpha wd) - alpha g."""
    w = load(src(dst, 0))
    g = load(src(dst, 1))
    alpha, wd = (float(x) for x in load(src(dst, 2)).reshape(-1))
    with np.errstate(all="ignore"):
        store(dst, w * (1.0 - alpha * wd) - alpha * g)
