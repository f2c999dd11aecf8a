/* FLASH_ATTN_EXT: one work-group of WG lanes per (query row, head, batch); keys are visited in chunks of WG
 * (one key per lane for the score), with an online softmax; each lane accumulates the output dims
 * d = lane, lane + WG, ... (at most DMAX dims). Defines: TK, TV (k / v types), TM (mask type), WG, DMAX. */
#include "kquants.h"
#include "reduce.h"

#define DVL ((DMAX + WG - 1) / WG)

KERNEL void k_flash_attn(TENSOR(q), TENSOR(k), TENSOR(v), TENSOR(m), TENSOR(s), TENSOR(d), float scale,
                         float max_bias, float softcap, i32 has_mask, i32 has_sinks, i32 n_head_log2, float m0,
                         float m1) {
    LOCAL float qs[DMAX];
    LOCAL float sc[WG];   /* scores of the chunk's keys (-inf: masked out) */
    LOCAL float fm[WG];   /* per key: factor for the running sums (1 unless the key raised the maximum) */
    LOCAL float fv[WG];   /* per key: weight of its value row (0 for a masked key) */
    i32 l = LID(0);
    i64 iq = GRP(0), h = GID(1), bq = GID(2);
    i64 hk = h / (q_ne2 / k_ne2), bk = bq / (q_ne3 / k_ne3);
    i64 n_kv = k_ne1, dk = q_ne0, dv = v_ne0;
    if (softcap != 0.f) scale /= softcap;
    for (i64 e = l; e < dk; e += WG) qs[e] = load_f32(AT(q, e, iq, h, bq));
    BARRIER();
    float slope = has_mask ? alibi_slope(h, max_bias, n_head_log2, m0, m1) : 0.f;
    /* the online softmax visits keys in order, as a sequential loop would: M the running maximum, S the
     * running denominator; a key above M rescales everything by exp(M_old - s) and gets weight 1 */
    float M = -INFINITY_F, S = 0.f;
    float acc[DVL];
    for (i32 t = 0; t < DVL; t++) acc[t] = 0.f;
    for (i64 c0 = 0; c0 < n_kv; c0 += WG) {
        i64 j = c0 + l;
        float sj = -INFINITY_F;
        i32 keep = 0;
        if (j < n_kv) {
            float mv = has_mask ? slope * LOADT(TM, AT(m, j, iq, h % m_ne2, bq % m_ne3)) : 0.f;
            if (mv != -INFINITY_F) {
                GLOBAL const char *krow = AT(k, 0, j, hk, bk);
                float dot = 0.f;
                for (i64 e = 0; e < dk; e++) dot += qs[e] * ELEM(TK, krow, e);
                sj = dot * scale;
                if (softcap != 0.f) sj = softcap * pg_tanh(sj);
                sj += mv;
                keep = 1;
            }
        }
        sc[l] = keep ? sj : NAN;
        BARRIER();
        i32 n = n_kv - c0 < WG ? (i32)(n_kv - c0) : WG;
        float before = M;   /* running maximum before this lane's key */
        for (i32 jj = 0; jj < l && jj < n; jj++) {
            if (!isnan(sc[jj])) before = FMAX(before, sc[jj]);
        }
        float key_m = 1.f, key_v = 0.f;   /* a masked key changes nothing */
        if (keep) pg_online_softmax(before, sj, &key_m, &key_v);
        fm[l] = key_m;
        fv[l] = key_v;
        BARRIER();
        for (i32 jj = 0; jj < n; jj++) {
            float a_m = fm[jj], a_v = fv[jj];
            if (a_v == 0.f && a_m == 1.f) continue;
            S = S * a_m + a_v;
            for (i32 t = 0; t < DVL; t++) {
                i64 e = l + (i64)t * WG;
                if (e < dv) {
                    if (a_m != 1.f) acc[t] *= a_m;
                    acc[t] += ELEM(TV, AT(v, 0, c0 + jj, hk, bk), e) * a_v;
                }
            }
            if (!isnan(sc[jj])) M = FMAX(M, sc[jj]);
        }
        BARRIER();
    }
    if (has_sinks) {
        float sink = load_f32(BASE(s) + h * s_nb0);
        float a_m, a_v;
        pg_online_softmax(M, sink, &a_m, &a_v);
        if (a_m != 1.f) {
            for (i32 t = 0; t < DVL; t++) acc[t] *= a_m;
        }
        S = S * a_m + a_v;
    }
    float inv = S == 0.f ? 0.f : 1.f / S;
    for (i32 t = 0; t < DVL; t++) {
        i64 e = l + (i64)t * WG;
        if (e < dv) store_f32(AT(d, e, h, iq, bq), acc[t] * inv);
    }
}
