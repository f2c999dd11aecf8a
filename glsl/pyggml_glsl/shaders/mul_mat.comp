#version 450
// MUL_MAT: d[i, j, b2, b3] = sum_k a[k, i, b2 / r2, b3 / r3] * b[k, j, b2, b3], a of any readable type (block
// types dequantised in registers), b f32/f16. One work group per (row i, NC columns, batch): each a element is
// loaded once for NC columns; partial sums reduced in shared memory.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#define WGS 64u
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint TA = 0;
layout(constant_id = 1) const uint TB = 0;
layout(constant_id = 2) const uint NC = 1;   // columns per thread group (1..8)
layout(constant_id = 3) const uint TPR = 1;  // threads per row: 1 (CPU-emulated devices) .. 64
// MUL_MAT_ID (NC 1): a = experts [k, m, n_expert], b [k, n_b, n_tokens], C = ids [n_used, n_tokens] (i32) at byte
// offset u0 with strides nb03 (slot) and nb13 (token) (a and b are 3-D); column j = slot e, batch b2 = token t,
// a = expert ids[e, t], b column e % n_b. An id outside [0, n_expert) gives NaN and is
// reported (DECLARE_STATUS).
layout(constant_id = 4) const bool IDS = false;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_SRC(2, C)
DECLARE_DST(5)
GENERIC_PC
DECLARE_STATUS
shared float part[8u * WGS];

// an element of b as the products read it: rounded to F16 for F16 weights, as ggml's CPU converts b to the weights'
// vec_dot_type first (the quantised weights' partner is mul_mat_q8's Q8_1)
float b_as_read(float v) { return TA == T_F16 ? unpackHalf2x16(packHalf2x16(vec2(v, 0.0))).x : v; }

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
    uint bbase = pc.ob + b2 * pc.nb12 + b3 * pc.nb13;
    uint K = pc.ne00;
    float acc[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    uint nc = min(NC, ncols - j0);
    if (is_quant(TA)) {
        // each thread takes whole 32-element slices so the block header is read once per slice
        uint bs = blck(TA); uint ts = tsize(TA);
        for (uint s = lane; s < K / 32u; s += TPR) {
            uint k0 = s * 32u;
            uint bo = abase + (k0 / bs) * ts;
            uint ib = k0 % bs;
            for (uint e = 0u; e < 32u; ++e) {
                float av = A_dq(TA, bo, ib + e);
                for (uint c = 0u; c < NC; ++c) {
                    if (c < nc) acc[c] += av * B_ld(TB, bbase + (jb + c) * pc.nb11 + (k0 + e) * pc.nb10);
                }
            }
        }
    } else {
        for (uint k = lane; k < K; k += TPR) {
            float av = A_ld(TA, abase + k * pc.nb00);
            for (uint c = 0u; c < NC; ++c) {
                if (c < nc) acc[c] += av * b_as_read(B_ld(TB, bbase + (jb + c) * pc.nb11 + k * pc.nb10));
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
