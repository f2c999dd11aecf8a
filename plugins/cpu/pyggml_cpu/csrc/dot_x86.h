/* x86 intrinsic kernels for AVX2 (+FMA, F16C), included by dot_avx2.c and, with PGC_VNNI defined (the
   unsigned x signed byte dots become one VPDPBUSD), by dot_vnni.c; the includer sets the target pragma and
   XSFX(name). */
#include <immintrin.h>

#include "quants.h"

static inline float hsum8(__m256 v) {
    __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

/* Eight horizontal sums at once (hsum8_x8 in hsum8's order, dot_x86_f16.h's f16_ggml_finish8 in
   ggml_vec_dot_f16's): both first add each vector's lanes l and l + 4 (u[p]: v[2p]'s four sums, then v[2p + 1]'s),
   and end with lanes v0 v2 v4 v6 v1 v3 v5 v7, put back in order. */
static inline void halves_x8(const __m256 v[8], __m256 u[4]) {
    for (int p = 0; p < 4; p++)
        u[p] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x20),
                             _mm256_permute2f128_ps(v[2 * p], v[2 * p + 1], 0x31));
}
static inline __m256 in_order_x8(__m256 f) {
    return _mm256_permutevar8x32_ps(f, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* hsum8's adds for eight vectors, v[o]'s sum in lane o: lanes l + (l + 4), then 0 + 2 and 1 + 3, then their sum */
static inline __m256 hsum8_x8(const __m256 v[8]) {
    __m256 u[4], w[2];
    halves_x8(v, u);
    for (int p = 0; p < 2; p++)
        w[p] = _mm256_add_ps(_mm256_shuffle_ps(u[2 * p], u[2 * p + 1], 0x44),
                             _mm256_shuffle_ps(u[2 * p], u[2 * p + 1], 0xEE));
    return in_order_x8(_mm256_hadd_ps(w[0], w[1]));
}

/* 16 bytes of packed nibbles -> 32 bytes: low nibbles first, then high nibbles (ggml's 32-block order) */
static inline __m256i nibbles32(const uint8_t *p) {
    __m128i t = _mm_loadu_si128((const __m128i *)p);
    __m256i b = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(b, _mm256_set1_epi8(0xF));
}

/* sum of products of unsigned bytes u and signed bytes s, as 8 int32 */
static inline __m256i dot_us8(__m256i u, __m256i s) {
#if defined(PGC_VNNI512)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#elif defined(PGC_VNNI)
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

static inline __m256i dot_ss8(__m256i x, __m256i y) {
    return dot_us8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

/* acc + dot_us8(u, s) (one VPDPBUSD with VNNI) */
static inline __m256i dot_us8_acc(__m256i acc, __m256i u, __m256i s) {
#if defined(PGC_VNNI512)
    return _mm256_dpbusd_epi32(acc, u, s);
#elif defined(PGC_VNNI)
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, dot_us8(u, s));
#endif
}

#if defined(__AVX512F__)
/* row pairs in zmm registers (the AVX-512 builds' prompt kernels): row a in the low 256 bits, row b in the high */
static inline __m512i zmm_of(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

static inline __m512i zmm_load2(const void *a, const void *b) {
    return zmm_of(_mm256_loadu_si256((const __m256i *)a), _mm256_loadu_si256((const __m256i *)b));
}

static inline __m512 zmm_of_ps(__m256 lo, __m256 hi) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}

static inline __m256 zmm_high_ps(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

static inline __m512i bcast256(const void *p) { return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p)); }

#endif

/* A float dot product over four independent FMA accumulators, in steps of four vectors of W floats, then one
   vector at a time, then scalars; the sum is (a0 + a1) + (a2 + a3), added horizontally (HSUM), then the tail in order.
   XT: the x element type, LDX / LDY: W x / y values as a vector V of floats, XS: one x value as float. Used by the
   AVX2 (here) and AVX-512 (dot_avx512.c) levels. */
#define PGC_ID(v) (v)
#define PGC_DOT4(name, XT, W, V, ZERO, LDX, LDY, FMA, ADD, HSUM, XS)                                            \
    static float name(int64_t n, const XT *x, const float *y) {                                                \
        V a0 = ZERO(), a1 = a0, a2 = a0, a3 = a0;                                                               \
        int64_t i = 0;                                                                                          \
        for (; i + 4 * (W) <= n; i += 4 * (W)) {                                                                \
            a0 = FMA(LDX(x + i), LDY(y + i), a0);                                                               \
            a1 = FMA(LDX(x + i + (W)), LDY(y + i + (W)), a1);                                                   \
            a2 = FMA(LDX(x + i + 2 * (W)), LDY(y + i + 2 * (W)), a2);                                           \
            a3 = FMA(LDX(x + i + 3 * (W)), LDY(y + i + 3 * (W)), a3);                                           \
        }                                                                                                       \
        for (; i + (W) <= n; i += (W)) a0 = FMA(LDX(x + i), LDY(y + i), a0);                                    \
        float s = HSUM(ADD(ADD(a0, a1), ADD(a2, a3)));                                                          \
        for (; i < n; i++) s += XS(x[i]) * y[i];                                                                \
        return s;                                                                                               \
    }

static inline __m256 ld_f16x8(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

PGC_DOT4(XSFX(dot_f32), float, 8, __m256, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_loadu_ps, _mm256_fmadd_ps,
         _mm256_add_ps, hsum8, PGC_ID)
PGC_DOT4(XSFX(dot_f16), uint16_t, 8, __m256, _mm256_setzero_ps, ld_f16x8, _mm256_loadu_ps, _mm256_fmadd_ps,
         _mm256_add_ps, hsum8, _cvtsh_ss)

/* F16 matmul in tinyBLAS's order (dot_impl.h's dot_f16_tiles, same bits; ggml_vec_dot_f16's order is in
   dot_x86_f16.h) by register tiles: a tile kernel computes four weight rows (xr; where fewer than
   four are left, the last one repeated and only m stored) x its width of columns from y (by bytes apart), one 8-lane
   accumulator per output (independent FMA chains: each output's bits as when alone). tiles[w] has width w, for w
   from 1 to max_w. */
typedef void (*f16_tile_fn)(int64_t n, const uint16_t *const *xr, int64_t m, const float *y, size_t by, char *d,
                            size_t dr, size_t dc);
#define F16_TILE_ENTRY(name, kernel, w)                                                                         \
    static void name(int64_t n, const uint16_t *const *xr, int64_t m, const float *y, size_t by, char *d,       \
                     size_t dr, size_t dc) {                                                                    \
        kernel(n, xr, m, y, by, d, dr, dc, w);                                                                  \
    }

/* nr rows x nc columns in tiles: columns in passes as wide as max_w (never a lone column after a pass unless nc is
   1: a remainder of max_w + 1 goes as (max_w - 1) + 2), rows four at a time */
static inline void f16_tiles_drive(int64_t n, const uint16_t *x, size_t bx, int64_t nr, const float *y, size_t by,
                                   int64_t nc, char *d, size_t dr, size_t dc, const f16_tile_fn *tiles, int max_w) {
    for (int64_t c = 0; c < nc;) {
        const int64_t left = nc - c;
        const int w = left <= max_w ? (int)left : left == max_w + 1 ? max_w - 1 : max_w;
        for (int64_t r = 0; r < nr; r += 4) {
            const uint16_t *xr[4];
            for (int k = 0; k < 4; k++)
                xr[k] = (const uint16_t *)((const char *)x + (r + k < nr ? r + k : nr - 1) * bx);
            tiles[w](n, xr, nr - r < 4 ? nr - r : 4, (const float *)((const char *)y + c * by), by,
                     d + r * dr + c * dc, dr, dc);
        }
        c += w;
    }
}

/* AVX2: each weight vector converted once for the C columns, each activation vector loaded once for the four rows;
   at C = 3, 12 accumulators, 3 activations and a weight vector fill the 16 ymm registers */
static inline __attribute__((always_inline)) void f16_tile_ymm(int64_t n, const uint16_t *const *xr, int64_t m,
                                                               const float *y, size_t by, char *d, size_t dr,
                                                               size_t dc, const int C) {
    __m256 acc[3][4];
    for (int c = 0; c < C; c++)
        for (int r = 0; r < 4; r++) acc[c][r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8) {
        __m256 yv[3];
        for (int c = 0; c < C; c++) yv[c] = _mm256_loadu_ps((const float *)((const char *)y + c * by) + i);
        for (int r = 0; r < 4; r++) {
            const __m256 xv = ld_f16x8(xr[r] + i);
            for (int c = 0; c < C; c++) acc[c][r] = _mm256_fmadd_ps(xv, yv[c], acc[c][r]);
        }
    }
    for (int c = 0; c < C; c++)
        for (int r = 0; r < m; r++) *(float *)(d + r * dr + c * dc) = hsum8(acc[c][r]);
}

F16_TILE_ENTRY(XSFX(f16_tile1), f16_tile_ymm, 1)
F16_TILE_ENTRY(XSFX(f16_tile2), f16_tile_ymm, 2)
F16_TILE_ENTRY(XSFX(f16_tile3), f16_tile_ymm, 3)

static void XSFX(dot_f16_tiles)(int64_t n, const uint16_t *x, size_t bx, int64_t nr, const float *y, size_t by,
                                int64_t nc, char *d, size_t dr, size_t dc) {
    static const f16_tile_fn tiles[] = {NULL, XSFX(f16_tile1), XSFX(f16_tile2), XSFX(f16_tile3)};
    f16_tiles_drive(n, x, bx, nr, y, by, nc, d, dr, dc, tiles, 3);
}

/* Each dot kernel is written once for NC activation columns (1 or 2; always inlined with a constant NC): with
   two columns the weight block is unpacked once for both. */
#define AINLINE static inline __attribute__((always_inline))

/* Q4_0 or Q8_0 weights (T: signed levels, nibbles - 8 or bytes) against NC Q8_0 columns */
AINLINE void signed_cols(int64_t n, float *s, const void *vx, const void *const *vy, const int NC, const int T) {
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < n / QK; i++) {
        const bq4_0 *x4 = (const bq4_0 *)vx + i;
        const bq8_0 *x8 = (const bq8_0 *)vx + i;
        const __m256i q = T == T_Q4_0 ? _mm256_sub_epi8(nibbles32(x4->qs), _mm256_set1_epi8(8))
                                      : _mm256_loadu_si256((const __m256i *)x8->qs);
        const __m256i aq = _mm256_sign_epi8(q, q);
        const float dx = F16T(T == T_Q4_0 ? x4->d : x8->d);
        for (int c = 0; c < NC; c++) {
            const bq8_0 *y = (const bq8_0 *)vy[c] + i;
            __m256i p = dot_us8(aq, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y->qs), q));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * F16T(y->d)), _mm256_cvtepi32_ps(p), acc[c]);
        }
    }
    for (int c = 0; c < NC; c++) s[c] = hsum8(acc[c]);
}

AINLINE void q4_0_cols(int64_t n, float *s, const void *vx, const void *const *vy, const int NC) {
    signed_cols(n, s, vx, vy, NC, T_Q4_0);
}

AINLINE void q4_1_cols(int64_t n, float *s, const void *vx, const void *const *vy, const int NC) {
    const bq4_1 *x = (const bq4_1 *)vx;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    float summs[2] = {0.0f, 0.0f};
    for (int64_t i = 0; i < n / QK; i++) {
        const __m256i q = nibbles32(x[i].qs);
        const float dx = F16T(x[i].d), mx = F16T(x[i].m);
        for (int c = 0; c < NC; c++) {
            const bq8_1 *y = (const bq8_1 *)vy[c] + i;
            __m256i p = dot_us8(q, _mm256_loadu_si256((const __m256i *)y->qs));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * F16T(y->d)), _mm256_cvtepi32_ps(p), acc[c]);
            summs[c] = fmaf(mx, F16T(y->s), summs[c]); /* ggml's build contracts this to an FMA */
        }
    }
    for (int c = 0; c < NC; c++) s[c] = hsum8(acc[c]) + summs[c];
}

AINLINE void q8_0_cols(int64_t n, float *s, const void *vx, const void *const *vy, const int NC) {
    signed_cols(n, s, vx, vy, NC, T_Q8_0);
}

/* ---- weight rows against one activation row: one row (vec_dot) or PGC_DOTR_ROWS rows (vec_dotr, mat-vec).
   Written once for NRR rows (always inlined with a constant NRR), so a row's dot has the same bits either way
   and the same as its column in the two-column kernels above. The activation block is loaded, and what
   depends on it alone computed, once for all rows; independent rows also keep more loads in flight. The
   signed weights become unsigned by an offset (Q4_0: the nibbles are x + 8; Q8_0 with VNNI: x + 128) whose
   product with the activations, off (per int32 lane), seeds the dot: dot(x, y) = dot(x + o, y) - o . y. ---- */
#define NR PGC_DOTR_ROWS
#define ROW(T, r, i) ((const T *)((const char *)vx + (r) * bx) + (i))

/* 32 bits (4 bytes at p) -> 32 bytes, byte j 0x10 where bit j is set: a Q5 block's fifth bits, in place */
static inline __m256i bits32_x10(const uint8_t *p) {
    uint32_t b;
    memcpy(&b, p, 4);
#if defined(__AVX512BW__) && defined(__AVX512VL__) /* the 32 bits as a byte mask: two instructions, not five */
    return _mm256_maskz_set1_epi8(_cvtu32_mask32(b), 0x10);
#else
    const __m256i sel = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)b), sel), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(0x10));
#endif
}

/* a Q5_0 / Q5_1 block's 32 five-bit values, unsigned (Q5_0's x + 16) */
static inline __m256i q5_bytes(const uint8_t *qh, const uint8_t *qs) {
    return _mm256_or_si256(nibbles32(qs), bits32_x10(qh));
}

/* per type T (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0; a constant after inlining): what the block's dot needs of the
   activations alone, and the block's int32 lanes (each the sum of four neighbouring products, as ggml's).
   Without VNNI, Q8_0 keeps the sign trick: (x + 128) y pairs would saturate VPMADDUBSW. */
AINLINE __m256i legacy_off(const int T, __m256i yq) {
    if (T == T_Q4_0) return _mm256_sub_epi32(_mm256_setzero_si256(), dot_us8(_mm256_set1_epi8(8), yq));
    if (T == T_Q5_0) return _mm256_sub_epi32(_mm256_setzero_si256(), dot_us8(_mm256_set1_epi8(16), yq));
#if defined(PGC_VNNI) || defined(PGC_VNNI512)
    if (T == T_Q8_0) return _mm256_sub_epi32(_mm256_setzero_si256(), dot_us8(_mm256_set1_epi8((char)0x80), yq));
#endif
    return _mm256_setzero_si256();
}

/* the block's 32 values as the byte dot takes them: unsigned (offset) where legacy_off has the offset's product */
AINLINE __m256i legacy_weights(const int T, const void *xb) {
    if (T == T_Q4_0) return nibbles32(((const bq4_0 *)xb)->qs);
    if (T == T_Q4_1) return nibbles32(((const bq4_1 *)xb)->qs);
    if (T == T_Q5_0) return q5_bytes(((const bq5_0 *)xb)->qh, ((const bq5_0 *)xb)->qs);
    if (T == T_Q5_1) return q5_bytes(((const bq5_1 *)xb)->qh, ((const bq5_1 *)xb)->qs);
    const __m256i xq = _mm256_loadu_si256((const __m256i *)((const bq8_0 *)xb)->qs);
#if defined(PGC_VNNI) || defined(PGC_VNNI512)
    return _mm256_xor_si256(xq, _mm256_set1_epi8((char)0x80));
#else
    return xq;
#endif
}

AINLINE __m256i legacy_dot(const int T, __m256i w, __m256i yq, __m256i off) {
    if (T == T_Q4_1 || T == T_Q5_1) return dot_us8(w, yq);
#if !defined(PGC_VNNI) && !defined(PGC_VNNI512)
    if (T == T_Q8_0) return dot_ss8(w, yq);
#endif
    return dot_us8_acc(off, w, yq);
}

AINLINE __m256i legacy_lanes(const int T, const void *xb, __m256i yq, __m256i off) {
    return legacy_dot(T, legacy_weights(T, xb), yq, off);
}

/* Q4_1 / Q5_1 against Q8_1 add x.m * y.s per block (summed apart, as the two-column kernel does) */
/* a legacy type's block bytes, and whether it has a min (its partner is then Q8_1, else Q8_0) */
AINLINE size_t legacy_block(const int T) {
    return T == T_Q4_0 ? sizeof(bq4_0) : T == T_Q4_1 ? sizeof(bq4_1) : T == T_Q5_0 ? sizeof(bq5_0)
         : T == T_Q5_1 ? sizeof(bq5_1) : sizeof(bq8_0);
}

AINLINE int legacy_q8_1(const int T) { return T == T_Q4_1 || T == T_Q5_1; }

AINLINE void legacy_rows(int64_t n, float *s, const void *vx, size_t bx, const void *vy, const int NRR, const int T) {
    const size_t xs = legacy_block(T);
    const int q8_1 = legacy_q8_1(T);
    __m256 acc[NR];
    float summs[NR];
    for (int r = 0; r < NRR; r++) {
        acc[r] = _mm256_setzero_ps();
        summs[r] = 0.0f;
    }
    for (int64_t i = 0; i < n / QK; i++) {
        const bq8_0 *y0 = (const bq8_0 *)vy + i; /* Q8_0 and Q8_1 blocks start with d */
        const bq8_1 *y1 = (const bq8_1 *)vy + i;
        const __m256i yq = _mm256_loadu_si256((const __m256i *)(q8_1 ? y1->qs : y0->qs));
        const __m256i off = legacy_off(T, yq);
        const float dy = F16T(q8_1 ? y1->d : y0->d);
        for (int r = 0; r < NRR; r++) {
            const char *xb = (const char *)vx + r * bx + i * xs;
            if (T == T_Q8_0 && NRR > 1) _mm_prefetch(xb + NRR * bx, _MM_HINT_T0); /* measured: Q8_0 gains */
            const __m256i p = legacy_lanes(T, xb, yq, off);
            /* every legacy block starts with d, and those with a min continue with m */
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(F16T(((const bq4_0 *)xb)->d) * dy), _mm256_cvtepi32_ps(p), acc[r]);
            if (q8_1) summs[r] = fmaf(F16T(((const bq4_1 *)xb)->m), F16T(y1->s), summs[r]); /* as ggml's FMA build */
        }
    }
    for (int r = 0; r < NRR; r++) s[r] = q8_1 ? hsum8(acc[r]) + summs[r] : hsum8(acc[r]);
}

#define ROWS_ENTRIES(T, TID)                                                                                \
    static void XSFX(vd_##T)(int64_t n, float *s, const void *vx, const void *vy) {                         \
        legacy_rows(n, s, vx, 0, vy, 1, TID);                                                               \
    }                                                                                                       \
    static void XSFX(vdr_##T)(int64_t n, float *s, const void *vx, size_t bx, const void *vy) {            \
        legacy_rows(n, s, vx, bx, vy, NR, TID);                                                             \
    }
ROWS_ENTRIES(q4_0, T_Q4_0)
ROWS_ENTRIES(q4_1, T_Q4_1)
ROWS_ENTRIES(q8_0, T_Q8_0)
ROWS_ENTRIES(q5_0, T_Q5_0)
ROWS_ENTRIES(q5_1, T_Q5_1)

#include "dot_x86_tiles.h" /* prompt tiles of the legacy types */

/* byte-shuffle masks that spread int16 lane pairs: K4_SPREAD[j] puts int16 j of each 128-bit lane into all eight
   int16 lanes; K6_SPREAD[k] puts int16 2k into the low 128-bit lane and int16 2k+1 into the high one */
static inline __m256i k4_spread(int j) {
    return _mm256_set1_epi16((short)((2 * j) | ((2 * j + 1) << 8)));
}

static inline __m256i k6_spread(int k) {
    __m128i lo = _mm_set1_epi16((short)((4 * k) | ((4 * k + 1) << 8)));
    __m128i hi = _mm_set1_epi16((short)((4 * k + 2) | ((4 * k + 3) << 8)));
    return _mm256_set_m128i(hi, lo);
}

/* A Q4_K / Q5_K block's 12 bytes of 6-bit scales and mins (as 32-bit words u0 u1 u2; the load reads 4 bytes past
   them, inside the block) -> the 8 scales as int16 in both 128-bit lanes (sc), the 8 mins as int16 (mn): the bits
   pg_scale_min_k4 reads, in vector registers: [u0 & 3f, (u2 & 0f) | (u0 >> 6 & 03) << 4, u1 & 3f,
   (u2 >> 4 & 0f) | (u1 >> 6 & 03) << 4] */
AINLINE void k4_scales_mins(const uint8_t *scales, __m256i *sc, __m128i *mn) {
    const __m128i v = _mm_loadu_si128((const __m128i *)scales);
    const __m128i lo = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(v, 0x98), _mm_set_epi32(4, 0, 0, 0)),
                                     _mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
    const __m128i hi = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, 0x50), 6),
                                     _mm_set_epi32(0x03030303, 0, 0x03030303, 0));
    const __m256i ms = _mm256_cvtepu8_epi16(_mm_or_si128(lo, _mm_slli_epi32(hi, 4))); /* 8 scales, 8 mins */
    *sc = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(ms));
    *mn = _mm256_extracti128_si256(ms, 1);
}

/* A K-quant block's integer sums into the row's float accumulators: acc[c] += (y[c].d * x.d) * sumi[c], one FMA per
   block as ggml's AVX2 vec_dot does */
AINLINE void k_block_acc(float dx, const bq8_K *const *y, int NC, const __m256i *sumi, __m256 *acc) {
    for (int c = 0; c < NC; c++)
        acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(y[c]->d * dx), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
}

/* the end of a row for the K-quants whose mins went into the block sums: the accumulator's lanes */
static inline float k_sum_finish(__m256 acc, __m128 accm) {
    (void)accm;
    return hsum8(acc);
}

/* One Q4_K weight block against the activation blocks y[0..NC-1]: acc[c] += d-scaled sums, accm[c] += the
   dmin-scaled mins terms (subtracted at the end). */
AINLINE void q4_K_block(const bq4_K *x, const bq8_K *const *y, const int NC, __m256 *acc, __m128 *accm) {
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256i sc;
    __m128i mn;
    k4_scales_mins(x->scales, &sc, &mn);
    const float dx = F16T(x->d), dmx = F16T(x->dmin);
    __m256i sumi[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int c = 0; c < NC; c++) { /* mins . (bsums summed in pairs) */
        __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y[c]->bsums),
                                    _mm_loadu_si128((const __m128i *)(y[c]->bsums + 8)));
        accm[c] = _mm_fmadd_ps(_mm_set1_ps(y[c]->d * dmx), _mm_cvtepi32_ps(_mm_madd_epi16(mn, bs)), accm[c]);
    }
    for (int k = 0; k < 4; k++) {
        __m256i q4 = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * k));
        __m256i lo = _mm256_and_si256(q4, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), m4);
        __m256i s0 = _mm256_shuffle_epi8(sc, k4_spread(2 * k)), s1 = _mm256_shuffle_epi8(sc, k4_spread(2 * k + 1));
        for (int c = 0; c < NC; c++) {
            const int8_t *q8 = y[c]->qs + 64 * k;
            __m256i p0 = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)q8));
            __m256i p1 = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(q8 + 32)));
            sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(_mm256_madd_epi16(p0, s0), _mm256_madd_epi16(p1, s1)));
        }
    }
    k_block_acc(dx, y, NC, sumi, acc);
}

static inline float q4_K_finish(__m256 acc, __m128 accm) {
    __m128 m = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return hsum8(acc) - _mm_cvtss_f32(m);
}

/* Q6_UNPACK_X86(name, VI, P, S): a Q6_K half-block's 128 unsigned 6-bit values, q[k] the 32 of sub-blocks 2k and
   2k + 1, from its low nibbles (l0, l1) and high bit pairs (qh): each pair masked in place and moved to bits 4..5
   (masking first keeps 16-bit shifts from carrying bits across bytes). VI: the integer vector type, P: the
   intrinsics' prefix, S: their integer suffix. Instantiated for ymm registers (q6_K_block) and, with AVX-512, for
   zmm registers holding two rows (dot_avx512_kpairs.h's q6_K_pair). */
#define Q6_UNPACK_X86(name, VI, P, S)                                                                             \
    AINLINE void name(VI l0, VI l1, VI qh, VI q[4]) {                                                              \
        const VI m4 = P##_set1_epi8(0xF), m2 = P##_set1_epi8(3);                                                   \
        const VI h2 = P##_set1_epi8(0x0C), h4 = P##_set1_epi8(0x30), h6 = P##_set1_epi8((char)0xC0);               \
        q[0] = P##_or_##S(P##_and_##S(l0, m4), P##_slli_epi16(P##_and_##S(qh, m2), 4));                           \
        q[1] = P##_or_##S(P##_and_##S(l1, m4), P##_slli_epi16(P##_and_##S(qh, h2), 2));                           \
        q[2] = P##_or_##S(P##_and_##S(P##_srli_epi16(l0, 4), m4), P##_and_##S(qh, h4));                           \
        q[3] = P##_or_##S(P##_and_##S(P##_srli_epi16(l1, 4), m4), P##_srli_epi16(P##_and_##S(qh, h6), 2));        \
    }

Q6_UNPACK_X86(q6_unpack_ymm, __m256i, _mm256, si256)
#if defined(__AVX512F__)
Q6_UNPACK_X86(q6_unpack_zmm, __m512i, _mm512, si512)
#endif
#undef Q6_UNPACK_X86

/* One Q6_K weight block against the activation blocks y[0..NC-1]: acc[c] += its d-scaled sums. */
AINLINE void q6_K_block(const bq6_K *x, const bq8_K *const *y, const int NC, __m256 *acc, __m128 *accm) {
    (void)accm; /* no mins */
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
    __m256i sumi[2];
    for (int c = 0; c < NC; c++) { /* 32 * sum_g scale_g * bsum_g: the -32 offset of every value, taken out once */
        __m256i bias = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y[c]->bsums));
        sumi[c] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(bias, 5));
    }
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = x->ql + 64 * h, *qhp = x->qh + 32 * h;
        const __m256i sc = _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(sc16, 1)
                                                          : _mm256_castsi256_si128(sc16));
        __m256i l0 = _mm256_loadu_si256((const __m256i *)ql), l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
        __m256i qh = _mm256_loadu_si256((const __m256i *)qhp);
        __m256i q[4];
        q6_unpack_ymm(l0, l1, qh, q);
        for (int k = 0; k < 4; k++) {
            const __m256i sk = _mm256_shuffle_epi8(sc, k6_spread(k));
            for (int c = 0; c < NC; c++) {
                const int8_t *q8 = y[c]->qs + 128 * h + 32 * k;
                __m256i p = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)q8));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(p, sk));
            }
        }
    }
    const float dx = F16T(x->d);
    k_block_acc(dx, y, NC, sumi, acc);
}

#define q6_K_finish k_sum_finish

#include "dot_x86_k.h" /* Q2_K, Q3_K, Q5_K */

/* Each K-quant's kernels from its block function: NC activation columns (cols), and the row-blocked one: block
   i of every row in turn, while activation block i stays in L1. Its row loop is unrolled so that each row's loads
   have their own instructions (a load that strides across rows defeats the hardware's per-instruction
   prefetch), and block i of the next pass's rows is prefetched: both measured, without them 8 interleaved rows
   ran slower than one row at a time once the weights left L2. */
#define K_KERNELS(T)                                                                                        \
    AINLINE void T##_cols(int64_t n, float *s, const void *vx, const void *const *vy, const int NC) {       \
        const b##T *x = (const b##T *)vx;                                                                   \
        __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};                                         \
        __m128 accm[2] = {_mm_setzero_ps(), _mm_setzero_ps()};                                              \
        for (int64_t i = 0; i < n / QKK; i++) {                                                             \
            const bq8_K *y[2] = {(const bq8_K *)vy[0] + i, (const bq8_K *)vy[NC - 1] + i};                  \
            T##_block(x + i, y, NC, acc, accm);                                                             \
        }                                                                                                   \
        for (int c = 0; c < NC; c++) s[c] = T##_finish(acc[c], accm[c]);                                   \
    }                                                                                                       \
    static void XSFX(vdr_##T)(int64_t n, float *s, const void *vx, size_t bx, const void *vy) {            \
        __m256 acc[NR];                                                                                     \
        __m128 accm[NR];                                                                                    \
        for (int r = 0; r < NR; r++) {                                                                      \
            acc[r] = _mm256_setzero_ps();                                                                   \
            accm[r] = _mm_setzero_ps();                                                                     \
        }                                                                                                   \
        for (int64_t i = 0; i < n / QKK; i++) {                                                             \
            const bq8_K *y = (const bq8_K *)vy + i;                                                         \
            _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {                                          \
                _mm_prefetch((const char *)ROW(b##T, r + NR, i), _MM_HINT_T0);                              \
                _mm_prefetch((const char *)ROW(b##T, r + NR, i) + 128, _MM_HINT_T0);                        \
                T##_block(ROW(b##T, r, i), &y, 1, &acc[r], &accm[r]);                                       \
            }                                                                                               \
        }                                                                                                   \
        for (int r = 0; r < NR; r++) s[r] = T##_finish(acc[r], accm[r]);                                    \
    }
K_KERNELS(q4_K)
K_KERNELS(q6_K)
K_KERNELS(q2_K)
K_KERNELS(q3_K)
K_KERNELS(q5_K)
#undef K_KERNELS

/* the table entries: one column (pgc_vec_dot_fn) and two columns (pgc_vec_dot2_fn) of a kernel; the 32-block
   types take their one-column entries from the row kernels above */
#define COLS_ENTRIES(T) PGC_VD1_ENTRY(XSFX(vd_##T), T##_cols) COLS2_ENTRY(T)
#define COLS2_ENTRY(T) PGC_VD2_ENTRY(XSFX(vd2_##T), T##_cols)
COLS2_ENTRY(q4_0)
COLS2_ENTRY(q4_1)
COLS2_ENTRY(q8_0)
COLS_ENTRIES(q4_K)
COLS_ENTRIES(q6_K)
COLS_ENTRIES(q2_K)
COLS_ENTRIES(q3_K)
COLS_ENTRIES(q5_K)

#include "dot_x86_r8.h"

/* blocks -> floats with the portable dequantisation's bits (quants.c: an exact conversion, one multiply a value and,
   where quants.c adds one (Q4_1, Q5_0, Q5_1; m NULL: none), one add): a KV cache's rows in flash attention,
   quantised rows of GET_ROWS and CPY */
static inline __attribute__((always_inline)) void XSFX(deq_bytes32)(__m256i q, float d, const float *m, float *y) {
    const __m256 dv = _mm256_set1_ps(d), mv = _mm256_set1_ps(m ? *m : 0.0f);
    const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
    const __m128i part[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int k = 0; k < 4; k++) {
        const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part[k])), dv);
        _mm256_storeu_ps(y + 8 * k, m ? _mm256_add_ps(v, mv) : v);
    }
}
static void XSFX(deq_q8_0)(const void *vx, float *y, int64_t n) {
    const bq8_0 *x = (const bq8_0 *)vx;
    for (int64_t i = 0; i < n / QK; i++)
        XSFX(deq_bytes32)(_mm256_loadu_si256((const __m256i *)(const void *)x[i].qs), F16T(x[i].d), NULL, y + i * QK);
}
static void XSFX(deq_q4_0)(const void *vx, float *y, int64_t n) {
    const bq4_0 *x = (const bq4_0 *)vx;
    for (int64_t i = 0; i < n / QK; i++)
        XSFX(deq_bytes32)(_mm256_sub_epi8(nibbles32(x[i].qs), _mm256_set1_epi8(8)), F16T(x[i].d), NULL, y + i * QK);
}
static void XSFX(deq_q4_1)(const void *vx, float *y, int64_t n) {
    const bq4_1 *x = (const bq4_1 *)vx;
    for (int64_t i = 0; i < n / QK; i++) {
        const float m = F16T(x[i].m);
        XSFX(deq_bytes32)(nibbles32(x[i].qs), F16T(x[i].d), &m, y + i * QK);
    }
}
static void XSFX(deq_q5_0)(const void *vx, float *y, int64_t n) {
    const bq5_0 *x = (const bq5_0 *)vx;
    const float zero = 0.0f; /* quants.c adds its m = 0 too (a -0 becomes +0) */
    for (int64_t i = 0; i < n / QK; i++)
        XSFX(deq_bytes32)(_mm256_sub_epi8(q5_bytes(x[i].qh, x[i].qs), _mm256_set1_epi8(16)), F16T(x[i].d), &zero,
                          y + i * QK);
}
static void XSFX(deq_q5_1)(const void *vx, float *y, int64_t n) {
    const bq5_1 *x = (const bq5_1 *)vx;
    for (int64_t i = 0; i < n / QK; i++) {
        const float m = F16T(x[i].m);
        XSFX(deq_bytes32)(q5_bytes(x[i].qh, x[i].qs), F16T(x[i].d), &m, y + i * QK);
    }
}

/* a type's one-column, two-column and eight-row dots */
#define XREGISTER_DOTS(T, t)                        \
    do {                                            \
        s->vec_dot[T_##T] = XSFX(vd_##t);           \
        s->vec_dot2[T_##T] = XSFX(vd2_##t);         \
        s->vec_dotr[T_##T] = XSFX(vdr_##t);         \
    } while (0)

static void XSFX(register_x86)(pgc_simd *s) {
    s->dot_f32 = XSFX(dot_f32);
    s->dot_f16 = XSFX(dot_f16);
    s->dot_f16_tiles = XSFX(dot_f16_tiles);
    XREGISTER_DOTS(Q4_0, q4_0);
    XREGISTER_DOTS(Q4_1, q4_1);
    XREGISTER_DOTS(Q8_0, q8_0);
    XREGISTER_DOTS(Q4_K, q4_K);
    XREGISTER_DOTS(Q6_K, q6_K);
    XREGISTER_DOTS(Q2_K, q2_K);
    XREGISTER_DOTS(Q3_K, q3_K);
    XREGISTER_DOTS(Q5_K, q5_K);
    s->r8[T_Q4_0] = XSFX(r8_q4_0);
    s->r8[T_Q4_1] = XSFX(r8_q4_1);
    s->r8[T_Q5_0] = XSFX(r8_q5_0);
    s->r8[T_Q5_1] = XSFX(r8_q5_1);
    s->r8[T_Q8_0] = XSFX(r8_q8_0);
    s->r8[T_Q4_K] = XSFX(r8_q4_K);
    s->r8[T_Q5_K] = XSFX(r8_q5_K);
    s->r8[T_Q6_K] = XSFX(r8_q6_K);
    /* the tiles of Q4_0, Q4_1 and Q8_0 beat their two-column kernels only with 32 registers (measured: 1.2-1.3x
       there, 0.9x in the AVX2 build); Q5_0 and Q5_1 have no two-column kernels */
#if defined(__AVX512F__)
    s->q_tiles[T_Q4_0] = XSFX(lt_q4_0);
    s->q_tiles[T_Q4_1] = XSFX(lt_q4_1);
    s->q_tiles[T_Q8_0] = XSFX(lt_q8_0);
#endif
    s->q_tiles[T_Q5_0] = XSFX(lt_q5_0);
    s->q_tiles[T_Q5_1] = XSFX(lt_q5_1);
    s->vec_dot[T_Q5_0] = XSFX(vd_q5_0); /* no two-column kernels: the tiles serve prompts */
    s->vec_dotr[T_Q5_0] = XSFX(vdr_q5_0);
    s->vec_dot[T_Q5_1] = XSFX(vd_q5_1);
    s->vec_dotr[T_Q5_1] = XSFX(vdr_q5_1);
    s->dequant[T_Q8_0] = XSFX(deq_q8_0);
    s->dequant[T_Q4_0] = XSFX(deq_q4_0);
    s->dequant[T_Q4_1] = XSFX(deq_q4_1);
    s->dequant[T_Q5_0] = XSFX(deq_q5_0);
    s->dequant[T_Q5_1] = XSFX(deq_q5_1);
}
#undef XREGISTER_DOTS
