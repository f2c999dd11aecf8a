#version 450
// GLU: d = act(x) * g; fused (SPLIT 0): x, g are the halves of a's rows (exchanged when SWAPPED);
// split: x = a, g = b (exchanged when SWAPPED). ACT: 0 relu, 1 gelu (tanh), 2 silu, 3 gelu_erf, 4 gelu_quick,
// 5 swiglu_oai (f0 alpha, f1 limit), 6 swiglu_clamp (f1 limit): those clamp and combine x and g themselves.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint TA = 0;
layout(constant_id = 1) const uint TD = 0;
layout(constant_id = 2) const uint ACT = 2;
layout(constant_id = 3) const uint SPLIT = 0;
layout(constant_id = 4) const uint SWAPPED = 0;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_DST(5)
GENERIC_PC

#include "act.glsl"

float act(float x) {
    if (ACT == 0u) return x > 0.0 ? x : 0.0;
    if (ACT == 1u) return gelu_tanh(x);
    if (ACT == 2u) return xsig(x, x);
    if (ACT == 3u) return gelu_erf(x);
    return xsig(x, 1.702 * x);
}

void main() {
    uint g = g_id();
    if (g >= pc.ne0 * pc.ne1 * pc.ne2 * pc.ne3) return;
    uvec4 i = coords(g, pc.ne0, pc.ne1, pc.ne2);
    uint ra = pc.oa + i.y * pc.nb01 + i.z * pc.nb02 + i.w * pc.nb03;
    float x; float y;
    if (SPLIT == 0u) {
        uint h = pc.ne0;
        x = A_ld(TA, ra + (i.x + (SWAPPED == 1u ? h : 0u)) * pc.nb00);
        y = A_ld(TA, ra + (i.x + (SWAPPED == 1u ? 0u : h)) * pc.nb00);
    } else {
        float u = A_ld(TA, ra + i.x * pc.nb00);
        float v = B_ld(TA, pc.ob + i.x * pc.nb10 + i.y * pc.nb11 + i.z * pc.nb12 + i.w * pc.nb13);
        x = SWAPPED == 1u ? v : u;
        y = SWAPPED == 1u ? u : v;
    }
    float r = ACT == 5u ? swiglu_oai(x, y, pc.f0, pc.f1) : (ACT == 6u ? swiglu_clamp(x, y, pc.f1) : act(x) * y);
    d_st(TD, pc.od + i.x * pc.nb0 + i.y * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3, r);
}
