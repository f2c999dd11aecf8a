/* The R8 kernels (repack.h) for x86, included by dot_x86.h: a group of eight weight rows against activation
   columns. A 32-byte chunk of a tile holds four values of each of the eight rows, so one byte dot
   against four activation bytes broadcast to every lane gives, for all eight rows at once, the lane sum that
   ggml's vec_dot computes in one lane for one row; each of those eight lane positions has its own float
   accumulator vector (row r in lane r), summed at the end in hsum_float_8's order. So the results are the plain
   kernels' bits, and llama.cpp's, with no horizontal sums per block and the eight rows' scales converted as one
   vector. Same bits as the portable kernel in repack.c. */
#include "repack.h"

/* bytes ahead to prefetch, measured on a Sapphire Rapids VM (Q4_1 mat-vec out of cache, one thread): none 11.4 GB/s,
   1 KiB 14.6, 2 KiB 16.0, 4 KiB 15.4 */
#define R8_PREFETCH 2048

static inline __m256i bcast32(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

AINLINE void r8_rows(const int T, int64_t k, const void *vx, const void *vy, float out[R8_ROWS]) {
    const int hdr = T == T_Q4_1 ? 32 : 16, nq = T == T_Q8_0 ? 8 : 4, tile = hdr + 32 * nq;
    __m256 acc[8], summs = _mm256_setzero_ps();
    for (int l = 0; l < 8; l++) acc[l] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / QK; b++) {
        const uint8_t *t = (const uint8_t *)vx + b * tile;
        for (int o = 0; o < tile; o += 64) _mm_prefetch((const char *)t + R8_PREFETCH + o, _MM_HINT_T0);
        const bq8_0 *y0 = (const bq8_0 *)vy + b; /* Q8_0 and Q8_1 blocks start with d */
        const bq8_1 *y1 = (const bq8_1 *)vy + b;
        const int8_t *yq = T == T_Q4_1 ? y1->qs : y0->qs;
        const __m256 dd = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)t)),
                                        _mm256_set1_ps(F16T(T == T_Q4_1 ? y1->d : y0->d)));
        if (T == T_Q4_1)
            summs = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(t + 16))),
                                    _mm256_set1_ps(F16T(y1->s)), summs);
        for (int j = 0; j < nq; j++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(t + hdr + 32 * j));
            /* lane l's values: Q8_0 chunk l (stored + 128); the nibble types' chunk l & 3, low nibbles for l < 4 */
            for (int h = 0; h < (T == T_Q8_0 ? 1 : 2); h++) {
                const int l = j + 4 * h;
                const __m256i w = T == T_Q8_0 ? v
                                : h ? _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0xF))
                                    : _mm256_and_si256(v, _mm256_set1_epi8(0xF));
                const __m256i yb = bcast32(yq + 4 * l);
                __m256i p;
                if (T == T_Q4_1) {
                    p = dot_us8(w, yb);
                } else if (T == T_Q4_0) { /* nibble - 8: the offset's product taken off first */
                    p = dot_us8_acc(_mm256_sub_epi32(_mm256_setzero_si256(), dot_us8(_mm256_set1_epi8(8), yb)), w, yb);
                } else {
#if defined(PGC_VNNI) || defined(PGC_VNNI512)
                    p = dot_us8_acc(_mm256_sub_epi32(_mm256_setzero_si256(), dot_us8(_mm256_set1_epi8((char)0x80), yb)),
                                    w, yb);
#else /* VPMADDUBSW would saturate on (x + 128) y pairs: signed again, sign trick */
                    p = dot_ss8(_mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)), yb);
#endif
                }
                acc[l] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(p), acc[l]);
            }
        }
    }
    /* hsum_float_8's order: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) */
    const __m256 sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6])),
                                     _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7])));
    _mm256_storeu_ps(out, T == T_Q4_1 ? _mm256_add_ps(sum, summs) : sum);
}

/* Q4_K: a tile's 64 scales and mins (repack.h's regrouped 6-bit fields) as bytes, index 8 * sub-block + row */
AINLINE void r8k_unpack(const uint8_t *t, uint8_t sc[64], uint8_t mn[64]) {
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const __m256i lo = _mm256_loadu_si256((const __m256i *)(t + 32)), ml = _mm256_loadu_si256((const __m256i *)(t + 64));
    const __m256i h = _mm256_loadu_si256((const __m256i *)(t + 96));
    /* each high-bit pair masked in place before a 16-bit shift, so no bit crosses into the next byte */
    _mm256_storeu_si256((__m256i *)sc, _mm256_or_si256(_mm256_and_si256(lo, m4),
                                                       _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(3)), 4)));
    _mm256_storeu_si256((__m256i *)(sc + 32),
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo, 4), m4),
                                        _mm256_slli_epi16(_mm256_and_si256(h, _mm256_set1_epi8(0x0C)), 2)));
    _mm256_storeu_si256((__m256i *)mn, _mm256_or_si256(_mm256_and_si256(ml, m4), _mm256_and_si256(h, _mm256_set1_epi8(0x30))));
    _mm256_storeu_si256((__m256i *)(mn + 32),
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ml, 4), m4),
                                        _mm256_srli_epi16(_mm256_and_si256(h, _mm256_set1_epi8((char)0xC0)), 2)));
}

/* a Q8_K block's sums of sub-blocks 2p and 2p + 1 (32 values each) as a 16-bit pair, pairs[p] */
static inline void q8k_sub_block_pairs(const bq8_K *y, int32_t pairs[4]) {
    _mm_storeu_si128((__m128i *)pairs, _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y->bsums),
                                                      _mm_loadu_si128((const __m128i *)(y->bsums + 8))));
}

/* Q4_K R8 against C columns: repack.c's r8_q4_K_rows for the eight rows at once (row r in lane r). A sub-block's
   32 values of eight rows are eight chunks; each chunk's byte dot with four activation values broadcast adds to
   the row's partial sum, and one multiply by the eight rows' scales per sub-block (not per chunk, as in the plain
   layout) makes the block's integer dot. Without VNNI the partial sums are 16-bit pairs (each at most 8 x 2 x 15 x
   128 = 30720, Q8_K values reach -128) multiplied by VPMADDWD; VNNI's 32-bit lanes reach 32 x 15 x 128 = 61440,
   past 16 bits, so they are multiplied as 32-bit integers (VPMULLD). */
AINLINE void r8_q4_K_cols(int64_t k, const void *vx, const void *vy, size_t by, const int C, float *out) {
    const int tile = r8_tile(T_Q4_K);
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256 acc[R8_COLS], accm[R8_COLS];
    for (int c = 0; c < C; c++) acc[c] = accm[c] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / QKK; b++) {
        const uint8_t *t = (const uint8_t *)vx + b * tile, *q = t + r8_hdr(T_Q4_K);
        for (int o = 0; o < tile; o += 64) _mm_prefetch((const char *)t + R8_PREFETCH + o, _MM_HINT_T0);
        uint8_t sc[64], mn[64];
        r8k_unpack(t, sc, mn);
        const bq8_K *y[R8_COLS];
        __m256i sumi[R8_COLS];
        for (int c = 0; c < C; c++) {
            y[c] = (const bq8_K *)((const char *)vy + c * by) + b;
            sumi[c] = _mm256_setzero_si256();
        }
        for (int sb = 0; sb < 8; sb++) {
            const uint8_t *g = q + 256 * (sb / 2);
            __m256i part[R8_COLS];
            for (int c = 0; c < C; c++) part[c] = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(g + 32 * j));
                const __m256i w = sb & 1 ? _mm256_and_si256(_mm256_srli_epi16(v, 4), m4) : _mm256_and_si256(v, m4);
                for (int c = 0; c < C; c++) {
                    const __m256i yb = bcast32(y[c]->qs + 32 * sb + 4 * j);
#if defined(PGC_VNNI) || defined(PGC_VNNI512)
                    part[c] = dot_us8_acc(part[c], w, yb);
#else
                    part[c] = _mm256_add_epi16(part[c], _mm256_maddubs_epi16(w, yb));
#endif
                }
            }
            const __m256i s32 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(sc + 8 * sb)));
#if defined(PGC_VNNI) || defined(PGC_VNNI512)
            for (int c = 0; c < C; c++) sumi[c] = _mm256_add_epi32(sumi[c], _mm256_mullo_epi32(part[c], s32));
#else /* the scale against both 16-bit halves of a row's lane */
            const __m256i s16 = _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16));
            for (int c = 0; c < C; c++) sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(part[c], s16));
#endif
        }
        /* the mins term: row r's mins of sub-blocks 2p, 2p + 1 as a 16-bit pair in lane r, against the pair's
           activation sums */
        __m256i mpair[4];
        for (int p = 0; p < 4; p++)
            mpair[p] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(mn + 16 * p)),
                                                              _mm_loadl_epi64((const __m128i *)(mn + 16 * p + 8))));
        const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)t));
        const __m256 dm8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(t + 16)));
        for (int c = 0; c < C; c++) {
            int32_t pairs[4];
            q8k_sub_block_pairs(y[c], pairs);
            __m256i summ = _mm256_setzero_si256();
            for (int p = 0; p < 4; p++) summ = _mm256_add_epi32(summ, _mm256_madd_epi16(mpair[p], _mm256_set1_epi32(pairs[p])));
            const __m256 yd = _mm256_set1_ps(y[c]->d);
            acc[c] = _mm256_fmadd_ps(_mm256_mul_ps(d8, yd), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
            accm[c] = _mm256_fmadd_ps(_mm256_mul_ps(dm8, yd), _mm256_cvtepi32_ps(summ), accm[c]);
        }
    }
    for (int c = 0; c < C; c++) _mm256_storeu_ps(out + c * R8_ROWS, _mm256_sub_ps(acc[c], accm[c]));
}

#if defined(__AVX512F__)
static inline __m512i r8k_pair8(const uint8_t *a, const uint8_t *b) { /* 8 bytes of each -> 16 x int32 */
    return _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)a), _mm_loadl_epi64((const __m128i *)b)));
}

/* r8_q4_K_cols on two groups at once, group a in the low half of each zmm register and group b in the high half,
   each activation value pair broadcast to all sixteen lanes by its load: each instruction does the work of two
   (measured here: a 512-bit VPDPBUSD issues as fast as a 256-bit one). Every lane runs the operations of its
   row in r8_q4_K_cols, so the bits are the same. */
AINLINE void r8_q4_K_pair(int64_t k, const uint8_t *xa, const uint8_t *xb, const void *vy, size_t by, const int C,
                          float *out) {
    const int tile = r8_tile(T_Q4_K);
    const __m512i m4 = _mm512_set1_epi8(0xF);
    __m512 acc[R8_COLS], accm[R8_COLS];
    for (int c = 0; c < C; c++) acc[c] = accm[c] = _mm512_setzero_ps();
    for (int64_t b = 0; b < k / QKK; b++) {
        const uint8_t *ta = xa + b * tile, *tb = xb + b * tile;
        const uint8_t *qa = ta + r8_hdr(T_Q4_K), *qb = tb + r8_hdr(T_Q4_K);
        for (int o = 0; o < tile; o += 64) {
            _mm_prefetch((const char *)ta + R8_PREFETCH + o, _MM_HINT_T0);
            _mm_prefetch((const char *)tb + R8_PREFETCH + o, _MM_HINT_T0);
        }
        uint8_t sca[64], mna[64], scb[64], mnb[64];
        r8k_unpack(ta, sca, mna);
        r8k_unpack(tb, scb, mnb);
        const bq8_K *y[R8_COLS];
        __m512i sumi[R8_COLS];
        for (int c = 0; c < C; c++) {
            y[c] = (const bq8_K *)((const char *)vy + c * by) + b;
            sumi[c] = _mm512_setzero_si512();
        }
        for (int sb = 0; sb < 8; sb++) {
            const uint8_t *ga = qa + 256 * (sb / 2), *gb = qb + 256 * (sb / 2);
            __m512i part[R8_COLS];
            for (int c = 0; c < C; c++) part[c] = _mm512_setzero_si512();
            for (int j = 0; j < 8; j++) {
                const __m512i v = zmm_load2(ga + 32 * j, gb + 32 * j);
                const __m512i w = sb & 1 ? _mm512_and_si512(_mm512_srli_epi16(v, 4), m4) : _mm512_and_si512(v, m4);
                for (int c = 0; c < C; c++) {
                    int32_t four;
                    memcpy(&four, y[c]->qs + 32 * sb + 4 * j, 4);
                    const __m512i yb = _mm512_set1_epi32(four);
#if defined(PGC_VNNI512)
                    part[c] = _mm512_dpbusd_epi32(part[c], w, yb);
#else
                    part[c] = _mm512_add_epi16(part[c], _mm512_maddubs_epi16(w, yb));
#endif
                }
            }
            const __m512i s32 = r8k_pair8(sca + 8 * sb, scb + 8 * sb);
#if defined(PGC_VNNI512)
            for (int c = 0; c < C; c++) sumi[c] = _mm512_add_epi32(sumi[c], _mm512_mullo_epi32(part[c], s32));
#else
            const __m512i s16 = _mm512_or_si512(s32, _mm512_slli_epi32(s32, 16));
            for (int c = 0; c < C; c++) sumi[c] = _mm512_add_epi32(sumi[c], _mm512_madd_epi16(part[c], s16));
#endif
        }
        __m512i mpair[4];
        for (int p = 0; p < 4; p++) {
            const __m128i ma = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(mna + 16 * p)),
                                                 _mm_loadl_epi64((const __m128i *)(mna + 16 * p + 8)));
            const __m128i mb = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)(mnb + 16 * p)),
                                                 _mm_loadl_epi64((const __m128i *)(mnb + 16 * p + 8)));
            mpair[p] = _mm512_cvtepu8_epi16(_mm256_inserti128_si256(_mm256_castsi128_si256(ma), mb, 1));
        }
        const __m512 d16 = _mm512_cvtph_ps(_mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)ta)), _mm_loadu_si128((const __m128i *)tb), 1));
        const __m512 dm16 = _mm512_cvtph_ps(_mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(ta + 16))), _mm_loadu_si128((const __m128i *)(tb + 16)), 1));
        for (int c = 0; c < C; c++) {
            int32_t pairs[4];
            q8k_sub_block_pairs(y[c], pairs);
            __m512i summ = _mm512_setzero_si512();
            for (int p = 0; p < 4; p++) summ = _mm512_add_epi32(summ, _mm512_madd_epi16(mpair[p], _mm512_set1_epi32(pairs[p])));
            const __m512 yd = _mm512_set1_ps(y[c]->d);
            acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(d16, yd), _mm512_cvtepi32_ps(sumi[c]), acc[c]);
            accm[c] = _mm512_fmadd_ps(_mm512_mul_ps(dm16, yd), _mm512_cvtepi32_ps(summ), accm[c]);
        }
    }
    for (int c = 0; c < C; c++) _mm512_storeu_ps(out + c * 2 * R8_ROWS, _mm512_sub_ps(acc[c], accm[c]));
}
#endif

/* the pgc_r8_fn entries: the 32-block types one group and column per pass, Q4_K up to R8_COLS columns (and with
   AVX-512 two groups) */
#define R8_ENTRIES(t, T)                                                                                    \
    static void XSFX(r8_##t)(int64_t k, const void *x, size_t gb, int ng, const void *y, size_t by, int nc, \
                             float *out) {                                                                  \
        for (int c = 0; c < nc; c++)                                                                        \
            for (int g = 0; g < ng; g++)                                                                    \
                r8_rows(T, k, (const char *)x + g * gb, (const char *)y + c * by, out + (c * ng + g) * R8_ROWS); \
    }
R8_ENTRIES(q4_0, T_Q4_0)
R8_ENTRIES(q4_1, T_Q4_1)
R8_ENTRIES(q8_0, T_Q8_0)
#undef R8_ENTRIES

#define R8K_CASES(call)                                                                                     \
    switch (nc) {                                                                                           \
    case 1: call(1); break;                                                                                 \
    case 2: call(2); break;                                                                                 \
    case 3: call(3); break;                                                                                 \
    case 4: call(4); break;                                                                                 \
    case 5: call(5); break;                                                                                 \
    case 6: call(6); break;                                                                                 \
    case 7: call(7); break;                                                                                 \
    default: call(8); break;                                                                                \
    }

static void XSFX(r8_q4_K)(int64_t k, const void *x, size_t gb, int ng, const void *y, size_t by, int nc, float *out) {
#if defined(__AVX512F__)
    if (ng == 2 && nc > 1) { /* mat-vec measured faster one group at a time */
#define R8K_PAIR(C) r8_q4_K_pair(k, (const uint8_t *)x, (const uint8_t *)x + gb, y, by, C, out)
        R8K_CASES(R8K_PAIR)
#undef R8K_PAIR
        return;
    }
#endif
    for (int g = 0; g < ng; g++) {
        float o[R8_COLS * R8_ROWS];
#define R8K_ONE(C) r8_q4_K_cols(k, (const char *)x + g * gb, y, by, C, o)
        R8K_CASES(R8K_ONE)
#undef R8K_ONE
        for (int c = 0; c < nc; c++) memcpy(out + (c * ng + g) * R8_ROWS, o + c * R8_ROWS, sizeof(float) * R8_ROWS);
    }
}
#undef R8K_CASES
