#version 450
// MUL_MAT of a block-quantised a with activations already quantised by quantize_q8 (ggml's vec_dot scheme, so
// results match the CPU backend): 32-blocks use integer dot products per block, d_a * d_b * sumi (+ m_a * s_b);
// Q4_K / Q5_K / Q6_K an integer sum a sub-block times its scales (ggml's vec_dot), Q2_K / Q3_K
// sum(dequant(a) * q_b) * d_b. b rows: r = (b3 * ne12 + b2) * ne11 + j, nb11 bytes each, nb10 bytes per block
// (d f32, s f32, int8 values).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#define WGS 64u
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint TA = 2;
layout(constant_id = 1) const uint NC = 1;
layout(constant_id = 2) const uint TPR = 1;  // threads per row: 1 (CPU-emulated devices) .. 64
// MUL_MAT_ID (NC 1): a = experts [k, m, n_expert], b [k, n_b, n_tokens], C = ids [n_used, n_tokens] (i32) at byte
// offset u0 with strides nb03 (slot) and nb13 (token) (a and b are 3-D); column j = slot e, batch b2 = token t,
// a = expert ids[e, t], b column e % n_b. An id outside [0, n_expert) gives NaN and is
// reported (DECLARE_STATUS).
layout(constant_id = 3) const bool IDS = false;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_SRC(2, C)
DECLARE_DST(5)
GENERIC_PC
DECLARE_STATUS
shared float part[8u * WGS];

void main() {
    uint ncols = IDS ? pc.ne1 : pc.ne11;
    uint ncg = (ncols + NC - 1u) / NC;
    uint rpw = WGS / TPR;
    uint nrg = (pc.ne01 + rpw - 1u) / rpw;
    uint wid = wg_id();
    if (wid >= nrg * ncg * pc.ne12 * pc.ne13) return;
    uvec4 w = coords(wid, nrg, ncg, pc.ne12);
    uint t = gl_LocalInvocationID.x;
    uint lane = t % TPR;
    uint row = min(w.x * rpw + t / TPR, pc.ne01 - 1u);  // rows past the end compute row ne01-1 and store nothing
    bool valid = w.x * rpw + t / TPR < pc.ne01;
    uint j0 = w.y * NC; uint b2 = w.z; uint b3 = w.w;
    uint jb = j0;  // b's column
    uint abase = pc.oa + row * pc.nb01;
    bool bad_id = false;
    if (IDS) {
        int ex = C_i32[(pc.u0 + j0 * pc.nb03 + b2 * pc.nb13) >> 2];
        bad_id = ex < 0 || uint(ex) >= pc.ne02;
        if (bad_id && lane == 0u && valid) report_bad_index();
        abase += uint(clamp(ex, 0, int(pc.ne02) - 1)) * pc.nb02;
        jb = j0 % pc.ne11;
    } else {
        abase += (b2 / (pc.ne12 / pc.ne02)) * pc.nb02 + (b3 / (pc.ne13 / pc.ne03)) * pc.nb03;
    }
    uint bbase = pc.ob + ((b3 * pc.ne12 + b2) * pc.ne11 + jb) * pc.nb11;
    uint QK = blck(TA);
    uint nblk = pc.ne00 / QK;
    uint nc = min(NC, ncols - j0);
    float acc[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    for (uint s = lane; s < nblk; s += TPR) {
        uint bo = abase + s * tsize(TA);
        uint bb = bbase + s * pc.nb10;
        if (QK == 32u) {
            float da = A_h(bo);
            float ma = (TA == T_Q4_1 || TA == T_Q5_1) ? A_h(bo + 2u) : 0.0;
            uint qs = TA == T_Q4_0 ? 2u : TA == T_Q4_1 ? 4u : TA == T_Q5_0 ? 6u : TA == T_Q5_1 ? 8u : 2u;
            uint qh = TA == T_Q5_0 ? A_w(bo + 2u) : TA == T_Q5_1 ? A_w(bo + 4u) : 0u;
            int lo[16]; int hi[16];
            for (uint j = 0u; j < 16u; ++j) {
                if (TA == T_Q8_0) {
                    lo[j] = int(A_i8[bo + qs + j]); hi[j] = int(A_i8[bo + qs + 16u + j]);
                } else {
                    uint by = A_b(bo + qs + j);
                    int l = int(by & 15u); int h = int(by >> 4);
                    if (TA == T_Q5_0 || TA == T_Q5_1) {
                        l |= int(((qh >> j) & 1u) << 4); h |= int(((qh >> (j + 16u)) & 1u) << 4);
                    }
                    int off = TA == T_Q4_0 ? 8 : TA == T_Q5_0 ? 16 : 0;
                    lo[j] = l - off; hi[j] = h - off;
                }
            }
            for (uint c = 0u; c < NC; ++c) {
                if (c < nc) {
                    uint cb = bb + c * pc.nb11;
                    int sumi = 0;
                    for (uint j = 0u; j < 16u; ++j) {
                        sumi += lo[j] * int(B_i8[cb + 8u + j]) + hi[j] * int(B_i8[cb + 24u + j]);
                    }
                    acc[c] += float(sumi) * (da * B_f32[cb >> 2]) + ma * B_f32[(cb >> 2) + 1u];
                }
            }
        } else if (TA == T_Q4_K || TA == T_Q5_K || TA == T_Q6_K) {
            // ggml's integer K dots: a 32-element sub-block's values decoded once for the columns, its products
            // summed in integers and scaled by its 6-bit scale (Q4_K / Q5_K, the minimum by the sum of b) or by
            // its two signed scales, one a 16 elements (Q6_K); one float multiply a block
            int isum[8] = int[8](0, 0, 0, 0, 0, 0, 0, 0);
            int msum[8] = int[8](0, 0, 0, 0, 0, 0, 0, 0);
            for (uint sb = 0u; sb < 8u; ++sb) {
                int q[32];
                int sc0; int sc1; int mn = 0;
                for (uint l = 0u; l < 32u; ++l) q[l] = A_klevel(TA, bo, sb * 32u + l);
                if (TA == T_Q6_K) {
                    sc0 = int(A_i8[bo + 192u + sb * 2u]);
                    sc1 = int(A_i8[bo + 193u + sb * 2u]);
                } else {
                    sc0 = int(A_scale_k4(bo, sb, false));
                    sc1 = sc0;
                    mn = int(A_scale_k4(bo, sb, true));
                }
                for (uint c = 0u; c < NC; ++c) {
                    if (c < nc) {
                        uint cb = bb + c * pc.nb11 + 8u + sb * 32u;
                        int s0 = 0; int s1 = 0; int sbv = 0;
                        for (uint l = 0u; l < 16u; ++l) {
                            int b0 = int(B_i8[cb + l]); int b1 = int(B_i8[cb + 16u + l]);
                            s0 += q[l] * b0; s1 += q[16u + l] * b1; sbv += b0 + b1;
                        }
                        isum[c] += sc0 * s0 + sc1 * s1;
                        msum[c] += mn * sbv;
                    }
                }
            }
            float da = TA == T_Q6_K ? A_h(bo + 208u) : A_h(bo);
            float dm = TA == T_Q6_K ? 0.0 : A_h(bo + 2u);
            for (uint c = 0u; c < NC; ++c) {
                if (c < nc) {
                    float db = B_f32[(bb + c * pc.nb11) >> 2];
                    acc[c] += (da * db) * float(isum[c]) - (dm * db) * float(msum[c]);
                }
            }
        } else {
            float bsum[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
            for (uint i = 0u; i < 256u; ++i) {
                float av = A_dq(TA, bo, i);
                for (uint c = 0u; c < NC; ++c) {
                    if (c < nc) bsum[c] += av * float(B_i8[bb + c * pc.nb11 + 8u + i]);
                }
            }
            for (uint c = 0u; c < NC; ++c) {
                if (c < nc) acc[c] += bsum[c] * B_f32[(bb + c * pc.nb11) >> 2];
            }
        }
    }
    if (TPR > 1u) {
        for (uint c = 0u; c < NC; ++c) part[c * WGS + t] = acc[c];
        barrier();
        for (uint s = TPR / 2u; s > 0u; s >>= 1) {
            if (lane < s) {
                for (uint c = 0u; c < NC; ++c) part[c * WGS + t] += part[c * WGS + t + s];
            }
            barrier();
        }
        for (uint c = 0u; c < NC; ++c) acc[c] = part[c * WGS + t];
    }
    if (bad_id) acc[0] = uintBitsToFloat(0x7fc00000u);
    if (lane == 0u && valid) {
        for (uint c = 0u; c < NC; ++c) {
            if (c < nc) d_f32[(pc.od + row * pc.nb0 + (j0 + c) * pc.nb1 + b2 * pc.nb2 + b3 * pc.nb3) >> 2] = acc[c];
        }
    }
}
