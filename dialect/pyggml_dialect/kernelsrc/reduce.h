/* Work-group reductions over WG lanes (WG, a power of two, is defined by the host). `buf` is LOCAL float[WG]. */
#ifndef PYGGML_REDUCE_H
#define PYGGML_REDUCE_H
#include "common.h"
/* alibi_slope, pg_online_softmax (pyggml.kernelsrc, shared with the cpu plugin) */
#include "softmax.h"

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

#endif
