#version 450
// GLU: d = act(x) * g; fused (SPLIT 0): x, g are the halves of a's rows (exchanged when SWAPPED);
// split: x = a, g = b (exchanged when SWAPPED). ACT: 0 relu, 1 gelu (tanh), 2 silu, 3 gelu_erf, 4 gelu_quick.
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

float sigm(float x) { return 1.0 / (1.0 + exp(-x)); }
float erf_approx(float x) {
    float a = abs(x);
    float t = 1.0 / (1.0 + 0.5 * a);
    float y = t * exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
              + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
    return x >= 0.0 ? 1.0 - y : y - 1.0;
}
float act(float x) {
    if (ACT == 0u) return x > 0.0 ? x : 0.0;
    if (ACT == 1u) return 0.5 * x * (1.0 + tanh(0.7978845608028654 * x * (1.0 + 0.044715 * x * x)));
    if (ACT == 2u) return x * sigm(x);
    if (ACT == 3u) return 0.5 * x * (1.0 + erf_approx(x * 0.7071067811865476));
    return x * sigm(1.702 * x);
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
    d_st(TD, pc.od + i.x * pc.nb0 + i.y * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3, act(x) * y);
}
