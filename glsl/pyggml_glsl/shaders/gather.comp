#version 450
// Index-mapping ops, one thread per destination element: 0 REPEAT, 1 CONCAT (dim u0), 2 PAD (lp = f0..f3),
// 3 DIAG, 4 DIAG_MASK_INF / 5 DIAG_MASK_ZERO (n_past u0), 6 ARANGE (start f0, step f1);
// 7 SET / 8 ACC write b (ACC: a + b) at the view (d's ne/nb = b's shape with the view's strides).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint TA = 0;
layout(constant_id = 1) const uint TD = 0;
layout(constant_id = 2) const uint OP = 0;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_DST(5)
GENERIC_PC

bool is_int(uint t) { return t == T_I32 || t == T_I16 || t == T_I8 || t == T_I64; }
uint aoff(uvec4 i) { return pc.oa + i.x * pc.nb00 + i.y * pc.nb01 + i.z * pc.nb02 + i.w * pc.nb03; }
uint boff(uvec4 i) { return pc.ob + i.x * pc.nb10 + i.y * pc.nb11 + i.z * pc.nb12 + i.w * pc.nb13; }

void main() {
    uint g = g_id();
    if (g >= pc.ne0 * pc.ne1 * pc.ne2 * pc.ne3) return;
    uvec4 i = coords(g, pc.ne0, pc.ne1, pc.ne2);
    uint dst = pc.od + i.x * pc.nb0 + i.y * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3;
    bool from_b = false;
    bool zero = false;
    uvec4 s = i;
    float v = 0.0;
    if (OP == 0u) {
        s = i % uvec4(pc.ne00, pc.ne01, pc.ne02, pc.ne03);
    } else if (OP == 1u) {
        uvec4 na = uvec4(pc.ne00, pc.ne01, pc.ne02, pc.ne03);
        if (i[pc.u0] >= na[pc.u0]) { from_b = true; s[pc.u0] -= na[pc.u0]; }
    } else if (OP == 2u) {
        ivec4 si = ivec4(i) - ivec4(vec4(pc.f0, pc.f1, pc.f2, pc.f3));
        zero = any(lessThan(si, ivec4(0))) || any(greaterThanEqual(si, ivec4(pc.ne00, pc.ne01, pc.ne02, pc.ne03)));
        s = uvec4(max(si, ivec4(0)));
    } else if (OP == 3u) {
        zero = i.x != i.y; s = uvec4(i.x, 0u, i.z, i.w);
    } else if (OP == 4u || OP == 5u) {
        if (i.x > pc.u0 + i.y) { d_st(TD, dst, OP == 4u ? NEG_INF : 0.0); return; }
    } else if (OP == 6u) {
        d_st(TD, dst, pc.f0 + pc.f1 * float(i.x)); return;
    } else {
        float bv = B_ld(TD, boff(i));
        d_st(TD, dst, OP == 7u ? bv : A_ld(TA, aoff(i)) + bv); return;
    }
    if (zero) { d_st(TD, dst, 0.0); return; }
    if (is_int(TA)) d_sti(TD, dst, from_b ? B_ldi(TA, boff(s)) : A_ldi(TA, aoff(s)));
    else d_st(TD, dst, from_b ? B_ld(TA, boff(s)) : A_ld(TA, aoff(s)));
}
