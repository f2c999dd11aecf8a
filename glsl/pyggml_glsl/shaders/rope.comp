#version 450
// ROPE, one thread per pair: normal mode rotates (x[2i], x[2i+1]), NeoX (x[i], x[i + n_dims/2]), angle index i;
// pairs past n_dims are copied. YaRN ramp between corr0 and corr1, optional frequency factors (binding 2).
// BACK 1 (ROPE_BACK) rotates by minus the angle: the sine negated.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint TA = 0;
layout(constant_id = 1) const uint NEOX = 0;
layout(constant_id = 2) const uint HAS_FF = 0;
layout(constant_id = 3) const uint BACK = 0;
DECLARE_SRC(0, A)
DECLARE_SRC(1, P)
DECLARE_SRC(2, F)
DECLARE_DST(5)
layout(push_constant) uniform PC {
    uint oa, op, of, od;
    uint ne00, ne01, ne02, ne03, nb00, nb01, nb02, nb03;
    uint nb0, nb1, nb2, nb3;
    uint n_dims; float freq_base, freq_scale, ext_factor, attn_factor, corr0, corr1;
} pc;

void main() {
    uint g = g_id();
    uint half_ne0 = pc.ne00 / 2u;
    if (g >= half_ne0 * pc.ne01 * pc.ne02 * pc.ne03) return;
    uvec4 i = coords(g, half_ne0, pc.ne01, pc.ne02);
    uint ip = i.x;
    uint sa = pc.oa + i.y * pc.nb01 + i.z * pc.nb02 + i.w * pc.nb03;
    uint sd = pc.od + i.y * pc.nb1 + i.z * pc.nb2 + i.w * pc.nb3;
    uint half_dims = pc.n_dims / 2u;
    if (ip >= half_dims) {
        uint j = 2u * ip;
        d_st(TA, sd + j * pc.nb0, A_ld(TA, sa + j * pc.nb00));
        d_st(TA, sd + (j + 1u) * pc.nb0, A_ld(TA, sa + (j + 1u) * pc.nb00));
        return;
    }
    float pos = float(P_i32[(pc.op >> 2) + i.z]);
    float theta_extrap = pos * pow(pc.freq_base, -2.0 * float(ip) / float(pc.n_dims));
    if (HAS_FF == 1u) theta_extrap /= F_f32[(pc.of >> 2) + ip];
    float theta = pc.freq_scale * theta_extrap;
    float mscale = pc.attn_factor;
    if (pc.ext_factor != 0.0) {
        float y = (float(ip) - pc.corr0) / max(0.001, pc.corr1 - pc.corr0);
        float mix = (1.0 - min(1.0, max(0.0, y))) * pc.ext_factor;
        theta = theta * (1.0 - mix) + theta_extrap * mix;
        mscale *= 1.0 + 0.1 * log(1.0 / pc.freq_scale);
    }
    float c = cos(theta) * mscale;
    float s = sin(theta) * mscale * (BACK == 1u ? -1.0 : 1.0);
    uint j0 = NEOX == 1u ? ip : 2u * ip;
    uint j1 = NEOX == 1u ? ip + half_dims : 2u * ip + 1u;
    float x0 = A_ld(TA, sa + j0 * pc.nb00);
    float x1 = A_ld(TA, sa + j1 * pc.nb00);
    d_st(TA, sd + j0 * pc.nb0, x0 * c - x1 * s);
    d_st(TA, sd + j1 * pc.nb0, x0 * s + x1 * c);
}
