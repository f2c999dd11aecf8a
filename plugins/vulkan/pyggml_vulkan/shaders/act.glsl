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
