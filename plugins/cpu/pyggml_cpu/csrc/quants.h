/* ggml's block layouts, byte for byte (GGUF files map onto them directly). */
#ifndef PGC_QUANTS_H
#define PGC_QUANTS_H
#include "pgc.h"
#include "shared.h"
#include "blocks.h" /* pg_nearest_int, pg_scale_min_k4, pg_q3k_scale ...: shared with the OpenCL and CUDA kernels */

#define QK 32
#define QKK 256
typedef struct { uint16_t d; uint8_t qs[QK / 2]; } bq4_0;
typedef struct { uint16_t d, m; uint8_t qs[QK / 2]; } bq4_1;
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[QK / 2]; } bq5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[QK / 2]; } bq5_1;
typedef struct { uint16_t d; int8_t qs[QK]; } bq8_0;
typedef struct { uint16_t d, s; int8_t qs[QK]; } bq8_1;
typedef struct { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; } bq2_K;
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; } bq3_K;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; } bq4_K;
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } bq5_K;
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; } bq6_K;
typedef struct { float d; int8_t qs[QKK]; int16_t bsums[16]; } bq8_K;

_Static_assert(sizeof(bq4_0) == 18, "q4_0"); _Static_assert(sizeof(bq4_1) == 20, "q4_1");
_Static_assert(sizeof(bq5_0) == 22, "q5_0"); _Static_assert(sizeof(bq5_1) == 24, "q5_1");
_Static_assert(sizeof(bq8_0) == 34, "q8_0"); _Static_assert(sizeof(bq8_1) == 36, "q8_1");
_Static_assert(sizeof(bq2_K) == 84, "q2_K"); _Static_assert(sizeof(bq3_K) == 110, "q3_K");
_Static_assert(sizeof(bq4_K) == 144, "q4_K"); _Static_assert(sizeof(bq5_K) == 176, "q5_K");
_Static_assert(sizeof(bq6_K) == 210, "q6_K"); _Static_assert(sizeof(bq8_K) == 292, "q8_K");

/* the 16 signed 6-bit scales of a Q3_K block */
static inline void pgc_q3k_scales(const uint8_t *s12, int8_t *out) {
    for (int j = 0; j < 16; j++) out[j] = (int8_t)pg_q3k_scale(s12, j);
}

void pgc_dequant_row(int type, const void *x, float *y, int64_t n);
#endif
