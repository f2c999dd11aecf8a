/* Matrix products. Defines: WT (src0 / weight type), WT_IS_<WT> = 1, T1 (src1 type), WG.
 *
 *   k_mul_mat_vec   one work-group of WG lanes per output element; lanes stride over 32-element blocks of k
 *                   (the K types' 32-element sub-blocks read with their scales taken once); epi: what follows
 *                   fused (activations.h: the ADD of a residual or bias, or a GLU of this and a second product)
 *   k_mul_mat_vec_short  one lane per output element, for rows of at most SHORT_ROW (ops/matmul.py) elements
 *                   (epi as k_mul_mat_vec)
 *   k_mul_mat_tiled 16x16 lanes compute a 32x32 output tile; k advances 32 at a time through local memory
 *   k_mul_mat_id    k_mul_mat_vec with the weight matrix picked per (slot, token) by an expert id
 *   k_out_prod      one work-item per output element (plain types)
 * src0 rows are contiguous (nb00 = type size); src1 and dst may have any strides. */
#include "kquants.h"
#include "reduce.h"
#include "activations.h"

/* an element of src1 as the products read it: rounded to F16 for F16 weights, as ggml's CPU converts src1 to the
 * weights' vec_dot_type first (the quantised weights' partner is matmul_q.cl's k_quantize_act; Vulkan's mul_mat
 * rounds alike) */
#if defined(WT_IS_f16)
#define LOAD_SRC1(p) ROUND_HALF(LOADT(T1, p))
#else
#define LOAD_SRC1(p) LOADT(T1, p)
#endif

/* dot of block ib (32 elements of k) of a weight row with src1 column `col` */
INLINE float block_dot(GLOBAL const char *row, i64 ib, GLOBAL const char *col, i64 nb10, i64 ne00) {
    i64 k0 = ib * 32;
#if defined(WT_IS_q4_0) || defined(WT_IS_q4_1) || defined(WT_IS_q8_0)
    GLOBAL const char *blk = row + ib * TSZ(WT);
    float s = 0.f;
#if defined(WT_IS_q8_0)
    GLOBAL const i8 *q = (GLOBAL const i8 *)(blk + 2);
    for (i32 j = 0; j < 32; j++) s += (float)q[j] * LOADT(T1, col + (k0 + j) * nb10);
    return LOAD_HALF(blk, 0) * s;
#else
#if defined(WT_IS_q4_0)
    GLOBAL const u8 *q = (GLOBAL const u8 *)(blk + 2);
    const float off = -8.f;
#else
    GLOBAL const u8 *q = (GLOBAL const u8 *)(blk + 4);
    const float off = 0.f;
#endif
    float sb = 0.f;
    for (i32 j = 0; j < 16; j++) {
        float b0 = LOADT(T1, col + (k0 + j) * nb10), b1 = LOADT(T1, col + (k0 + j + 16) * nb10);
        s += ((float)(q[j] & 15) + off) * b0 + ((float)(q[j] >> 4) + off) * b1;
        sb += b0 + b1;
    }
#if defined(WT_IS_q4_1)
    return LOAD_HALF(blk, 0) * s + LOAD_HALF(blk, 1) * sb;
#else
    return LOAD_HALF(blk, 0) * s;
#endif
#endif
#elif defined(WT_IS_q4_K) || defined(WT_IS_q5_K)
    /* 32-element sub-block sb of a 256-element block: one scale and minimum for all of it */
    GLOBAL const u8 *b = (GLOBAL const u8 *)(row + (ib / 8) * TSZ(WT));
    i32 sb = (i32)(ib % 8), sc, mn;
    pg_scale_min_k4(sb, b + 4, &sc, &mn);
    float s = 0.f, sx = 0.f;
    for (i32 l = 0; l < 32; l++) {
        float x = LOADT(T1, col + (k0 + l) * nb10);
#if defined(WT_IS_q4_K)
        s += (float)pg_q4_K_level(b, 32 * sb + l) * x;
#else
        s += (float)pg_q5_K_level(b, 32 * sb + l) * x;
#endif
        sx += x;
    }
    return LOAD_HALF(b, 0) * (float)sc * s - LOAD_HALF(b, 1) * (float)mn * sx;
#elif defined(WT_IS_q6_K)
    /* 32-element sub-block sb of a 256-element block: two signed scales, one a 16 elements */
    GLOBAL const u8 *b = (GLOBAL const u8 *)(row + (ib / 8) * TSZ(WT));
    i32 e0 = 32 * (i32)(ib % 8);
    float s0 = 0.f, s1 = 0.f;
    for (i32 l = 0; l < 32; l++) {
        float x = LOADT(T1, col + (k0 + l) * nb10);
        i32 v = pg_q6_K_level(b, e0 + l);
        if (l < 16) s0 += (float)v * x;
        else s1 += (float)v * x;
    }
    return LOAD_HALF(b + 208, 0) * ((float)pg_q6_K_scale(b, e0) * s0 + (float)pg_q6_K_scale(b, e0 + 16) * s1);
#else
    float s = 0.f;
    i64 k1 = k0 + 32 < ne00 ? k0 + 32 : ne00;
    for (i64 k = k0; k < k1; k++) s += ELEM(WT, row, k) * LOAD_SRC1(col + k * nb10);
    return s;
#endif
}

INLINE float row_dot(GLOBAL const char *row, GLOBAL const char *col, i64 nb10, i64 ne00, LOCAL_PTR float *buf) {
    i64 nblk = (ne00 + 31) / 32;
    float acc = 0.f;
    for (i64 ib = LID(0); ib < nblk; ib += WG) acc += block_dot(row, ib, col, nb10, ne00);
    return wg_sum(acc, buf);
}

/* grid: (ne01 * WG, ne11, ne12 * ne13); a2 (the GLU epilogues' second weights) is laid out as a */
KERNEL void k_mul_mat_vec(TENSOR(a), TENSOR(a2), TENSOR(b), TENSOR(e), TENSOR(d), i32 epi) {
    LOCAL float buf[WG];
    i64 i01 = GRP(0), i11 = GID(1), i12 = GID(2) % b_ne2, i13 = GID(2) / b_ne2;
    i64 i02 = i12 / (b_ne2 / a_ne2), i03 = i13 / (b_ne3 / a_ne3);
    float r = row_dot(AT(a, 0, i01, i02, i03), AT(b, 0, i11, i12, i13), b_nb0, a_ne0, buf), r2 = 0.f;
    if (epi >= EPI_SWIGLU) r2 = row_dot(AT(a2, 0, i01, i02, i03), AT(b, 0, i11, i12, i13), b_nb0, a_ne0, buf);
    if (LID(0) == 0) store_epilogue(TENSOR_ARGS(e), TENSOR_ARGS(d), i01, i11, i12, i13, r, r2, epi);
}

/* grid: (ne01 rounded up to WG, ne11, ne12 * ne13): one lane per output element, its row's blocks in order, for
 * rows of a few blocks (attention's K x q at decode: 64-128 long), where k_mul_mat_vec would leave most of a
 * work-group's lanes idle and reduce across all of them for each output */
KERNEL void k_mul_mat_vec_short(TENSOR(a), TENSOR(a2), TENSOR(b), TENSOR(e), TENSOR(d), i32 epi) {
    i64 i01 = GID(0), i11 = GID(1), i12 = GID(2) % b_ne2, i13 = GID(2) / b_ne2;
    if (i01 >= a_ne1) return;
    i64 i02 = i12 / (b_ne2 / a_ne2), i03 = i13 / (b_ne3 / a_ne3);
    GLOBAL const char *row = AT(a, 0, i01, i02, i03), *row2 = AT(a2, 0, i01, i02, i03), *col = AT(b, 0, i11, i12, i13);
    float r = 0.f, r2 = 0.f;
    for (i64 ib = 0; ib < (a_ne0 + 31) / 32; ib++) r += block_dot(row, ib, col, b_nb0, a_ne0);
    if (epi >= EPI_SWIGLU) {
        for (i64 ib = 0; ib < (a_ne0 + 31) / 32; ib++) r2 += block_dot(row2, ib, col, b_nb0, a_ne0);
    }
    store_epilogue(TENSOR_ARGS(e), TENSOR_ARGS(d), i01, i11, i12, i13, r, r2, epi);
}

/* grid: (ne01 * WG, n_used, n_tokens); ids [n_used, n_tokens] i32 */
KERNEL void k_mul_mat_id(TENSOR(a), TENSOR(b), TENSOR(ids), TENSOR(d), ERR_ARGS) {
    LOCAL float buf[WG];
    i64 i01 = GRP(0), e = GID(1), t = GID(2);
    i64 expert = *(GLOBAL const i32 *)AT(ids, e, t, 0, 0);
    CHECK_INDEX(expert, a_ne2);  /* uniform over the work-group: every lane leaves together */
    float r = row_dot(AT(a, 0, i01, expert, 0), AT(b, 0, e % b_ne1, t, 0), b_nb0, a_ne0, buf);
    if (LID(0) == 0) store_f32(AT(d, i01, e, t, 0), r);
}

#define TILE 32
#define TSUB 16
/* grid: (ceil(ne01 / 32) * 16, ceil(ne11 / 32) * 16, ne12 * ne13), local (16, 16); lane (x, y) computes rows
 * x, x + 16 and columns y, y + 16 of the tile */
KERNEL void k_mul_mat_tiled(TENSOR(a), TENSOR(b), TENSOR(d)) {
    LOCAL float as[TILE][TILE + 1];
    LOCAL float bs[TILE][TILE + 1];
    i32 lx = LID(0), ly = LID(1);
    i64 r0 = GRP(0) * TILE, c0 = GRP(1) * TILE;
    i64 i12 = GID(2) % b_ne2, i13 = GID(2) / b_ne2;
    i64 i02 = i12 / (b_ne2 / a_ne2), i03 = i13 / (b_ne3 / a_ne3);
    float acc00 = 0.f, acc01 = 0.f, acc10 = 0.f, acc11 = 0.f;
    i32 lane = ly * TSUB + lx;
    for (i64 k0 = 0; k0 < a_ne0; k0 += TILE) {
        for (i32 e = lane; e < TILE * TILE; e += TSUB * TSUB) {
            i32 rr = e / TILE, kk = e % TILE;
            i64 r = r0 + rr, c = c0 + rr, k = k0 + kk;
            as[rr][kk] = (r < a_ne1 && k < a_ne0) ? ELEM(WT, AT(a, 0, r, i02, i03), k) : 0.f;
            bs[rr][kk] = (c < b_ne1 && k < a_ne0) ? LOAD_SRC1(AT(b, k, c, i12, i13)) : 0.f;
        }
        BARRIER();
        for (i32 kk = 0; kk < TILE; kk++) {
            float a0 = as[lx][kk], a1 = as[lx + TSUB][kk], b0 = bs[ly][kk], b1 = bs[ly + TSUB][kk];
            acc00 += a0 * b0; acc01 += a0 * b1; acc10 += a1 * b0; acc11 += a1 * b1;
        }
        BARRIER();
    }
    i64 ra = r0 + lx, rb = r0 + lx + TSUB, ca = c0 + ly, cb = c0 + ly + TSUB;
    if (ra < d_ne0 && ca < d_ne1) store_f32(AT(d, ra, ca, i12, i13), acc00);
    if (ra < d_ne0 && cb < d_ne1) store_f32(AT(d, ra, cb, i12, i13), acc01);
    if (rb < d_ne0 && ca < d_ne1) store_f32(AT(d, rb, ca, i12, i13), acc10);
    if (rb < d_ne0 && cb < d_ne1) store_f32(AT(d, rb, cb, i12, i13), acc11);
}

/* dst[i, j] = sum_k a[i, k] * b[j, k] per batch (a's batches broadcast); one work-item per output element.
 * A block-type a has contiguous rows along i (one row per k). */
KERNEL void k_out_prod(TENSOR(a), TENSOR(b), TENSOR(d)) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    i64 i02 = i2 / (d_ne2 / a_ne2), i03 = i3 / (d_ne3 / a_ne3);
    float s = 0.f;
    for (i64 k = 0; k < a_ne1; k++) {
#if BLK(WT) == 1
        float x = LOADT(WT, AT(a, i0, k, i02, i03));
#else
        float x = ELEM(WT, AT(a, 0, k, i02, i03), i0);
#endif
        s += x * LOADT(T1, AT(b, i1, k, i2, i3));
    }
    store_f32(AT(d, i0, i1, i2, i3), s);
}
