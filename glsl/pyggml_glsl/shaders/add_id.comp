#version 450
// ADD_ID: d[i0, i1, i2, i3] = a[i0, i1, i2, i3] + b[i0, ids[i1, i2]]. ids (binding 2, i32) start at byte u0 with
// strides nb12 (ids' nb0) and nb13 (ids' nb1): b is a matrix, so those words are free. An id outside [0, ne11)
// is reported (DECLARE_STATUS) and its element left unwritten.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint TA = 0;
layout(constant_id = 1) const uint TB = 0;
layout(constant_id = 2) const uint TD = 0;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_SRC(2, C)
DECLARE_DST(5)
GENERIC_PC
DECLARE_STATUS

void main() {
    uint g = g_id();
    if (g >= pc.ne0 * pc.ne1 * pc.ne2 * pc.ne3) return;
    uvec4 i = coords(g, pc.ne0, pc.ne1, pc.ne2);
    int r = C_idx(pc.u0 + i.y * pc.nb12 + i.z * pc.nb13, false);
    if (r < 0 || uint(r) >= pc.ne11) { report_bad_index(); return; }
    float x = A_ld(TA, pc.oa + i.x * pc.nb00 + i.y * pc.nb01 + i.z * pc.nb02 + i.w * pc.nb03);
    float y = B_ld(TB, pc.ob + i.x * pc.nb10 + uint(r) * pc.nb11);
    d_st(TD, pc.od + i.x * pc.nb0 + i.y * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3, x + y);
}
