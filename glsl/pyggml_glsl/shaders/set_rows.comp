#version 450
// SET_ROWS: d[:, ids[i1, i2 % nc1, i3 % nc2], i2, i3] = b[:, i1, i2, i3] converted to d's plain type.
// a = the rows (f32), b = the ids (i32 / i64), GENERIC_PC: ne0..3 = rows' shape, u0 = ids' element size;
// an id outside [0, ne1) is reported (DECLARE_STATUS) and nothing written for it.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint TD = 1;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_DST(5)
GENERIC_PC
DECLARE_STATUS

void main() {
    uint g = g_id();
    if (g >= pc.ne00 * pc.ne01 * pc.ne02 * pc.ne03) return;
    uvec4 i = coords(g, pc.ne00, pc.ne01, pc.ne02);
    int r = B_idx(pc.ob + i.y * pc.nb10 + (i.z % pc.ne11) * pc.nb11 + (i.w % pc.ne12) * pc.nb12, pc.u0 == 8u);
    if (r < 0 || uint(r) >= pc.ne1) { report_bad_index(); return; }
    uint row = uint(r);
    float v = A_f32[(pc.oa + i.x * pc.nb00 + i.y * pc.nb01 + i.z * pc.nb02 + i.w * pc.nb03) >> 2];
    d_st(TD, pc.od + i.x * pc.nb0 + row * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3, v);
}
