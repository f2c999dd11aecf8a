#version 450
// Reductions, one work group per row (f32 rows): 0 SUM_ROWS, 1 MEAN, 2 ARGMAX (first index on ties), 3 CUMSUM;
// over the whole tensor (a single work group): 4 SUM, 5 COUNT_EQUAL (i32 a == b, i64 result).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 128) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint TA = 0;  // SUM's source and result type (f32 / f16 / bf16)
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_DST(5)
GENERIC_PC
DEFINE_REDUCE(128u)
shared uint ri[128];

void main() {
    uint t = gl_LocalInvocationID.x;
    if (OP >= 4u) {
        uint n = pc.ne00 * pc.ne01 * pc.ne02 * pc.ne03;
        float s = 0.0;
        for (uint g = t; g < n; g += 128u) {
            uvec4 i = coords(g, pc.ne00, pc.ne01, pc.ne02);
            uint oa = pc.oa + i.x * pc.nb00 + i.y * pc.nb01 + i.z * pc.nb02 + i.w * pc.nb03;
            if (OP == 4u) s += A_ld(TA, oa);
            else s += A_i32[oa >> 2] == B_i32[(pc.ob + i.x * pc.nb10 + i.y * pc.nb11 + i.z * pc.nb12 + i.w * pc.nb13) >> 2] ? 1.0 : 0.0;
        }
        s = wg_sum(s);
        if (t == 0u) {
            if (OP == 4u) d_st(TA, pc.od, s);
            else d_sti(T_I64, pc.od, int(s));
        }
        return;
    }
    uint row = wg_id();
    if (row >= pc.ne01 * pc.ne02 * pc.ne03) return;
    uvec4 r = coords(row, pc.ne01, pc.ne02, 1u << 30);
    uint base = pc.oa + r.x * pc.nb01 + r.y * pc.nb02 + r.z * pc.nb03;
    uint dbase = pc.od + r.x * pc.nb1 + r.y * pc.nb2 + r.z * pc.nb3;
    uint n = pc.ne00;
    if (OP <= 1u) {
        float s = 0.0;
        for (uint i = t; i < n; i += 128u) s += A_f32[(base + i * pc.nb00) >> 2];
        s = wg_sum(s);
        if (t == 0u) d_f32[dbase >> 2] = OP == 1u ? s / float(n) : s;
    } else if (OP == 2u) {
        float best = NEG_INF; uint bi = 0xffffffffu;
        for (uint i = t; i < n; i += 128u) {
            float x = A_f32[(base + i * pc.nb00) >> 2];
            if (x > best || bi == 0xffffffffu) { best = x; bi = i; }
        }
        red[t] = best; ri[t] = bi; barrier();
        for (uint s = 64u; s > 0u; s >>= 1) {
            if (t < s) {
                float o = red[t + s]; uint oi = ri[t + s];
                if (oi != 0xffffffffu && (ri[t] == 0xffffffffu || o > red[t] || (o == red[t] && oi < ri[t]))) {
                    red[t] = o; ri[t] = oi;
                }
            }
            barrier();
        }
        if (t == 0u) d_i32[(pc.od >> 2) + row] = int(ri[0]);
    } else {
        uint chunk = (n + 127u) / 128u;
        uint i0 = min(n, t * chunk); uint i1 = min(n, i0 + chunk);
        float s = 0.0;
        for (uint i = i0; i < i1; ++i) s += A_f32[(base + i * pc.nb00) >> 2];
        red[t] = s; barrier();
        if (t == 0u) { float acc = 0.0; for (uint k = 0u; k < 128u; ++k) { float x = red[k]; red[k] = acc; acc += x; } }
        barrier();
        float run = red[t];
        for (uint i = i0; i < i1; ++i) { run += A_f32[(base + i * pc.nb00) >> 2]; d_f32[(dbase + i * pc.nb0) >> 2] = run; }
    }
}
