#version 450
// Sequence-model helpers and the non-recurrent ops, f32 (i32 for PACK's words), GENERIC_PC (a = src0, b = src1,
// d = dst, any strides):
//   OP 0 PACK       d (contiguous) = a's 32-bit words in ne order: the recurrent shaders (ssm_scan.comp, wkv.comp)
//                   read their inputs contiguous, packed into scratch when they are not (or bind more than five)
//   OP 1 TRI        d = a where column i0 and row i1 satisfy u0 (0: i0 >= i1, 1: i0 > i1, 2: i0 <= i1,
//                   3: i0 < i1), else 0
//   OP 2 SOLVE_TRI  A X = B by forward substitution (a = A, b = B, d = X): one thread per column of B and batch,
//                   rows u0 .. bits(f1) - 1 (a CPU-emulated device runs the rows in several dispatches, each within
//                   its loop budget); the rows before u0 are read back from d; A's upper part is not read
//   OP 3 SSM_CONV   d[ch, t, s] = sum_k a[t + k, ch, s] * b[k, ch], k ascending; one thread per output
// One thread per element of d (SOLVE_TRI: per column and batch).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_DST(5)
GENERIC_PC

uint a_at(uvec4 i) { return (pc.oa + i.x * pc.nb00 + i.y * pc.nb01 + i.z * pc.nb02 + i.w * pc.nb03) >> 2; }
uint b_at(uvec4 i) { return (pc.ob + i.x * pc.nb10 + i.y * pc.nb11 + i.z * pc.nb12 + i.w * pc.nb13) >> 2; }
uint d_at(uvec4 i) { return (pc.od + i.x * pc.nb0 + i.y * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3) >> 2; }

void solve_tri(uint g) {
    if (g >= pc.ne0 * pc.ne2 * pc.ne3) return;
    uvec4 c = coords(g, pc.ne0, pc.ne2, 1u << 30);   // (column, batch 2, batch 3)
    uint r1 = floatBitsToUint(pc.f1);
    for (uint i = pc.u0; i < r1; i++) {
        float acc = 0.0;
        for (uint t = 0u; t < i; t++) {
            acc += A_f32[a_at(uvec4(t, i, c.y, c.z))] * d_f32[d_at(uvec4(c.x, t, c.y, c.z))];
        }
        d_f32[d_at(uvec4(c.x, i, c.y, c.z))] = (B_f32[b_at(uvec4(c.x, i, c.y, c.z))] - acc) /
            A_f32[a_at(uvec4(i, i, c.y, c.z))];
    }
}

void main() {
    uint g = g_id();
    if (OP == 2u) { solve_tri(g); return; }
    if (g >= pc.ne0 * pc.ne1 * pc.ne2 * pc.ne3) return;
    uvec4 i = coords(g, pc.ne0, pc.ne1, pc.ne2);
    if (OP == 0u) {
        d_i32[(pc.od >> 2) + g] = A_i32[a_at(i)];
    } else if (OP == 1u) {
        bool keep = pc.u0 == 0u ? i.x >= i.y : pc.u0 == 1u ? i.x > i.y : pc.u0 == 2u ? i.x <= i.y : i.x < i.y;
        d_f32[d_at(i)] = keep ? A_f32[a_at(i)] : 0.0;
    } else {
        float acc = 0.0;
        for (uint k = 0u; k < pc.ne10; k++) acc += A_f32[a_at(uvec4(i.y + k, i.x, i.z, 0u))] * B_f32[b_at(uvec4(k, i.x, 0u, 0u))];
        d_f32[d_at(i)] = acc;
    }
}
