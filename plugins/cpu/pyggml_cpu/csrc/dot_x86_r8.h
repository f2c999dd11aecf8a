/* The R8 kernels (repack.h) for x86, included by dot_x86.h: a group of eight weight rows against activation
   columns. A 32-byte chunk of a tile holds four values of each of the eight rows, so one byte dot against four
   activation bytes broadcast to every lane gives, for all eight rows at once (row r in lane r), a partial sum of
   each row's dot. Q4_1 keeps ggml's vec_dot order (each of its eight lane positions has its own float accumulator,
   summed at the end in hsum_float_8's order: the plain kernels' bits, and llama.cpp's); the other types sum a
   block's dot in integers and convert it once. Same bits as the portable kernels in repack.c on every level. */
#include "repack.h"

/* the kernels' loops are unrolled (constant shifts and offsets: measured, see R8K_COLS_X86); a sanitizer build keeps
   them rolled, the same arithmetic, where unrolled bodies under ASan and UBSan took minutes to compile */
#define R8_PRAGMA(x) _Pragma(#x)
#if defined(__SANITIZE_ADDRESS__)
#define R8_UNROLL(n)
#else
#define R8_UNROLL(n) R8_PRAGMA(GCC unroll n)
#endif

/* prefetch the weight tiles this many bytes ahead, if at all (per CPU vendor: dot_portable.c) */
#define R8_PREFETCH pgc_S.r8_prefetch

static inline __m256i bcast32(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* Q4_1 against one column, in ggml's order */
static void XSFX(r8_q4_1_rows)(int64_t k, const void *vx, const void *vy, float out[R8_ROWS]) {
    const int tile = r8_tile(T_Q4_1);
    __m256 acc[8], summs = _mm256_setzero_ps();
    for (int l = 0; l < 8; l++) acc[l] = _mm256_setzero_ps();
    for (int64_t b = 0; b < k / QK; b++) {
        const uint8_t *t = (const uint8_t *)vx + b * tile;
        for (int o = 0; R8_PREFETCH && o < tile; o += 64) _mm_prefetch((const char *)t + R8_PREFETCH + o, _MM_HINT_T0);
        const bq8_1 *y = (const bq8_1 *)vy + b;
        const __m256 dd = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)t)), _mm256_set1_ps(F16T(y->d)));
        summs = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(t + 16))), _mm256_set1_ps(F16T(y->s)),
                                summs);
        for (int j = 0; j < 4; j++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(t + r8_hdr(T_Q4_1) + 32 * j));
            for (int h = 0; h < 2; h++) { /* lane l's values: chunk l & 3, low nibbles for l < 4 */
                const int l = j + 4 * h;
                const __m256i w = _mm256_and_si256(h ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0xF));
                acc[l] = _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(dot_us8(w, bcast32(y->qs + 4 * l))), acc[l]);
            }
        }
    }
    /* hsum_float_8's order: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) */
    const __m256 sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6])),
                                     _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7])));
    _mm256_storeu_ps(out, _mm256_add_ps(sum, summs));
}

/* the sum of a Q8_0 block's 32 values */
static inline int32_t q8_0_sum(const int8_t *qs) {
    const __m256i s = _mm256_sad_epu8(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)qs),
                                                       _mm256_set1_epi8((char)0x80)), _mm256_setzero_si256());
    __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    t = _mm_add_epi64(t, _mm_unpackhi_epi64(t, t));
    return _mm_cvtsi128_si32(t) - 32 * 128;
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

/* R8K_COLS_X86's pieces per register width: one group of eight rows in a ymm register (row r in lane r), or two
   groups in a zmm register (the first in the low half, the second in the high half). p: the first group's bytes,
   the second's gb bytes on; sc, mn: the groups' r8k_unpack bytes, 64 a group. */
static inline __m256i r8k_load_ymm(const uint8_t *p, size_t gb) { /* 32 bytes of each group */
    (void)gb;
    return _mm256_loadu_si256((const __m256i *)p);
}
static inline __m256i r8k_scales_ymm(const uint8_t *sc) { /* 8 bytes of each group as int32 */
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)sc));
}
/* row r's mins of sub-blocks 2p, 2p + 1 (at mn + 16p) as a 16-bit pair in lane r */
static inline __m128i r8k_min_pairs(const uint8_t *mn) {
    return _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)mn), _mm_loadl_epi64((const __m128i *)(mn + 8)));
}
static inline __m256i r8k_mins_ymm(const uint8_t *mn) { return _mm256_cvtepu8_epi16(r8k_min_pairs(mn)); }
static inline __m256 r8k_f16_ymm(const uint8_t *p, size_t gb) { /* 8 halves of each group as floats */
    (void)gb;
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

#if defined(__AVX512F__)
static inline __m256i r8k_ymm_of(__m128i lo, __m128i hi) {
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}
static inline __m512i r8k_load_zmm(const uint8_t *p, size_t gb) { return zmm_load2(p, p + gb); }
static inline __m512i r8k_scales_zmm(const uint8_t *sc) {
    return _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)sc),
                                                   _mm_loadl_epi64((const __m128i *)(sc + 64))));
}
static inline __m512i r8k_mins_zmm(const uint8_t *mn) {
    return _mm512_cvtepu8_epi16(r8k_ymm_of(r8k_min_pairs(mn), r8k_min_pairs(mn + 64)));
}
static inline __m512 r8k_f16_zmm(const uint8_t *p, size_t gb) {
    return _mm512_cvtph_ps(r8k_ymm_of(_mm_loadu_si128((const __m128i *)p),
                                      _mm_loadu_si128((const __m128i *)(p + gb))));
}
#endif

/* Q5_K's fifth bits: bit sb of each byte of the qh chunk h added to the nibbles w as 16 (a byte-masked add where
   AVX-512 has byte masks, also in ymm registers; a mask, a shift and an or where it has not) */
static inline __m256i r8k_fifth_bit_ymm(__m256i w, __m256i h, int sb) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    return _mm256_mask_add_epi8(w, _mm256_test_epi8_mask(h, _mm256_set1_epi8((char)(1 << sb))), w,
                                _mm256_set1_epi8(16));
#else
    h = _mm256_and_si256(h, _mm256_set1_epi8((char)(1 << sb)));
    return _mm256_or_si256(w, sb < 4 ? _mm256_slli_epi16(h, 4 - sb) : _mm256_srli_epi16(h, sb - 4));
#endif
}
#if defined(__AVX512F__)
static inline __m512i r8k_fifth_bit_zmm(__m512i w, __m512i h, int sb) {
    return _mm512_mask_add_epi8(w, _mm512_test_epi8_mask(h, _mm512_set1_epi8((char)(1 << sb))), w,
                                _mm512_set1_epi8(16));
}
#endif

/* Q4_K or Q5_K (T): value chunk j of sub-block sb of a tile whose chunks start at q (Q5_K: its 8 qh chunks first,
   the nibbles 256 bytes on), groups gb bytes apart: four values of each row as bytes (the column kernels build it
   per chunk, the wide passes once per block) */
#define R8K_VALUES_X86(X, V, P, S)                                                                                    \
    AINLINE V##i r8k_values_##X(const int T, const uint8_t *q, size_t gb, const int sb, const int j) {                 \
        const V##i v = r8k_load_##X(q + (T == T_Q5_K ? 256 : 0) + 256 * (sb / 2) + 32 * j, gb);                     \
        const V##i w = P##_and_##S(sb & 1 ? P##_srli_epi16(v, 4) : v, P##_set1_epi8(0xF));                           \
        return T == T_Q5_K ? r8k_fifth_bit_##X(w, r8k_load_##X(q + 32 * j, gb), sb) : w;                             \
    }                                                                                                                 \
    /* Q4_K with 32-bit partial sums: an odd sub-block's nibbles where they lie, as 16 times their values (no shift; \
       its sums are exact multiples of 16, at most 16 x 4 x 63 x 32 x 15 x 128 < 2^31, shifted back once a block) */ \
    AINLINE V##i r8k_values16_##X(const uint8_t *q, size_t gb, const int sb, const int j) {                          \
        const V##i v = r8k_load_##X(q + 256 * (sb / 2) + 32 * j, gb);                                                 \
        return P##_and_##S(v, P##_set1_epi8(sb & 1 ? (char)0xF0 : 0xF));                                             \
    }
R8K_VALUES_X86(ymm, __m256, _mm256, si256)
#if defined(__AVX512F__)
R8K_VALUES_X86(zmm, __m512, _mm512, si512)
#endif
#undef R8K_VALUES_X86

/* the start of a K type's tile t (its G groups gb bytes apart): prefetch R8_PREFETCH bytes ahead; y[c]: column c's
   activation block b (columns by bytes apart from vy) */
AINLINE void r8k_tile_start(const uint8_t *t, size_t gb, int G, int tile, const void *vy, size_t by, int64_t b, int C,
                            const bq8_K **y) {
    for (int o = 0; R8_PREFETCH && o < tile; o += 64)
        for (int g = 0; g < G; g++) _mm_prefetch((const char *)t + g * gb + R8_PREFETCH + o, _MM_HINT_T0);
    for (int c = 0; c < C; c++) y[c] = (const bq8_K *)((const char *)vy + c * by) + b;
}

/* R8K_DOT_X: a chunk's byte dot added to the partial sums; R8K_VNNI_X: whether that is VPDPBUSD. Without it the
   partial sums are 16-bit pairs (each at most 8 x 2 x 15 x 128 = 30720, Q8_K values reach -128) multiplied by
   VPMADDWD; VPDPBUSD's 32-bit lanes reach 32 x 15 x 128 = 61440, past 16 bits, so they are multiplied as 32-bit
   integers (VPMULLD). The zmm form needs AVX512-VNNI (AVX-VNNI has no 512-bit encoding). */
#if defined(PGC_VNNI) || defined(PGC_VNNI512)
#define R8K_VNNI_ymm 1
#define R8K_DOT_ymm(part, w, yb) dot_us8_acc(part, w, yb)
#else
#define R8K_VNNI_ymm 0
#define R8K_DOT_ymm(part, w, yb) _mm256_add_epi16(part, _mm256_maddubs_epi16(w, yb))
#endif
#if defined(PGC_VNNI512)
#define R8K_VNNI_zmm 1
#define R8K_DOT_zmm(part, w, yb) _mm512_dpbusd_epi32(part, w, yb)
#define R8K_DOT32_zmm(part, w, yb) _mm512_dpbusd_epi32(part, w, yb)
#else
#define R8K_VNNI_zmm 0
#define R8K_DOT_zmm(part, w, yb) _mm512_add_epi16(part, _mm512_maddubs_epi16(w, yb))
#define R8K_DOT32_zmm(part, w, yb) _mm512_add_epi32(part, _mm512_madd_epi16(_mm512_maddubs_epi16(w, yb), _mm512_set1_epi16(1)))
#endif
/* the byte dot into 32-bit partial sums whatever the level: Q5_K's (Q4_K's 16-bit pairs would overflow at 31 x 128
   x 16) and Q6_K's */
#define R8K_DOT32_ymm(part, w, yb) dot_us8_acc(part, w, yb)

/* Q4_K or Q5_K (T) R8 against C columns, G groups at once in X registers (V: their float vector type, V##i the integer one; P:
   the intrinsics' prefix, S: their integer suffix): repack.c's r8_q4_K_rows for the eight rows of a group at once,
   group g's tiles at x + g * gb (Q5_K too: r8_k_rows). A sub-block's 32 values of eight rows are eight chunks (Q5_K's
   fifth bits from the qh chunk of the same bytes, bit sb moved to bit 4); each chunk's byte dot with
   four activation values broadcast adds to the row's partial sum, and one multiply by the eight rows' scales per
   sub-block (not per chunk, as in the plain layout) makes the block's integer dot. Every lane runs the operations
   of its row whatever the width, so the bits are the same. Instantiated for one group in ymm registers
   (r8_q4_K_cols) and, with AVX-512, two in zmm registers (r8_q4_K_pair): each instruction does the work of two
   (measured here: a 512-bit VPDPBUSD issues as fast as a 256-bit one). */
#define R8K_COLS_X86(name, T, G, X, V, P, S)                                                                          \
    AINLINE void name(int64_t k, const uint8_t *x, size_t gb, const void *vy, size_t by, const int C, float *out) {   \
        const int tile = r8_tile(T), vnni = R8K_VNNI_##X || T == T_Q5_K; /* 32-bit partial sums */                  \
        const int hi16 = T == T_Q4_K && vnni;                                                                         \
        V acc[R8_COLS], accm[R8_COLS];                                                                                \
        for (int c = 0; c < C; c++) acc[c] = accm[c] = P##_setzero_ps();                                              \
        for (int64_t b = 0; b < k / QKK; b++) {                                                                       \
            const uint8_t *t = x + b * tile, *q = t + r8_hdr(T); /* the first group's; the second's gb on */          \
            const bq8_K *y[R8_COLS];                                                                                  \
            r8k_tile_start(t, gb, G, tile, vy, by, b, C, y);                                                          \
            uint8_t sc[G * 64], mn[G * 64];                                                                           \
            for (int g = 0; g < G; g++) r8k_unpack(t + g * gb, sc + 64 * g, mn + 64 * g);                             \
            V##i sumi[R8_COLS], sumi16[R8_COLS]; /* sumi16: odd sub-blocks as 16 times their sums (hi16) */           \
            for (int c = 0; c < C; c++) sumi[c] = sumi16[c] = P##_setzero_##S();                                      \
            R8_UNROLL(8) for (int sb = 0; sb < 8; sb++) { /* Q5_K's shifts by sb: constants */             \
                V##i part[R8_COLS], part2[R8_COLS]; /* the even and the odd chunks: two chains of dots */              \
                for (int c = 0; c < C; c++) part[c] = part2[c] = P##_setzero_##S();                                   \
                R8_UNROLL(8) for (int j = 0; j < 8; j++) {                                                 \
                    const V##i w = hi16 ? r8k_values16_##X(q, gb, sb, j) : r8k_values_##X(T, q, gb, sb, j);           \
                    for (int c = 0; c < C; c++) {                                                                     \
                        int32_t four;                                                                                 \
                        memcpy(&four, y[c]->qs + 32 * sb + 4 * j, 4);                                                 \
                        V##i *pc = j % 2 ? &part2[c] : &part[c];                                                      \
                        *pc = T == T_Q5_K ? R8K_DOT32_##X(*pc, w, P##_set1_epi32(four))                               \
                                          : R8K_DOT_##X(*pc, w, P##_set1_epi32(four));                                \
                    }                                                                                                 \
                }                                                                                                     \
                for (int c = 0; c < C; c++) /* integers, no overflow (below): the same sum in either order */         \
                    part[c] = vnni ? P##_add_epi32(part[c], part2[c]) : P##_add_epi16(part[c], part2[c]);             \
                const V##i s32 = r8k_scales_##X(sc + 8 * sb);                                                          \
                const V##i s16 = P##_or_##S(s32, P##_slli_epi32(s32, 16)); /* against both 16-bit halves of a lane */ \
                for (int c = 0; c < C; c++) {                                                                         \
                    V##i *si = hi16 && sb & 1 ? &sumi16[c] : &sumi[c];                                                \
                    *si = P##_add_epi32(*si, vnni ? P##_mullo_epi32(part[c], s32) : P##_madd_epi16(part[c], s16));    \
                }                                                                                                     \
            }                                                                                                         \
            for (int c = 0; hi16 && c < C; c++) sumi[c] = P##_add_epi32(sumi[c], P##_srai_epi32(sumi16[c], 4));       \
            /* the mins term: row r's mins pairs against the pairs' activation sums */                                \
            V##i mpair[4];                                                                                            \
            for (int p = 0; p < 4; p++) mpair[p] = r8k_mins_##X(mn + 16 * p);                                          \
            const V d = r8k_f16_##X(t, gb), dm = r8k_f16_##X(t + 16, gb);                                             \
            for (int c = 0; c < C; c++) {                                                                             \
                int32_t pairs[4];                                                                                     \
                q8k_sub_block_pairs(y[c], pairs);                                                                     \
                V##i summ = P##_setzero_##S();                                                                        \
                for (int p = 0; p < 4; p++)                                                                           \
                    summ = P##_add_epi32(summ, P##_madd_epi16(mpair[p], P##_set1_epi32(pairs[p])));                   \
                const V yd = P##_set1_ps(y[c]->d);                                                                    \
                acc[c] = P##_fmadd_ps(P##_mul_ps(d, yd), P##_cvtepi32_ps(sumi[c]), acc[c]);                           \
                accm[c] = P##_fmadd_ps(P##_mul_ps(dm, yd), P##_cvtepi32_ps(summ), accm[c]);                           \
            }                                                                                                         \
        }                                                                                                             \
        for (int c = 0; c < C; c++) P##_storeu_ps(out + c * G * R8_ROWS, P##_sub_ps(acc[c], accm[c]));                \
    }

R8K_COLS_X86(r8_q4_K_cols, T_Q4_K, 1, ymm, __m256, _mm256, si256)
R8K_COLS_X86(r8_q5_K_cols, T_Q5_K, 1, ymm, __m256, _mm256, si256)
#if defined(__AVX512F__)
R8K_COLS_X86(r8_q4_K_pair, T_Q4_K, 2, zmm, __m512, _mm512, si512)
R8K_COLS_X86(r8_q5_K_pair, T_Q5_K, 2, zmm, __m512, _mm512, si512)
#endif
#undef R8K_COLS_X86

/* Q4_0, Q5_0, Q5_1 or Q8_0 (T) R8 against C columns, G groups at once in X registers (as R8K_COLS_X86): repack.c's
   r8_q4_0_q8_0_rows for the eight rows of a group at once. A block's eight value vectors (Q4_0: the low then the high
   nibbles of its four chunks; Q5_0 and Q5_1 the same after their qh chunk, each value's fifth bit from bit l of that
   chunk's byte; Q8_0: its eight chunks, stored + 128) add their byte dots to a 32-bit sum per row in two chains (the
   even and the odd vectors: one chain of eight dependent dots held a mat-vec to 20-26 GB/s of Q4_0 from the caches,
   two give 27-30), starting at -(the offset) x the block's activation sum (Q4_0: 8; Q5_0: 16; Q5_1: none, its min
   term m x y.s is summed apart in a second accumulator, added at the end; Q8_0 with VNNI: 128; VPMADDUBSW would
   saturate on Q8_0's unsigned bytes, so without VNNI the ymm form takes the signed bytes with the sign trick, and
   the zmm form has no Q8_0 instance), then one conversion and one fused multiply-add of d x y.d. */
#define R8L_COLS_X86(name, T, G, X, V, P, S)                                                                          \
    AINLINE void name(int64_t k, const uint8_t *x, size_t gb, const void *vy, size_t by, const int C, float *out) {   \
        const int tile = r8_tile(T), q5 = T == T_Q5_0 || T == T_Q5_1, q8_1 = T == T_Q5_1;                            \
        const int off = T == T_Q4_0 ? 8 : T == T_Q5_0 ? 16 : T == T_Q8_0 && R8K_VNNI_##X ? 128 : 0;                \
        V acc[R8_COLS], accm[R8_COLS];                                                                                \
        for (int c = 0; c < C; c++) acc[c] = accm[c] = P##_setzero_ps();                                              \
        for (int64_t b = 0; b < k / QK; b++) {                                                                        \
            const uint8_t *t = x + b * tile, *q = t + r8_hdr(T);                                                      \
            for (int o = 0; R8_PREFETCH && o < tile; o += 64)                                                    \
                for (int g = 0; g < G; g++) _mm_prefetch((const char *)t + g * gb + R8_PREFETCH + o, _MM_HINT_T0);     \
            const int8_t *yq[R8_COLS]; /* Q8_0 blocks: d, qs; Q8_1 (Q5_1's partner): d, s, qs */                      \
            const uint16_t *yd[R8_COLS];                                                                              \
            V##i sumi[R8_COLS], sumi2[R8_COLS]; /* integers: the same sum in either order */                      \
            for (int c = 0; c < C; c++) {                                                                             \
                const char *yb = (const char *)vy + c * by + b * (q8_1 ? sizeof(bq8_1) : sizeof(bq8_0));              \
                yd[c] = (const uint16_t *)yb;                                                                         \
                yq[c] = q8_1 ? ((const bq8_1 *)yb)->qs : ((const bq8_0 *)yb)->qs;                                     \
                sumi[c] = P##_set1_epi32(off ? -off * q8_0_sum(yq[c]) : 0);                                           \
                sumi2[c] = P##_setzero_##S();                                                                         \
            }                                                                                                         \
            const V##i qh = q5 ? r8k_load_##X(q, gb) : P##_setzero_##S();                                             \
            R8_UNROLL(8) for (int l = 0; l < 8; l++) {                                                     \
                const V##i v = r8k_load_##X(q + 32 * (T == T_Q8_0 ? l : l % 4 + q5), gb);                              \
                V##i w = T == T_Q8_0 ? v : P##_and_##S(l < 4 ? v : P##_srli_epi16(v, 4), P##_set1_epi8(0xF));         \
                if (q5)                                                                                               \
                    w = P##_or_##S(w, P##_and_##S(l < 4 ? P##_slli_epi16(qh, 4 - l) : P##_srli_epi16(qh, l - 4),      \
                                                  P##_set1_epi8(0x10)));                                              \
                for (int c = 0; c < C; c++) {                                                                         \
                    int32_t four;                                                                                     \
                    memcpy(&four, yq[c] + 4 * l, 4);                                                                  \
                    if (l % 2) sumi2[c] = R8L_DOT_##X(T, sumi2[c], w, P##_set1_epi32(four));                          \
                    else sumi[c] = R8L_DOT_##X(T, sumi[c], w, P##_set1_epi32(four));                                  \
                }                                                                                                     \
            }                                                                                                         \
            for (int c = 0; c < C; c++) sumi[c] = P##_add_epi32(sumi[c], sumi2[c]);                                   \
            const V d = r8k_f16_##X(t, gb);                                                                           \
            for (int c = 0; c < C; c++)                                                                               \
                acc[c] = P##_fmadd_ps(P##_mul_ps(d, P##_set1_ps(F16T(yd[c][0]))), P##_cvtepi32_ps(sumi[c]), acc[c]);  \
            if (q8_1) { /* the mins: m x y.s */                                                                       \
                const V m = r8k_f16_##X(t + 16, gb);                                                                  \
                for (int c = 0; c < C; c++) accm[c] = P##_fmadd_ps(m, P##_set1_ps(F16T(yd[c][1])), accm[c]);          \
            }                                                                                                         \
        }                                                                                                             \
        for (int c = 0; c < C; c++) P##_storeu_ps(out + c * G * R8_ROWS, q8_1 ? P##_add_ps(acc[c], accm[c]) : acc[c]); \
    }
#if R8K_VNNI_ymm
#define R8L_DOT_ymm(T, part, w, yb) dot_us8_acc(part, w, yb)
#else
#define R8L_DOT_ymm(T, part, w, yb)                                                                                   \
    (T == T_Q8_0 ? _mm256_add_epi32(part, dot_ss8(_mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)), yb))             \
                 : dot_us8_acc(part, w, yb))
#endif
#define R8L_DOT_zmm(T, part, w, yb) R8K_DOT32_zmm(part, w, yb)
R8L_COLS_X86(r8_q4_0_cols, T_Q4_0, 1, ymm, __m256, _mm256, si256)
R8L_COLS_X86(r8_q5_0_cols, T_Q5_0, 1, ymm, __m256, _mm256, si256)
R8L_COLS_X86(r8_q5_1_cols, T_Q5_1, 1, ymm, __m256, _mm256, si256)
R8L_COLS_X86(r8_q8_0_cols, T_Q8_0, 1, ymm, __m256, _mm256, si256)
#if defined(__AVX512F__)
R8L_COLS_X86(r8_q4_0_pair, T_Q4_0, 2, zmm, __m512, _mm512, si512)
R8L_COLS_X86(r8_q5_0_pair, T_Q5_0, 2, zmm, __m512, _mm512, si512)
R8L_COLS_X86(r8_q5_1_pair, T_Q5_1, 2, zmm, __m512, _mm512, si512)
#if R8K_VNNI_zmm
R8L_COLS_X86(r8_q8_0_pair, T_Q8_0, 2, zmm, __m512, _mm512, si512)
#endif
#endif
#undef R8L_COLS_X86
#undef R8L_DOT_ymm
#undef R8L_DOT_zmm

/* a Q6_K tile's eight rows' scales of one sub-block (8 bytes at p) as int32, for each group */
static inline __m256i r8q6_scales_ymm(const uint8_t *p, size_t gb) {
    (void)gb;
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p));
}
#if defined(__AVX512F__)
static inline __m512i r8q6_scales_zmm(const uint8_t *p, size_t gb) {
    return _mm512_cvtepi8_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)p),
                                                   _mm_loadl_epi64((const __m128i *)(p + gb))));
}
#endif

/* Q6_K R8 against C columns, G groups at once in X registers (as R8K_COLS_X86): repack.c's r8_k_rows for the eight
   rows of a group at once. Chunk triple 8h + mm (two ql chunks and a qh chunk, 96 bytes) holds value vectors
   (s, mm) of half h for s = 0..3 (4 values of each row: value 128h + 32s + 4mm, sub-block 8h + 2s + mm / 4): ql chunk
   s & 1 (its high nibbles for s >= 2) with bits 2s, 2s + 1 of the qh chunk moved to bits 4-5. A sub-block's four
   chunks add to a partial sum that starts at -32 x the sub-block's activation sum (the values' offset), then one
   multiply by the eight rows' scales. Up to two columns read the triples in order (a mat-vec streams the tile),
   four sub-blocks' sums at once; more columns take one sub-block at a time (fewer registers; the tile is in L1). */
#define R8Q6_COLS_X86(name, G, X, V, P, S)                                                                            \
    AINLINE V##i name##_w(V##i l, V##i qh, const int s) { /* value vector s of a triple */                           \
        const V##i hb = P##_and_##S(qh, P##_set1_epi8((char)(3 << (2 * s))));                                        \
        const V##i lo = P##_and_##S(s >= 2 ? P##_srli_epi16(l, 4) : l, P##_set1_epi8(0xF));                          \
        return P##_or_##S(lo, s < 2 ? P##_slli_epi16(hb, 4 - 2 * s) : s == 2 ? hb : P##_srli_epi16(hb, 2));          \
    }                                                                                                                 \
    AINLINE void name(int64_t k, const uint8_t *x, size_t gb, const void *vy, size_t by, const int C, float *out) {   \
        const int tile = r8_tile(T_Q6_K);                                                                             \
        V acc[R8_COLS];                                                                                               \
        for (int c = 0; c < C; c++) acc[c] = P##_setzero_ps();                                                        \
        for (int64_t b = 0; b < k / QKK; b++) {                                                                       \
            const uint8_t *t = x + b * tile, *q = t + r8_hdr(T_Q6_K);                                                 \
            const bq8_K *y[R8_COLS];                                                                                  \
            r8k_tile_start(t, gb, G, tile, vy, by, b, C, y);                                                          \
            V##i sumi[R8_COLS];                                                                                       \
            for (int c = 0; c < C; c++) sumi[c] = P##_setzero_##S();                                                  \
            R8_UNROLL(4) for (int hh = 0; hh < 4; hh++) { /* unrolled: constant shifts and offsets */      \
                const int h = hh / 2, half = hh % 2;                                                                  \
                if (C <= 2) {                                                                                         \
                    V##i part[4][2];                                                                                  \
                    for (int s = 0; s < 4; s++)                                                                       \
                        for (int c = 0; c < C; c++) part[s][c] = P##_set1_epi32(-32 * y[c]->bsums[8 * h + 2 * s + half]); \
                    R8_UNROLL(4) for (int i = 0; i < 4; i++) {                                             \
                        const uint8_t *p = q + 96 * (4 * hh + i);                                                     \
                        const V##i l0 = r8k_load_##X(p, gb), l1 = r8k_load_##X(p + 32, gb);                           \
                        const V##i qh = r8k_load_##X(p + 64, gb);                                                     \
                        R8_UNROLL(4) for (int s = 0; s < 4; s++) {                                         \
                            const V##i w = name##_w(s & 1 ? l1 : l0, qh, s);                                          \
                            for (int c = 0; c < C; c++) {                                                             \
                                int32_t four;                                                                         \
                                memcpy(&four, y[c]->qs + 128 * h + 32 * s + 4 * (4 * half + i), 4);                   \
                                part[s][c] = R8K_DOT32_##X(part[s][c], w, P##_set1_epi32(four));                      \
                            }                                                                                         \
                        }                                                                                             \
                    }                                                                                                 \
                    for (int s = 0; s < 4; s++) {                                                                     \
                        const V##i sc = r8q6_scales_##X(t + 16 + 8 * (8 * h + 2 * s + half), gb);                    \
                        for (int c = 0; c < C; c++) sumi[c] = P##_add_epi32(sumi[c], P##_mullo_epi32(part[s][c], sc)); \
                    }                                                                                                 \
                } else {                                                                                              \
                    R8_UNROLL(4) for (int s = 0; s < 4; s++) {                                             \
                        V##i part[R8_COLS];                                                                           \
                        for (int c = 0; c < C; c++) part[c] = P##_set1_epi32(-32 * y[c]->bsums[8 * h + 2 * s + half]); \
                        R8_UNROLL(4) for (int i = 0; i < 4; i++) {                                         \
                            const uint8_t *p = q + 96 * (4 * hh + i);                                                 \
                            const V##i w = name##_w(r8k_load_##X(p + 32 * (s & 1), gb), r8k_load_##X(p + 64, gb), s);  \
                            for (int c = 0; c < C; c++) {                                                             \
                                int32_t four;                                                                         \
                                memcpy(&four, y[c]->qs + 128 * h + 32 * s + 4 * (4 * half + i), 4);                   \
                                part[c] = R8K_DOT32_##X(part[c], w, P##_set1_epi32(four));                            \
                            }                                                                                         \
                        }                                                                                             \
                        const V##i sc = r8q6_scales_##X(t + 16 + 8 * (8 * h + 2 * s + half), gb);                    \
                        for (int c = 0; c < C; c++) sumi[c] = P##_add_epi32(sumi[c], P##_mullo_epi32(part[c], sc));   \
                    }                                                                                                 \
                }                                                                                                     \
            }                                                                                                         \
            const V d = r8k_f16_##X(t, gb);                                                                           \
            for (int c = 0; c < C; c++)                                                                               \
                acc[c] = P##_fmadd_ps(P##_mul_ps(d, P##_set1_ps(y[c]->d)), P##_cvtepi32_ps(sumi[c]), acc[c]);         \
        }                                                                                                             \
        for (int c = 0; c < C; c++) P##_storeu_ps(out + c * G * R8_ROWS, acc[c]);                                     \
    }

R8Q6_COLS_X86(r8_q6_K_cols, 1, ymm, __m256, _mm256, si256)
#if defined(__AVX512F__)
R8Q6_COLS_X86(r8_q6_K_pair, 2, zmm, __m512, _mm512, si512)
#endif
#undef R8Q6_COLS_X86

#if defined(__AVX512F__) && defined(PGC_VNNI512)
/* Wide passes (prompts, with AVX512-VNNI): two groups (16 rows) against up to R8_MAX_COLS columns. Each K block of
   the tile is unpacked once into the byte vectors, scales and mins the column kernels above build chunk by chunk
   (r8w_block), then R8W_COLS columns at a time run on them: a chunk costs one load for the columns' byte dots instead
   of its unpacking per R8_COLS columns. The same integers and the same float operations per row and column as
   r8_q4_K_pair, r8_q5_K_pair and r8_q6_K_pair, so the same bits. */
#define R8W_COLS 12
typedef struct {
    __m512i w[64];   /* Q4_K, Q5_K: sub-block sb's chunk j at 8 sb + j; Q6_K: sub-block u's chunk i at 4 u + i */
    __m512i sc[16];  /* the rows' scales of each sub-block (Q4_K, Q5_K: 8 of 32 values; Q6_K: 16 of 16) */
    __m512i mins[4]; /* Q4_K, Q5_K: the rows' mins of sub-blocks 2p, 2p + 1 as 16-bit pairs */
    __m512 d, dm;
} r8w_block;

/* the four signed bytes at p as one 32-bit lane (broadcast to every lane: GCC's VPBROADCASTD from memory; measured,
   VPDPBUSD's embedded {1to16} broadcast instead was 4% slower here) */
static inline int32_t r8w_four(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Q4_K or Q5_K (T): block t of both groups (gb bytes apart) into u, as R8K_COLS_X86 unpacks it */
AINLINE void r8w_unpack_k(const int T, const uint8_t *t, size_t gb, r8w_block *u) {
    uint8_t sc[128], mn[128];
    r8k_unpack(t, sc, mn);
    r8k_unpack(t + gb, sc + 64, mn + 64);
    for (int sb = 0; sb < 8; sb++) u->sc[sb] = r8k_scales_zmm(sc + 8 * sb);
    for (int p = 0; p < 4; p++) u->mins[p] = r8k_mins_zmm(mn + 16 * p);
    u->d = r8k_f16_zmm(t, gb);
    u->dm = r8k_f16_zmm(t + 16, gb);
    const uint8_t *q = t + r8_hdr(T);
    R8_UNROLL(8) for (int sb = 0; sb < 8; sb++)
        R8_UNROLL(8) for (int j = 0; j < 8; j++) u->w[8 * sb + j] = r8k_values_zmm(T, q, gb, sb, j);
}

/* Q6_K: block t of both groups into u, as R8Q6_COLS_X86 unpacks it (sub-block u = 4 hh + s: h = hh / 2, ggml's
   sub-block 8 h + 2 s + hh % 2) */
AINLINE void r8w_unpack_q6(const uint8_t *t, size_t gb, r8w_block *u) {
    const uint8_t *q = t + r8_hdr(T_Q6_K);
    R8_UNROLL(4) for (int hh = 0; hh < 4; hh++) {
        const int h = hh / 2, half = hh % 2;
        R8_UNROLL(4) for (int s = 0; s < 4; s++) {
            u->sc[4 * hh + s] = r8q6_scales_zmm(t + 16 + 8 * (8 * h + 2 * s + half), gb);
            R8_UNROLL(4) for (int i = 0; i < 4; i++) {
                const uint8_t *p = q + 96 * (4 * hh + i);
                const __m512i l = r8k_load_zmm(p + 32 * (s & 1), gb), qh = r8k_load_zmm(p + 64, gb);
                u->w[4 * (4 * hh + s) + i] = r8_q6_K_pair_w(l, qh, s);
            }
        }
    }
    u->d = r8k_f16_zmm(t, gb);
}

/* one unpacked Q4_K or Q5_K block against C columns (block pointers y) into acc, accm (one vector a column) */
AINLINE void r8w_k_cols(const r8w_block *u, const bq8_K *const *y, const int C, __m512 *acc, __m512 *accm) {
    __m512i sumi[R8W_COLS];
    for (int c = 0; c < C; c++) sumi[c] = _mm512_setzero_si512();
    for (int sb = 0; sb < 8; sb++) {
        __m512i part[R8W_COLS];
        for (int c = 0; c < C; c++) part[c] = _mm512_setzero_si512();
        R8_UNROLL(8) for (int j = 0; j < 8; j++) {
            const __m512i w = u->w[8 * sb + j];
            for (int c = 0; c < C; c++)
                part[c] = _mm512_dpbusd_epi32(part[c], w, _mm512_set1_epi32(r8w_four(y[c]->qs + 32 * sb + 4 * j)));
        }
        for (int c = 0; c < C; c++) sumi[c] = _mm512_add_epi32(sumi[c], _mm512_mullo_epi32(part[c], u->sc[sb]));
    }
    for (int c = 0; c < C; c++) {
        int32_t pairs[4];
        q8k_sub_block_pairs(y[c], pairs);
        __m512i summ = _mm512_setzero_si512();
        for (int p = 0; p < 4; p++)
            summ = _mm512_add_epi32(summ, _mm512_madd_epi16(u->mins[p], _mm512_set1_epi32(pairs[p])));
        const __m512 yd = _mm512_set1_ps(y[c]->d);
        acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(u->d, yd), _mm512_cvtepi32_ps(sumi[c]), acc[c]);
        accm[c] = _mm512_fmadd_ps(_mm512_mul_ps(u->dm, yd), _mm512_cvtepi32_ps(summ), accm[c]);
    }
}

/* one unpacked Q6_K block against C columns into acc */
AINLINE void r8w_q6_cols(const r8w_block *u, const bq8_K *const *y, const int C, __m512 *acc) {
    __m512i sumi[R8W_COLS];
    for (int c = 0; c < C; c++) sumi[c] = _mm512_setzero_si512();
    for (int sub = 0; sub < 16; sub++) {
        const int hh = sub / 4, s = sub % 4, h = hh / 2, half = hh % 2;
        __m512i part[R8W_COLS];
        for (int c = 0; c < C; c++) part[c] = _mm512_set1_epi32(-32 * y[c]->bsums[8 * h + 2 * s + half]);
        R8_UNROLL(4) for (int i = 0; i < 4; i++) {
            const __m512i w = u->w[4 * sub + i];
            const int at = 128 * h + 32 * s + 4 * (4 * half + i);
            for (int c = 0; c < C; c++)
                part[c] = _mm512_dpbusd_epi32(part[c], w, _mm512_set1_epi32(r8w_four(y[c]->qs + at)));
        }
        for (int c = 0; c < C; c++) sumi[c] = _mm512_add_epi32(sumi[c], _mm512_mullo_epi32(part[c], u->sc[sub]));
    }
    for (int c = 0; c < C; c++)
        acc[c] = _mm512_fmadd_ps(_mm512_mul_ps(u->d, _mm512_set1_ps(y[c]->d)), _mm512_cvtepi32_ps(sumi[c]), acc[c]);
}

#define R8W_CALL(C)                                                                                                   \
    (T == T_Q6_K ? r8w_q6_cols(&u, y + c0, C, acc + c0) : r8w_k_cols(&u, y + c0, C, acc + c0, accm + c0))
/* type T's two groups (x, gb bytes apart) against nc <= R8_MAX_COLS columns (by bytes apart from vy) into out */
AINLINE void r8w_wide(const int T, int64_t k, const uint8_t *x, size_t gb, const void *vy, size_t by, int nc,
                      float *out) {
    const int tile = r8_tile(T);
    __m512 acc[R8_MAX_COLS], accm[R8_MAX_COLS];
    for (int c = 0; c < nc; c++) acc[c] = accm[c] = _mm512_setzero_ps();
    r8w_block u;
    const bq8_K *y[R8_MAX_COLS];
    for (int64_t b = 0; b < k / QKK; b++) {
        const uint8_t *t = x + b * tile;
        if (T == T_Q6_K) r8w_unpack_q6(t, gb, &u);
        else r8w_unpack_k(T, t, gb, &u);
        for (int c = 0; c < nc; c++) y[c] = (const bq8_K *)((const char *)vy + c * by) + b;
        for (int c0 = 0; c0 < nc;) {
            const int w = nc - c0 >= R8W_COLS ? R8W_COLS : nc - c0 >= 8 ? 8 : nc - c0 >= 4 ? 4 : nc - c0 >= 2 ? 2 : 1;
            switch (w) {
            case 1: R8W_CALL(1); break;
            case 2: R8W_CALL(2); break;
            case 4: R8W_CALL(4); break;
            case 8: R8W_CALL(8); break;
            default: R8W_CALL(R8W_COLS); break;
            }
            c0 += w;
        }
    }
    for (int c = 0; c < nc; c++)
        _mm512_storeu_ps(out + c * 2 * R8_ROWS, T == T_Q6_K ? acc[c] : _mm512_sub_ps(acc[c], accm[c]));
}
#undef R8W_CALL
static void r8w_q4_K(int64_t k, const void *x, size_t gb, const void *y, size_t by, int nc, float *out) {
    r8w_wide(T_Q4_K, k, (const uint8_t *)x, gb, y, by, nc, out);
}
static void r8w_q5_K(int64_t k, const void *x, size_t gb, const void *y, size_t by, int nc, float *out) {
    r8w_wide(T_Q5_K, k, (const uint8_t *)x, gb, y, by, nc, out);
}
static void r8w_q6_K(int64_t k, const void *x, size_t gb, const void *y, size_t by, int nc, float *out) {
    r8w_wide(T_Q6_K, k, (const uint8_t *)x, gb, y, by, nc, out);
}
#endif
#undef R8K_VNNI_ymm
#undef R8K_DOT_ymm
#undef R8K_VNNI_zmm
#undef R8K_DOT_zmm
#undef R8K_DOT32_ymm
#undef R8K_DOT32_zmm

/* the pgc_r8_fn entries: Q4_1 one group and column per pass; the others up to R8_COLS columns, and with AVX-512
   two groups (prompts; mat-vec measured faster one group at a time) */
static void XSFX(r8_q4_1)(int64_t k, const void *x, size_t gb, int ng, const void *y, size_t by, int nc, float *out) {
    for (int c = 0; c < nc; c++)
        for (int g = 0; g < ng; g++)
            XSFX(r8_q4_1_rows)(k, (const char *)x + g * gb, (const char *)y + c * by, out + (c * ng + g) * R8_ROWS);
}

/* a pass takes w = 8, 4, 2 or 1 columns (yc: its first), so that the kernels are instantiated for four widths */
#define R8K_CASES(call)                                                                                     \
    switch (w) {                                                                                            \
    case 1: call(1); break;                                                                                 \
    case 2: call(2); break;                                                                                 \
    case 4: call(4); break;                                                                                 \
    default: call(8); break;                                                                                \
    }

#if defined(__AVX512F__)
#define R8K_PAIRS(t)                                                                                        \
    if (ng == 2 && w > 1) {                                                                                 \
        R8K_CASES(R8K_PAIR_##t)                                                                             \
        c0 += w;                                                                                            \
        continue;                                                                                           \
    }
#else
#define R8K_PAIRS(t)
#endif
#define R8K_NO_PAIRS(t)
/* the wide passes from R8W_MIN_COLS columns on (AVX512-VNNI, the K types) */
#define R8W_MIN_COLS 8
#if defined(__AVX512F__) && defined(PGC_VNNI512)
#define R8K_WIDE(t)                                                                                         \
    if (ng == 2 && nc >= R8W_MIN_COLS) {                                                                    \
        r8w_##t(k, x, gb, y, by, nc, out);                                                                  \
        return;                                                                                             \
    }
#else
#define R8K_WIDE(t)
#endif
#define R8K_NO_WIDE(t)
#define R8K_ENTRY(t, PAIRS, WIDE)                                                                           \
    static void XSFX(r8_##t)(int64_t k, const void *x, size_t gb, int ng, const void *y, size_t by, int nc, \
                             float *out) {                                                                  \
        WIDE(t)                                                                                             \
        for (int c0 = 0; c0 < nc;) {                                                                        \
            const int w = nc - c0 >= 8 ? 8 : nc - c0 >= 4 ? 4 : nc - c0 >= 2 ? 2 : 1;                      \
            const char *yc = (const char *)y + c0 * by;                                                     \
            PAIRS(t)                                                                                        \
            for (int g = 0; g < ng; g++) {                                                                  \
                float o[R8_COLS * R8_ROWS];                                                                 \
                R8K_CASES(R8K_ONE_##t)                                                                      \
                for (int c = 0; c < w; c++)                                                                 \
                    memcpy(out + ((c0 + c) * ng + g) * R8_ROWS, o + c * R8_ROWS, sizeof(float) * R8_ROWS);  \
            }                                                                                               \
            c0 += w;                                                                                        \
        }                                                                                                   \
    }
#define R8K_PAIR_q4_0(C) r8_q4_0_pair(k, (const uint8_t *)x, gb, yc, by, C, out + c0 * 2 * R8_ROWS)
#define R8K_PAIR_q5_0(C) r8_q5_0_pair(k, (const uint8_t *)x, gb, yc, by, C, out + c0 * 2 * R8_ROWS)
#define R8K_PAIR_q5_1(C) r8_q5_1_pair(k, (const uint8_t *)x, gb, yc, by, C, out + c0 * 2 * R8_ROWS)
#define R8K_PAIR_q8_0(C) r8_q8_0_pair(k, (const uint8_t *)x, gb, yc, by, C, out + c0 * 2 * R8_ROWS)
#define R8K_PAIR_q4_K(C) r8_q4_K_pair(k, (const uint8_t *)x, gb, yc, by, C, out + c0 * 2 * R8_ROWS)
#define R8K_PAIR_q5_K(C) r8_q5_K_pair(k, (const uint8_t *)x, gb, yc, by, C, out + c0 * 2 * R8_ROWS)
#define R8K_PAIR_q6_K(C) r8_q6_K_pair(k, (const uint8_t *)x, gb, yc, by, C, out + c0 * 2 * R8_ROWS)
#define R8K_ONE_q4_0(C) r8_q4_0_cols(k, (const uint8_t *)x + g * gb, gb, yc, by, C, o)
#define R8K_ONE_q5_0(C) r8_q5_0_cols(k, (const uint8_t *)x + g * gb, gb, yc, by, C, o)
#define R8K_ONE_q5_1(C) r8_q5_1_cols(k, (const uint8_t *)x + g * gb, gb, yc, by, C, o)
#define R8K_ONE_q8_0(C) r8_q8_0_cols(k, (const uint8_t *)x + g * gb, gb, yc, by, C, o)
#define R8K_ONE_q4_K(C) r8_q4_K_cols(k, (const uint8_t *)x + g * gb, gb, yc, by, C, o)
#define R8K_ONE_q5_K(C) r8_q5_K_cols(k, (const uint8_t *)x + g * gb, gb, yc, by, C, o)
#define R8K_ONE_q6_K(C) r8_q6_K_cols(k, (const uint8_t *)x + g * gb, gb, yc, by, C, o)
R8K_ENTRY(q4_0, R8K_PAIRS, R8K_NO_WIDE)
R8K_ENTRY(q5_0, R8K_PAIRS, R8K_NO_WIDE)
R8K_ENTRY(q5_1, R8K_PAIRS, R8K_NO_WIDE)
#if defined(PGC_VNNI512)
R8K_ENTRY(q8_0, R8K_PAIRS, R8K_NO_WIDE)
#else
R8K_ENTRY(q8_0, R8K_NO_PAIRS, R8K_NO_WIDE)
#endif
R8K_ENTRY(q4_K, R8K_PAIRS, R8K_WIDE)
R8K_ENTRY(q5_K, R8K_PAIRS, R8K_WIDE)
R8K_ENTRY(q6_K, R8K_PAIRS, R8K_WIDE)
#undef R8K_ENTRY
#undef R8K_PAIRS
#undef R8K_NO_PAIRS
#undef R8K_WIDE
#undef R8K_NO_WIDE
#undef R8K_CASES
