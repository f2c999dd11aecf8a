/* x86 F16 kernels of the mat-vec path (one activation column against F16 weights), AVX2 + FMA + F16C: the
   activations' rounding to F16 and ggml_vec_dot_f16's order over several weight rows per pass. Included by
   dot_avx2.c after dot_x86.h (XSFX, ld_f16x8); dot_avx512.c takes f16_ggml_finish for its 512-bit rows. */

/* the portable round_f16 with F16C, eight values at a time (same bits: both round to nearest even, and a NaN
   keeps its sign and top payload bits with the quiet bit set) */
static void XSFX(round_f16)(float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++) x[i] = pgc_fp16_to_fp32(pgc_fp32_to_fp16(x[i]));
}

/* the mat-vec rows are prefetched this many bytes ahead of their loads */
#define F16_PREFETCH 512

/* ggml_vec_dot_f16's end of a row (dot_impl.h's dot_f16_ggml): v = (a0 + a2) + (a1 + a3) of its four 8-lane
   accumulators over the first np values, lanes l and l + 4 added, two horizontal adds, the n % 32 tail in double */
static inline float f16_ggml_tail(float sum, int64_t np, int64_t n, const uint16_t *x, const float *y) {
    double s = sum;
    for (int64_t i = np; i < n; i++) s += (double)(_cvtsh_ss(x[i]) * y[i]);
    return (float)s;
}
static inline float f16_ggml_finish(__m256 v, int64_t np, int64_t n, const uint16_t *x, const float *y) {
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)), t1 = _mm_hadd_ps(t0, t0);
    return f16_ggml_tail(_mm_cvtss_f32(_mm_hadd_ps(t1, t1)), np, n, x, y);
}
/* the same adds for eight rows at once, row r's sum (its tail apart) in lane r: lanes l + (l + 4) (halves_x8),
   then two rounds of horizontal adds of adjacent lanes */
static inline __m256 f16_ggml_finish8(const __m256 v[8]) {
    __m256 u[4];
    halves_x8(v, u);
    return in_order_x8(_mm256_hadd_ps(_mm256_hadd_ps(u[0], u[1]), _mm256_hadd_ps(u[2], u[3])));
}

/* R rows (bx bytes apart) in one pass, row r's dot to d + r * dd: each activation vector loaded once for the R
   rows, 4R independent FMA chains, each row read F16_PREFETCH bytes ahead; a row's bits are those of R = 1 */
static inline __attribute__((always_inline)) void f16_ggml_rows_ymm(int64_t n, const uint16_t *x, size_t bx,
                                                                    const float *y, char *d, size_t dd, const int R) {
    const int64_t np = n & ~(int64_t)31;
    if (np == 0) { /* rows shorter than 32: the tail alone */
        for (int r = 0; r < R; r++)
            *(float *)(d + r * dd) = f16_ggml_tail(0.0f, 0, n, (const uint16_t *)((const char *)x + r * bx), y);
        return;
    }
    __m256 acc[3][4];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < 4; j++) acc[r][j] = _mm256_setzero_ps();
    int64_t i = 0;
    do { /* a loop that runs at least once: GCC keeps the accumulators in registers (a loop that might not run
            had them stored to the stack and loaded back around it, which cost short rows 2x) */
        for (int j = 0; j < 4; j++) {
            if (j == 0) /* measured: 1.05x from L2 */
                for (int r = 0; r < R; r++) _mm_prefetch((const char *)x + r * bx + 2 * i + F16_PREFETCH, _MM_HINT_T0);
            const __m256 yv = _mm256_loadu_ps(y + i + 8 * j);
            for (int r = 0; r < R; r++)
                acc[r][j] = _mm256_fmadd_ps(ld_f16x8((const uint16_t *)((const char *)x + r * bx) + i + 8 * j), yv,
                                            acc[r][j]);
        }
        i += 32;
    } while (i < np);
    __m256 v[3]; /* first, in a loop that unrolls (the ends' loop has the tail's loop in it) */
    for (int r = 0; r < R; r++)
        v[r] = _mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][2]), _mm256_add_ps(acc[r][1], acc[r][3]));
    for (int r = 0; r < R; r++)
        *(float *)(d + r * dd) = f16_ggml_finish(v[r], np, n, (const uint16_t *)((const char *)x + r * bx), y);
}

static float XSFX(f16_ggml_one)(int64_t n, const uint16_t *x, const float *y) {
    float s;
    f16_ggml_rows_ymm(n, x, 0, y, (char *)&s, 0, 1);
    return s;
}

/* three rows per pass: 12 accumulators, the activation vector and a weight vector in the 16 ymm registers; the
   columns one after another */
static void XSFX(f16_ggml_tiles)(int64_t n, const uint16_t *x, size_t bx, int64_t nr, const float *y, size_t by,
                                 int64_t nc, char *d, size_t dr, size_t dc) {
    for (int64_t c = 0; c < nc; c++, y = (const float *)((const char *)y + by), d += dc) {
        int64_t r = 0;
        for (; r + 3 <= nr; r += 3)
            f16_ggml_rows_ymm(n, (const uint16_t *)((const char *)x + r * bx), bx, y, d + r * dr, dr, 3);
        const uint16_t *xr = (const uint16_t *)((const char *)x + r * bx);
        if (nr - r == 2) f16_ggml_rows_ymm(n, xr, bx, y, d + r * dr, dr, 2);
        if (nr - r == 1) f16_ggml_rows_ymm(n, xr, bx, y, d + r * dr, dr, 1);
    }
}

static void XSFX(register_x86_f16)(pgc_simd *s) {
    s->round_f16 = XSFX(round_f16);
    s->dot_f16_ggml = XSFX(f16_ggml_one);
    s->dot_f16_ggml_tiles = XSFX(f16_ggml_tiles);
}
