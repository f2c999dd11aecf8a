/* Backward ops of training graphs: SILU_BACK, REPEAT_BACK (one work-item per destination element), GET_ROWS_BACK,
 * RMS_NORM_BACK and SOFT_MAX_BACK (one work-group of WG lanes per row). No atomics: every destination element is
 * summed by one work-item in a fixed order, so a training step gives the same numbers on every run.
 * Defines: T0 (src0), T1 (src1), TD (dst), WG. SILU_BACK and the row kernels read an element before they write it
 * and finish a row's sums before its first write, so they may run in place (dst a view of src0). */
#include "reduce.h"

/* dx = dy * s * (1 + x * (1 - s)), s = sigmoid(x); src0 = dy, src1 = x */
KERNEL void k_silu_back(TENSOR(dy), TENSOR(x), TENSOR(d)) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    float xv = LOADT(T1, AT(x, i0, i1, i2, i3));
    float s = 1.f / (1.f + EXP(-xv));
    STORET(TD, AT(d, i0, i1, i2, i3), LOADT(T0, AT(dy, i0, i1, i2, i3)) * s * (1.f + xv * (1.f - s)));
}

/* d[k] = sum of a over every repeat of d's shape in a (a.ne = d.ne * r); repeats in order i3, i2, i1, i0 */
KERNEL void k_repeat_back(TENSOR(a), TENSOR(d)) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, k0, k1, k2, k3);
    i64 r0 = a_ne0 / d_ne0, r1 = a_ne1 / d_ne1, r2 = a_ne2 / d_ne2, r3 = a_ne3 / d_ne3;
    acc_t s = 0;
    for (i64 j3 = 0; j3 < r3; j3++)
        for (i64 j2 = 0; j2 < r2; j2++)
            for (i64 j1 = 0; j1 < r1; j1++)
                for (i64 j0 = 0; j0 < r0; j0++)
                    s += LOADT(T0, AT(a, j0 * d_ne0 + k0, j1 * d_ne1 + k1, j2 * d_ne2 + k2, j3 * d_ne3 + k3));
    STORET(TD, AT(d, k0, k1, k2, k3), (float)s);
}

/* d[i0, r] = sum of a[i0, j] over j ascending with ids[j] == r (a [nc, n], ids [n] i32, d [nc, rows] f32): one
 * work-group per destination row, each lane adding into its own columns of d as ggml's cpu kernel does (float sums in
 * the same order); an id outside [0, rows) sets the status word */
KERNEL void k_get_rows_back(TENSOR(a), TENSOR(ids), TENSOR(d), ERR_ARGS) {
    i64 r = GRP(0);
    i32 l = LID(0);
    for (i64 i0 = l; i0 < d_ne0; i0 += WG) store_f32(AT(d, i0, r, 0, 0), 0.f);
    for (i64 j = 0; j < ids_ne0; j++) {
        i64 id = (i64)*(GLOBAL const i32 *)AT(ids, j, 0, 0, 0);
        CHECK_INDEX(id, d_ne1);
        if (id != r) continue;
        for (i64 i0 = l; i0 < d_ne0; i0 += WG) {
            GLOBAL char *p = AT(d, i0, r, 0, 0);
            store_f32(p, load_f32(p) + LOADT(T0, AT(a, i0, j, 0, 0)));
        }
    }
}

/* row reductions: the row (i1, i2, i3) of work-group GRP(0) */
#define ROW_OF(x) i64 row = GRP(0); \
    i64 i1 = row % x##_ne1, i2 = (row / x##_ne1) % x##_ne2, i3 = row / (x##_ne1 * x##_ne2); i32 l = LID(0)

/* dx = (dz - x * sum(x dz) / (sum(x^2) + eps n)) / sqrt(sum(x^2) / n + eps); src0 = dz, src1 = x (f32) */
KERNEL void k_rms_norm_back(TENSOR(dz), TENSOR(x), TENSOR(d), float eps) {
    LOCAL acc_t buf[WG];
    ROW_OF(x);
    acc_t sxx = 0, sxdz = 0;
    for (i64 i0 = l; i0 < x_ne0; i0 += WG) {
        float xv = load_f32(AT(x, i0, i1, i2, i3));
        sxx += (acc_t)(xv * xv);
        sxdz += (acc_t)(xv * load_f32(AT(dz, i0, i1, i2, i3)));
    }
    sxx = wg_sum_acc(sxx, buf);
    sxdz = wg_sum_acc(sxdz, buf);
    float mean_eps = (float)sxx / (float)x_ne0 + eps;
    float sum_eps = (float)sxx + eps * (float)x_ne0;
    float rrms = 1.f / SQRT(mean_eps);
    float k = -(float)sxdz / sum_eps;
    for (i64 i0 = l; i0 < x_ne0; i0 += WG) {
        float v = (load_f32(AT(dz, i0, i1, i2, i3)) + load_f32(AT(x, i0, i1, i2, i3)) * k) * rrms;
        store_f32(AT(d, i0, i1, i2, i3), v);
    }
}

/* dx = scale * y * (dy - sum(y dy)); src0 = dy, src1 = y = softmax output (f32) */
KERNEL void k_soft_max_back(TENSOR(dy), TENSOR(y), TENSOR(d), float scale) {
    LOCAL acc_t buf[WG];
    ROW_OF(y);
    acc_t dot = 0;
    for (i64 i0 = l; i0 < y_ne0; i0 += WG) {
        dot += (acc_t)(load_f32(AT(y, i0, i1, i2, i3)) * load_f32(AT(dy, i0, i1, i2, i3)));
    }
    float dt = (float)wg_sum_acc(dot, buf);
    for (i64 i0 = l; i0 < y_ne0; i0 += WG) {
        float v = (load_f32(AT(dy, i0, i1, i2, i3)) - dt) * load_f32(AT(y, i0, i1, i2, i3)) * scale;
        store_f32(AT(d, i0, i1, i2, i3), v);
    }
}
