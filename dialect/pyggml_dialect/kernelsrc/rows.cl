/* Row gathers and scatters and block-type copies: GET_ROWS, SET_ROWS, CPY into / out of block types.
 * Defines: T0 (source type), TD (destination type), IDX_T (i32 | i64, index type), IS_QUANT (T0 is a block
 * type), RAWCOPY (same plain type on both sides: byte copy), QUANT_DST (TD is a block type: 32-element ones
 * through quants.h, 256-element K types through kquantize.h). */
#include "kquants.h"
#ifdef QUANT_DST
#include "kquantize.h"
#endif

#define LOAD_IDX(p) ((i64)*(GLOBAL const IDX_T *)(p))

#ifndef QUANT_DST
/* dst[:, i1, i2, i3] = a[:, ids[i1, i2, i3], i2, i3]; one work-item per destination element */
KERNEL void k_get_rows(TENSOR(a), TENSOR(ids), TENSOR(d), ERR_ARGS) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    i64 r = LOAD_IDX(AT(ids, i1, i2, i3, 0));
    CHECK_INDEX(r, a_ne1);
    GLOBAL const char *row = AT(a, 0, r, i2, i3);
    GLOBAL char *out = AT(d, i0, i1, i2, i3);
#if RAWCOPY
    copy_bytes(out, row + i0 * a_nb0, TSZ(TD));
#elif IS_QUANT
    STORET(TD, out, ELEM(T0, row, i0));
#else
    STORET(TD, out, LOADT(T0, row + i0 * a_nb0));
#endif
}

#if !IS_QUANT
/* d[:, ids[i1, i2 % ., i3 % .], i2, i3] = b[:, i1, i2, i3] for a plain destination; one item per element */
KERNEL void k_set_rows(TENSOR(b), TENSOR(ids), TENSOR(d), ERR_ARGS) {
    i64 i = GID(0);
    if (i >= NEL(b)) return;
    UNRAVEL(b, i, i0, i1, i2, i3);
    i64 r = LOAD_IDX(AT(ids, i1, i2 % ids_ne1, i3 % ids_ne2, 0));
    CHECK_INDEX(r, d_ne1);
    STORET(TD, AT(d, i0, r, i2, i3), LOADT(T0, AT(b, i0, i1, i2, i3)));
}
#endif

#else
/* the same for a block-type destination: one work-item per destination block */
KERNEL void k_set_rows_q(TENSOR(b), TENSOR(ids), TENSOR(d), ERR_ARGS) {
    i64 nblk = b_ne0 / BLK(TD);
    i64 i = GID(0);
    if (i >= nblk * NROWS(b)) return;
    i64 blk = i % nblk, row = i / nblk;
    i64 i1 = row % b_ne1, i2 = (row / b_ne1) % b_ne2, i3 = row / (b_ne1 * b_ne2);
    i64 r = LOAD_IDX(AT(ids, i1, i2 % ids_ne1, i3 % ids_ne2, 0));
    CHECK_INDEX(r, d_ne1);
    float x[BLK(TD)];
    for (i32 j = 0; j < BLK(TD); j++) x[j] = LOADT(T0, AT(b, blk * BLK(TD) + j, i1, i2, i3));
    QUANTIZE_BLOCK(TD, AT(d, 0, r, i2, i3) + blk * TSZ(TD), x);
}

/* CPY from a plain tensor (any layout) into a contiguous block-type tensor; one item per block */
KERNEL void k_quantize(TENSOR(a), TENSOR(d)) {
    i64 blk = GID(0);
    if (blk >= NEL(d) / BLK(TD)) return;
    float x[BLK(TD)];
    for (i32 j = 0; j < BLK(TD); j++) {
        i64 e = blk * BLK(TD) + j;
        UNRAVEL(a, e, j0, j1, j2, j3);
        x[j] = LOADT(T0, AT(a, j0, j1, j2, j3));
    }
    QUANTIZE_BLOCK(TD, BASE(d) + blk * TSZ(TD), x);
}
#endif

#if IS_QUANT
/* CPY from a contiguous block-type tensor into a plain one; one item per element */
KERNEL void k_dequantize(TENSOR(a), TENSOR(d)) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    STORET(TD, AT(d, i0, i1, i2, i3), ELEM(T0, BASE(a) + (i / a_ne0) * a_nb1, i % a_ne0));
}
#endif
