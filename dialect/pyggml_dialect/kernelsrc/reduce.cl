/* Reductions and orderings: SUM, SUM_ROWS / MEAN, CUMSUM, ARGMAX, COUNT_EQUAL, ARGSORT / TOP_K.
 * Defines: T0 (src type), WG. */
#include "reduce.h"

/* one work-group per row (SUM: one group over every element, d_ne0 == 1 row). Each lane adds millions of elements
 * for long rows: a compensated (Kahan) sum in acc_t (double where the device has it), so the small ones are not
 * lost (a float running sum was 0.2 % off at 16M elements, 15 % at 671M) */
#define KAHAN_ADD(s, c, x) {                                                               \
    acc_t y_ = (acc_t)(x) - (c), t_ = (s) + y_;                                              \
    (c) = (t_ - (s)) - y_;                                                                   \
    if ((c) != (c)) (c) = 0; /* an infinity met: the sum is +-inf or NaN, no compensation */ \
    (s) = t_;                                                                                \
}
KERNEL void k_sum_rows(TENSOR(a), TENSOR(d), i32 mean, i32 all) {
    LOCAL acc_t buf[WG];
    i64 row = GRP(0);
    i64 n = all ? NEL(a) : a_ne0;
    acc_t s = 0, c = 0;
    for (i64 e = LID(0); e < n; e += WG) {
        i64 f = all ? e : e + row * a_ne0;
        UNRAVEL(a, f, i0, i1, i2, i3);
        KAHAN_ADD(s, c, LOADT(T0, AT(a, i0, i1, i2, i3)));
    }
    s = wg_sum_acc(s, buf);
    if (LID(0) == 0) {
        i64 i1 = row % d_ne1, i2 = (row / d_ne1) % d_ne2, i3 = row / (d_ne1 * d_ne2);
        STORET(T0, AT(d, 0, i1, i2, i3), (float)(mean ? s / (acc_t)n : s));
    }
}

/* one work-item per row */
KERNEL void k_cumsum(TENSOR(a), TENSOR(d)) {
    i64 row = GID(0);
    if (row >= NROWS(a)) return;
    i64 i1 = row % a_ne1, i2 = (row / a_ne1) % a_ne2, i3 = row / (a_ne1 * a_ne2);
    acc_t s = 0, c = 0;
    for (i64 i0 = 0; i0 < a_ne0; i0++) {
        KAHAN_ADD(s, c, load_f32(AT(a, i0, i1, i2, i3)));
        store_f32(AT(d, i0, i1, i2, i3), (float)s);
    }
}

/* x above y in ARGMAX's order: a NaN above every number (numpy's argmax takes the first NaN) */
INLINE i32 above(float x, float y) { return x != x ? y == y : x > y; }
INLINE i32 same(float x, float y) { return x == y || (x != x && y != y); }

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
        if (idx < 0 || above(x, best)) { best = x; idx = i0; }
    }
    bv[l] = best;
    bi[l] = idx;
    BARRIER();
    if (l == 0) {
        for (i32 j = 1; j < WG; j++) {
            if (bi[j] >= 0 && (bi[0] < 0 || above(bv[j], bv[0]) || (same(bv[j], bv[0]) && bi[j] < bi[0]))) {
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

/* -1, 0, 1 as x is below, equal to, above y, with NaN above every number and NaNs equal (numpy's sort order):
 * a total order, so the ranks below are a permutation whatever the row holds */
INLINE i32 cmp_val(float x, float y) {
    i32 xn = x != x, yn = y != y;
    if (xn || yn) return xn - yn;
    return (x > y) - (x < y);
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
        i32 c = cmp_val(load_f32(AT(a, j, i1, i2, i3)), x);
        rank += (desc ? c > 0 : c < 0) || (c == 0 && j < i0);
    }
    if (rank < k) *(GLOBAL i32 *)AT(d, rank, i1, i2, i3) = (i32)i0;
}
