/* Convolution family: IM2COL (1-D and 2-D) and its gradient IM2COL_BACK, IM2COL_3D, CONV_2D, CONV_2D_DW, CONV_3D,
 * CONV_TRANSPOSE_1D, CONV_TRANSPOSE_2D, COL2IM_1D. One work-item per destination element, which sums its own taps in a
 * fixed order (no atomics, no scratch): the transposed convolutions, COL2IM_1D and IM2COL_BACK gather the input
 * positions that land on their element instead of scattering. Layouts are ggml's (docs/op-semantics.md): image
 * [W, H, C, N], kernel [KW, KH, IC, OC]; any strides.
 * Defines: T0 (src0, the kernel: only its shape is read by the IM2COLs; IM2COL_BACK's gradient), T1 (src1, the
 * input; IM2COL_BACK's kernel, read for its shape), TD (dst). */
#include "common.h"

/* a convolution's geometry arguments, ggml's op_params order: stride s, padding p, dilation d of each spatial axis
 * (x, then y, then z) */
#define CONV_GEOMETRY_2D i32 s0, i32 s1, i32 p0, i32 p1, i32 d0, i32 d1
#define CONV_GEOMETRY_3D i32 s0, i32 s1, i32 s2, i32 p0, i32 p1, i32 p2, i32 d0, i32 d1, i32 d2

/* the input element at (x, y) of plane (i2, i3), 0 outside the image (zero padding) */
#define IN_OR_ZERO(x, y, i2, i3) \
    (((x) >= 0 && (x) < b_ne0 && (y) >= 0 && (y) < b_ne1) ? LOADT(T1, AT(b, (x), (y), (i2), (i3))) : 0.f)

/* 2-D: d [IC*KH*KW, OW, OH, N], element (ic*KH*KW + kh*KW + kw, ow, oh, n) = b[ow*s0 + kw*d0 - p0,
 * oh*s1 + kh*d1 - p1, ic, n]. 1-D (is_2d 0): d [IC*KW, OW, N], element (ic*KW + kw, ow, n) = b[ow*s0 + kw*d0 - p0,
 * ic, n]; a is the kernel ([KW, KH, IC, OC] or [KW, IC, OC]) */
KERNEL void k_im2col(TENSOR(a), TENSOR(b), TENSOR(d), CONV_GEOMETRY_2D, i32 is_2d) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, ow, i2, i3);
    i64 kw = i0 % a_ne0;
    i64 x = ow * s0 + kw * d0 - p0;
    float v;
    if (is_2d) {
        i64 kh = (i0 / a_ne0) % a_ne1, ic = i0 / (a_ne0 * a_ne1);
        v = IN_OR_ZERO(x, i2 * s1 + kh * d1 - p1, ic, i3);
    } else {
        i64 ic = i0 / a_ne0;
        v = (x >= 0 && x < b_ne0) ? LOADT(T1, AT(b, x, ic, i2, 0)) : 0.f;
    }
    STORET(TD, AT(d, i0, ow, i2, i3), v);
}

/* d [IC*KD*KH*KW, OW, OH, OD*N]: element (((ic*KD + kd)*KH + kh)*KW + kw, ow, oh, n*OD + od) =
 * b[ow*s0 + kw*d0 - p0, oh*s1 + kh*d1 - p1, od*s2 + kd*d2 - p2, n*IC + ic]; a [KW, KH, KD, OC*IC] gives the sizes */
KERNEL void k_im2col_3d(TENSOR(a), TENSOR(b), TENSOR(d), CONV_GEOMETRY_3D, i32 ic_n, i64 od_n) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, ow, oh, i3);
    i64 kw = i0 % a_ne0, kh = (i0 / a_ne0) % a_ne1, kd = (i0 / (a_ne0 * a_ne1)) % a_ne2;
    i64 ic = i0 / (a_ne0 * a_ne1 * a_ne2);
    i64 od = i3 % od_n, n = i3 / od_n;
    i64 x = ow * s0 + kw * d0 - p0, y = oh * s1 + kh * d1 - p1, z = od * s2 + kd * d2 - p2;
    int inside = x >= 0 && x < b_ne0 && y >= 0 && y < b_ne1 && z >= 0 && z < b_ne2;
    STORET(TD, AT(d, i0, ow, oh, i3), inside ? LOADT(T1, AT(b, x, y, z, n * ic_n + ic)) : 0.f);
}

/* s += the window of output (ox, oy): kernel plane a[., ., ac, ao] times input plane b[., ., bc, n], ky then kx
 * (fastest); taps in the padding add nothing. The one loop of CONV_2D (per input channel) and CONV_2D_DW. */
#define WINDOW_2D(s, ac, ao, bc, n)                                                          \
    for (i64 ky = 0; ky < a_ne1; ky++) {                                                      \
        i64 y = oy * s1 + ky * d1 - p1;                                                       \
        if (y < 0 || y >= b_ne1) continue;                                                    \
        for (i64 kx = 0; kx < a_ne0; kx++) {                                                  \
            i64 x = ox * s0 + kx * d0 - p0;                                                   \
            if (x < 0 || x >= b_ne0) continue;                                                \
            (s) += LOADT(T0, AT(a, kx, ky, (ac), (ao))) * LOADT(T1, AT(b, x, y, (bc), (n))); \
        }                                                                                     \
    }

/* d[x, y, o, n] = sum over c, ky, kx (that order, kx fastest) of a[kx, ky, c, o] * b[x*s0 + kx*d0 - p0,
 * y*s1 + ky*d1 - p1, c, n]; a tap in the padding adds nothing */
KERNEL void k_conv_2d(TENSOR(a), TENSOR(b), TENSOR(d), CONV_GEOMETRY_2D) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, ox, oy, o, n);
    float s = 0.f;
    for (i64 c = 0; c < a_ne2; c++) WINDOW_2D(s, c, o, c, n);
    STORET(TD, AT(d, ox, oy, o, n), s);
}

/* depthwise: d[x, y, c, n] = sum over ky, kx of a[kx, ky, 0, c] * b[x*s0 + kx*d0 - p0, y*s1 + ky*d1 - p1, c, n] */
KERNEL void k_conv_2d_dw(TENSOR(a), TENSOR(b), TENSOR(d), CONV_GEOMETRY_2D) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, ox, oy, c, n);
    float s = 0.f;
    WINDOW_2D(s, 0, c, c, n);
    STORET(TD, AT(d, ox, oy, c, n), s);
}

/* d[x, y, z, n*OC + o] = sum over c, kz, ky, kx of a[kx, ky, kz, o*IC + c] * b[x*s0 + kx*d0 - p0,
 * y*s1 + ky*d1 - p1, z*s2 + kz*d2 - p2, n*IC + c] */
KERNEL void k_conv_3d(TENSOR(a), TENSOR(b), TENSOR(d), CONV_GEOMETRY_3D, i32 ic_n, i32 oc_n) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, ox, oy, oz, i3);
    i64 o = i3 % oc_n, n = i3 / oc_n;
    float s = 0.f;
    for (i64 c = 0; c < ic_n; c++)
        for (i64 kz = 0; kz < a_ne2; kz++) {
            i64 z = oz * s2 + kz * d2 - p2;
            if (z < 0 || z >= b_ne2) continue;
            for (i64 ky = 0; ky < a_ne1; ky++) {
                i64 y = oy * s1 + ky * d1 - p1;
                if (y < 0 || y >= b_ne1) continue;
                for (i64 kx = 0; kx < a_ne0; kx++) {
                    i64 x = ox * s0 + kx * d0 - p0;
                    if (x < 0 || x >= b_ne0) continue;
                    s += LOADT(T0, AT(a, kx, ky, kz, o * ic_n + c)) * LOADT(T1, AT(b, x, y, z, n * ic_n + c));
                }
            }
        }
    store_f32(AT(d, ox, oy, oz, i3), s);
}

/* the first input position l with l*s + k = t for some tap k in [0, K): ceil((t - K + 1) / s), at least 0 */
INLINE i64 first_source(i64 t, i64 k, i64 s) { return t - k + 1 <= 0 ? 0 : (t - k + s) / s; }

/* d[t, o] = sum over c, then l ascending, of a[t - l*s0, o, c] * b[l, c] (a [K, OC, IC], b [L, IC]) */
KERNEL void k_conv_transpose_1d(TENSOR(a), TENSOR(b), TENSOR(d), i32 s0) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    i64 t = i % d_ne0, o = i / d_ne0;
    i64 l0 = first_source(t, a_ne0, s0), l1 = t / s0 < b_ne0 - 1 ? t / s0 : b_ne0 - 1;
    float s = 0.f;
    for (i64 c = 0; c < a_ne2; c++)
        for (i64 l = l0; l <= l1; l++)
            s += LOADT(T0, AT(a, t - l * s0, o, c, 0)) * LOADT(T1, AT(b, l, c, 0, 0));
    store_f32(AT(d, t, o, 0, 0), s);
}

/* d[x, y, o, n] = sum over c, iy, ix of a[x - ix*s, y - iy*s, o, c] * b[ix, iy, c, n] (a [KW, KH, OC, IC]) */
KERNEL void k_conv_transpose_2d(TENSOR(a), TENSOR(b), TENSOR(d), i32 st) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, x, y, o, n);
    i64 x0 = first_source(x, a_ne0, st), x1 = x / st < b_ne0 - 1 ? x / st : b_ne0 - 1;
    i64 y0 = first_source(y, a_ne1, st), y1 = y / st < b_ne1 - 1 ? y / st : b_ne1 - 1;
    float s = 0.f;
    for (i64 c = 0; c < a_ne3; c++)
        for (i64 iy = y0; iy <= y1; iy++)
            for (i64 ix = x0; ix <= x1; ix++)
                s += LOADT(T0, AT(a, x - ix * st, y - iy * st, o, c)) * LOADT(T1, AT(b, ix, iy, c, n));
    store_f32(AT(d, x, y, o, n), s);
}

/* COL2IM_1D: d[t, o] = sum over t_in ascending with k = t + p0 - t_in*s0 in [0, K) of a[o*K + k, t_in]
 * (a [K*OC, T_in], d [T_out, OC], K = a_ne0 / OC); T0 is a's type and d's */
KERNEL void k_col2im_1d(TENSOR(a), TENSOR(d), i32 s0, i32 p0) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    i64 t = i % d_ne0, o = i / d_ne0;
    i64 k = a_ne0 / d_ne1, tp = t + p0;
    i64 j0 = first_source(tp, k, s0), j1 = tp / s0 < a_ne1 - 1 ? tp / s0 : a_ne1 - 1;
    float s = 0.f;
    for (i64 j = j0; j <= j1; j++) s += LOADT(T0, AT(a, o * k + tp - j * s0, j, 0, 0));
    STORET(T0, AT(d, t, o, 0, 0), s);
}

/* IM2COL_BACK, the adjoint of IM2COL (a = the gradient of T0: [IC*KH*KW, OW, OH, N], 1-D [IC*KW, OW, N]; b = the
 * kernel, read for its shape): d[x, y, c, n] (1-D d[x, c, n]) = sum over ky, then kx, of
 * a[(c*KH + ky)*KW + kx, ox, oy, n] for the output with ox*s0 + kx*d0 - p0 = x and oy*s1 + ky*d1 - p1 = y, where
 * the divisions are exact and the output exists: the cpu kernel's (back2.c) float sums in its order */
KERNEL void k_im2col_back(TENSOR(a), TENSOR(b), TENSOR(d), CONV_GEOMETRY_2D, i32 is_2d) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, x, i1, i2, i3);
    i64 y = is_2d ? i1 : 0, c = is_2d ? i2 : i1, n = is_2d ? i3 : i2, kh = is_2d ? b_ne1 : 1;
    float s = 0.f;
    for (i64 ky = 0; ky < kh; ky++) {
        i64 ty = y + p1 - ky * d1, oy = 0;
        if (is_2d) {
            if (ty < 0 || ty % s1 != 0 || ty / s1 >= a_ne2) continue;
            oy = ty / s1;
        }
        for (i64 kx = 0; kx < b_ne0; kx++) {
            i64 tx = x + p0 - kx * d0;
            if (tx < 0 || tx % s0 != 0 || tx / s0 >= a_ne1) continue;
            i64 k = (c * kh + ky) * b_ne0 + kx;
            s += LOADT(T0, is_2d ? AT(a, k, tx / s0, oy, n) : AT(a, k, tx / s0, n, 0));
        }
    }
    STORET(TD, AT(d, x, i1, i2, i3), s);
}
