/* MUL_MAT, MUL_MAT_ID (OUT_PROD: outprod.c). Activations (src1) are converted once per node to the weight type's dot
   partner (Q8_0 / Q8_1 / Q8_K for quantised weights, F32 otherwise) by all threads, then a barrier, then each
   thread computes tiles of (weight rows x activation columns) with integer or float dot products. */
#include "pgc.h"

#define TILE_R 16
#define TILE_C 16
#define DECODE_PREFETCH_UNITS 4 /* decode attention's K rows are asked for this many work units ahead */
#define F16_PANEL_COLS 512 /* columns an F16 panel (converted rows) serves */

int pgc_quantize_act(const float *x, void *vy, int64_t n, int type); /* quants.c */

static int conv_type(int t0) { return pgc_blck_size(t0) > 1 ? pgc_vec_dot_type(t0) : T_F32; }

/* whether src1 (slot s) must be converted before the dots; F16 weights round the activations to F16 first,
   as ggml's vec_dot_type for F16 does (products of two halves, then float accumulation) */
static int needs_conv(const pgc_node *n, int s, int t0) {
    return conv_type(t0) != T_F32 || t0 == T_F16 || n->type[s] != T_F32 || n->nb[s][0] != 4;
}

/* convert every row of slot s to type vt into dst (rows packed), split across threads: whole rows, or where there
   are fewer rows than threads (a decode's one column) pieces of whole blocks (pgc_piece), so that no thread waits for
   another to quantise a long row alone */
static int convert_rows(const pgc_node *n, int s, int vt, char *dst, const pgc_tctx *c, int round_f16) {
    const int64_t ne0 = n->ne[s][0], nr = pgc_nrows(n, s), bs = pgc_blck_size(vt);
    const int64_t rs = pgc_row_size(vt, ne0), pieces = pgc_pieces(nr, c->nth);
    float *tmp = (float *)c->scratch;
    int64_t u0, u1;
    pgc_split(nr * pieces, c->ith, c->nth, &u0, &u1);
    int rc = 0;
    for (int64_t u = u0; u < u1 && !rc; u++) {
        int64_t k0, k1;
        const int64_t r = pgc_piece(u, pieces, ne0, bs, &k0, &k1), ne = k1 - k0;
        if (!ne) continue;
        const char *p = pgc_row(n, s, r) + k0 * n->nb[s][0];
        char *d = dst + r * rs + k0 / bs * pgc_type_size(vt);
        if (n->type[s] == T_F32 && n->nb[s][0] == 4) {
            rc = pgc_quantize_act((const float *)p, d, ne, vt);
        } else {
            for (int64_t k = 0; k < ne; k++) tmp[k] = pgc_ld(p + k * n->nb[s][0], n->type[s]);
            rc = pgc_quantize_act(tmp, d, ne, vt);
        }
        if (round_f16 && vt == T_F32) pgc_S.round_f16((float *)d, ne);
    }
    return rc;
}

size_t pgc_mul_mat_shared(const pgc_node *n) {
    int t0 = n->type[1] & ~PGC_R8;
    if (!needs_conv(n, 2, t0)) return 0;
    return (size_t)pgc_nrows(n, 2) * (size_t)pgc_row_size(conv_type(t0), n->ne[2][0]);
}

typedef float (*rowdot_fn)(int64_t k, const char *x, const char *y);

static inline float row_dot(int t0, int64_t k, const char *x, const char *y) {
    switch (t0) {
    case T_F32: return pgc_S.dot_f32(k, (const float *)x, (const float *)y);
    case T_BF16: return pgc_S.dot_bf16(k, (const uint16_t *)x, (const float *)y);
    default: {
        float s;
        pgc_S.vec_dot[t0](k, &s, x, y);
        return s;
    }
    }
}

/* nr weight rows (from x, bx bytes apart) against one activation column y, into d (dst elements db bytes
   apart): PGC_DOTR_ROWS rows per pass where the kernel level has a row-blocked kernel for the type. F16 weights
   sum in ggml_vec_dot_f16's order, as many rows per pass as the level's kernel takes. */
static void rows_dot(int t0, int64_t K, const char *x, int64_t bx, const char *y, char *d, int64_t db, int64_t nr) {
    if (t0 == T_F16) {
        pgc_S.dot_f16_ggml_tiles(K, (const uint16_t *)x, (size_t)bx, nr, (const float *)y, 0, 1, d, (size_t)db, 0);
        return;
    }
    const pgc_vec_dotr_fn vdr = pgc_blck_size(t0) > 1 ? pgc_S.vec_dotr[t0] : NULL;
    int64_t r = 0;
    if (vdr)
        for (; r + PGC_DOTR_ROWS <= nr; r += PGC_DOTR_ROWS) {
            float out[PGC_DOTR_ROWS];
            vdr(K, out, x + r * bx, (size_t)bx, y);
            for (int k = 0; k < PGC_DOTR_ROWS; k++) *(float *)(d + (r + k) * db) = out[k];
        }
    for (; r < nr; r++) *(float *)(d + r * db) = row_dot(t0, K, x + r * bx, y);
}

/* R8 weights (repack.h; rows in groups of eight, M % 8 == 0, activations converted): rows [r0, r1) of one matrix
   (from x0, groups 8 * nb01 bytes apart) against columns [c0, c1) (converted, rs1 bytes apart from y0) */
static void r8_tile(int t0, int64_t K, const char *x0, int64_t nb01, int64_t r0, int64_t r1, const char *y0,
                    int64_t rs1, int64_t c0, int64_t c1, const pgc_node *n, int64_t i12, int64_t i13) {
    const int64_t nb0 = n->nb[0][0];
    for (int64_t ic = c0; ic < c1; ic += R8_MAX_COLS) {
        const int nc = c1 - ic < R8_MAX_COLS ? (int)(c1 - ic) : R8_MAX_COLS;
        for (int64_t r = r0; r < r1; r += R8_GROUPS * R8_ROWS) {
            const int rows = r1 - r < R8_GROUPS * R8_ROWS ? (int)(r1 - r) : R8_GROUPS * R8_ROWS;
            float o[R8_MAX_COLS * R8_GROUPS * R8_ROWS];
            pgc_S.r8[t0](K, x0 + (r - r0) * nb01, (size_t)(R8_ROWS * nb01), rows / R8_ROWS, y0 + ic * rs1,
                         (size_t)rs1, nc, o);
            for (int c = 0; c < nc; c++) {
                char *d = pgc_ptr(n, 0, r, ic + c, i12, i13);
                if (nb0 == sizeof(float)) /* a column's rows in one copy (the scalar loop was 3% of a 1.1B prompt) */
                    memcpy(d, o + c * rows, sizeof(float) * (size_t)rows);
                else
                    for (int k = 0; k < rows; k++) *(float *)(d + k * nb0) = o[c * rows + k];
            }
        }
    }
}

/* decode attention's work unit u: row block br of matrix i02 (batch i13); the matrices vary fastest where they
   share rows (heads_inner), else the row blocks */
static inline void decode_unit(int64_t u, int64_t ne02, int64_t nbr, int heads_inner, int64_t *i02, int64_t *br,
                               int64_t *i13) {
    *i02 = heads_inner ? u % ne02 : (u / nbr) % ne02;
    *br = heads_inner ? (u / ne02) % nbr : u % nbr;
    *i13 = u / (nbr * ne02);
}

int pgc_k_mul_mat(const pgc_node *n, const pgc_tctx *c) {
    const int r8 = (n->type[1] & PGC_R8) != 0, t0 = n->type[1] & ~PGC_R8;
    if (r8 && (t0 >= T_COUNT || !pgc_S.r8[t0] || n->ne[1][1] % R8_ROWS || n->nb[1][0] != pgc_type_size(t0)))
        return PGC_E_TYPE;
    const int64_t K = n->ne[1][0], M = n->ne[1][1], ne02 = n->ne[1][2], ne03 = n->ne[1][3];
    const int64_t N = n->ne[2][1], ne12 = n->ne[2][2], ne13 = n->ne[2][3];
    if (t0 != T_F32 && t0 != T_F16 && t0 != T_BF16 && !(t0 < T_COUNT && pgc_S.vec_dot[t0])) return PGC_E_TYPE;
    const int conv = needs_conv(n, 2, t0);
    /* the F16 matmuls that ggml (llamafile) hands to tinyBLAS; the others take ggml_vec_dot_f16 */
    const int f16_tiles = t0 == T_F16 && N >= 2 && K % 8 == 0 && M % 4 == 0;
    int rc = 0;
    if (conv) rc = convert_rows(n, 2, conv_type(t0), c->wdata, c, t0 == T_F16);
    pgc_barrier(c);
    if (rc) return rc;
    const int64_t rs1 = pgc_row_size(conv_type(t0), K);
    const int64_t r2 = ne12 / ne02, r3 = ne13 / ne03;
    const pgc_vec_dot2_fn vd2 = pgc_blck_size(t0) > 1 ? pgc_S.vec_dot2[t0] : NULL;
    const pgc_q_tiles_fn q_tiles = conv && N >= 2 && pgc_blck_size(t0) > 1 ? pgc_S.q_tiles[t0] : NULL;
    /* R8 tiles take more columns: a wide pass unpacks each block of the weights once for all of them */
    const int64_t tc = r8 ? R8_MAX_COLS : TILE_C;
    const int64_t nbr = (M + TILE_R - 1) / TILE_R, nbc = (N + tc - 1) / tc;
    int64_t u0, u1;
    if (t0 == T_F16 && N == 1 && r2 > 1) { /* decode attention: src0's matrix i02 against its r2 columns at once */
        /* the units in memory order: where the matrices share rows (a KV cache's heads: K of head h at h x head
           bytes of a cache row) the matrices vary fastest, so that the threads read the cache rows in order rather
           than a head's slices of them (1.2-1.9x at depth 4096, the cache out of the CPU's caches) */
        const int heads_inner = pgc_heads_share_rows(n, 1);
        pgc_split(ne02 * ne13 * nbr, c->ith, c->nth, &u0, &u1);
        for (int64_t u = u0; u < u1; u++) {
            int64_t i02, br, i13;
            if (heads_inner && u + DECODE_PREFETCH_UNITS < u1) { /* a unit further on's slices, into L2: 1.3-1.8x */
                decode_unit(u + DECODE_PREFETCH_UNITS, ne02, nbr, heads_inner, &i02, &br, &i13);
                const int64_t r0 = br * TILE_R;
                pgc_prefetch_rows(pgc_ptr(n, 1, 0, r0, i02, i13 / r3), r0 + TILE_R < M ? TILE_R : M - r0,
                                  n->nb[1][1], 2 * K);
            }
            decode_unit(u, ne02, nbr, heads_inner, &i02, &br, &i13);
            const int64_t ir0 = br * TILE_R, ir1 = ir0 + TILE_R < M ? ir0 + TILE_R : M;
            pgc_S.dot_f16_ggml_tiles(K, (const uint16_t *)pgc_ptr(n, 1, 0, ir0, i02, i13 / r3), (size_t)n->nb[1][1],
                                     ir1 - ir0, (const float *)(c->wdata + (i13 * ne12 + i02 * r2) * rs1),
                                     (size_t)rs1, r2, pgc_ptr(n, 0, ir0, 0, i02 * r2, i13), (size_t)n->nb[0][0],
                                     (size_t)n->nb[0][2]);
        }
        return PGC_OK;
    }
    /* F16 prompt matmuls with short rows (a prompt's K x Q: a head's 64-256 values): panels of TILE_R rows
       against F16_PANEL_COLS columns of the r2 heads that share the matrix, taken as one run of columns (dst's
       heads follow each other). Longer rows keep the tiles (measured faster from 512 values on, one thread) */
    const int heads_in_a_row = r2 == 1 || n->nb[0][2] == N * n->nb[0][1];
    const pgc_f16_panel_fn panel = f16_tiles && K <= F16_PANEL_MAX_K && TILE_R == F16_PANEL_ROWS && heads_in_a_row
                                       ? pgc_S.dot_f16_panel : NULL;
    if (panel) {
        const int64_t ncol = r2 * N, nch = (ncol + F16_PANEL_COLS - 1) / F16_PANEL_COLS;
        pgc_split(ne13 * ne02 * nch * nbr, c->ith, c->nth, &u0, &u1);
        for (int64_t u = u0; u < u1; u++) { /* row blocks fastest: threads share a chunk of columns */
            const int64_t br = u % nbr, ch = (u / nbr) % nch, i02 = (u / (nbr * nch)) % ne02;
            const int64_t i13 = u / (nbr * nch * ne02);
            const int64_t ir0 = br * TILE_R, ir1 = ir0 + TILE_R < M ? ir0 + TILE_R : M;
            const int64_t j0 = ch * F16_PANEL_COLS, j1 = j0 + F16_PANEL_COLS < ncol ? j0 + F16_PANEL_COLS : ncol;
            panel(K, (const uint16_t *)pgc_ptr(n, 1, 0, ir0, i02, i13 / r3), (size_t)n->nb[1][1], ir1 - ir0,
                  (const float *)(c->wdata + ((i13 * ne12 + i02 * r2) * N + j0) * rs1), (size_t)rs1, j1 - j0,
                  pgc_ptr(n, 0, ir0, 0, i02 * r2, i13) + j0 * n->nb[0][1], (size_t)n->nb[0][0], (size_t)n->nb[0][1],
                  c->scratch);
        }
        return PGC_OK;
    }
    pgc_split(ne12 * ne13 * nbr * nbc, c->ith, c->nth, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        /* row blocks vary fastest so that threads share activation columns */
        int64_t br = u % nbr, bc = (u / nbr) % nbc, b = u / (nbr * nbc);
        int64_t i12 = b % ne12, i13 = b / ne12;
        int64_t i02 = i12 / r2, i03 = i13 / r3;
        int64_t ir1 = br * TILE_R + TILE_R < M ? br * TILE_R + TILE_R : M;
        int64_t ic1 = bc * tc + tc < N ? bc * tc + tc : N;
        const int64_t nb01 = n->nb[1][1], nb0 = n->nb[0][0];
        const char *x0 = pgc_ptr(n, 1, 0, br * TILE_R, i02, i03);
        if (r8) { /* conv is always set: R8 types are quantised */
            r8_tile(t0, K, x0, nb01, br * TILE_R, ir1, c->wdata + (i13 * ne12 + i12) * N * rs1, rs1, bc * tc, ic1,
                    n, i12, i13);
            continue;
        }
        if (f16_tiles) { /* the whole tile in one call (converted columns: rs1 apart) */
            pgc_S.dot_f16_tiles(K, (const uint16_t *)x0, (size_t)nb01, ir1 - br * TILE_R,
                                (const float *)(c->wdata + ((i13 * ne12 + i12) * N + bc * tc) * rs1), (size_t)rs1,
                                ic1 - bc * tc, pgc_ptr(n, 0, 0, bc * tc, i12, i13) + br * TILE_R * nb0,
                                (size_t)nb0, (size_t)n->nb[0][1]);
            continue;
        }
        if (q_tiles) { /* the whole tile in one call, as for F16 */
            q_tiles(K, x0, (size_t)nb01, ir1 - br * TILE_R, c->wdata + ((i13 * ne12 + i12) * N + bc * tc) * rs1,
                    (size_t)rs1, ic1 - bc * tc, pgc_ptr(n, 0, 0, bc * tc, i12, i13) + br * TILE_R * nb0,
                    (size_t)nb0, (size_t)n->nb[0][1]);
            continue;
        }
        for (int64_t ic = bc * tc; ic < ic1; ic++) {
            const char *y = conv ? c->wdata + ((i13 * ne12 + i12) * N + ic) * rs1 : pgc_ptr(n, 2, 0, ic, i12, i13);
            char *d = pgc_ptr(n, 0, 0, ic, i12, i13) + br * TILE_R * nb0;
            const char *x = x0;
            if (vd2 && ic + 1 < ic1) { /* two activation columns per pass over the weight rows */
                const char *y1 = conv ? y + rs1 : pgc_ptr(n, 2, 0, ic + 1, i12, i13);
                char *d1 = pgc_ptr(n, 0, 0, ic + 1, i12, i13) + br * TILE_R * nb0;
                float two[2];
                for (int64_t ir = br * TILE_R; ir < ir1; ir++, x += nb01, d += nb0, d1 += nb0) {
                    vd2(K, two, x, y, y1);
                    *(float *)d = two[0];
                    *(float *)d1 = two[1];
                }
                ic++;
            } else {
                rows_dot(t0, K, x, nb01, y, d, nb0, ir1 - br * TILE_R);
            }
        }
    }
    return PGC_OK;
}

/* MUL_MAT_ID: slot1 experts [K, M, n_exp], slot2 b [K, n_b, n_tok], slot3 ids [n_used, n_tok] */
size_t pgc_mul_mat_id_shared(const pgc_node *n) {
    size_t conv = (size_t)pgc_nrows(n, 2) * (size_t)pgc_row_size(conv_type(n->type[1]), n->ne[2][0]);
    size_t pairs = (size_t)(n->ne[3][0] * n->ne[3][1]);
    return conv + 64 + sizeof(int32_t) * ((size_t)n->ne[1][2] + 1) * (pairs + 1);
}

int pgc_k_mul_mat_id(const pgc_node *n, const pgc_tctx *c) {
    const int t0 = n->type[1];
    const int64_t K = n->ne[1][0], M = n->ne[1][1], n_exp = n->ne[1][2];
    const int64_t n_b = n->ne[2][1], n_used = n->ne[3][0], n_tok = n->ne[3][1];
    if (t0 != T_F32 && t0 != T_F16 && t0 != T_BF16 && !(t0 < T_COUNT && pgc_S.vec_dot[t0])) return PGC_E_TYPE;
    const int vt = conv_type(t0);
    const int64_t rs1 = pgc_row_size(vt, K);
    size_t conv_bytes = (size_t)pgc_nrows(n, 2) * (size_t)rs1;
    int32_t *counts = (int32_t *)(c->wdata + ((conv_bytes + 63) & ~(size_t)63));
    int32_t *lists = counts + n_exp;
    const int64_t pairs = n_used * n_tok;
    int rc = convert_rows(n, 2, vt, c->wdata, c, t0 == T_F16);
    if (c->ith == 0) {
        for (int64_t e = 0; e < n_exp; e++) counts[e] = 0;
        for (int64_t t = 0; t < n_tok && !*c->err_index; t++)
            for (int64_t e = 0; e < n_used; e++) {
                int32_t ex = *(const int32_t *)pgc_ptr(n, 3, e, t, 0, 0);
                if (ex < 0 || ex >= n_exp) { *c->err_index = 1; break; }
                lists[ex * pairs + counts[ex]++] = (int32_t)(t * n_used + e);
            }
    }
    pgc_barrier(c);
    if (rc) return rc;
    if (*c->err_index) return PGC_E_INDEX;
    const int64_t nbr = (M + TILE_R - 1) / TILE_R;
    int64_t u0, u1;
    pgc_split(n_exp * nbr, c->ith, c->nth, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        int64_t ex = u / nbr, br = u % nbr;
        int64_t ir1 = br * TILE_R + TILE_R < M ? br * TILE_R + TILE_R : M;
        for (int32_t q = 0; q < counts[ex]; q++) {
            int32_t pe = lists[ex * pairs + q];
            int64_t t = pe / n_used, e = pe % n_used;
            const char *y = c->wdata + (t * n_b + e % n_b) * rs1;
            char *d = pgc_ptr(n, 0, 0, e, t, 0);
            rows_dot(t0, K, pgc_ptr(n, 1, 0, br * TILE_R, ex, 0), n->nb[1][1], y, d + br * TILE_R * n->nb[0][0],
                     n->nb[0][0], ir1 - br * TILE_R);
        }
    }
    return PGC_OK;
}
