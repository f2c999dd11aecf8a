/* Writing ggml's 256-element K block types (SET_ROWS / CPY into Q2_K .. Q6_K): ggml's reference quantisers with
 * their weighted least-squares scale searches, byte for byte with pyggml.quants. One text for every C-family
 * backend: the cpu plugin calls quantize_T block by block, the OpenCL and CUDA kernels through QUANTIZE_BLOCK.
 *
 * QUANTIZE_BLOCK(T, b, x) quantises the 256 floats x (private memory) into the block at b; one work-item does a
 * whole super-block. Every float operation is written in the reference's order and contraction is off (the
 * dialect's pragma, nvcc --fmad=false, gcc -ffp-contract=off), so each rounding is the reference's. fp16 scales are
 * stored into the block and read back, which rounds them exactly as the reference's FP16_TO_F32(F32_TO_FP16(v)).
 * A super-block holding a NaN or an infinity becomes quantize.h's pg_nan_block (NaN d, and dmin where there is one).
 * Byte layouts:
 *   q2_K  u8 scales[16]; u8 qs[64]; half d, dmin                         (84 bytes)
 *   q3_K  u8 hmask[32]; u8 qs[64]; u8 scales[12]; half d                  (110)
 *   q4_K  half d, dmin; u8 scales[12]; u8 qs[128]                         (144)
 *   q5_K  half d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]              (176)
 *   q6_K  u8 ql[128]; u8 qh[64]; i8 scales[16]; half d                    (210) */
#ifndef PYGGML_KQUANTIZE_H
#define PYGGML_KQUANTIZE_H
#include "quantize.h"

#define PG_GROUP_MAX_EPS 1e-15f

/* the value with the largest magnitude (the first one on ties; +0 when all are zero) */
INLINE float pg_signed_absmax(const float *x, i32 n) {
    float amax = 0.f, mx = 0.f;
    for (i32 i = 0; i < n; i++) {
        if (FABS(x[i]) > amax) { amax = FABS(x[i]); mx = x[i]; }
    }
    return mx;
}

/* fp16 store then load: the block's scale as the reference reads it back */
INLINE float pg_put_half(GLOBAL u8 *p, float v) {
    STORE_HALF(p, 0, v);
    return LOAD_HALF(p, 0);
}

/* make_qkx2_quants: asymmetric (scale, min) search over n <= 32 values; returns the scale, *neg_min = -min and
 * L in [0, nmax]; Laux is scratch of n bytes */
INLINE float pg_qkx2(i32 n, i32 nmax, const float *x, const float *w, u8 *L, float *neg_min, u8 *Laux,
                     float rmin, float rdelta, i32 nstep, i32 use_mad) {
    float mn = x[0], mx = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (i32 i = 1; i < n; i++) {
        if (x[i] < mn) mn = x[i];
        if (x[i] > mx) mx = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (mn > 0.f) mn = 0.f;
    if (mx == mn) {
        for (i32 i = 0; i < n; i++) L[i] = 0;
        *neg_min = -mn;
        return 0.f;
    }
    float iscale = (float)nmax / (mx - mn), scale = 1.f / iscale, best = 0.f;
    for (i32 i = 0; i < n; i++) {
        L[i] = (u8)pg_clampi(pg_nearest_int(iscale * (x[i] - mn)), 0, nmax);
        float diff = scale * (float)L[i] + mn - x[i];
        best += w[i] * (use_mad ? FABS(diff) : diff * diff);
    }
    for (i32 is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (mx - mn);
        float sum_l = 0.f, sum_l2 = 0.f, sum_xl = 0.f;
        for (i32 i = 0; i < n; i++) {
            i32 l = pg_clampi(pg_nearest_int(iscale * (x[i] - mn)), 0, nmax);
            Laux[i] = (u8)l;
            sum_l += w[i] * (float)l;
            sum_l2 += w[i] * (float)l * (float)l;
            sum_xl += w[i] * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0.f) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0.f) {
                this_min = 0.f;
                this_scale = sum_xl / sum_l2;
            }
            float cur = 0.f;
            for (i32 i = 0; i < n; i++) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                cur += w[i] * (use_mad ? FABS(diff) : diff * diff);
            }
            if (cur < best) {
                for (i32 i = 0; i < n; i++) L[i] = Laux[i];
                best = cur;
                scale = this_scale;
                mn = this_min;
            }
        }
    }
    *neg_min = -mn;
    return scale;
}

/* the symmetric searches' levels at iscale: l = nearest_int(iscale * x) in [-nmax, nmax), written to L as
 * l + bias, and their sums with weights x^2: *sumlx = sum w x l, *suml2 = sum w l l */
INLINE void pg_sym_levels(i32 n, i32 nmax, const float *x, float iscale, i8 *L, i32 bias, float *sumlx,
                          float *suml2) {
    float slx = 0.f, sl2 = 0.f;
    for (i32 i = 0; i < n; i++) {
        i32 l = pg_clampi(pg_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (i8)(l + bias);
        float w = x[i] * x[i];
        slx += w * x[i] * (float)l;
        sl2 += w * (float)l * (float)l;
    }
    *sumlx = slx;
    *suml2 = sl2;
}

/* make_qx_quants with rmse type 1 (weights x^2): symmetric search of 19 scales over n <= 32 values; L in
 * [0, 2 * nmax) */
INLINE float pg_qx_rmse1(i32 n, i32 nmax, const float *x, i8 *L) {
    float mx = pg_signed_absmax(x, n), sumlx, suml2;
    if (FABS(mx) < PG_GROUP_MAX_EPS) {
        for (i32 i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    pg_sym_levels(n, nmax, x, (float)(-nmax) / mx, L, nmax, &sumlx, &suml2);
    float scale = suml2 != 0.f ? sumlx / suml2 : 0.f, best = scale * sumlx;
    i8 Laux[32];
    for (i32 is = -9; is <= 9; is++) {
        if (is == 0) continue;
        pg_sym_levels(n, nmax, x, -((float)nmax + 0.1f * (float)is) / mx, Laux, nmax, &sumlx, &suml2);
        if (suml2 > 0.f && sumlx * sumlx > best * suml2) {
            for (i32 i = 0; i < n; i++) L[i] = Laux[i];
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* make_q3_quants with its rmse refinement: coordinate descent over the elements (up to 5 passes); L in
 * [0, 2 * nmax) */
INLINE float pg_q3_search(i32 n, i32 nmax, const float *x, i8 *L) {
    float mx = pg_signed_absmax(x, n), sumlx, suml2;
    if (FABS(mx) < PG_GROUP_MAX_EPS) {
        for (i32 i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    pg_sym_levels(n, nmax, x, (float)(-nmax) / mx, L, 0, &sumlx, &suml2);
    for (i32 pass = 0; pass < 5; pass++) {
        i32 changed = 0;
        for (i32 i = 0; i < n; i++) {
            float w = x[i] * x[i], slx = sumlx - w * x[i] * (float)L[i];
            if (slx > 0.f) {
                float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                i32 nl = pg_clampi(pg_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (nl != L[i]) {
                    slx += w * x[i] * (float)nl;
                    sl2 += w * (float)nl * (float)nl;
                    if (sl2 > 0.f && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (i8)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (i32 i = 0; i < n; i++) L[i] = (i8)(L[i] + nmax);
    return suml2 > 0.f ? sumlx / suml2 : 0.f;
}

/* four 2-bit planes of each 128 values into 32 bytes: value l + 32k in bits 2k of byte l */
INLINE void pg_pack2(const u8 *L, GLOBAL u8 *q) {
    for (i32 j = 0; j < 256; j += 128) {
        for (i32 l = 0; l < 32; l++) {
            q[j / 4 + l] = (u8)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
        }
    }
}

INLINE void quantize_q2_K(GLOBAL char *blk, const float *x) {
    if (pg_nan_block(blk, x, 256, 84, 80, 2)) return;
    GLOBAL u8 *y = (GLOBAL u8 *)blk;   /* scales[16] | qs[64] | d | dmin */
    u8 L[256], Laux[16], sc[16];
    float w[16], mins[16], scales[16], max_scale = 0.f, max_min = 0.f;
    for (i32 j = 0; j < 16; j++) {
        for (i32 l = 0; l < 16; l++) w[l] = FABS(x[16 * j + l]);
        scales[j] = pg_qkx2(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, 1);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float d = 0.f, dmin = 0.f;
    if (max_scale > 0.f) {
        float is = 15.f / max_scale;
        for (i32 j = 0; j < 16; j++) sc[j] = (u8)pg_nearest_int(is * scales[j]);
        d = pg_put_half(y + 80, max_scale / 15.f);
    } else {
        for (i32 j = 0; j < 16; j++) sc[j] = 0;
        d = pg_put_half(y + 80, 0.f);
    }
    if (max_min > 0.f) {
        float is = 15.f / max_min;
        for (i32 j = 0; j < 16; j++) sc[j] |= (u8)(pg_nearest_int(is * mins[j]) << 4);
        dmin = pg_put_half(y + 82, max_min / 15.f);
    } else {
        dmin = pg_put_half(y + 82, 0.f);
    }
    for (i32 j = 0; j < 16; j++) {
        y[j] = sc[j];
        float dj = d * (float)(sc[j] & 15);
        if (dj == 0.f) continue;
        float dm = dmin * (float)(sc[j] >> 4);
        for (i32 l = 0; l < 16; l++) L[16 * j + l] = (u8)pg_clampi(pg_nearest_int((x[16 * j + l] + dm) / dj), 0, 3);
    }
    pg_pack2(L, y + 16);
}

INLINE void quantize_q3_K(GLOBAL char *blk, const float *x) {
    if (pg_nan_block(blk, x, 256, 110, 108, 1)) return;
    GLOBAL u8 *y = (GLOBAL u8 *)blk;   /* hmask[32] | qs[64] | scales[12] | d */
    i8 L[256];
    u8 U[256], sc[12];
    float scales[16];
    for (i32 j = 0; j < 16; j++) scales[j] = pg_q3_search(16, 4, x + 16 * j, L + 16 * j);
    float max_scale = pg_signed_absmax(scales, 16), d;
    for (i32 j = 0; j < 12; j++) sc[j] = 0;
    if (max_scale != 0.f) {
        float iscale = -32.f / max_scale;
        for (i32 j = 0; j < 16; j++) {
            i32 l = pg_clampi(pg_nearest_int(iscale * scales[j]), -32, 31) + 32;
            if (j < 8) sc[j] = (u8)(l & 15);
            else sc[j - 8] |= (u8)((l & 15) << 4);
            sc[j % 4 + 8] |= (u8)((l >> 4) << (2 * (j / 4)));
        }
        d = pg_put_half(y + 108, 1.f / iscale);
    } else {
        d = pg_put_half(y + 108, 0.f);
    }
    for (i32 j = 0; j < 12; j++) y[96 + j] = sc[j];
    for (i32 j = 0; j < 16; j++) {
        float dj = d * (float)pg_q3k_scale(y + 96, j);
        if (dj == 0.f) continue;
        for (i32 l = 0; l < 16; l++) L[16 * j + l] = (i8)(pg_clampi(pg_nearest_int(x[16 * j + l] / dj), -4, 3) + 4);
    }
    u8 hm[32];
    for (i32 j = 0; j < 32; j++) hm[j] = 0;
    for (i32 j = 0; j < 256; j++) {
        i32 v = L[j];
        if (v > 3) {
            hm[j % 32] |= (u8)(1 << (j / 32));
            v -= 4;
        }
        U[j] = (u8)v;
    }
    for (i32 j = 0; j < 32; j++) y[j] = hm[j];
    pg_pack2(U, y + 32);
}

/* Q4_K / Q5_K: eight 32-value sub-blocks with 6-bit scales and mins; writes d, dmin and the 12 scale bytes
 * (y + 0 .. 15) and fills L in [0, nmax] */
INLINE void pg_k4_block(const float *x, i32 nmax, float rmin, i32 nstep, GLOBAL u8 *y, u8 *L) {
    u8 Laux[32], s[12];
    float w[32], mins[8], sc[8], max_scale = 0.f, max_min = 0.f;
    for (i32 j = 0; j < 8; j++) {
        float sum_x2 = 0.f;
        for (i32 l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = SQRT(sum_x2 / 32.f);
        for (i32 l = 0; l < 32; l++) w[l] = av_x + FABS(x[32 * j + l]);
        sc[j] = pg_qkx2(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, 0);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0.f ? 63.f / max_scale : 0.f, inv_min = max_min > 0.f ? 63.f / max_min : 0.f;
    for (i32 j = 0; j < 8; j++) {
        u8 ls = (u8)pg_nearest_int(inv_scale * sc[j]), lm = (u8)pg_nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            s[j] = ls;
            s[j + 4] = lm;
        } else {
            s[j + 4] = (u8)((ls & 15) | ((lm & 15) << 4));
            s[j - 4] |= (u8)((ls >> 4) << 6);
            s[j] |= (u8)((lm >> 4) << 6);
        }
    }
    for (i32 j = 0; j < 12; j++) y[4 + j] = s[j];
    float d = pg_put_half(y, max_scale / 63.f), dmin = pg_put_half(y + 2, max_min / 63.f);
    for (i32 j = 0; j < 8; j++) {
        i32 ls, lm;
        pg_scale_min_k4(j, y + 4, &ls, &lm);
        float dd = d * (float)ls;
        if (dd == 0.f) continue;
        float dm = dmin * (float)lm;
        for (i32 l = 0; l < 32; l++) L[32 * j + l] = (u8)pg_clampi(pg_nearest_int((x[32 * j + l] + dm) / dd), 0, nmax);
    }
}

INLINE void quantize_q4_K(GLOBAL char *blk, const float *x) {
    if (pg_nan_block(blk, x, 256, 144, 0, 2)) return;
    GLOBAL u8 *y = (GLOBAL u8 *)blk;   /* d | dmin | scales[12] | qs[128] */
    u8 L[256];
    pg_k4_block(x, 15, -1.f, 20, y, L);
    for (i32 c = 0; c < 4; c++) {
        for (i32 l = 0; l < 32; l++) y[16 + 32 * c + l] = (u8)(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
    }
}

INLINE void quantize_q5_K(GLOBAL char *blk, const float *x) {
    if (pg_nan_block(blk, x, 256, 176, 0, 2)) return;
    GLOBAL u8 *y = (GLOBAL u8 *)blk;   /* d | dmin | scales[12] | qh[32] | qs[128] */
    u8 L[256], qh[32];
    pg_k4_block(x, 31, -0.5f, 15, y, L);
    for (i32 l = 0; l < 32; l++) qh[l] = 0;
    for (i32 c = 0; c < 4; c++) {
        for (i32 l = 0; l < 32; l++) {
            i32 a = L[64 * c + l], b = L[64 * c + 32 + l];
            if (a > 15) { a -= 16; qh[l] |= (u8)(1 << (2 * c)); }
            if (b > 15) { b -= 16; qh[l] |= (u8)(2 << (2 * c)); }
            y[48 + 32 * c + l] = (u8)(a | (b << 4));
        }
    }
    for (i32 l = 0; l < 32; l++) y[16 + l] = qh[l];
}

INLINE void quantize_q6_K(GLOBAL char *blk, const float *x) {
    if (pg_nan_block(blk, x, 256, 210, 208, 1)) return;
    GLOBAL u8 *y = (GLOBAL u8 *)blk;   /* ql[128] | qh[64] | scales[16] (i8) | d */
    i8 L[256], sc[16];
    float scales[16];
    for (i32 j = 0; j < 16; j++) scales[j] = pg_qx_rmse1(16, 32, x + 16 * j, L + 16 * j);
    float max_scale = pg_signed_absmax(scales, 16);
    if (FABS(max_scale) < PG_GROUP_MAX_EPS) {
        for (i32 j = 0; j < 210; j++) y[j] = 0;
        return;
    }
    float iscale = -128.f / max_scale;
    float d = pg_put_half(y + 208, 1.f / iscale);
    for (i32 j = 0; j < 16; j++) {
        i32 v = pg_nearest_int(iscale * scales[j]);
        sc[j] = (i8)(v < 127 ? v : 127);
        y[192 + j] = (u8)sc[j];
    }
    for (i32 j = 0; j < 16; j++) {
        float dj = d * (float)sc[j];
        if (dj == 0.f) continue;
        for (i32 l = 0; l < 16; l++) L[16 * j + l] = (i8)(pg_clampi(pg_nearest_int(x[16 * j + l] / dj), -32, 31) + 32);
    }
    for (i32 h = 0; h < 2; h++) {
        const i8 *Lh = L + 128 * h;
        GLOBAL u8 *ql = y + 64 * h, *qh = y + 128 + 32 * h;
        for (i32 l = 0; l < 32; l++) {
            ql[l] = (u8)((Lh[l] & 15) | ((Lh[l + 64] & 15) << 4));
            ql[l + 32] = (u8)((Lh[l + 32] & 15) | ((Lh[l + 96] & 15) << 4));
            qh[l] = (u8)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
        }
    }
}

#endif
