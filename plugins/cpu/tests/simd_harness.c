/* Every SIMD kernel level this CPU has (x86-64: AVX2 .. AVX-512 + VNNI; arm64: NEON, NEON + SDOT) against the
   portable kernels, on random rows. Built from the extension's own C sources with the wheel's flags by
   test_cpu_simd_harness.py (natively, and for arm64 with a cross compiler, run under qemu-user).

   Two kinds of data:
   - exact: weight blocks of random bytes (every bit pattern of quants, scales, masks) with power-of-two block
     scales, and small activations, so every partial sum is an integer times one power of two that a float holds
     exactly: any summation order gives the same bits, and a level must match the portable kernel bit for bit.
     This checks all the integer work (unpacking, scales, mins, block sums) exactly.
   - real: rows quantised from Gaussian floats; results within 2e-5 of the sum of |w| |a| (float accumulation
     order differs), and bit for bit for the K-quants on the levels that promise it (NEON).
   The two-column (vec_dot2) and row-blocked (vec_dotr) entries are checked the same way, column by column and
   row by row, and must also give the one-column entry's bits (a matmul's numbers do not depend on its tiling).
   Output: one line per failure, then "checked: ..." and "skipped: ..."; exit status 1 on any failure. */
#include <stdio.h>
#include <stdlib.h>

#include "api.h"
#include "pgc.h"
#include "quants.h"

#define MAX_N (QKK * 8)
#define ROWS 12
/* F16 tiles are checked up to TILE_MAX rows x columns: past the 4 x 8 (AVX-512) and 4 x 3 (AVX2) register tiles,
   with every remainder */
#define TILE_MAX 10

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static int rnd_in(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }
static float gauss(void) {
    float s = 0.0f; /* Irwin-Hall: close enough to a normal for test data */
    for (int k = 0; k < 12; k++) s += (float)(rnd() & 0xFFFF) / 65536.0f;
    return s - 6.0f;
}

static const int QTYPES[] = {T_Q4_0, T_Q4_1, T_Q5_0, T_Q5_1, T_Q8_0, T_Q2_K, T_Q3_K, T_Q4_K, T_Q5_K, T_Q6_K};
#define NQ ((int)(sizeof(QTYPES) / sizeof(QTYPES[0])))

static const char *tname(int t) {
    switch (t) {
    case T_F32: return "f32"; case T_F16: return "f16"; case T_BF16: return "bf16";
    case T_Q4_0: return "q4_0"; case T_Q4_1: return "q4_1"; case T_Q5_0: return "q5_0"; case T_Q5_1: return "q5_1";
    case T_Q8_0: return "q8_0"; case T_Q2_K: return "q2_K"; case T_Q3_K: return "q3_K"; case T_Q4_K: return "q4_K";
    case T_Q5_K: return "q5_K"; case T_Q6_K: return "q6_K"; default: return "?";
    }
}

static const char *level_name(int level) {
    static const char *names[] = {"portable", "avx2", "avx2+vnni", "avx512", "avx512+vnni", "neon", "neon+dotprod"};
    return level >= 0 && level <= 6 ? names[level] : "?";
}

static pgc_simd port; /* the portable table */
static int failures = 0;

static void put16(void *p, float v) {
    uint16_t h = pgc_fp32_to_fp16(v);
    memcpy(p, &h, 2);
}

/* ---- data ------------------------------------------------------------------------------------------------ */

/* a weight row of random bytes whose fp16 scales (and mins) are the power of two `d` */
static void exact_weights(int t, uint8_t *row, int64_t n, float d) {
    const int bs = pgc_blck_size(t), ts = pgc_type_size(t);
    for (int64_t b = 0; b < n / bs; b++) {
        uint8_t *p = row + b * ts;
        for (int k = 0; k < ts; k++) p[k] = (uint8_t)rnd();
        switch (t) {
        case T_Q4_0: put16(&((bq4_0 *)p)->d, d); break;
        case T_Q4_1: put16(&((bq4_1 *)p)->d, d); put16(&((bq4_1 *)p)->m, d / 2); break;
        case T_Q5_0: put16(&((bq5_0 *)p)->d, d); break;
        case T_Q5_1: put16(&((bq5_1 *)p)->d, d); put16(&((bq5_1 *)p)->m, d * 2); break;
        case T_Q8_0: put16(&((bq8_0 *)p)->d, d); break;
        case T_Q2_K: put16(&((bq2_K *)p)->d, d); put16(&((bq2_K *)p)->dmin, d / 4); break;
        case T_Q3_K: put16(&((bq3_K *)p)->d, d); break;
        case T_Q4_K: put16(&((bq4_K *)p)->d, d); put16(&((bq4_K *)p)->dmin, d * 2); break;
        case T_Q5_K: put16(&((bq5_K *)p)->d, d); put16(&((bq5_K *)p)->dmin, d / 2); break;
        case T_Q6_K: put16(&((bq6_K *)p)->d, d); break;
        default: break;
        }
    }
}

/* an activation row of the dot partner type with values in [-2, 2] and scale d (block sums consistent) */
static void exact_acts(int pt, uint8_t *row, int64_t n, float d) {
    if (pt == T_Q8_K) {
        bq8_K *y = (bq8_K *)row;
        for (int64_t b = 0; b < n / QKK; b++) {
            y[b].d = d;
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int l = 0; l < 16; l++) s += y[b].qs[16 * g + l] = (int8_t)rnd_in(-2, 2);
                y[b].bsums[g] = (int16_t)s;
            }
        }
        return;
    }
    for (int64_t b = 0; b < n / QK; b++) {
        int s = 0;
        int8_t *qs = pt == T_Q8_0 ? ((bq8_0 *)row)[b].qs : ((bq8_1 *)row)[b].qs;
        for (int l = 0; l < QK; l++) s += qs[l] = (int8_t)rnd_in(-2, 2);
        if (pt == T_Q8_0) {
            put16(&((bq8_0 *)row)[b].d, d);
        } else {
            put16(&((bq8_1 *)row)[b].d, d);
            put16(&((bq8_1 *)row)[b].s, d * (float)s);
        }
    }
}

static void gauss_row(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = gauss();
}

/* ---- comparison ------------------------------------------------------------------------------------------- */

static int same_bits(float a, float b) { return memcmp(&a, &b, 4) == 0; }

static void check(const char *level, const char *what, int exact, float got, float want, double scale) {
    const int ok = exact ? same_bits(got, want) : fabs((double)got - (double)want) <= 2e-5 * scale + 1e-30;
    if (ok && got == got) return;
    failures++;
    if (failures <= 40)
        printf("FAIL %s %s: got %.9g want %.9g (%s)\n", level, what, got, want, exact ? "bit-exact" : "tolerance");
}

/* one quantised type on the level now in pgc_S: `bitexact_real` also demands identical bits on real data */
static void check_quant(const char *level, int t, int bitexact_real) {
    static uint8_t w[PGC_DOTR_ROWS][MAX_N * 2], a0[MAX_N * 2], a1[MAX_N * 2];
    static float wf[MAX_N], af0[MAX_N], af1[MAX_N], deq[MAX_N];
    const int pt = pgc_vec_dot_type(t), bs = pgc_blck_size(t);
    const int64_t sizes[3] = {bs, 2 * bs, bs == QK ? 33 * QK : 5 * QKK};
    const size_t bx = sizeof(w[0]);
    char what[80];
    for (int mode = 0; mode < 2; mode++)
        for (int it = 0; it < ROWS; it++) {
            const int64_t n = sizes[it % 3];
            double scale[PGC_DOTR_ROWS] = {0};
            if (mode == 0) {
                const float ds[3] = {0.5f, 1.0f, 2.0f};
                for (int r = 0; r < PGC_DOTR_ROWS; r++) exact_weights(t, w[r], n, ds[(it + r) % 3]);
                exact_acts(pt, a0, n, 0.25f);
                exact_acts(pt, a1, n, 0.5f);
            } else {
                gauss_row(af0, n);
                gauss_row(af1, n);
                port.quantize[pt](af0, a0, n);
                port.quantize[pt](af1, a1, n);
                for (int r = 0; r < PGC_DOTR_ROWS; r++) {
                    gauss_row(wf, n);
                    port.quantize[t](wf, w[r], n);
                    pgc_dequant_row(t, w[r], deq, n);
                    for (int64_t i = 0; i < n; i++)
                        scale[r] += fabs((double)deq[i]) * (fabs((double)af0[i]) + fabs((double)af1[i]));
                }
            }
            if (pgc_S.dequant[t]) /* the level's blocks -> floats give the portable dequantisation's bits */
                for (int r = 0; r < PGC_DOTR_ROWS; r++) {
                    static float want_deq[MAX_N], got_deq[MAX_N];
                    pgc_dequant_row(t, w[r], want_deq, n);
                    pgc_S.dequant[t](w[r], got_deq, n);
                    snprintf(what, sizeof what, "%s dequantised n=%lld %s", tname(t), (long long)n,
                             mode ? "real" : "exact");
                    for (int64_t i = 0; i < n; i++) check(level, what, 1, got_deq[i], want_deq[i], 0.0);
                }
            const int exact = mode == 0 || bitexact_real;
            const char *m = mode ? "real" : "exact";
            float want[PGC_DOTR_ROWS], want1, got, out[PGC_DOTR_ROWS];
            for (int r = 0; r < PGC_DOTR_ROWS; r++) port.vec_dot[t](n, &want[r], w[r], a0);
            port.vec_dot[t](n, &want1, w[0], a1);
            pgc_S.vec_dot[t](n, &got, w[0], a0);
            snprintf(what, sizeof what, "%s n=%lld %s", tname(t), (long long)n, m);
            check(level, what, exact, got, want[0], scale[0]);
            /* a dot's value must not depend on the kernel the matmul picks: the two-column and row-blocked
               entries give the one-column entry's bits */
            if (pgc_S.vec_dot2[t]) {
                float one;
                pgc_S.vec_dot2[t](n, out, w[0], a0, a1);
                snprintf(what, sizeof what, "%s two-column n=%lld %s", tname(t), (long long)n, m);
                check(level, what, exact, out[0], want[0], scale[0]);
                check(level, what, exact, out[1], want1, scale[0]);
                check(level, what, 1, out[0], got, 0.0);
                pgc_S.vec_dot[t](n, &one, w[0], a1);
                check(level, what, 1, out[1], one, 0.0);
            }
            if (pgc_S.vec_dotr[t]) {
                pgc_S.vec_dotr[t](n, out, w[0], bx, a0);
                for (int r = 0; r < PGC_DOTR_ROWS; r++) {
                    float one;
                    pgc_S.vec_dot[t](n, &one, w[r], a0);
                    snprintf(what, sizeof what, "%s row-blocked row %d n=%lld %s", tname(t), r, (long long)n, m);
                    check(level, what, exact, out[r], want[r], scale[r]);
                    check(level, what, 1, out[r], one, 0.0);
                }
            }
        }
}

static void check_floats(const char *level) {
    static float x[1000], y[1000];
    static uint16_t h[1000], b[1000];
    char what[64];
    for (int mode = 0; mode < 2; mode++)
        for (int r = 0; r < ROWS; r++) {
            const int64_t n = r % 2 ? 1000 : 35;
            double scale = 0.0;
            for (int64_t i = 0; i < n; i++) {
                x[i] = mode ? gauss() : (float)rnd_in(-8, 8); /* small integers: every order sums exactly */
                y[i] = mode ? gauss() : (float)rnd_in(-8, 8);
                h[i] = pgc_fp32_to_fp16(x[i]);
                b[i] = pgc_fp32_to_bf16(x[i]);
                scale += fabs((double)x[i] * y[i]) * 1.01;
            }
            snprintf(what, sizeof what, "n=%lld %s", (long long)n, mode ? "real" : "exact");
            char full[96];
            snprintf(full, sizeof full, "f32 %s", what);
            check(level, full, mode == 0, pgc_S.dot_f32(n, x, y), port.dot_f32(n, x, y), scale);
            snprintf(full, sizeof full, "f16 %s", what);
            check(level, full, mode == 0, pgc_S.dot_f16(n, h, y), port.dot_f16(n, h, y), scale);
            snprintf(full, sizeof full, "bf16 %s", what);
            check(level, full, mode == 0, pgc_S.dot_bf16(n, b, y), port.dot_bf16(n, b, y), scale);
            /* ggml's F16 matmul orders: one fixed sequence of fmaf and adds, so bit for bit on real data too; the
               tinyBLAS rows (n % 8 == 0, rows 8 values apart) against the portable kernel one row at a time */
            snprintf(full, sizeof full, "f16 ggml order %s", what);
            check(level, full, 1, pgc_S.dot_f16_ggml(n, h, y), port.dot_f16_ggml(n, h, y), scale);
            /* rows 8 halves and columns 8 floats apart (overlapping: their values were drawn above); n8 leaves room
               for the last ones within the arrays */
            const int64_t n8 = (n > 8 * TILE_MAX ? n - 8 * TILE_MAX : n) & ~(int64_t)7;
            for (int rows = 1; rows <= TILE_MAX; rows++)
                for (int cols = 1; cols <= TILE_MAX; cols++) {
                    float got[TILE_MAX][TILE_MAX], want;
                    pgc_S.dot_f16_tiles(n8, h, 16, rows, y, 32, cols, (char *)got, sizeof(float),
                                        sizeof(got[0]));
                    for (int c = 0; c < cols; c++)
                        for (int k = 0; k < rows; k++) {
                            port.dot_f16_tiles(n8, h + 8 * k, 16, 1, y + 8 * c, 32, 1, (char *)&want, 4, 4);
                            snprintf(full, sizeof full, "f16 tiles row %d col %d of %dx%d n=%lld %s", k, c, rows,
                                     cols, (long long)n8, mode ? "real" : "exact");
                            check(level, full, 1, got[c][k], want, scale);
                        }
                }
        }
}

/* The F16 mat-vec path: the ggml-order tiles kernel (several weight rows per pass; several columns: decode
   attention's query heads, short rows converted once for them) gives dot_f16_ggml's portable bits output by
   output, for every row count past the levels' blocks (3 rows AVX2, 8 AVX-512), 1, 3 and 9 columns, every n % 32
   and row strides that are not a multiple of the vector width, and stores only its outputs; the activations'
   rounding to F16 gives the portable bits on every halfway point between halves, their neighbours, specials and
   random floats. */
#define F16_ROWS_MAX 19
#define F16_COLS_MAX 9
static void check_f16_mat_vec(const char *level) {
    static const int64_t ns[] = {1, 7, 8, 31, 32, 33, 63, 64, 65, 100, 128, 257, 300, 543, 800, 1100};
    static const int64_t ncs[] = {1, 3, F16_COLS_MAX};
    static uint16_t h[F16_ROWS_MAX * 1110]; /* n + 10 halves apart at most */
    static float y[F16_COLS_MAX * 1100], got[F16_COLS_MAX][2 * F16_ROWS_MAX + 2];
    char what[112];
    for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
        const int64_t n = ns[k], stride = n + (int64_t)(k % 3) * 5; /* halves between rows */
        for (int64_t i = 0; i < F16_ROWS_MAX * stride; i++) h[i] = pgc_fp32_to_fp16(gauss());
        for (int64_t i = 0; i < F16_COLS_MAX * n; i++) y[i] = pgc_fp16_to_fp32(pgc_fp32_to_fp16(gauss()));
        for (size_t j = 0; j < sizeof(ncs) / sizeof(ncs[0]); j++)
            for (int nr = 1; nr <= F16_ROWS_MAX; nr++) {
                const int64_t nc = ncs[j];
                for (int c = 0; c < F16_COLS_MAX; c++)
                    for (int i = 0; i < 2 * F16_ROWS_MAX + 2; i++) got[c][i] = -7.0f;
                pgc_S.dot_f16_ggml_tiles(n, h, (size_t)stride * 2, nr, y, (size_t)n * sizeof(float), nc,
                                         (char *)got, 2 * sizeof(float), sizeof got[0]);
                for (int c = 0; c < F16_COLS_MAX; c++) {
                    for (int r = 0; r < nr; r++) {
                        snprintf(what, sizeof what, "f16 ggml order tiles: row %d of %d, column %d of %lld, n=%lld",
                                 r, nr, c, (long long)nc, (long long)n);
                        if (c < nc) {
                            const float want = port.dot_f16_ggml(n, h + r * stride, y + c * n);
                            check(level, what, 1, got[c][2 * r], want, 0.0);
                            check(level, what, 1, pgc_S.dot_f16_ggml(n, h + r * stride, y + c * n), want, 0.0);
                        } else {
                            check(level, "f16 ggml order tiles: store past the last column", 1, got[c][2 * r], -7.0f,
                                  0.0);
                        }
                        check(level, "f16 ggml order tiles: store between outputs", 1, got[c][2 * r + 1], -7.0f, 0.0);
                    }
                    check(level, "f16 ggml order tiles: store past the last row", 1, got[c][2 * nr], -7.0f, 0.0);
                }
            }
    }
    static float a[4 * 0x7c00 + 64], b[4 * 0x7c00 + 64], c[4 * 0x7c00 + 64];
    int64_t m = 0;
    for (uint32_t u = 0; u < 0x7c00; u++) { /* each positive finite half: the float halfway to the next, +- 1 ulp */
        const float lo = pgc_fp16_to_fp32((uint16_t)u), hi = pgc_fp16_to_fp32((uint16_t)(u + 1));
        float mid = lo + (hi - lo) * 0.5f;
        uint32_t bits;
        memcpy(&bits, &mid, 4);
        for (int d = -1; d <= 1; d++) {
            const uint32_t v = bits + (uint32_t)d;
            memcpy(&a[m++], &v, 4);
        }
        a[m++] = u & 1 ? -mid : lo;
    }
    const uint32_t special[] = {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fbfe000u,
                                0x477ff000u, 0x477fefffu, 0x477fffffu, 0x7f7fffffu, 0x00000001u, 0x80000000u,
                                0x33000000u, 0x33000001u, 0xb3800000u};
    for (size_t k = 0; k < sizeof(special) / sizeof(special[0]); k++) memcpy(&a[m++], &special[k], 4);
    for (int k = 0; k < 45; k++) a[m++] = gauss() * 3000.0f;
    memcpy(b, a, (size_t)m * sizeof(float));
    memcpy(c, a, (size_t)m * sizeof(float));
    pgc_S.round_f16(a, m);
    port.round_f16(b, m);
    for (int64_t i = 0; i < m; i++)
        if (memcmp(&a[i], &b[i], 4)) {
            uint32_t in, ua, ub;
            memcpy(&in, &c[i], 4);
            memcpy(&ua, &a[i], 4);
            memcpy(&ub, &b[i], 4);
            if (++failures <= 40) printf("FAIL %s round_f16 of 0x%08x: got 0x%08x want 0x%08x\n", level, in, ua, ub);
        }
}

int main(void) {
    const int features = pgc_cpu_features();
    pgc_set_simd_level(0);
    port = pgc_S;
    printf("features: 0x%x\n", features);
    char checked[256] = "", skipped[256] = "";
    for (int level = 1; level <= 6; level++) {
        const char *name = level_name(level);
        if (pgc_set_simd_level(level) != level) {
            strcat(skipped, " ");
            strcat(skipped, name);
            continue;
        }
        /* the level must bring its own kernel for every dot product, or it is not what it claims */
        int own = pgc_S.dot_f32 != port.dot_f32 && pgc_S.dot_f16 != port.dot_f16 && pgc_S.dot_bf16 != port.dot_bf16;
        for (int k = 0; k < NQ; k++) own = own && pgc_S.vec_dot[QTYPES[k]] != port.vec_dot[QTYPES[k]];
        if (!own) {
            failures++;
            printf("FAIL %s: some dot products are still the portable ones\n", name);
        }
        const int neon = level >= 5;
        for (int k = 0; k < NQ; k++) {
            const int t = QTYPES[k];
            check_quant(name, t, neon && pgc_blck_size(t) == QKK);
        }
        check_floats(name);
        check_f16_mat_vec(name);
        strcat(checked, " ");
        strcat(checked, name);
    }
    pgc_set_simd_level(-1);
    printf("best: %s\nchecked:%s\nskipped:%s\n", level_name(pgc_simd_level()), checked, skipped);
    printf("%s\n", failures ? "FAILED" : "OK");
    return failures ? 1 : 0;
}
