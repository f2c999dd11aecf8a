/* Reductions and orderings: SUM, SUM_ROWS / MEAN, CUMSUM, ARGMAX, COUNT_EQUAL, ARGSORT / TOP_K.
 * Defines: T0 (src type), WG. */
#include "reduce.h"

/* one work-group per row (SUM: one group over every element, d_ne0 == 1 row) */
KERNEL void k_sum_rows(TENSOR(a), TENSOR(d), i32 mean, i32 all) {
    LOCAL float buf[WG];
    i64 row = GRP(0);
    i64 n = all ? NEL(a) : a_ne0;
    float s = 0.f;
    for (i64 e = LID(0); e < n; e += WG) {
        i64 f = all ? e : e + row * a_ne0;
        UNRAVEL(a, f, i0, i1, i2, i3);
        s += LOADT(T0, AT(a, i0, i1, i2, i3));
    }
    s = wg_sum(s, buf);
    if (LID(0) == 0) {
        i64 i1 = row % d_ne1, i2 = (row / d_ne1) % d_ne2, i3 = row / (d_ne1 * d_ne2);
        STORET(T0, AT(d, 0, i1, i2, i3), mean ? s / (float)n : s);
    }
}

/* one work-item per row */
KERNEL void k_cumsum(TENSOR(a), TENSOR(d)) {
    i64 row = GID(0);
    if (row >= NROWS(a)) return;
    i64 i1 = row % a_ne1, i2 = (row / a_ne1) % a_ne2, i3 = row / (a_ne1 * a_ne2);
    float s = 0.f;
    for (i64 i0 = 0; i0 < a_ne0; i0++) {
        s += load_f32(AT(a, i0, i1, i2, i3));
        store_f32(AT(d, i0, i1, i2, i3), s);
    }
}

/* one work-group per row; the first index of the largest value */
KERNEL void k_argmax(TENSOR(a), TENSOR(d)) {
    LOCAL float bv[WG];
    LOCAL i64 bi[WG];
    i64 row = GRP(0);
    i32 l = LID(0);
    float best = -INFINITY_F;
    i64 idx = -1;
    for (i64 i0 = l; i0 < a_ne0; i0 += WG) {
        float x = load_f32(AT(a, i0, row, 0, 0));
        if (idx < 0 || x > best) { best = x; idx = i0; }
    }
    bv[l] = best;
    bi[l] = idx;
    BARRIER();
    if (l == 0) {
        for (i32 j = 1; j < WG; j++) {
            if (bi[j] >= 0 && (bi[0] < 0 || bv[j] > bv[0] || (bv[j] == bv[0] && bi[j] < bi[0]))) {
                bv[0] = bv[j];
                bi[0] = bi[j];
            }
        }
        *(GLOBAL i32 *)AT(d, row, 0, 0, 0) = (i32)bi[0];
    }
}

/* one work-group over every element (i32); result i64 */
KERNEL void k_count_equal(TENSOR(a), TENSOR(b), TENSOR(d)) {
    LOCAL i64 cnt[WG];
    i32 l = LID(0);
    i64 c = 0;
    for (i64 e = l; e < NEL(a); e += WG) {
        UNRAVEL(a, e, i0, i1, i2, i3);
        c += *(GLOBAL const i32 *)AT(a, i0, i1, i2, i3) == *(GLOBAL const i32 *)AT(b, i0, i1, i2, i3);
    }
    cnt[l] = c;
    BARRIER();
    if (l == 0) {
        for (i32 j = 1; j < WG; j++) c += cnt[j];
        *(GLOBAL i64 *)BASE(d) = c;
    }
}

/* one work-item per source element: its rank in the row (stable: ties by index) is its output slot;
 * slots >= k (TOP_K) are dropped */
KERNEL void k_argsort(TENSOR(a), TENSOR(d), i32 desc, i64 k) {
    i64 i = GID(0);
    if (i >= NEL(a)) return;
    UNRAVEL(a, i, i0, i1, i2, i3);
    float x = load_f32(AT(a, i0, i1, i2, i3));
    i64 rank = 0;
    for (i64 j = 0; j < a_ne0; j++) {
        float y = load_f32(AT(a, j, i1, i2, i3));
        rank += (desc ? y > x : y < x) || (y == x && j < i0);
    }
    if (rank < k) *(GLOBAL i32 *)AT(d, rank, i1, i2, i3) = (i32)i0;
}
