/* Convolution family (issue 21): IM2COL, IM2COL_3D, COL2IM_1D, CONV_TRANSPOSE_1D, CONV_2D, CONV_3D, CONV_2D_DW,
   CONV_TRANSPOSE_2D. Slots: 0 dst, 1 src0 (kernel or columns), 2 src1 (input); ip holds ggml's op_params words.

   CONV_2D and CONV_3D are one implicit GEMM: out[p, o] = sum_k patch[p, k] * w[k, o] over output positions p and
   k = (ic, kz, ky, kx). The weights are packed once per node into blocks of CV_NR output channels (shared work,
   every thread packs some, then a barrier); each thread then takes blocks of CV_PB positions, gathers their patches
   (zero padding, strides, dilation: any input strides) into its own area of the shared work as groups of CV_MR
   positions, and runs a CV_MR x CV_NR register tile over k. The tile is written with GCC vector types so it
   compiles to 256-bit FMAs where the CPU has AVX2 (a target attribute, chosen at run time by the kernel level) and
   to whatever the baseline has elsewhere. F16 kernels see their patches rounded to F16 first, as ggml's im2col
   does before its F16 GEMM. The other ops gather per output element, split across threads by output rows. */
#include "pgc.h"

#define CV_MR 6   /* positions per register tile */
#define CV_NR 16  /* output channels per register tile (two 8-float vectors) */
#define CV_PB 48  /* positions per thread block (a multiple of CV_MR) */

/* A convolution's geometry: spatial dims x, y, z (width, height, depth); byte strides of the input (x, y, z,
   channel, batch), of the kernel (x, y, z, in-channel, out-channel) and of the output (x, y, z, out-channel,
   batch). The 2-D ops have depth 1. */
typedef struct cv_geo {
    int64_t n, ic, oc, iw, ih, id, kw, kh, kd, ow, oh, od;
    int64_t s[3], p[3], d[3];
    int64_t xb[5], kb[5], ob[5];
} cv_geo;

static int64_t cv_k(const cv_geo *g) { return g->ic * g->kd * g->kh * g->kw; }

/* CONV_2D: kernel [KW, KH, IC, OC], input [W, H, IC, N], dst [OW, OH, OC, N]; ip s0 s1 p0 p1 d0 d1.
   CONV_3D: kernel [KW, KH, KD, IC*OC], input [W, H, D, IC*N], dst [OW, OH, OD, OC*N]; ip s0 s1 s2 p0 p1 p2 d0 d1
   d2 c n oc. */
static void cv_geo_of(const pgc_node *n, cv_geo *g) {
    const int64_t *xe = n->ne[2], *ke = n->ne[1], *oe = n->ne[0], *xn = n->nb[2], *kn = n->nb[1], *on = n->nb[0];
    if (n->op == PGC_OP_CONV_3D) {
        g->ic = n->ip[9]; g->n = n->ip[10]; g->oc = n->ip[11];
        g->iw = xe[0]; g->ih = xe[1]; g->id = xe[2];
        g->kw = ke[0]; g->kh = ke[1]; g->kd = ke[2];
        g->ow = oe[0]; g->oh = oe[1]; g->od = oe[2];
        for (int i = 0; i < 3; i++) { g->s[i] = n->ip[i]; g->p[i] = n->ip[3 + i]; g->d[i] = n->ip[6 + i]; }
        const int64_t x5[5] = {xn[0], xn[1], xn[2], xn[3], xn[3] * g->ic};
        const int64_t k5[5] = {kn[0], kn[1], kn[2], kn[3], kn[3] * g->ic};
        const int64_t o5[5] = {on[0], on[1], on[2], on[3], on[3] * g->oc};
        memcpy(g->xb, x5, sizeof x5); memcpy(g->kb, k5, sizeof k5); memcpy(g->ob, o5, sizeof o5);
        return;
    }
    g->ic = xe[2]; g->n = xe[3]; g->oc = ke[3];
    g->iw = xe[0]; g->ih = xe[1]; g->id = 1;
    g->kw = ke[0]; g->kh = ke[1]; g->kd = 1;
    g->ow = oe[0]; g->oh = oe[1]; g->od = 1;
    g->s[0] = n->ip[0]; g->s[1] = n->ip[1]; g->s[2] = 1;
    g->p[0] = n->ip[2]; g->p[1] = n->ip[3]; g->p[2] = 0;
    g->d[0] = n->ip[4]; g->d[1] = n->ip[5]; g->d[2] = 1;
    const int64_t x5[5] = {xn[0], xn[1], 0, xn[2], xn[3]};
    const int64_t k5[5] = {kn[0], kn[1], 0, kn[2], kn[3]};
    const int64_t o5[5] = {on[0], on[1], 0, on[2], on[3]};
    memcpy(g->xb, x5, sizeof x5); memcpy(g->kb, k5, sizeof k5); memcpy(g->ob, o5, sizeof o5);
}

static size_t cv_al(size_t x) { return (x + 63) & ~(size_t)63; }

static size_t cv_wpack_bytes(const cv_geo *g) {
    return cv_al((size_t)((g->oc + CV_NR - 1) / CV_NR) * (size_t)cv_k(g) * CV_NR * sizeof(float));
}
static size_t cv_patch_bytes(const cv_geo *g) { return cv_al((size_t)CV_PB * (size_t)cv_k(g) * sizeof(float)); }

size_t pgc_conv_shared(const pgc_node *n, int nth) {
    if (n->op != PGC_OP_CONV_2D && n->op != PGC_OP_CONV_3D) return 0;
    cv_geo g;
    cv_geo_of(n, &g);
    return cv_wpack_bytes(&g) + (size_t)nth * cv_patch_bytes(&g);
}

/* ---- the register tile: c[CV_MR][CV_NR] = sum_k a[k][CV_MR] (x) b[k][CV_NR] --------------------------------- */

typedef float cv_v8 __attribute__((vector_size(32)));
typedef float cv_v8u __attribute__((vector_size(32), aligned(4)));

#define CV_TILE_BODY                                                                                          \
    cv_v8 c0[CV_MR], c1[CV_MR];                                                                               \
    for (int i = 0; i < CV_MR; i++) { c0[i] = (cv_v8){0}; c1[i] = (cv_v8){0}; }                              \
    for (int64_t k = 0; k < K; k++) {                                                                         \
        const cv_v8 b0 = *(const cv_v8 *)(b + k * CV_NR), b1 = *(const cv_v8 *)(b + k * CV_NR + 8);          \
        const float *ak = a + k * CV_MR;                                                                      \
        for (int i = 0; i < CV_MR; i++) {                                                                     \
            const float v = ak[i];                                                                            \
            const cv_v8 ai = {v, v, v, v, v, v, v, v}; /* a broadcast load (0 + v would cost an add) */          \
            c0[i] += ai * b0;                                                                                 \
            c1[i] += ai * b1;                                                                                 \
        }                                                                                                     \
    }                                                                                                         \
    for (int i = 0; i < CV_MR; i++) {                                                                         \
        *(cv_v8u *)(c + i * CV_NR) = c0[i];                                                                   \
        *(cv_v8u *)(c + i * CV_NR + 8) = c1[i];                                                               \
    }

typedef void (*cv_tile_fn)(int64_t K, const float *restrict a, const float *restrict b, float *restrict c);

static void cv_tile_base(int64_t K, const float *restrict a, const float *restrict b, float *restrict c) {
    CV_TILE_BODY
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) static void cv_tile_avx2(int64_t K, const float *restrict a,
                                                              const float *restrict b, float *restrict c) {
    CV_TILE_BODY
}
#endif

static cv_tile_fn cv_tile(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (pgc_S.level >= 1 && pgc_S.level <= 4) return cv_tile_avx2; /* every x86 level above 0 has AVX2 + FMA */
#endif
    return cv_tile_base;
}

/* ---- packing ------------------------------------------------------------------------------------------------ */

/* weights of output-channel block ob as [k][CV_NR] floats (channels past OC zero); k = ((ic*KD + z)*KH + y)*KW + x */
static void cv_pack_w(const pgc_node *n, const cv_geo *g, int64_t ob, float *dst) {
    const int kt = n->type[1];
    const char *base = (const char *)(uintptr_t)n->data[1];
    int64_t k = 0;
    for (int64_t ic = 0; ic < g->ic; ic++)
        for (int64_t z = 0; z < g->kd; z++)
            for (int64_t y = 0; y < g->kh; y++)
                for (int64_t x = 0; x < g->kw; x++, k++) {
                    const char *p = base + x * g->kb[0] + y * g->kb[1] + z * g->kb[2] + ic * g->kb[3];
                    float *row = dst + k * CV_NR;
                    for (int j = 0; j < CV_NR; j++) {
                        const int64_t o = ob * CV_NR + j;
                        row[j] = o < g->oc ? pgc_ld(p + o * g->kb[4], kt) : 0.0f;
                    }
                }
}

/* the input row (x = 0) that tap row (ic, kz, ky) reads for an output whose window starts at rows y0, z0 of batch
   bn; NULL where that row lies in the zero padding. The one bounds rule of both patch gathers below. */
static inline const char *cv_tap_row(const cv_geo *g, const char *base, int64_t bn, int64_t y0, int64_t z0,
                                     int64_t ic, int64_t kz, int64_t ky) {
    const int64_t iz = z0 + kz * g->d[2], iy = y0 + ky * g->d[1];
    if (iz < 0 || iz >= g->id || iy < 0 || iy >= g->ih) return NULL;
    return base + ic * g->xb[3] + bn * g->xb[4] + iz * g->xb[2] + iy * g->xb[1];
}

/* the patches of CV_MR positions ox0 .. ox0+CV_MR-1 of one output row (oy, oz, batch bn) of an F32 input: tap by
   tap, its CV_MR values written together (the usual case, and the cheap one: one bounds check per tap where the
   whole group is inside the input) */
static void cv_pack_row(const cv_geo *g, const char *base, int64_t ox0, int64_t oy, int64_t oz, int64_t bn,
                        float *gd) {
    const int64_t x0 = ox0 * g->s[0] - g->p[0], y0 = oy * g->s[1] - g->p[1], z0 = oz * g->s[2] - g->p[2];
    const int64_t sx = g->s[0] * g->xb[0], last = (CV_MR - 1) * g->s[0];
    float *o = gd;
    for (int64_t ic = 0; ic < g->ic; ic++) {
        for (int64_t kz = 0; kz < g->kd; kz++) {
            for (int64_t ky = 0; ky < g->kh; ky++) {
                const char *pr = cv_tap_row(g, base, bn, y0, z0, ic, kz, ky);
                if (!pr) {
                    memset(o, 0, (size_t)(g->kw * CV_MR) * sizeof(float));
                    o += g->kw * CV_MR;
                    continue;
                }
                for (int64_t kx = 0; kx < g->kw; kx++, o += CV_MR) {
                    const int64_t ix = x0 + kx * g->d[0];
                    if (ix >= 0 && ix + last < g->iw) {
                        const char *pe = pr + ix * g->xb[0];
                        for (int i = 0; i < CV_MR; i++) o[i] = *(const float *)(pe + i * sx);
                    } else {
                        for (int i = 0; i < CV_MR; i++) {
                            const int64_t xi = ix + i * g->s[0];
                            o[i] = xi >= 0 && xi < g->iw ? *(const float *)(pr + xi * g->xb[0]) : 0.0f;
                        }
                    }
                }
            }
        }
    }
}

/* patches of positions q0 .. q0+np-1 (flattened x fastest, then y, z, batch) as groups of CV_MR positions,
   each group [k][CV_MR] (positions past np zero); round: F16 kernels see F16-rounded patches (the level's
   round_f16 over the whole block: F16C where the CPU has it) */
static void cv_pack_x(const pgc_node *n, const cv_geo *g, int64_t q0, int64_t np, float *dst, int round) {
    const int xt = n->type[2];
    const char *base = (const char *)(uintptr_t)n->data[2];
    const int64_t K = cv_k(g), ngr = (np + CV_MR - 1) / CV_MR;
    const int fast = xt == T_F32;
    for (int64_t gi = 0; gi < ngr; gi++) {
        float *gd = dst + gi * K * CV_MR;
        const int64_t qg = q0 + gi * CV_MR, oxg = qg % g->ow;
        if (fast && gi * CV_MR + CV_MR <= np && oxg + CV_MR <= g->ow) { /* one output row */
            cv_pack_row(g, base, oxg, (qg / g->ow) % g->oh, (qg / (g->ow * g->oh)) % g->od,
                        qg / (g->ow * g->oh * g->od), gd);
            continue;
        }
        for (int i = 0; i < CV_MR; i++) {
            const int64_t qi = gi * CV_MR + i;
            if (qi >= np) {
                for (int64_t k = 0; k < K; k++) gd[k * CV_MR + i] = 0.0f;
                continue;
            }
            const int64_t q = q0 + qi;
            const int64_t ox = q % g->ow, oy = (q / g->ow) % g->oh, oz = (q / (g->ow * g->oh)) % g->od;
            const int64_t bn = q / (g->ow * g->oh * g->od);
            const int64_t x0 = ox * g->s[0] - g->p[0], y0 = oy * g->s[1] - g->p[1], z0 = oz * g->s[2] - g->p[2];
            int64_t k = 0;
            for (int64_t ic = 0; ic < g->ic; ic++) {
                for (int64_t kz = 0; kz < g->kd; kz++) {
                    for (int64_t ky = 0; ky < g->kh; ky++) {
                        const char *pr = cv_tap_row(g, base, bn, y0, z0, ic, kz, ky);
                        for (int64_t kx = 0; kx < g->kw; kx++, k++) {
                            const int64_t ix = x0 + kx * g->d[0];
                            float v = 0.0f;
                            if (pr && ix >= 0 && ix < g->iw) {
                                const char *pe = pr + ix * g->xb[0];
                                v = fast ? *(const float *)pe : pgc_ld(pe, xt);
                            }
                            gd[k * CV_MR + i] = v;
                        }
                    }
                }
            }
        }
    }
    if (round) pgc_S.round_f16(dst, ngr * K * CV_MR);
}

/* ---- CONV_2D / CONV_3D -------------------------------------------------------------------------------------- */

static int cv_conv(const pgc_node *n, const pgc_tctx *c) {
    cv_geo g;
    cv_geo_of(n, &g);
    const int kt = n->type[1], ot = n->type[0];
    if ((kt != T_F32 && kt != T_F16 && kt != T_BF16) || (ot != T_F32 && ot != T_F16 && ot != T_BF16))
        return PGC_E_TYPE;
    const int64_t K = cv_k(&g), nob = (g.oc + CV_NR - 1) / CV_NR;
    float *wp = (float *)c->wdata;
    float *xp = (float *)(c->wdata + cv_wpack_bytes(&g) + (size_t)c->ith * cv_patch_bytes(&g));
    int64_t b0, b1;
    pgc_split(nob, c->ith, c->nth, &b0, &b1);
    for (int64_t ob = b0; ob < b1; ob++) cv_pack_w(n, &g, ob, wp + ob * K * CV_NR);
    pgc_barrier(c);
    const cv_tile_fn tile = cv_tile();
    const int64_t npos = g.n * g.od * g.oh * g.ow, nblk = (npos + CV_PB - 1) / CV_PB;
    /* blocks interleaved across threads, so a thread's last block is never far behind the others' */
    for (int64_t blk = c->ith; blk < nblk; blk += c->nth) {
        const int64_t q0 = blk * CV_PB, np = npos - q0 < CV_PB ? npos - q0 : CV_PB;
        cv_pack_x(n, &g, q0, np, xp, kt == T_F16);
        char *outp[CV_PB];
        for (int64_t i = 0; i < np; i++) {
            const int64_t q = q0 + i;
            const int64_t ox = q % g.ow, oy = (q / g.ow) % g.oh, oz = (q / (g.ow * g.oh)) % g.od;
            const int64_t bn = q / (g.ow * g.oh * g.od);
            outp[i] = (char *)(uintptr_t)n->data[0] + ox * g.ob[0] + oy * g.ob[1] + oz * g.ob[2] + bn * g.ob[4];
        }
        for (int64_t ob = 0; ob < nob; ob++) {
            const float *wb = wp + ob * K * CV_NR;
            const int64_t nc = g.oc - ob * CV_NR < CV_NR ? g.oc - ob * CV_NR : CV_NR;
            for (int64_t gi = 0; gi * CV_MR < np; gi++) {
                float acc[CV_MR * CV_NR];
                tile(K, xp + gi * K * CV_MR, wb, acc);
                for (int i = 0; i < CV_MR && gi * CV_MR + i < np; i++) {
                    char *o = outp[gi * CV_MR + i] + ob * CV_NR * g.ob[3];
                    if (ot == T_F32)
                        for (int64_t j = 0; j < nc; j++) *(float *)(o + j * g.ob[3]) = acc[i * CV_NR + j];
                    else
                        for (int64_t j = 0; j < nc; j++) pgc_st(o + j * g.ob[3], ot, acc[i * CV_NR + j]);
                }
            }
        }
    }
    return PGC_OK;
}

int pgc_k_conv(const pgc_node *n, const pgc_tctx *c) { return cv_conv(n, c); }

/* ---- IM2COL / IM2COL_3D ------------------------------------------------------------------------------------- */

/* IM2COL ip: s0 s1 p0 p1 d0 d1 is_2d; 2-D input [W, H, IC, N] -> dst [IC*KH*KW, OW, OH, N], 1-D input [W, IC, N]
   -> dst [IC*KW, OW, N]. IM2COL_3D ip: s0 s1 s2 p0 p1 p2 d0 d1 d2 IC; input [W, H, D, N*IC] -> dst
   [IC*KD*KH*KW, OW, OH, OD*N]. One dst row per output position, split across threads. */
int pgc_k_im2col(const pgc_node *n, const pgc_tctx *c) {
    cv_geo g;
    const int64_t *xe = n->ne[2], *ke = n->ne[1], *oe = n->ne[0], *xn = n->nb[2];
    int64_t db2 = n->nb[0][2], db3 = n->nb[0][3];
    memset(&g, 0, sizeof g);
    if (n->op == PGC_OP_IM2COL_3D) {
        g.ic = n->ip[9];
        g.iw = xe[0]; g.ih = xe[1]; g.id = xe[2]; g.n = xe[3] / g.ic;
        g.kw = ke[0]; g.kh = ke[1]; g.kd = ke[2];
        g.ow = oe[1]; g.oh = oe[2]; g.od = oe[3] / g.n;
        for (int i = 0; i < 3; i++) { g.s[i] = n->ip[i]; g.p[i] = n->ip[3 + i]; g.d[i] = n->ip[6 + i]; }
        const int64_t x5[5] = {xn[0], xn[1], xn[2], xn[3], xn[3] * g.ic};
        memcpy(g.xb, x5, sizeof x5);
    } else {
        const int is2d = n->ip[6] == 1;
        g.s[0] = n->ip[0]; g.s[1] = is2d ? n->ip[1] : 1; g.s[2] = 1;
        g.p[0] = n->ip[2]; g.p[1] = is2d ? n->ip[3] : 0; g.p[2] = 0;
        g.d[0] = n->ip[4]; g.d[1] = is2d ? n->ip[5] : 1; g.d[2] = 1;
        g.iw = xe[0]; g.id = 1; g.kw = ke[0]; g.kd = 1; g.ow = oe[1]; g.od = 1;
        if (is2d) {
            g.ih = xe[1]; g.ic = xe[2]; g.n = xe[3]; g.kh = ke[1]; g.oh = oe[2];
            const int64_t x5[5] = {xn[0], xn[1], 0, xn[2], xn[3]};
            memcpy(g.xb, x5, sizeof x5);
        } else {
            g.ih = 1; g.ic = xe[1]; g.n = xe[2]; g.kh = 1; g.oh = 1;
            const int64_t x5[5] = {xn[0], 0, 0, xn[1], xn[2]};
            memcpy(g.xb, x5, sizeof x5);
            db3 = n->nb[0][2];
        }
    }
    const int xt = n->type[2], dt = n->type[0];
    const int64_t nb00 = n->nb[0][0], nrows = g.ow * g.oh * g.od * g.n;
    const char *xbase = (const char *)(uintptr_t)n->data[2];
    int64_t r0, r1;
    pgc_split(nrows, c->ith, c->nth, &r0, &r1);
    float *tmp = (float *)c->scratch; /* one row of floats: the scratch holds 16 bytes per dst ne[0] */
    const int64_t kall = n->ne[0][0];
    for (int64_t r = r0; r < r1; r++) {
        const int64_t ox = r % g.ow, oy = (r / g.ow) % g.oh, oz = (r / (g.ow * g.oh)) % g.od;
        const int64_t bn = r / (g.ow * g.oh * g.od);
        char *row = (char *)(uintptr_t)n->data[0] + ox * n->nb[0][1] + oy * db2 + (bn * g.od + oz) * db3;
        int64_t k = 0;
        for (int64_t ic = 0; ic < g.ic; ic++)
            for (int64_t kz = 0; kz < g.kd; kz++) {
                const int64_t iz = oz * g.s[2] + kz * g.d[2] - g.p[2];
                for (int64_t ky = 0; ky < g.kh; ky++) {
                    const int64_t iy = oy * g.s[1] + ky * g.d[1] - g.p[1];
                    const int in_zy = iz >= 0 && iz < g.id && iy >= 0 && iy < g.ih;
                    for (int64_t kx = 0; kx < g.kw; kx++, k++) {
                        const int64_t ix = ox * g.s[0] + kx * g.d[0] - g.p[0];
                        float v = 0.0f;
                        if (in_zy && ix >= 0 && ix < g.iw) {
                            const char *p = xbase + ix * g.xb[0] + iy * g.xb[1] + iz * g.xb[2] + ic * g.xb[3] +
                                            bn * g.xb[4];
                            v = xt == T_F32 ? *(const float *)p : pgc_ld(p, xt);
                        }
                        tmp[k] = v;
                    }
                }
            }
        if (dt == T_F32 && nb00 == 4) memcpy(row, tmp, (size_t)kall * 4);
        else if (nb00 == pgc_type_size(dt)) pgc_from_float(tmp, row, kall, dt);
        else for (int64_t j = 0; j < kall; j++) pgc_st(row + j * nb00, dt, tmp[j]);
    }
    return PGC_OK;
}

/* ---- COL2IM_1D: ip s0 oc p0; src [K*OC, T_in] -> dst [T_out, OC] (same type) --------------------------------- */

int pgc_k_col2im_1d(const pgc_node *n, const pgc_tctx *c) {
    const int64_t s0 = n->ip[0], oc = n->ip[1], p0 = n->ip[2];
    const int64_t k_all = n->ne[1][0], t_in = n->ne[1][1], kk = k_all / oc, t_out = n->ne[0][0];
    const int st = n->type[1], dt = n->type[0];
    int64_t e0, e1;
    pgc_split(oc * t_out, c->ith, c->nth, &e0, &e1);
    for (int64_t e = e0; e < e1; e++) {
        const int64_t o = e / t_out, t = e % t_out, ta = t + p0;
        int64_t lo = ta - kk + 1 > 0 ? (ta - kk + 1 + s0 - 1) / s0 : 0, hi = ta / s0;
        if (hi > t_in - 1) hi = t_in - 1;
        float sum = 0.0f;
        for (int64_t ti = lo; ti <= hi; ti++) {
            const int64_t k = ta - ti * s0;
            if (k >= 0 && k < kk) sum += pgc_ld(pgc_ptr(n, 1, o * kk + k, ti, 0, 0), st);
        }
        pgc_st(pgc_ptr(n, 0, t, o, 0, 0), dt, sum);
    }
    return PGC_OK;
}

/* ---- CONV_TRANSPOSE_1D / _2D: gather form (each output sums the taps that land on it) ----------------------- */

static inline float cv_in(const char *p, int xt, int round) {
    const float v = pgc_ld(p, xt);
    return round ? pgc_fp16_to_fp32(pgc_fp32_to_fp16(v)) : v;
}

/* CONV_TRANSPOSE_1D: ip s0; kernel [K, OC, IC], input [L, IC] -> dst [(L-1)*s0 + K, OC]. CONV_TRANSPOSE_2D: ip
   stride; kernel [KW, KH, OC, IC], input [W, H, IC, N] -> dst [(W-1)*s + KW, (H-1)*s + KH, OC, N]. The 1-D op is
   the 2-D one with height 1. F16 kernels see F16-rounded inputs, as ggml converts them. */
int pgc_k_conv_transpose(const pgc_node *n, const pgc_tctx *c) {
    const int is2d = n->op == PGC_OP_CONV_TRANSPOSE_2D;
    const int64_t s = n->ip[0];
    const int64_t *ke = n->ne[1], *kn = n->nb[1], *xe = n->ne[2], *xn = n->nb[2];
    const int64_t kw = ke[0], kh = is2d ? ke[1] : 1, ocn = is2d ? ke[2] : ke[1], icn = is2d ? ke[3] : ke[2];
    const int64_t kbo = is2d ? kn[2] : kn[1], kbi = is2d ? kn[3] : kn[2], kby = is2d ? kn[1] : 0;
    const int64_t iw = xe[0], ih = is2d ? xe[1] : 1, xbi = is2d ? xn[2] : xn[1], xby = is2d ? xn[1] : 0;
    const int64_t xbn = is2d ? xn[3] : 0;
    const int64_t ow = n->ne[0][0], oh = is2d ? n->ne[0][1] : 1, nb = is2d ? n->ne[0][3] : 1;
    const int kt = n->type[1], xt = n->type[2], dt = n->type[0], round = kt == T_F16;
    const char *kb = (const char *)(uintptr_t)n->data[1], *xb = (const char *)(uintptr_t)n->data[2];
    int64_t r0, r1;
    pgc_split(oh * ocn * nb, c->ith, c->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t y = r % oh, o = (r / oh) % ocn, bn = r / (oh * ocn);
        char *drow = is2d ? pgc_ptr(n, 0, 0, y, o, bn) : pgc_ptr(n, 0, 0, o, 0, 0);
        for (int64_t x = 0; x < ow; x++) {
            float sum = 0.0f;
            for (int64_t ky = y % s; ky < kh; ky += s) {
                const int64_t iy = (y - ky) / s;
                if (iy < 0 || iy >= ih) continue;
                for (int64_t kx = x % s; kx < kw; kx += s) {
                    const int64_t ix = (x - kx) / s;
                    if (ix < 0 || ix >= iw) continue;
                    const char *kp = kb + kx * kn[0] + ky * kby + o * kbo;
                    const char *xp = xb + ix * xn[0] + iy * xby + bn * xbn;
                    for (int64_t ic = 0; ic < icn; ic++)
                        sum += pgc_ld(kp + ic * kbi, kt) * cv_in(xp + ic * xbi, xt, round);
                }
            }
            pgc_st(drow + x * n->nb[0][0], dt, sum);
        }
    }
    return PGC_OK;
}

/* ---- CONV_2D_DW: ip s0 s1 p0 p1 d0 d1; kernel [KW, KH, 1, C], input [W, H, C, N] -> dst [OW, OH, C, N] ------- */

int pgc_k_conv_2d_dw(const pgc_node *n, const pgc_tctx *c) {
    const int64_t s0 = n->ip[0], s1 = n->ip[1], p0 = n->ip[2], p1 = n->ip[3], d0 = n->ip[4], d1 = n->ip[5];
    const int64_t kw = n->ne[1][0], kh = n->ne[1][1], iw = n->ne[2][0], ih = n->ne[2][1];
    const int64_t ow = n->ne[0][0], oh = n->ne[0][1], ch = n->ne[0][2];
    const int kt = n->type[1], xt = n->type[2], dt = n->type[0];
    int64_t r0, r1;
    pgc_split(oh * ch * n->ne[0][3], c->ith, c->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t y = r % oh, ci = (r / oh) % ch, bn = r / (oh * ch);
        char *drow = pgc_ptr(n, 0, 0, y, ci, bn);
        for (int64_t x = 0; x < ow; x++) {
            float sum = 0.0f;
            for (int64_t ky = 0; ky < kh; ky++) {
                const int64_t iy = y * s1 + ky * d1 - p1;
                if (iy < 0 || iy >= ih) continue;
                for (int64_t kx = 0; kx < kw; kx++) {
                    const int64_t ix = x * s0 + kx * d0 - p0;
                    if (ix < 0 || ix >= iw) continue;
                    sum += pgc_ld(pgc_ptr(n, 1, kx, ky, 0, ci), kt) * pgc_ld(pgc_ptr(n, 2, ix, iy, ci, bn), xt);
                }
            }
            pgc_st(drow + x * n->nb[0][0], dt, sum);
        }
    }
    return PGC_OK;
}
