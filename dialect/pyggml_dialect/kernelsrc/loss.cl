/* Cross-entropy loss of logits x against target probabilities t, row by row (rows of ne0 classes):
 *   CROSS_ENTROPY_LOSS       L = -(1 / rows) * sum over rows of sum_i t_i * log_softmax(x)_i
 *   CROSS_ENTROPY_LOSS_BACK  dx_i = (softmax(x)_i - t_i) * dL / rows
 * One work-group of WG lanes per row. The loss takes two launches: each row's sum into scratch (float per row),
 * then one work-group adds them in a fixed order (no atomics: the same number on every run). Defines: WG. */
#include "reduce.h"

#define ROW_OF(x) i64 row = GRP(0); \
    i64 i1 = row % x##_ne1, i2 = (row / x##_ne1) % x##_ne2, i3 = row / (x##_ne1 * x##_ne2); i32 l = LID(0)

/* the row's maximum and its sum of exp(x - max), for every lane */
INLINE float row_max(TENSOR(x), i64 i1, i64 i2, i64 i3, LOCAL_PTR float *buf) {
    float mx = -INFINITY_F;
    for (i64 i0 = LID(0); i0 < x_ne0; i0 += WG) mx = FMAX(mx, load_f32(AT(x, i0, i1, i2, i3)));
    return wg_max(mx, buf);
}

INLINE acc_t row_sum_exp(TENSOR(x), i64 i1, i64 i2, i64 i3, float mx, LOCAL_PTR acc_t *buf) {
    acc_t s = 0;
    for (i64 i0 = LID(0); i0 < x_ne0; i0 += WG) s += (acc_t)EXP(load_f32(AT(x, i0, i1, i2, i3)) - mx);
    return wg_sum_acc(s, buf);
}

/* part[row] = sum_i (x_i - max - log(sum exp(x - max))) * t_i */
KERNEL void k_cross_entropy_rows(TENSOR(x), TENSOR(t), GLOBAL float *part) {
    LOCAL float fbuf[WG];
    LOCAL acc_t abuf[WG];
    ROW_OF(x);
    float mx = row_max(TENSOR_ARGS(x), i1, i2, i3, fbuf);
    float ls = LOG((float)row_sum_exp(TENSOR_ARGS(x), i1, i2, i3, mx, abuf));
    acc_t s = 0;
    for (i64 i0 = l; i0 < x_ne0; i0 += WG) {
        s += (acc_t)(((load_f32(AT(x, i0, i1, i2, i3)) - mx) - ls) * load_f32(AT(t, i0, i1, i2, i3)));
    }
    s = wg_sum_acc(s, abuf);
    if (l == 0) part[row] = (float)s;
}

/* d = -(1 / rows) * sum of part[0 .. rows) */
KERNEL void k_cross_entropy_sum(GLOBAL const float *part, i64 rows, TENSOR(d)) {
    LOCAL acc_t buf[WG];
    acc_t s = 0;
    for (i64 r = LID(0); r < rows; r += WG) s += (acc_t)part[r];
    s = wg_sum_acc(s, buf);
    if (LID(0) == 0) store_f32(BASE(d), (float)(-s / (acc_t)rows));
}

/* src0 = dL (a scalar), src1 = x, src2 = t */
KERNEL void k_cross_entropy_back(TENSOR(dl), TENSOR(x), TENSOR(t), TENSOR(d)) {
    LOCAL float fbuf[WG];
    LOCAL acc_t abuf[WG];
    ROW_OF(x);
    float mx = row_max(TENSOR_ARGS(x), i1, i2, i3, fbuf);
    float inv = (float)(1 / row_sum_exp(TENSOR_ARGS(x), i1, i2, i3, mx, abuf));
    float k = load_f32(BASE(dl)) / (float)NROWS(x);
    for (i64 i0 = l; i0 < x_ne0; i0 += WG) {
        float p = EXP(load_f32(AT(x, i0, i1, i2, i3)) - mx) * inv;
        store_f32(AT(d, i0, i1, i2, i3), (p - load_f32(AT(t, i0, i1, i2, i3))) * k);
    }
}
