"""Optimiser hyper-parameters and their per-step values as the F32 tensor the OPT_STEP ops read."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pyggml.errors import PyGGMLError


@dataclass(frozen=True)
class AdamW:
    """AdamW (ggml_opt_optimizer_params.adamw): decoupled weight decay `wd` in [0, 1]."""

    alpha: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    wd: float = 0.0

    n_values = 7

    def check(self) -> None:
        ok = self.alpha > 0 and 0 <= self.beta1 <= 1 and 0 <= self.beta2 <= 1 and self.eps >= 0 and 0 <= self.wd <= 1
        if not ok:
            raise PyGGMLError(f"AdamW parameters out of range: {self} (alpha > 0, betas and wd in [0, 1], eps >= 0)")

    def values(self, step: int) -> npt.NDArray[np.float32]:
        """[alpha, beta1, beta2, eps, wd, beta1h, beta2h] for step `step` (1-based): the bias corrections
        1 / (1 - beta^step) computed here, once per step, as ggml-opt does."""
        b1h = 1.0 / (1.0 - self.beta1**step)
        b2h = 1.0 / (1.0 - self.beta2**step)
        return np.array([self.alpha, self.beta1, self.beta2, self.eps, self.wd, b1h, b2h], dtype=np.float32)


@dataclass(frozen=True)
class SGD:
    """Plain SGD with decoupled weight decay (ggml_opt_optimizer_params.sgd)."""

    alpha: float = 1e-3
    wd: float = 0.0

    n_values = 2

    def check(self) -> None:
        if not (self.alpha > 0 and 0 <= self.wd <= 1):
            raise PyGGMLError(f"SGD parameters out of range: {self} (alpha > 0, wd in [0, 1])")

    def values(self, step: int) -> npt.NDArray[np.float32]:
        return np.array([self.alpha, self.wd], dtype=np.float32)


Optimizer = AdamW | SGD
