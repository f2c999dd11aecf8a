"""Normalisations over rows: NORM, RMS_NORM, L2_NORM, GROUP_NORM."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pyggml.ops.base import Op, ShapeRule, define, fail, need, record
from pyggml.tensor import Ne, Tensor
from pyggml.types import GGMLType

Srcs = tuple[Tensor | None, ...]


@dataclass(frozen=True, slots=True)
class NormParams:
    eps: float


def _normed(op: Op, srcs: Srcs, eps: float) -> Tensor:
    """The F32 src0 of a normalisation, with its eps checked (a finite number >= 0)."""
    a = need(srcs[0], op, "src0", frozenset({GGMLType.F32}))
    if not (eps >= 0 and math.isfinite(eps)):
        raise fail(op, f"eps {eps} must be a finite number >= 0", a)
    return a


def _row_norm(op: Op) -> ShapeRule:
    def infer(srcs: Srcs, params: NormParams) -> tuple[GGMLType, Ne]:
        a = _normed(op, srcs, params.eps)
        return a.type, a.ne

    return infer


@dataclass(frozen=True, slots=True)
class GroupNormParams:
    n_groups: int
    eps: float


def _group_norm(srcs: Srcs, params: GroupNormParams) -> tuple[GGMLType, Ne]:
    a = _normed(Op.GROUP_NORM, srcs, params.eps)
    if not params.n_groups > 0:
        raise fail(Op.GROUP_NORM, f"n_groups {params.n_groups} must be positive", a)
    return a.type, a.ne


define(Op.NORM, (1, 1), _row_norm(Op.NORM), NormParams)
define(Op.RMS_NORM, (1, 1), _row_norm(Op.RMS_NORM), NormParams, can_inplace=True)
define(Op.L2_NORM, (1, 1), _row_norm(Op.L2_NORM), NormParams)
define(Op.GROUP_NORM, (1, 1), _group_norm, GroupNormParams)


def norm(a: Tensor, eps: float = 1e-5, *, inplace: bool = False) -> Tensor:
    """(x - mean) / sqrt(var + eps) over each row."""
    return record(Op.NORM, (a,), NormParams(float(eps)), inplace=inplace)


def rms_norm(a: Tensor, eps: float = 1e-6, *, inplace: bool = False) -> Tensor:
    """x / sqrt(mean(x^2) + eps) over each row."""
    return record(Op.RMS_NORM, (a,), NormParams(float(eps)), inplace=inplace)


def l2_norm(a: Tensor, eps: float = 1e-12, *, inplace: bool = False) -> Tensor:
    """x / max(||x||, eps) over each row."""
    return record(Op.L2_NORM, (a,), NormParams(float(eps)), inplace=inplace)


def group_norm(a: Tensor, n_groups: int, eps: float = 1e-6) -> Tensor:
    """NORM over groups of ceil(ne2 / n_groups) consecutive channels (dim 2), each group's
    ne0 * ne1 * channels elements normalised together, per ne3 batch."""
    return record(Op.GROUP_NORM, (a,), GroupNormParams(int(n_groups), float(eps)))
