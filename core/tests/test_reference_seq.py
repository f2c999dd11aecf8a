"""Reference kernels of the sequence-model ops against an independent formulation: plain loops over single
elements of flat ggml-ordered buffers (the offsets ggml's CPU kernels compute), one token, head and element at a
time, where the reference runs whole tokens as numpy array expressions. SOLVE_TRI against numpy.linalg.solve, TRI
against numpy.tril / triu; shape rules and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pyggml import ops
from pyggml.errors import PyGGMLError, ShapeError, UnsupportedTypeError
from pyggml.ops import TriType
from pyggml.types import GGMLType as T
from pyggml_testing.graphs import new_ctx, rand, result, tensor


def _flat(x: np.ndarray) -> list[float]:
    return [float(v) for v in x.reshape(-1)]


def _softplus(x: float) -> float:
    return x if x > 20.0 else math.log(1.0 + math.exp(x))


# ---- TRI / SOLVE_TRI ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(TriType))
def test_tri_matches_numpy_triangles(kind: TriType) -> None:
    a = rand(3, 2, 7, 7, seed=1)
    want = {TriType.LOWER: np.tril(a, -1), TriType.LOWER_DIAG: np.tril(a), TriType.UPPER: np.triu(a, 1),
            TriType.UPPER_DIAG: np.triu(a)}[kind]
    np.testing.assert_array_equal(result(ops.tri(tensor(new_ctx(), a), kind)).reshape(want.shape), want)


@pytest.mark.parametrize(("n", "k", "batch"), [(1, 1, (1, 1)), (10, 3, (3, 4)), (33, 17, (2, 1)), (64, 64, (1, 2))])
def test_solve_tri_matches_linalg_solve(n: int, k: int, batch: tuple[int, int]) -> None:
    rng = np.random.default_rng(n)
    a = rng.uniform(-1, 1, (*batch, n, n)).astype(np.float32).astype(np.float64)
    a[..., np.arange(n), np.arange(n)] = rng.uniform(0.5, 1.5, (*batch, n))  # well conditioned
    b = rand(*batch, n, k, seed=2)
    ctx = new_ctx()
    got = result(ops.solve_tri(tensor(ctx, a), tensor(ctx, b)))
    want = np.linalg.solve(np.tril(a), b)  # the upper part of a is garbage the op must not read
    np.testing.assert_allclose(got.reshape(want.shape), np.float32(want), rtol=2e-5, atol=1e-6 * np.abs(want).max())


# ---- SSM_CONV / SSM_SCAN -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("d_conv", "d_inner", "n_t", "n_s"), [(4, 8, 1, 1), (4, 5, 9, 3), (2, 3, 0, 2)])
def test_ssm_conv_loop(d_conv: int, d_inner: int, n_t: int, n_s: int) -> None:
    sx = rand(n_s, d_inner, d_conv - 1 + n_t, seed=3)
    c = rand(d_inner, d_conv, seed=4)
    got = result(ops.ssm_conv(tensor(new_ctx(), sx), tensor(new_ctx(), c)))
    want = np.zeros((1, n_s, n_t, d_inner))
    for s in range(n_s):
        for t in range(n_t):
            for ch in range(d_inner):
                want[0, s, t, ch] = sum(sx[s, ch, t + j] * c[ch, j] for j in range(d_conv))
    np.testing.assert_allclose(got.reshape(want.shape), np.float32(want), rtol=1e-6, atol=1e-6)


def _ssm_scan_loop(s0: np.ndarray, x: np.ndarray, dt: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray,
                   ids: np.ndarray, k_slots: int) -> list[float | None]:
    """ggml's loop on flat buffers: y then K state slots (None where a slot is never written)."""
    ns, nt, nh, nr = x.shape
    nc, ng = s0.shape[-1], b.shape[2]
    fs, fx, fdt, fa, fb, fc = (_flat(v) for v in (s0, x, dt, a, b, c))
    seq_size = nc * nr * nh
    out: list[float | None] = [None] * (x.size + k_slots * seq_size * ns)
    for i3 in range(ns):
        cur = fs[int(ids[i3]) * seq_size:(int(ids[i3]) + 1) * seq_size]
        for i2 in range(nt):
            nxt = list(cur)
            for h in range(nh):
                sp = _softplus(fdt[(i3 * nt + i2) * nh + h])
                g = h // (nh // ng)
                for i1 in range(nr):
                    ii = i1 + h * nr
                    xdt = fx[((i3 * nt + i2) * nh + h) * nr + i1] * sp
                    acc = 0.0
                    for i0 in range(nc):
                        da = math.exp(sp * (fa[h] if a.shape[-1] == 1 else fa[h * nc + i0]))
                        bg = ((i3 * nt + i2) * ng + g) * nc + i0
                        st = cur[ii * nc + i0] * da + fb[bg] * xdt
                        acc += st * fc[bg]
                        nxt[ii * nc + i0] = st
                    out[((i3 * nt + i2) * nh + h) * nr + i1] = acc
            cur = nxt
            slot = nt - 1 - i2
            if slot < k_slots:
                base = x.size + (slot * ns + i3) * seq_size
                out[base:base + seq_size] = cur
    return out


@pytest.mark.parametrize(("d_state", "head_dim", "n_head", "n_group", "nt", "ns", "k_slots"), [
    (4, 1, 6, 1, 5, 2, 1),  # Mamba 1: A [d_state, n_head]
    (3, 4, 4, 2, 6, 3, 1),  # Mamba 2, two groups
    (4, 2, 4, 4, 5, 2, 3),  # Mamba 2 with state snapshots
    (2, 2, 2, 1, 1, 1, 1),
])
def test_ssm_scan_loop(d_state: int, head_dim: int, n_head: int, n_group: int, nt: int, ns: int,
                       k_slots: int) -> None:
    s0 = rand(ns + 1, n_head, head_dim, d_state, seed=5)  # one spare state: ids pick and permute
    x = rand(ns, nt, n_head, head_dim, seed=6)
    dt = rand(ns, nt, n_head, seed=7, scale=2.0)
    dt[0, 0, 0] = 25.0  # softplus's pass-through branch
    a = -np.abs(rand(n_head, d_state if head_dim == 1 else 1, seed=8)) - 0.5
    b, c = rand(ns, nt, n_group, d_state, seed=9), rand(ns, nt, n_group, d_state, seed=10)
    ids = np.arange(ns, dtype=np.int32)[::-1] + 1
    ctx = new_ctx()
    ts, tx, tdt, ta, tb, tc = (tensor(ctx, v) for v in (s0, x, dt, a, b, c))
    node = ops.ssm_scan(ts, tx, tdt, ta, tb, tc, tensor(ctx, ids, T.I32), k_slots)
    got = result(node).reshape(-1)
    want = _ssm_scan_loop(s0, x, dt, a, b, c, ids, k_slots)
    assert all(w is not None for w in want)
    np.testing.assert_allclose(got, np.float32(np.array(want, dtype=np.float64)), rtol=1e-5, atol=1e-6)


def test_ssm_scan_bad_input() -> None:
    ctx = new_ctx()
    s0, x, dt = tensor(ctx, rand(2, 4, 1, 3)), tensor(ctx, rand(2, 5, 4, 1)), tensor(ctx, rand(2, 5, 4))
    a1, b, c = tensor(ctx, rand(4, 3)), tensor(ctx, rand(2, 5, 1, 3)), tensor(ctx, rand(2, 5, 1, 3))
    ids = tensor(ctx, np.array([0, 1], np.int32), T.I32)
    with pytest.raises(ShapeError, match="SSM_SCAN: K=2 snapshots need Mamba-2"):
        ops.ssm_scan(s0, x, dt, a1, b, c, ids, 2)
    with pytest.raises(ShapeError, match="SSM_SCAN: dt must be"):
        ops.ssm_scan(s0, x, tensor(ctx, rand(2, 4, 4)), a1, b, c, ids)
    with pytest.raises(ShapeError, match="SSM_SCAN: s must be"):
        ops.ssm_scan(tensor(ctx, rand(2, 3, 1, 3)), x, dt, a1, b, c, ids)
    with pytest.raises(UnsupportedTypeError, match="SSM_SCAN: src6 \\(ids\\)"):
        ops.ssm_scan(s0, x, dt, a1, b, c, tensor(ctx, np.array([0.0, 1.0])))
    with pytest.raises(ShapeError, match="SSM_SCAN: K"):
        ops.ssm_scan(s0, x, dt, a1, b, c, ids, 0)
    bad = ops.ssm_scan(s0, x, dt, a1, b, c, tensor(ctx, np.array([0, 2], np.int32), T.I32))
    with pytest.raises(PyGGMLError, match="SSM_SCAN: state id \\(ids\\) 2 is outside \\[0, 2\\)"):
        result(bad)
    with pytest.raises(ShapeError, match="SSM_CONV: the kernel"):
        ops.ssm_conv(tensor(ctx, rand(1, 4, 2)), tensor(ctx, rand(4, 4)))


# ---- RWKV_WKV6 / GATED_LINEAR_ATTN / RWKV_WKV7 (ggml's flat loops) ------------------------------------------------


def _linear_loop(kind: str, srcs: list[np.ndarray], state: np.ndarray, n_seqs: int, scale: float = 1.0
                 ) -> np.ndarray:
    t_all, heads, size = srcs[0].shape
    c = heads * size
    f = [_flat(v) for v in srcs]
    out = [0.0] * (t_all * c)
    st = _flat(state)  # becomes the output state, updated in place per sequence
    per_seq = t_all // n_seqs
    for t in range(t_all):
        so = size * c * (t // per_seq)
        prev = st if t % per_seq else _flat(state)  # the first token of a sequence reads the input state
        cur = st
        for h in range(heads):
            for i in range(size):
                ti, si = t * c + h * size + i, so + h * size * size + i * size
                if kind == "wkv7":
                    sa = sum(f[4][t * c + h * size + j] * prev[si + j] for j in range(size))
                    acc = 0.0
                    for j in range(size):
                        tj = t * c + h * size + j
                        val = prev[si + j] * f[1][tj] + f[3][ti] * f[2][tj] + sa * f[5][tj]
                        cur[si + j] = val
                        acc += val * f[0][tj]
                    out[ti] = acc
                    continue
                for j in range(size):
                    tj = t * c + h * size + j
                    kv = f[1][tj] * f[0][ti]
                    if kind == "wkv6":
                        out[tj] += (kv * f[3][h * size + i] + prev[si + j]) * f[2][ti]
                        cur[si + j] = prev[si + j] * f[4][ti] + kv
                    else:  # gla
                        val = prev[si + j] * f[3][ti] + kv
                        out[tj] += val * f[2][ti] * scale
                        cur[si + j] = val
    return np.array(out + st)


@pytest.mark.parametrize("kind", ["wkv6", "gla", "wkv7"])
@pytest.mark.parametrize(("heads", "size", "per_seq", "n_seqs"), [(2, 4, 3, 2), (1, 8, 1, 3), (3, 2, 5, 1)])
def test_linear_attention_loops(kind: str, heads: int, size: int, per_seq: int, n_seqs: int) -> None:
    t_all = per_seq * n_seqs
    rng = np.random.default_rng(heads * 100 + size)
    n_tok = {"wkv6": 5, "gla": 4, "wkv7": 6}[kind]
    srcs = [rng.uniform(-1, 1, (t_all, heads, size)).astype(np.float32).astype(np.float64) for _ in range(n_tok)]
    decay = rng.uniform(0.5, 1.0, (t_all, heads, size)).astype(np.float32).astype(np.float64)
    state = rand(n_seqs, heads * size * size, seed=11)
    ctx = new_ctx()
    ts = [tensor(ctx, v) for v in srcs]
    if kind == "wkv6":
        tf = rand(heads, size, seed=12)
        srcs[3], srcs[4] = tf, decay
        node = ops.rwkv_wkv6(ts[0], ts[1], ts[2], tensor(ctx, tf), tensor(ctx, decay), tensor(ctx, state))
    elif kind == "gla":
        srcs[3] = decay
        node = ops.gated_linear_attn(ts[0], ts[1], ts[2], tensor(ctx, decay), tensor(ctx, state), 0.3)
    else:
        srcs[1] = decay
        node = ops.rwkv_wkv7(ts[0], tensor(ctx, decay), ts[2], ts[3], ts[4], ts[5], tensor(ctx, state))
    assert node.ne == (heads * size, t_all + size * n_seqs, 1, 1)
    want = _linear_loop(kind, srcs, state, n_seqs, float(np.float32(0.3)))
    np.testing.assert_allclose(result(node).reshape(-1), np.float32(want), rtol=1e-5, atol=1e-6)


def test_linear_attention_bad_state() -> None:
    ctx = new_ctx()
    k = tensor(ctx, rand(4, 2, 3))
    with pytest.raises(ShapeError, match="RWKV_WKV6: state must hold"):
        ops.rwkv_wkv6(k, k, k, tensor(ctx, rand(2, 3)), k, tensor(ctx, rand(2, 17)))
    with pytest.raises(ShapeError, match="GATED_LINEAR_ATTN: the 4 tokens must split evenly"):
        ops.gated_linear_attn(k, k, k, k, tensor(ctx, rand(3, 18)), 1.0)
    with pytest.raises(ShapeError, match="RWKV_WKV7: b must be"):
        ops.rwkv_wkv7(k, k, k, k, k, tensor(ctx, rand(4, 2, 2)), tensor(ctx, rand(2, 18)))


# ---- GATED_DELTA_NET ---------------------------------------------------------------------------------------------


def _gdn_loop(q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray, beta: np.ndarray, state: np.ndarray,
              k_slots: int) -> list[float | None]:
    ns, nt, heads, sv = v.shape
    hq, nsq = q.shape[2], q.shape[0]
    fq, fk, fv, fg, fb, fs = (_flat(x) for x in (q, k, v, g, beta, state))
    kda = g.shape[-1] == sv
    scale = float(np.float32(1.0) / np.sqrt(np.float32(sv)))
    y_size, snap = v.size, sv * sv * heads * ns
    out: list[float | None] = [None] * (y_size + k_slots * snap)
    for s in range(ns):
        for h in range(heads):
            qs, qh = s // (ns // nsq), h % hq
            m = fs[(s * heads + h) * sv * sv:(s * heads + h + 1) * sv * sv]  # m[j*sv + i] = S[i][j]
            for t in range(nt):
                qo, vo = ((qs * nt + t) * hq + qh) * sv, ((s * nt + t) * heads + h) * sv
                go = ((s * nt + t) * heads + h) * (sv if kda else 1)
                for j in range(sv):
                    for i in range(sv):
                        m[j * sv + i] *= math.exp(fg[go + i] if kda else fg[go])
                bt = fb[(s * nt + t) * heads + h]
                d = [(fv[vo + j] - sum(m[j * sv + i] * fk[qo + i] for i in range(sv))) * bt for j in range(sv)]
                for j in range(sv):
                    for i in range(sv):
                        m[j * sv + i] += fk[qo + i] * d[j]
                for j in range(sv):
                    out[vo + j] = sum(m[j * sv + i] * fq[qo + i] for i in range(sv)) * scale
                slot = nt - 1 - t
                if slot < k_slots:
                    base = y_size + slot * snap + (s * heads + h) * sv * sv
                    out[base:base + sv * sv] = m
    return out


@pytest.mark.parametrize(("heads", "sv", "nt", "ns", "rep", "kda", "k_slots"), [
    (2, 4, 3, 2, 1, False, 1), (2, 4, 3, 2, 2, True, 1), (1, 8, 5, 1, 1, False, 3), (2, 3, 4, 2, 1, True, 4),
])
def test_gated_delta_net_loop(heads: int, sv: int, nt: int, ns: int, rep: int, kda: bool, k_slots: int) -> None:
    rng = np.random.default_rng(sv * 10 + nt)

    def u(*shape: int, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
        return rng.uniform(lo, hi, shape).astype(np.float32).astype(np.float64)

    q, k = u(ns, nt, heads, sv), u(ns, nt, heads, sv)
    v = u(ns, nt, heads * rep, sv, lo=-0.3, hi=5.0)
    g = u(ns, nt, heads * rep, sv if kda else 1, lo=-3.0, hi=-1e-4)
    beta, state = u(ns, nt, heads * rep, 1, lo=0.0), u(ns, heads * rep, sv, sv)
    ctx = new_ctx()
    tq, tk, tv, tg, tbeta, tstate = (tensor(ctx, x) for x in (q, k, v, g, beta, state))
    node = ops.gated_delta_net(tq, tk, tv, tg, tbeta, tstate, k_slots)
    want = _gdn_loop(q, k, v, g, beta, state, k_slots)
    assert all(w is not None for w in want)
    np.testing.assert_allclose(result(node).reshape(-1), np.float32(np.array(want, dtype=np.float64)), rtol=1e-5,
                               atol=1e-5)


def test_gated_delta_net_bad_input() -> None:
    ctx = new_ctx()
    v = tensor(ctx, rand(1, 2, 4, 8))
    q = tensor(ctx, rand(1, 2, 3, 8))
    with pytest.raises(ShapeError, match="GATED_DELTA_NET: v's heads and sequences must be whole multiples of q's"):
        ops.gated_delta_net(q, v, v, tensor(ctx, rand(1, 2, 4, 1)), tensor(ctx, rand(1, 2, 4, 1)),
                            tensor(ctx, rand(1, 4, 8, 8)))
    with pytest.raises(ShapeError, match="GATED_DELTA_NET: state must be"):
        ops.gated_delta_net(v, v, v, tensor(ctx, rand(1, 2, 4, 1)), tensor(ctx, rand(1, 2, 4, 1)),
                            tensor(ctx, rand(1, 4, 8, 7)))
    with pytest.raises(UnsupportedTypeError, match="GATED_DELTA_NET: src0 \\(q\\)"):
        ops.gated_delta_net(tensor(ctx, rand(1, 2, 4, 8), T.F16), v, v, v, v, v)
