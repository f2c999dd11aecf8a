#version 450
// Spatial ops of vision and audio models, one thread per destination element (a = src0, d = dst, f32; any strides):
//   OP 0 POOL_1D             window k0 along dim 0; MAX ignores the padding (-FLT_MAX for a window wholly in it),
//                            AVG divides by the window's real elements (0 for none)
//   OP 1 POOL_2D             k0 x k1 windows over dims 0 and 1; MAX as POOL_1D, AVG divides by k0*k1
//   OP 2 UPSCALE             dims 2 and 3 nearest; dims 0 and 1 nearest (u0 = 0), bilinear (1), bicubic (2),
//                            u1 = align corners, u2 = antialiased bilinear
//   OP 3 PAD_REFLECT_1D      d[i] = a[|i - p0|] mirrored back from the end (u0 = p0)
//   OP 4 TIMESTEP_EMBEDDING  d[j, n] = cos(t_n f_j) | sin(t_n f_(j-half)) | 0 (odd dim), f_j = u0^(-j / half)
//   OP 5 ROLL                d[i] = a[(i + ne - r) % ne] per dim, r = shift mod ne in u0..u3
//   OP 6 WIN_PART            d[c, x, y, win] = a[c, px*w + x, py*w + y] or 0 past the image, win = py*u0 + px
//   OP 7 WIN_UNPART          d[c, x, y] = a[c, x % w, y % w, (y / w)*u0 + x / w]
//   OP 8 GET_REL_POS         d[c, k, q] = a[c, size - 1 - k + q] (f16 bits copied)
//   OP 9 ADD_REL_POS         d[ky*K + kx, qy*qw + qx, n] = a + pw[kx, qx, qy, n] + ph[ky, qx, qy, n]; pw = src1 (b),
//                            ph = src2 (binding 2: offset u0, strides u1..u4, pw's shape); d may be a
//   OP 10 POOL_2D_BACK       a = POOL_2D's input (src1), b = the gradient (src0, f32): d[x, y] = the sum over the
//                            windows holding (x, y), rows then columns ascending, of AVG b / (k0*k1), MAX b where
//                            the window's scan picks (x, y) (from -FLT_MAX, an element not <= the running maximum
//                            becomes it): the cpu kernel's terms in its order, gathered instead of scattered
// Push constants: GENERIC_PC's layout, its last five words read as uints (pools and POOL_2D_BACK: u0 = avg,
// u1 = k0 | k1 << 16, u2 = s0 | s1 << 16, u3 = p0 | p1 << 16). The float quotients that pick UPSCALE's nearest
// pixel and its antialias ranges are rounded correctly (div_rn), as ggml's float32 arithmetic does; the host keeps
// each loop within lavapipe's iteration budget.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint TA = 0;
layout(constant_id = 2) const uint TD = 0;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_SRC(2, C)
DECLARE_DST(5)
layout(push_constant) uniform PC {
    uint oa, ob, od;
    uint ne00, ne01, ne02, ne03, nb00, nb01, nb02, nb03;
    uint ne10, ne11, ne12, ne13, nb10, nb11, nb12, nb13;
    uint ne0, ne1, ne2, ne3, nb0, nb1, nb2, nb3;
    uint u0, u1, u2, u3, u4;
} pc;
#include "quant.glsl"

#define FLT_MAX_ 3.402823466e+38

float a_ld(uint i0, uint i1, uint i2, uint i3) {
    return A_ld(TA, pc.oa + i0 * pc.nb00 + i1 * pc.nb01 + i2 * pc.nb02 + i3 * pc.nb03);
}

int lo16(uint w) { return int(w & 0xffffu); }
int hi16(uint w) { return int(w >> 16); }

// POOL_1D (k1 = 1, no dim-1 window) and POOL_2D
float pool(uvec4 i, bool two_d) {
    int k0 = lo16(pc.u1), k1 = two_d ? hi16(pc.u1) : 1;
    float m = -FLT_MAX_, s = 0.0;
    uint n = 0u;
    for (int ky = 0; ky < k1; ky++) {
        int y = two_d ? int(i.y) * hi16(pc.u2) - hi16(pc.u3) + ky : int(i.y);
        if (y < 0 || y >= int(pc.ne01)) continue;
        for (int kx = 0; kx < k0; kx++) {
            int x = int(i.x) * lo16(pc.u2) - lo16(pc.u3) + kx;
            if (x < 0 || x >= int(pc.ne00)) continue;
            float v = a_ld(uint(x), uint(y), i.z, i.w);
            m = max(m, v);
            s += v;
            n++;
        }
    }
    if (pc.u0 == 0u) return m;
    if (two_d) return s / float(k0 * k1);
    return n > 0u ? s / float(n) : 0.0;
}

// the outputs [lo, hi] of a pool (window k, stride s, padding p, n outputs) whose windows hold input element x
ivec2 windows_over(uint x, int k, int s, int p, uint n) {
    int t = int(x) + p;
    return ivec2(t < k ? 0 : (t - k) / s + 1, min(t / s, int(n) - 1));
}

float pool_2d_back(uvec4 i) {
    int k0 = lo16(pc.u1), k1 = hi16(pc.u1), s0 = lo16(pc.u2), s1 = hi16(pc.u2), p0 = lo16(pc.u3), p1 = hi16(pc.u3);
    ivec2 ox = windows_over(i.x, k0, s0, p0, pc.ne10), oy = windows_over(i.y, k1, s1, p1, pc.ne11);
    float ka = float(k0 * k1), s = 0.0;
    for (int y = oy.x; y <= oy.y; y++) {
        for (int x = ox.x; x <= ox.y; x++) {
            float g = B_f32[(pc.ob + uint(x) * pc.nb10 + uint(y) * pc.nb11 + i.z * pc.nb12 + i.w * pc.nb13) >> 2];
            if (pc.u0 != 0u) {
                s += g / ka;
                continue;
            }
            float best = -FLT_MAX_;
            ivec2 at = ivec2(-1);
            for (int wy = max(y * s1 - p1, 0); wy < min(y * s1 - p1 + k1, int(pc.ne01)); wy++) {
                for (int wx = max(x * s0 - p0, 0); wx < min(x * s0 - p0 + k0, int(pc.ne00)); wx++) {
                    float v = a_ld(uint(wx), uint(wy), i.z, i.w);
                    if (v <= best) continue;
                    best = v;
                    at = ivec2(wx, wy);
                }
            }
            if (at == ivec2(i.xy)) s += g;
        }
    }
    return s;
}

// ggml's float scale of one dim; aligned corners map the first and last pixels onto each other
float scale_of(uint nd, uint ns, bool align) {
    return align && nd > 1u && ns > 1u ? div_rn(float(nd - 1u), float(ns - 1u)) : div_rn(float(nd), float(ns));
}

uint nearest_of(uint i, uint nd, uint ns, bool align) {
    return i == 0u ? 0u : min(uint(div_rn(float(i), scale_of(nd, ns, align))), ns - 1u);
}

int clamp_i(int v, uint n) { return clamp(v, 0, int(n) - 1); }

float source_pos(uint i, uint nd, uint ns, bool align) {
    if (align && nd > 1u && ns > 1u) return float(i) * (float(ns - 1u) / float(nd - 1u));
    float off = align ? 0.0 : 0.5;
    return (float(i) + off) * (float(ns) / float(nd)) - off;
}

// cubic convolution, a = -0.75: tap k of 0..3 at floor(x) - 1 + k, t = x - floor(x)
float cubic_near(float d) { return ((1.25 * d - 2.25) * d) * d + 1.0; }
float cubic_far(float d) { return ((-0.75 * d + 3.75) * d - 6.0) * d + 3.0; }
float cubic_w(int k, float t) {
    return k == 0 ? cubic_far(t + 1.0) : (k == 1 ? cubic_near(t) : (k == 2 ? cubic_near(1.0 - t) : cubic_far(2.0 - t)));
}

// antialiased bilinear over one dim: source pixels [lo, hi) of a triangle (centre, support, off)
struct AA { int lo; int hi; float centre; float support; float off; };
AA aa_of(uint i, uint nd, uint ns, bool align) {
    AA r;
    float sf = scale_of(nd, ns, align);
    r.off = align ? 0.0 : 0.5;
    r.support = max(1.0, div_rn(1.0, sf));
    r.centre = div_rn(float(i) + r.off, sf);
    precise float lo = r.centre - r.support + r.off;
    precise float hi = r.centre + r.support + r.off;
    r.lo = max(int(lo), 0);
    r.hi = min(int(hi), int(ns));
    return r;
}
float aa_w(AA f, int s) { return max(1.0 - abs((float(s) - f.centre + f.off) / f.support), 0.0); }

float upscale(uvec4 i) {
    uint j2 = nearest_of(i.z, pc.ne2, pc.ne02, false), j3 = nearest_of(i.w, pc.ne3, pc.ne03, false);
    bool align = pc.u1 != 0u;
    if (pc.u0 == 0u) return a_ld(nearest_of(i.x, pc.ne0, pc.ne00, align), nearest_of(i.y, pc.ne1, pc.ne01, align), j2, j3);
    float v = 0.0;
    if (pc.u2 != 0u) {
        AA fx = aa_of(i.x, pc.ne0, pc.ne00, align), fy = aa_of(i.y, pc.ne1, pc.ne01, align);
        float tx = 0.0, ty = 0.0;
        for (int x = fx.lo; x < fx.hi; x++) tx += aa_w(fx, x);
        for (int y = fy.lo; y < fy.hi; y++) {
            float wy = aa_w(fy, y), row = 0.0;
            ty += wy;
            for (int x = fx.lo; x < fx.hi; x++) row += aa_w(fx, x) * a_ld(uint(x), uint(y), j2, j3);
            v += wy * row;
        }
        return tx > 0.0 && ty > 0.0 ? v / (tx * ty) : 0.0;
    }
    float px = source_pos(i.x, pc.ne0, pc.ne00, align), py = source_pos(i.y, pc.ne1, pc.ne01, align);
    float fx = floor(px), fy = floor(py);
    int x0 = int(fx), y0 = int(fy);
    if (pc.u0 == 1u) {
        int xl = clamp_i(x0, pc.ne00), xh = clamp_i(x0 + 1, pc.ne00), yl = clamp_i(y0, pc.ne01), yh = clamp_i(y0 + 1, pc.ne01);
        float dx = clamp(px - float(xl), 0.0, 1.0), dy = clamp(py - float(yl), 0.0, 1.0);
        float top = a_ld(uint(xl), uint(yl), j2, j3) * (1.0 - dx) + a_ld(uint(xh), uint(yl), j2, j3) * dx;
        float bot = a_ld(uint(xl), uint(yh), j2, j3) * (1.0 - dx) + a_ld(uint(xh), uint(yh), j2, j3) * dx;
        return top * (1.0 - dy) + bot * dy;
    }
    float tx = px - fx, ty = py - fy;
    for (int ky = 0; ky < 4; ky++) {
        uint y = uint(clamp_i(y0 + ky - 1, pc.ne01));
        float row = 0.0;
        for (int kx = 0; kx < 4; kx++) row += cubic_w(kx, tx) * a_ld(uint(clamp_i(x0 + kx - 1, pc.ne00)), y, j2, j3);
        v += cubic_w(ky, ty) * row;
    }
    return v;
}

float pad_reflect(uvec4 i) {
    int j = int(i.x) - int(pc.u0);
    j = j < 0 ? -j : (j >= int(pc.ne00) ? 2 * (int(pc.ne00) - 1) - j : j);
    return a_ld(uint(j), i.y, i.z, i.w);
}

float timestep_embedding(uvec4 i) {
    uint half_ = pc.ne0 / 2u;
    if (i.x >= 2u * half_) return 0.0;
    uint k = i.x < half_ ? i.x : i.x - half_;
    float freq = exp(-log(float(pc.u0)) * float(k) / float(half_));
    float arg = a_ld(i.y, 0u, 0u, 0u) * freq;
    return i.x < half_ ? cos(arg) : sin(arg);
}

float roll(uvec4 i) {
    uvec4 n = uvec4(pc.ne00, pc.ne01, pc.ne02, pc.ne03);
    uvec4 j = (i + n - uvec4(pc.u0, pc.u1, pc.u2, pc.u3)) % n;
    return a_ld(j.x, j.y, j.z, j.w);
}

float win_part(uvec4 i) {
    uint sx = (i.w % pc.u0) * pc.ne1 + i.y, sy = (i.w / pc.u0) * pc.ne2 + i.z;
    return sx < pc.ne01 && sy < pc.ne02 ? a_ld(i.x, sx, sy, 0u) : 0.0;
}

float win_unpart(uvec4 i) {
    uint w = pc.ne01;
    return a_ld(i.x, i.y % w, i.z % w, (i.z / w) * pc.u0 + i.y / w);
}

float add_rel_pos(uvec4 i) {
    uint k = pc.ne10, kx = i.x % k, ky = i.x / k, qx = i.y % pc.ne11, qy = i.y / pc.ne11;
    float pw = B_f32[(pc.ob + kx * pc.nb10 + qx * pc.nb11 + qy * pc.nb12 + i.z * pc.nb13) >> 2];
    float ph = C_f32[(pc.u0 + ky * pc.u1 + qx * pc.u2 + qy * pc.u3 + i.z * pc.u4) >> 2];
    return a_ld(i.x, i.y, i.z, i.w) + pw + ph;
}

void main() {
    uint g = g_id();
    if (g >= pc.ne0 * pc.ne1 * pc.ne2 * pc.ne3) return;
    uvec4 i = coords(g, pc.ne0, pc.ne1, pc.ne2);
    float v;
    if (OP == 0u || OP == 1u) v = pool(i, OP == 1u);
    else if (OP == 2u) v = upscale(i);
    else if (OP == 3u) v = pad_reflect(i);
    else if (OP == 4u) v = timestep_embedding(i);
    else if (OP == 5u) v = roll(i);
    else if (OP == 6u) v = win_part(i);
    else if (OP == 7u) v = win_unpart(i);
    else if (OP == 8u) {  // a raw 16-bit copy: the f16 bits as they are
        uint o = pc.oa + i.x * pc.nb00 + (pc.ne1 - 1u - i.y + i.z) * pc.nb01;
        d_u16[(pc.od + i.x * pc.nb0 + i.y * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3) >> 1] = A_u16[o >> 1];
        return;
    }
    else if (OP == 9u) v = add_rel_pos(i);
    else v = pool_2d_back(i);
    d_st(TD, pc.od + i.x * pc.nb0 + i.y * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3, v);
}
