"""Optimiser hyper-parameters and their per-step values as the F32 tensor the OPT_STEP ops read.

Every parameter is checked when the optimiser is made (`OptimizerParamsError` naming it and its allowed range):
ggml-opt's ranges, except that AdamW's betas stop short of 1, where the bias correction 1 / (1 - beta^t) divides
by zero, and that every value must be finite.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from pyggml.errors import OptimizerParamsError

Range = tuple[float, float, bool, bool]
"""(low, high, low included, high included)."""

POSITIVE: Range = (0.0, math.inf, False, False)
NON_NEGATIVE: Range = (0.0, math.inf, True, False)
UNIT: Range = (0.0, 1.0, True, True)
BETA: Range = (0.0, 1.0, True, False)


def _text(r: Range) -> str:
    lo, hi, lo_in, hi_in = r
    return f"{'[' if lo_in else '('}{lo:g}, {hi:g}{']' if hi_in else ')'}"


def _checked(opt: object, ranges: dict[str, Range], why: dict[str, str]) -> None:
    """Check every field of the frozen dataclass `opt` against its range and store it as a float."""
    kind = type(opt).__name__
    for f in fields(opt):  # type: ignore[arg-type]
        v = getattr(opt, f.name)
        r = ranges[f.name]
        lo, hi, lo_in, hi_in = r
        ok = isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
        if ok:
            x = float(v)
            ok = (lo <= x if lo_in else lo < x) and (x <= hi if hi_in else x < hi)
        if not ok:
            reason = f" ({why[f.name]})" if f.name in why else ""
            raise OptimizerParamsError(f"{kind} parameters out of range: {f.name} = {v!r} must be in {_text(r)}, "
                                       f"a finite number{reason}")
        object.__setattr__(opt, f.name, float(v))


def _check_step(kind: str, step: int) -> None:
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 1:
        raise OptimizerParamsError(f"{kind}: step must be an integer >= 1 (steps count from 1), got {step!r}")


class _CheckedParams:
    """What every optimiser's frozen dataclass shares: its fields checked against `RANGES` when it is made."""

    RANGES: ClassVar[dict[str, Range]]
    """Every field's allowed range."""
    WHY: ClassVar[dict[str, str]] = {}
    """Why a field's range stops where it does, for the error (where it is not plain)."""

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """OptimizerParamsError naming the first parameter outside its range (run when the optimiser is made)."""
        _checked(self, self.RANGES, self.WHY)


_BIAS = "the bias correction 1 / (1 - beta^t) divides by zero at 1"


@dataclass(frozen=True)
class AdamW(_CheckedParams):
    """AdamW (ggml_opt_optimizer_params.adamw): learning rate `alpha` > 0, moment decays `beta1`, `beta2` in
    [0, 1), `eps` >= 0, decoupled weight decay `wd` in [0, 1]; all finite, checked when made."""

    alpha: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    wd: float = 0.0

    n_values = 7
    RANGES = {"alpha": POSITIVE, "beta1": BETA, "beta2": BETA, "eps": NON_NEGATIVE, "wd": UNIT}
    WHY = {"beta1": _BIAS, "beta2": _BIAS}

    def values(self, step: int) -> npt.NDArray[np.float32]:
        """[alpha, beta1, beta2, eps, wd, beta1h, beta2h] for step `step` (1-based): the bias corrections
        1 / (1 - beta^step) computed here, once per step, as ggml-opt does."""
        _check_step("AdamW", step)
        b1h = 1.0 / (1.0 - self.beta1**step)
        b2h = 1.0 / (1.0 - self.beta2**step)
        return np.array([self.alpha, self.beta1, self.beta2, self.eps, self.wd, b1h, b2h], dtype=np.float32)


@dataclass(frozen=True)
class SGD(_CheckedParams):
    """Plain SGD with decoupled weight decay (ggml_opt_optimizer_params.sgd): `alpha` > 0, `wd` in [0, 1]; both
    finite, checked when made."""

    alpha: float = 1e-3
    wd: float = 0.0

    n_values = 2
    RANGES = {"alpha": POSITIVE, "wd": UNIT}

    def values(self, step: int) -> npt.NDArray[np.float32]:
        _check_step("SGD", step)
        return np.array([self.alpha, self.wd], dtype=np.float32)


Optimizer = AdamW | SGD
