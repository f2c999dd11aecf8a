#version 450
// GET_ROWS: d[:, i10, i11, i12] = a[:, ids[i10, i11, i12], i11, i12], dequantised to f32 (or i32 -> i32); an id
// outside [0, ne01) is reported (DECLARE_STATUS) and its element left unwritten.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint TA = 0;
layout(constant_id = 1) const uint TD = 0;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_DST(5)
GENERIC_PC
DECLARE_STATUS

void main() {
    uint g = g_id();
    if (g >= pc.ne0 * pc.ne1 * pc.ne2 * pc.ne3) return;
    uvec4 i = coords(g, pc.ne0, pc.ne1, pc.ne2);
    int r = B_idx(pc.ob + i.y * pc.nb10 + i.z * pc.nb11 + i.w * pc.nb12, false);
    if (r < 0 || uint(r) >= pc.ne01) { report_bad_index(); return; }
    uint row = uint(r);
    uint base = pc.oa + row * pc.nb01 + i.z * pc.nb02 + i.w * pc.nb03;
    uint dst = pc.od + i.x * pc.nb0 + i.y * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3;
    if (TA == T_I32) d_sti(TD, dst, A_i32[(base + i.x * pc.nb00) >> 2]);
    else d_st(TD, dst, A_at(TA, base, i.x, pc.nb00));
}
