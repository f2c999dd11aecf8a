/* CPY / SET_ROWS into a block type (and pgc_from_float): ggml's reference quantisers of Q4_0 .. Q8_0 and of the K
   types, from pyggml's shared C-family text (pyggml.kernelsrc quantize.h and kquantize.h: the same functions the
   OpenCL and CUDA kernels compile, here in dialect.h's host-C branch), called block by block. Built without FMA
   contraction (-ffp-contract=off): every float operation rounds as the reference's does. */
#include "quants.h"
#include "kquantize.h"

/* q_T: n floats (whole blocks) into n / NB blocks of type BT */
#define PGC_QUANTIZER(T, BT, NB)                                                                                \
    static void q_##T(const float *x, void *vy, int64_t n) {                                                    \
        for (int64_t i = 0; i < n / (NB); i++) quantize_##T((char *)vy + i * (int64_t)sizeof(BT), x + i * (NB)); \
    }
PGC_QUANTIZER(q4_0, bq4_0, QK)
PGC_QUANTIZER(q4_1, bq4_1, QK)
PGC_QUANTIZER(q5_0, bq5_0, QK)
PGC_QUANTIZER(q5_1, bq5_1, QK)
PGC_QUANTIZER(q8_0, bq8_0, QK)
PGC_QUANTIZER(q2_K, bq2_K, QKK)
PGC_QUANTIZER(q3_K, bq3_K, QKK)
PGC_QUANTIZER(q4_K, bq4_K, QKK)
PGC_QUANTIZER(q5_K, bq5_K, QKK)
PGC_QUANTIZER(q6_K, bq6_K, QKK)

void pgc_quant_shared(pgc_simd *s) {
    s->quantize[T_Q4_0] = q_q4_0;
    s->quantize[T_Q4_1] = q_q4_1;
    s->quantize[T_Q5_0] = q_q5_0;
    s->quantize[T_Q5_1] = q_q5_1;
    s->quantize[T_Q8_0] = q_q8_0;
    s->quantize[T_Q2_K] = q_q2_K;
    s->quantize[T_Q3_K] = q_q3_K;
    s->quantize[T_Q4_K] = q_q4_K;
    s->quantize[T_Q5_K] = q_q5_K;
    s->quantize[T_Q6_K] = q_q6_K;
}
