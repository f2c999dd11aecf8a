"""Tiny RWKV v6 and v7 GGUFs with llama.cpp's keys and tensor names (random weights: v6 decays putting exp(-exp(w))
in [0.007, 0.998], lerps in [0, 1]), and float64 numpy forward passes written from the RWKV-6 ("Finch") and RWKV-7
("Goose") equations, independently of pyggml's kernels: the oracles of tests/test_rwkv.py, and the files llama.cpp
loads to compare with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml_llama.mamba_synthetic import QUANTIZED, write_tiny_gguf
from pyggml_llama.rwkv import RwkvHParams

F64 = npt.NDArray[np.float64]
F32 = npt.NDArray[np.float32]
GROUP_NORM_EPS = 64e-5
MIXES = ("w", "k", "v", "r", "g")


RWKV6 = RwkvHParams(arch="rwkv6", n_layer=2, n_embd=64, n_vocab=96, norm_eps=1e-5, n_ff=224, head_size=16,
                    time_mix_extra_dim=8, time_decay_extra_dim=16, rescale_every_n_layers=2)
"""Two layers of four 16-wide heads, the residual stream halved after the second."""
RWKV7 = RwkvHParams(arch="rwkv7", n_layer=3, n_embd=128, n_vocab=96, norm_eps=1e-5, n_ff=256, head_size=64,
                    lora=(8, 8, 8, 16))
"""Three layers (the first layer's value mixes into two later ones), two heads of 64: ggml's SIMD WKV7 kernel
reads past a head smaller than its vector step (32 floats on AVX2), so llama.cpp computes other heads' sums into
a 16-wide head's output; real RWKV 7 models have heads of 64."""


def tiny_rwkv6_weights(cfg: RwkvHParams, rng: np.random.Generator) -> dict[str, F32]:
    """Numpy arrays by GGUF name (numpy shape = ggml ne reversed, as llama.cpp's converter writes them)."""
    def m(*shape: int, scale: float = 1.0) -> F32:
        out: F32 = (scale / np.sqrt(shape[-1]) * rng.standard_normal(shape)).astype(np.float32)
        return out

    def v(*shape: int, mean: float = 1.0, scale: float = 0.2) -> F32:
        return (mean + scale * rng.standard_normal(shape)).astype(np.float32)

    def u(*shape: int, lo: float = 0.0, hi: float = 1.0) -> F32:
        return rng.uniform(lo, hi, shape).astype(np.float32)

    e, dm, dd = cfg.n_embd, cfg.time_mix_extra_dim, cfg.time_decay_extra_dim
    w = {"token_embd.weight": m(cfg.n_vocab, e, scale=4.0), "token_embd_norm.weight": v(e),
         "token_embd_norm.bias": v(e, mean=0.0), "output_norm.weight": v(e), "output_norm.bias": v(e, mean=0.0),
         "output.weight": m(cfg.n_vocab, e, scale=4.0)}
    for il in range(cfg.n_layer):
        p = f"blk.{il}."
        w |= {p + "attn_norm.weight": v(e), p + "attn_norm.bias": v(e, mean=0.0),
              p + "attn_norm_2.weight": v(e), p + "attn_norm_2.bias": v(e, mean=0.0),
              p + "time_mix_key.weight": m(e, e), p + "time_mix_value.weight": m(e, e),
              p + "time_mix_receptance.weight": m(e, e), p + "time_mix_ln.weight": v(e),
              p + "time_mix_ln.bias": v(e, mean=0.0), p + "time_mix_output.weight": m(e, e),
              p + "channel_mix_lerp_k.weight": u(1, 1, e), p + "channel_mix_key.weight": m(cfg.n_ff, e),
              p + "channel_mix_value.weight": m(e, cfg.n_ff)}
        if cfg.arch == "rwkv7":
            decay, iclr, vmix, gate = cfg.lora
            vmix = iclr if il == 0 else vmix  # llama.cpp's shape for layer 0's unused value mix
            w |= {p + "time_mix_lerp_fused.weight": u(6, 1, 1, e), p + "time_mix_w0.weight": u(e, lo=-3.0, hi=1.0),
                  p + "time_mix_w1.weight": m(decay, e), p + "time_mix_w2.weight": m(e, decay, scale=0.5),
                  p + "time_mix_a0.weight": v(e, mean=0.0, scale=0.5), p + "time_mix_a1.weight": m(iclr, e),
                  p + "time_mix_a2.weight": m(e, iclr, scale=0.5), p + "time_mix_v0.weight": v(e, mean=0.0),
                  p + "time_mix_v1.weight": m(vmix, e), p + "time_mix_v2.weight": m(e, vmix, scale=0.5),
                  p + "time_mix_g1.weight": m(gate, e), p + "time_mix_g2.weight": m(e, gate),
                  p + "time_mix_k_k.weight": v(e, mean=0.8, scale=0.2), p + "time_mix_k_a.weight": v(e),
                  p + "time_mix_r_k.weight": v(e, mean=0.0, scale=0.3)}
            continue
        w |= {p + "time_mix_w1.weight": m(5 * dm, e), p + "time_mix_w2.weight": m(5, e, dm, scale=0.5),
              p + "time_mix_lerp_x.weight": u(1, 1, e), p + "time_mix_lerp_fused.weight": u(5, 1, 1, e),
              p + "time_mix_first.weight": v(cfg.n_head, cfg.head_size, mean=0.5, scale=0.3),
              p + "time_mix_decay.weight": u(e, lo=-6.0, hi=1.6),
              p + "time_mix_decay_w1.weight": m(dd, e), p + "time_mix_decay_w2.weight": m(e, dd, scale=0.5),
              p + "time_mix_gate.weight": m(e, e), p + "channel_mix_lerp_r.weight": u(1, 1, e),
              p + "channel_mix_receptance.weight": m(e, e)}
    return w


def write_tiny_rwkv6(path: str | Path, cfg: RwkvHParams, weights: dict[str, F32], qtype: str = "F32") -> Path:
    """The GGUF llama.cpp's `rwkv6` / `rwkv7` loader reads (gguf package); the 2-D matrices stored as `qtype` where
    their rows allow (the embeddings, output and the time/channel mix matrices), the rest F32."""
    def keys(w: Any) -> None:
        w.add_wkv_head_size(cfg.head_size)
        if cfg.arch == "rwkv6":
            w.add_time_mix_extra_dim(cfg.time_mix_extra_dim)
            w.add_time_decay_extra_dim(cfg.time_decay_extra_dim)
            w.add_rescale_every_n_layers(cfg.rescale_every_n_layers)
        else:
            w.add_decay_lora_rank(cfg.lora[0])
            w.add_iclr_lora_rank(cfg.lora[1])
            w.add_value_residual_mix_lora_rank(cfg.lora[2])
            w.add_gate_lora_rank(cfg.lora[3])
        w.add_token_shift_count(2)
        w.add_layer_norm_eps(cfg.norm_eps)

    matrices = (*QUANTIZED, "_key.weight", "_value.weight", "_receptance.weight", "_gate.weight", "mix_output.weight")
    return write_tiny_gguf(path, cfg, cfg.n_ff, keys, weights,
                           lambda name, arr: name.endswith(matrices) and arr.shape[-1] % 32 == 0, qtype)


def _ln(x: F64, g: F64, b: F64, eps: float) -> F64:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    out: F64 = (x - mu) / np.sqrt(var + eps) * g + b
    return out


def _prev(x: F64) -> F64:
    """Each token's predecessor, zeros before the first (an empty history)."""
    return np.concatenate([np.zeros((1, x.shape[1])), x[:-1]])


def _time_mix(cfg: RwkvHParams, w: dict[str, F64], p: str, x: F64) -> F64:
    n, hs, nh = len(x), cfg.head_size, cfg.n_head
    dx = _prev(x) - x
    lora = np.tanh((x + dx * w[p + "time_mix_lerp_x.weight"].reshape(-1)) @ w[p + "time_mix_w1.weight"].T)
    lora = lora.reshape(n, 5, cfg.time_mix_extra_dim)
    mixed = {}
    for j, name in enumerate(MIXES):  # token-shift lerp, its amount data-dependent
        amount = lora[:, j] @ w[p + "time_mix_w2.weight"][j].T + w[p + "time_mix_lerp_fused.weight"][j].reshape(-1)
        mixed[name] = x + dx * amount
    r = (mixed["r"] @ w[p + "time_mix_receptance.weight"].T).reshape(n, nh, hs)
    k = (mixed["k"] @ w[p + "time_mix_key.weight"].T).reshape(n, nh, hs)
    v = (mixed["v"] @ w[p + "time_mix_value.weight"].T).reshape(n, nh, hs)
    gz = mixed["g"] @ w[p + "time_mix_gate.weight"].T
    gate = gz / (1.0 + np.exp(-gz))
    dz = np.tanh(mixed["w"] @ w[p + "time_mix_decay_w1.weight"].T) @ w[p + "time_mix_decay_w2.weight"].T
    decay = np.exp(-np.exp(w[p + "time_mix_decay.weight"] + dz)).reshape(n, nh, hs)
    bonus = w[p + "time_mix_first.weight"]
    y = np.zeros((n, nh, hs))
    for head in range(nh):
        state = np.zeros((hs, hs))  # [key i, value j]
        for t in range(n):
            kv = np.outer(k[t, head], v[t, head])
            y[t, head] = r[t, head] @ (state + bonus[head][:, None] * kv)
            state = state * decay[t, head][:, None] + kv
    mu = y.mean(-1, keepdims=True)
    y = (y - mu) / np.sqrt(((y - mu) ** 2).mean(-1, keepdims=True) + GROUP_NORM_EPS)
    y = y.reshape(n, -1) * w[p + "time_mix_ln.weight"] + w[p + "time_mix_ln.bias"]
    out: F64 = (y * gate) @ w[p + "time_mix_output.weight"].T
    return out


def _sigmoid(x: F64) -> F64:
    out: F64 = 1.0 / (1.0 + np.exp(-x))
    return out


def _time_mix7(cfg: RwkvHParams, w: dict[str, F64], p: str, x: F64, v_first: list[F64]) -> F64:
    """RWKV-7: a generalised delta rule per head, S <- S diag(w) + v k^T + (S a) b^T with a = -kk and b = kk * iclr
    (kk the normalised key), read out by r; then GroupNorm, the bonus v (r . k r_k), the gate."""
    n, hs, nh = len(x), cfg.head_size, cfg.n_head
    dx = _prev(x) - x
    xr, xw, xk, xv, xa, xg = (x + dx * w[p + "time_mix_lerp_fused.weight"][j].reshape(-1) for j in range(6))

    def lora(z: F64, name: str) -> F64:
        out: F64 = z @ w[p + f"time_mix_{name}1.weight"].T
        return out

    r = xr @ w[p + "time_mix_receptance.weight"].T
    decay_in = w[p + "time_mix_w0.weight"] + np.tanh(lora(xw, "w")) @ w[p + "time_mix_w2.weight"].T
    decay = np.exp(-0.606531 * _sigmoid(decay_in))  # -exp(-0.5) scale
    k = xk @ w[p + "time_mix_key.weight"].T
    v = xv @ w[p + "time_mix_value.weight"].T
    if not v_first:
        v_first.append(v)
    else:
        mix = _sigmoid(w[p + "time_mix_v0.weight"] + lora(xv, "v") @ w[p + "time_mix_v2.weight"].T)
        v = v + (v_first[0] - v) * mix
    gate = _sigmoid(lora(xg, "g")) @ w[p + "time_mix_g2.weight"].T
    iclr = _sigmoid(w[p + "time_mix_a0.weight"] + lora(xa, "a") @ w[p + "time_mix_a2.weight"].T)
    kk = (k * w[p + "time_mix_k_k.weight"]).reshape(n, nh, hs)
    kk = kk / np.maximum(np.sqrt((kk * kk).sum(-1, keepdims=True)), 1e-12)
    k = k + iclr * k * w[p + "time_mix_k_a.weight"] - k * w[p + "time_mix_k_a.weight"]
    r, k, v = r.reshape(n, nh, hs), k.reshape(n, nh, hs), v.reshape(n, nh, hs)
    decay, iclr = decay.reshape(n, nh, hs), iclr.reshape(n, nh, hs)
    y = np.zeros((n, nh, hs))
    for head in range(nh):
        state = np.zeros((hs, hs))  # [value i, key j]
        for t in range(n):
            a, b = -kk[t, head], kk[t, head] * iclr[t, head]
            sa = state @ a
            state = state * decay[t, head][None, :] + np.outer(v[t, head], k[t, head]) + np.outer(sa, b)
            y[t, head] = state @ r[t, head]
    mu = y.mean(-1, keepdims=True)
    y = (y - mu) / np.sqrt(((y - mu) ** 2).mean(-1, keepdims=True) + GROUP_NORM_EPS)
    y = y.reshape(n, -1) * w[p + "time_mix_ln.weight"] + w[p + "time_mix_ln.bias"]
    bonus = (r * k * w[p + "time_mix_r_k.weight"].reshape(nh, hs)).sum(-1, keepdims=True) * v
    out: F64 = ((y + bonus.reshape(n, -1)) * gate) @ w[p + "time_mix_output.weight"].T
    return out


def _channel_mix(w: dict[str, F64], p: str, x: F64) -> F64:
    dx = _prev(x) - x
    xk = x + dx * w[p + "channel_mix_lerp_k.weight"].reshape(-1)
    hidden = np.maximum(xk @ w[p + "channel_mix_key.weight"].T, 0.0) ** 2
    if p + "channel_mix_receptance.weight" not in w:  # v7
        v7: F64 = hidden @ w[p + "channel_mix_value.weight"].T
        return v7
    xr = x + dx * w[p + "channel_mix_lerp_r.weight"].reshape(-1)
    gate = _sigmoid(xr @ w[p + "channel_mix_receptance.weight"].T)
    out: F64 = gate * (hidden @ w[p + "channel_mix_value.weight"].T)
    return out


def rwkv6_forward(cfg: RwkvHParams, weights: dict[str, F32], tokens: list[int]) -> F64:
    """Logits [len(tokens), n_vocab] in float64 from an empty history."""
    w = {k: a.astype(np.float64) for k, a in weights.items()}
    x = _ln(w["token_embd.weight"][tokens], w["token_embd_norm.weight"], w["token_embd_norm.bias"], cfg.norm_eps)
    v_first: list[F64] = []
    for il in range(cfg.n_layer):
        p = f"blk.{il}."
        h = _ln(x, w[p + "attn_norm.weight"], w[p + "attn_norm.bias"], cfg.norm_eps)
        x = x + (_time_mix(cfg, w, p, h) if cfg.arch == "rwkv6" else _time_mix7(cfg, w, p, h, v_first))
        x = x + _channel_mix(w, p, _ln(x, w[p + "attn_norm_2.weight"], w[p + "attn_norm_2.bias"], cfg.norm_eps))
        if cfg.rescale_every_n_layers and (il + 1) % cfg.rescale_every_n_layers == 0:
            x = x * 0.5
    out: F64 = _ln(x, w["output_norm.weight"], w["output_norm.bias"], cfg.norm_eps) @ w["output.weight"].T
    return out
