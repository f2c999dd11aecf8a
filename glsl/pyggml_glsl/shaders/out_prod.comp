#version 450
// OUT_PROD: d[i, j, b2, b3] = sum_k a[i, k, b2 / r2, b3 / r3] * b[j, k, b2, b3]; one thread per result element.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint TA = 0;
layout(constant_id = 1) const uint TB = 0;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_DST(5)
GENERIC_PC

void main() {
    uint g = g_id();
    if (g >= pc.ne0 * pc.ne1 * pc.ne2 * pc.ne3) return;
    uvec4 i = coords(g, pc.ne0, pc.ne1, pc.ne2);
    uint ab = pc.oa + (i.z / (pc.ne2 / pc.ne02)) * pc.nb02 + (i.w / (pc.ne3 / pc.ne03)) * pc.nb03;
    uint bb = pc.ob + i.y * pc.nb10 + i.z * pc.nb12 + i.w * pc.nb13;
    float s = 0.0;
    for (uint k = 0u; k < pc.ne01; ++k) s += A_at(TA, ab + k * pc.nb01, i.x, pc.nb00) * B_ld(TB, bb + k * pc.nb11);
    d_f32[(pc.od + i.x * pc.nb0 + i.y * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3) >> 2] = s;
}
