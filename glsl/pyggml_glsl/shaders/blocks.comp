#version 450
// Byte moves in units (a quantised block, or an element of a type no other shader converts, such as i64): one
// thread per destination unit, UW 16-bit words each, no conversion. GENERIC_PC counts ne[0] in units.
// OP 0 copy (CPY / DUP / CONT within one type): unit g of d (in d's logical order) <- unit g of a;
// OP 1 CONCAT along dim u0: d = a ++ b.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint UW = 1;
layout(constant_id = 1) const uint OP = 0;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_DST(5)
GENERIC_PC

void main() {
    uint g = g_id();
    if (g >= pc.ne0 * pc.ne1 * pc.ne2 * pc.ne3) return;
    uvec4 i = coords(g, pc.ne0, pc.ne1, pc.ne2);
    uint dst = (pc.od + i.x * pc.nb0 + i.y * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3) >> 1;
    if (OP == 0u) {
        uvec4 s = coords(g, pc.ne00, pc.ne01, pc.ne02);
        uint src = (pc.oa + s.x * pc.nb00 + s.y * pc.nb01 + s.z * pc.nb02 + s.w * pc.nb03) >> 1;
        for (uint w = 0u; w < UW; ++w) d_u16[dst + w] = A_u16[src + w];
        return;
    }
    uvec4 na = uvec4(pc.ne00, pc.ne01, pc.ne02, pc.ne03);
    if (i[pc.u0] < na[pc.u0]) {
        uint src = (pc.oa + i.x * pc.nb00 + i.y * pc.nb01 + i.z * pc.nb02 + i.w * pc.nb03) >> 1;
        for (uint w = 0u; w < UW; ++w) d_u16[dst + w] = A_u16[src + w];
    } else {
        i[pc.u0] -= na[pc.u0];
        uint src = (pc.ob + i.x * pc.nb10 + i.y * pc.nb11 + i.z * pc.nb12 + i.w * pc.nb13) >> 1;
        for (uint w = 0u; w < UW; ++w) d_u16[dst + w] = B_u16[src + w];
    }
}
