/* Sequence-model ops (f32 only; docs/op-semantics.md, "Sequence models"): TRI, SOLVE_TRI, SSM_CONV, SSM_SCAN
 * (Mamba 1 and 2), RWKV_WKV6, GATED_LINEAR_ATTN, RWKV_WKV7, GATED_DELTA_NET. Inputs are read through their strides;
 * the destination of the recurrent ops is ggml's one contiguous f32 tensor: the outputs, then the state(s).
 *
 * The recurrences keep a thread's part of the state in registers and walk the tokens in order, so sums repeat bit
 * for bit on every run (no atomics):
 * - SSM_SCAN: one work-group of WG lanes per state row (head_dim index, head, sequence); lane l owns state elements
 *   l, l + WG, ... (NS of them), y is a work-group sum per token.
 * - the S x S linear recurrences: one work-group of HS (= S) lanes per (head, sequence); each lane owns one row or
 *   column of the head's state (HS registers) and the per-token vectors every lane reads go through local memory.
 * Defines: WG and NS (SSM_SCAN), HS (the linear recurrences); the defaults serve the programs of the other ops. */
#ifndef WG
#define WG 64
#endif
#ifndef NS
#define NS 1
#endif
#ifndef HS
#define HS 1
#endif
#include "reduce.h"

#if defined(__OPENCL_VERSION__)
#define PG_LOG1P log1p
#else
#define PG_LOG1P log1pf
#endif

#define F32_AT(x, i0, i1, i2, i3) load_f32(AT(x, i0, i1, i2, i3))
/* element `flat` of the contiguous f32 destination */
#define D_FLAT(flat) (((GLOBAL float *)BASE(d))[flat])

/* TRI: keep column i0 of row i1 where (tri_type) 0: i0 >= i1, 1: i0 > i1, 2: i0 <= i1, 3: i0 < i1; else 0 */
KERNEL void k_tri(TENSOR(a), TENSOR(d), i32 tri_type) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    int keep = tri_type == 0 ? i0 >= i1 : tri_type == 1 ? i0 > i1 : tri_type == 2 ? i0 <= i1 : i0 < i1;
    store_f32(AT(d, i0, i1, i2, i3), keep ? F32_AT(a, i0, i1, i2, i3) : 0.f);
}

/* SOLVE_TRI: forward substitution for one right-hand side column (i0 of B) of one batch per work-item; rows of X
 * already solved are read back from d. A's entries above the diagonal are not read. */
KERNEL void k_solve_tri(TENSOR(a), TENSOR(b), TENSOR(d)) {
    i64 g = GID(0);
    if (g >= d_ne0 * d_ne2 * d_ne3) return;
    i64 col = g % d_ne0, i2 = (g / d_ne0) % d_ne2, i3 = g / (d_ne0 * d_ne2);
    for (i64 i = 0; i < d_ne1; i++) {
        acc_t acc = 0;
        for (i64 t = 0; t < i; t++) acc += (acc_t)F32_AT(a, t, i, i2, i3) * (acc_t)F32_AT(d, col, t, i2, i3);
        float x = (F32_AT(b, col, i, i2, i3) - (float)acc) / F32_AT(a, i, i, i2, i3);
        store_f32(AT(d, col, i, i2, i3), x);
    }
}

/* SSM_CONV: d[ch, t, s] = sum_k sx[t + k, ch, s] * c[k, ch], k ascending; one work-item per output */
KERNEL void k_ssm_conv(TENSOR(sx), TENSOR(c), TENSOR(d)) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, ch, t, s, i3);
    float acc = 0.f;
    for (i64 k = 0; k < c_ne0; k++) acc += F32_AT(sx, t + k, ch, s, 0) * F32_AT(c, k, ch, 0, 0);
    store_f32(AT(d, ch, t, s, i3), acc);
}

/* SSM_SCAN: src order s, x, dt, A, B, C, ids; k_slots state snapshots (slot j: the state j tokens before the end) */
KERNEL void k_ssm_scan(TENSOR(s), TENSOR(x), TENSOR(dt), TENSOR(a), TENSOR(b), TENSOR(c), TENSOR(ids), TENSOR(d),
                       i64 k_slots, ERR_ARGS) {
    LOCAL float buf[WG];
    i64 row = GRP(0);
    i32 l = LID(0);
    i64 d_state = s_ne0, head_dim = x_ne0, n_head = x_ne1, n_tok = x_ne2;
    i64 di = row % head_dim, h = (row / head_dim) % n_head, q = row / (head_dim * n_head);
    i64 grp = h / (n_head / b_ne1);
    i64 id = (i64)*(GLOBAL const i32 *)AT(ids, q, 0, 0, 0);
    CHECK_INDEX(id, s_ne3);   /* the same id for every lane: the whole work-group leaves */
    i64 block = d_state * head_dim * n_head * x_ne3;
    i64 base = NEL(x) + ((q * n_head + h) * head_dim + di) * d_state;
    int mamba1 = a_ne0 != 1;
    float a_h = F32_AT(a, 0, h, 0, 0);
    float st[NS];
    for (i32 j = 0; j < NS; j++) {
        i64 n = l + (i64)j * WG;
        st[j] = n < d_state ? F32_AT(s, n, di, h, id) : 0.f;
    }
    for (i64 t = 0; t < n_tok; t++) {
        float dtv = F32_AT(dt, h, t, q, 0);
        dtv = dtv > 20.f ? dtv : PG_LOG1P(EXP(dtv));
        float xdt = F32_AT(x, di, h, t, q) * dtv;
        float decay = EXP(dtv * a_h);
        float acc = 0.f;
        for (i32 j = 0; j < NS; j++) {
            i64 n = l + (i64)j * WG;
            if (n >= d_state) break;
            float da = mamba1 ? EXP(dtv * F32_AT(a, n, h, 0, 0)) : decay;
            st[j] = st[j] * da + F32_AT(b, n, grp, t, q) * xdt;
            acc += st[j] * F32_AT(c, n, grp, t, q);
        }
        float y = wg_sum(acc, buf);
        if (l == 0) D_FLAT(((q * n_tok + t) * n_head + h) * head_dim + di) = y;
        i64 slot = n_tok - 1 - t;
        if (slot < k_slots) {
            for (i32 j = 0; j < NS; j++) {
                i64 n = l + (i64)j * WG;
                if (n < d_state) D_FLAT(base + slot * block + n) = st[j];
            }
        }
    }
    if (n_tok == 0) {   /* no token: slot 0 holds the initial state, as the reference */
        for (i32 j = 0; j < NS; j++) {
            i64 n = l + (i64)j * WG;
            if (n < d_state) D_FLAT(base + n) = st[j];
        }
    }
}

/* ---- the S x S linear recurrences: work-group (head h, sequence q), lane `me` ------------------------------------ */

#define LINEAR_PROLOGUE(x)                                                                           \
    i64 n_heads = x##_ne1, h = GRP(0) % n_heads, q = GRP(0) / n_heads;                                \
    i32 me = LID(0);                                                                                 \
    i64 tps = x##_ne2 / st_ne1, t0 = q * tps;                                                        \
    float s[HS]
/* the state element at index `f` of a sequence's S*S*H values: in the state src [S*S*H, n_seqs] and in d (after
 * the T rows of outputs) */
#define STATE_IN(f) F32_AT(st, f, q, 0, 0)
#define STATE_OUT(f) D_FLAT((i64)d_ne0 * (d_ne1 - HS * st_ne1) + q * HS * d_ne0 + (f))
/* token t's vectors a, b, c of head h staged in local memory as sa, sb, sc (lane me writes element me, every lane then
 * reads all HS): the first barrier keeps the writes until every lane has finished reading the previous token's */
#define STAGE_TOKEN(sa, a, sb, b, sc, c)     \
    do {                                     \
        BARRIER();                           \
        sa[me] = F32_AT(a, me, h, t, 0);     \
        sb[me] = F32_AT(b, me, h, t, 0);     \
        sc[me] = F32_AT(c, me, h, t, 0);     \
        BARRIER();                           \
    } while (0)

/* RWKV_WKV6 (k, v, r, tf, td, state): lane j owns column j of S[i][j] (i over k) */
KERNEL void k_rwkv_wkv6(TENSOR(k), TENSOR(v), TENSOR(r), TENSOR(tf), TENSOR(td), TENSOR(st), TENSOR(d)) {
    LOCAL float sk[HS], sr[HS], sw[HS], su[HS];
    LINEAR_PROLOGUE(k);
    for (i32 i = 0; i < HS; i++) s[i] = STATE_IN((h * HS + i) * HS + me);
    su[me] = F32_AT(tf, me, h, 0, 0);
    for (i64 t = t0; t < t0 + tps; t++) {
        STAGE_TOKEN(sk, k, sr, r, sw, td);
        float vj = F32_AT(v, me, h, t, 0), y = 0.f;
        for (i32 i = 0; i < HS; i++) {
            float kv = sk[i] * vj;
            y += sr[i] * (su[i] * kv + s[i]);
            s[i] = s[i] * sw[i] + kv;
        }
        store_f32(AT(d, h * HS + me, t, 0, 0), y);
    }
    for (i32 i = 0; i < HS; i++) STATE_OUT((h * HS + i) * HS + me) = s[i];
}

/* GATED_LINEAR_ATTN (k, v, q, g, state; scale): lane j owns column j of S[i][j] (i over k) */
KERNEL void k_gated_linear_attn(TENSOR(k), TENSOR(v), TENSOR(qq), TENSOR(g), TENSOR(st), TENSOR(d), float scale) {
    LOCAL float sk[HS], sq[HS], sg[HS];
    LINEAR_PROLOGUE(k);
    for (i32 i = 0; i < HS; i++) s[i] = STATE_IN((h * HS + i) * HS + me);
    for (i64 t = t0; t < t0 + tps; t++) {
        STAGE_TOKEN(sk, k, sq, qq, sg, g);
        float vj = F32_AT(v, me, h, t, 0), y = 0.f;
        for (i32 i = 0; i < HS; i++) {
            s[i] = s[i] * sg[i] + sk[i] * vj;
            y += sq[i] * s[i];
        }
        store_f32(AT(d, h * HS + me, t, 0, 0), y * scale);
    }
    for (i32 i = 0; i < HS; i++) STATE_OUT((h * HS + i) * HS + me) = s[i];
}

/* RWKV_WKV7 (r, w, k, v, a, b, state): lane i owns row i of S[i][j] (i over v, j over k) */
KERNEL void k_rwkv_wkv7(TENSOR(r), TENSOR(w), TENSOR(k), TENSOR(v), TENSOR(a), TENSOR(b), TENSOR(st), TENSOR(d)) {
    LOCAL float sr[HS], sw[HS], sk[HS], sa[HS], sb[HS];
    LINEAR_PROLOGUE(k);
    for (i32 j = 0; j < HS; j++) s[j] = STATE_IN((h * HS + me) * HS + j);
    for (i64 t = t0; t < t0 + tps; t++) {
        BARRIER();
        sr[me] = F32_AT(r, me, h, t, 0);
        sw[me] = F32_AT(w, me, h, t, 0);
        sk[me] = F32_AT(k, me, h, t, 0);
        sa[me] = F32_AT(a, me, h, t, 0);
        sb[me] = F32_AT(b, me, h, t, 0);
        BARRIER();
        float vi = F32_AT(v, me, h, t, 0), dot = 0.f, y = 0.f;
        for (i32 j = 0; j < HS; j++) dot += sa[j] * s[j];
        for (i32 j = 0; j < HS; j++) {
            s[j] = s[j] * sw[j] + vi * sk[j] + dot * sb[j];
            y += s[j] * sr[j];
        }
        store_f32(AT(d, h * HS + me, t, 0, 0), y);
    }
    for (i32 j = 0; j < HS; j++) STATE_OUT((h * HS + me) * HS + j) = s[j];
}

/* GATED_DELTA_NET (q, k, v, g, beta, state): lane j owns column j of S[i][j] (i over k), stored at state ne (i, j, h,
 * seq); q/k head h % H_k of sequence seq / (n_seqs / n_seqs_k); k_slots snapshots as SSM_SCAN's */
KERNEL void k_gated_delta_net(TENSOR(qq), TENSOR(k), TENSOR(v), TENSOR(g), TENSOR(beta), TENSOR(st), TENSOR(d),
                              i64 k_slots) {
    LOCAL float sq[HS], sk[HS], sg[HS];
    i64 n_heads = v_ne1, n_tok = v_ne2, h = GRP(0) % n_heads, q = GRP(0) / n_heads;
    i64 hk = h % k_ne1, qk = q / (v_ne3 / k_ne3);
    i32 me = LID(0);
    int kda = g_ne0 != 1;
    float scale = 1.f / SQRT((float)HS);
    i64 block = (i64)HS * HS * n_heads * v_ne3;
    i64 base = NEL(v) + ((q * n_heads + h) * HS + me) * HS;
    float s[HS];
    for (i32 i = 0; i < HS; i++) s[i] = F32_AT(st, i, me, h, q);
    for (i64 t = 0; t < n_tok; t++) {
        BARRIER();
        sq[me] = F32_AT(qq, me, hk, t, qk);
        sk[me] = F32_AT(k, me, hk, t, qk);
        if (kda || me == 0) sg[me] = EXP(F32_AT(g, me, h, t, q));
        BARRIER();
        float dot = 0.f, y = 0.f;
        for (i32 i = 0; i < HS; i++) {
            s[i] *= sg[kda ? i : 0];
            dot += s[i] * sk[i];
        }
        float delta = F32_AT(beta, 0, h, t, q) * (F32_AT(v, me, h, t, q) - dot);
        for (i32 i = 0; i < HS; i++) {
            s[i] += sk[i] * delta;
            y += s[i] * sq[i];
        }
        D_FLAT(((q * n_tok + t) * n_heads + h) * HS + me) = y * scale;
        i64 slot = n_tok - 1 - t;
        if (slot < k_slots)
            for (i32 i = 0; i < HS; i++) D_FLAT(base + slot * block + i) = s[i];
    }
    if (n_tok == 0)
        for (i32 i = 0; i < HS; i++) D_FLAT(base + i) = s[i];
}
