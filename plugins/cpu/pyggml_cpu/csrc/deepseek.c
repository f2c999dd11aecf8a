/* The DeepSeek-family ops: LIGHTNING_INDEXER (PGC_OP_LIGHTNING_INDEXER) and the DeepSeek V4 hyper-connection ops
   (PGC_OP_DSV4_HC, sub 0 COMB, 1 PRE, 2 POST), in float32 in ggml's order of operations. Sources are read
   through their strides. Slots: 0 dst, then the srcs in ggml's order. docs/op-semantics.md states each op. */
#include "pgc.h"

static inline float ld4(const pgc_node *n, int s, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return pgc_ld(pgc_ptr(n, s, i0, i1, i2, i3), n->type[s]);
}
static inline float *dst_f32(const pgc_node *n, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (float *)pgc_ptr(n, 0, i0, i1, i2, i3);
}

/* LIGHTNING_INDEXER: q (1), k (2), weights (3), mask F16 (4). Work split over (stream, key) pairs: each key row is
   converted to float once into the thread's scratch, then scored against every token. */
static int lightning_indexer(const pgc_node *n, const pgc_tctx *c) {
    const int64_t n_embd = n->ne[1][0], n_head = n->ne[1][1], n_tok = n->ne[1][2], n_str = n->ne[1][3];
    const int64_t n_kv = n->ne[2][2], m3 = n->ne[4][3];
    const int tk = n->type[2];
    float *kf = (float *)c->scratch;
    int64_t r0, r1;
    pgc_split(n_str * n_kv, c->ith, c->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t s = r / n_kv, j = r % n_kv;
        if (tk == T_F32 || tk == T_F16 || tk == T_BF16) {
            for (int64_t e = 0; e < n_embd; e++) kf[e] = ld4(n, 2, e, 0, j, s);
        } else if (pgc_to_float(pgc_ptr(n, 2, 0, 0, j, s), kf, n_embd, tk)) {
            return PGC_E_TYPE;
        }
        for (int64_t t = 0; t < n_tok; t++) {
            float score = 0.0f;
            for (int64_t h = 0; h < n_head; h++) {
                float qk = 0.0f;
                if (n->nb[1][0] == 4) {
                    const float *q = (const float *)pgc_ptr(n, 1, 0, h, t, s);
                    for (int64_t e = 0; e < n_embd; e++) qk += q[e] * kf[e];
                } else {
                    for (int64_t e = 0; e < n_embd; e++) qk += ld4(n, 1, e, h, t, s) * kf[e];
                }
                score += (qk > 0.0f ? qk : 0.0f) * ld4(n, 3, h, t, 0, s);
            }
            *dst_f32(n, j, t, 0, s) = score + ld4(n, 4, j, t, 0, s % m3);
        }
    }
    return PGC_OK;
}

/* DSV4_HC_COMB: mixes (1), scale (2), base (3); fp[0] eps, ip[0] n_iter. comb[d + hc*s] in the scratch. */
static void hc_normalise(float *comb, int64_t hc, float eps, int over_src) {
    for (int64_t a = 0; a < hc; a++) {
        float sum = eps;
        for (int64_t b = 0; b < hc; b++) sum += over_src ? comb[a + hc * b] : comb[b + hc * a];
        const float inv = 1.0f / sum;
        for (int64_t b = 0; b < hc; b++) {
            if (over_src) comb[a + hc * b] *= inv;
            else comb[b + hc * a] *= inv;
        }
    }
}

static void hc_comb(const pgc_node *n, const pgc_tctx *c) {
    const int64_t hc = n->ne[0][0], n_tok = n->ne[0][2], off = 2 * hc;
    const float eps = n->fp[0], scale = ld4(n, 2, 2, 0, 0, 0);
    float *comb = (float *)c->scratch;
    int64_t t0, t1;
    pgc_split(n_tok, c->ith, c->nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        for (int64_t s = 0; s < hc; s++) {
            float mx = -INFINITY, sum = 0.0f;
            for (int64_t d = 0; d < hc; d++) {
                const int64_t idx = d + hc * s;
                comb[idx] = ld4(n, 1, off + idx, t, 0, 0) * scale + ld4(n, 3, off + idx, 0, 0, 0);
                mx = comb[idx] > mx ? comb[idx] : mx;
            }
            for (int64_t d = 0; d < hc; d++) {
                comb[d + hc * s] = expf(comb[d + hc * s] - mx);
                sum += comb[d + hc * s];
            }
            const float inv = 1.0f / sum;
            for (int64_t d = 0; d < hc; d++) comb[d + hc * s] = comb[d + hc * s] * inv + eps;
        }
        hc_normalise(comb, hc, eps, 1);
        for (int32_t it = 1; it < n->ip[0]; it++) {
            hc_normalise(comb, hc, eps, 0);
            hc_normalise(comb, hc, eps, 1);
        }
        for (int64_t s = 0; s < hc; s++)
            for (int64_t d = 0; d < hc; d++) *dst_f32(n, d, s, t, 0) = comb[d + hc * s];
    }
}

/* DSV4_HC_PRE: x (1), weights [hc, T] or gate [E, hc, T] (2); fp[0] scale, ip[0] gated */
static void hc_pre(const pgc_node *n, const pgc_tctx *c) {
    const int64_t n_embd = n->ne[1][0], hc = n->ne[1][1], n_tok = n->ne[1][2];
    const int gated = n->ip[0] != 0;
    int64_t r0, r1;
    pgc_split(n_embd * n_tok, c->ith, c->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i = r % n_embd, t = r / n_embd;
        float sum = 0.0f;
        for (int64_t h = 0; h < hc; h++) {
            const float w = gated ? 1.0f / (1.0f + expf(-ld4(n, 2, i, h, t, 0))) : ld4(n, 2, h, t, 0, 0);
            sum += ld4(n, 1, i, h, t, 0) * w;
        }
        *dst_f32(n, i, t, 0, 0) = n->fp[0] * sum;
    }
}

/* DSV4_HC_POST: x (1), residual (2), post (3), comb (4, absent: identity) */
static void hc_post(const pgc_node *n, const pgc_tctx *c) {
    const int64_t n_embd = n->ne[0][0], hc = n->ne[0][1], n_tok = n->ne[0][2];
    const int has_comb = n->data[4] != 0;
    int64_t r0, r1;
    pgc_split(hc * n_tok, c->ith, c->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t d = r % hc, t = r / hc;
        const float pv = ld4(n, 3, d, t, 0, 0);
        for (int64_t i = 0; i < n_embd; i++) {
            float sum = ld4(n, 1, i, t, 0, 0) * pv;
            if (has_comb) {
                for (int64_t s = 0; s < hc; s++) sum += ld4(n, 2, i, s, t, 0) * ld4(n, 4, d, s, t, 0);
            } else {
                sum += ld4(n, 2, i, d, t, 0);
            }
            *dst_f32(n, i, d, t, 0) = sum;
        }
    }
}

int pgc_k_deepseek(const pgc_node *n, const pgc_tctx *c) {
    if (n->op == PGC_OP_LIGHTNING_INDEXER) return lightning_indexer(n, c);
    switch (n->sub) {
    case 0: hc_comb(n, c); return PGC_OK;
    case 1: hc_pre(n, c); return PGC_OK;
    case 2: hc_post(n, c); return PGC_OK;
    default: return PGC_E_OP;
    }
}
