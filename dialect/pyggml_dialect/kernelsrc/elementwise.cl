/* Element-wise kernels: binary with ggml broadcasting, unary math (op code), GLU, converting copy.
 * Specialised by T0 (src0 type), T1 (src1 type), TD (dst type); UOP_* / GLU_* / BIN_* codes are prepended by
 * the host from its one op-code table. One work-item per destination element. */
#include "common.h"
#include "act_ext.h"
#include "activations.h"

INLINE float pg_hardswish(float x) {
    return x == -INFINITY_F ? 0.f : x * FMIN(1.f, FMAX(0.f, (x + 3.f) / 6.f));
}

INLINE float pg_unary(i32 op, float x, float p0, float p1, float p2, float p3) {
    switch (op) {
        case UOP_ABS: return FABS(x);
        case UOP_SGN: return x > 0.f ? 1.f : (x < 0.f ? -1.f : 0.f);
        case UOP_NEG: return -x;
        case UOP_STEP: return x > 0.f ? 1.f : 0.f;
        case UOP_TANH: return pg_tanh(x);
        case UOP_ELU: return x > 0.f ? x : EXP(x) - 1.f;
        case UOP_RELU: return x > 0.f ? x : 0.f;
        case UOP_SIGMOID: return pg_sigmoid(x);
        case UOP_GELU: return pg_gelu(x);
        case UOP_GELU_QUICK: return pg_gelu_quick(x);
        case UOP_GELU_ERF: return pg_gelu_erf(x);
        case UOP_SILU: return pg_silu(x);
        case UOP_HARDSWISH: return pg_hardswish(x);
        case UOP_HARDSIGMOID: return FMIN(1.f, FMAX(0.f, (x + 3.f) / 6.f));
        case UOP_EXP: return EXP(x);
        case UOP_SOFTPLUS: return x > 20.f ? x : LOG(1.f + EXP(x));
        case UOP_FLOOR: return FLOOR(x);
        case UOP_CEIL: return CEIL(x);
        case UOP_ROUND: return ROUND(x);
        case UOP_TRUNC: return TRUNC(x);
        case UOP_EXPM1: return pg_expm1(x);
        case UOP_XIELU: return pg_xielu(x, p0, p1, p2, p3);
        case UOP_SQR: return x * x;
        case UOP_SQRT: return SQRT(x);
        case UOP_LOG: return LOG(x);
        case UOP_SIN: return SIN(x);
        case UOP_COS: return COS(x);
        case UOP_SCALE: return x * p0 + p1;
        case UOP_CLAMP: { float t = x < p1 ? x : p1; return t > p0 ? t : p0; } /* C comparisons: NaN gives max */
        case UOP_LEAKY_RELU: return (x > 0.f ? x : 0.f) + p0 * (x < 0.f ? x : 0.f); /* ggml's: NaN gives 0 */
        case UOP_FILL: return p0;
        default: return NAN;
    }
}

KERNEL void k_unary(TENSOR(a), TENSOR(d), i32 op, float p0, float p1, float p2, float p3) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    float x = LOADT(T0, AT(a, i0, i1, i2, i3));
    STORET(TD, AT(d, i0, i1, i2, i3), pg_unary(op, x, p0, p1, p2, p3));
}

KERNEL void k_binary(TENSOR(a), TENSOR(b), TENSOR(d), i32 op) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    float x = LOADT(T0, AT(a, i0, i1, i2, i3));
    float y = LOADT(T1, AT(b, i0 % b_ne0, i1 % b_ne1, i2 % b_ne2, i3 % b_ne3));
    float r;
    switch (op) {
        case BIN_ADD: r = x + y; break;
        case BIN_SUB: r = x - y; break;
        case BIN_MUL: r = x * y; break;
        default: r = x / y; break;
    }
    STORET(TD, AT(d, i0, i1, i2, i3), r);
}

INLINE float pg_glu(i32 op, float x, float g, float p0, float p1) {
    switch (op) {
        case GLU_REGLU: return (x > 0.f ? x : 0.f) * g;
        case GLU_GEGLU: return pg_gelu(x) * g;
        case GLU_SWIGLU: return pg_silu(x) * g;
        case GLU_GEGLU_ERF: return pg_gelu_erf(x) * g;
        case GLU_GEGLU_QUICK: return pg_gelu_quick(x) * g;
        case GLU_SWIGLU_OAI: return pg_swiglu_oai(x, g, p0, p1);
        case GLU_SWIGLU_CLAMP: return pg_swiglu_clamp(x, g, p1);
        default: return NAN;
    }
}

/* p0, p1: SWIGLU_OAI's alpha and limit (SWIGLU_CLAMP's limit in p1) */
/* fused (split == 0): a row holds [first half | second half], the activation reads the first (the second when
 * swapped); split: act(a) * b (act(b) * a when swapped). T0 is the type of a and b. */
KERNEL void k_glu(TENSOR(a), TENSOR(b), TENSOR(d), i32 op, i32 swapped, i32 split, float p0, float p1) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    float x, g;
    if (split) {
        x = LOADT(T0, AT(a, i0, i1, i2, i3));
        g = LOADT(T0, AT(b, i0, i1, i2, i3));
    } else {
        x = LOADT(T0, AT(a, i0 + (swapped ? d_ne0 : 0), i1, i2, i3));
        g = LOADT(T0, AT(a, i0 + (swapped ? 0 : d_ne0), i1, i2, i3));
    }
    if (split && swapped) { float t = x; x = g; g = t; }
    STORET(TD, AT(d, i0, i1, i2, i3), pg_glu(op, x, g, p0, p1));
}

/* dst element with linear index i (over dst's ne) <- src element with the same linear index (over src's ne) */
KERNEL void k_cpy(TENSOR(a), TENSOR(d)) {
    i64 i = GID(0);
    if (i >= NEL(d)) return;
    UNRAVEL(d, i, i0, i1, i2, i3);
    UNRAVEL(a, i, j0, j1, j2, j3);
#if RAWCOPY
    copy_bytes(AT(d, i0, i1, i2, i3), AT(a, j0, j1, j2, j3), TSZ(TD));
#else
    STORET(TD, AT(d, i0, i1, i2, i3), LOADT(T0, AT(a, j0, j1, j2, j3)));
#endif
}
