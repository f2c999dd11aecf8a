/* Training kernels: the backward ops (REPEAT_BACK, SILU_BACK, RMS_NORM_BACK, GET_ROWS_BACK, SOFT_MAX_BACK), the
   cross-entropy loss and its gradient, and the optimiser steps (OPT_STEP_ADAMW, OPT_STEP_SGD). ROPE_BACK is
   pgc_k_rope with the sine negated (norm.c, sub 1). Slot 0 is the result, slots 1.. the srcs in ggml's order.

   Per-element float arithmetic follows ggml's CPU kernels (row sums in double where ggml keeps a ggml_float),
   so results agree with ggml to rounding. Every source is read through its strides; kernels that may run in
   place (SILU_BACK, RMS_NORM_BACK, SOFT_MAX_BACK) finish their row reductions before writing the row. */
#include "pgc.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

/* rows of slot s split across threads: for (r in [r0, r1)) with (i1, i2, i3) of row r */
#define TRAIN_ROWS(n, s, c)                                                                   \
    int64_t r0_, r1_;                                                                         \
    pgc_split(pgc_nrows(n, s), (c)->ith, (c)->nth, &r0_, &r1_);                               \
    const int64_t tne1_ = (n)->ne[s][1], tne2_ = (n)->ne[s][2];                               \
    for (int64_t r = r0_; r < r1_; r++) {                                                     \
        const int64_t i1 = r % tne1_, i2 = (r / tne1_) % tne2_, i3 = r / (tne1_ * tne2_);
#define TRAIN_END }

#define AT(n, s, p, k) ((p) + (k) * (n)->nb[s][0])
#define F(n, s, p, k) (*(const float *)AT(n, s, p, k))
#define FW(n, s, p, k) (*(float *)AT(n, s, p, k))

/* REPEAT_BACK: dst [ne] (slot 0) = sum of every tile of src [ne * nr] (slot 1), each element's tiles added in
   ggml's order (i3, i2, i1, i0 outermost first) in float */
static int repeat_back(const pgc_node *n, const pgc_tctx *c) {
    const int64_t ne0 = n->ne[0][0], ne1 = n->ne[0][1], ne2 = n->ne[0][2], ne3 = n->ne[0][3];
    if (!ne0 || !ne1 || !ne2 || !ne3) return PGC_OK;
    const int64_t nr0 = n->ne[1][0] / ne0, nr1 = n->ne[1][1] / ne1, nr2 = n->ne[1][2] / ne2, nr3 = n->ne[1][3] / ne3;
    float *acc = (float *)c->scratch;
    TRAIN_ROWS(n, 0, c)
        for (int64_t k = 0; k < ne0; k++) acc[k] = 0.0f;
        for (int64_t j3 = 0; j3 < nr3; j3++)
            for (int64_t j2 = 0; j2 < nr2; j2++)
                for (int64_t j1 = 0; j1 < nr1; j1++)
                    for (int64_t j0 = 0; j0 < nr0; j0++) {
                        const char *sp = pgc_ptr(n, 1, j0 * ne0, j1 * ne1 + i1, j2 * ne2 + i2, j3 * ne3 + i3);
                        if (n->nb[1][0] == 4) {
                            const float *s = (const float *)sp;
                            for (int64_t k = 0; k < ne0; k++) acc[k] += s[k];
                        } else {
                            for (int64_t k = 0; k < ne0; k++) acc[k] += F(n, 1, sp, k);
                        }
                    }
        char *dp = pgc_ptr(n, 0, 0, i1, i2, i3);
        if (n->nb[0][0] == 4) memcpy(dp, acc, (size_t)ne0 * 4);
        else for (int64_t k = 0; k < ne0; k++) FW(n, 0, dp, k) = acc[k];
    TRAIN_END
    return PGC_OK;
}

/* SILU_BACK: dst = grad (slot 1) * s * (1 + x (1 - s)), s = sigmoid(x (slot 2)); F32 or F16 (math in float).
   libm's expf per element, as ggml's silu_backward: packed F32 rows skip the per-element type dispatch. */
static int silu_back(const pgc_node *n, const pgc_tctx *c) {
    const int64_t ne0 = n->ne[0][0];
    const int t = n->type[0];
    const int packed = t == T_F32 && n->nb[0][0] == 4 && n->nb[1][0] == 4 && n->nb[2][0] == 4;
    TRAIN_ROWS(n, 0, c)
        const char *gp = pgc_ptr(n, 1, 0, i1, i2, i3), *xp = pgc_ptr(n, 2, 0, i1, i2, i3);
        char *dp = pgc_ptr(n, 0, 0, i1, i2, i3);
        if (packed) { /* dst may be grad or x itself (in place): each element is read before it is written */
            const float *g = (const float *)gp, *xv = (const float *)xp;
            float *d = (float *)dp;
            for (int64_t k = 0; k < ne0; k++) {
                const float x = xv[k], dy = g[k];
                const float s = 1.0f / (1.0f + expf(-x));
                d[k] = dy * s * (1.0f + x * (1.0f - s));
            }
            continue;
        }
        for (int64_t k = 0; k < ne0; k++) {
            const float x = pgc_ld(AT(n, 2, xp, k), t), dy = pgc_ld(AT(n, 1, gp, k), t);
            const float s = 1.0f / (1.0f + expf(-x));
            pgc_st(AT(n, 0, dp, k), t, dy * s * (1.0f + x * (1.0f - s)));
        }
    TRAIN_END
    return PGC_OK;
}

/* RMS_NORM_BACK: per row of n values, dst = (dz + x * (-sum(x dz) / (sum(x^2) + n eps))) / sqrt(sum(x^2)/n + eps),
   dz slot 1, x slot 2, eps fp[0] */
static int rms_norm_back(const pgc_node *n, const pgc_tctx *c) {
    const int64_t ne0 = n->ne[0][0];
    const float eps = n->fp[0];
    TRAIN_ROWS(n, 0, c)
        const char *gp = pgc_ptr(n, 1, 0, i1, i2, i3), *xp = pgc_ptr(n, 2, 0, i1, i2, i3);
        double sxx = 0.0, sxdz = 0.0;
        for (int64_t k = 0; k < ne0; k++) {
            const float x = F(n, 2, xp, k);
            sxx += (double)(x * x);
            sxdz += (double)(x * F(n, 1, gp, k));
        }
        const float mean_eps = (float)sxx / (float)ne0 + eps;
        const float sum_eps = (float)sxx + eps * (float)ne0;
        const float rrms = 1.0f / sqrtf(mean_eps);
        const float scale_x = (float)(-sxdz) / sum_eps;
        char *dp = pgc_ptr(n, 0, 0, i1, i2, i3);
        for (int64_t k = 0; k < ne0; k++) FW(n, 0, dp, k) = (F(n, 1, gp, k) + F(n, 2, xp, k) * scale_x) * rrms;
    TRAIN_END
    return PGC_OK;
}

/* GET_ROWS_BACK: dst [ne0, m] F32 (slot 0) zeroed, then dst[rows[i]] += grad[i] (grad slot 1 F32/F16 [ne0, r],
   rows slot 2 I32 [r]). Threads own ranges of dst rows and scan the ids in order, so each dst row sums its
   gradient rows in ggml's order; an id outside [0, m) fails the node. */
static int get_rows_back(const pgc_node *n, const pgc_tctx *c) {
    const int64_t ne0 = n->ne[0][0], m = n->ne[0][1], nr = n->ne[2][0];
    const int tg = n->type[1];
    int64_t d0, d1;
    pgc_split(m, c->ith, c->nth, &d0, &d1);
    for (int64_t j = d0; j < d1; j++) {
        char *dp = pgc_ptr(n, 0, 0, j, 0, 0);
        for (int64_t k = 0; k < ne0; k++) FW(n, 0, dp, k) = 0.0f;
    }
    for (int64_t i = 0; i < nr; i++) {
        const int32_t id = *(const int32_t *)pgc_ptr(n, 2, i, 0, 0, 0);
        if (id < 0 || id >= m) return PGC_E_INDEX;
        if (id < d0 || id >= d1) continue;
        const char *gp = pgc_ptr(n, 1, 0, i, 0, 0);
        char *dp = pgc_ptr(n, 0, 0, id, 0, 0);
        for (int64_t k = 0; k < ne0; k++) FW(n, 0, dp, k) += pgc_ld(AT(n, 1, gp, k), tg);
    }
    return PGC_OK;
}

/* SOFT_MAX_BACK: dst = ((dy - dot(y, dy)) * y) * scale per row; dy slot 1, y slot 2, scale fp[0] */
static int soft_max_back(const pgc_node *n, const pgc_tctx *c) {
    const int64_t ne0 = n->ne[0][0];
    const float scale = n->fp[0];
    TRAIN_ROWS(n, 0, c)
        const char *gp = pgc_ptr(n, 1, 0, i1, i2, i3), *yp = pgc_ptr(n, 2, 0, i1, i2, i3);
        double dot = 0.0;
        for (int64_t k = 0; k < ne0; k++) dot += (double)(F(n, 2, yp, k) * F(n, 1, gp, k));
        const float mdot = -(float)dot;
        char *dp = pgc_ptr(n, 0, 0, i1, i2, i3);
        for (int64_t k = 0; k < ne0; k++) FW(n, 0, dp, k) = ((F(n, 1, gp, k) + mdot) * F(n, 2, yp, k)) * scale;
    TRAIN_END
    return PGC_OK;
}

/* the row's max and log(sum(exp(x - max))) (the sum in double, as ggml's log_soft_max) */
static float row_max(const pgc_node *n, int s, const char *p, int64_t ne0) {
    float mx = -INFINITY;
    for (int64_t k = 0; k < ne0; k++) mx = fmaxf(mx, F(n, s, p, k));
    return mx;
}

/* CROSS_ENTROPY_LOSS: dst[0] = -sum over rows of sum(labels * log_softmax(logits)) / nrows; logits slot 1, labels
   slot 2. Each thread sums its rows in double into the shared work memory; thread 0 adds the partial sums in
   thread order after a barrier (every thread reaches it). */
static int cross_entropy_loss(const pgc_node *n, const pgc_tctx *c) {
    const int64_t ne0 = n->ne[1][0], nr = pgc_nrows(n, 1);
    double *partial = (double *)c->wdata, acc = 0.0;
    TRAIN_ROWS(n, 1, c)
        const char *xp = pgc_ptr(n, 1, 0, i1, i2, i3), *lp = pgc_ptr(n, 2, 0, i1, i2, i3);
        const float mx = row_max(n, 1, xp, ne0);
        double sum = 0.0;
        for (int64_t k = 0; k < ne0; k++) sum += (double)expf(F(n, 1, xp, k) - mx);
        const float lse = (float)log(sum);
        double row = 0.0;
        for (int64_t k = 0; k < ne0; k++) row += (double)(((F(n, 1, xp, k) - mx) - lse) * F(n, 2, lp, k));
        acc += row;
    TRAIN_END
    partial[c->ith] = acc;
    pgc_barrier(c);
    if (c->ith == 0) {
        double total = 0.0;
        for (int t = 0; t < c->nth; t++) total += partial[t];
        *(float *)pgc_ptr(n, 0, 0, 0, 0, 0) = (float)total * (-1.0f / (float)nr);
    }
    return PGC_OK;
}

/* CROSS_ENTROPY_LOSS_BACK: dst = (softmax(logits) - labels) * (grad / nrows); grad slot 1 (a scalar), logits
   slot 2, labels slot 3 */
static int cross_entropy_loss_back(const pgc_node *n, const pgc_tctx *c) {
    const int64_t ne0 = n->ne[0][0], nr = pgc_nrows(n, 0);
    const float d_by_nr = *(const float *)pgc_ptr(n, 1, 0, 0, 0, 0) / (float)nr;
    float *e = (float *)c->scratch;
    TRAIN_ROWS(n, 0, c)
        const char *xp = pgc_ptr(n, 2, 0, i1, i2, i3), *lp = pgc_ptr(n, 3, 0, i1, i2, i3);
        const float mx = row_max(n, 2, xp, ne0);
        double sum = 0.0;
        for (int64_t k = 0; k < ne0; k++) {
            e[k] = expf(F(n, 2, xp, k) - mx);
            sum += (double)e[k];
        }
        const float inv = (float)(1.0 / sum);
        char *dp = pgc_ptr(n, 0, 0, i1, i2, i3);
        for (int64_t k = 0; k < ne0; k++) FW(n, 0, dp, k) = (e[k] * inv - F(n, 3, lp, k)) * d_by_nr;
    TRAIN_END
    return PGC_OK;
}

/* one AdamW update of k packed F32 values: m, v and w in place. The same float operations in the same order on
   every path (no contraction: -ffp-contract=off; vector sqrt and divide are correctly rounded as the scalar ones
   are), so the AVX2 lanes give the scalar loop's bits. */
typedef struct { float alpha, beta1, beta2, eps, beta1h, beta2h, keep; } adamw_hp;

static void adamw_row_scalar(int64_t k0, int64_t k, float *w, const float *g, float *m, float *v, const adamw_hp *h) {
    for (int64_t i = k0; i < k; i++) {
        const float gi = g[i];
        const float mi = m[i] * h->beta1 + gi * (1.0f - h->beta1);
        const float vi = v[i] * h->beta2 + gi * gi * (1.0f - h->beta2);
        m[i] = mi;
        v[i] = vi;
        const float mh = mi * h->beta1h, vh = sqrtf(vi * h->beta2h) + h->eps;
        w[i] = w[i] * h->keep - h->alpha * mh / vh;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static void adamw_row_avx2(int64_t k, float *w, const float *g, float *m, float *v,
                                                           const adamw_hp *h) {
    const __m256 b1 = _mm256_set1_ps(h->beta1), b2 = _mm256_set1_ps(h->beta2);
    const __m256 c1 = _mm256_set1_ps(1.0f - h->beta1), c2 = _mm256_set1_ps(1.0f - h->beta2);
    const __m256 b1h = _mm256_set1_ps(h->beta1h), b2h = _mm256_set1_ps(h->beta2h), eps = _mm256_set1_ps(h->eps);
    const __m256 alpha = _mm256_set1_ps(h->alpha), keep = _mm256_set1_ps(h->keep);
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
        const __m256 gi = _mm256_loadu_ps(g + i);
        const __m256 mi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), b1), _mm256_mul_ps(gi, c1));
        const __m256 vi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), b2),
                                        _mm256_mul_ps(_mm256_mul_ps(gi, gi), c2));
        _mm256_storeu_ps(m + i, mi);
        _mm256_storeu_ps(v + i, vi);
        const __m256 mh = _mm256_mul_ps(mi, b1h), vh = _mm256_add_ps(_mm256_sqrt_ps(_mm256_mul_ps(vi, b2h)), eps);
        const __m256 upd = _mm256_div_ps(_mm256_mul_ps(alpha, mh), vh);
        _mm256_storeu_ps(w + i, _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(w + i), keep), upd));
    }
    adamw_row_scalar(i, k, w, g, m, v, h);
}
#endif

static void adamw_row(int64_t k, float *w, const float *g, float *m, float *v, const adamw_hp *h) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (pgc_S.level >= 1 && pgc_S.level <= 4) { /* every x86 level above 0 has AVX2 */
        adamw_row_avx2(k, w, g, m, v, h);
        return;
    }
#endif
    adamw_row_scalar(0, k, w, g, m, v, h);
}

/* OPT_STEP_ADAMW: param (slot 1, its view slot 0), grad 2, m 3, v 4 updated in place from the 7 hyper-parameters
   of slot 5 (alpha, beta1, beta2, eps, wd, beta1h, beta2h) */
static int opt_step_adamw(const pgc_node *n, const pgc_tctx *c) {
    const int64_t ne0 = n->ne[0][0];
    const char *hp = pgc_ptr(n, 5, 0, 0, 0, 0);
    float h[7];
    for (int i = 0; i < 7; i++) h[i] = F(n, 5, hp, i);
    const float alpha = h[0], beta1 = h[1], beta2 = h[2], eps = h[3], wd = h[4], beta1h = h[5], beta2h = h[6];
    const float keep = 1.0f - alpha * wd;
    const adamw_hp hv = {alpha, beta1, beta2, eps, beta1h, beta2h, keep};
    const int packed = n->nb[0][0] == 4 && n->nb[2][0] == 4 && n->nb[3][0] == 4 && n->nb[4][0] == 4;
    TRAIN_ROWS(n, 0, c)
        char *wp = pgc_ptr(n, 0, 0, i1, i2, i3), *mp = pgc_ptr(n, 3, 0, i1, i2, i3), *vp = pgc_ptr(n, 4, 0, i1, i2, i3);
        const char *gp = pgc_ptr(n, 2, 0, i1, i2, i3);
        if (packed) {
            adamw_row(ne0, (float *)wp, (const float *)gp, (float *)mp, (float *)vp, &hv);
            continue;
        }
        for (int64_t k = 0; k < ne0; k++) {
            const float g = F(n, 2, gp, k);
            const float m = FW(n, 3, mp, k) * beta1 + g * (1.0f - beta1);
            const float v = FW(n, 4, vp, k) * beta2 + g * g * (1.0f - beta2);
            FW(n, 3, mp, k) = m;
            FW(n, 4, vp, k) = v;
            const float mh = m * beta1h, vh = sqrtf(v * beta2h) + eps;
            FW(n, 0, wp, k) = FW(n, 0, wp, k) * keep - alpha * mh / vh;
        }
    TRAIN_END
    return PGC_OK;
}

/* OPT_STEP_SGD: param (slot 1, its view slot 0) = param (1 - alpha wd) - alpha grad (slot 2); slot 3 [alpha, wd] */
static int opt_step_sgd(const pgc_node *n, const pgc_tctx *c) {
    const int64_t ne0 = n->ne[0][0];
    const char *hp = pgc_ptr(n, 3, 0, 0, 0, 0);
    const float alpha = F(n, 3, hp, 0), keep = 1.0f - alpha * F(n, 3, hp, 1);
    TRAIN_ROWS(n, 0, c)
        char *wp = pgc_ptr(n, 0, 0, i1, i2, i3);
        const char *gp = pgc_ptr(n, 2, 0, i1, i2, i3);
        for (int64_t k = 0; k < ne0; k++) FW(n, 0, wp, k) = FW(n, 0, wp, k) * keep - alpha * F(n, 2, gp, k);
    TRAIN_END
    return PGC_OK;
}

int pgc_k_train(const pgc_node *n, const pgc_tctx *c) {
    switch (n->op) {
    case PGC_OP_REPEAT_BACK: return repeat_back(n, c);
    case PGC_OP_SILU_BACK: return silu_back(n, c);
    case PGC_OP_RMS_NORM_BACK: return rms_norm_back(n, c);
    case PGC_OP_GET_ROWS_BACK: return get_rows_back(n, c);
    case PGC_OP_SOFT_MAX_BACK: return soft_max_back(n, c);
    case PGC_OP_CROSS_ENTROPY_LOSS: return cross_entropy_loss(n, c);
    case PGC_OP_CROSS_ENTROPY_LOSS_BACK: return cross_entropy_loss_back(n, c);
    case PGC_OP_OPT_STEP_ADAMW: return opt_step_adamw(n, c);
    case PGC_OP_OPT_STEP_SGD: return opt_step_sgd(n, c);
    default: return PGC_E_OP;
    }
}

size_t pgc_train_shared(const pgc_node *n, int nth) {
    return n->op == PGC_OP_CROSS_ENTROPY_LOSS ? (size_t)nth * sizeof(double) : 0;
}
