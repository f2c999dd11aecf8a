#version 450
// Optimiser steps in place, one thread per element of the parameter w (f32, any strides): OP 0 OPT_STEP_ADAMW updates
// w, its moments m (binding 2) and v (binding 3); OP 1 OPT_STEP_SGD updates w. The hyper-parameters (binding 4, f32:
// AdamW [alpha, beta1, beta2, eps, wd, beta1h, beta2h], SGD [alpha, wd]) are read on the device, so a recorded step
// replays with new values. The destination (binding 5) is a view of w: w is read and written there.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
DECLARE_SRC(1, G)
DECLARE_SRC(4, H)
layout(std430, set = 0, binding = 2) buffer M_RW { float m_f32[]; };
layout(std430, set = 0, binding = 3) buffer V_RW { float v_f32[]; };
DECLARE_DST(5)
layout(push_constant) uniform PC {
    uint og, om, ov, oh, od;
    uint ne0, ne1, ne2, ne3;
    uint gnb0, gnb1, gnb2, gnb3, mnb0, mnb1, mnb2, mnb3, vnb0, vnb1, vnb2, vnb3, nb0, nb1, nb2, nb3;
} pc;

uint at(uvec4 i, uint o, uint n0, uint n1, uint n2, uint n3) { return o + i.x * n0 + i.y * n1 + i.z * n2 + i.w * n3; }

void main() {
    uint g = g_id();
    if (g >= pc.ne0 * pc.ne1 * pc.ne2 * pc.ne3) return;
    uvec4 i = coords(g, pc.ne0, pc.ne1, pc.ne2);
    uint h = pc.oh >> 2;
    float alpha = H_f32[h];
    float gi = G_f32[at(i, pc.og, pc.gnb0, pc.gnb1, pc.gnb2, pc.gnb3) >> 2];
    uint wo = at(i, pc.od, pc.nb0, pc.nb1, pc.nb2, pc.nb3) >> 2;
    if (OP == 1u) {
        d_f32[wo] = d_f32[wo] * (1.0 - alpha * H_f32[h + 1u]) - alpha * gi;
        return;
    }
    float beta1 = H_f32[h + 1u], beta2 = H_f32[h + 2u], eps = H_f32[h + 3u], wd = H_f32[h + 4u];
    float beta1h = H_f32[h + 5u], beta2h = H_f32[h + 6u];
    uint mo = at(i, pc.om, pc.mnb0, pc.mnb1, pc.mnb2, pc.mnb3) >> 2;
    uint vo = at(i, pc.ov, pc.vnb0, pc.vnb1, pc.vnb2, pc.vnb3) >> 2;
    float mi = m_f32[mo] * beta1 + gi * (1.0 - beta1);
    float vi = v_f32[vo] * beta2 + gi * gi * (1.0 - beta2);
    m_f32[mo] = mi;
    v_f32[vo] = vi;
    float mh = mi * beta1h;
    float vh = sqrt(vi * beta2h) + eps;
    d_f32[wo] = d_f32[wo] * (1.0 - alpha * wd) - alpha * mh / vh;
}
