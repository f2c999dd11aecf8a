/* Spatial ops of ggml's vision and audio models (issue 21): POOL_1D, POOL_2D, UPSCALE, PAD_REFLECT_1D, ROLL,
   TIMESTEP_EMBEDDING, WIN_PART, WIN_UNPART, GET_REL_POS, ADD_REL_POS. Every op writes whole dst rows (dims 1..3),
   split across threads; sources are read through their strides, so views need no copy first. The float32 steps
   that decide which element is read (UPSCALE's nearest index) or the rounding order (ADD_REL_POS's two adds) are
   ggml's, so results match ggml's CPU backend bit for bit on contiguous inputs. docs/op-semantics.md states each
   op. One C op (PGC_OP_SPATIAL), the ggml op in `sub` (PGC_SP_*), ggml's op_params words in `ip`. Slots: 0 dst,
   1 src0, 2 src1, 3 src2. */
#include <float.h>
#include "pgc.h"

static inline float ld4(const pgc_node *n, int s, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return pgc_ld(pgc_ptr(n, s, i0, i1, i2, i3), n->type[s]);
}
static inline float *dst_f32(const pgc_node *n, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (float *)pgc_ptr(n, 0, i0, i1, i2, i3);
}

/* POOL_1D: ip = op (0 max, 1 avg over the real elements of the window), k0, s0, p0 */
static void pool_1d(const pgc_node *n, int64_t i1, int64_t i2, int64_t i3) {
    const int avg = n->ip[0] == 1, k = n->ip[1], s = n->ip[2], p = n->ip[3];
    const int64_t iw = n->ne[1][0];
    for (int64_t o = 0; o < n->ne[0][0]; o++) {
        float res = avg ? 0.0f : -FLT_MAX;
        int count = 0;
        for (int64_t j = o * s - p; j < o * s - p + k; j++) {
            if (j < 0 || j >= iw) continue;
            const float v = ld4(n, 1, j, i1, i2, i3);
            if (avg) res += v;
            else res = v < res ? res : v;
            count++;
        }
        if (avg) res = count > 0 ? res / (float)count : 0.0f;
        *dst_f32(n, o, i1, i2, i3) = res;
    }
}

/* POOL_2D: ip = op (0 max, 1 avg divided by k0*k1, padding included), k0, k1, s0, s1, p0, p1 */
static void pool_2d(const pgc_node *n, int64_t oy, int64_t i2, int64_t i3) {
    const int avg = n->ip[0] == 1, k0 = n->ip[1], k1 = n->ip[2], s0 = n->ip[3], s1 = n->ip[4], p0 = n->ip[5];
    const int p1 = n->ip[6];
    const int64_t iw = n->ne[1][0], ih = n->ne[1][1];
    const int64_t iy = oy * s1 - p1;
    for (int64_t ox = 0; ox < n->ne[0][0]; ox++) {
        const int64_t ix = ox * s0 - p0;
        float res = avg ? 0.0f : -FLT_MAX;
        for (int64_t y = iy; y < iy + k1; y++) {
            if (y < 0 || y >= ih) continue;
            for (int64_t x = ix; x < ix + k0; x++) {
                if (x < 0 || x >= iw) continue;
                const float v = ld4(n, 1, x, y, i2, i3);
                if (avg) res += v;
                else res = v < res ? res : v;
            }
        }
        if (avg) res /= (float)((int64_t)k0 * k1); /* 64-bit: two int32 words may overflow an int */
        *dst_f32(n, ox, oy, i2, i3) = res;
    }
}

/* UPSCALE's float32 scale of one dim and nearest source index (ggml's arithmetic, clipped into the source) */
static float up_sf(int64_t nd, int64_t ns, int align) {
    if (align && nd > 1 && ns > 1) return (float)(nd - 1) / (float)(ns - 1);
    return (float)nd / (float)ns;
}
static int64_t up_nearest(int64_t i, float sf, int64_t ns) {
    int64_t j = (int64_t)((float)i / sf);
    return j < ns - 1 ? j : ns - 1;
}
static void up_taps(int64_t i, float sf, float off, int64_t ns, int64_t *j0, int64_t *j1, float *d) {
    const float x = ((float)i + off) / sf - off;
    int64_t a = (int64_t)floorf(x), b = a + 1;
    a = a < 0 ? 0 : (a > ns - 1 ? ns - 1 : a);
    b = b < 0 ? 0 : (b > ns - 1 ? ns - 1 : b);
    float t = x - (float)a;
    *j0 = a;
    *j1 = b;
    *d = t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t);
}

/* cubic convolution (a = -0.75) of four taps at fraction t, ggml's float32 expression */
static float cubic(float p0, float p1, float p2, float p3, float t) {
    const float a = -0.75f;
#define PGC_NEAR(x) ((((a + 2) * (x) - (a + 3)) * (x) * (x)) + 1)
#define PGC_FAR(x) ((((a * (x) - 5 * a) * (x) + 8 * a) * (x)) - 4 * a)
    return p0 * PGC_FAR(t + 1) + p1 * PGC_NEAR(t) + p2 * PGC_NEAR(1 - t) + p3 * PGC_FAR(2 - t);
#undef PGC_NEAR
#undef PGC_FAR
}

static inline int64_t clampi(int64_t v, int64_t hi) { return v < 0 ? 0 : (v > hi ? hi : v); }

static void upscale_bicubic(const pgc_node *n, int64_t i1, int64_t i2, int64_t i3, int64_t j2, int64_t j3,
                            float sf0, float sf1, float off) {
    const int64_t ns0 = n->ne[1][0], ns1 = n->ne[1][1];
    const float y = ((float)i1 + off) / sf1 - off;
    const int64_t y0 = (int64_t)floorf(y);
    const float dy = y - (float)y0;
    for (int64_t i0 = 0; i0 < n->ne[0][0]; i0++) {
        const float x = ((float)i0 + off) / sf0 - off;
        const int64_t x0 = (int64_t)floorf(x);
        const float dx = x - (float)x0;
        float r[4];
        for (int k = 0; k < 4; k++) {
            const int64_t yy = clampi(y0 + k - 1, ns1 - 1);
            float p[4];
            for (int m = 0; m < 4; m++) p[m] = ld4(n, 1, clampi(x0 + m - 1, ns0 - 1), yy, j2, j3);
            r[k] = cubic(p[0], p[1], p[2], p[3], dx);
        }
        *dst_f32(n, i0, i1, i2, i3) = cubic(r[0], r[1], r[2], r[3], dy);
    }
}

/* bilinear with antialiasing: a triangle filter of half-width max(1, 1/sf) around ((i + off) / sf), normalised */
static void upscale_antialias(const pgc_node *n, int64_t i1, int64_t i2, int64_t i3, int64_t j2, int64_t j3,
                              float sf0, float sf1, float off) {
    const int64_t ns0 = n->ne[1][0], ns1 = n->ne[1][1];
    const float sup1 = fmaxf(1.0f, 1.0f / sf1), inv1 = 1.0f / sup1;
    const float sup0 = fmaxf(1.0f, 1.0f / sf0), inv0 = 1.0f / sup0;
    const float y = ((float)i1 + off) / sf1;
    int64_t y_lo = (int64_t)(y - sup1 + off), y_hi = (int64_t)(y + sup1 + off);
    y_lo = y_lo < 0 ? 0 : y_lo;
    y_hi = y_hi < ns1 ? y_hi : ns1;
    for (int64_t i0 = 0; i0 < n->ne[0][0]; i0++) {
        const float x = ((float)i0 + off) / sf0;
        int64_t x_lo = (int64_t)(x - sup0 + off), x_hi = (int64_t)(x + sup0 + off);
        x_lo = x_lo < 0 ? 0 : x_lo;
        x_hi = x_hi < ns0 ? x_hi : ns0;
        float val = 0.0f, total = 0.0f;
        for (int64_t sy = y_lo; sy < y_hi; sy++) {
            const float wy = fmaxf(1.0f - fabsf(((float)sy - y + off) * inv1), 0.0f);
            for (int64_t sx = x_lo; sx < x_hi; sx++) {
                const float w = fmaxf(1.0f - fabsf(((float)sx - x + off) * inv0), 0.0f) * wy;
                if (w <= 0.0f) continue;
                val += ld4(n, 1, sx, sy, j2, j3) * w;
                total += w;
            }
        }
        *dst_f32(n, i0, i1, i2, i3) = total > 0.0f ? val / total : val;
    }
}

/* UPSCALE: ip[0] = ggml's mode word (low byte 0 nearest, 1 bilinear, 2 bicubic; 0x100 align corners, 0x200
   antialias with bilinear) */
static void upscale(const pgc_node *n, int64_t i1, int64_t i2, int64_t i3) {
    const int mode = n->ip[0] & 0xFF, align = (n->ip[0] >> 8) & 1, antialias = (n->ip[0] >> 9) & 1;
    const int64_t ns0 = n->ne[1][0], ns1 = n->ne[1][1];
    const int64_t j3 = up_nearest(i3, up_sf(n->ne[0][3], n->ne[1][3], 0), n->ne[1][3]);
    const int64_t j2 = up_nearest(i2, up_sf(n->ne[0][2], n->ne[1][2], 0), n->ne[1][2]);
    const float sf0 = up_sf(n->ne[0][0], ns0, align), sf1 = up_sf(n->ne[0][1], ns1, align);
    if (mode == 0) {
        const int64_t j1 = up_nearest(i1, sf1, ns1);
        for (int64_t i0 = 0; i0 < n->ne[0][0]; i0++)
            *dst_f32(n, i0, i1, i2, i3) = ld4(n, 1, up_nearest(i0, sf0, ns0), j1, j2, j3);
        return;
    }
    const float off = align ? 0.0f : 0.5f;
    if (mode == 2) {
        upscale_bicubic(n, i1, i2, i3, j2, j3, sf0, sf1, off);
        return;
    }
    if (antialias) {
        upscale_antialias(n, i1, i2, i3, j2, j3, sf0, sf1, off);
        return;
    }
    int64_t y0, y1;
    float dy;
    up_taps(i1, sf1, off, ns1, &y0, &y1, &dy);
    for (int64_t i0 = 0; i0 < n->ne[0][0]; i0++) {
        int64_t x0, x1;
        float dx;
        up_taps(i0, sf0, off, ns0, &x0, &x1, &dx);
        const float a = ld4(n, 1, x0, y0, j2, j3), b = ld4(n, 1, x1, y0, j2, j3);
        const float c = ld4(n, 1, x0, y1, j2, j3), d = ld4(n, 1, x1, y1, j2, j3);
        *dst_f32(n, i0, i1, i2, i3) = a * (1 - dx) * (1 - dy) + b * dx * (1 - dy) + c * (1 - dx) * dy + d * dx * dy;
    }
}

/* PAD_REFLECT_1D: ip = p0, p1 (each below ne00) */
static void pad_reflect(const pgc_node *n, int64_t i1, int64_t i2, int64_t i3) {
    const int64_t p0 = n->ip[0], ns = n->ne[1][0];
    for (int64_t i0 = 0; i0 < n->ne[0][0]; i0++) {
        int64_t j = i0 - p0;
        if (j < 0) j = -j;
        if (j >= ns) j = 2 * (ns - 1) - j;
        *dst_f32(n, i0, i1, i2, i3) = ld4(n, 1, j, i1, i2, i3);
    }
}

static int64_t wrap(int64_t i, int64_t ne) { return i < 0 ? i + ne : (i >= ne ? i - ne : i); }

/* ROLL: ip = shifts of dims 0..3 (|shift| < ne) */
static void roll(const pgc_node *n, int64_t i1, int64_t i2, int64_t i3) {
    const int64_t j1 = wrap(i1 - n->ip[1], n->ne[1][1]), j2 = wrap(i2 - n->ip[2], n->ne[1][2]);
    const int64_t j3 = wrap(i3 - n->ip[3], n->ne[1][3]);
    const int64_t ne0 = n->ne[0][0];
    for (int64_t i0 = 0; i0 < ne0; i0++)
        *dst_f32(n, i0, i1, i2, i3) = ld4(n, 1, wrap(i0 - n->ip[0], ne0), j1, j2, j3);
}

/* TIMESTEP_EMBEDDING: ip = dim, max_period; dst row i1 embeds timestep i1 (float32 as ggml) */
static void timestep(const pgc_node *n, int64_t i1) {
    const int dim = n->ip[0], half = dim / 2;
    const float t = ld4(n, 1, i1, 0, 0, 0);
    const float lmp = logf((float)n->ip[1]);
    for (int j = 0; j < half; j++) {
        const float freq = expf(-lmp * (float)j / (float)half);
        const float arg = t * freq;
        *dst_f32(n, j, i1, 0, 0) = cosf(arg);
        *dst_f32(n, j + half, i1, 0, 0) = sinf(arg);
    }
    if (dim % 2) *dst_f32(n, dim - 1, i1, 0, 0) = 0.0f;
}

/* WIN_PART: ip = npx, npy, w; dst row (x, y, window) from image pixel (px*w + x, py*w + y) or 0 beyond it */
static void win_part(const pgc_node *n, int64_t i1, int64_t i2, int64_t i3) {
    const int64_t npx = n->ip[0], w = n->ip[2];
    const int64_t x = (i3 % npx) * w + i1, y = (i3 / npx) * w + i2;
    const int inside = x < n->ne[1][1] && y < n->ne[1][2];
    for (int64_t c = 0; c < n->ne[0][0]; c++) *dst_f32(n, c, i1, i2, i3) = inside ? ld4(n, 1, c, x, y, 0) : 0.0f;
}

/* WIN_UNPART: ip[0] = w; image pixel (i1, i2) from window (i2/w)*npx + i1/w */
static void win_unpart(const pgc_node *n, int64_t i1, int64_t i2) {
    const int64_t w = n->ip[0], npx = (n->ne[0][1] + w - 1) / w;
    const int64_t win = (i2 / w) * npx + i1 / w;
    for (int64_t c = 0; c < n->ne[0][0]; c++) *dst_f32(n, c, i1, i2, 0) = ld4(n, 1, c, i1 % w, i2 % w, win);
}

/* GET_REL_POS (F16 -> F16, bits copied): dst row (k, q) is table row (size - 1 - k) + q */
static void get_rel_pos(const pgc_node *n, int64_t k, int64_t q) {
    const int64_t row = (n->ne[0][1] - 1 - k) + q;
    for (int64_t c = 0; c < n->ne[0][0]; c++)
        memcpy(pgc_ptr(n, 0, c, k, q, 0), pgc_ptr(n, 1, c, row, 0, 0), 2);
}

/* ADD_REL_POS: dst[x + K*y, qx + qw*qy, b] = a + pw[x, qx, qy, b] + ph[y, qx, qy, b], added in ggml's order
   (ph first when y <= x) so the float32 result is ggml's; dst may be src0 itself (in place) */
static void add_rel_pos(const pgc_node *n, int64_t i1, int64_t i2) {
    const int64_t k = n->ne[2][0], qw = n->ne[2][1];
    const int64_t qx = i1 % qw, qy = i1 / qw;
    for (int64_t y = 0; y < k; y++) {
        const float h = ld4(n, 3, y, qx, qy, i2);
        for (int64_t x = 0; x < k; x++) {
            const float wv = ld4(n, 2, x, qx, qy, i2);
            float v = ld4(n, 1, x + k * y, i1, i2, 0);
            v = y <= x ? (v + h) + wv : (v + wv) + h;
            *dst_f32(n, x + k * y, i1, i2, 0) = v;
        }
    }
}

int pgc_k_spatial(const pgc_node *n, const pgc_tctx *c) {
    const int64_t ne1 = n->ne[0][1], ne2 = n->ne[0][2];
    int64_t r0, r1;
    pgc_split(pgc_nrows(n, 0), c->ith, c->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        switch (n->sub) {
        case PGC_SP_POOL_1D: pool_1d(n, i1, i2, i3); break;
        case PGC_SP_POOL_2D: pool_2d(n, i1, i2, i3); break;
        case PGC_SP_UPSCALE: upscale(n, i1, i2, i3); break;
        case PGC_SP_PAD_REFLECT_1D: pad_reflect(n, i1, i2, i3); break;
        case PGC_SP_ROLL: roll(n, i1, i2, i3); break;
        case PGC_SP_TIMESTEP_EMBEDDING: timestep(n, i1); break;
        case PGC_SP_WIN_PART: win_part(n, i1, i2, i3); break;
        case PGC_SP_WIN_UNPART: win_unpart(n, i1, i2); break;
        case PGC_SP_GET_REL_POS: get_rel_pos(n, i1, i2); break;
        case PGC_SP_ADD_REL_POS: add_rel_pos(n, i1, i2); break;
        default: return PGC_E_OP;
        }
    }
    return PGC_OK;
}
