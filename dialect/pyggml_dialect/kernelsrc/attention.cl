/* FLASH_ATTN_EXT: one work-group of WG lanes per (query row, head, batch) and split of the keys. A split's keys are
 * visited in chunks of WG (one key per lane for the score) with an online softmax taken a chunk at a time: the
 * chunk's largest score raises the running maximum M once, the keys' weights exp(s - M) pass through local memory,
 * and each lane accumulates the output dims e = lane, lane + WG, ... (at most DMAX of them) and its own part of the
 * denominator. With one split (prompts: many query rows) the work-group writes the output; with several (decode at
 * long contexts, where (query row, head) pairs are too few to fill a device) each work-group writes its split's
 * record (maximum, denominator, unnormalised values) to the scratch and k_flash_attn_merge joins the records.
 * A masked key (-inf) is never read: its weight is 0 and its value row is skipped, so garbage (NaN) in masked cells
 * changes nothing. Defines: TK, TV (k / v types), TM (mask type), WG, DMAX. */
#include "kquants.h"
#include "reduce.h"

#define DVL ((DMAX + WG - 1) / WG)
#define REC(dv) ((dv) + 2) /* floats of a split's record: maximum, denominator, dv values */

/* the record of split sp of (query row iq, head h, batch bq) in the scratch `part` */
INLINE GLOBAL float *split_record(GLOBAL char *part, i64 iq, i64 h, i64 bq, i64 sp, i64 n_q, i64 n_head,
                                  i64 n_split, i64 dv) {
    return (GLOBAL float *)part + (((bq * n_head + h) * n_q + iq) * n_split + sp) * REC(dv);
}

/* the output row `out` (elements nb0 bytes apart) from the maximum M, the denominator S and the unnormalised values
 * acc: the sink (has_sinks) joins the softmax as one more score without a value */
INLINE void write_out(GLOBAL char *out, i64 nb0, i64 dv, i32 has_sinks, float sink, float M, float S, float *acc) {
    i32 l = LID(0);
    if (has_sinks) {
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
        if (e < dv) store_f32(out + e * nb0, acc[t] * inv);
    }
}

KERNEL void k_flash_attn(TENSOR(q), TENSOR(k), TENSOR(v), TENSOR(m), TENSOR(s), TENSOR(d), GLOBAL char *part_p,
                         i64 part_off, i32 n_split, float scale, float max_bias, float softcap, i32 has_mask,
                         i32 has_sinks, i32 n_head_log2, float m0, float m1) {
    LOCAL float qs[DMAX];
    LOCAL float w[WG];   /* the chunk's weights exp(s - M) (0: masked) */
    LOCAL float red[WG]; /* the work-group reductions' */
    i32 l = LID(0);
    i64 iq = GRP(0) / n_split, sp = GRP(0) % n_split, h = GID(1), bq = GID(2);
    i64 hk = h / (q_ne2 / k_ne2), bk = bq / (q_ne3 / k_ne3);
    i64 n_kv = k_ne1, dk = q_ne0, dv = v_ne0;
    i64 chunks = (n_kv + WG - 1) / WG;
    i64 kb = chunks * sp / n_split * WG, ke = chunks * (sp + 1) / n_split * WG;
    if (ke > n_kv) ke = n_kv;
    if (softcap != 0.f) scale /= softcap;
    for (i64 e = l; e < dk; e += WG) qs[e] = load_f32(AT(q, e, iq, h, bq));
    BARRIER();
    float slope = has_mask ? alibi_slope(h, max_bias, n_head_log2, m0, m1) : 0.f;
    float M = -INFINITY_F, S = 0.f; /* M: the running maximum (the same in every lane); S: this lane's keys' part */
    float acc[DVL];
    for (i32 t = 0; t < DVL; t++) acc[t] = 0.f;
    for (i64 c0 = kb; c0 < ke; c0 += WG) {
        i64 j = c0 + l;
        float sj = -INFINITY_F;
        if (j < ke) {
            float mv = has_mask ? slope * LOADT(TM, AT(m, j, iq, h % m_ne2, bq % m_ne3)) : 0.f;
            if (mv != -INFINITY_F) {
                GLOBAL const char *krow = AT(k, 0, j, hk, bk);
                float dot = 0.f;
                for (i64 e = 0; e < dk; e++) dot += qs[e] * ELEM(TK, krow, e);
                sj = dot * scale;
                if (softcap != 0.f) sj = softcap * pg_tanh(sj);
                sj += mv;
            }
        }
        /* a NaN score counts as +inf here (FMAX would pass it over): the row's weights and values turn NaN, as
           ggml's, also where it is the only key a query sees */
        float mx = FMAX(M, wg_max(sj != sj ? INFINITY_F : sj, red));
        if (mx == -INFINITY_F) continue; /* every key so far masked (the same in every lane) */
        float r = EXP(M - mx);           /* 0 while M is -inf */
        float wj = sj == -INFINITY_F ? 0.f : EXP(sj - mx);
        w[l] = wj;
        S = S * r + wj;
        M = mx;
        BARRIER();
        i32 n = ke - c0 < WG ? (i32)(ke - c0) : WG;
        for (i32 t = 0; t < DVL; t++) acc[t] *= r;
        for (i32 jj = 0; jj < n; jj++) {
            float a = w[jj];
            if (a == 0.f) continue;
            GLOBAL const char *vrow = AT(v, 0, c0 + jj, hk, bk);
            for (i32 t = 0; t < DVL; t++) {
                i64 e = l + (i64)t * WG;
                if (e < dv) acc[t] += ELEM(TV, vrow, e) * a;
            }
        }
        BARRIER();
    }
    S = wg_sum(S, red);
    if (n_split == 1) {
        write_out(AT(d, 0, h, iq, bq), d_nb0, dv, has_sinks, has_sinks ? load_f32(BASE(s) + h * s_nb0) : 0.f, M, S,
                  acc);
        return;
    }
    GLOBAL float *rec = split_record(part_p + part_off, iq, h, bq, sp, q_ne1, q_ne2, n_split, dv);
    if (l == 0) {
        rec[0] = M;
        rec[1] = S;
    }
    for (i32 t = 0; t < DVL; t++) {
        i64 e = l + (i64)t * WG;
        if (e < dv) rec[2 + e] = acc[t];
    }
}

/* the output of (query row GRP(0), head, batch) from its n_split records: each record's denominator and values
 * scaled from its maximum down to the largest one (a record whose keys were all masked adds nothing) */
KERNEL void k_flash_attn_merge(TENSOR(s), TENSOR(d), GLOBAL char *part_p, i64 part_off, i32 n_split,
                               i32 has_sinks) {
    i32 l = LID(0);
    i64 iq = GRP(0), h = GID(1), bq = GID(2), dv = d_ne0;
    GLOBAL const float *rec = split_record(part_p + part_off, iq, h, bq, 0, d_ne2, d_ne1, n_split, dv);
    float M = -INFINITY_F, S = 0.f;
    for (i32 sp = 0; sp < n_split; sp++) M = FMAX(M, rec[sp * REC(dv)]);
    float acc[DVL];
    for (i32 t = 0; t < DVL; t++) acc[t] = 0.f;
    for (i32 sp = 0; sp < n_split; sp++) {
        GLOBAL const float *r = rec + sp * REC(dv);
        if (r[0] == -INFINITY_F) continue;
        float f = EXP(r[0] - M);
        S += r[1] * f;
        for (i32 t = 0; t < DVL; t++) {
            i64 e = l + (i64)t * WG;
            if (e < dv) acc[t] += r[2 + e] * f;
        }
    }
    write_out(AT(d, 0, h, iq, bq), d_nb0, dv, has_sinks, has_sinks ? load_f32(BASE(s) + h * s_nb0) : 0.f, M, S, acc);
}
