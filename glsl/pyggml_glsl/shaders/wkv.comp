#version 450
// The S x S linear recurrences, f32: OP 0 RWKV_WKV6, 1 GATED_LINEAR_ATTN, 2 RWKV_WKV7, 3 GATED_DELTA_NET. One work
// group of LANES = S threads per (head, sequence); each thread owns one row or column of the head's state in
// registers, the per-token vectors every thread reads go through shared memory, and tokens run in order (the same
// numbers on every run). Inputs are contiguous (the host packs the others into scratch); the op's srcs in ggml's
// order are read at the word offsets w[0..6] from bindings fixed per op:
//   WKV6 (k, v, r, tf, td, state)      A B C P P S3      y[j] = sum_i r_i (tf_i k_i v_j + S_ij); S_ij = S_ij td_i + k_i v_j
//   GLA  (k, v, q, g, state)           A B C P S3        S_ij = S_ij g_i + k_i v_j; y_j = scale sum_i q_i S_ij
//   WKV7 (r, w, k, v, a, b, state)     A P B C P P S3    S_ij (i over v): sa_i = a . S_i; S_ij = S_ij w_j + v_i k_j
//                                                        + sa_i b_j; y_i = S_i . r
//   GDN  (q, k, v, g, beta, state)     A B C P P S3      S_ij *= exp(g) (g_i: KDA); d_j = beta (v_j - sum_i S_ij k_i);
//                                                        S_ij += k_i d_j; y_j = sum_i S_ij q_i / sqrt(S)
// d is the op's contiguous result: outputs, then the state(s) (GDN: K snapshot slots). Tokens t_begin .. t_end - 1 of
// each sequence run in this dispatch; a later chunk starts from the state the previous one left in d (the final
// state's place; GDN's slot 0), so a CPU-emulated device keeps each invocation within lavapipe's loop limit.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x_id = 1) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint LANES = 64u;
DECLARE_SRC(0, A)
DECLARE_SRC(1, B)
DECLARE_SRC(2, C)
DECLARE_SRC(3, S3)
DECLARE_SRC(4, P)
DECLARE_DST(5)
layout(push_constant) uniform PC { uint w[31]; float f3; } pc;
shared float v0[LANES], v1[LANES], v2[LANES], v3[LANES], v4[LANES];

#define W_D 7
#define W_H 8
#define W_T 9
#define W_N_SEQS 10
#define W_HK 11
#define W_N_SEQS_K 12
#define W_KDA 13
#define W_K 14
#define W_T_BEGIN 15
#define W_T_END 16
#define W_SCALE 17

float st[LANES];

// WKV6, GLA, WKV7: token tensors [S, H, T] with sequence q's tokens at q * tps ..; state [S*S*H, n_seqs]
void linear() {
    uint S = LANES, H = pc.w[W_H], T = pc.w[W_T], n_seqs = pc.w[W_N_SEQS];
    uint h = wg_id() % H, q = wg_id() / H, me = gl_LocalInvocationID.x;
    uint tps = T / n_seqs;
    uint t0 = pc.w[W_T_BEGIN], t1 = pc.w[W_T_END];
    uint o_state = pc.w[OP == 0u ? 5 : OP == 1u ? 4 : 6];
    uint d_state = pc.w[W_D] + T * S * H + q * S * S * H;   // this sequence's final state in d
    for (uint i = 0u; i < S; i++) {
        uint f = OP == 2u ? (h * S + me) * S + i : (h * S + i) * S + me;
        st[i] = t0 == 0u ? S3_f32[o_state + q * S * S * H + f] : d_f32[d_state + f];
    }
    float u = OP == 0u ? P_f32[pc.w[3] + h * S + me] : 0.0;
    for (uint tt = t0; tt < t1; tt++) {
        uint x = ((q * tps + tt) * H + h) * S + me;
        barrier();
        float vj;
        if (OP == 0u) {   // k A, v B, r C, td P
            v0[me] = A_f32[pc.w[0] + x]; v1[me] = C_f32[pc.w[2] + x]; v2[me] = P_f32[pc.w[4] + x]; v3[me] = u;
            vj = B_f32[pc.w[1] + x];
        } else if (OP == 1u) {   // k A, v B, q C, g P
            v0[me] = A_f32[pc.w[0] + x]; v1[me] = C_f32[pc.w[2] + x]; v2[me] = P_f32[pc.w[3] + x];
            vj = B_f32[pc.w[1] + x];
        } else {   // r A, w P, k B, v C, a P, b P
            v0[me] = A_f32[pc.w[0] + x]; v1[me] = P_f32[pc.w[1] + x]; v2[me] = B_f32[pc.w[2] + x];
            v3[me] = P_f32[pc.w[4] + x]; v4[me] = P_f32[pc.w[5] + x];
            vj = C_f32[pc.w[3] + x];
        }
        barrier();
        float y = 0.0;
        if (OP == 0u) {
            for (uint i = 0u; i < S; i++) {
                float kv = v0[i] * vj;
                y += v1[i] * (v3[i] * kv + st[i]);
                st[i] = st[i] * v2[i] + kv;
            }
        } else if (OP == 1u) {
            for (uint i = 0u; i < S; i++) {
                st[i] = st[i] * v2[i] + v0[i] * vj;
                y += v1[i] * st[i];
            }
            y *= uintBitsToFloat(pc.w[W_SCALE]);
        } else {
            float sa = 0.0;
            for (uint j = 0u; j < S; j++) sa += v3[j] * st[j];
            for (uint j = 0u; j < S; j++) {
                st[j] = st[j] * v1[j] + vj * v2[j] + sa * v4[j];
                y += st[j] * v0[j];
            }
        }
        d_f32[pc.w[W_D] + x] = y;
    }
    for (uint i = 0u; i < S; i++) d_f32[d_state + (OP == 2u ? (h * S + me) * S + i : (h * S + i) * S + me)] = st[i];
}

// GATED_DELTA_NET: q, k [S, Hk, T, n_seqs_k]; v [S, H, T, n_seqs]; g [1 or S, H, T, n_seqs]; beta [1, H, T, n_seqs];
// state [S, S, H, n_seqs] with S_ij at (i, j); thread j owns column j
void delta_net() {
    uint S = LANES, H = pc.w[W_H], T = pc.w[W_T], n_seqs = pc.w[W_N_SEQS], hk_n = pc.w[W_HK];
    uint h = wg_id() % H, q = wg_id() / H, me = gl_LocalInvocationID.x;
    uint hk = h % hk_n, qk = q / (n_seqs / pc.w[W_N_SEQS_K]);
    bool kda = pc.w[W_KDA] != 0u;
    uint t0 = pc.w[W_T_BEGIN], t1 = pc.w[W_T_END];
    uint block = S * S * H * n_seqs;
    uint col = ((q * H + h) * S + me) * S;   // column j of this head in a state block
    uint slot0 = pc.w[W_D] + S * H * T * n_seqs + col;
    float scale = 1.0 / sqrt(float(S));
    for (uint i = 0u; i < S; i++) st[i] = t0 == 0u ? S3_f32[pc.w[5] + col + i] : d_f32[slot0 + i];
    for (uint t = t0; t < t1; t++) {
        uint tok = q * T + t;
        barrier();
        uint xk = ((qk * T + t) * hk_n + hk) * S + me;
        v0[me] = A_f32[pc.w[0] + xk];
        v1[me] = B_f32[pc.w[1] + xk];
        if (kda || me == 0u) v2[me] = exp(P_f32[pc.w[3] + (tok * H + h) * (kda ? S : 1u) + me]);
        barrier();
        float dot = 0.0, y = 0.0;
        for (uint i = 0u; i < S; i++) {
            st[i] *= v2[kda ? i : 0u];
            dot += st[i] * v1[i];
        }
        uint x = (tok * H + h) * S + me;
        float delta = P_f32[pc.w[4] + tok * H + h] * (C_f32[pc.w[2] + x] - dot);
        for (uint i = 0u; i < S; i++) {
            st[i] += v1[i] * delta;
            y += st[i] * v0[i];
        }
        d_f32[pc.w[W_D] + x] = y * scale;
        uint slot = T - 1u - t;
        if (slot < pc.w[W_K]) for (uint i = 0u; i < S; i++) d_f32[slot0 + slot * block + i] = st[i];
    }
    if (t1 < T || T == 0u) for (uint i = 0u; i < S; i++) d_f32[slot0 + i] = st[i];
}

void main() {
    if (OP == 3u) delta_net();
    else linear();
}
