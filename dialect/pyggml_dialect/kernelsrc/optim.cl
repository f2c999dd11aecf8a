/* Optimiser steps, in place: OPT_STEP_ADAMW updates the parameter w and its moments m, v; OPT_STEP_SGD updates w.
 * One work-item per element of w (f32, any strides). The hyper-parameters come from a contiguous f32 tensor on the
 * device (src 4 / src 2): they change every step (AdamW's bias corrections) while the launch stays the same, so a
 * recorded plan replays. The destination is a view of w, so w is read and written through d, element by element. */
#include "common.h"

#define HP(k) ((GLOBAL const float *)BASE(hp))[k]

/* hp = [alpha, beta1, beta2, eps, wd, beta1h, beta2h] (ggml_opt_step_adamw's order); decoupled weight decay:
 * w <- w (1 - alpha wd) - alpha (m beta1h) / (sqrt(v beta2h) + eps), in the cpu kernels' order of roundings */
KERNEL void k_opt_step_adamw(TENSOR(g), TENSOR(m), TENSOR(v), TENSOR(hp), TENSOR(d)) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    float alpha = HP(0), beta1 = HP(1), beta2 = HP(2), eps = HP(3), wd = HP(4), beta1h = HP(5), beta2h = HP(6);
    float gi = load_f32(AT(g, i0, i1, i2, i3));
    GLOBAL char *mp = AT(m, i0, i1, i2, i3);
    GLOBAL char *vp = AT(v, i0, i1, i2, i3);
    GLOBAL char *wp = AT(d, i0, i1, i2, i3);
    float mi = load_f32(mp) * beta1 + gi * (1.f - beta1);
    float vi = load_f32(vp) * beta2 + gi * gi * (1.f - beta2);
    store_f32(mp, mi);
    store_f32(vp, vi);
    float mh = mi * beta1h;
    float vh = SQRT(vi * beta2h) + eps;
    store_f32(wp, load_f32(wp) * (1.f - alpha * wd) - alpha * mh / vh);
}

/* hp = [alpha, wd]: w <- w (1 - alpha wd) - alpha g */
KERNEL void k_opt_step_sgd(TENSOR(g), TENSOR(hp), TENSOR(d)) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    float alpha = HP(0), keep = 1.f - HP(0) * HP(1);
    GLOBAL char *wp = AT(d, i0, i1, i2, i3);
    store_f32(wp, load_f32(wp) * keep - alpha * load_f32(AT(g, i0, i1, i2, i3)));
}
