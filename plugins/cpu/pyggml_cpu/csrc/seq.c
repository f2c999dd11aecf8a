/* Sequence-model kernels: TRI, SOLVE_TRI, SSM_CONV, SSM_SCAN (Mamba 1 and 2), RWKV_WKV6, GATED_LINEAR_ATTN,
   RWKV_WKV7, GATED_DELTA_NET. Slot 0 is dst, slot i + 1 is src i. Every tensor is F32 with contiguous rows
   (nb[0] == 4) and dst is contiguous (op_table.py refuses anything else); the srcs are read through their strides.

   The recurrences split (sequence, head) pairs across threads and run all tokens of a pair in a row, keeping the
   pair's state in its final place in dst (slot 0 of the state part) from the first token on: the state of one
   pair stays in cache across the tokens instead of streaming every head's state once per token. */
#include "pgc.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h> /* the AVX2 paths: target attributes, chosen at run time by pgc_S.level */
#endif

double pgc_exp_sum_row(int64_t n, float *y, const float *x, float mx); /* ew.c: y = exp(x - mx), SIMD */

#define F(n, s, i0, i1, i2, i3) ((const float *)pgc_ptr((n), (s), (i0), (i1), (i2), (i3)))

/* ---- TRI: ip[0] ggml_tri_type (0 upper+diag, 1 upper, 2 lower+diag, 3 lower); rows split ---------------- */
int pgc_k_tri(const pgc_node *n, const pgc_tctx *c) {
    const int kind = n->ip[0];
    if (kind < 0 || kind > 3) return PGC_E_OP;
    const int64_t ne0 = n->ne[0][0], ne1 = n->ne[0][1], ne2 = n->ne[0][2];
    int64_t r0, r1;
    pgc_split(pgc_nrows(n, 0), c->ith, c->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        const float *a = F(n, 1, 0, i1, i2, i3);
        float *d = (float *)pgc_ptr(n, 0, 0, i1, i2, i3);
        int64_t lo = 0, hi = ne0; /* columns kept: [lo, hi) */
        switch (kind) {
        case 0: lo = i1; break;
        case 1: lo = i1 + 1; break;
        case 2: hi = i1 + 1; break;
        default: hi = i1; break;
        }
        for (int64_t i0 = 0; i0 < ne0; i0++) d[i0] = (i0 >= lo && i0 < hi) ? a[i0] : 0.0f;
    }
    return PGC_OK;
}

/* ---- SOLVE_TRI: X [k, n] from A [n, n] (lower) X = B [k, n], per batch; blocks of columns split across threads;
   each X element as ggml: (B - sum_t A[i][t] X[t]) / A[i][i], the sum in order of t ------------------------ */
#define SOLVE_COLS 64
int pgc_k_solve_tri(const pgc_node *n, const pgc_tctx *c) {
    const int64_t k = n->ne[0][0], nn = n->ne[0][1], b2 = n->ne[0][2], b3 = n->ne[0][3];
    const int64_t nblk = (k + SOLVE_COLS - 1) / SOLVE_COLS;
    int64_t u0, u1;
    pgc_split(nblk * b2 * b3, c->ith, c->nth, &u0, &u1);
    float sum[SOLVE_COLS];
    for (int64_t u = u0; u < u1; u++) {
        const int64_t blk = u % nblk, i2 = (u / nblk) % b2, i3 = u / (nblk * b2);
        const int64_t c0 = blk * SOLVE_COLS, nc = k - c0 < SOLVE_COLS ? k - c0 : SOLVE_COLS;
        for (int64_t i = 0; i < nn; i++) {
            const float *arow = F(n, 1, 0, i, i2, i3);
            for (int64_t j = 0; j < nc; j++) sum[j] = 0.0f;
            for (int64_t t = 0; t < i; t++) {
                const float a = arow[t], *x = F(n, 0, c0, t, i2, i3);
                for (int64_t j = 0; j < nc; j++) sum[j] += a * x[j];
            }
            const float *b = F(n, 2, c0, i, i2, i3);
            float *x = (float *)pgc_ptr(n, 0, c0, i, i2, i3);
            for (int64_t j = 0; j < nc; j++) x[j] = (b[j] - sum[j]) / arow[i];
        }
    }
    return PGC_OK;
}

/* ---- SSM_CONV: dst[ch, t, s] = sum_j sx[t + j, ch, s] c[j, ch]; channels split ----------------------------- */
int pgc_k_ssm_conv(const pgc_node *n, const pgc_tctx *c) {
    const int64_t d_inner = n->ne[0][0], n_t = n->ne[0][1], n_s = n->ne[0][2], d_conv = n->ne[2][0];
    int64_t r0, r1;
    pgc_split(d_inner, c->ith, c->nth, &r0, &r1);
    for (int64_t ch = r0; ch < r1; ch++) {
        const float *w = F(n, 2, 0, ch, 0, 0);
        for (int64_t s = 0; s < n_s; s++) {
            const float *x = F(n, 1, 0, ch, s, 0);
            for (int64_t t = 0; t < n_t; t++) {
                float sum = 0.0f;
                for (int64_t j = 0; j < d_conv; j++) sum += x[t + j] * w[j];
                *(float *)pgc_ptr(n, 0, ch, t, s, 0) = sum;
            }
        }
    }
    return PGC_OK;
}

/* ---- SSM_SCAN -------------------------------------------------------------------------------------------------
   slots: 1 s [d_state, head_dim, n_head, n_seqs+], 2 x [head_dim, n_head, nt, ns], 3 dt [n_head, nt, ns],
   4 A [1 or d_state, n_head], 5 B / 6 C [d_state, n_group, nt, ns], 7 ids [ns]; ip[0] K.
   dst (1-D): y [head_dim, n_head, nt, ns], then K state blocks [d_state, head_dim, n_head, ns]. */

static inline float softplus_f(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }

/* one state row: s = s * da[i] (or da[0] when scalar) + b * xdt; returns sum s * cc, in 8 interleaved partial sums
   (ggml's vector loops also sum in lanes) */
static inline float scan_row(float *s, const float *da, int scalar, const float *b, const float *cc, float xdt,
                             int64_t nc) {
    float acc[8] = {0};
    int64_t i = 0;
    if (scalar) {
        const float d = da[0];
        for (; i + 8 <= nc; i += 8)
            for (int l = 0; l < 8; l++) {
                const float v = s[i + l] * d + b[i + l] * xdt;
                s[i + l] = v;
                acc[l] += v * cc[i + l];
            }
        for (; i < nc; i++) {
            const float v = s[i] * d + b[i] * xdt;
            s[i] = v;
            acc[0] += v * cc[i];
        }
    } else {
        for (; i + 8 <= nc; i += 8)
            for (int l = 0; l < 8; l++) {
                const float v = s[i + l] * da[i + l] + b[i + l] * xdt;
                s[i + l] = v;
                acc[l] += v * cc[i + l];
            }
        for (; i < nc; i++) {
            const float v = s[i] * da[i] + b[i] * xdt;
            s[i] = v;
            acc[0] += v * cc[i];
        }
    }
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

#if defined(__x86_64__) && defined(__GNUC__)
/* scan_row with AVX2 + FMA (pgc_S.level >= 1): 8 lanes, two accumulators; the remainder as scan_row */
__attribute__((target("avx2,fma"))) static float scan_row_avx2(float *s, const float *da, int scalar,
                                                                const float *b, const float *cc, float xdt,
                                                                int64_t nc) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    const __m256 vx = _mm256_set1_ps(xdt), vd = _mm256_set1_ps(da[0]);
    int64_t i = 0;
    for (; i + 16 <= nc; i += 16) {
        const __m256 d0 = scalar ? vd : _mm256_loadu_ps(da + i), d1 = scalar ? vd : _mm256_loadu_ps(da + i + 8);
        const __m256 v0 = _mm256_fmadd_ps(_mm256_loadu_ps(s + i), d0, _mm256_mul_ps(_mm256_loadu_ps(b + i), vx));
        const __m256 v1 = _mm256_fmadd_ps(_mm256_loadu_ps(s + i + 8), d1,
                                          _mm256_mul_ps(_mm256_loadu_ps(b + i + 8), vx));
        _mm256_storeu_ps(s + i, v0);
        _mm256_storeu_ps(s + i + 8, v1);
        acc0 = _mm256_fmadd_ps(v0, _mm256_loadu_ps(cc + i), acc0);
        acc1 = _mm256_fmadd_ps(v1, _mm256_loadu_ps(cc + i + 8), acc1);
    }
    __m256 acc = _mm256_add_ps(acc0, acc1);
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    float sum = _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
    if (i < nc) sum += scan_row(s + i, scalar ? da : da + i, scalar, b + i, cc + i, xdt, nc - i);
    return sum;
}
#define SCAN_ROW(...) (pgc_S.level >= 1 ? scan_row_avx2(__VA_ARGS__) : scan_row(__VA_ARGS__))
#else
#define SCAN_ROW(...) scan_row(__VA_ARGS__)
#endif

int pgc_k_ssm_scan(const pgc_node *n, const pgc_tctx *c) {
    const int64_t nc = n->ne[1][0], nr = n->ne[2][0], nh = n->ne[2][1], nt = n->ne[2][2], ns = n->ne[2][3];
    const int64_t ng = n->ne[5][1], n_src_seqs = n->ne[1][3], K = n->ip[0];
    const int mamba1 = n->ne[4][0] != 1;
    const int64_t y_size = nr * nh * nt * ns, seq_size = nc * nr * nh, head_size = nc * nr;
    float *dst = (float *)(uintptr_t)n->data[0];
    /* Mamba 1's exponentials for a run of tokens, computed a row at a time with the SIMD exp */
    const int64_t tok_chunk = mamba1 ? (int64_t)((pgc_work_thread(n) / sizeof(float)) / (size_t)nc) : 1;
    float *da_buf = (float *)c->scratch;
    if (mamba1 && tok_chunk < 1) return PGC_E_NOMEM;
    int64_t u0, u1;
    pgc_split(ns * nh, c->ith, c->nth, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        const int64_t h = u % nh, i3 = u / nh, g = h / (nh / ng);
        int32_t id;
        memcpy(&id, pgc_ptr(n, 7, i3, 0, 0, 0), 4);
        if (id < 0 || id >= n_src_seqs) return PGC_E_INDEX;
        float *st = dst + y_size + i3 * seq_size + h * head_size; /* slot 0: the working and final state */
        for (int64_t i1 = 0; i1 < nr; i1++) memcpy(st + i1 * nc, F(n, 1, 0, i1, h, id), (size_t)nc * 4);
        const float *a = F(n, 4, 0, h, 0, 0);
        for (int64_t t0 = 0; t0 < nt; t0 += tok_chunk) {
            const int64_t t1 = t0 + tok_chunk < nt ? t0 + tok_chunk : nt;
            if (mamba1) {
                for (int64_t t = t0; t < t1; t++) {
                    const float sp = softplus_f(*F(n, 3, h, t, i3, 0));
                    for (int64_t i0 = 0; i0 < nc; i0++) da_buf[(t - t0) * nc + i0] = sp * a[i0];
                }
                pgc_exp_sum_row((t1 - t0) * nc, da_buf, da_buf, 0.0f);
            }
            for (int64_t t = t0; t < t1; t++) {
                const float sp = softplus_f(*F(n, 3, h, t, i3, 0));
                float da_scalar = 0.0f;
                const float *da = mamba1 ? da_buf + (t - t0) * nc : &da_scalar;
                if (!mamba1) da_scalar = expf(sp * a[0]);
                const float *x = F(n, 2, 0, h, t, i3), *b = F(n, 5, 0, g, t, i3), *cc = F(n, 6, 0, g, t, i3);
                float *y = dst + ((i3 * nt + t) * nh + h) * nr;
                for (int64_t i1 = 0; i1 < nr; i1++)
                    y[i1] = SCAN_ROW(st + i1 * nc, da, !mamba1, b, cc, x[i1] * sp, nc);
                const int64_t slot = nt - 1 - t;
                if (slot > 0 && slot < K)
                    memcpy(dst + y_size + (slot * ns + i3) * seq_size + h * head_size, st, (size_t)head_size * 4);
            }
        }
    }
    return PGC_OK;
}

/* ---- RWKV_WKV6, GATED_LINEAR_ATTN, RWKV_WKV7 ------------------------------------------------------------------
   token srcs [S, H, T] (T = n_seqs x tokens per sequence), state [S*S*H, n_seqs] (contiguous); dst [S*H,
   T + S*n_seqs]: outputs, then states. Units: (sequence, head) pairs. */

enum { LIN_WKV6, LIN_GLA, LIN_WKV7 };

/* one head's inputs for one token: x the [S] rows in the op's src order without the state (WKV6: k v r td, GLA:
   k v q g, WKV7: r w k v a b), u WKV6's time_first row */
typedef struct { const float *x[6]; const float *u; float scale; } lin_tok;

/* one token of one head: state st (S x S, row-major) updated in place, outputs y[S] */
static void lin_step(int kind, float *st, float *y, const lin_tok *in, int64_t S) {
    if (kind == LIN_WKV7) {
        const float *r = in->x[0], *w = in->x[1], *k = in->x[2], *v = in->x[3], *a = in->x[4], *b = in->x[5];
        for (int64_t i = 0; i < S; i++) {
            float *row = st + i * S, sa = 0.0f, acc = 0.0f;
            for (int64_t j = 0; j < S; j++) sa += a[j] * row[j];
            const float vi = v[i];
            for (int64_t j = 0; j < S; j++) {
                row[j] = row[j] * w[j] + vi * k[j] + sa * b[j];
                acc += row[j] * r[j];
            }
            y[i] = acc;
        }
        return;
    }
    const float *k = in->x[0], *v = in->x[1], *r = in->x[2], *dec = in->x[3];
    for (int64_t j = 0; j < S; j++) y[j] = 0.0f;
    for (int64_t i = 0; i < S; i++) {
        float *row = st + i * S;
        const float ki = k[i], di = dec[i];
        if (kind == LIN_WKV6) {
            const float ri = r[i], uk = in->u[i] * ki;
            for (int64_t j = 0; j < S; j++) {
                y[j] += (uk * v[j] + row[j]) * ri;
                row[j] = row[j] * di + v[j] * ki;
            }
        } else {
            const float qi = r[i] * in->scale;
            for (int64_t j = 0; j < S; j++) {
                row[j] = row[j] * di + v[j] * ki;
                y[j] += row[j] * qi;
            }
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) static inline float hsum8(__m256 v) {
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

/* lin_step with AVX2 + FMA, S a multiple of 8 */
__attribute__((target("avx2,fma"))) static void lin_step_avx2(int kind, float *st, float *y, const lin_tok *in,
                                                               int64_t S) {
    if (kind == LIN_WKV7) {
        const float *r = in->x[0], *w = in->x[1], *k = in->x[2], *v = in->x[3], *a = in->x[4], *b = in->x[5];
        for (int64_t i = 0; i < S; i++) {
            float *row = st + i * S;
            __m256 sa8 = _mm256_setzero_ps(), acc = _mm256_setzero_ps();
            for (int64_t j = 0; j < S; j += 8)
                sa8 = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(row + j), sa8);
            const __m256 sa = _mm256_set1_ps(hsum8(sa8)), vi = _mm256_set1_ps(v[i]);
            for (int64_t j = 0; j < S; j += 8) {
                const __m256 kv = _mm256_mul_ps(vi, _mm256_loadu_ps(k + j));
                __m256 x = _mm256_fmadd_ps(_mm256_loadu_ps(row + j), _mm256_loadu_ps(w + j), kv);
                x = _mm256_fmadd_ps(sa, _mm256_loadu_ps(b + j), x);
                _mm256_storeu_ps(row + j, x);
                acc = _mm256_fmadd_ps(x, _mm256_loadu_ps(r + j), acc);
            }
            y[i] = hsum8(acc);
        }
        return;
    }
    const float *k = in->x[0], *v = in->x[1], *r = in->x[2], *dec = in->x[3];
    for (int64_t j = 0; j < S; j++) y[j] = 0.0f;
    for (int64_t i = 0; i < S; i++) {
        float *row = st + i * S;
        const __m256 ki = _mm256_set1_ps(k[i]), di = _mm256_set1_ps(dec[i]);
        if (kind == LIN_WKV6) {
            const __m256 ri = _mm256_set1_ps(r[i]), uk = _mm256_set1_ps(in->u[i] * k[i]);
            for (int64_t j = 0; j < S; j += 8) {
                const __m256 vj = _mm256_loadu_ps(v + j), old = _mm256_loadu_ps(row + j);
                _mm256_storeu_ps(y + j, _mm256_fmadd_ps(_mm256_fmadd_ps(uk, vj, old), ri, _mm256_loadu_ps(y + j)));
                _mm256_storeu_ps(row + j, _mm256_fmadd_ps(old, di, _mm256_mul_ps(vj, ki)));
            }
        } else {
            const __m256 qi = _mm256_set1_ps(r[i] * in->scale);
            for (int64_t j = 0; j < S; j += 8) {
                const __m256 x = _mm256_fmadd_ps(_mm256_loadu_ps(row + j), di,
                                                 _mm256_mul_ps(_mm256_loadu_ps(v + j), ki));
                _mm256_storeu_ps(row + j, x);
                _mm256_storeu_ps(y + j, _mm256_fmadd_ps(x, qi, _mm256_loadu_ps(y + j)));
            }
        }
    }
}
#define LIN_STEP(kind, st, y, in, S) \
    ((pgc_S.level >= 1 && (S) % 8 == 0) ? lin_step_avx2(kind, st, y, in, S) : lin_step(kind, st, y, in, S))
#else
#define LIN_STEP(kind, st, y, in, S) lin_step(kind, st, y, in, S)
#endif

static int linear_attn(const pgc_node *n, const pgc_tctx *c, int kind) {
    const int state_slot = kind == LIN_WKV6 ? 6 : kind == LIN_GLA ? 5 : 7;
    const int64_t S = n->ne[1][0], H = n->ne[1][1], T = n->ne[1][2], ns = n->ne[state_slot][1];
    const int64_t per_seq = T / ns, C = S * H;
    float *dst = (float *)(uintptr_t)n->data[0];
    const float *state_in = (const float *)(uintptr_t)n->data[state_slot];
    /* descriptor slots of the token rows, in lin_tok's order */
    static const int slots[3][6] = {{1, 2, 3, 5, 0, 0}, {1, 2, 3, 4, 0, 0}, {1, 2, 3, 4, 5, 6}};
    const int n_rows = kind == LIN_WKV7 ? 6 : 4;
    int64_t u0, u1;
    pgc_split(ns * H, c->ith, c->nth, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        const int64_t h = u % H, sq = u / H;
        float *st = dst + T * C + sq * S * C + h * S * S;
        memcpy(st, state_in + sq * S * C + h * S * S, (size_t)(S * S) * 4);
        lin_tok in = {{0}, kind == LIN_WKV6 ? F(n, 4, 0, h, 0, 0) : NULL, n->fp[0]};
        for (int64_t t = sq * per_seq; t < (sq + 1) * per_seq; t++) {
            for (int q = 0; q < n_rows; q++) in.x[q] = F(n, slots[kind][q], 0, h, t, 0);
            LIN_STEP(kind, st, dst + t * C + h * S, &in, S);
        }
    }
    return PGC_OK;
}

int pgc_k_rwkv_wkv6(const pgc_node *n, const pgc_tctx *c) { return linear_attn(n, c, LIN_WKV6); }
int pgc_k_gla(const pgc_node *n, const pgc_tctx *c) { return linear_attn(n, c, LIN_GLA); }
int pgc_k_rwkv_wkv7(const pgc_node *n, const pgc_tctx *c) { return linear_attn(n, c, LIN_WKV7); }

/* ---- GATED_DELTA_NET ------------------------------------------------------------------------------------------
   slots: 1 q / 2 k [S, Hk, T, nsk], 3 v [S, H, T, ns], 4 g [1 or S, H, T, ns], 5 beta [1, H, T, ns], 6 state
   [S, S, H, ns] (element (i, j) at i*4 + j*nb1: m[j*S + i] = S[i][j]); ip[0] K. dst: y [S, H, T, ns], then K
   state blocks like the state. Units: (sequence, head) pairs; scratch: delta and exp(g), 2 S floats. */
int pgc_k_gated_delta_net(const pgc_node *n, const pgc_tctx *c) {
    const int64_t S = n->ne[3][0], H = n->ne[3][1], T = n->ne[3][2], ns = n->ne[3][3];
    const int64_t hq = n->ne[1][1], hk = n->ne[2][1], rq = ns / n->ne[1][3], rk = ns / n->ne[2][3], K = n->ip[0];
    const int kda = n->ne[4][0] == S;
    const float scale = 1.0f / sqrtf((float)S);
    const int64_t snap = S * S * H * ns;
    float *dst = (float *)(uintptr_t)n->data[0], *delta = (float *)c->scratch, *eg = delta + S;
    int64_t u0, u1;
    pgc_split(ns * H, c->ith, c->nth, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        const int64_t h = u % H, sq = u / H;
        float *m = dst + S * H * T * ns + (sq * H + h) * S * S;
        for (int64_t j = 0; j < S; j++) memcpy(m + j * S, F(n, 6, 0, j, h, sq), (size_t)S * 4);
        for (int64_t t = 0; t < T; t++) {
            const float *q = F(n, 1, 0, h % hq, t, sq / rq), *k = F(n, 2, 0, h % hk, t, sq / rk);
            const float *v = F(n, 3, 0, h, t, sq), *g = F(n, 4, 0, h, t, sq), beta = *F(n, 5, 0, h, t, sq);
            if (kda) {
                for (int64_t i = 0; i < S; i++) eg[i] = expf(g[i]);
                for (int64_t j = 0; j < S; j++)
                    for (int64_t i = 0; i < S; i++) m[j * S + i] *= eg[i];
            } else {
                const float e = expf(g[0]);
                for (int64_t i = 0; i < S * S; i++) m[i] *= e;
            }
            for (int64_t j = 0; j < S; j++) {
                float sum = 0.0f;
                for (int64_t i = 0; i < S; i++) sum += m[j * S + i] * k[i];
                delta[j] = (v[j] - sum) * beta;
            }
            float *y = dst + ((sq * T + t) * H + h) * S;
            for (int64_t j = 0; j < S; j++) {
                float *row = m + j * S, sum = 0.0f;
                const float d = delta[j];
                for (int64_t i = 0; i < S; i++) {
                    row[i] += k[i] * d;
                    sum += row[i] * q[i];
                }
                y[j] = sum * scale;
            }
            const int64_t slot = T - 1 - t;
            if (slot > 0 && slot < K) memcpy(m + slot * snap, m, (size_t)(S * S) * 4);
        }
    }
    return PGC_OK;
}
