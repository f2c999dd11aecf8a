/* FLASH_ATTN_EXT: one work-group of WG lanes per (query row, head, batch); keys are visited in chunks of WG
 * (one key per lane for the score), with an online softmax; each lane accumulates the output dims
 * d = lane, lane + WG, ... (at most DMAX dims). Defines: TK, TV (k / v types), TM (mask type), WG, DMAX. */
#include "quants.h"
#include "reduce.h"

#define DVL ((DMAX + WG - 1) / WG)

KERNEL void k_flash_attn(TENSOR(q), TENSOR(k), TENSOR(v), TENSOR(m), TENSOR(s), TENSOR(d), float scale,
                         float max_bias, float softcap, i32 has_mask, i32 has_sinks, i32 n_head_log2, float m0,
                         float m1) {
    LOCAL float qs[DMAX];
    LOCAL float sc[WG];
    i32 l = LID(0);
    i64 iq = GRP(0), h = GID(1), bq = GID(2);
    i64 hk = h / (q_ne2 / k_ne2), bk = bq / (q_ne3 / k_ne3);
    i64 n_kv = k_ne1, dk = q_ne0, dv = v_ne0;
    for (i64 e = l; e < dk; e += WG) qs[e] = load_f32(AT(q, e, iq, h, bq));
    BARRIER();
    float slope = has_mask ? alibi_slope(h, max_bias, n_head_log2, m0, m1) : 0.f;
    float M = -INFINITY_F, L = 0.f;
    float acc[DVL];
    for (i32 t = 0; t < DVL; t++) acc[t] = 0.f;
    for (i64 c0 = 0; c0 < n_kv; c0 += WG) {
        i64 j = c0 + l;
        float sj = -INFINITY_F;
        if (j < n_kv) {
            float mv = has_mask ? slope * LOADT(TM, AT(m, j, iq, h % m_ne2, bq % m_ne3)) : 0.f;
            if (mv != -INFINITY_F) {
                GLOBAL const char *krow = AT(k, 0, j, hk, bk);
                float dot = 0.f;
                for (i64 e = 0; e < dk; e++) dot += qs[e] * ELEM(TK, krow, e);
                sj = dot * scale;
                if (softcap != 0.f) sj = softcap * TANH(sj / softcap);
                sj += mv;
            }
        }
        sc[l] = sj;
        BARRIER();
        i32 n = n_kv - c0 < WG ? (i32)(n_kv - c0) : WG;
        float cmax = -INFINITY_F;
        for (i32 jj = 0; jj < n; jj++) cmax = FMAX(cmax, sc[jj]);
        float newM = FMAX(M, cmax);
        BARRIER();
        if (newM == -INFINITY_F) continue;  /* every key so far masked out: uniform across the group */
        float alpha = EXP(M - newM);
        sc[l] = sj == -INFINITY_F ? 0.f : EXP(sj - newM);
        BARRIER();
        float psum = 0.f;
        for (i32 jj = 0; jj < n; jj++) psum += sc[jj];
        L = L * alpha + psum;
        for (i32 t = 0; t < DVL; t++) {
            i64 e = l + (i64)t * WG;
            if (e < dv) {
                float a = acc[t] * alpha;
                for (i32 jj = 0; jj < n; jj++) {
                    float p = sc[jj];
                    if (p != 0.f) a += p * ELEM(TV, AT(v, 0, c0 + jj, hk, bk), e);
                }
                acc[t] = a;
            }
        }
        M = newM;
        BARRIER();
    }
    if (has_sinks) {
        float sink = load_f32(BASE(s) + h * s_nb0);
        float newM = FMAX(M, sink);
        float alpha = EXP(M - newM);
        L = L * alpha + EXP(sink - newM);
        for (i32 t = 0; t < DVL; t++) acc[t] *= alpha;
    }
    float inv = L == 0.f ? 0.f : 1.f / L;
    for (i32 t = 0; t < DVL; t++) {
        i64 e = l + (i64)t * WG;
        if (e < dv) store_f32(AT(d, e, h, iq, bq), acc[t] * inv);
    }
}
