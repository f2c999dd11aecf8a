"""Reference kernel: ROPE (normal and NeoX pairings) with YaRN scaling and frequency factors, angles in float64."""

from __future__ import annotations

import math

import numpy as np

from pyggml.ops.base import Op
from pyggml.ops.rope import ROPE_TYPE_NEOX, RopeParams
from pyggml.reference.access import load, store
from pyggml.reference.kernels.rules import KernelRules
from pyggml.reference.kernels.util import Array, opt_src, src
from pyggml.tensor import Tensor

rules = KernelRules()


def yarn_corr_dims(p: RopeParams) -> tuple[float, float]:
    """The pair-index range [low, high] over which YaRN ramps from extrapolation to interpolation: the dims
    whose wavelength makes beta_fast / beta_slow turns over n_ctx_orig positions (floor / ceil, clipped to
    [0, n_dims - 1]; n_ctx_orig = 0 gives (0, -inf) as in ggml)."""

    def corr_dim(n_rot: float) -> float:
        ratio = p.n_ctx_orig / (n_rot * 2.0 * math.pi)
        log_ratio = math.log(ratio) if ratio > 0 else -math.inf
        return p.n_dims * log_ratio / (2.0 * math.log(p.freq_base))

    low = math.floor(corr_dim(p.beta_fast)) if p.n_ctx_orig > 0 else -math.inf
    high = math.ceil(corr_dim(p.beta_slow)) if p.n_ctx_orig > 0 else -math.inf
    return max(0.0, low), min(p.n_dims - 1.0, high)


def rope_angles(p: RopeParams, pos: Array, freq_factors: Array | None) -> tuple[Array, Array]:
    """cos and sin, each (n_pos, n_dims / 2), already multiplied by the magnitude scale."""
    i = np.arange(p.n_dims // 2, dtype=np.float64)
    theta_extrap = pos[:, None].astype(np.float64) * p.freq_base ** (-2.0 * i / p.n_dims)
    if freq_factors is not None:
        theta_extrap = theta_extrap / freq_factors[: p.n_dims // 2]
    theta = p.freq_scale * theta_extrap
    mscale = p.attn_factor
    if p.ext_factor != 0.0:
        low, high = yarn_corr_dims(p)
        ramp = 1.0 - np.clip((i - low) / max(0.001, high - low), 0.0, 1.0)
        mix = ramp * p.ext_factor
        theta = theta * (1.0 - mix) + theta_extrap * mix
        mscale *= 1.0 + 0.1 * math.log(1.0 / p.freq_scale)
    return np.cos(theta) * mscale, np.sin(theta) * mscale


@rules.kernel(Op.ROPE, Op.ROPE_BACK)
def rope(dst: Tensor) -> None:
    """Rotate pairs of each row of src0 [head_dim, n_head, n_pos, B] by the angles of position src1[i2]:
    normal mode pairs (x[2i], x[2i+1]), NeoX pairs (x[i], x[i + n_dims/2]), each with angle index i;
    elements past n_dims are copied. ROPE_BACK (the gradient) rotates by minus the angle: the sine negated."""
    p: RopeParams = dst.params
    x = load(src(dst, 0))  # (B, n_pos, n_head, head_dim)
    pos = load(src(dst, 1), None).reshape(-1)
    ff_t = opt_src(dst, 2)
    ff = load(ff_t).reshape(-1) if ff_t is not None else None
    cos, sin = rope_angles(p, pos, ff)
    if dst.op is Op.ROPE_BACK:
        sin = -sin
    cos = cos[None, :, None, :]
    sin = sin[None, :, None, :]
    n = p.n_dims
    out = x.copy()
    if p.mode == ROPE_TYPE_NEOX:
        x0, x1 = x[..., : n // 2], x[..., n // 2 : n]
        out[..., : n // 2] = x0 * cos - x1 * sin
        out[..., n // 2 : n] = x0 * sin + x1 * cos
    else:
        x0, x1 = x[..., 0:n:2], x[..., 1:n:2]
        out[..., 0:n:2] = x0 * cos - x1 * sin
        out[..., 1:n:2] = x0 * sin + x1 * cos
    store(dst, out)
