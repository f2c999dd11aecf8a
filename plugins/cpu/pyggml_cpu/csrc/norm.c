/* Row kernels: NORM / RMS_NORM / L2_NORM, GROUP_NORM, SOFT_MAX (mask, scale, ALiBi, sinks), ROPE (normal and
   NeoX, YaRN, frequency factors; sin/cos cached per position), DIAG_MASK_INF / _ZERO. */
#include "pgc.h"
#include "shared.h"
#include "softmax.h" /* alibi_slope: the OpenCL and CUDA kernels' too */

double pgc_exp_sum_row(int64_t n, float *y, const float *x, float mx); /* ew.c */
/* w = x * scale (+ slope x mask); returns max(mx, w) (ew.c) */
float pgc_softmax_in_row(int64_t n, float *w, const float *x, float scale, const void *mask, int mask_f16, float slope,
                         float mx);

#define ROWS_LOOP(n, c)                                                                    \
    int64_t nr_ = pgc_nrows(n, 0), r0_, r1_;                                               \
    pgc_split(nr_, (c)->ith, (c)->nth, &r0_, &r1_);                                        \
    const int64_t ne1_ = (n)->ne[0][1], ne2_ = (n)->ne[0][2];                              \
    for (int64_t r = r0_; r < r1_; r++) {                                                  \
        const int64_t i1 = r % ne1_, i2 = (r / ne1_) % ne2_, i3 = r / (ne1_ * ne2_);

#define ROWS_END }

/* RMS_NORM (sub 1) and L2_NORM (sub 2) rows, NORM_ROWS at once: each row's sum of squares is one chain of double
   adds in ggml's order (float squares), but a chain alone waits an add's latency per element; the rows' chains
   interleaved overlap (a batch's rows; a single row, as in decode, runs alone). A short last batch repeats its
   first row in the unused chains and keeps nothing of them. */
#define NORM_ROWS 4
static void rms_rows(const pgc_node *n, int64_t r, int64_t cnt) {
    const int64_t ne0 = n->ne[0][0], ne1 = n->ne[0][1], ne2 = n->ne[0][2];
    const int64_t sx = n->nb[1][0] / 4, sy = n->nb[0][0] / 4;
    const float eps = n->fp[0];
    const float *x[NORM_ROWS];
    float *y[NORM_ROWS];
    for (int j = 0; j < NORM_ROWS; j++) {
        const int64_t q = r + (j < cnt ? j : 0), i1 = q % ne1, i2 = (q / ne1) % ne2, i3 = q / (ne1 * ne2);
        x[j] = (const float *)pgc_ptr(n, 1, 0, i1, i2, i3);
        y[j] = (float *)pgc_ptr(n, 0, 0, i1, i2, i3);
    }
    double sq[NORM_ROWS] = {0.0};
    for (int64_t k = 0; k < ne0; k++)
        for (int j = 0; j < NORM_ROWS; j++) sq[j] += (double)(x[j][k * sx] * x[j][k * sx]); /* float squares */
    for (int j = 0; j < cnt; j++) {
        const float scale = n->sub == 1 ? 1.0f / sqrtf((float)(sq[j] / ne0) + eps)
                                        : 1.0f / fmaxf(sqrtf((float)sq[j]), eps);
        for (int64_t k = 0; k < ne0; k++) y[j][k * sy] = x[j][k * sx] * scale;
    }
}

int pgc_k_norm(const pgc_node *n, const pgc_tctx *c) {
    const int64_t ne0 = n->ne[0][0];
    const float eps = n->fp[0];
    if (n->sub != 0) {
        int64_t r0, r1;
        pgc_split(pgc_nrows(n, 0), c->ith, c->nth, &r0, &r1);
        for (int64_t r = r0; r < r1; r += NORM_ROWS) rms_rows(n, r, r1 - r < NORM_ROWS ? r1 - r : NORM_ROWS);
        return PGC_OK;
    }
    ROWS_LOOP(n, c)
        const float *x = (const float *)pgc_ptr(n, 1, 0, i1, i2, i3);
        float *y = (float *)pgc_ptr(n, 0, 0, i1, i2, i3);
        const int64_t sx = n->nb[1][0] / 4, sy = n->nb[0][0] / 4;
        double sum = 0.0, sq = 0.0;
        for (int64_t k = 0; k < ne0; k++) sum += x[k * sx];
        const float mean = (float)(sum / ne0);
        for (int64_t k = 0; k < ne0; k++) sq += (double)(x[k * sx] - mean) * (x[k * sx] - mean);
        const float scale = 1.0f / sqrtf((float)(sq / ne0) + eps);
        for (int64_t k = 0; k < ne0; k++) y[k * sy] = (x[k * sx] - mean) * scale;
    ROWS_END
    return PGC_OK;
}

int pgc_k_group_norm(const pgc_node *n, const pgc_tctx *c) {
    const int64_t ne0 = n->ne[0][0], ne1 = n->ne[0][1], ne2 = n->ne[0][2], ne3 = n->ne[0][3];
    const int n_groups = n->ip[0];
    const float eps = n->fp[0];
    const int64_t cpg = (ne2 + n_groups - 1) / n_groups;
    int64_t t0, t1;
    pgc_split((int64_t)n_groups * ne3, c->ith, c->nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        int64_t g = t % n_groups, i3 = t / n_groups;
        int64_t s = g * cpg, e = s + cpg < ne2 ? s + cpg : ne2;
        if (s >= e) continue;
        double sum = 0.0, sq = 0.0;
        int64_t cnt = (e - s) * ne1 * ne0;
        for (int64_t i2 = s; i2 < e; i2++)
            for (int64_t i1 = 0; i1 < ne1; i1++)
                for (int64_t i0 = 0; i0 < ne0; i0++) sum += *(const float *)pgc_ptr(n, 1, i0, i1, i2, i3);
        float mean = (float)(sum / cnt);
        for (int64_t i2 = s; i2 < e; i2++)
            for (int64_t i1 = 0; i1 < ne1; i1++)
                for (int64_t i0 = 0; i0 < ne0; i0++) {
                    float v = *(const float *)pgc_ptr(n, 1, i0, i1, i2, i3) - mean;
                    *(float *)pgc_ptr(n, 0, i0, i1, i2, i3) = v;
                    sq += (double)v * v;
                }
        float scale = 1.0f / sqrtf((float)(sq / cnt) + eps);
        for (int64_t i2 = s; i2 < e; i2++)
            for (int64_t i1 = 0; i1 < ne1; i1++)
                for (int64_t i0 = 0; i0 < ne0; i0++) *(float *)pgc_ptr(n, 0, i0, i1, i2, i3) *= scale;
    }
    return PGC_OK;
}

/* ALiBi slope of head h out of n_head (1 without max_bias): n_head_log2, m0 and m1 as pyggml.ops.attention.alibi
   defines them, computed with powf in float as ggml does (the same bits as alibi's correctly rounded ones but where
   libm's powf is an ulp off, about 1 case in 700), then the kernels' shared alibi_slope (softmax.h) */
float pgc_alibi_slope(float max_bias, int64_t h, int64_t n_head) {
    if (max_bias <= 0.0f) return 1.0f;
    int32_t nl2 = 1;
    while ((int64_t)nl2 * 2 <= n_head) nl2 *= 2;
    const float m0 = powf(2.0f, -max_bias / (float)nl2), m1 = powf(2.0f, -(max_bias / 2.0f) / (float)nl2);
    return alibi_slope(h, max_bias, nl2, m0, m1);
}

int pgc_k_soft_max(const pgc_node *n, const pgc_tctx *c) {
    const int64_t ne0 = n->ne[0][0], nh = n->ne[1][2];
    const float scale = n->fp[0], max_bias = n->fp[1];
    const int has_mask = n->data[2] != 0, has_sinks = n->data[3] != 0;
    float *w = (float *)c->scratch;
    ROWS_LOOP(n, c)
        const char *xp = pgc_ptr(n, 1, 0, i1, i2, i3);
        float slope = pgc_alibi_slope(max_bias, i2, nh);
        const float *x = (const float *)xp;
        if (n->nb[1][0] != 4) { /* strided rows: gathered first */
            for (int64_t k = 0; k < ne0; k++) w[k] = *(const float *)(xp + k * n->nb[1][0]);
            x = w;
        }
        const void *mp = has_mask ? pgc_ptr(n, 2, 0, i1, i2 % n->ne[2][2], i3 % n->ne[2][3]) : NULL;
        float sink = 0.0f;
        if (has_sinks) sink = *(const float *)((const char *)(uintptr_t)n->data[3] + i2 * n->nb[3][0]);
        /* one pass: scaled, masked, and its largest value (from the sink's where there is one) */
        const float mx = pgc_softmax_in_row(ne0, w, x, scale, mp, n->type[2] == T_F16, slope,
                                            has_sinks ? sink : -INFINITY);
        double sum = pgc_exp_sum_row(ne0, w, w, mx); /* an all -inf row without a sink gives NaN, as ggml */
        if (has_sinks) sum += expf(sink - mx);
        float inv = (float)(1.0 / sum);
        char *yp = pgc_ptr(n, 0, 0, i1, i2, i3);
        if (n->nb[0][0] == 4) {
            float *y = (float *)yp;
            for (int64_t k = 0; k < ne0; k++) y[k] = w[k] * inv;
        } else {
            for (int64_t k = 0; k < ne0; k++) *(float *)(yp + k * n->nb[0][0]) = w[k] * inv;
        }
    ROWS_END
    return PGC_OK;
}

static float yarn_ramp(float low, float high, int i0) {
    float y = (i0 / 2 - low) / fmaxf(0.001f, high - low);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

/* cos/sin for every pair of position p: cache[2*i] = cos, cache[2*i+1] = sin (magnitude scaled) */
/* sin/cos cache of one position, in float as ggml's CPU computes it (theta multiplied by theta_scale per pair,
   cosf/sinf), so greedy decoding follows llama.cpp's roundings */
static void rope_cache(const pgc_node *n, float p, float *cache) {
    const int n_dims = n->ip[0], n_ctx_orig = n->ip[2];
    const float base = n->fp[0], freq_scale = n->fp[1], ext = n->fp[2], attn = n->fp[3];
    const float beta_fast = n->fp[4], beta_slow = n->fp[5];
    const float theta_scale = powf(base, -2.0f / n_dims);
    float lo = 0.0f, hi = 0.0f;
    if (ext != 0.0f) {
        const float tp = 2.0f * (float)M_PI;
        lo = fmaxf(0.0f, floorf(n_dims * logf(n_ctx_orig / (beta_fast * tp)) / (2 * logf(base))));
        hi = fminf((float)(n_dims - 1), ceilf(n_dims * logf(n_ctx_orig / (beta_slow * tp)) / (2 * logf(base))));
    }
    const char *ff = (const char *)(uintptr_t)n->data[3];
    float theta_base = p;
    for (int i0 = 0; i0 < n_dims; i0 += 2) {
        float te = theta_base;
        if (ff) te /= *(const float *)(ff + (i0 / 2) * n->nb[3][0]);
        float ti = freq_scale * te, theta = ti;
        float ms = attn;
        if (ext != 0.0f) {
            float mix = (float)yarn_ramp(lo, hi, i0) * ext;
            theta = ti * (1 - mix) + te * mix;
            ms *= 1.0f + 0.1f * logf(1.0f / freq_scale);
        }
        cache[i0] = cosf(theta) * ms;
        cache[i0 + 1] = (n->sub ? -sinf(theta) : sinf(theta)) * ms; /* sub 1: ROPE_BACK, the inverse rotation */
        theta_base *= theta_scale;
    }
}

/* Rotation of the first n_dims values of a row: x0 cos - x1 sin and x0 sin + x1 cos with the x0 products
   fused (one fmaf each), as ggml's CPU build computes them (GCC contracts them under -mfma; checked bit for bit
   against llama.cpp's ROPE output), so that greedy decoding follows llama.cpp's roundings. */
static inline void rope_rotate(const float *cache, const float *x, float *y, int n_dims, int neox) {
    const int half = n_dims / 2;
    for (int i0 = 0; i0 < n_dims; i0 += 2) {
        const float cs = cache[i0], sn = cache[i0 + 1];
        const int a = neox ? i0 / 2 : i0, b = neox ? i0 / 2 + half : i0 + 1;
        const float x0 = x[a], x1 = x[b];
        y[a] = fmaf(x0, cs, -(x1 * sn));
        y[b] = fmaf(x0, sn, x1 * cs);
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* the same loop where fmaf is one instruction (any CPU the x86 SIMD kernels run on has FMA) */
__attribute__((target("fma"))) static void rope_rotate_fma(const float *cache, const float *x, float *y, int n_dims,
                                                           int neox) {
    rope_rotate(cache, x, y, n_dims, neox);
}
#endif

int pgc_k_rope(const pgc_node *n, const pgc_tctx *c) {
    const int64_t ne0 = n->ne[0][0];
    const int n_dims = n->ip[0], neox = n->ip[1] & 2;
    const int ts = n->type[1];
    float *cache = (float *)c->scratch;
    float *x = cache + n_dims + 2, *y = x + ne0;
    const int f32_rows = ts == T_F32 && n->type[0] == T_F32 && n->nb[1][0] == 4 && n->nb[0][0] == 4;
    int64_t last = -1, last3 = -1;
    ROWS_LOOP(n, c)
        if (i2 != last || i3 != last3) {
            int32_t p = *(const int32_t *)((const char *)(uintptr_t)n->data[2] + i2 * n->nb[2][0]);
            rope_cache(n, (float)p, cache);
            last = i2;
            last3 = i3;
        }
        const char *sp = pgc_ptr(n, 1, 0, i1, i2, i3);
        char *dp = pgc_ptr(n, 0, 0, i1, i2, i3);
        /* F32 rows of contiguous values are rotated where they lie (in place too: a pair is read before it is
           written); other types and strides through the row buffers */
        const float *xr = f32_rows ? (const float *)sp : x;
        float *yr = f32_rows ? (float *)dp : y;
        if (!f32_rows)
            for (int64_t k = 0; k < ne0; k++) x[k] = pgc_ld(sp + k * n->nb[1][0], ts);
#if defined(__x86_64__) && defined(__GNUC__)
        if (pgc_S.level >= 1) rope_rotate_fma(cache, xr, yr, n_dims, neox);
        else
#endif
            rope_rotate(cache, xr, yr, n_dims, neox);
        if (xr != yr)
            for (int64_t k = n_dims; k < ne0; k++) yr[k] = xr[k];
        if (!f32_rows)
            for (int64_t k = 0; k < ne0; k++) pgc_st(dp + k * n->nb[0][0], n->type[0], y[k]);
    ROWS_END
    return PGC_OK;
}

int pgc_k_diag_mask(const pgc_node *n, const pgc_tctx *c) {
    const int64_t ne0 = n->ne[0][0];
    const int64_t n_past = n->ip[0];
    const float v = n->sub == 0 ? -INFINITY : 0.0f;
    ROWS_LOOP(n, c)
        const char *sp = pgc_ptr(n, 1, 0, i1, i2, i3);
        char *dp = pgc_ptr(n, 0, 0, i1, i2, i3);
        for (int64_t k = 0; k < ne0; k++) {
            float x = *(const float *)(sp + k * n->nb[1][0]);
            *(float *)(dp + k * n->nb[0][0]) = k > n_past + i1 ? v : x;
        }
    ROWS_END
    return PGC_OK;
}
