/* FLASH_ATTN_EXT: one pass over the keys per query row with an online softmax (running max and sum), so the
   full score matrix is never formed. K/V of any supported type: F16 uses an f16 x f32 dot, quantised K gets the
   query converted to its dot partner, quantised V rows are dequantised. */
#include "pgc.h"
#include "shared.h"
#include "softmax.h" /* pg_online_softmax: the OpenCL and CUDA kernels' too */

float pgc_alibi_slope(float max_bias, int64_t h, int64_t n_head);

int pgc_k_flash_attn(const pgc_node *n, const pgc_tctx *c) {
    const int64_t Dk = n->ne[1][0], n_q = n->ne[1][1], n_head = n->ne[1][2], B = n->ne[1][3];
    const int64_t n_kv = n->ne[2][1], n_head_kv = n->ne[2][2], Bk = n->ne[2][3];
    const int64_t Dv = n->ne[3][0];
    const int tk = n->type[2], tv = n->type[3];
    const int has_mask = n->data[4] != 0, has_sinks = n->data[5] != 0;
    float scale = n->fp[0];
    const float max_bias = n->fp[1], softcap = n->fp[2];
    if (softcap != 0.0f) scale /= softcap;
    const int kq = pgc_blck_size(tk) > 1;
    const int kvt = kq ? pgc_vec_dot_type(tk) : T_F32;
    if (kq && (kvt < 0 || !pgc_S.vec_dot[tk])) return PGC_E_TYPE;

    float *qf = (float *)c->scratch;
    float *acc = qf + Dk, *vrow = acc + Dv;
    char *qq = (char *)(vrow + Dv);

    int64_t u0, u1;
    pgc_split(n_q * n_head * B, c->ith, c->nth, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        int64_t iq1 = u % n_q, iq2 = (u / n_q) % n_head, iq3 = u / (n_q * n_head);
        int64_t ik2 = iq2 / (n_head / n_head_kv), ik3 = iq3 / (B / Bk);
        const char *qp = pgc_ptr(n, 1, 0, iq1, iq2, iq3);
        for (int64_t k = 0; k < Dk; k++) qf[k] = *(const float *)(qp + k * n->nb[1][0]);
        if (kq && pgc_from_float(qf, qq, Dk, kvt)) return PGC_E_TYPE;
        const float slope = pgc_alibi_slope(max_bias, iq2, n_head);
        const char *mp = has_mask ? pgc_ptr(n, 4, 0, iq1, iq2 % n->ne[4][2], iq3 % n->ne[4][3]) : NULL;
        float M = -INFINITY, S = 0.0f;
        for (int64_t d = 0; d < Dv; d++) acc[d] = 0.0f;
        for (int64_t ic = 0; ic < n_kv; ic++) {
            float mv = 0.0f;
            if (mp) {
                mv = n->type[4] == T_F16 ? pgc_fp16_to_fp32(((const uint16_t *)mp)[ic]) : ((const float *)mp)[ic];
                mv *= slope;
                if (mv == -INFINITY) continue;
            }
            const char *kp = pgc_ptr(n, 2, 0, ic, ik2, ik3);
            float s;
            switch (tk) {
            case T_F32: s = pgc_S.dot_f32(Dk, (const float *)kp, qf); break;
            case T_F16: s = pgc_S.dot_f16(Dk, (const uint16_t *)kp, qf); break;
            case T_BF16: s = pgc_S.dot_bf16(Dk, (const uint16_t *)kp, qf); break;
            default: pgc_S.vec_dot[tk](Dk, &s, kp, qq); break;
            }
            s *= scale;
            if (softcap != 0.0f) s = softcap * tanhf(s);
            s += mv;
            float ms, vs;
            M = pg_online_softmax(M, s, &ms, &vs);
            if (ms != 1.0f)
                for (int64_t d = 0; d < Dv; d++) acc[d] *= ms;
            const char *vp = pgc_ptr(n, 3, 0, ic, ik2, ik3);
            if (tv == T_F32 && n->nb[3][0] == 4) {
                const float *vf = (const float *)vp;
                for (int64_t d = 0; d < Dv; d++) acc[d] += vf[d] * vs;
            } else if (tv == T_F16) {
                const uint16_t *vh = (const uint16_t *)vp;
                for (int64_t d = 0; d < Dv; d++) acc[d] += pgc_fp16_to_fp32(vh[d]) * vs;
            } else {
                if (pgc_to_float(vp, vrow, Dv, tv)) return PGC_E_TYPE;
                for (int64_t d = 0; d < Dv; d++) acc[d] += vrow[d] * vs;
            }
            S = S * ms + vs;
        }
        if (has_sinks) {
            float s = *(const float *)((const char *)(uintptr_t)n->data[5] + iq2 * n->nb[5][0]);
            float ms, vs;
            pg_online_softmax(M, s, &ms, &vs);
            if (ms != 1.0f)
                for (int64_t d = 0; d < Dv; d++) acc[d] *= ms;
            S = S * ms + vs;
        }
        const float inv = S == 0.0f ? 0.0f : 1.0f / S;
        char *dp = pgc_ptr(n, 0, 0, iq2, iq1, iq3);
        for (int64_t d = 0; d < Dv; d++) *(float *)(dp + d * n->nb[0][0]) = acc[d] * inv;
    }
    return PGC_OK;
}
