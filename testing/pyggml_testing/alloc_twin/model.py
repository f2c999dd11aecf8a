"""Recipes of the ops models are made of: MUL_MAT and OUT_PROD against weights or intermediates, SOFT_MAX with a
mask, ROPE, attention over an F16 cache (FLASH_ATTN_EXT, MUL_MAT of permuted views, MUL_MAT_ID over experts), pooling
and resampling, TIMESTEP_EMBEDDING of ARANGE, and the convolutions (as ggml composes them: IM2COL, MUL_MAT,
reshapes, permutes and CONT; or direct), WIN_PART, SSM_CONV."""

from __future__ import annotations

from pyggml import ops
from pyggml_testing.alloc_twin.ggml import Twin
from pyggml_testing.alloc_twin.pool import DIMS0, F16, MAX_ELEMENTS, Pool


def matmul(g: Pool, a: Twin) -> Twin | None:
    ne = a.py.ne
    rows = a.py.nrows()
    if ne[2] == 1 and g.chance(0.15):
        # OUT_PROD: a [m, k] x b [n, k] -> [m, n]
        fits = [n for n in DIMS0 if n * ne[0] <= MAX_ELEMENTS] or [1]
        b = g.peer(a, (fits[0], ne[1], 1, 1)) if g.chance(0.3) else None
        b = b or g.leaf((g.choice(fits), ne[1]), ("weight", "const"), (0.8, 0.2))
        return g.both(ops.out_prod(a.py, b.py), "out_prod", a, b)
    peers = [t for t in g.pool if t.py.ne[0] == ne[0] and t.py.ne[2] in (1, ne[2]) and t is not a
             and t.py.ne[1] * rows <= MAX_ELEMENTS] if g.chance(0.3) else []
    if peers:
        w = g.choice(peers)
    else:
        fits = [n for n in DIMS0 if n * max(rows, ne[0]) <= MAX_ELEMENTS] or [1]
        w = g.leaf((ne[0], g.choice(fits)), ("weight", "const"), (0.85, 0.15))
    return g.both(ops.mul_mat(w.py, a.py), "mul_mat", w, a)


def attention(g: Pool, a: Twin) -> Twin | None:
    """SOFT_MAX with an optional mask and a scale; ROPE (also in place)."""
    ne = a.py.ne
    if ne[0] % 2 == 0 and ne[2] > 1 and g.chance(0.3):
        inplace = g.chance(0.15)
        pos = g.ids((ne[2],), 1 << 10)
        n_dims = g.choice([d for d in (2, 4, ne[0]) if d <= ne[0]])
        return g.both(ops.rope(a.py, pos.py, n_dims, 0, inplace=inplace), f"rope{'_inplace' if inplace else ''}",
                      a, pos, n_dims, 0)
    mask = g.leaf(ne[:2], ("input", "const"), (0.8, 0.2)) if g.chance(0.6) else None
    return g.both(ops.soft_max(a.py, None if mask is None else mask.py, 0.125, 0.0), "soft_max_ext", a, mask,
                  0.125, 0.0)


def kv_attention(g: Pool, a: Twin) -> Twin | None:
    """a as q [head size, heads, tokens] against an F16 or F32 cache: FLASH_ATTN_EXT, or MUL_MAT of permuted views
    (k.q, then v.kq); MUL_MAT_ID of a over experts."""
    d, h, n_q, _ = a.py.ne
    n_kv = g.choice((4, 8, 16, 32))
    if d > 128 or max(n_kv, d) * h * n_q > MAX_ELEMENTS:
        return None
    r = g.rng.random()
    if r < 0.2:
        n_exp = int(g.rng.integers(2, 5))
        w = g.leaf((d, g.choice((8, 16, 32)), n_exp), ("weight",), (1.0,))
        ids = g.ids((h, n_q), n_exp)
        return g.both(ops.mul_mat_id(w.py, a.py, ids.py), "mul_mat_id", w, a, ids)
    q = g.both(ops.permute(a.py, 0, 2, 1, 3), "permute", a, 0, 2, 1, 3, pool=False)  # [d, n_q, h]
    if r < 0.6:
        k, v = (g.leaf((d, n_kv, h), ("weight", "const"), (0.8, 0.2), F16) for _ in range(2))
        mask = g.leaf((n_kv, n_q), ("input",), (1.0,), F16) if g.chance(0.5) else None
        return g.both(ops.flash_attn_ext(q.py, k.py, v.py, None if mask is None else mask.py, 0.125),
                      "flash_attn_ext", q, k, v, mask, 0.125, 0.0, 0.0)
    k = g.leaf((d, n_kv, h), ("weight", "const"), (0.8, 0.2))
    kq = g.both(ops.mul_mat(k.py, q.py), "mul_mat", k, q)  # [n_kv, n_q, h]
    if g.chance(0.5):
        return kq
    vt = g.leaf((n_kv, d, h), ("weight", "const"), (0.8, 0.2))
    return g.both(ops.mul_mat(vt.py, kq.py), "mul_mat", vt, kq)  # [d, n_q, h]


def spatial(g: Pool, a: Twin) -> Twin | None:
    """POOL_1D, POOL_2D, UPSCALE (by a factor or to a size), PAD_REFLECT_1D, TIMESTEP_EMBEDDING of ARANGE."""
    ne, r = a.py.ne, g.rng.random()
    op = g.choice(list(ops.PoolOp))
    if r < 0.2 and ne[0] >= 2:
        return g.both(ops.pool_1d(a.py, op, 2, 2, 0), "pool_1d", a, op.value, 2, 2, 0)
    if r < 0.4 and ne[0] >= 2 and ne[1] >= 2:
        return g.both(ops.pool_2d(a.py, op, 2, 2, 2, 1, 0, 1), "pool_2d", a, op.value, 2, 2, 2, 1, 0.0, 1.0)
    if r < 0.6 and 4 * a.py.nelements() <= MAX_ELEMENTS:
        if g.chance(0.5):
            return g.both(ops.upscale(a.py, 2), "upscale", a, 2, 0)
        return g.both(ops.interpolate(a.py, ne[0] + 1, 2 * ne[1], ne[2]), "interpolate", a, ne[0] + 1, 2 * ne[1],
                      ne[2], 1, 0)
    if r < 0.75 and ne[0] >= 3:
        return g.both(ops.pad_reflect_1d(a.py, 1, 2), "pad_reflect_1d", a, 1, 2)
    n = float(g.rng.integers(2, 9))
    with g.b.pctx:
        steps = g.both(ops.arange(g.b.pctx, 0.0, n, 1.0), "arange", 0.0, n, 1.0, pool=False)
    dim = ne[0] + ne[0] % 2
    return g.both(ops.timestep_embedding(steps.py, dim, 100), "timestep_embedding", steps, dim, 100)


def conv(g: Pool, a: Twin) -> Twin | None:
    """a as an image [W, H, C] or a sequence [L, C]: CONV_2D (IM2COL + MUL_MAT + CONT, or direct), depthwise
    CONV_2D_DW (composed or direct), CONV_1D_DW, CONV_TRANSPOSE_1D, IM2COL alone, WIN_PART; SSM_CONV."""
    (w, h, c, _), r = a.py.ne, g.rng.random()
    if w < 3 or w * h * c * 9 > MAX_ELEMENTS:
        return None
    if r < 0.45:
        if h < 3:
            return None
        name = g.choice(("conv_2d", "conv_2d_direct", "conv_2d_dw", "conv_2d_dw_direct"))
        depthwise = "dw" in name
        k = g.leaf((3, 3, 1 if depthwise else c, c if depthwise else g.choice((1, 2, 4))), ("weight", "const"),
                   (0.8, 0.2))
        args = (1, 1, 1, 1, 1, 1) if g.chance(0.5) else (2, 1, 0, 1, 1, 1)
        composed = name in ("conv_2d", "conv_2d_dw")
        return g.both(getattr(ops, name)(k.py, a.py, *args), name, k, a, *args,
                      nodes=5 if composed else 1)
    if c != 1:
        return None
    if r < 0.6:
        k = g.leaf((3, 1, h), ("weight",), (1.0,))
        return g.both(ops.conv_1d_dw(k.py, a.py, 1, 1, 1), "conv_1d_dw", k, a, 1, 1, 1, nodes=3)
    if r < 0.7:
        k = g.leaf((3, g.choice((1, 2)), h), ("weight",), (1.0,))
        return g.both(ops.conv_transpose_1d(k.py, a.py, 1, 0, 1), "conv_transpose_1d", k, a, 1, 0, 1)
    if r < 0.8:
        k = g.leaf((3, h, 2), ("weight",), (1.0,))
        return g.both(ops.im2col(k.py, a.py, 1, 0, 1, 0, 1, 0, False, F16), "im2col", k, a, 1, 0, 1, 0, 1, 0, False,
                      int(F16), pool=False)
    if r < 0.9:
        if w < 4:
            return None
        cw = g.leaf((4, h), ("weight",), (1.0,))
        return g.both(ops.ssm_conv(a.py, cw.py), "ssm_conv", a, cw)
    return g.both(ops.win_part(a.py, 4), "win_part", a, 4, pool=False) if h >= 2 else None
