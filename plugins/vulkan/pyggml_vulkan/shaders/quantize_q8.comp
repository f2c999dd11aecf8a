#version 450
// Activations -> ggml's dot partners, as ggml's reference quantisers do (so results match the CPU backend):
// MODE 0: blocks of 32, d = amax / 127 (kept f16-rounded), q = roundf(x / d), s = f16(sum(q) * d)  (q8_0 / q8_1)
// MODE 1: blocks of 256, d = max / -127 by the signed extreme, q = nearest-even, clamped to 127  (q8_K)
// Output row r (= column j of b, batches b2, b3) at r * row_bytes; a block is d f32, s f32, then the int8 values.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint TB = 0;
layout(constant_id = 1) const uint MODE = 0;
DECLARE_SRC(0, A)
DECLARE_DST(5)
GENERIC_PC   // a = b (activations); ne0 = blocks per row; nb0 = block bytes; nb1 = row bytes

float f16_round(float v) {
    // the value of v rounded to half precision, nearest even (integer arithmetic: no driver rounding mode)
    uint u = floatBitsToUint(v);
    uint a = u & 0x7fffffffu;
    if (a < 0x38800000u) {  // half subnormals: multiples of 2^-24
        float x = roundEven(uintBitsToFloat(a) * 16777216.0) / 16777216.0;
        a = floatBitsToUint(x);
    } else if (a < 0x47800000u) {
        a = (a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu;
    }
    return uintBitsToFloat((u & 0x80000000u) | a);
}

void main() {
    uint g = g_id();
    uint QK = MODE == 0u ? 32u : 256u;
    uint nblk = pc.ne0;
    if (g >= nblk * pc.ne01 * pc.ne02 * pc.ne03) return;
    uvec4 i = coords(g, nblk, pc.ne01, pc.ne02);
    uint src = pc.oa + i.y * pc.nb01 + i.z * pc.nb02 + i.w * pc.nb03 + i.x * QK * pc.nb00;
    uint dst = pc.od + ((i.w * pc.ne02 + i.z) * pc.ne01 + i.y) * pc.nb1 + i.x * pc.nb0;
    float amax = 0.0; float mx = 0.0;
    for (uint j = 0u; j < QK; ++j) {
        float x = A_ld(TB, src + j * pc.nb00);
        if (abs(x) > amax) { amax = abs(x); mx = x; }
    }
    if (MODE == 0u) {
        float d = amax / 127.0;
        float id = d != 0.0 ? 1.0 / d : 0.0;
        int sum = 0;
        for (uint j = 0u; j < QK; ++j) {
            float v = A_ld(TB, src + j * pc.nb00) * id;
            int q = int(sign(v) * floor(abs(v) + 0.5));
            sum += q;
            d_i8[dst + 8u + j] = int8_t(q);
        }
        d_f32[dst >> 2] = f16_round(d);
        d_f32[(dst >> 2) + 1u] = f16_round(float(sum) * d);
    } else {
        float iscale = amax != 0.0 ? -127.0 / mx : 0.0;
        for (uint j = 0u; j < QK; ++j) {
            int q = amax != 0.0 ? min(127, int(roundEven(iscale * A_ld(TB, src + j * pc.nb00)))) : 0;
            d_i8[dst + 8u + j] = int8_t(q);
        }
        d_f32[dst >> 2] = amax != 0.0 ? 1.0 / iscale : 0.0;
        d_f32[(dst >> 2) + 1u] = 0.0;
    }
}
