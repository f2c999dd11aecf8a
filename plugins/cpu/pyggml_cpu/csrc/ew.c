/* Element-wise kernels: binary ops with ggml broadcasting, unary math, GLU, SCALE. Rows are split across
   threads; each row is loaded to float (any float type), transformed, and stored in the dst type. */
#include "pgc.h"

static void load_row(const pgc_node *n, int s, const char *p, float *out, int64_t ne0) {
    int t = n->type[s];
    int64_t nb0 = n->nb[s][0];
    if (t == T_F32 && nb0 == 4) {
        memcpy(out, p, (size_t)ne0 * 4);
        return;
    }
    for (int64_t i = 0; i < ne0; i++) out[i] = pgc_ld(p + i * nb0, t);
}

static void store_row(const pgc_node *n, char *p, const float *v, int64_t ne0) {
    int t = n->type[0];
    int64_t nb0 = n->nb[0][0];
    if (t == T_F32 && nb0 == 4) {
        memcpy(p, v, (size_t)ne0 * 4);
        return;
    }
    for (int64_t i = 0; i < ne0; i++) pgc_st(p + i * nb0, t, v[i]);
}

int pgc_k_binary(const pgc_node *n, const pgc_tctx *c) {
    int64_t nr = pgc_nrows(n, 0), r0, r1;
    pgc_split(nr, c->ith, c->nth, &r0, &r1);
    const int64_t ne0 = n->ne[0][0], ne1 = n->ne[0][1], ne2 = n->ne[0][2];
    const int64_t *bne = n->ne[2];
    float *a = (float *)c->scratch, *b = a + ne0;
    int kind = n->op == PGC_OP_ADD1 ? 0 : n->sub;
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        load_row(n, 1, pgc_ptr(n, 1, 0, i1, i2, i3), a, ne0);
        load_row(n, 2, pgc_ptr(n, 2, 0, i1 % bne[1], i2 % bne[2], i3 % bne[3]), b, bne[0]);
        for (int64_t k = bne[0]; k < ne0; k++) b[k] = b[k % bne[0]];
        switch (kind) {
        case 0: for (int64_t k = 0; k < ne0; k++) a[k] += b[k]; break;
        case 1: for (int64_t k = 0; k < ne0; k++) a[k] -= b[k]; break;
        case 2: for (int64_t k = 0; k < ne0; k++) a[k] *= b[k]; break;
        case 3: for (int64_t k = 0; k < ne0; k++) a[k] /= b[k]; break;
        default: return PGC_E_OP;
        }
        store_row(n, pgc_ptr(n, 0, 0, i1, i2, i3), a, ne0);
    }
    return PGC_OK;
}

static inline float gelu_tanh(float x) {
    const float k = 0.7978845608028654f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(k * x * (1.0f + 0.044715f * x * x)));
}
static inline float gelu_quick(float x) { return x / (1.0f + expf(-1.702f * x)); }
static inline float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f)); }
static inline float silu(float x) { return x / (1.0f + expf(-x)); }

static int apply_unary(int kind, float *a, int64_t ne0, const float *fp) {
    switch (kind) {
    case PGC_U_ABS: for (int64_t k = 0; k < ne0; k++) a[k] = fabsf(a[k]); break;
    case PGC_U_SGN: for (int64_t k = 0; k < ne0; k++) a[k] = a[k] > 0 ? 1.0f : (a[k] < 0 ? -1.0f : 0.0f); break;
    case PGC_U_NEG: for (int64_t k = 0; k < ne0; k++) a[k] = -a[k]; break;
    case PGC_U_STEP: for (int64_t k = 0; k < ne0; k++) a[k] = a[k] > 0 ? 1.0f : 0.0f; break;
    case PGC_U_TANH: for (int64_t k = 0; k < ne0; k++) a[k] = tanhf(a[k]); break;
    case PGC_U_ELU: for (int64_t k = 0; k < ne0; k++) a[k] = a[k] > 0 ? a[k] : expm1f(a[k]); break;
    case PGC_U_RELU: for (int64_t k = 0; k < ne0; k++) a[k] = a[k] > 0 ? a[k] : 0.0f; break;
    case PGC_U_SIGMOID: for (int64_t k = 0; k < ne0; k++) a[k] = 1.0f / (1.0f + expf(-a[k])); break;
    case PGC_U_GELU: for (int64_t k = 0; k < ne0; k++) a[k] = gelu_tanh(a[k]); break;
    case PGC_U_GELU_QUICK: for (int64_t k = 0; k < ne0; k++) a[k] = gelu_quick(a[k]); break;
    case PGC_U_GELU_ERF: for (int64_t k = 0; k < ne0; k++) a[k] = gelu_erf(a[k]); break;
    case PGC_U_SILU: for (int64_t k = 0; k < ne0; k++) a[k] = silu(a[k]); break;
    case PGC_U_HARDSWISH:
        for (int64_t k = 0; k < ne0; k++) a[k] = a[k] * fminf(1.0f, fmaxf(0.0f, (a[k] + 3.0f) / 6.0f));
        break;
    case PGC_U_HARDSIGMOID:
        for (int64_t k = 0; k < ne0; k++) a[k] = fminf(1.0f, fmaxf(0.0f, (a[k] + 3.0f) / 6.0f));
        break;
    case PGC_U_EXP: for (int64_t k = 0; k < ne0; k++) a[k] = expf(a[k]); break;
    case PGC_U_SOFTPLUS: for (int64_t k = 0; k < ne0; k++) a[k] = a[k] > 20.0f ? a[k] : log1pf(expf(a[k])); break;
    case PGC_U_FLOOR: for (int64_t k = 0; k < ne0; k++) a[k] = floorf(a[k]); break;
    case PGC_U_CEIL: for (int64_t k = 0; k < ne0; k++) a[k] = ceilf(a[k]); break;
    case PGC_U_ROUND: for (int64_t k = 0; k < ne0; k++) a[k] = roundf(a[k]); break;
    case PGC_U_TRUNC: for (int64_t k = 0; k < ne0; k++) a[k] = truncf(a[k]); break;
    case PGC_U_SQR: for (int64_t k = 0; k < ne0; k++) a[k] = a[k] * a[k]; break;
    case PGC_U_SQRT: for (int64_t k = 0; k < ne0; k++) a[k] = sqrtf(a[k]); break;
    case PGC_U_LOG: for (int64_t k = 0; k < ne0; k++) a[k] = logf(a[k]); break;
    case PGC_U_SIN: for (int64_t k = 0; k < ne0; k++) a[k] = sinf(a[k]); break;
    case PGC_U_COS: for (int64_t k = 0; k < ne0; k++) a[k] = cosf(a[k]); break;
    default: (void)fp; return PGC_E_OP;
    }
    return PGC_OK;
}

/* UNARY and the one-input math ops; CLAMP (fp: min, max), LEAKY_RELU (fp[0] slope), FILL (fp[0] value) */
int pgc_k_unary(const pgc_node *n, const pgc_tctx *c) {
    int64_t nr = pgc_nrows(n, 0), r0, r1;
    pgc_split(nr, c->ith, c->nth, &r0, &r1);
    const int64_t ne0 = n->ne[0][0], ne1 = n->ne[0][1], ne2 = n->ne[0][2];
    float *a = (float *)c->scratch;
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        if (n->op == PGC_OP_FILL) {
            for (int64_t k = 0; k < ne0; k++) a[k] = n->fp[0];
        } else {
            load_row(n, 1, pgc_ptr(n, 1, 0, i1, i2, i3), a, ne0);
            if (n->op == PGC_OP_CLAMP) {
                for (int64_t k = 0; k < ne0; k++) { /* C comparisons, as ggml: a NaN input gives max */
                    float v = a[k] < n->fp[1] ? a[k] : n->fp[1];
                    a[k] = v > n->fp[0] ? v : n->fp[0];
                }
            } else if (n->op == PGC_OP_LEAKY) {
                for (int64_t k = 0; k < ne0; k++) a[k] = a[k] > 0 ? a[k] : a[k] * n->fp[0];
            } else {
                int rc = apply_unary(n->sub, a, ne0, n->fp);
                if (rc) return rc;
            }
        }
        store_row(n, pgc_ptr(n, 0, 0, i1, i2, i3), a, ne0);
    }
    return PGC_OK;
}

/* GLU: fused (src1 absent: halves of src0's row) or split; ip[0] swapped */
int pgc_k_glu(const pgc_node *n, const pgc_tctx *c) {
    int64_t nr = pgc_nrows(n, 0), r0, r1;
    pgc_split(nr, c->ith, c->nth, &r0, &r1);
    const int64_t nc = n->ne[0][0], ne1 = n->ne[0][1], ne2 = n->ne[0][2];
    const int split = n->data[2] != 0, swapped = n->ip[0];
    float *a = (float *)c->scratch, *b = a + 2 * nc;
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        float *g, *v;
        if (split) {
            load_row(n, 1, pgc_ptr(n, 1, 0, i1, i2, i3), a, nc);
            load_row(n, 2, pgc_ptr(n, 2, 0, i1, i2, i3), b, nc);
            g = swapped ? b : a;
            v = swapped ? a : b;
        } else {
            load_row(n, 1, pgc_ptr(n, 1, 0, i1, i2, i3), a, 2 * nc);
            g = swapped ? a + nc : a;
            v = swapped ? a : a + nc;
        }
        switch (n->sub) {
        case PGC_G_REGLU: for (int64_t k = 0; k < nc; k++) g[k] = (g[k] > 0 ? g[k] : 0.0f) * v[k]; break;
        case PGC_G_GEGLU: for (int64_t k = 0; k < nc; k++) g[k] = gelu_tanh(g[k]) * v[k]; break;
        case PGC_G_SWIGLU: for (int64_t k = 0; k < nc; k++) g[k] = silu(g[k]) * v[k]; break;
        case PGC_G_GEGLU_ERF: for (int64_t k = 0; k < nc; k++) g[k] = gelu_erf(g[k]) * v[k]; break;
        case PGC_G_GEGLU_QUICK: for (int64_t k = 0; k < nc; k++) g[k] = gelu_quick(g[k]) * v[k]; break;
        default: return PGC_E_OP;
        }
        store_row(n, pgc_ptr(n, 0, 0, i1, i2, i3), g, nc);
    }
    return PGC_OK;
}

int pgc_k_scale(const pgc_node *n, const pgc_tctx *c) {
    int64_t nr = pgc_nrows(n, 0), r0, r1;
    pgc_split(nr, c->ith, c->nth, &r0, &r1);
    const int64_t ne0 = n->ne[0][0], ne1 = n->ne[0][1], ne2 = n->ne[0][2];
    const float s = n->fp[0], b = n->fp[1];
    float *a = (float *)c->scratch;
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        load_row(n, 1, pgc_ptr(n, 1, 0, i1, i2, i3), a, ne0);
        for (int64_t k = 0; k < ne0; k++) a[k] = a[k] * s + b;
        store_row(n, pgc_ptr(n, 0, 0, i1, i2, i3), a, ne0);
    }
    return PGC_OK;
}
