/* The gradients of IM2COL and POOL_2D (issue 22): IM2COL_BACK and POOL_2D_BACK, ggml's ops with ggml's op_params
   words in `ip` (IM2COL's s0 s1 p0 p1 d0 d1 is_2d; POOL_2D's op k0 k1 s0 s1 p0 p1). Every source is read and the
   result written through its strides. Both keep ggml's float32 summation order, so they match ggml's CPU backend
   bit for bit on its layouts; docs/op-semantics.md states the ops. Slots: 0 dst, 1 src0 (the gradient), 2 src1
   (IM2COL_BACK: the kernel, read for its shape; POOL_2D_BACK: POOL_2D's input). */
#include <float.h>
#include "pgc.h"

static inline float ld4(const pgc_node *n, int s, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return pgc_ld(pgc_ptr(n, s, i0, i1, i2, i3), n->type[s]);
}

/* IM2COL_BACK: each input element (x, y, c, b) gathers the gradient of every (output, tap) IM2COL copied it to,
   found by solving out*s + k*d - p = i for the output (exact division only). Threads split the (b, c) planes. */
int pgc_k_im2col_back(const pgc_node *n, const pgc_tctx *c) {
    const int s0 = n->ip[0], s1 = n->ip[1], p0 = n->ip[2], p1 = n->ip[3], d0 = n->ip[4], d1 = n->ip[5];
    const int is_2d = n->ip[6] == 1;
    if (s0 < 1 || (is_2d && s1 < 1)) return PGC_E_SHAPE;
    const int64_t iw = n->ne[0][0], ih = is_2d ? n->ne[0][1] : 1;
    const int64_t ic = is_2d ? n->ne[0][2] : n->ne[0][1], nb = is_2d ? n->ne[0][3] : n->ne[0][2];
    const int64_t kw = n->ne[2][0], kh = is_2d ? n->ne[2][1] : 1;
    const int64_t ow = n->ne[1][1], oh = is_2d ? n->ne[1][2] : 1;
    int64_t r0, r1;
    pgc_split(nb * ic, c->ith, c->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t b = r / ic, ch = r % ic;
        for (int64_t y = 0; y < ih; y++) {
            for (int64_t x = 0; x < iw; x++) {
                float acc = 0.0f;
                for (int64_t ky = 0; ky < kh; ky++) {
                    int64_t oy = 0;
                    if (is_2d) {
                        const int64_t ty = y + p1 - ky * d1;
                        if (ty % s1 != 0) continue;
                        oy = ty / s1;
                        if (oy < 0 || oy >= oh) continue;
                    }
                    for (int64_t kx = 0; kx < kw; kx++) {
                        const int64_t tx = x + p0 - kx * d0;
                        if (tx % s0 != 0) continue;
                        const int64_t ox = tx / s0;
                        if (ox < 0 || ox >= ow) continue;
                        const int64_t k = (ch * kh + ky) * kw + kx;
                        acc += is_2d ? ld4(n, 1, k, ox, oy, b) : ld4(n, 1, k, ox, b, 0);
                    }
                }
                float *out = is_2d ? (float *)pgc_ptr(n, 0, x, y, ch, b) : (float *)pgc_ptr(n, 0, x, ch, b, 0);
                *out = acc;
            }
        }
    }
    return PGC_OK;
}

/* POOL_2D_BACK: per (i2, i3) plane, zero it, then visit the outputs in ggml's order (rows, then columns) and add
   each one's gradient: AVG grad/(k0*k1) on the window's elements inside the input, MAX grad on the element ggml's
   scan picks (from -FLT_MAX, a value replaces the running maximum unless it is <= it). Threads split the planes,
   so each plane's sums keep ggml's order. */
int pgc_k_pool_2d_back(const pgc_node *n, const pgc_tctx *c) {
    const int avg = n->ip[0] == 1, k0 = n->ip[1], k1 = n->ip[2], s0 = n->ip[3], s1 = n->ip[4];
    const int p0 = n->ip[5], p1 = n->ip[6];
    const int64_t w = n->ne[0][0], h = n->ne[0][1], ne2 = n->ne[0][2];
    const int64_t ow = n->ne[1][0], oh = n->ne[1][1];
    const float ka = (float)((int64_t)k0 * k1); /* 64-bit: two int32 words may overflow an int */
    int64_t r0, r1;
    pgc_split(ne2 * n->ne[0][3], c->ith, c->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i2 = r % ne2, i3 = r / ne2;
        for (int64_t y = 0; y < h; y++)
            for (int64_t x = 0; x < w; x++) *(float *)pgc_ptr(n, 0, x, y, i2, i3) = 0.0f;
        for (int64_t oy = 0; oy < oh; oy++) {
            for (int64_t ox = 0; ox < ow; ox++) {
                const float g = ld4(n, 1, ox, oy, i2, i3);
                const int64_t iy = oy * s1 - p1, ix = ox * s0 - p0;
                if (avg) {
                    const float share = g / ka;
                    for (int64_t y = iy; y < iy + k1; y++) {
                        if (y < 0 || y >= h) continue;
                        for (int64_t x = ix; x < ix + k0; x++) {
                            if (x < 0 || x >= w) continue;
                            *(float *)pgc_ptr(n, 0, x, y, i2, i3) += share;
                        }
                    }
                    continue;
                }
                float best = -FLT_MAX;
                int64_t by = -1, bx = -1;
                for (int64_t y = iy; y < iy + k1; y++) {
                    if (y < 0 || y >= h) continue;
                    for (int64_t x = ix; x < ix + k0; x++) {
                        if (x < 0 || x >= w) continue;
                        const float v = ld4(n, 2, x, y, i2, i3);
                        if (v <= best) continue;
                        best = v;
                        by = y;
                        bx = x;
                    }
                }
                if (by >= 0) *(float *)pgc_ptr(n, 0, bx, by, i2, i3) += g;
            }
        }
    }
    return PGC_OK;
}
