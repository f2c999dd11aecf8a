#version 450
// SSM_SCAN, the selective scan of Mamba 1 (A [d_state, n_head]) and Mamba 2 (A [1, n_head]), f32. One work group of
// LANES threads per state row (head_dim index, head, sequence); thread l owns state elements l, l + LANES, ... (NS of
// them) in registers and y is a work-group sum per token, so the numbers repeat on every run.
// Inputs are contiguous (the host packs the others into scratch): s (binding 0), x (1), B (2), C (3); dt, A and the
// i32 ids at binding 4. Word offsets (the srcs in ggml's order, then d) and sizes in the push constants (W_* below). d is ggml's 1-D result: y, then
// K state blocks (slot j: the state j tokens before the end). Tokens t_begin .. t_end - 1 run in this dispatch; a
// later chunk starts from the state the previous one left in slot 0 (a CPU-emulated device splits long sequences
// so an invocation keeps within lavapipe's loop limit). An id past the state rows is reported, nothing written.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint LANES = 64u;
layout(constant_id = 1) const uint NS = 1u;
DECLARE_SRC(0, S)
DECLARE_SRC(1, X)
DECLARE_SRC(2, B)
DECLARE_SRC(3, C)
DECLARE_SRC(4, P)
DECLARE_DST(5)
layout(push_constant) uniform PC { uint w[31]; float f3; } pc;
DECLARE_STATUS
DEFINE_REDUCE(LANES)

#define W_S 0
#define W_X 1
#define W_DT 2
#define W_A 3
#define W_B 4
#define W_C 5
#define W_IDS 6
#define W_D 7
#define W_D_STATE 8
#define W_HEAD_DIM 9
#define W_N_HEAD 10
#define W_N_GROUP 11
#define W_N_TOK 12
#define W_N_SEQS 13
#define W_MAMBA1 14
#define W_K 15
#define W_S_ROWS 16
#define W_T_BEGIN 17
#define W_T_END 18

// log(1 + e^x) without losing e^x where it is below float's epsilon (GLSL has no log1p)
float log1p_exp(float x) {
    float e = exp(x);
    float u = 1.0 + e;
    return u == 1.0 ? e : log(u) * (e / (u - 1.0));
}

void main() {
    uint d_state = pc.w[W_D_STATE], head_dim = pc.w[W_HEAD_DIM], n_head = pc.w[W_N_HEAD];
    uint n_tok = pc.w[W_N_TOK], n_seqs = pc.w[W_N_SEQS], n_group = pc.w[W_N_GROUP];
    uint row = wg_id();
    if (row >= head_dim * n_head * n_seqs) return;
    uint l = gl_LocalInvocationID.x;
    uint di = row % head_dim, h = (row / head_dim) % n_head, q = row / (head_dim * n_head);
    uint grp = h / (n_head / n_group);
    int id = P_i32[pc.w[W_IDS] + q];
    if (id < 0 || uint(id) >= pc.w[W_S_ROWS]) { if (l == 0u) report_bad_index(); return; }
    bool mamba1 = pc.w[W_MAMBA1] != 0u;
    uint block = d_state * head_dim * n_head * n_seqs;
    uint base = pc.w[W_D] + head_dim * n_head * n_tok * n_seqs + ((q * n_head + h) * head_dim + di) * d_state;
    uint t0 = pc.w[W_T_BEGIN], t1 = pc.w[W_T_END];
    uint s_row = pc.w[W_S] + ((uint(id) * n_head + h) * head_dim + di) * d_state;
    float st[NS];
    for (uint j = 0u; j < NS; j++) {
        uint n = l + j * LANES;
        st[j] = n >= d_state ? 0.0 : (t0 == 0u ? S_f32[s_row + n] : d_f32[base + n]);
    }
    uint a_row = pc.w[W_A] + h * (mamba1 ? d_state : 1u);
    float a_h = P_f32[a_row];
    for (uint t = t0; t < t1; t++) {
        uint tok = q * n_tok + t;
        float dtv = P_f32[pc.w[W_DT] + tok * n_head + h];
        dtv = dtv > 20.0 ? dtv : log1p_exp(dtv);
        uint xi = (tok * n_head + h) * head_dim + di;
        float xdt = X_f32[pc.w[W_X] + xi] * dtv;
        float decay = exp(dtv * a_h);
        uint bc = (tok * n_group + grp) * d_state;
        float acc = 0.0;
        for (uint j = 0u; j < NS; j++) {
            uint n = l + j * LANES;
            if (n >= d_state) break;
            float da = mamba1 ? exp(dtv * P_f32[a_row + n]) : decay;
            st[j] = st[j] * da + B_f32[pc.w[W_B] + bc + n] * xdt;
            acc += st[j] * C_f32[pc.w[W_C] + bc + n];
        }
        float y = wg_sum(acc);
        if (l == 0u) d_f32[pc.w[W_D] + xi] = y;
        uint slot = n_tok - 1u - t;
        if (slot < pc.w[W_K]) {
            for (uint j = 0u; j < NS; j++) {
                uint n = l + j * LANES;
                if (n < d_state) d_f32[base + slot * block + n] = st[j];
            }
        }
    }
    if (t1 < n_tok || n_tok == 0u) {   // the carry to the next chunk; with no token, the initial state in slot 0
        for (uint j = 0u; j < NS; j++) {
            uint n = l + j * LANES;
            if (n < d_state) d_f32[base + n] = st[j];
        }
    }
}
