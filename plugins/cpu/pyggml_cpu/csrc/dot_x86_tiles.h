/* Prompt tiles of the legacy types (pgc_q_tiles_fn), included by dot_x86.h: LT_R weight rows x LT_C activation
   columns per pass, each weight block unpacked once for the columns and each activation block's offset product
   once for the rows. Every output keeps legacy_rows's operations, hence its bits. LT_R is 4 where the build has 32
   vector registers (the AVX-512 ones: 16 accumulators), else 2. (Two rows per zmm register, each instruction
   doing the work of two, measured no faster: 0.95-1.05x.) */
#if defined(__AVX512F__)
#define LT_R 4
#else
#define LT_R 2
#endif
#define LT_C 4

AINLINE void legacy_tile(int64_t n, const char *x, size_t bx, const char *const *ys, char *d, size_t dr, size_t dc,
                         const int R, const int C, const int T) {
    const size_t xs = T == T_Q4_0 ? sizeof(bq4_0) : T == T_Q4_1 ? sizeof(bq4_1) : T == T_Q5_0 ? sizeof(bq5_0)
                    : T == T_Q5_1 ? sizeof(bq5_1) : sizeof(bq8_0);
    const size_t ys_blk = T == T_Q4_1 || T == T_Q5_1 ? sizeof(bq8_1) : sizeof(bq8_0);
    const int q8_1 = T == T_Q4_1 || T == T_Q5_1;
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

#define LEGACY_TILES(t, T)                                                                                    \
    static void XSFX(lt_##t)(int64_t n, const void *vx, size_t bx, int64_t nr, const void *vy, size_t by,       \
                             int64_t nc, char *d, size_t dr, size_t dc) {                                     \
        const char *x = (const char *)vx;                                                                     \
        for (int64_t c0 = 0; c0 < nc; c0 += LT_C) {                                                           \
            const char *ys[LT_C];                                                                             \
            const int C = nc - c0 < LT_C ? (int)(nc - c0) : LT_C;                                             \
            for (int c = 0; c < C; c++) ys[c] = (const char *)vy + (c0 + c) * by;                             \
            int64_t r = 0;                                                                                    \
            if (C == LT_C)                                                                                    \
                for (; r + LT_R <= nr; r += LT_R)                                                             \
                    legacy_tile(n, x + r * bx, bx, ys, d + r * dr + c0 * dc, dr, dc, LT_R, LT_C, T);          \
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
