/* Activations shared by the element-wise kernels (UNARY, GLU) and the mat-vec epilogues of matmul.cl and the CUDA
 * plugin's mmq.cu, which apply a GLU to two products as they store them (one text, so fused and unfused agree to the
 * bit). */
#ifndef PYGGML_ACTIVATIONS_H
#define PYGGML_ACTIVATIONS_H
#include "common.h"

INLINE float pg_sigmoid(float x) { return 1.f / (1.f + EXP(-x)); }
/* x * sigmoid(z), where z -> -inf as x -> -inf (SILU, GELU_QUICK, GELU): one quotient, so a gate below one ulp
 * costs nothing (GELU's 0.5 x (1 + tanh(z / 2)) cancels to garbage when tanh is an ulp off -1: GELU(-1e30) was
 * -3e22 on PoCL), and x = -inf gives the limit 0 instead of -inf / inf = NaN (docs/op-semantics.md). */
INLINE float pg_xsig(float x, float z) { return x == -INFINITY_F ? 0.f : x / (1.f + EXP(-z)); }
INLINE float pg_silu(float x) { return pg_xsig(x, x); }
INLINE float pg_gelu(float x) {
    const float c = 2.f * 0.7978845608028654f; /* 0.5 (1 + tanh(u)) = sigmoid(2u), u = sqrt(2/pi) x (1 + a x^2) */
    return pg_xsig(x, c * x * (1.f + 0.044715f * x * x));
}
INLINE float pg_gelu_erf(float x) {
    return x == -INFINITY_F ? 0.f : 0.5f * x * (1.f + ERF(x * 0.7071067811865476f));
}
INLINE float pg_gelu_quick(float x) { return pg_xsig(x, 1.702f * x); }

/* what a mat-vec kernel does with its product r (and r2, the second weights' product, for the GLUs) as it stores it
 * at d's element (i0, i1, i2, i3): EPI_STORE r; EPI_ADD r + e there (e broadcast over d, as ADD's src1; a residual
 * or a bias); EPI_SWIGLU silu(r) r2, EPI_GEGLU gelu(r) r2 (GLU of two products, the first the gate) */
#define EPI_STORE 0
#define EPI_ADD 1
#define EPI_SWIGLU 2
#define EPI_GEGLU 3
INLINE void store_epilogue(TENSOR(e), TENSOR(d), i64 i0, i64 i1, i64 i2, i64 i3, float r, float r2, i32 epi) {
    if (epi == EPI_ADD) r = r + load_f32(AT(e, i0 % e_ne0, i1 % e_ne1, i2 % e_ne2, i3 % e_ne3));
    else if (epi == EPI_SWIGLU) r = pg_silu(r) * r2;
    else if (epi == EPI_GEGLU) r = pg_gelu(r) * r2;
    store_f32(AT(d, i0, i1, i2, i3), r);
}

#endif
