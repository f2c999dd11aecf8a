#version 450
// SOFT_MAX over each row of x * scale + slope(h) * mask (mask rows broadcast over dims 2, 3), optional per-head
// sink in the denominator; one work group per row.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 128) in;
layout(constant_id = 0) const uint TM = 0;     // mask type (f32 / f16)
layout(constant_id = 1) const uint HAS_MASK = 0;
layout(constant_id = 2) const uint HAS_SINK = 0;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_SRC(2, S)
DECLARE_DST(5)
layout(push_constant) uniform PC {
    uint oa, om, os, od;
    uint ne00, ne01, ne02, ne03, nb01, nb02, nb03;
    uint mne2, mne3, mnb1, mnb2, mnb3;
    uint nb1, nb2, nb3;
    float scale, m0, m1; uint n_head_log2; uint alibi;
} pc;
DEFINE_REDUCE(128u)

void main() {
    uint row = wg_id();
    if (row >= pc.ne01 * pc.ne02 * pc.ne03) return;
    uvec4 r = coords(row, pc.ne01, pc.ne02, 1u << 30);
    uint base = pc.oa + r.x * pc.nb01 + r.y * pc.nb02 + r.z * pc.nb03;
    uint mbase = pc.om + r.x * pc.mnb1 + (r.y % pc.mne2) * pc.mnb2 + (r.z % pc.mne3) * pc.mnb3;
    uint dbase = pc.od + r.x * pc.nb1 + r.y * pc.nb2 + r.z * pc.nb3;
    uint t = gl_LocalInvocationID.x;
    uint n = pc.ne00;
    float slope = 1.0;
    if (pc.alibi != 0u) {
        uint h = r.y;
        slope = h < pc.n_head_log2 ? pow(pc.m0, float(h + 1u)) : pow(pc.m1, float(2u * (h - pc.n_head_log2) + 1u));
    }
    float mx = NEG_INF;
    for (uint i = t; i < n; i += 128u) {
        float z = A_f32[(base >> 2) + i] * pc.scale + (HAS_MASK == 1u ? slope * B_ld(TM, mbase + i * tsize(TM)) : 0.0);
        mx = max(mx, z);
    }
    mx = wg_max(mx);
    float sink = HAS_SINK == 1u ? S_f32[(pc.os >> 2) + r.y] : NEG_INF;
    mx = max(mx, sink);
    float s = 0.0;
    for (uint i = t; i < n; i += 128u) {
        float z = A_f32[(base >> 2) + i] * pc.scale + (HAS_MASK == 1u ? slope * B_ld(TM, mbase + i * tsize(TM)) : 0.0);
        float e = exp(z - mx);
        d_f32[(dbase >> 2) + i] = e;
        s += e;
    }
    s = wg_sum(s);
    if (HAS_SINK == 1u) s += exp(sink - mx);
    float inv = 1.0 / s;
    for (uint i = t; i < n; i += 128u) d_f32[(dbase >> 2) + i] *= inv;
}
