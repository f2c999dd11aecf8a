/* The R8 kernels (repack.h) for x86, included by dot_x86.h: a group of eight weight rows against one activation
   column. A 32-byte chunk of a tile holds four values of each of the eight rows, so one byte dot
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

#define R8_ENTRIES(t, T)                                                                                    \
    static void XSFX(r8_##t)(int64_t k, const void *x, const void *y, float out[R8_ROWS]) {                \
        r8_rows(T, k, x, y, out);                                                                           \
    }
R8_ENTRIES(q4_0, T_Q4_0)
R8_ENTRIES(q4_1, T_Q4_1)
R8_ENTRIES(q8_0, T_Q8_0)
#undef R8_ENTRIES
