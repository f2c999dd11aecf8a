// Activation formulas shared by unary.comp and glu.comp (ggml's scalar definitions, in f32).
float sigm(float x) { return 1.0 / (1.0 + exp(-x)); }
// The gated activations (SILU, GELU*, HARDSWISH) give their limit 0 at x = -inf, where x * gate is -inf * 0 = NaN.
bool neg_inf(float x) { return isinf(x) && x < 0.0; }
// x * sigmoid(z), z -> -inf as x -> -inf
float xsig(float x, float z) { return neg_inf(x) ? 0.0 : x * sigm(z); }
// tanh that reaches +-1 on any driver (some build it from exponentials, which overflow to inf / inf): past
// |x| = 10 the correctly rounded float is +-1; NaN fails both comparisons
float tanh_sat(float x) { return x > 10.0 ? 1.0 : (x < -10.0 ? -1.0 : tanh(x)); }
// 0.5 x (1 + tanh(u)) as x * sigmoid(2u): no cancellation where tanh(u) is near -1
float gelu_tanh(float x) { return xsig(x, 1.5957691216057308 * x * (1.0 + 0.044715 * x * x)); }
// erf from the complementary error function's Chebyshev-fitted exponential form (|relative error| < 1.2e-7)
float erf_approx(float x) {
    float a = abs(x);
    float t = 1.0 / (1.0 + 0.5 * a);
    float y = t * exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
              + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
    return x >= 0.0 ? 1.0 - y : y - 1.0;
}
float gelu_erf(float x) { return neg_inf(x) ? 0.0 : 0.5 * x * (1.0 + erf_approx(x * 0.7071067811865476)); }
float hardswish(float x) { return neg_inf(x) ? 0.0 : x * min(1.0, max(0.0, (x + 3.0) / 6.0)); }
// expm1 without exp(x) - 1's cancellation near 0 (Kahan: u = e^x, (u - 1) x / log u, for |x| < 1 only, where
// nothing overflows); GLSL has no expm1
float expm1_k(float x) {
    float u = exp(x);
    if (!(abs(x) < 1.0)) return u - 1.0;
    if (u == 1.0) return x;
    return (u - 1.0) * x / log(u);
}
// UNARY XIELU with ggml's stored coefficients (an = beta + softplus(alpha_n), ap = softplus(alpha_p)); -inf gives
// the limit, +-inf by the sign of an - b (docs/op-semantics.md)
float xielu(float x, float an, float ap, float b, float eps) {
    if (neg_inf(x)) { float d = an - b; return d > 0.0 ? 1.0 / 0.0 : (d < 0.0 ? -1.0 / 0.0 : -an); }
    if (x > 0.0) return ap * x * x + b * x;
    return (expm1_k(x < eps ? x : eps) - x) * an + b * x; // fminf: a NaN x takes eps (and - x keeps NaN)
}
// ggml's std::min(x, hi) and std::clamp(x, -l, l): comparisons only, a NaN x stays NaN
float min_hi(float x, float hi) { return hi < x ? hi : x; }
float clamp_sym(float x, float l) { return x < -l ? -l : (l < x ? l : x); }
// GLU SWIGLU_OAI (gpt-oss): min(x, limit) sigmoid(alpha x') (clamp(g, -limit, limit) + 1)
float swiglu_oai(float x, float g, float alpha, float limit) {
    float xc = min_hi(x, limit);
    float act = (alpha > 0.0 && neg_inf(xc)) ? 0.0 : xc / (1.0 + exp(-alpha * xc));
    return act * (clamp_sym(g, limit) + 1.0);
}
// GLU SWIGLU_CLAMP: silu(min(x, limit)) clamp(g, -limit, limit)
float swiglu_clamp(float x, float g, float limit) {
    float xc = min_hi(x, limit);
    return xsig(xc, xc) * clamp_sym(g, limit);
}
