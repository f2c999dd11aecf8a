// Activation formulas shared by unary.comp and glu.comp (ggml's scalar definitions, in f32).
float sigm(float x) { return 1.0 / (1.0 + exp(-x)); }
float gelu_tanh(float x) { return 0.5 * x * (1.0 + tanh(0.7978845608028654 * x * (1.0 + 0.044715 * x * x))); }
// erf from the complementary error function's Chebyshev-fitted exponential form (|relative error| < 1.2e-7)
float erf_approx(float x) {
    float a = abs(x);
    float t = 1.0 / (1.0 + 0.5 * a);
    float y = t * exp(-a * a - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806
              + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))));
    return x >= 0.0 ? 1.0 - y : y - 1.0;
}
float gelu_erf(float x) { return 0.5 * x * (1.0 + erf_approx(x * 0.7071067811865476)); }
