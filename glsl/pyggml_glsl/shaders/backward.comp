#version 450
// Backward ops of training graphs, GENERIC_PC (a = src0, b = src1, d = dst):
//   OP 0 SILU_BACK      dx = dy * s * (1 + x * (1 - s)), s = sigmoid(x); a = dy, b = x; one thread per element
//   OP 1 REPEAT_BACK    d[k] = sum of a over the repeats of d's shape in a (i3, i2, i1, i0 order); one thread per
//                       element of d
//   OP 2 GET_ROWS_BACK  d[:, r] = sum of a[:, j] over j ascending with ids[j] == r (b = ids, i32); one work group
//                       per row of d, each thread adding into its own columns (ggml's order); a bad id is reported
//   OP 3 RMS_NORM_BACK  dx = (dz - x * sum(x dz) / (sum(x^2) + eps n)) / sqrt(sum(x^2) / n + eps); a = dz, b = x,
//                       f0 = eps; one work group per row
//   OP 4 SOFT_MAX_BACK  dx = f0 * y * (dy - sum(y dy)); a = dy, b = y; one work group per row
// No atomics: every element is summed by one thread in a fixed order, the same on every run. Element types:
// TA, TB, TD (SILU_BACK, REPEAT_BACK; the others f32, GET_ROWS_BACK's a f32 / f16).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 128) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint TA = 0;
layout(constant_id = 2) const uint TB = 0;
layout(constant_id = 3) const uint TD = 0;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_DST(5)
GENERIC_PC
DECLARE_STATUS
DEFINE_REDUCE(128u)

uint a_at(uvec4 i) { return pc.oa + i.x * pc.nb00 + i.y * pc.nb01 + i.z * pc.nb02 + i.w * pc.nb03; }
uint b_at(uvec4 i) { return pc.ob + i.x * pc.nb10 + i.y * pc.nb11 + i.z * pc.nb12 + i.w * pc.nb13; }
uint d_at(uvec4 i) { return pc.od + i.x * pc.nb0 + i.y * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3; }

void silu_back() {
    uint g = g_id();
    if (g >= pc.ne0 * pc.ne1 * pc.ne2 * pc.ne3) return;
    uvec4 i = coords(g, pc.ne0, pc.ne1, pc.ne2);
    float x = B_ld(TB, b_at(i));
    float s = 1.0 / (1.0 + exp(-x));
    d_st(TD, d_at(i), A_ld(TA, a_at(i)) * s * (1.0 + x * (1.0 - s)));
}

void repeat_back() {
    uint g = g_id();
    if (g >= pc.ne0 * pc.ne1 * pc.ne2 * pc.ne3) return;
    uvec4 k = coords(g, pc.ne0, pc.ne1, pc.ne2);
    uvec4 n = uvec4(pc.ne0, pc.ne1, pc.ne2, pc.ne3);
    uvec4 r = uvec4(pc.ne00, pc.ne01, pc.ne02, pc.ne03) / n;
    uint reps = r.x * r.y * r.z * r.w;
    float s = 0.0;
    for (uint j = 0u; j < reps; j++) s += A_ld(TA, a_at(k + coords(j, r.x, r.y, r.z) * n));
    d_st(TD, d_at(k), s);
}

void get_rows_back() {
    uint row = wg_id();
    if (row >= pc.ne1) return;
    uint t = gl_LocalInvocationID.x;
    uint base = pc.od + row * pc.nb1;
    for (uint i = t; i < pc.ne0; i += 128u) d_f32[(base + i * pc.nb0) >> 2] = 0.0;
    for (uint j = 0u; j < pc.ne10; j++) {
        int id = B_i32[(pc.ob + j * pc.nb10) >> 2];
        if (id < 0 || uint(id) >= pc.ne1) { report_bad_index(); return; }
        if (uint(id) != row) continue;
        for (uint i = t; i < pc.ne0; i += 128u) d_f32[(base + i * pc.nb0) >> 2] += A_ld(TA, pc.oa + i * pc.nb00 + j * pc.nb01);
    }
}

void row_grad() {
    uint row = wg_id();
    if (row >= pc.ne01 * pc.ne02 * pc.ne03) return;
    uvec4 r = coords(row, pc.ne01, pc.ne02, 1u << 30);
    uvec4 i = uvec4(0u, r.xyz);
    uint t = gl_LocalInvocationID.x;
    uint n = pc.ne00;
    float s1 = 0.0, s2 = 0.0;   // RMS_NORM_BACK: sum(x^2), sum(x dz); SOFT_MAX_BACK: sum(y dy)
    for (i.x = t; i.x < n; i.x += 128u) {
        float u = A_f32[a_at(i) >> 2], v = B_f32[b_at(i) >> 2];
        s1 += v * (OP == 3u ? v : u);
        s2 += v * u;
    }
    s1 = wg_sum(s1);
    if (OP == 3u) s2 = wg_sum(s2);
    float k, rr;
    if (OP == 3u) {
        float mean_eps = s1 / float(n) + pc.f0;
        rr = 1.0 / sqrt(mean_eps);
        k = -s2 / (s1 + pc.f0 * float(n));
    }
    for (i.x = t; i.x < n; i.x += 128u) {
        float u = A_f32[a_at(i) >> 2], v = B_f32[b_at(i) >> 2];
        d_f32[d_at(i) >> 2] = OP == 3u ? (u + v * k) * rr : (u - s1) * v * pc.f0;
    }
}

void main() {
    if (OP == 0u) silu_back();
    else if (OP == 1u) repeat_back();
    else if (OP == 2u) get_rows_back();
    else row_grad();
}
