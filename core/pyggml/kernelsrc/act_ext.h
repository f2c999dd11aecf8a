/* Activations with parameters (issue 21): UNARY EXPM1 and XIELU, GLU SWIGLU_OAI and SWIGLU_CLAMP, in the dialect
 * (dialect.h), for the cpu plugin's C, the OpenCL and the CUDA kernels alike. Semantics: docs/op-semantics.md;
 * the numpy reference (pyggml.reference.kernels.unary) is the oracle. Comparisons are written as ggml's C++
 * (std::min(x, hi) is `hi < x ? hi : x`, so a NaN input stays NaN), and the -inf inputs, where the formulas give
 * inf - inf or -inf / inf, return the limits. */
#ifndef PYGGML_ACT_EXT_H
#define PYGGML_ACT_EXT_H

INLINE float pg_expm1(float x) { return EXPM1(x); }

/* xIELU with ggml's stored coefficients (an = beta + softplus(alpha_n), ap = softplus(alpha_p)):
 * x > 0: ap x^2 + b x; else (expm1(min(x, eps)) - x) an + b x; at -inf the limit, +-inf by the sign of an - b */
INLINE float pg_xielu(float x, float an, float ap, float b, float eps) {
    if (x == -INFINITY_F) {
        const float d = an - b;
        return d > 0.f ? INFINITY_F : (d < 0.f ? -INFINITY_F : -an);
    }
    if (x > 0.f) return ap * x * x + b * x;
    return (EXPM1(FMIN(x, eps)) - x) * an + b * x;
}

INLINE float pg_min_hi(float x, float hi) { return hi < x ? hi : x; }
INLINE float pg_clamp_sym(float x, float lim) { return x < -lim ? -lim : (lim < x ? lim : x); }

/* gpt-oss: x' = min(x, limit), g' = clamp(g, -limit, limit): x' sigmoid(alpha x') (g' + 1); x' = -inf with
 * alpha > 0 gives the gate's limit 0 */
INLINE float pg_swiglu_oai(float x, float g, float alpha, float limit) {
    const float xc = pg_min_hi(x, limit);
    const float act = (alpha > 0.f && xc == -INFINITY_F) ? 0.f : xc / (1.f + EXP(-alpha * xc));
    return act * (pg_clamp_sym(g, limit) + 1.f);
}

/* silu(min(x, limit)) * clamp(g, -limit, limit) */
INLINE float pg_swiglu_clamp(float x, float g, float limit) {
    const float xc = pg_min_hi(x, limit);
    const float act = xc == -INFINITY_F ? 0.f : xc / (1.f + EXP(-xc));
    return act * pg_clamp_sym(g, limit);
}

#endif
