#version 450
// Copies into block types: the 32-element legacy types (quant.glsl) and the 256-element K types (kquant.glsl), one
// thread per destination block.
// OP 0 CPY: block (ib, i1, i2, i3) of d takes a's elements in a's logical order (a f32 / f16 / bf16);
// OP 1 SET_ROWS: a = rows (f32), b = ids (i32, or i64 when u0 = 8); d[:, ids[i1, i2 % ne11, i3 % ne12], i2, i3],
// an id outside [0, ne1) reported (DECLARE_STATUS) and its block not written.
// GENERIC_PC counts d's ne[0] in blocks (ne0), and a's ne[0] in elements. A block holding a NaN or an infinity is
// written as quant.glsl's store_nan_block.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint TA = 0;
layout(constant_id = 1) const uint TD = 2;
layout(constant_id = 2) const uint OP = 0;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_DST(5)
GENERIC_PC
DECLARE_STATUS
#include "quant.glsl"
#include "kquant.glsl"

void main() {
    uint g = g_id();
    uint QK = blck(TD);
    uint nd = OP == 0u ? pc.ne0 * pc.ne1 * pc.ne2 * pc.ne3 : (pc.ne00 / QK) * pc.ne01 * pc.ne02 * pc.ne03;
    if (g >= nd) return;
    uint dst;
    if (OP == 0u) {
        uvec4 i = coords(g, pc.ne0, pc.ne1, pc.ne2);
        dst = pc.od + i.x * pc.nb0 + i.y * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3;
        uint e0 = g * QK;  // the block's first element in d's (and a's) logical order
        if (pc.ne00 % QK == 0u) {
            uvec4 s = coords(e0, pc.ne00, pc.ne01, pc.ne02);
            uint src = pc.oa + s.x * pc.nb00 + s.y * pc.nb01 + s.z * pc.nb02 + s.w * pc.nb03;
            for (uint j = 0u; j < QK; ++j) X[j] = A_ld(TA, src + j * pc.nb00);
        } else {
            for (uint j = 0u; j < QK; ++j) {
                uvec4 s = coords(e0 + j, pc.ne00, pc.ne01, pc.ne02);
                X[j] = A_ld(TA, pc.oa + s.x * pc.nb00 + s.y * pc.nb01 + s.z * pc.nb02 + s.w * pc.nb03);
            }
        }
    } else {
        uvec4 i = coords(g, pc.ne00 / QK, pc.ne01, pc.ne02);
        int r = B_idx(pc.ob + i.y * pc.nb10 + (i.z % pc.ne11) * pc.nb11 + (i.w % pc.ne12) * pc.nb12, pc.u0 == 8u);
        if (r < 0 || uint(r) >= pc.ne1) { report_bad_index(); return; }
        uint row = uint(r);
        uint src = pc.oa + i.x * QK * pc.nb00 + i.y * pc.nb01 + i.z * pc.nb02 + i.w * pc.nb03;
        for (uint j = 0u; j < QK; ++j) X[j] = A_f32[(src + j * pc.nb00) >> 2];
        dst = pc.od + i.x * pc.nb0 + row * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3;
    }
    if (store_nan_block(TD, dst)) return;
    if (QK == 32u) store_q32(TD, dst);
    else store_qk(TD, dst);
}
