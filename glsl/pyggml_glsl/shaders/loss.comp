#version 450
// Cross-entropy loss of logits x (a) against target probabilities t (b), row by row, GENERIC_PC:
//   OP 0  one work group per row: sum_i (x_i - max - log(sum exp(x - max))) * t_i into d (scratch), a float per row
//   OP 1  one work group: d = -(1 / rows) * the sum of the u0 = rows floats of a (the partials of OP 0), in order
//   OP 2  CROSS_ENTROPY_LOSS_BACK, one work group per row: dx_i = (softmax(x)_i - t_i) * dL / rows, dL the f32
//         scalar at byte u0 of binding 2
// No atomics: the same sum on every run.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 128) in;
layout(constant_id = 0) const uint OP = 0;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_SRC(2, C)
DECLARE_DST(5)
GENERIC_PC
DEFINE_REDUCE(128u)

void total() {
    float s = 0.0;
    for (uint r = gl_LocalInvocationID.x; r < pc.u0; r += 128u) s += A_f32[(pc.oa >> 2) + r];
    s = wg_sum(s);
    if (gl_LocalInvocationID.x == 0u) d_f32[pc.od >> 2] = -s / float(pc.u0);
}

void main() {
    if (OP == 1u) { total(); return; }
    uint row = wg_id();
    if (row >= pc.ne01 * pc.ne02 * pc.ne03) return;
    uvec4 r = coords(row, pc.ne01, pc.ne02, 1u << 30);
    uint xb = pc.oa + r.x * pc.nb01 + r.y * pc.nb02 + r.z * pc.nb03;
    uint tb = pc.ob + r.x * pc.nb11 + r.y * pc.nb12 + r.z * pc.nb13;
    uint t = gl_LocalInvocationID.x;
    uint n = pc.ne00;
    float mx = NEG_INF;
    for (uint i = t; i < n; i += 128u) mx = max(mx, A_f32[(xb + i * pc.nb00) >> 2]);
    mx = wg_max(mx);
    float se = 0.0;
    for (uint i = t; i < n; i += 128u) se += exp(A_f32[(xb + i * pc.nb00) >> 2] - mx);
    se = wg_sum(se);
    if (OP == 0u) {
        float ls = log(se);
        float s = 0.0;
        for (uint i = t; i < n; i += 128u) s += ((A_f32[(xb + i * pc.nb00) >> 2] - mx) - ls) * B_f32[(tb + i * pc.nb10) >> 2];
        s = wg_sum(s);
        if (t == 0u) d_f32[(pc.od >> 2) + row] = s;
        return;
    }
    float inv = 1.0 / se;
    float k = C_f32[pc.u0 >> 2] / float(pc.ne01 * pc.ne02 * pc.ne03);
    uint db = pc.od + r.x * pc.nb1 + r.y * pc.nb2 + r.z * pc.nb3;
    for (uint i = t; i < n; i += 128u) {
        float p = exp(A_f32[(xb + i * pc.nb00) >> 2] - mx) * inv;
        d_f32[(db + i * pc.nb0) >> 2] = (p - B_f32[(tb + i * pc.nb10) >> 2]) * k;
    }
}
