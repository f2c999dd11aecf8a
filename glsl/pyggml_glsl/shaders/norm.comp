#version 450
// Row normalisations, one work group per row: OP 0 NORM, 1 RMS_NORM, 2 L2_NORM (eps = f0);
// OP 3 GROUP_NORM: one work group per (group of u0 channels along dim 2, i3), NORM over all its elements.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 128) in;
layout(constant_id = 0) const uint OP = 1;
DECLARE_SRC(0, A)
DECLARE_DST(5)
GENERIC_PC
DEFINE_REDUCE(128u)

uint grp_off(uint g, uint c0, bool dst) {
    uint i0 = g % pc.ne00; g /= pc.ne00; uint i1 = g % pc.ne01; uint i2 = c0 + g / pc.ne01;
    return dst ? i0 * pc.nb0 + i1 * pc.nb1 + i2 * pc.nb2 : i0 * pc.nb00 + i1 * pc.nb01 + i2 * pc.nb02;
}

void group_norm() {
    uint ngroups = (pc.ne02 + pc.u0 - 1u) / pc.u0;
    uint w = wg_id();
    if (w >= ngroups * pc.ne03) return;
    uint i3 = w / ngroups; uint c0 = (w % ngroups) * pc.u0;
    uint n = pc.ne00 * pc.ne01 * (min(c0 + pc.u0, pc.ne02) - c0);
    uint base = pc.oa + i3 * pc.nb03;
    uint dbase = pc.od + i3 * pc.nb3;
    uint t = gl_LocalInvocationID.x;
    float s = 0.0;
    for (uint g = t; g < n; g += 128u) s += A_f32[(base + grp_off(g, c0, false)) >> 2];
    float mean = wg_sum(s) / float(n);
    float s2 = 0.0;
    for (uint g = t; g < n; g += 128u) { float x = A_f32[(base + grp_off(g, c0, false)) >> 2] - mean; s2 += x * x; }
    float k = inversesqrt(wg_sum(s2) / float(n) + pc.f0);
    for (uint g = t; g < n; g += 128u) {
        d_f32[(dbase + grp_off(g, c0, true)) >> 2] = (A_f32[(base + grp_off(g, c0, false)) >> 2] - mean) * k;
    }
}

void main() {
    if (OP == 3u) { group_norm(); return; }
    uint row = wg_id();
    if (row >= pc.ne01 * pc.ne02 * pc.ne03) return;
    uvec4 r = coords(row, pc.ne01, pc.ne02, 1u << 30);
    uint base = pc.oa + r.x * pc.nb01 + r.y * pc.nb02 + r.z * pc.nb03;
    uint dbase = pc.od + r.x * pc.nb1 + r.y * pc.nb2 + r.z * pc.nb3;
    uint t = gl_LocalInvocationID.x;
    uint n = pc.ne00;
    float mean = 0.0;
    if (OP == 0u) {
        float s = 0.0;
        for (uint i = t; i < n; i += 128u) s += A_f32[(base + i * pc.nb00) >> 2];
        mean = wg_sum(s) / float(n);
    }
    float s2 = 0.0;
    for (uint i = t; i < n; i += 128u) { float x = A_f32[(base + i * pc.nb00) >> 2] - mean; s2 += x * x; }
    float tot = wg_sum(s2);
    float k = OP == 2u ? 1.0 / max(sqrt(tot), pc.f0) : inversesqrt(tot / float(n) + pc.f0);
    for (uint i = t; i < n; i += 128u) d_f32[(dbase + i * pc.nb0) >> 2] = (A_f32[(base + i * pc.nb00) >> 2] - mean) * k;
}
