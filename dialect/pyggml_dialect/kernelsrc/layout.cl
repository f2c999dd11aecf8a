/* Layout kernels: REPEAT, CONCAT, PAD, SET / ACC, DIAG, DIAG_MASK_*, ARANGE, raw byte copies.
 * Defines: T0 (src0 type), T1 (src1 type), plain types. One work-item per destination element unless noted. */
#include "common.h"

KERNEL void k_repeat(TENSOR(a), TENSOR(d)) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    copy_bytes(AT(d, i0, i1, i2, i3), AT(a, i0 % a_ne0, i1 % a_ne1, i2 % a_ne2, i3 % a_ne3), TSZ(T0));
}

/* a ++ b along dim, one work-item per unit of d: an element of a plain type (blk = 1), or a whole block of blk
 * elements of a block type, moved as its bsz bytes (never re-quantised); T0 plays no part */
KERNEL void k_concat(TENSOR(a), TENSOR(b), TENSOR(d), i32 dim, i64 blk, i32 bsz) {
    i64 i = GID(0);
    i64 n0 = d_ne0 / blk;
    if (i >= n0 * NROWS(d)) return;
    i64 id[4] = {i % n0, (i / n0) % d_ne1, (i / (n0 * d_ne1)) % d_ne2, i / (n0 * d_ne1 * d_ne2)};
    i64 na[4] = {a_ne0 / blk, a_ne1, a_ne2, a_ne3};
    GLOBAL char *out = AT(d, id[0], id[1], id[2], id[3]);
    GLOBAL const char *s;
    if (id[dim] < na[dim]) {
        s = AT(a, id[0], id[1], id[2], id[3]);
    } else {
        id[dim] -= na[dim];
        s = AT(b, id[0], id[1], id[2], id[3]);
    }
    copy_bytes(out, s, bsz);
}

KERNEL void k_pad(TENSOR(a), TENSOR(d), i64 lp0, i64 lp1, i64 lp2, i64 lp3) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    i64 j0 = i0 - lp0, j1 = i1 - lp1, j2 = i2 - lp2, j3 = i3 - lp3;
    int inside = j0 >= 0 && j0 < a_ne0 && j1 >= 0 && j1 < a_ne1 && j2 >= 0 && j2 < a_ne2 && j3 >= 0 && j3 < a_ne3;
    store_f32(AT(d, i0, i1, i2, i3), inside ? load_f32(AT(a, j0, j1, j2, j3)) : 0.f);
}

/* the view (element size, nb1..nb3, byte offset) of d shaped as b gets b (SET) or d + b (ACC); d already
 * holds a copy of src0 */
KERNEL void k_set_acc(TENSOR(b), TENSOR(d), i64 vnb1, i64 vnb2, i64 vnb3, i64 voff, i32 acc) {
    i64 i = GID(0);
    if (i >= NEL(b)) return;
    UNRAVEL(b, i, i0, i1, i2, i3);
    GLOBAL char *p = BASE(d) + voff + i0 * d_nb0 + i1 * vnb1 + i2 * vnb2 + i3 * vnb3;
    float x = LOADT(T1, AT(b, i0, i1, i2, i3));
    STORET(T0, p, acc ? LOADT(T0, p) + x : x);
}

/* same-type copy by linear element index (d contiguous or not) */
KERNEL void k_copy(TENSOR(a), TENSOR(d)) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    UNRAVEL(a, i, j0, j1, j2, j3);
    copy_bytes(AT(d, i0, i1, i2, i3), AT(a, j0, j1, j2, j3), TSZ(T0));
}

/* n bytes from a's start to d's start (same block type, both contiguous); one work-item per byte */
KERNEL void k_copy_raw(TENSOR(a), TENSOR(d), i64 n) {
    i64 i = GID(0);
    if (i < n) BASE(d)[i] = BASE(a)[i];
}

KERNEL void k_diag(TENSOR(a), TENSOR(d)) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    store_f32(AT(d, i0, i1, i2, i3), i0 == i1 ? load_f32(AT(a, i0, 0, i2, i3)) : 0.f);
}

KERNEL void k_diag_mask(TENSOR(a), TENSOR(d), i32 n_past, float value) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    store_f32(AT(d, i0, i1, i2, i3), i0 > n_past + i1 ? value : load_f32(AT(a, i0, i1, i2, i3)));
}

KERNEL void k_arange(TENSOR(d), float start, float step) {
    i64 i = GID(0);
    if (i < d_ne0) store_f32(AT(d, i, 0, 0, 0), start + step * (float)i);
}
