/* OUT_PROD as a packed, register-tiled GEMM: dst[i, j] = sum_k a[i, k] b[j, k] (ggml's layout: a [m, K, A2, A3],
   b [n, K, B2, B3], dst [m, n, B2, B3] F32; a broadcast over dst's batches).

   Both operands are read along their rows (a's row k holds a[., k], b's row k holds b[., k]), so the product is a
   sum of K rank-1 updates. Per batch and per block of kc rows k, all threads first pack a's and b's rows into
   panels of MR (resp. OP_NR) columns laid out [k][MR] (resp. [k][OP_NR]), converting any type and stride to
   F32 on the way (F16, BF16, quantised a: whole rows, ggml's to-float); after a barrier each thread computes its
   share of MR x OP_NR output tiles from the packs, the tile's accumulators in registers for the whole k block.
   A dst with fewer rows than a tile (a weight's gradient over 2 or 3 inputs) is computed as its transpose: b's
   rows make the tile rows, a's the tile columns.

   Why this order of sums: every dst element is accumulated k by k from zero, one multiply-add per k, exactly the
   order of ggml's out_prod (its vec_mad over rows k); k blocks continue from the value stored by the previous
   block, which changes no rounding. On the x86 levels (AVX2 + FMA: 16-row tiles; AVX-512: 32-row tiles, chosen at
   run time) the multiply-add is fused, as ggml's AVX2 build's is, so F32 results are ggml's bit for bit there;
   the portable kernel rounds the product first. Threads split the output tiles. */
#include "pgc.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#define OP_MR 16     /* tile rows (dst's i): two 8-float vectors (portable, AVX2) */
#define OP_MR_MAX 32 /* AVX-512: two 16-float vectors; work memory is sized for it whatever the level */
#define OP_NR 6  /* tile columns (dst's j): 12 accumulators + 2 a vectors + 1 broadcast fit AVX2's 16 registers */
#define OP_KC_MAX 256
#define OP_PACK_BUDGET ((size_t)8 << 20) /* bytes of both packs: bounds the shared work memory of wide products */

static int64_t op_ceil(int64_t x, int64_t d) { return (x + d - 1) / d; }

/* rows k per block: OP_KC_MAX, fewer where the packs of very wide operands would pass OP_PACK_BUDGET */
static int64_t op_kc(int64_t m, int64_t nn, int64_t K) {
    const int64_t cols = op_ceil(m, OP_MR_MAX) * OP_MR_MAX + op_ceil(nn, OP_NR) * OP_NR;
    int64_t kc = (int64_t)(OP_PACK_BUDGET / ((size_t)cols * sizeof(float)));
    if (kc > OP_KC_MAX) kc = OP_KC_MAX;
    if (kc < 16) kc = 16;
    return kc < K ? kc : (K > 0 ? K : 1);
}

static size_t op_al(size_t x) { return (x + 63) & ~(size_t)63; }

static size_t op_apack_bytes(int64_t m, int64_t kc) {
    return op_al((size_t)(op_ceil(m, OP_MR_MAX) * OP_MR_MAX * kc) * sizeof(float));
}

/* whether b takes the tile's row role and a its column role (dst computed as its transpose): where dst has fewer
   rows than a tile and more columns (a weight's gradient with 2 or 3 inputs), so that tiles are not mostly padding.
   Each element's sum is the same either way. */
static int op_swapped(const pgc_node *n) { return n->ne[0][0] < OP_MR && n->ne[0][1] > n->ne[0][0]; }

size_t pgc_out_prod_shared(const pgc_node *n, int nth) {
    (void)nth;
    const int sw = op_swapped(n);
    const int64_t rows = n->ne[0][sw], cols = n->ne[0][!sw], K = n->ne[1][1];
    const int64_t kc = op_kc(rows, cols, K);
    return op_apack_bytes(rows, kc) + op_al((size_t)(op_ceil(cols, OP_NR) * OP_NR * kc) * sizeof(float));
}

/* ---- the register tile: c[j][i] (+)= sum_k a[k][i] b[k][j], i < MR, j < OP_NR; c's columns ldc floats apart */

typedef void (*op_tile_fn)(int64_t kc, const float *restrict a, const float *restrict b, float *restrict c,
                           int64_t ldc, int acc);

typedef float op_v8 __attribute__((vector_size(32)));
typedef float op_v8u __attribute__((vector_size(32), aligned(4)));

/* portable: GCC vector types, product rounded before the add (-ffp-contract=off) */
static void op_tile_base(int64_t kc, const float *restrict a, const float *restrict b, float *restrict c,
                         int64_t ldc, int acc) {
    op_v8 c0[OP_NR], c1[OP_NR];
    for (int j = 0; j < OP_NR; j++) {
        c0[j] = acc ? *(const op_v8u *)(c + j * ldc) : (op_v8){0};
        c1[j] = acc ? *(const op_v8u *)(c + j * ldc + 8) : (op_v8){0};
    }
    for (int64_t k = 0; k < kc; k++) {
        const op_v8 a0 = *(const op_v8 *)(a + k * OP_MR), a1 = *(const op_v8 *)(a + k * OP_MR + 8);
        const float *bk = b + k * OP_NR;
        for (int j = 0; j < OP_NR; j++) {
            const float v = bk[j];
            const op_v8 bj = {v, v, v, v, v, v, v, v};
            c0[j] += a0 * bj;
            c1[j] += a1 * bj;
        }
    }
    for (int j = 0; j < OP_NR; j++) {
        *(op_v8u *)(c + j * ldc) = c0[j];
        *(op_v8u *)(c + j * ldc + 8) = c1[j];
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The x86 tiles, one text for both vector widths: W floats per register (AVX2 + FMA: 8, a 16-row tile; AVX-512:
   16, a 32-row tile), the intrinsics named by their width prefix P. One fused multiply-add per element and k, as
   ggml's AVX2 vec_mad: the same sums at either width, hence the same bits. */
#define OP_TILE_X86(name, isa, V, W, P)                                                                               \
    __attribute__((target(isa))) static void name(int64_t kc, const float *restrict a, const float *restrict b,      \
                                                  float *restrict c, int64_t ldc, int acc) {                          \
        V c0[OP_NR], c1[OP_NR];                                                                                       \
        for (int j = 0; j < OP_NR; j++) {                                                                             \
            c0[j] = acc ? P##_loadu_ps(c + j * ldc) : P##_setzero_ps();                                               \
            c1[j] = acc ? P##_loadu_ps(c + j * ldc + W) : P##_setzero_ps();                                           \
        }                                                                                                             \
        for (int64_t k = 0; k < kc; k++) {                                                                            \
            const V a0 = P##_load_ps(a + k * 2 * W), a1 = P##_load_ps(a + k * 2 * W + W);                             \
            const float *bk = b + k * OP_NR;                                                                          \
            for (int j = 0; j < OP_NR; j++) {                                                                         \
                const V bj = P##_set1_ps(bk[j]);                                                                      \
                c0[j] = P##_fmadd_ps(a0, bj, c0[j]);                                                                  \
                c1[j] = P##_fmadd_ps(a1, bj, c1[j]);                                                                  \
            }                                                                                                         \
        }                                                                                                             \
        for (int j = 0; j < OP_NR; j++) {                                                                             \
            P##_storeu_ps(c + j * ldc, c0[j]);                                                                        \
            P##_storeu_ps(c + j * ldc + W, c1[j]);                                                                    \
        }                                                                                                             \
    }

OP_TILE_X86(op_tile_avx2, "avx2,fma", __m256, 8, _mm256)
OP_TILE_X86(op_tile_avx512, "avx512f", __m512, 16, _mm512)
#endif

/* the level's tile kernel and its row count MR (the a panels' width) */
static op_tile_fn op_tile(int *mr) {
    *mr = OP_MR;
#if defined(__x86_64__) && defined(__GNUC__)
    if (pgc_S.level == 3 || pgc_S.level == 4) {
        *mr = OP_MR_MAX;
        return op_tile_avx512;
    }
    if (pgc_S.level >= 1 && pgc_S.level <= 2) return op_tile_avx2; /* AVX2 + FMA */
#endif
    return op_tile_base;
}

/* ---- packing ------------------------------------------------------------------------------------------------ */

/* row k of slot s (batch i2, i3) as `cols` floats: the row itself where it is packed F32, else converted into tmp
   (whole rows through the type's to-float for block types, element by element otherwise; the kernel checked
   the types first, so no conversion fails once threads have started meeting at barriers) */
static const float *op_row(const pgc_node *n, int s, int64_t k, int64_t i2, int64_t i3, int64_t cols, float *tmp) {
    const char *p = pgc_ptr(n, s, 0, k, i2, i3);
    const int t = n->type[s];
    if (t == T_F32 && n->nb[s][0] == 4) return (const float *)p;
    if (pgc_blck_size(t) > 1) {
        pgc_to_float(p, tmp, cols, t);
        return tmp;
    }
    const int64_t nb0 = n->nb[s][0];
    if (t == T_F32)
        for (int64_t i = 0; i < cols; i++) tmp[i] = *(const float *)(p + i * nb0);
    else
        for (int64_t i = 0; i < cols; i++) tmp[i] = pgc_ld(p + i * nb0, t);
    return tmp;
}

/* a transposed F32 operand (k contiguous: MUL_MAT's backward hands OUT_PROD transpose(grad)): each panel column
   read along k, panels split over threads */
static void op_pack_t(const pgc_node *n, int s, int64_t k0, int64_t kc, int64_t i2, int64_t i3, int64_t cols, int w,
                      float *dst, const pgc_tctx *c) {
    const int64_t nb0 = n->nb[s][0];
    int64_t p0, p1;
    pgc_split(op_ceil(cols, w), c->ith, c->nth, &p0, &p1);
    for (int64_t p = p0; p < p1; p++) {
        float *o = dst + p * kc * w;
        for (int64_t q = 0; q < w; q++) {
            const int64_t col = p * w + q;
            if (col >= cols) {
                for (int64_t kk = 0; kk < kc; kk++) o[kk * w + q] = 0.0f;
                continue;
            }
            const float *src = (const float *)(pgc_ptr(n, s, 0, k0, i2, i3) + col * nb0);
            for (int64_t kk = 0; kk < kc; kk++) o[kk * w + q] = src[kk];
        }
    }
}

/* rows k0 .. k0+kc-1 of slot s into panels [cols/w][kc][w] (columns past `cols` zero), rows split over threads */
static void op_pack(const pgc_node *n, int s, int64_t k0, int64_t kc, int64_t i2, int64_t i3, int64_t cols, int w,
                    float *dst, const pgc_tctx *c) {
    if (n->type[s] == T_F32 && n->nb[s][1] == 4 && n->nb[s][0] != 4 && cols > 1) {
        op_pack_t(n, s, k0, kc, i2, i3, cols, w, dst, c);
        return;
    }
    const int64_t np = op_ceil(cols, w);
    float *tmp = (float *)c->scratch;
    int64_t r0, r1;
    pgc_split(kc, c->ith, c->nth, &r0, &r1);
    for (int64_t kk = r0; kk < r1; kk++) {
        const float *row = op_row(n, s, k0 + kk, i2, i3, cols, tmp);
        for (int64_t p = 0; p < np; p++) {
            float *o = dst + (p * kc + kk) * w;
            const int64_t c0 = p * w, left = cols - c0;
            if (left >= w) {
                memcpy(o, row + c0, (size_t)w * sizeof(float));
            } else {
                for (int64_t q = 0; q < w; q++) o[q] = q < left ? row[c0 + q] : 0.0f;
            }
        }
    }
}

/* ---- OUT_PROD ----------------------------------------------------------------------------------------------- */

int pgc_k_out_prod(const pgc_node *n, const pgc_tctx *c) {
    const int64_t m = n->ne[0][0], nn = n->ne[0][1], K = n->ne[1][1];
    const int ta = n->type[1], tb = n->type[2];
    const int ba = pgc_blck_size(ta);
    const int plain = ta == T_F32 || ta == T_F16 || ta == T_BF16;
    if (n->type[0] != T_F32 || (tb != T_F32 && tb != T_F16 && tb != T_BF16) ||
        !(plain || (ba > 1 && n->nb[1][0] == pgc_type_size(ta) && m % ba == 0)))
        return PGC_E_TYPE; /* before any barrier: every thread returns here alike */
    if (m == 0 || nn == 0 || n->ne[0][2] == 0 || n->ne[0][3] == 0) return PGC_OK;
    const int64_t r2 = n->ne[2][2] / n->ne[1][2], r3 = n->ne[2][3] / n->ne[1][3];
    /* roles: slot sr gives the tile rows (mr wide panels), slot sc the tile columns; dst's strides follow */
    const int sw = op_swapped(n), sr = sw ? 2 : 1, sc = sw ? 1 : 2;
    const int64_t M = sw ? nn : m, N = sw ? m : nn;
    const int64_t ds_i = n->nb[0][sw], ds_j = n->nb[0][!sw];
    int mr;
    const op_tile_fn tile = op_tile(&mr);
    const int64_t kc_max = op_kc(M, N, K), nip = op_ceil(M, mr), njp = op_ceil(N, OP_NR);
    float *ap = (float *)c->wdata, *bp = (float *)(c->wdata + op_apack_bytes(M, kc_max));
    const int direct = ds_i == 4 && ds_j % 4 == 0; /* dst columns are float rows: tiles store in place */
    int64_t u0, u1;
    pgc_split(nip * njp, c->ith, c->nth, &u0, &u1);
    for (int64_t i3 = 0; i3 < n->ne[0][3]; i3++)
        for (int64_t i2 = 0; i2 < n->ne[0][2]; i2++) {
            if (K == 0) { /* an empty sum: zeros, rows split over threads */
                int64_t j0, j1;
                pgc_split(nn, c->ith, c->nth, &j0, &j1);
                for (int64_t j = j0; j < j1; j++)
                    for (int64_t i = 0; i < m; i++) *(float *)pgc_ptr(n, 0, i, j, i2, i3) = 0.0f;
                continue;
            }
            /* batch of each role's operand: a (slot 1) broadcast over dst's batches */
            const int64_t r_i2 = sr == 1 ? i2 / r2 : i2, r_i3 = sr == 1 ? i3 / r3 : i3;
            const int64_t c_i2 = sc == 1 ? i2 / r2 : i2, c_i3 = sc == 1 ? i3 / r3 : i3;
            char *dbase = pgc_ptr(n, 0, 0, 0, i2, i3);
            for (int64_t k0 = 0; k0 < K; k0 += kc_max) {
                const int64_t kc = K - k0 < kc_max ? K - k0 : kc_max;
                op_pack(n, sr, k0, kc, r_i2, r_i3, M, mr, ap, c);
                op_pack(n, sc, k0, kc, c_i2, c_i3, N, OP_NR, bp, c);
                pgc_barrier(c);
                for (int64_t u = u0; u < u1; u++) {
                    const int64_t ip = u / njp, jp = u % njp;
                    const int64_t i0 = ip * mr, j0 = jp * OP_NR;
                    const int64_t mi = M - i0 < mr ? M - i0 : mr, nj = N - j0 < OP_NR ? N - j0 : OP_NR;
                    const float *at = ap + ip * kc * mr, *bt = bp + jp * kc * OP_NR;
                    char *d = dbase + i0 * ds_i + j0 * ds_j;
                    if (direct && mi == mr && nj == OP_NR) {
                        tile(kc, at, bt, (float *)d, ds_j / 4, k0 > 0);
                        continue;
                    }
                    float t[OP_NR * OP_MR_MAX]; /* an edge tile or a strided dst: through a local tile */
                    if (k0 > 0)
                        for (int64_t j = 0; j < nj; j++)
                            for (int64_t i = 0; i < mi; i++) t[j * mr + i] = *(float *)(d + j * ds_j + i * ds_i);
                    tile(kc, at, bt, t, mr, k0 > 0);
                    for (int64_t j = 0; j < nj; j++)
                        for (int64_t i = 0; i < mi; i++) *(float *)(d + j * ds_j + i * ds_i) = t[j * mr + i];
                }
                pgc_barrier(c); /* the packs are rewritten by the next block */
            }
        }
    return PGC_OK;
}
