#version 450
// Convolution family, one thread per destination element (a = src0, the kernel; b = src1, the input; d = dst; any
// strides). Each thread sums its own taps in a fixed order, the transposed convolutions and IM2COL_BACK gathering
// the input positions that land on their element: no atomics, no scratch.
//   OP 0 IM2COL             2-D (u3 = 1): d [IC*KH*KW, OW, OH, N], element (ic*KH*KW + kh*KW + kw, ow, oh, n) =
//                           b[ow*s0 + kw*d0 - p0, oh*s1 + kh*d1 - p1, ic, n]; 1-D (u3 = 0): d [IC*KW, OW, N] from
//                           b [W, IC, N]; 0 in the padding. Only a's shape is read.
//   OP 1 CONV_2D            d[x, y, o, n] = sum over c, ky, kx of a[kx, ky, c, o] * b[x*s0 + kx*d0 - p0, y*s1 + ky*d1 - p1, c, n]
//   OP 2 CONV_2D_DW         d[x, y, c, n] = sum over ky, kx of a[kx, ky, 0, c] * b[.., .., c, n]
//   OP 3 CONV_TRANSPOSE_1D  d[t, o] = sum over c, l of a[t - l*s0, o, c] * b[l, c]
//   OP 4 CONV_TRANSPOSE_2D  d[x, y, o, n] = sum over c, iy, ix of a[x - ix*s0, y - iy*s0, o, c] * b[ix, iy, c, n]
//   OP 5 IM2COL_3D          d [IC*KD*KH*KW, OW, OH, OD*N], element (((ic*KD + kd)*KH + kh)*KW + kw, ow, oh, n*OD + od)
//                           = b[ow*s0 + kw*d0 - p0, oh*s1 + kh*d1 - p1, od*s2 + kd*d2 - p2, n*IC + ic] or 0
//   OP 6 CONV_3D            d[x, y, z, n*OC + o] = sum over c, kz, ky, kx of a[kx, ky, kz, o*IC + c] *
//                           b[x*s0 + kx*d0 - p0, y*s1 + ky*d1 - p1, z*s2 + kz*d2 - p2, n*IC + c]
//   OP 7 COL2IM_1D          d[t, o] = sum over t_in with k = t + p0 - t_in*s0 in [0, K) of a[o*K + k, t_in]
//                           (a [K*OC, T_in] of type TA, K = ne00 / OC; b is a)
//   OP 8 IM2COL_BACK        IM2COL's adjoint (a the gradient [IC*KH*KW, OW, OH, N] or [IC*KW, OW, N], b the
//                           kernel, read for its shape): d[x, y, c, n] (1-D d[x, c, n]) = sum over ky, then kx, of
//                           a[(c*KH + ky)*KW + kx, ox, oy, n] for the output with ox*s0 + kx*d0 - p0 = x and
//                           oy*s1 + ky*d1 - p1 = y (exact divisions, the output inside a): the cpu kernel's order
// Push constants: GENERIC_PC's layout, its last five words read as uints. 1-D and 2-D ops: u0 = s0 | s1 << 16,
// u1 = p0 | p1 << 16, u2 = d0 | d1 << 16, u3 = IM2COL's (and IM2COL_BACK's) is_2d. 3-D ops: 10 bits a value, u0 = s0 | s1 << 10 |
// s2 << 20, u1 the paddings, u2 the dilations, u3 = IC, u4 = OC. The host keeps each loop within lavapipe's
// iteration budget.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint TA = 0;
layout(constant_id = 2) const uint TB = 0;
layout(constant_id = 3) const uint TD = 0;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_DST(5)
layout(push_constant) uniform PC {
    uint oa, ob, od;
    uint ne00, ne01, ne02, ne03, nb00, nb01, nb02, nb03;
    uint ne10, ne11, ne12, ne13, nb10, nb11, nb12, nb13;
    uint ne0, ne1, ne2, ne3, nb0, nb1, nb2, nb3;
    uint u0, u1, u2, u3, u4;
} pc;

uint a_at(uint i0, uint i1, uint i2, uint i3) { return pc.oa + i0 * pc.nb00 + i1 * pc.nb01 + i2 * pc.nb02 + i3 * pc.nb03; }
uint b_at(uint i0, uint i1, uint i2, uint i3) { return pc.ob + i0 * pc.nb10 + i1 * pc.nb11 + i2 * pc.nb12 + i3 * pc.nb13; }
uint d_at(uvec4 i) { return pc.od + i.x * pc.nb0 + i.y * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3; }

int lo16(uint w) { return int(w & 0xffffu); }
int hi16(uint w) { return int(w >> 16); }

// b at (x, y) of plane (i2, i3), 0 outside the image
float b_or_zero(int x, int y, uint i2, uint i3) {
    if (x < 0 || x >= int(pc.ne10) || y < 0 || y >= int(pc.ne11)) return 0.0;
    return B_ld(TB, b_at(uint(x), uint(y), i2, i3));
}

// the first input position l with l*s + k = t for a tap k in [0, K); the last one is min(t / s, n - 1)
uint first_source(uint t, uint k, uint s) { return t + 1u <= k ? 0u : (t - k + s) / s; }

float col2im_1d(uvec4 i) {
    uint st = uint(lo16(pc.u0)), k = pc.ne00 / pc.ne1, tp = i.x + uint(lo16(pc.u1));
    uint j0 = first_source(tp, k, st), j1 = min(tp / st, pc.ne01 - 1u);
    float s = 0.0;
    for (uint j = j0; j <= j1; j++) s += A_ld(TA, a_at(i.y * k + tp - j * st, j, 0u, 0u));
    return s;
}

float im2col(uvec4 i) {
    int x = int(i.y) * lo16(pc.u0) + int(i.x % pc.ne00) * lo16(pc.u2) - lo16(pc.u1);
    if (pc.u3 == 0u) {
        uint ic = i.x / pc.ne00;
        return x < 0 || x >= int(pc.ne10) ? 0.0 : B_ld(TB, b_at(uint(x), ic, i.z, 0u));
    }
    uint kh = (i.x / pc.ne00) % pc.ne01, ic = i.x / (pc.ne00 * pc.ne01);
    int y = int(i.z) * hi16(pc.u0) + int(kh) * hi16(pc.u2) - hi16(pc.u1);
    return b_or_zero(x, y, ic, i.w);
}

float im2col_back(uvec4 i) {
    bool two_d = pc.u3 != 0u;
    uint kh = two_d ? pc.ne11 : 1u, c = two_d ? i.z : i.y, n = two_d ? i.w : i.z;
    int s0 = lo16(pc.u0), s1 = hi16(pc.u0);
    float s = 0.0;
    for (uint ky = 0u; ky < kh; ky++) {
        uint oy = 0u;
        if (two_d) {
            int ty = int(i.y) + hi16(pc.u1) - int(ky) * hi16(pc.u2);
            if (ty < 0 || ty % s1 != 0 || uint(ty / s1) >= pc.ne02) continue;
            oy = uint(ty / s1);
        }
        for (uint kx = 0u; kx < pc.ne10; kx++) {
            int tx = int(i.x) + lo16(pc.u1) - int(kx) * lo16(pc.u2);
            if (tx < 0 || tx % s0 != 0 || uint(tx / s0) >= pc.ne01) continue;
            uint k = (c * kh + ky) * pc.ne10 + kx, ox = uint(tx / s0);
            s += A_ld(TA, two_d ? a_at(k, ox, oy, n) : a_at(k, ox, n, 0u));
        }
    }
    return s;
}

// CONV_2D (dw false: sum over the input channels too) and CONV_2D_DW
float conv_2d(uvec4 i, bool dw) {
    float s = 0.0;
    uint nc = dw ? 1u : pc.ne02;
    for (uint c = 0u; c < nc; c++) {
        uint cin = dw ? i.z : c;
        for (uint ky = 0u; ky < pc.ne01; ky++) {
            int y = int(i.y) * hi16(pc.u0) + int(ky) * hi16(pc.u2) - hi16(pc.u1);
            if (y < 0 || y >= int(pc.ne11)) continue;
            for (uint kx = 0u; kx < pc.ne00; kx++) {
                int x = int(i.x) * lo16(pc.u0) + int(kx) * lo16(pc.u2) - lo16(pc.u1);
                if (x < 0 || x >= int(pc.ne10)) continue;
                float w = dw ? A_ld(TA, a_at(kx, ky, 0u, i.z)) : A_ld(TA, a_at(kx, ky, c, i.z));
                s += w * B_ld(TB, b_at(uint(x), uint(y), cin, i.w));
            }
        }
    }
    return s;
}

float conv_transpose_1d(uvec4 i) {
    uint st = uint(lo16(pc.u0));
    uint l0 = first_source(i.x, pc.ne00, st), l1 = min(i.x / st, pc.ne10 - 1u);
    float s = 0.0;
    for (uint c = 0u; c < pc.ne02; c++)
        for (uint l = l0; l <= l1; l++) s += A_ld(TA, a_at(i.x - l * st, i.y, c, 0u)) * B_ld(TB, b_at(l, c, 0u, 0u));
    return s;
}

float conv_transpose_2d(uvec4 i) {
    uint st = uint(lo16(pc.u0));
    uint x0 = first_source(i.x, pc.ne00, st), x1 = min(i.x / st, pc.ne10 - 1u);
    uint y0 = first_source(i.y, pc.ne01, st), y1 = min(i.y / st, pc.ne11 - 1u);
    float s = 0.0;
    for (uint c = 0u; c < pc.ne03; c++)
        for (uint iy = y0; iy <= y1; iy++)
            for (uint ix = x0; ix <= x1; ix++)
                s += A_ld(TA, a_at(i.x - ix * st, i.y - iy * st, i.z, c)) * B_ld(TB, b_at(ix, iy, c, i.w));
    return s;
}

int f10(uint w, uint k) { return int((w >> (10u * k)) & 0x3ffu); }

// the input coordinate of output position o and tap k along 3-D axis `ax` (0 width, 1 height, 2 depth)
int pos3(uint o, uint k, uint ax) { return int(o) * f10(pc.u0, ax) + int(k) * f10(pc.u2, ax) - f10(pc.u1, ax); }

bool inside3(int x, int y, int z) {
    return x >= 0 && x < int(pc.ne10) && y >= 0 && y < int(pc.ne11) && z >= 0 && z < int(pc.ne12);
}

float im2col_3d(uvec4 i) {
    uint kw = i.x % pc.ne00, kh = (i.x / pc.ne00) % pc.ne01, kd = (i.x / (pc.ne00 * pc.ne01)) % pc.ne02;
    uint ic = i.x / (pc.ne00 * pc.ne01 * pc.ne02);
    uint od_n = pc.ne3 / (pc.ne13 / pc.u3);
    uint od = i.w % od_n, n = i.w / od_n;
    int x = pos3(i.y, kw, 0u), y = pos3(i.z, kh, 1u), z = pos3(od, kd, 2u);
    return inside3(x, y, z) ? B_ld(TB, b_at(uint(x), uint(y), uint(z), n * pc.u3 + ic)) : 0.0;
}

float conv_3d(uvec4 i) {
    uint o = i.w % pc.u4, n = i.w / pc.u4;
    float s = 0.0;
    for (uint c = 0u; c < pc.u3; c++)
        for (uint kz = 0u; kz < pc.ne02; kz++) {
            int z = pos3(i.z, kz, 2u);
            if (z < 0 || z >= int(pc.ne12)) continue;
            for (uint ky = 0u; ky < pc.ne01; ky++) {
                int y = pos3(i.y, ky, 1u);
                if (y < 0 || y >= int(pc.ne11)) continue;
                for (uint kx = 0u; kx < pc.ne00; kx++) {
                    int x = pos3(i.x, kx, 0u);
                    if (x < 0 || x >= int(pc.ne10)) continue;
                    s += A_ld(TA, a_at(kx, ky, kz, o * pc.u3 + c)) * B_ld(TB, b_at(uint(x), uint(y), uint(z), n * pc.u3 + c));
                }
            }
        }
    return s;
}

void main() {
    uint g = g_id();
    if (g >= pc.ne0 * pc.ne1 * pc.ne2 * pc.ne3) return;
    uvec4 i = coords(g, pc.ne0, pc.ne1, pc.ne2);
    float v;
    if (OP == 0u) v = im2col(i);
    else if (OP == 1u) v = conv_2d(i, false);
    else if (OP == 2u) v = conv_2d(i, true);
    else if (OP == 3u) v = conv_transpose_1d(i);
    else if (OP == 4u) v = conv_transpose_2d(i);
    else if (OP == 5u) v = im2col_3d(i);
    else if (OP == 6u) v = conv_3d(i);
    else if (OP == 7u) v = col2im_1d(i);
    else v = im2col_back(i);
    d_st(TD, d_at(i), v);
}
