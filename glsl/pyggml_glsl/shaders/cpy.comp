#version 450
// CPY / CONT / DUP: element g of a (in a's logical order) goes to element g of d (in d's order), converting type;
// a may be a block type (dequantised), d a plain type.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint TA = 0;
layout(constant_id = 1) const uint TD = 0;
DECLARE_SRC(0, A)
DECLARE_DST(5)
GENERIC_PC

bool is_int(uint t) { return t == T_I32 || t == T_I16 || t == T_I8 || t == T_I64; }

void main() {
    uint g = g_id();
    if (g >= pc.ne0 * pc.ne1 * pc.ne2 * pc.ne3) return;
    uvec4 s = coords(g, pc.ne00, pc.ne01, pc.ne02);
    uvec4 i = coords(g, pc.ne0, pc.ne1, pc.ne2);
    uint row = pc.oa + s.y * pc.nb01 + s.z * pc.nb02 + s.w * pc.nb03;
    uint dst = pc.od + i.x * pc.nb0 + i.y * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3;
    if (is_int(TA) && is_int(TD)) d_sti(TD, dst, A_ldi(TA, row + s.x * pc.nb00));
    else d_st(TD, dst, A_at(TA, row, s.x, pc.nb00));
}
