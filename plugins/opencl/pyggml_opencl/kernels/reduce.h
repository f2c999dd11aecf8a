/* Work-group reductions over WG lanes (WG, a power of two, is defined by the host). `buf` is LOCAL float[WG]. */
#ifndef PYGGML_REDUCE_H
#define PYGGML_REDUCE_H
#include "common.h"

/* wg_sum (float) and wg_sum_acc (acc_t): the sum of v over the work-group, returned to every lane */
#define PG_WG_SUM(name, T)                                   \
    INLINE T name(T v, LOCAL_PTR T *buf) {                   \
        i32 l = LID(0);                                      \
        buf[l] = v;                                          \
        BARRIER();                                           \
        for (i32 s = WG / 2; s > 0; s >>= 1) {               \
            if (l < s) buf[l] += buf[l + s];                 \
            BARRIER();                                       \
        }                                                    \
        T r = buf[0];                                        \
        BARRIER();                                           \
        return r;                                            \
    }
PG_WG_SUM(wg_sum, float)
PG_WG_SUM(wg_sum_acc, acc_t)

INLINE float wg_max(float v, LOCAL_PTR float *buf) {
    i32 l = LID(0);
    buf[l] = v;
    BARRIER();
    for (i32 s = WG / 2; s > 0; s >>= 1) {
        if (l < s) buf[l] = FMAX(buf[l], buf[l + s]);
        BARRIER();
    }
    float r = buf[0];
    BARRIER();
    return r;
}

/* ALiBi slope of head h (1 without ALiBi: max_bias <= 0) */
INLINE float alibi_slope(i64 h, float max_bias, i32 n_head_log2, float m0, float m1) {
    if (max_bias <= 0.f) return 1.f;
    return h < n_head_log2 ? POW(m0, (float)(h + 1)) : POW(m1, (float)(2 * (h - n_head_log2) + 1));
}
#endif
