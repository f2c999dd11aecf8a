/* Softmax pieces of SOFT_MAX and FLASH_ATTN_EXT shared by the OpenCL and CUDA kernels (norm.cl, attention.cl) and
 * the cpu plugin's C (norm.c, attn.c). */
#ifndef PYGGML_SOFTMAX_H
#define PYGGML_SOFTMAX_H
#include "dialect.h"

/* ALiBi slope of head h: m0^(h + 1) below n_head_log2, else m1^(2 (h - n_head_log2) + 1), with n_head_log2, m0 and
 * m1 of pyggml.ops.attention.alibi; 1 without ALiBi (max_bias <= 0) */
INLINE float alibi_slope(i64 h, float max_bias, i32 n_head_log2, float m0, float m1) {
    if (max_bias <= 0.f) return 1.f;
    return h < n_head_log2 ? POW(m0, (float)(h + 1)) : POW(m1, (float)(2 * (h - n_head_log2) + 1));
}

/* one step of an online softmax, scores visited in order: with the running maximum M, the score s multiplies the
 * running sums (denominator and weighted values) by *a_m and adds its value with weight *a_v. A score above M
 * becomes the maximum: *a_m = exp(M - s), *a_v = 1; otherwise *a_m = 1, *a_v = exp(s - M). Returns the new M. */
INLINE float pg_online_softmax(float M, float s, float *a_m, float *a_v) {
    if (s > M) {
        *a_m = EXP(M - s);
        *a_v = 1.f;
        return s;
    }
    *a_m = 1.f;
    *a_v = EXP(s - M);
    return M;
}
#endif
