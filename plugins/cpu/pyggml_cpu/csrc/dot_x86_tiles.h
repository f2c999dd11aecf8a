/* Prompt tiles of the legacy types (pgc_q_tiles_fn), included by dot_x86.h: LT_R weight rows x LT_C activation
   columns per pass, each weight block unpacked once for the columns and each activation block's offset product
   once for the rows. Every output keeps legacy_rows's operations, hence its bits. The AVX-512 builds take four
   rows as two pairs, row a of a pair in the low half of each zmm register and row b in the high half (each
   instruction does the work of two: Q8_0 1.15x, Q4_1 1.25x the four-row ymm tile); the AVX2 ones two rows in ymm. */
#if defined(__AVX512F__)
#define LT_R 4
#else
#define LT_R 2
#endif
#define LT_C 4

AINLINE void legacy_tile(int64_t n, const char *x, size_t bx, const char *const *ys, char *d, size_t dr, size_t dc,
                         const int R, const int C, const int T) {
    const size_t xs = legacy_block(T);
    const int q8_1 = legacy_q8_1(T);
    const size_t ys_blk = q8_1 ? sizeof(bq8_1) : sizeof(bq8_0);
    __m256 acc[LT_R][LT_C];
    float summs[LT_R][LT_C];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            acc[r][c] = _mm256_setzero_ps();
            summs[r][c] = 0.0f;
        }
    for (int64_t i = 0; i < n / QK; i++) {
        __m256i yq[LT_C], off[LT_C];
        __m256 dyv[LT_C];
        float sy[LT_C];
        for (int c = 0; c < C; c++) {
            const char *yb = ys[c] + i * ys_blk; /* Q8_0 and Q8_1 blocks start with d, Q8_1's s next */
            yq[c] = _mm256_loadu_si256((const __m256i *)(yb + (q8_1 ? 4 : 2)));
            off[c] = legacy_off(T, yq[c]);
            dyv[c] = _mm256_set1_ps(F16T(((const bq8_0 *)yb)->d));
            sy[c] = q8_1 ? F16T(((const bq8_1 *)yb)->s) : 0.0f;
        }
        for (int r = 0; r < R; r++) {
            const char *xb = x + r * bx + i * xs;
            const __m256 dx = _mm256_set1_ps(F16T(((const bq4_0 *)xb)->d));
            const __m256i w = legacy_weights(T, xb);
            for (int c = 0; c < C; c++) {
                const __m256i p = legacy_dot(T, w, yq[c], off[c]);
                acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(dx, dyv[c]), _mm256_cvtepi32_ps(p), acc[r][c]);
                if (q8_1) summs[r][c] = fmaf(F16T(((const bq4_1 *)xb)->m), sy[c], summs[r][c]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++)
            *(float *)(d + r * dr + c * dc) = q8_1 ? hsum8(acc[r][c]) + summs[r][c] : hsum8(acc[r][c]);
}

#if defined(__AVX512F__)
/* legacy_dot on row pairs: VPSIGNB has no 512-bit form, so the sign trick negates by mask */
AINLINE __m512i legacy_dot_zmm(const int T, __m512i w, __m512i yq, __m512i off) {
#if defined(PGC_VNNI512)
    if (T == T_Q4_1 || T == T_Q5_1) return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, yq);
    return _mm512_dpbusd_epi32(off, w, yq);
#else
    const __m512i ones = _mm512_set1_epi16(1);
    if (T == T_Q8_0) {
        const __m512i sy = _mm512_mask_sub_epi8(yq, _mm512_movepi8_mask(w), _mm512_setzero_si512(), yq);
        return _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(w), sy), ones);
    }
    const __m512i p = _mm512_madd_epi16(_mm512_maddubs_epi16(w, yq), ones);
    return T == T_Q4_1 || T == T_Q5_1 ? p : _mm512_add_epi32(off, p);
#endif
}

/* two row pairs (four rows) x LT_C columns, row a of a pair in the low half of each zmm, row b in the high half */
AINLINE void legacy_pairs(int64_t n, const char *x, size_t bx, const char *const *ys, char *d, size_t dr, size_t dc,
                          const int T) {
    const size_t xs = legacy_block(T);
    const int q8_1 = legacy_q8_1(T);
    const size_t ys_blk = q8_1 ? sizeof(bq8_1) : sizeof(bq8_0);
    __m512 acc[2][LT_C];
    float summs[4][LT_C];
    for (int p = 0; p < 2; p++)
        for (int c = 0; c < LT_C; c++) {
            acc[p][c] = _mm512_setzero_ps();
            summs[2 * p][c] = summs[2 * p + 1][c] = 0.0f;
        }
    for (int64_t i = 0; i < n / QK; i++) {
        __m512i yq[LT_C], off[LT_C];
        __m512 dy[LT_C];
        float sy[LT_C];
        for (int c = 0; c < LT_C; c++) {
            const char *yb = ys[c] + i * ys_blk;
            const __m256i q = _mm256_loadu_si256((const __m256i *)(yb + (q8_1 ? 4 : 2)));
            yq[c] = zmm_of(q, q);
            const __m256i o = legacy_off(T, q);
            off[c] = zmm_of(o, o);
            dy[c] = _mm512_set1_ps(F16T(((const bq8_0 *)yb)->d));
            sy[c] = q8_1 ? F16T(((const bq8_1 *)yb)->s) : 0.0f;
        }
        for (int p = 0; p < 2; p++) {
            const char *xa = x + 2 * p * bx + i * xs, *xb = xa + bx;
            const __m512 dx = zmm_of_ps(_mm256_set1_ps(F16T(((const bq4_0 *)xa)->d)),
                                          _mm256_set1_ps(F16T(((const bq4_0 *)xb)->d)));
            const __m512i w = zmm_of(legacy_weights(T, xa), legacy_weights(T, xb));
            for (int c = 0; c < LT_C; c++) {
                const __m512i q = legacy_dot_zmm(T, w, yq[c], off[c]);
                acc[p][c] = _mm512_fmadd_ps(_mm512_mul_ps(dx, dy[c]), _mm512_cvtepi32_ps(q), acc[p][c]);
                if (q8_1) {
                    summs[2 * p][c] = fmaf(F16T(((const bq4_1 *)xa)->m), sy[c], summs[2 * p][c]);
                    summs[2 * p + 1][c] = fmaf(F16T(((const bq4_1 *)xb)->m), sy[c], summs[2 * p + 1][c]);
                }
            }
        }
    }
    for (int p = 0; p < 2; p++)
        for (int c = 0; c < LT_C; c++) {
            const float a = hsum8(_mm512_castps512_ps256(acc[p][c])), b = hsum8(zmm_high_ps(acc[p][c]));
            *(float *)(d + 2 * p * dr + c * dc) = q8_1 ? a + summs[2 * p][c] : a;
            *(float *)(d + (2 * p + 1) * dr + c * dc) = q8_1 ? b + summs[2 * p + 1][c] : b;
        }
}
#define LT_FULL(n, x, bx, ys, d, dr, dc, T) legacy_pairs(n, x, bx, ys, d, dr, dc, T)
#else
#define LT_FULL(n, x, bx, ys, d, dr, dc, T) legacy_tile(n, x, bx, ys, d, dr, dc, LT_R, LT_C, T)
#endif

#define LEGACY_TILES(t, T)                                                                                    \
    static void XSFX(lt_##t)(int64_t n, const void *vx, size_t bx, int64_t nr, const void *vy, size_t by,       \
                             int64_t nc, char *d, size_t dr, size_t dc) {                                     \
        const char *x = (const char *)vx;                                                                     \
        for (int64_t c0 = 0; c0 < nc; c0 += LT_C) {                                                           \
            const char *ys[LT_C];                                                                             \
            const int C = nc - c0 < LT_C ? (int)(nc - c0) : LT_C;                                             \
            for (int c = 0; c < C; c++) ys[c] = (const char *)vy + (c0 + c) * by;                             \
            int64_t r = 0;                                                                                    \
            for (; r + LT_R <= nr; r += LT_R) { /* C a constant in each call */                               \
                char *dt = d + r * dr + c0 * dc;                                                              \
                if (C == LT_C) LT_FULL(n, x + r * bx, bx, ys, dt, dr, dc, T);                                \
                else if (C == 3) legacy_tile(n, x + r * bx, bx, ys, dt, dr, dc, LT_R, 3, T);                 \
                else if (C == 2) legacy_tile(n, x + r * bx, bx, ys, dt, dr, dc, LT_R, 2, T);                 \
                else legacy_tile(n, x + r * bx, bx, ys, dt, dr, dc, LT_R, 1, T);                             \
            }                                                                                                 \
            for (; r < nr; r++) /* the rest: one row at a time, one column at a time */                       \
                for (int c = 0; c < C; c++)                                                                   \
                    legacy_tile(n, x + r * bx, bx, ys + c, d + r * dr + (c0 + c) * dc, dr, dc, 1, 1, T);      \
        }                                                                                                     \
    }
LEGACY_TILES(q4_0, T_Q4_0)
LEGACY_TILES(q4_1, T_Q4_1)
LEGACY_TILES(q8_0, T_Q8_0)
LEGACY_TILES(q5_0, T_Q5_0)
LEGACY_TILES(q5_1, T_Q5_1)
#undef LEGACY_TILES
