"""ROPE: rotary position embedding, normal (adjacent pairs) and NeoX (halves) modes, with YaRN scaling."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pyggml.ops.base import Op, check_types, define, fail, need, record
from pyggml.tensor import Ne, Tensor
from pyggml.types import GGMLType

Srcs = tuple[Tensor | None, ...]

ROPE_TYPE_NORMAL = 0
ROPE_TYPE_NEOX = 2


@dataclass(frozen=True, slots=True)
class RopeParams:
    n_dims: int
    mode: int = ROPE_TYPE_NORMAL
    n_ctx_orig: int = 0
    freq_base: float = 10000.0
    freq_scale: float = 1.0
    ext_factor: float = 0.0
    attn_factor: float = 1.0
    beta_fast: float = 32.0
    beta_slow: float = 1.0


def _rope(srcs: Srcs, p: RopeParams, op: Op = Op.ROPE) -> tuple[GGMLType, Ne]:
    """The ROPE rule, shared by ROPE_BACK (same srcs and params; `op` names the op in errors)."""
    a = need(srcs[0], op, "src0", frozenset({GGMLType.F32, GGMLType.F16}))
    pos = need(srcs[1], op, "src1 (positions)", frozenset({GGMLType.I32}))
    ff = srcs[2] if len(srcs) > 2 else None
    if p.mode not in (ROPE_TYPE_NORMAL, ROPE_TYPE_NEOX):
        raise fail(op, f"mode {p.mode} is not supported (0 normal, 2 neox)", a)
    if pos.ne[0] != a.ne[2] or pos.nelements() != pos.ne[0]:
        raise fail(op, "positions must be a vector of src0.ne[2] entries", a, pos)
    if p.n_dims <= 0 or p.n_dims % 2 or p.n_dims > a.ne[0]:
        raise fail(op, f"n_dims={p.n_dims} must be even and within ne[0]", a)
    if not 0 <= p.n_ctx_orig < 1 << 31:
        raise fail(op, f"n_ctx_orig={p.n_ctx_orig} must be in [0, 2^31) (ggml keeps it in an int32)", a)
    if not (math.isfinite(p.freq_base) and p.freq_base > 0):
        raise fail(op, f"freq_base={p.freq_base} must be a positive finite number", a)
    bad = [f"{k}={v}" for k, v in (("freq_scale", p.freq_scale), ("ext_factor", p.ext_factor),
                                   ("attn_factor", p.attn_factor), ("beta_fast", p.beta_fast),
                                   ("beta_slow", p.beta_slow)) if not math.isfinite(v)]
    if bad:
        raise fail(op, f"{', '.join(bad)} must be finite", a)
    if ff is not None:
        check_types(op, ff, frozenset({GGMLType.F32}), "src2 (freq factors)")
        if ff.ne[0] < p.n_dims // 2:
            raise fail(op, f"freq factors need n_dims/2 = {p.n_dims // 2} entries", a, ff)
    return a.type, a.ne


define(Op.ROPE, (2, 3), _rope, RopeParams, can_inplace=True)


def rope(
    a: Tensor,
    pos: Tensor,
    n_dims: int,
    mode: int = ROPE_TYPE_NORMAL,
    *,
    freq_factors: Tensor | None = None,
    n_ctx_orig: int = 0,
    freq_base: float = 10000.0,
    freq_scale: float = 1.0,
    ext_factor: float = 0.0,
    attn_factor: float = 1.0,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    inplace: bool = False,
) -> Tensor:
    """Rotate the first n_dims elements of each row of a [head_dim, n_head, n_tokens, ...] by position pos[token].

    theta_i = pos * freq_base^(-2i/n_dims) / freq_factors[i], scaled by freq_scale with YaRN ramp mixing
    (ext_factor) between interpolation and extrapolation, magnitude scaled by attn_factor (ggml_rope_ext)."""
    p = RopeParams(int(n_dims), int(mode), int(n_ctx_orig), float(freq_base), float(freq_scale),
                   float(ext_factor), float(attn_factor), float(beta_fast), float(beta_slow))
    return record(Op.ROPE, (a, pos, freq_factors), p, inplace=inplace)
