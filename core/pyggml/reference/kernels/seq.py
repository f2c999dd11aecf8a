"""Reference kernels of the sequence-model ops (Mamba, RWKV, gated linear attention, gated delta net) and TRI /
SOLVE_TRI, in float64. The recurrences run token by token with every sequence, head and state element of a token
done at once (numpy order: arrays are ne reversed). core/tests/test_reference_seq.py checks each against a plain
loop over single elements."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from pyggml.ops.base import Op
from pyggml.ops.seq import TriType
from pyggml.reference.access import load, store
from pyggml.reference.kernels.rules import KernelRules
from pyggml.reference.kernels.util import Array, check_index, src
from pyggml.tensor import Tensor

rules = KernelRules()


def softplus(x: Array) -> Array:
    """ggml's softplus for SSM_SCAN's dt: log(1 + e^x), x itself above 20 (where the two agree in float32)."""
    with np.errstate(over="ignore"):
        return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


def _store_parts(dst: Tensor, parts: list[tuple[int, Array]]) -> None:
    """Write (flat element offset, values) parts into the F32 dst, keeping whatever is between them (the snapshot
    slots a short batch does not reach are not written, as in ggml)."""
    flat = load(dst).reshape(-1)
    for off, values in parts:
        v = values.reshape(-1)
        flat[off:off + v.size] = v
    store(dst, flat.reshape(load(dst).shape))


@rules.kernel(Op.TRI)
def tri(dst: Tensor) -> None:
    """Keep one triangle of each [rows, cols] matrix: (col, row) index pairs chosen by TriType, zeros elsewhere."""
    a = load(src(dst, 0))
    n = a.shape[-1]
    col = np.arange(n)[np.newaxis, :]
    row = np.arange(n)[:, np.newaxis]
    keep = {TriType.LOWER: col < row, TriType.LOWER_DIAG: col <= row, TriType.UPPER: col > row,
            TriType.UPPER_DIAG: col >= row}[dst.params.tri_type]
    store(dst, np.where(keep, a, 0.0))


@rules.kernel(Op.SOLVE_TRI)
def solve_tri(dst: Tensor) -> None:
    """Forward substitution, a row of X at a time for every batch and column: A's upper part is never read."""
    a = load(src(dst, 0))  # [b3, b2, n, n]
    b = load(src(dst, 1))  # [b3, b2, n, k]
    x = np.zeros_like(b)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i in range(a.shape[-1]):
            acc = np.einsum("...t,...tk->...k", a[..., i, :i], x[..., :i, :])
            x[..., i, :] = (b[..., i, :] - acc) / a[..., i, i][..., np.newaxis]
    store(dst, x)


@rules.kernel(Op.SSM_CONV)
def ssm_conv(dst: Tensor) -> None:
    sx = load(src(dst, 0))[0]  # [n_s, d_inner, d_conv - 1 + n_t]
    c = load(src(dst, 1))[0, 0]  # [d_inner, d_conv]
    win = sliding_window_view(sx, c.shape[1], axis=2)  # [n_s, d_inner, n_t, d_conv]
    store(dst, np.einsum("sctk,ck->stc", win, c)[np.newaxis])


@rules.kernel(Op.SSM_SCAN)
def ssm_scan(dst: Tensor) -> None:
    s0 = load(src(dst, 0))  # [n_seqs+, n_head, head_dim, d_state]
    x = load(src(dst, 1))  # [n_seqs, n_tok, n_head, head_dim]
    dt = softplus(load(src(dst, 2))[0])  # [n_seqs, n_tok, n_head]
    a = load(src(dst, 3))[0, 0]  # [n_head, 1 or d_state]
    rep = x.shape[2] // load(src(dst, 4)).shape[2]
    b = np.repeat(load(src(dst, 4)), rep, axis=2)  # [n_seqs, n_tok, n_head, d_state]: head h uses group h // rep
    c = np.repeat(load(src(dst, 5)), rep, axis=2)
    ids = load(src(dst, 6), dtype=None)[0, 0, 0]
    check_index(Op.SSM_SCAN, ids, s0.shape[0], "state id (ids)")
    n_tok, k_slots = x.shape[1], dst.params.k
    state = s0[ids]
    y = np.zeros_like(x)
    parts: list[tuple[int, Array]] = []
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(n_tok):
            decay = np.exp(dt[:, t, :, np.newaxis] * a)[:, :, np.newaxis, :]
            x_dt = (x[:, t] * dt[:, t, :, np.newaxis])[..., np.newaxis]
            state = state * decay + b[:, t, :, np.newaxis, :] * x_dt
            y[:, t] = np.einsum("shdn,shn->shd", state, c[:, t])
            slot = n_tok - 1 - t
            if slot < k_slots:
                parts.append((x.size + slot * state.size, state))
    if n_tok == 0:  # no token: slot 0 holds the initial states (ggml leaves it unwritten)
        parts.append((x.size, state))
    _store_parts(dst, [(0, y), *parts])


def _linear_inputs(dst: Tensor, slots: tuple[int, ...], state_slot: int) -> tuple[list[Array], Array]:
    """The [S, H, T] srcs `slots` as [n_seqs, tokens per sequence, H, S], the state as [n_seqs, H, S, S]."""
    st = src(dst, state_slot)
    n_seqs = st.ne[1]
    toks = [load(src(dst, i))[0] for i in slots]  # [T, H, S]
    h, s = toks[0].shape[1], toks[0].shape[2]
    return [t.reshape(n_seqs, -1, h, s) for t in toks], load(st).reshape(n_seqs, h, s, s)


def _store_linear(dst: Tensor, y: Array, state: Array) -> None:
    store(dst, np.concatenate([y.reshape(-1), state.reshape(-1)]).reshape(load(dst).shape))


@rules.kernel(Op.RWKV_WKV6)
def rwkv_wkv6(dst: Tensor) -> None:
    """S[i][j] (i over k, j over v): y[j] = sum_i r[i] (u[i] k[i] v[j] + S[i][j]); S = S * w[i] + k[i] v[j]."""
    (k, v, r, w), state = _linear_inputs(dst, (0, 1, 2, 4), 5)
    u = load(src(dst, 3))[0, 0]  # time_first [H, S]
    y = np.zeros_like(v)
    for t in range(k.shape[1]):
        kv = k[:, t, :, :, np.newaxis] * v[:, t, :, np.newaxis, :]
        y[:, t] = np.einsum("nhi,nhij->nhj", r[:, t], u[np.newaxis, :, :, np.newaxis] * kv + state)
        state = state * w[:, t, :, :, np.newaxis] + kv
    _store_linear(dst, y, state)


@rules.kernel(Op.GATED_LINEAR_ATTN)
def gated_linear_attn(dst: Tensor) -> None:
    """S[i][j] (i over k, j over v): S = S * g[i] + k[i] v[j]; y[j] = scale sum_i q[i] S[i][j]."""
    (k, v, q, g), state = _linear_inputs(dst, (0, 1, 2, 3), 4)
    y = np.zeros_like(v)
    for t in range(k.shape[1]):
        state = state * g[:, t, :, :, np.newaxis] + k[:, t, :, :, np.newaxis] * v[:, t, :, np.newaxis, :]
        y[:, t] = np.einsum("nhi,nhij->nhj", q[:, t], state) * np.float32(dst.params.scale)
    _store_linear(dst, y, state)


@rules.kernel(Op.RWKV_WKV7)
def rwkv_wkv7(dst: Tensor) -> None:
    """S[i][j] (i over v, j over k): sa[i] = sum_j a[j] S[i][j]; S = S w[j] + v[i] k[j] + sa[i] b[j]; y = S r."""
    (r, w, k, v, a, b), state = _linear_inputs(dst, tuple(range(6)), 6)
    y = np.zeros_like(v)
    for t in range(k.shape[1]):
        sa = np.einsum("nhij,nhj->nhi", state, a[:, t])
        state = (state * w[:, t, :, np.newaxis, :] + v[:, t, :, :, np.newaxis] * k[:, t, :, np.newaxis, :]
                 + sa[..., np.newaxis] * b[:, t, :, np.newaxis, :])
        y[:, t] = np.einsum("nhij,nhj->nhi", state, r[:, t])
    _store_linear(dst, y, state)


@rules.kernel(Op.GATED_DELTA_NET)
def gated_delta_net(dst: Tensor) -> None:
    """S[i][j] (i over k, j over v; stored at ne index (i, j), so numpy [.., j, i]): decay, delta-rule update,
    read-out by q / sqrt(S_v); q and k heads and sequences broadcast as ggml's kernel reads them."""
    q = load(src(dst, 0))  # [n_seqs_q, T, H_q, S]
    k = load(src(dst, 1))
    v = load(src(dst, 2))  # [n_seqs, T, H, S]
    g = np.exp(load(src(dst, 3)))  # [n_seqs, T, H, 1 or S]
    beta = load(src(dst, 4))  # [n_seqs, T, H, 1]
    state = load(src(dst, 5)).transpose(0, 1, 3, 2)  # [n_seqs, H, i, j]
    n_seqs, n_tok, heads, s_v = v.shape

    def spread(t: Array) -> Array:
        out: Array = t[np.arange(n_seqs) // (n_seqs // t.shape[0])][:, :, np.arange(heads) % t.shape[2]]
        return out

    q, k = spread(q), spread(k)
    scale = 1.0 / np.sqrt(np.float32(s_v), dtype=np.float32)
    y = np.zeros_like(v)
    parts: list[tuple[int, Array]] = []
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(n_tok):
            state = state * g[:, t, :, :, np.newaxis]
            delta = beta[:, t] * (v[:, t] - np.einsum("nhij,nhi->nhj", state, k[:, t]))
            state = state + k[:, t, :, :, np.newaxis] * delta[:, :, np.newaxis, :]
            y[:, t] = np.einsum("nhij,nhi->nhj", state, q[:, t]) * scale
            slot = n_tok - 1 - t
            if slot < dst.params.k:
                parts.append((y.size + slot * state.size, state.transpose(0, 1, 3, 2)))
    if n_tok == 0:  # no token: slot 0 holds the initial states (as ggml for K = 1; it leaves K > 1 unwritten)
        parts.append((y.size, state.transpose(0, 1, 3, 2)))
    _store_parts(dst, [(0, y), *parts])
