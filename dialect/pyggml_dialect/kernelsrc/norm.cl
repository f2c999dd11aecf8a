/* Row reductions: NORM / RMS_NORM / L2_NORM (with has_w, fused with the MUL by w that follows: d = norm(a) * w, w
 * broadcast over d as MUL's src1), GROUP_NORM, SOFT_MAX. One work-group of WG lanes per row (group).
 * Defines: WG, TM (mask type of SOFT_MAX). */
#include "reduce.h"

#define NORM_MEAN 0
#define NORM_RMS 1
#define NORM_L2 2

KERNEL void k_norm(TENSOR(a), TENSOR(w), TENSOR(d), i32 kind, float eps, i32 has_w) {
    LOCAL acc_t buf[WG];
    i64 row = GRP(0);
    i64 i1 = row % a_ne1, i2 = (row / a_ne1) % a_ne2, i3 = row / (a_ne1 * a_ne2);
    i32 l = LID(0);
    float mean = 0.f;
    if (kind == NORM_MEAN) {
        acc_t s = 0;
        for (i64 i0 = l; i0 < a_ne0; i0 += WG) s += load_f32(AT(a, i0, i1, i2, i3));
        mean = (float)(wg_sum_acc(s, buf) / (acc_t)a_ne0);
    }
    acc_t sq = 0;
    for (i64 i0 = l; i0 < a_ne0; i0 += WG) {
        float x = load_f32(AT(a, i0, i1, i2, i3)) - mean;
        sq += (acc_t)x * x;
    }
    sq = wg_sum_acc(sq, buf);
    float f = kind == NORM_L2 ? 1.f / FMAX(SQRT((float)sq), eps) : 1.f / SQRT((float)(sq / (acc_t)a_ne0) + eps);
    for (i64 i0 = l; i0 < a_ne0; i0 += WG) {
        float y = (load_f32(AT(a, i0, i1, i2, i3)) - mean) * f;
        if (has_w) y = y * load_f32(AT(w, i0 % w_ne0, i1 % w_ne1, i2 % w_ne2, i3 % w_ne3));
        store_f32(AT(d, i0, i1, i2, i3), y);
    }
}

/* group g of batch i3: channels [g * per_group, min(ne2, (g + 1) * per_group)) */
KERNEL void k_group_norm(TENSOR(a), TENSOR(d), i64 per_group, float eps) {
    LOCAL float buf[WG];
    i64 n_groups = (a_ne2 + per_group - 1) / per_group;
    i64 g = GRP(0) % n_groups, i3 = GRP(0) / n_groups;
    i64 c0 = g * per_group, c1 = c0 + per_group < a_ne2 ? c0 + per_group : a_ne2;
    i64 plane = a_ne0 * a_ne1, n = plane * (c1 - c0);
    i32 l = LID(0);
    float s = 0.f;
    for (i64 e = l; e < n; e += WG) s += load_f32(AT(a, e % a_ne0, (e / a_ne0) % a_ne1, c0 + e / plane, i3));
    float mean = wg_sum(s, buf) / (float)n;
    float sq = 0.f;
    for (i64 e = l; e < n; e += WG) {
        float x = load_f32(AT(a, e % a_ne0, (e / a_ne0) % a_ne1, c0 + e / plane, i3)) - mean;
        sq += x * x;
    }
    float f = RSQRT(wg_sum(sq, buf) / (float)n + eps);
    for (i64 e = l; e < n; e += WG) {
        i64 i0 = e % a_ne0, i1 = (e / a_ne0) % a_ne1, i2 = c0 + e / plane;
        store_f32(AT(d, i0, i1, i2, i3), (load_f32(AT(a, i0, i1, i2, i3)) - mean) * f);
    }
}

/* softmax(x * scale + slope[h] * mask) per row; mask rows broadcast over dims 2, 3; a sink per head joins the
 * denominator. The result row is first used as scratch for the scaled logits. */
KERNEL void k_soft_max(TENSOR(a), TENSOR(m), TENSOR(s), TENSOR(d), float scale, float max_bias, i32 has_mask,
                       i32 has_sinks, i32 n_head_log2, float m0, float m1) {
    LOCAL float buf[WG];
    LOCAL acc_t abuf[WG];
    i64 row = GRP(0);
    i64 i1 = row % a_ne1, i2 = (row / a_ne1) % a_ne2, i3 = row / (a_ne1 * a_ne2);
    i32 l = LID(0);
    float slope = has_mask ? alibi_slope(i2, max_bias, n_head_log2, m0, m1) : 0.f;
    float mx = -INFINITY_F;
    for (i64 i0 = l; i0 < a_ne0; i0 += WG) {
        float z = load_f32(AT(a, i0, i1, i2, i3)) * scale;
        if (has_mask) z += slope * LOADT(TM, AT(m, i0, i1, i2 % m_ne2, i3 % m_ne3));
        store_f32(AT(d, i0, i1, i2, i3), z);
        mx = FMAX(mx, z);
    }
    mx = wg_max(mx, buf);
    float sink = has_sinks ? load_f32(AT(s, i2, 0, 0, 0)) : -INFINITY_F;
    if (has_sinks) mx = FMAX(mx, sink);
    acc_t sum = 0;
    for (i64 i0 = l; i0 < a_ne0; i0 += WG) {
        float e = EXP(load_f32(AT(d, i0, i1, i2, i3)) - mx);
        store_f32(AT(d, i0, i1, i2, i3), e);
        sum += e;
    }
    sum = wg_sum_acc(sum, abuf);
    if (has_sinks) sum += EXP(sink - mx);
    float inv = (float)(1 / sum);
    for (i64 i0 = l; i0 < a_ne0; i0 += WG) {
        GLOBAL char *p = AT(d, i0, i1, i2, i3);
        store_f32(p, load_f32(p) * inv);
    }
}
