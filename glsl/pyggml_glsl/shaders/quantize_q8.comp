#version 450
// Activations -> ggml's dot partners, as ggml's reference quantisers do (so results match the CPU backend):
// MODE 0: blocks of 32, d = amax / 127 (kept f16-rounded), q = roundf(x * (1 / d)), s = f16(sum(q) * d)
//         (q8_0 / q8_1; the rounding helpers of quant.glsl)
// MODE 1: blocks of 256, d = max / -127 by the signed extreme, q = nearest-even, clamped to 127  (q8_K)
// Output row r (= column j of b, batches b2, b3) at r * row_bytes; a block is d f32, s f32, then the int8 values.
// A block with a NaN or an infinity gets NaN d and s and zero quants: its products are NaN (as the cpu plugin's).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint TB = 0;
layout(constant_id = 1) const uint MODE = 0;
DECLARE_SRC(0, A)
DECLARE_DST(5)
GENERIC_PC   // a = b (activations); ne0 = blocks per row; nb0 = block bytes; nb1 = row bytes
#include "quant.glsl"

float f16_round(float v) { return unpackHalf2x16(f16_bits(v)).x; }

void main() {
    uint g = g_id();
    uint QK = MODE == 0u ? 32u : 256u;
    uint nblk = pc.ne0;
    if (g >= nblk * pc.ne01 * pc.ne02 * pc.ne03) return;
    uvec4 i = coords(g, nblk, pc.ne01, pc.ne02);
    uint src = pc.oa + i.y * pc.nb01 + i.z * pc.nb02 + i.w * pc.nb03 + i.x * QK * pc.nb00;
    uint dst = pc.od + ((i.w * pc.ne02 + i.z) * pc.ne01 + i.y) * pc.nb1 + i.x * pc.nb0;
    float amax = 0.0; float mx = 0.0; bool finite = true;
    for (uint j = 0u; j < QK; ++j) {
        float x = A_ld(TB, src + j * pc.nb00);
        finite = finite && (floatBitsToUint(x) & 0x7f800000u) != 0x7f800000u;
        if (abs(x) > amax) { amax = abs(x); mx = x; }
    }
    if (!finite) {  // a NaN or an infinity: a NaN scale and zero quants, so the block's products are NaN
        for (uint j = 0u; j < QK; ++j) d_i8[dst + 8u + j] = int8_t(0);
        d_f32[dst >> 2] = uintBitsToFloat(0x7fc00000u);
        d_f32[(dst >> 2) + 1u] = uintBitsToFloat(0x7fc00000u);
        return;
    }
    if (MODE == 0u) {
        float d = div_rn(amax, 127.0);
        float id = d != 0.0 ? div_rn(1.0, d) : 0.0;
        int sum = 0;
        for (uint j = 0u; j < QK; ++j) {
            precise float v = A_ld(TB, src + j * pc.nb00) * id;
            int q = int(round_away(v));
            sum += q;
            d_i8[dst + 8u + j] = int8_t(q);
        }
        d_f32[dst >> 2] = f16_round(d);
        d_f32[(dst >> 2) + 1u] = f16_round(float(sum) * d);
    } else {
        float iscale = amax != 0.0 ? div_rn(-127.0, mx) : 0.0;
        for (uint j = 0u; j < QK; ++j) {
            precise float v = iscale * A_ld(TB, src + j * pc.nb00);
            int q = amax != 0.0 ? min(127, int(roundEven(v))) : 0;
            d_i8[dst + 8u + j] = int8_t(q);
        }
        d_f32[dst >> 2] = amax != 0.0 ? div_rn(1.0, iscale) : 0.0;
        d_f32[(dst >> 2) + 1u] = 0.0;
    }
}
