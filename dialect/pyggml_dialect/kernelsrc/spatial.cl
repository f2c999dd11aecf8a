/* Spatial ops of vision and audio models: POOL_1D, POOL_2D and its gradient POOL_2D_BACK, UPSCALE (nearest,
 * bilinear, bicubic, antialiased bilinear; align corners), PAD_REFLECT_1D, TIMESTEP_EMBEDDING, ROLL, WIN_PART,
 * WIN_UNPART, GET_REL_POS, ADD_REL_POS. One work-item per destination element, any strides.
 * Defines: T0 (src0 type: f32, f16 for the pools, GET_REL_POS's type; POOL_2D_BACK's src1, the pool's input); the
 * other results and sources are f32. */
#include "common.h"

#define PG_FLT_MAX 3.402823466e+38f

/* a / b rounded once to float. Where acc_t is double (CUDA; OpenCL with fp64) the quotient of two floats rounded to
 * double, then to float, is the correctly rounded float quotient (53 >= 2*24 + 2 bits), whatever the device's float
 * division does; else it is the float division of the build options (OpenCL asks for correctly rounded division
 * where the device offers it). UPSCALE's nearest pixel and antialias range depend on it, as in ggml (float32
 * quotients). */
INLINE float div_f32(float a, float b) { return (float)((acc_t)a / (acc_t)b); }

/* ggml's float scale of one dim; align corners maps the first and last pixels onto each other */
INLINE float scale_of(i64 nd, i64 ns, i32 align) {
    return (align && nd > 1 && ns > 1) ? div_f32((float)(nd - 1), (float)(ns - 1)) : div_f32((float)nd, (float)ns);
}

/* the nearest source index: the truncated float quotient i / sf, at most ns - 1 */
INLINE i64 nearest_of(i64 i, i64 nd, i64 ns, i32 align) {
    i64 k = (i64)div_f32((float)i, scale_of(nd, ns, align));
    return k < ns - 1 ? k : ns - 1;
}

INLINE i64 clamp_i(i64 v, i64 n) { return v < 0 ? 0 : (v >= n ? n - 1 : v); }

/* the source position sampled by output i: (i + 0.5) * ns / nd - 0.5 (pixel centres), or i * (ns-1)/(nd-1) with
 * aligned corners (i * ns / nd when either side is a single pixel) */
INLINE float source_pos(i64 i, i64 nd, i64 ns, i32 align) {
    if (align && nd > 1 && ns > 1) return (float)i * ((float)(ns - 1) / (float)(nd - 1));
    float off = align ? 0.f : 0.5f;
    return ((float)i + off) * ((float)ns / (float)nd) - off;
}

/* cubic convolution weights, a = -0.75 (PyTorch's and ggml's): near for |d| <= 1, far for 1 < |d| < 2 */
INLINE float cubic_near(float d) { return ((1.25f * d - 2.25f) * d) * d + 1.f; }
INLINE float cubic_far(float d) { return ((-0.75f * d + 3.75f) * d - 6.f) * d + 3.f; }

INLINE float cubic_w(i32 k, float t) {
    return k == 0 ? cubic_far(t + 1.f) : (k == 1 ? cubic_near(t) : (k == 2 ? cubic_near(1.f - t) : cubic_far(2.f - t)));
}

/* the triangle filter of antialiased bilinear over one dim: source pixels [lo, hi), centre and support */
typedef struct { i64 lo, hi; float centre, support, off; } aa_t;

INLINE aa_t aa_of(i64 i, i64 nd, i64 ns, i32 align) {
    aa_t r;
    float sf = scale_of(nd, ns, align);
    r.off = align ? 0.f : 0.5f;
    r.support = FMAX(1.f, div_f32(1.f, sf));
    r.centre = div_f32((float)i + r.off, sf);
    float lo = r.centre - r.support + r.off, hi = r.centre + r.support + r.off;
    r.lo = (i64)lo > 0 ? (i64)lo : 0;
    r.hi = (i64)hi < ns ? (i64)hi : ns;
    return r;
}

INLINE float aa_w(aa_t f, i64 s) { return FMAX(1.f - FABS(((float)s - f.centre + f.off) / f.support), 0.f); }

/* UPSCALE: dims 2 and 3 nearest, dims 0 and 1 by `mode` (0 nearest, 1 bilinear, 2 bicubic), `align` corners,
 * `aa` the antialiased bilinear */
KERNEL void k_upscale(TENSOR(a), TENSOR(d), i32 mode, i32 align, i32 aa) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    i64 j2 = nearest_of(i2, d_ne2, a_ne2, 0), j3 = nearest_of(i3, d_ne3, a_ne3, 0);
    float v = 0.f;
    if (mode == 0) {
        v = LOADT(T0, AT(a, nearest_of(i0, d_ne0, a_ne0, align), nearest_of(i1, d_ne1, a_ne1, align), j2, j3));
    } else if (aa) {
        aa_t fx = aa_of(i0, d_ne0, a_ne0, align), fy = aa_of(i1, d_ne1, a_ne1, align);
        float tx = 0.f, ty = 0.f;
        for (i64 x = fx.lo; x < fx.hi; x++) tx += aa_w(fx, x);
        for (i64 y = fy.lo; y < fy.hi; y++) {
            float wy = aa_w(fy, y), row = 0.f;
            ty += wy;
            if (wy == 0.f) continue;
            for (i64 x = fx.lo; x < fx.hi; x++) row += aa_w(fx, x) * LOADT(T0, AT(a, x, y, j2, j3));
            v += wy * row;
        }
        v = (tx > 0.f && ty > 0.f) ? v / (tx * ty) : 0.f;
    } else {
        float px = source_pos(i0, d_ne0, a_ne0, align), py = source_pos(i1, d_ne1, a_ne1, align);
        float fx = FLOOR(px), fy = FLOOR(py);
        i64 x0 = (i64)fx, y0 = (i64)fy;
        if (mode == 1) {
            i64 xl = clamp_i(x0, a_ne0), xh = clamp_i(x0 + 1, a_ne0), yl = clamp_i(y0, a_ne1), yh = clamp_i(y0 + 1, a_ne1);
            float dx = FMIN(FMAX(px - (float)xl, 0.f), 1.f), dy = FMIN(FMAX(py - (float)yl, 0.f), 1.f);
            float top = LOADT(T0, AT(a, xl, yl, j2, j3)) * (1.f - dx) + LOADT(T0, AT(a, xh, yl, j2, j3)) * dx;
            float bot = LOADT(T0, AT(a, xl, yh, j2, j3)) * (1.f - dx) + LOADT(T0, AT(a, xh, yh, j2, j3)) * dx;
            v = top * (1.f - dy) + bot * dy;
        } else {
            float tx = px - fx, ty = py - fy;
            for (i32 ky = 0; ky < 4; ky++) {
                i64 y = clamp_i(y0 + ky - 1, a_ne1);
                float row = 0.f;
                for (i32 kx = 0; kx < 4; kx++)
                    row += cubic_w(kx, tx) * LOADT(T0, AT(a, clamp_i(x0 + kx - 1, a_ne0), y, j2, j3));
                v += cubic_w(ky, ty) * row;
            }
        }
    }
    store_f32(AT(d, i0, i1, i2, i3), v);
}

/* one window row of output i0 in row y of plane (i2, i3): m its max, s its sum, n the count of its elements inside
 * the input (taps in the padding are skipped). The one loop of POOL_1D and POOL_2D (per window row). */
#define POOL_ROW(m, s, n, y)                                    \
    for (i32 kx = 0; kx < k0; kx++) {                           \
        i64 x = i0 * s0 - p0 + kx;                              \
        if (x < 0 || x >= a_ne0) continue;                      \
        float v = LOADT(T0, AT(a, x, (y), i2, i3));             \
        (m) = FMAX((m), v);                                     \
        (s) += v;                                               \
        (n)++;                                                  \
    }

/* POOL_1D over dim 0: MAX ignores the padding (-FLT_MAX for a window wholly in it), AVG divides by the real
 * elements of the window (0 for none) */
KERNEL void k_pool_1d(TENSOR(a), TENSOR(d), i32 avg, i32 k0, i32 s0, i32 p0) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    float m = -PG_FLT_MAX, s = 0.f;
    i32 n = 0;
    POOL_ROW(m, s, n, i1);
    store_f32(AT(d, i0, i1, i2, i3), avg ? (n > 0 ? s / (float)n : 0.f) : m);
}

/* POOL_2D over dims 0 and 1: MAX as POOL_1D, AVG divides by k0*k1 whatever part of the window is padding */
KERNEL void k_pool_2d(TENSOR(a), TENSOR(d), i32 avg, i32 k0, i32 k1, i32 s0, i32 s1, i32 p0, i32 p1) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    float m = -PG_FLT_MAX, s = 0.f;
    i32 n = 0;
    for (i32 ky = 0; ky < k1; ky++) {
        i64 y = i1 * s1 - p1 + ky;
        if (y < 0 || y >= a_ne1) continue;
        POOL_ROW(m, s, n, y);
    }
    store_f32(AT(d, i0, i1, i2, i3), avg ? s / (float)(k0 * k1) : m);
}

/* the outputs [*lo, *hi] of a pool (window k, stride s, padding p, n outputs) whose windows hold input element x:
 * o*s - p <= x < o*s - p + k */
INLINE void windows_over(i64 x, i32 k, i32 s, i32 p, i64 n, i64 *lo, i64 *hi) {
    i64 t = x + p;
    *lo = t < k ? 0 : (t - k) / s + 1;
    *hi = t / s < n - 1 ? t / s : n - 1;
}

/* POOL_2D_BACK (g = the gradient [OW, OH, C, N] f32, a = POOL_2D's input of T0): d[x, y, c, n] = the sum over the
 * windows holding (x, y), rows then columns ascending, of AVG g / (k0*k1), MAX g where the window's scan picks
 * (x, y): from -FLT_MAX, an element that is not <= the running maximum becomes it (the first of ties; a NaN and
 * every element after it). The cpu kernel (back2.c) adds the same terms in the same order, so the sums agree. */
KERNEL void k_pool_2d_back(TENSOR(g), TENSOR(a), TENSOR(d), i32 avg, i32 k0, i32 k1, i32 s0, i32 s1, i32 p0,
                           i32 p1) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, x, y, c, n);
    i64 ox0, ox1, oy0, oy1;
    windows_over(x, k0, s0, p0, g_ne0, &ox0, &ox1);
    windows_over(y, k1, s1, p1, g_ne1, &oy0, &oy1);
    float ka = (float)((i64)k0 * k1), s = 0.f;
    for (i64 oy = oy0; oy <= oy1; oy++) {
        for (i64 ox = ox0; ox <= ox1; ox++) {
            float gv = load_f32(AT(g, ox, oy, c, n));
            if (avg) {
                s += div_f32(gv, ka);
                continue;
            }
            float best = -PG_FLT_MAX;
            i64 bx = -1, by = -1;
            for (i64 wy = oy * s1 - p1; wy < oy * s1 - p1 + k1; wy++) {
                if (wy < 0 || wy >= a_ne1) continue;
                for (i64 wx = ox * s0 - p0; wx < ox * s0 - p0 + k0; wx++) {
                    if (wx < 0 || wx >= a_ne0) continue;
                    float v = LOADT(T0, AT(a, wx, wy, c, n));
                    if (v <= best) continue;
                    best = v;
                    bx = wx;
                    by = wy;
                }
            }
            if (bx == x && by == y) s += gv;
        }
    }
    store_f32(AT(d, x, y, c, n), s);
}

/* dim 0 mirrored about its first and last element: d[i] = a[|i - p0|], reflected back from the end */
KERNEL void k_pad_reflect_1d(TENSOR(a), TENSOR(d), i32 p0) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    i64 j = i0 - p0;
    j = j < 0 ? -j : (j >= a_ne0 ? 2 * (a_ne0 - 1) - j : j);
    store_f32(AT(d, i0, i1, i2, i3), load_f32(AT(a, j, i1, i2, i3)));
}

/* d[j, n] = cos(t_n f_j) for j < nh, sin(t_n f_(j-nh)) for nh <= j < 2 nh, 0 after (odd dim);
 * f_j = max_period^(-j / nh), in acc_t */
KERNEL void k_timestep_embedding(TENSOR(a), TENSOR(d), i32 max_period) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    i64 j = i % d_ne0, n = i / d_ne0;
    i64 nh = d_ne0 / 2;
    float v = 0.f;
    if (j < 2 * nh) {
        i64 k = j < nh ? j : j - nh;
        acc_t freq = exp(-log((acc_t)max_period) * (acc_t)k / (acc_t)nh);
        acc_t arg = (acc_t)load_f32(AT(a, n, 0, 0, 0)) * freq;
        v = (float)(j < nh ? cos(arg) : sin(arg));
    }
    store_f32(AT(d, j, n, 0, 0), v);
}

/* ROLL: d[i] = a[(i - shift) mod ne] in each dim (|shift| < ne) */
KERNEL void k_roll(TENSOR(a), TENSOR(d), i32 r0, i32 r1, i32 r2, i32 r3) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    i64 j0 = (i0 - r0 + a_ne0) % a_ne0, j1 = (i1 - r1 + a_ne1) % a_ne1;
    i64 j2 = (i2 - r2 + a_ne2) % a_ne2, j3 = (i3 - r3 + a_ne3) % a_ne3;
    store_f32(AT(d, i0, i1, i2, i3), load_f32(AT(a, j0, j1, j2, j3)));
}

/* WIN_PART: window py*npx + px of side w over an image a [C, W, H]: d[c, x, y, win] = a[c, px*w + x, py*w + y],
 * 0 past the image's right and bottom edges */
KERNEL void k_win_part(TENSOR(a), TENSOR(d), i32 npx) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, c, x, y, win);
    i64 sx = (win % npx) * d_ne1 + x, sy = (win / npx) * d_ne2 + y;
    store_f32(AT(d, c, x, y, win), sx < a_ne1 && sy < a_ne2 ? load_f32(AT(a, c, sx, sy, 0)) : 0.f);
}

/* WIN_UNPART: the image d [C, w0, h0] back from windows a [C, w, w, n]: d[c, x, y] = a[c, x % w, y % w,
 * (y / w) * npx + x / w] */
KERNEL void k_win_unpart(TENSOR(a), TENSOR(d), i32 npx) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, c, x, y, i3);
    i64 w = a_ne1;
    store_f32(AT(d, c, x, y, i3), load_f32(AT(a, c, x % w, y % w, (y / w) * npx + x / w)));
}

/* GET_REL_POS: d[c, k, q] = a[c, size - 1 - k + q] (a [C, 2*size - 1], d [C, size, size], of type T0) */
KERNEL void k_get_rel_pos(TENSOR(a), TENSOR(d)) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, c, k, q, i3);
    copy_bytes(AT(d, c, k, q, i3), AT(a, c, d_ne1 - 1 - k + q, 0, 0), TSZ(T0));
}

/* ADD_REL_POS: d[ky*K + kx, qy*qw + qx, n] = a[..] + pw[kx, qx, qy, n] + ph[ky, qx, qy, n] (pw, ph [K, qw, qh, n]);
 * each element read before it is written, so d may be a */
KERNEL void k_add_rel_pos(TENSOR(a), TENSOR(pw), TENSOR(ph), TENSOR(d)) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    i64 k = pw_ne0, kx = i0 % k, ky = i0 / k, qx = i1 % pw_ne1, qy = i1 / pw_ne1;
    float v = load_f32(AT(a, i0, i1, i2, i3)) + load_f32(AT(pw, kx, qx, qy, i2)) + load_f32(AT(ph, ky, qx, qy, i2));
    store_f32(AT(d, i0, i1, i2, i3), v);
}
