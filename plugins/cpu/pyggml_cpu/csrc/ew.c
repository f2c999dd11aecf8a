/* Element-wise kernels: binary ops with ggml broadcasting, unary math, GLU, SCALE. Rows are split across
   threads; each row is loaded to float (any float type), transformed, and stored in the dst type. */
#include "pgc.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PGC_X86_AVX2 __attribute__((target("avx2,fma")))
#endif

/* ---- exp as ggml's CPU vector loops compute it ---------------------------------------------------------
   ggml evaluates SILU, SWIGLU and SOFT_MAX's exponentials eight at a time (AVX2 build) with a polynomial
   instead of libm's expf, and only the n % 8 tail with expf. Same math here, so that greedy decoding meets
   llama.cpp's roundings: x = k ln2 + r with k = round(x log2 e) (the 1.5 * 2^23 shift trick), ln2 split in a
   high and a low part, e^r - 1 ~ r (c1 + c2 r + c3 r^2 + c4 r^3 + c5 r^4) (Horner in r^2, coefficients of the
   Arm optimized-routines single-precision exp), 2^k added to the exponent bits; |k| > 126 scales in two
   steps so that subnormal and overflowing results come out right (|k| > 192: 0 or inf). About 1.5 ulp.
   Each multiply-add below is one fused operation in ggml's vector code, hence fmaf: the scalar version and
   the AVX2 version give the same bits. */
#define EXPV_SHIFT 0x1.8p23f
#define EXPV_LOG2E 0x1.715476p+0f
#define EXPV_LN2_HI 0x1.62e4p-1f
#define EXPV_LN2_LO 0x1.7f7d1cp-20f
#define EXPV_C1 0x1.ffffecp-1f
#define EXPV_C2 0x1.fffdb6p-2f
#define EXPV_C3 0x1.555e66p-3f
#define EXPV_C4 0x1.573e2ep-5f
#define EXPV_C5 0x1.0e4020p-7f

static inline uint32_t f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static float expv1(float x) {
    const float z = fmaf(x, EXPV_LOG2E, EXPV_SHIFT), k = z - EXPV_SHIFT;
    const float r = fmaf(-k, EXPV_LN2_LO, fmaf(-k, EXPV_LN2_HI, x));
    const uint32_t e = f_bits(z) << 23;
    const float scale = bits_f(e + 0x3f800000u), r2 = r * r;
    const float p = fmaf(fmaf(fmaf(EXPV_C5, r, EXPV_C4), r2, fmaf(EXPV_C3, r, EXPV_C2)), r2, EXPV_C1 * r);
    if (!(fabsf(k) > 126.0f)) return fmaf(p, scale, scale);
    const uint32_t neg = k <= 0.0f ? 0x82000000u : 0u;
    const float s1 = bits_f(neg + 0x7f000000u), s2 = bits_f(e - neg);
    if (fabsf(k) > 192.0f) return s1 * s1;
    return fmaf(s2, p, s2) * s1;
}

/* sum of 8 lanes in the order of ggml's AVX2 reductions: ((0+4) + (2+6)) + ((1+5) + (3+7)) */
static inline float sum8_tree(const float *v) {
    float t0 = v[0] + v[4], t1 = v[1] + v[5], t2 = v[2] + v[6], t3 = v[3] + v[7];
    return (t0 + t2) + (t1 + t3);
}

/* the gated activations x * gate(x) (SILU, GELU*, HARDSWISH) give their limit 0 at x = -inf, where the formulas
   are -inf * 0 = NaN (docs/op-semantics.md); finite x need no care */
#define GATED(x, formula) ((x) == -INFINITY ? 0.0f : (formula))
static inline float silu(float x) { return GATED(x, x / (1.0f + expf(-x))); }

/* the portable loops: whole groups of 8 with expv1, the tail with expf, as ggml */
static double exp_sum_portable(int64_t n, float *y, const float *x, float mx) {
    double sum = 0.0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int l = 0; l < 8; l++) y[i + l] = expv1(x[i + l] - mx);
        sum += (double)sum8_tree(y + i);
    }
    for (; i < n; i++) sum += (double)(y[i] = expf(x[i] - mx));
    return sum;
}

/* SOFT_MAX's row before its exponentials: w = x * scale, plus slope x the mask row (F16 or F32; none: NULL);
   returns the larger of mx and the row's largest value (a NaN never taken) */
static float softmax_in_portable(int64_t n, float *w, const float *x, float scale, const void *mask, int mask_f16,
                                 float slope, float mx) {
    for (int64_t k = 0; k < n; k++) {
        float v = x[k] * scale;
        if (mask) v += slope * (mask_f16 ? F16T(((const uint16_t *)mask)[k]) : ((const float *)mask)[k]);
        w[k] = v;
        mx = v > mx ? v : mx;
    }
    return mx;
}

static void swiglu_portable(int64_t n, float *g, const float *v) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) {
            const float a = g[i + l];
            g[i + l] = GATED(a, a / (1.0f + expv1(0.0f - a))) * (v ? v[i + l] : 1.0f);
        }
    for (; i < n; i++) g[i] = silu(g[i]) * (v ? v[i] : 1.0f);
}

#ifdef PGC_X86_AVX2
PGC_X86_AVX2 static inline __m256 expv8(__m256 x) {
    const __m256 shift = _mm256_set1_ps(EXPV_SHIFT), sign = _mm256_set1_ps(-0.0f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(EXPV_LOG2E), shift), k = _mm256_sub_ps(z, shift);
    const __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(EXPV_LN2_LO),
                                      _mm256_fnmadd_ps(k, _mm256_set1_ps(EXPV_LN2_HI), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 scale = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32(0x3f800000)));
    const __m256 r2 = _mm256_mul_ps(r, r);
    const __m256 hi = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(EXPV_C5), r, _mm256_set1_ps(EXPV_C4)), r2,
                                      _mm256_fmadd_ps(_mm256_set1_ps(EXPV_C3), r, _mm256_set1_ps(EXPV_C2)));
    const __m256 p = _mm256_fmadd_ps(hi, r2, _mm256_mul_ps(_mm256_set1_ps(EXPV_C1), r));
    const __m256 ak = _mm256_andnot_ps(sign, k);
    const __m256 big = _mm256_cmp_ps(ak, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
    const __m256 normal = _mm256_fmadd_ps(p, scale, scale);
    if (!_mm256_movemask_ps(big)) return normal;
    const __m256i neg = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(k, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                         _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(neg, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, neg));
    const __m256 huge = _mm256_cmp_ps(ak, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 scaled = _mm256_blendv_ps(normal, _mm256_mul_ps(_mm256_fmadd_ps(s2, p, s2), s1), big);
    return _mm256_blendv_ps(scaled, _mm256_mul_ps(s1, s1), huge);
}

PGC_X86_AVX2 static inline float hsum8_tree(__m256 v) {
    __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

PGC_X86_AVX2 static double exp_sum_avx2(int64_t n, float *y, const float *x, float mx) {
    double sum = 0.0;
    int64_t i = 0;
    const __m256 m = _mm256_set1_ps(mx);
    for (; i + 8 <= n; i += 8) {
        const __m256 v = expv8(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        _mm256_storeu_ps(y + i, v);
        sum += (double)hsum8_tree(v);
    }
    for (; i < n; i++) sum += (double)(y[i] = expf(x[i] - mx));
    return sum;
}

__attribute__((target("avx2,fma,f16c"))) static float softmax_in_avx2(int64_t n, float *w, const float *x,
                                                                        float scale, const void *mask, int mask_f16,
                                                                        float slope, float mx) {
    const __m256 sc = _mm256_set1_ps(scale), sl = _mm256_set1_ps(slope);
    __m256 top = _mm256_set1_ps(mx);
    int64_t k = 0;
    for (; k + 8 <= n; k += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + k), sc);
        if (mask) {
            const __m256 m = mask_f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)mask + k)))
                                      : _mm256_loadu_ps((const float *)mask + k);
            v = _mm256_add_ps(v, _mm256_mul_ps(sl, m));
        }
        _mm256_storeu_ps(w + k, v);
        top = _mm256_max_ps(v, top); /* v if v > top: a NaN is never taken */
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, top);
    for (int l = 0; l < 8; l++) mx = lanes[l] > mx ? lanes[l] : mx;
    return softmax_in_portable(n - k, w + k, x + k, scale, mask ? (const char *)mask + k * (mask_f16 ? 2 : 4) : NULL,
                               mask_f16, slope, mx);
}

PGC_X86_AVX2 static void swiglu_avx2(int64_t n, float *g, const float *v) {
    int64_t i = 0;
    const __m256 one = _mm256_set1_ps(1.0f), ninf = _mm256_set1_ps(-INFINITY);
    for (; i + 8 <= n; i += 8) {
        const __m256 a = _mm256_loadu_ps(g + i);
        __m256 s = _mm256_div_ps(a, _mm256_add_ps(one, expv8(_mm256_sub_ps(_mm256_setzero_ps(), a))));
        s = _mm256_andnot_ps(_mm256_cmp_ps(a, ninf, _CMP_EQ_OQ), s); /* silu(-inf) = 0 */
        if (v) s = _mm256_mul_ps(s, _mm256_loadu_ps(v + i));
        _mm256_storeu_ps(g + i, s);
    }
    for (; i < n; i++) g[i] = silu(g[i]) * (v ? v[i] : 1.0f);
}
#endif

/* y = exp(x - mx) over a row; returns the sum (groups of 8 summed in float, then in double), as ggml's
   soft_max. Used by SOFT_MAX (norm.c). */
double pgc_exp_sum_row(int64_t n, float *y, const float *x, float mx) {
#ifdef PGC_X86_AVX2
    if (pgc_S.level >= 1) return exp_sum_avx2(n, y, x, mx);
#endif
    return exp_sum_portable(n, y, x, mx);
}

float pgc_softmax_in_row(int64_t n, float *w, const float *x, float scale, const void *mask, int mask_f16, float slope,
                         float mx) {
#ifdef PGC_X86_AVX2
    if (pgc_S.level >= 1) return softmax_in_avx2(n, w, x, scale, mask, mask_f16, slope, mx);
#endif
    return softmax_in_portable(n, w, x, scale, mask, mask_f16, slope, mx);
}

/* g = silu(g) * v (v NULL: silu alone) */
static void swiglu_row(int64_t n, float *g, const float *v) {
#ifdef PGC_X86_AVX2
    if (pgc_S.level >= 1) {
        swiglu_avx2(n, g, v);
        return;
    }
#endif
    swiglu_portable(n, g, v);
}

static void load_row(const pgc_node *n, int s, const char *p, float *out, int64_t ne0) {
    int t = n->type[s];
    int64_t nb0 = n->nb[s][0];
    if (t == T_F32 && nb0 == 4) {
        memcpy(out, p, (size_t)ne0 * 4);
        return;
    }
    for (int64_t i = 0; i < ne0; i++) out[i] = pgc_ld(p + i * nb0, t);
}

static void store_row(const pgc_node *n, char *p, const float *v, int64_t ne0) {
    int t = n->type[0];
    int64_t nb0 = n->nb[0][0];
    if (t == T_F32 && nb0 == 4) {
        memcpy(p, v, (size_t)ne0 * 4);
        return;
    }
    for (int64_t i = 0; i < ne0; i++) pgc_st(p + i * nb0, t, v[i]);
}

int pgc_k_binary(const pgc_node *n, const pgc_tctx *c) {
    int64_t nr = pgc_nrows(n, 0), r0, r1;
    pgc_split(nr, c->ith, c->nth, &r0, &r1);
    const int64_t ne0 = n->ne[0][0], ne1 = n->ne[0][1], ne2 = n->ne[0][2];
    const int64_t *bne = n->ne[2];
    float *a = (float *)c->scratch, *b = a + ne0;
    int kind = n->op == PGC_OP_ADD1 ? 0 : n->sub;
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        load_row(n, 1, pgc_ptr(n, 1, 0, i1, i2, i3), a, ne0);
        load_row(n, 2, pgc_ptr(n, 2, 0, i1 % bne[1], i2 % bne[2], i3 % bne[3]), b, bne[0]);
        for (int64_t k = bne[0]; k < ne0; k++) b[k] = b[k % bne[0]];
        switch (kind) {
        case 0: for (int64_t k = 0; k < ne0; k++) a[k] += b[k]; break;
        case 1: for (int64_t k = 0; k < ne0; k++) a[k] -= b[k]; break;
        case 2: for (int64_t k = 0; k < ne0; k++) a[k] *= b[k]; break;
        case 3: for (int64_t k = 0; k < ne0; k++) a[k] /= b[k]; break;
        default: return PGC_E_OP;
        }
        store_row(n, pgc_ptr(n, 0, 0, i1, i2, i3), a, ne0);
    }
    return PGC_OK;
}

static inline float gelu_tanh(float x) {
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    return GATED(x, 0.5f * x * (1.0f + tanhf(k * x * (1.0f + 0.044715f * x * x))));
}
static inline float gelu_quick(float x) { return GATED(x, x / (1.0f + expf(-1.702f * x))); }
static inline float gelu_erf(float x) {
    return GATED(x, 0.5f * x * (1.0f + erff(x * 0.7071067811865476f)));
}
static int apply_unary(int kind, float *a, int64_t ne0, const float *fp) {
    switch (kind) {
    case PGC_U_ABS: for (int64_t k = 0; k < ne0; k++) a[k] = fabsf(a[k]); break;
    case PGC_U_SGN: for (int64_t k = 0; k < ne0; k++) a[k] = a[k] > 0 ? 1.0f : (a[k] < 0 ? -1.0f : 0.0f); break;
    case PGC_U_NEG: for (int64_t k = 0; k < ne0; k++) a[k] = -a[k]; break;
    case PGC_U_STEP: for (int64_t k = 0; k < ne0; k++) a[k] = a[k] > 0 ? 1.0f : 0.0f; break;
    case PGC_U_TANH: for (int64_t k = 0; k < ne0; k++) a[k] = tanhf(a[k]); break;
    case PGC_U_ELU: for (int64_t k = 0; k < ne0; k++) a[k] = a[k] > 0 ? a[k] : expm1f(a[k]); break;
    case PGC_U_RELU: for (int64_t k = 0; k < ne0; k++) a[k] = a[k] > 0 ? a[k] : 0.0f; break;
    case PGC_U_SIGMOID: for (int64_t k = 0; k < ne0; k++) a[k] = 1.0f / (1.0f + expf(-a[k])); break;
    case PGC_U_GELU: for (int64_t k = 0; k < ne0; k++) a[k] = gelu_tanh(a[k]); break;
    case PGC_U_GELU_QUICK: for (int64_t k = 0; k < ne0; k++) a[k] = gelu_quick(a[k]); break;
    case PGC_U_GELU_ERF: for (int64_t k = 0; k < ne0; k++) a[k] = gelu_erf(a[k]); break;
    case PGC_U_SILU: swiglu_row(ne0, a, NULL); break;
    case PGC_U_HARDSWISH:
        for (int64_t k = 0; k < ne0; k++)
            a[k] = GATED(a[k], a[k] * fminf(1.0f, fmaxf(0.0f, (a[k] + 3.0f) / 6.0f)));
        break;
    case PGC_U_HARDSIGMOID:
        for (int64_t k = 0; k < ne0; k++) a[k] = fminf(1.0f, fmaxf(0.0f, (a[k] + 3.0f) / 6.0f));
        break;
    case PGC_U_EXP: for (int64_t k = 0; k < ne0; k++) a[k] = expf(a[k]); break;
    case PGC_U_SOFTPLUS: for (int64_t k = 0; k < ne0; k++) a[k] = a[k] > 20.0f ? a[k] : log1pf(expf(a[k])); break;
    case PGC_U_FLOOR: for (int64_t k = 0; k < ne0; k++) a[k] = floorf(a[k]); break;
    case PGC_U_CEIL: for (int64_t k = 0; k < ne0; k++) a[k] = ceilf(a[k]); break;
    case PGC_U_ROUND: for (int64_t k = 0; k < ne0; k++) a[k] = roundf(a[k]); break;
    case PGC_U_TRUNC: for (int64_t k = 0; k < ne0; k++) a[k] = truncf(a[k]); break;
    case PGC_U_SQR: for (int64_t k = 0; k < ne0; k++) a[k] = a[k] * a[k]; break;
    case PGC_U_SQRT: for (int64_t k = 0; k < ne0; k++) a[k] = sqrtf(a[k]); break;
    case PGC_U_LOG: for (int64_t k = 0; k < ne0; k++) a[k] = logf(a[k]); break;
    case PGC_U_SIN: for (int64_t k = 0; k < ne0; k++) a[k] = sinf(a[k]); break;
    case PGC_U_COS: for (int64_t k = 0; k < ne0; k++) a[k] = cosf(a[k]); break;
    default: return pgc_unary_ext(kind, a, ne0, fp);
    }
    return PGC_OK;
}

/* UNARY and the one-input math ops; CLAMP (fp: min, max), LEAKY_RELU (fp[0] slope), FILL (fp[0] value), SCALE
   (fp[0] s, fp[1] b: x * s + b) */
int pgc_k_unary(const pgc_node *n, const pgc_tctx *c) {
    int64_t nr = pgc_nrows(n, 0), r0, r1;
    pgc_split(nr, c->ith, c->nth, &r0, &r1);
    const int64_t ne0 = n->ne[0][0], ne1 = n->ne[0][1], ne2 = n->ne[0][2];
    float *a = (float *)c->scratch;
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        if (n->op == PGC_OP_FILL) {
            for (int64_t k = 0; k < ne0; k++) a[k] = n->fp[0];
        } else {
            load_row(n, 1, pgc_ptr(n, 1, 0, i1, i2, i3), a, ne0);
            if (n->op == PGC_OP_CLAMP) {
                for (int64_t k = 0; k < ne0; k++) { /* C comparisons, as ggml: a NaN input gives max */
                    float v = a[k] < n->fp[1] ? a[k] : n->fp[1];
                    a[k] = v > n->fp[0] ? v : n->fp[0];
                }
            } else if (n->op == PGC_OP_SCALE) {
                for (int64_t k = 0; k < ne0; k++) a[k] = a[k] * n->fp[0] + n->fp[1];
            } else if (n->op == PGC_OP_LEAKY) {
                for (int64_t k = 0; k < ne0; k++) /* ggml's form: a NaN input gives 0 */
                    a[k] = (a[k] > 0.f ? a[k] : 0.f) + n->fp[0] * (a[k] < 0.f ? a[k] : 0.f);
            } else {
                int rc = apply_unary(n->sub, a, ne0, n->fp);
                if (rc) return rc;
            }
        }
        store_row(n, pgc_ptr(n, 0, 0, i1, i2, i3), a, ne0);
    }
    return PGC_OK;
}

/* GLU: fused (src1 absent: halves of src0's row) or split; ip[0] swapped. Rows split across threads, or where there
   are fewer rows than threads (a decode's one) pieces of whole groups of 8 (pgc_piece; swiglu's vector width, so
   that every value is computed as in the whole row; the scalar tail stays the last piece's) */
int pgc_k_glu(const pgc_node *n, const pgc_tctx *c) {
    const int64_t nr = pgc_nrows(n, 0), nc = n->ne[0][0], ne1 = n->ne[0][1], ne2 = n->ne[0][2];
    const int64_t pieces = pgc_pieces(nr, c->nth);
    const int split = n->data[2] != 0, swapped = n->ip[0];
    float *a = (float *)c->scratch, *b = a + nc; /* a piece of each input, nc values at most */
    int64_t u0, u1;
    pgc_split(nr * pieces, c->ith, c->nth, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        int64_t k0, k1;
        const int64_t r = pgc_piece(u, pieces, nc, 8, &k0, &k1), len = k1 - k0;
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        if (!len) continue;
        /* both inputs read before the piece is written (dst may share an input's memory) */
        load_row(n, 1, pgc_ptr(n, 1, k0, i1, i2, i3), a, len);
        load_row(n, split ? 2 : 1, split ? pgc_ptr(n, 2, k0, i1, i2, i3) : pgc_ptr(n, 1, nc + k0, i1, i2, i3), b, len);
        float *g = swapped ? b : a, *v = swapped ? a : b;
        switch (n->sub) {
        case PGC_G_REGLU: for (int64_t k = 0; k < len; k++) g[k] = (g[k] > 0 ? g[k] : 0.0f) * v[k]; break;
        case PGC_G_GEGLU: for (int64_t k = 0; k < len; k++) g[k] = gelu_tanh(g[k]) * v[k]; break;
        case PGC_G_SWIGLU: swiglu_row(len, g, v); break;
        case PGC_G_GEGLU_ERF: for (int64_t k = 0; k < len; k++) g[k] = gelu_erf(g[k]) * v[k]; break;
        case PGC_G_GEGLU_QUICK: for (int64_t k = 0; k < len; k++) g[k] = gelu_quick(g[k]) * v[k]; break;
        default: {
            int rc = pgc_glu_ext(n->sub, g, v, len, n->fp);
            if (rc) return rc;
        }
        }
        store_row(n, pgc_ptr(n, 0, k0, i1, i2, i3), g, len);
    }
    return PGC_OK;
}
