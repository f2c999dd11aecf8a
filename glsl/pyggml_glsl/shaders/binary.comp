#version 450
// ADD / SUB / MUL / DIV / ADD1: d = a op b, b tiled (ggml broadcasting) over a's shape.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint TA = 0;
layout(constant_id = 1) const uint TB = 0;
layout(constant_id = 2) const uint TD = 0;
layout(constant_id = 3) const uint OP = 0;  // 0 add, 1 sub, 2 mul, 3 div
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_DST(5)
GENERIC_PC

void main() {
    uint g = g_id();
    if (g >= pc.ne0 * pc.ne1 * pc.ne2 * pc.ne3) return;
    uvec4 i = coords(g, pc.ne0, pc.ne1, pc.ne2);
    float a = A_ld(TA, pc.oa + i.x * pc.nb00 + i.y * pc.nb01 + i.z * pc.nb02 + i.w * pc.nb03);
    float b = B_ld(TB, pc.ob + (i.x % pc.ne10) * pc.nb10 + (i.y % pc.ne11) * pc.nb11 + (i.z % pc.ne12) * pc.nb12
                        + (i.w % pc.ne13) * pc.nb13);
    float r = OP == 0u ? a + b : OP == 1u ? a - b : OP == 2u ? a * b : a / b;
    d_st(TD, pc.od + i.x * pc.nb0 + i.y * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3, r);
}
