/* The K-quants' prompt tiles for the plain layout (pgc_q_tiles_fn), included by dot_avx512.c: two weight rows at
   once, row a in the low half of each zmm register and row b in the high half, against C activation columns (each
   32-byte activation vector broadcast to both halves by its load). Each half runs the one-row block function's
   instructions for its row (dot_x86.h's q4_K_block, q6_K_block), so every output keeps the one-row bits, while
   each instruction does the work of two, and a weight block's values and scales are unpacked once for C columns. */

/* k_block_acc for both rows: acc[c] += (y[c].d * x.d) * sumi[c], each half with its row's d */
static inline __attribute__((always_inline)) void k_pair_acc(float da, float db, const bq8_K *const *y, int64_t i,
                                                             int C, const __m512i *sumi, __m512 *acc) {
    for (int c = 0; c < C; c++) {
        const float yd = (y[c] + i)->d;
        acc[c] = _mm512_fmadd_ps(zmm_of_ps(_mm256_set1_ps(yd * da), _mm256_set1_ps(yd * db)),
                                 _mm512_cvtepi32_ps(sumi[c]), acc[c]);
    }
}

static inline __attribute__((always_inline)) void q4_K_pair(int64_t n, const bq4_K *xa, const bq4_K *xb,
                                                            const bq8_K *const *y, const int C, float o[2][4]) {
    const __m512i m4 = _mm512_set1_epi8(0xF);
    __m512 acc[4];
    __m256 accm[4];
    for (int c = 0; c < C; c++) {
        acc[c] = _mm512_setzero_ps();
        accm[c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / QKK; i++) {
        const bq4_K *a = xa + i, *b = xb + i;
        __m256i sca, scb;
        __m128i mna, mnb;
        k4_scales_mins(a->scales, &sca, &mna);
        k4_scales_mins(b->scales, &scb, &mnb);
        const __m512i sc = zmm_of(sca, scb);
        const __m256i mn = _mm256_inserti128_si256(_mm256_castsi128_si256(mna), mnb, 1);
        const float dma = F16T(a->dmin), dmb = F16T(b->dmin);
        __m512i sumi[4];
        for (int c = 0; c < C; c++) { /* mins . (bsums summed in pairs), as q4_K_block */
            const bq8_K *yc = y[c] + i;
            const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)yc->bsums),
                                              _mm_loadu_si128((const __m128i *)(yc->bsums + 8)));
            const __m256 dm = _mm256_set_m128(_mm_set1_ps(yc->d * dmb), _mm_set1_ps(yc->d * dma));
            accm[c] = _mm256_fmadd_ps(dm, _mm256_cvtepi32_ps(_mm256_madd_epi16(mn, _mm256_broadcastsi128_si256(bs))),
                                      accm[c]);
            sumi[c] = _mm512_setzero_si512();
        }
        for (int k = 0; k < 4; k++) {
            const __m512i q4 = zmm_load2(a->qs + 32 * k, b->qs + 32 * k);
            const __m512i lo = _mm512_and_si512(q4, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q4, 4), m4);
            const __m512i s0 = _mm512_shuffle_epi8(sc, _mm512_broadcast_i64x4(k4_spread(2 * k)));
            const __m512i s1 = _mm512_shuffle_epi8(sc, _mm512_broadcast_i64x4(k4_spread(2 * k + 1)));
            for (int c = 0; c < C; c++) {
                const int8_t *q8 = (y[c] + i)->qs + 64 * k;
                const __m512i p0 = _mm512_maddubs_epi16(lo, bcast256(q8)), p1 = _mm512_maddubs_epi16(hi, bcast256(q8 + 32));
                sumi[c] = _mm512_add_epi32(sumi[c], _mm512_add_epi32(_mm512_madd_epi16(p0, s0), _mm512_madd_epi16(p1, s1)));
            }
        }
        k_pair_acc(F16T(a->d), F16T(b->d), y, i, C, sumi, acc);
    }
    for (int c = 0; c < C; c++) {
        o[0][c] = q4_K_finish(_mm512_castps512_ps256(acc[c]), _mm256_castps256_ps128(accm[c]));
        o[1][c] = q4_K_finish(zmm_high_ps(acc[c]), _mm256_extractf128_ps(accm[c], 1));
    }
}

static inline __attribute__((always_inline)) void q6_K_pair(int64_t n, const bq6_K *xa, const bq6_K *xb,
                                                            const bq8_K *const *y, const int C, float o[2][4]) {
    __m512 acc[4];
    for (int c = 0; c < C; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QKK; i++) {
        const bq6_K *a = xa + i, *b = xb + i;
        /* row a's 16 scales as int16 in the low 256 bits, row b's in the high ones */
        const __m512i sc16 = _mm512_cvtepi8_epi16(_mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a->scales)), _mm_loadu_si128((const __m128i *)b->scales), 1));
        __m512i sumi[4];
        for (int c = 0; c < C; c++) { /* the -32 offset, taken out once, as q6_K_block */
            const __m512i bias = _mm512_madd_epi16(sc16, bcast256((y[c] + i)->bsums));
            sumi[c] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(bias, 5));
        }
        for (int h = 0; h < 2; h++) {
            const __m512i l0 = zmm_load2(a->ql + 64 * h, b->ql + 64 * h);
            const __m512i l1 = zmm_load2(a->ql + 64 * h + 32, b->ql + 64 * h + 32);
            const __m512i qh = zmm_load2(a->qh + 32 * h, b->qh + 32 * h);
            /* each row's scales 8h..8h+7 in both 128-bit lanes of its half */
            const __m512i sc = h ? _mm512_shuffle_i64x2(sc16, sc16, 0xF5) : _mm512_shuffle_i64x2(sc16, sc16, 0xA0);
            __m512i q[4];
            q6_unpack_zmm(l0, l1, qh, q); /* as q6_K_block */
            for (int k = 0; k < 4; k++) {
                const __m512i sk = _mm512_shuffle_epi8(sc, _mm512_broadcast_i64x4(k6_spread(k)));
                for (int c = 0; c < C; c++) {
                    const __m512i p = _mm512_maddubs_epi16(q[k], bcast256((y[c] + i)->qs + 128 * h + 32 * k));
                    sumi[c] = _mm512_add_epi32(sumi[c], _mm512_madd_epi16(p, sk));
                }
            }
        }
        k_pair_acc(F16T(a->d), F16T(b->d), y, i, C, sumi, acc);
    }
    for (int c = 0; c < C; c++) {
        o[0][c] = k_sum_finish(_mm512_castps512_ps256(acc[c]), _mm_setzero_ps());
        o[1][c] = k_sum_finish(zmm_high_ps(acc[c]), _mm_setzero_ps());
    }
}

typedef void (*q_pair_fn)(int64_t n, const void *xa, const void *xb, const bq8_K *const *y, float o[2][4]);
typedef void (*q_row_fn)(int64_t n, float *s, const void *x, const void *y);

/* row pairs x up to four columns per pass; an odd last row by the one-row kernel */
static inline __attribute__((always_inline)) void k_tiles(int64_t n, const void *x, size_t bx, int64_t nr,
                                                          const void *y, size_t by, int64_t nc, char *d, size_t dr,
                                                          size_t dc, const q_pair_fn *pairs, q_row_fn row) {
    for (int64_t c0 = 0; c0 < nc; c0 += 4) {
        const int C = nc - c0 < 4 ? (int)(nc - c0) : 4;
        const bq8_K *ys[4];
        for (int c = 0; c < C; c++) ys[c] = (const bq8_K *)((const char *)y + (c0 + c) * by);
        char *dc0 = d + c0 * dc;
        int64_t r = 0;
        for (; r + 2 <= nr; r += 2) {
            float o[2][4];
            pairs[C](n, (const char *)x + r * bx, (const char *)x + (r + 1) * bx, ys, o);
            for (int c = 0; c < C; c++) {
                *(float *)(dc0 + r * dr + c * dc) = o[0][c];
                *(float *)(dc0 + (r + 1) * dr + c * dc) = o[1][c];
            }
        }
        for (; r < nr; r++)
            for (int c = 0; c < C; c++) row(n, (float *)(dc0 + r * dr + c * dc), (const char *)x + r * bx, ys[c]);
    }
}

#define K_PAIR_ENTRY(T, C)                                                                                         \
    static void T##_pair##C(int64_t n, const void *xa, const void *xb, const bq8_K *const *y, float o[2][4]) {    \
        T##_pair(n, (const b##T *)xa, (const b##T *)xb, y, C, o);                                                 \
    }
#define K_PAIR_TILES(T)                                                                                           \
    K_PAIR_ENTRY(T, 1) K_PAIR_ENTRY(T, 2) K_PAIR_ENTRY(T, 3) K_PAIR_ENTRY(T, 4)                                   \
    static void T##_tiles_zmm(int64_t n, const void *x, size_t bx, int64_t nr, const void *y, size_t by,          \
                              int64_t nc, char *d, size_t dr, size_t dc) {                                        \
        static const q_pair_fn pairs[] = {NULL, T##_pair1, T##_pair2, T##_pair3, T##_pair4};                     \
        k_tiles(n, x, bx, nr, y, by, nc, d, dr, dc, pairs, vd_##T##_512);                                         \
    }
K_PAIR_TILES(q4_K)
K_PAIR_TILES(q6_K)
#undef K_PAIR_TILES
#undef K_PAIR_ENTRY
