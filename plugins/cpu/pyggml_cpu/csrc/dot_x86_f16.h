/* x86 F16 kernels of the mat-vec path (one activation column against F16 weights), AVX2 + FMA + F16C: the
   activations' rounding to F16 and ggml_vec_dot_f16's order over several weight rows per pass. Included by
   dot_avx2.c after dot_x86.h (XSFX, ld_f16x8); dot_avx512.c takes f16_ggml_finish and the tiles driver
   (f16_ggml_tiles_drive) for its 512-bit rows. */

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
   rows, 4R independent FMA chains, each row read F16_PREFETCH bytes ahead; a row's bits are those of R = 1. X32: the
   rows are floats (F16 rows converted once for several columns: the same products), of whole 32-value steps. CARRY:
   the 32-value steps [i0, i1) only, the accumulators loaded from `st` (zeros before the first pass) and left there
   while i1 is short of the steps' end: the same sums in the same order (dot_avx512.c's f16_ggml_rows_zmm) */
static inline __attribute__((always_inline)) void f16_ggml_rows_ymm(int64_t n, const uint16_t *x, size_t bx,
                                                                    const float *y, char *d, size_t dd, int64_t i0,
                                                                    int64_t i1, __m256 *st, const int R,
                                                                    const int X32, const int CARRY) {
    const int64_t np = n & ~(int64_t)31;
    if (np == 0) { /* rows shorter than 32: the tail alone */
        for (int r = 0; r < R; r++)
            *(float *)(d + r * dd) = f16_ggml_tail(0.0f, 0, n, (const uint16_t *)((const char *)x + r * bx), y);
        return;
    }
    __m256 acc[3][4];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < 4; j++) acc[r][j] = CARRY ? st[4 * r + j] : _mm256_setzero_ps();
    int64_t i = i0;
    do { /* a loop that runs at least once: GCC keeps the accumulators in registers (a loop that might not run
            had them stored to the stack and loaded back around it, which cost short rows 2x) */
        for (int j = 0; j < 4; j++) {
            if (j == 0 && !X32) /* measured: 1.05x from L2 */
                for (int r = 0; r < R; r++) _mm_prefetch((const char *)x + r * bx + 2 * i + F16_PREFETCH, _MM_HINT_T0);
            const __m256 yv = _mm256_loadu_ps(y + i + 8 * j);
            for (int r = 0; r < R; r++) {
                const char *xr = (const char *)x + r * bx;
                const __m256 xv = X32 ? _mm256_loadu_ps((const float *)xr + i + 8 * j)
                                      : ld_f16x8((const uint16_t *)xr + i + 8 * j);
                acc[r][j] = _mm256_fmadd_ps(xv, yv, acc[r][j]);
            }
        }
        i += 32;
    } while (i < i1);
    if (CARRY && i1 < np) {
        for (int r = 0; r < R; r++)
            for (int j = 0; j < 4; j++) st[4 * r + j] = acc[r][j];
        return;
    }
    __m256 v[3]; /* first, in a loop that unrolls (the ends' loop has the tail's loop in it) */
    for (int r = 0; r < R; r++)
        v[r] = _mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][2]), _mm256_add_ps(acc[r][1], acc[r][3]));
    for (int r = 0; r < R; r++) /* X32 rows have no tail (np == n) */
        *(float *)(d + r * dd) = f16_ggml_finish(v[r], np, n, (const uint16_t *)((const char *)x + r * bx), y);
}

static float XSFX(f16_ggml_one)(int64_t n, const uint16_t *x, const float *y) {
    float s;
    f16_ggml_rows_ymm(n, x, 0, y, (char *)&s, 0, 0, n & ~(int64_t)31, NULL, 1, 0, 0);
    return s;
}

/* The F16 mat-vec tiles of a level (dot_f16_ggml_tiles) over its row kernel (`rows`: R rows, 1..RB, in one pass;
   its X32 and CARRY instances as f16_ggml_rows_ymm's). One column: the rows one pass after another. Several columns
   (decode attention's query heads, which share their K rows): short rows of whole 32-value steps are converted to
   floats (`to_f32`) once for all the columns (exact: the same products); long ones (V transposed: a row per value
   channel, n_kv long) are taken F16_CHUNK values at a time by up to F16_CHUNK_COLS columns, so that the rows' chunk
   stays in L1 for all of them (their accumulators carried between chunks in `st`, st_col bytes a column: the same
   bits). */
#define F16_SHORT_ROW 256
#define F16_CHUNK 256
#define F16_CHUNK_COLS 8
#define F16_MAX_RB 8
typedef void (*f16_rows_fn)(int64_t n, const uint16_t *x, size_t bx, const float *y, char *d, size_t dd, int64_t i0,
                            int64_t i1, void *st, int R);
static inline __attribute__((always_inline)) void f16_ggml_tiles_drive(
    int64_t n, const uint16_t *x, size_t bx, int64_t nr, const float *y, size_t by, int64_t nc, char *d, size_t dr,
    size_t dc, const int RB, f16_rows_fn rows, f16_rows_fn rows_x32, f16_rows_fn rows_carry,
    void (*to_f32)(const uint16_t *x, float *y, int64_t n), char *st, size_t st_col) {
    const int convert = nc > 1 && n <= F16_SHORT_ROW && n % 32 == 0;
    const int64_t np = n & ~(int64_t)31, chunk = nc > 1 && np > F16_CHUNK ? F16_CHUNK : np;
    float xs[F16_MAX_RB * F16_SHORT_ROW];
    for (int64_t r = 0; r < nr; r += RB) {
        const int R = nr - r < RB ? (int)(nr - r) : RB;
        const uint16_t *xr = (const uint16_t *)((const char *)x + r * bx);
        if (convert) {
            for (int k = 0; k < R; k++) to_f32((const uint16_t *)((const char *)xr + k * bx), xs + k * n, n);
            for (int64_t c = 0; c < nc; c++)
                rows_x32(n, (const uint16_t *)(const void *)xs, (size_t)n * sizeof(float),
                         (const float *)((const char *)y + c * by), d + r * dr + c * dc, dr, 0, np, NULL, R);
            continue;
        }
        if (chunk == np) { /* one pass */
            for (int64_t c = 0; c < nc; c++)
                rows(n, xr, bx, (const float *)((const char *)y + c * by), d + r * dr + c * dc, dr, 0, np, NULL, R);
            continue;
        }
        for (int64_t c0 = 0; c0 < nc; c0 += F16_CHUNK_COLS) {
            const int64_t c1 = nc - c0 < F16_CHUNK_COLS ? nc : c0 + F16_CHUNK_COLS;
            memset(st, 0, st_col * F16_CHUNK_COLS);
            for (int64_t i0 = 0; i0 < np;) {
                const int64_t i1 = np - i0 < 2 * chunk ? np : i0 + chunk; /* no short last chunk */
                for (int64_t c = c0; c < c1; c++)
                    rows_carry(n, xr, bx, (const float *)((const char *)y + c * by), d + r * dr + c * dc, dr, i0, i1,
                               st + (size_t)(c - c0) * st_col, R);
                i0 = i1;
            }
        }
    }
}

/* f16_ggml_rows_ymm of R (1-3) rows, the instance (X32, CARRY) a constant */
#define F16_YMM_ROWS(NAME, X32, CARRY)                                                                                 \
    static void XSFX(NAME)(int64_t n, const uint16_t *x, size_t bx, const float *y, char *d, size_t dd, int64_t i0,   \
                           int64_t i1, void *st, int R) {                                                              \
        switch (R) {                                                                                                   \
        case 3: f16_ggml_rows_ymm(n, x, bx, y, d, dd, i0, i1, (__m256 *)st, 3, X32, CARRY); break;                    \
        case 2: f16_ggml_rows_ymm(n, x, bx, y, d, dd, i0, i1, (__m256 *)st, 2, X32, CARRY); break;                    \
        default: f16_ggml_rows_ymm(n, x, bx, y, d, dd, i0, i1, (__m256 *)st, 1, X32, CARRY); break;                   \
        }                                                                                                              \
    }
F16_YMM_ROWS(f16_ggml_rows, 0, 0)
F16_YMM_ROWS(f16_ggml_rows_x32, 1, 0)
F16_YMM_ROWS(f16_ggml_rows_carry, 0, 1)
#undef F16_YMM_ROWS

static void XSFX(f16_to_f32)(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 8) _mm256_storeu_ps(y + i, ld_f16x8(x + i));
}

/* three rows per pass: 12 accumulators, the activation vector and a weight vector in the 16 ymm registers */
static void XSFX(f16_ggml_tiles)(int64_t n, const uint16_t *x, size_t bx, int64_t nr, const float *y, size_t by,
                                 int64_t nc, char *d, size_t dr, size_t dc) {
    __m256 st[F16_CHUNK_COLS][12];
    f16_ggml_tiles_drive(n, x, bx, nr, y, by, nc, d, dr, dc, 3, XSFX(f16_ggml_rows), XSFX(f16_ggml_rows_x32),
                         XSFX(f16_ggml_rows_carry), XSFX(f16_to_f32), (char *)st, sizeof st[0]);
}

static void XSFX(register_x86_f16)(pgc_simd *s) {
    s->round_f16 = XSFX(round_f16);
    s->dot_f16_ggml = XSFX(f16_ggml_one);
    s->dot_f16_ggml_tiles = XSFX(f16_ggml_tiles);
}
