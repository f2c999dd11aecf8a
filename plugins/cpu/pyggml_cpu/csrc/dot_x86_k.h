/* Q2_K, Q3_K and Q5_K weight blocks against Q8_K activation blocks, in the summation order of ggml's AVX2
   vec_dot (included by dot_x86.h, which turns each block function into one-column, two-column and eight-row
   kernels). What fixes the bits: each block's integer sums are kept in eight int32 lanes, lane l holding the
   products of bytes 4l..4l+3 of every 32-value chunk times that chunk's sub-block scales (whatever computes
   those integers, they are exact); the lanes are converted to float and added into the 8-lane accumulator by
   one FMA with the block's d (y.d * x.d) per block; the accumulator's lanes are summed by hsum8 at the end. The
   mins differ per type: Q2_K's enter the same accumulator by an FMA before the block's sums (lane l: mins 2l and
   2l + 1 times their bsums, with -(y.d * x.dmin)); Q5_K's are one integer per block, added by a scalar FMA into a
   separate sum (lane 0 of accm) that is added after hsum8. */

/* int16 g of each 128-bit lane (0..7) times the int16 pairs of p: the block's scales applied to VPMADDUBSW pairs.
   sc holds eight scales in both 128-bit lanes; k6_spread(k) picks scale 2k for the low 16 bytes of a chunk and
   2k + 1 for the high 16 (sub-blocks of 16 values) */
AINLINE __m256i k_scaled(__m256i u, const int8_t *q8, __m256i sc, __m256i spread) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)q8)),
                             _mm256_shuffle_epi8(sc, spread));
}

/* eight int16 scales (half h of a block's sixteen) in both 128-bit lanes */
static inline __m256i k_half_scales(__m256i sc16, int h) {
    return _mm256_broadcastsi128_si256(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
}

/* Q2_K: 2-bit values (half h, shift 2k of qs[32h + b] for value 128h + 32k + b), 4-bit scale and min per 16 */
AINLINE void q2_K_block(const bq2_K *x, const bq8_K *const *y, const int NC, __m256 *acc, __m128 *accm) {
    (void)accm;
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i sm = _mm_loadu_si128((const __m128i *)x->scales), m4 = _mm_set1_epi8(0xF);
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sm, m4));
    const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m4));
    const float dx = F16T(x->d), dmx = F16T(x->dmin);
    __m256i sumi[2];
    for (int c = 0; c < NC; c++) {
        const __m256i mins = _mm256_madd_epi16(mn16, _mm256_loadu_si256((const __m256i *)y[c]->bsums));
        acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(-(y[c]->d * dmx)), _mm256_cvtepi32_ps(mins), acc[c]);
        sumi[c] = _mm256_setzero_si256();
    }
    for (int h = 0; h < 2; h++) {
        const __m256i sc = k_half_scales(sc16, h);
        const __m256i q2 = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * h));
        for (int k = 0; k < 4; k++) {
            const __m256i u = _mm256_and_si256(_mm256_srli_epi16(q2, 2 * k), m3);
            for (int c = 0; c < NC; c++)
                sumi[c] = _mm256_add_epi32(sumi[c], k_scaled(u, y[c]->qs + 128 * h + 32 * k, sc, k6_spread(k)));
        }
    }
    k_block_acc(dx, y, NC, sumi, acc);
}

#define q2_K_finish k_sum_finish

/* Q3_K: 2 low bits as Q2_K, the third from hmask[b] bit 4h + k (clear: the value is 4 less), signed 6-bit scales
   per 16 (12 bytes: low nibbles in bytes 0..7, the two high bits of scales 4q..4q+3 at bits 2q of bytes 8..11).
   The lanes: (lo | hb << 2) . y - 4 . y in int16 pairs, then scaled. */
AINLINE void q3_K_block(const bq3_K *x, const bq8_K *const *y, const int NC, __m256 *acc, __m128 *accm) {
    (void)accm;
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
    uint32_t u2;
    memcpy(&u2, x->scales + 8, 4);
    const __m128i u01 = _mm_shuffle_epi32(_mm_loadl_epi64((const __m128i *)x->scales), 0x44); /* u0 u1 u0 u1 */
    const __m128i lo = _mm_and_si128(_mm_srlv_epi32(u01, _mm_set_epi32(4, 4, 0, 0)), _mm_set1_epi8(0xF));
    const __m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)u2), _mm_set_epi32(6, 4, 2, 0)),
                                     _mm_set1_epi8(3));
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi32(hi, 4)),
                                                           _mm_set1_epi8(32)));
    const __m256i hm = _mm256_loadu_si256((const __m256i *)x->hmask);
    __m256i sumi[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int h = 0; h < 2; h++) {
        const __m256i sc = k_half_scales(sc16, h);
        const __m256i q3 = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * h));
        for (int k = 0; k < 4; k++) {
            const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + k), one);
            const __m256i u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q3, 2 * k), m3),
                                              _mm256_slli_epi16(hb, 2));
            const __m256i sk = _mm256_shuffle_epi8(sc, k6_spread(k));
            for (int c = 0; c < NC; c++) {
                const __m256i q8 = _mm256_loadu_si256((const __m256i *)(y[c]->qs + 128 * h + 32 * k));
                const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u, q8), _mm256_maddubs_epi16(four, q8));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(p, sk));
            }
        }
    }
    const float dx = F16T(x->d);
    k_block_acc(dx, y, NC, sumi, acc);
}

#define q3_K_finish k_sum_finish

/* Q5_K: Q4_K's nibbles, scales and mins, with a fifth bit per value from qh[b] (bit 2k for the low nibbles of
   chunk k, 2k + 1 for the high ones) */
AINLINE void q5_K_block(const bq5_K *x, const bq8_K *const *y, const int NC, __m256 *acc, __m128 *accm) {
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    __m256i sc;
    __m128i mn;
    k4_scales_mins(x->scales, &sc, &mn);
    const float dx = F16T(x->d), dmx = F16T(x->dmin);
    for (int c = 0; c < NC; c++) { /* mins . (bsums summed in pairs), one integer */
        const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y[c]->bsums),
                                          _mm_loadu_si128((const __m128i *)(y[c]->bsums + 8)));
        __m128i t = _mm_madd_epi16(mn, bs);
        t = _mm_add_epi32(t, _mm_unpackhi_epi64(t, t));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 1));
        accm[c] = _mm_fmadd_ss(_mm_set_ss(-(y[c]->d * dmx)), _mm_cvtepi32_ps(t), accm[c]);
    }
    const __m256i qh = _mm256_loadu_si256((const __m256i *)x->qh);
    __m256i sumi[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int k = 0; k < 4; k++) {
        const __m256i q5 = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * k));
        const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), one), 4);
        const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * k + 1), one), 4);
        const __m256i lo = _mm256_or_si256(_mm256_and_si256(q5, m4), h0);
        const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q5, 4), m4), h1);
        for (int c = 0; c < NC; c++) {
            const int8_t *q8 = y[c]->qs + 64 * k;
            sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(k_scaled(lo, q8, sc, k4_spread(2 * k)),
                                                                 k_scaled(hi, q8 + 32, sc, k4_spread(2 * k + 1))));
        }
    }
    k_block_acc(dx, y, NC, sumi, acc);
}

static inline float q5_K_finish(__m256 acc, __m128 accm) {
    return hsum8(acc) + _mm_cvtss_f32(accm);
}
