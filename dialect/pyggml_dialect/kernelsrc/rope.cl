/* ROPE, normal (pairs 2j, 2j+1) and NeoX (pairs j, j + n_dims/2) modes, YaRN ramp and frequency factors;
 * ROPE_BACK (sin_sign -1) rotates by minus the angle.
 * One work-item per pair slot j < ceil(ne0 / 2) of a row; slots past n_dims/2 copy two elements.
 * Defines: T0 (src and dst type f32 | f16). corr_lo / corr_hi are YaRN's correction dims from the host. */
#include "common.h"

KERNEL void k_rope(TENSOR(a), TENSOR(pos), TENSOR(ff), TENSOR(d), i32 n_dims, i32 neox, i32 has_ff,
                   float freq_base, float freq_scale, float ext_factor, float attn_factor, float corr_lo,
                   float corr_hi, float sin_sign) {
    i64 slots = (a_ne0 + 1) / 2;
    i64 i = GID(0);
    if (i >= slots * NROWS(a)) return;
    i64 j = i % slots, row = i / slots;
    i64 i1 = row % a_ne1, i2 = (row / a_ne1) % a_ne2, i3 = row / (a_ne1 * a_ne2);
    i64 nhalf = n_dims / 2;
    if (j >= nhalf) {
        i64 e = n_dims + 2 * (j - nhalf);
        for (i64 k = e; k < e + 2 && k < a_ne0; k++) STORET(T0, AT(d, k, i1, i2, i3), LOADT(T0, AT(a, k, i1, i2, i3)));
        return;
    }
    /* angles in acc_t (double where the device has it) */
    acc_t p = (acc_t)*(GLOBAL const i32 *)AT(pos, i2, 0, 0, 0);
    acc_t theta_extrap = p * pow((acc_t)freq_base, (acc_t)-2 * (acc_t)j / (acc_t)n_dims);
    if (has_ff) theta_extrap /= (acc_t)load_f32(AT(ff, j, 0, 0, 0));
    acc_t theta = (acc_t)freq_scale * theta_extrap;
    float mscale = attn_factor;
    if (ext_factor != 0.f) {
        float y = ((float)j - corr_lo) / FMAX(0.001f, corr_hi - corr_lo);
        acc_t mix = (acc_t)((1.f - FMIN(1.f, FMAX(0.f, y))) * ext_factor);
        theta = theta * (1 - mix) + theta_extrap * mix;
        mscale *= 1.f + 0.1f * LOG(1.f / freq_scale);
    }
    float c = (float)(cos(theta) * mscale), s = (float)(sin(theta) * mscale) * sin_sign;
    i64 k0 = neox ? j : 2 * j, k1 = neox ? j + nhalf : 2 * j + 1;
    float x0 = LOADT(T0, AT(a, k0, i1, i2, i3)), x1 = LOADT(T0, AT(a, k1, i1, i2, i3));
    STORET(T0, AT(d, k0, i1, i2, i3), x0 * c - x1 * s);
    STORET(T0, AT(d, k1, i1, i2, i3), x0 * s + x1 * c);
}
