#version 450
// UNARY (op codes 0..21 in UnaryOp order; XIELU 21: f0..f3 alpha_n alpha_p beta eps), SQR 32, SQRT 33, LOG 34, SIN 35, COS 36, SCALE 40 (x*f0+f1),
// CLAMP 41 (f0..f1), LEAKY_RELU 42 (slope f0), FILL 43 (f0): d[i] = f(a[i]), same shape, any strides.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint TA = 0;
layout(constant_id = 1) const uint TD = 0;
layout(constant_id = 2) const uint OP = 0;
DECLARE_SRC(0, A)
DECLARE_DST(5)
GENERIC_PC

#include "act.glsl"

float apply(float x) {
    switch (OP) {
    case 0u: return abs(x);
    case 1u: return x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0);
    case 2u: return -x;
    case 3u: return x > 0.0 ? 1.0 : 0.0;
    case 4u: return tanh_sat(x);
    case 5u: return x > 0.0 ? x : exp(x) - 1.0;
    case 6u: return x > 0.0 ? x : 0.0;
    case 7u: return sigm(x);
    case 8u: return gelu_tanh(x);
    case 9u: return xsig(x, 1.702 * x);
    case 10u: return gelu_erf(x);
    case 11u: return xsig(x, x);
    case 12u: return hardswish(x);
    case 13u: return min(1.0, max(0.0, (x + 3.0) / 6.0));
    case 14u: return exp(x);
    case 15u: return x > 20.0 ? x : log(1.0 + exp(x));
    case 16u: return floor(x);
    case 17u: return ceil(x);
    case 18u: return x < 0.0 ? -floor(-x + 0.5) : floor(x + 0.5);
    case 19u: return trunc(x);
    case 20u: return expm1_k(x);
    case 21u: return xielu(x, pc.f0, pc.f1, pc.f2, pc.f3);
    case 32u: return x * x;
    case 33u: return sqrt(x);
    case 34u: return log(x);
    case 35u: return sin(x);
    case 36u: return cos(x);
    case 40u: return x * pc.f0 + pc.f1;
    case 41u: { float u = x < pc.f1 ? x : pc.f1; return u > pc.f0 ? u : pc.f0; }
    case 42u: return (x > 0.0 ? x : 0.0) + pc.f0 * (x < 0.0 ? x : 0.0);
    case 43u: return pc.f0;
    }
    return x;
}

void main() {
    uint g = g_id();
    if (g >= pc.ne0 * pc.ne1 * pc.ne2 * pc.ne3) return;
    uvec4 i = coords(g, pc.ne0, pc.ne1, pc.ne2);
    float x = OP == 43u ? 0.0 : A_ld(TA, pc.oa + i.x * pc.nb00 + i.y * pc.nb01 + i.z * pc.nb02 + i.w * pc.nb03);
    d_st(TD, pc.od + i.x * pc.nb0 + i.y * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3, apply(x));
}
