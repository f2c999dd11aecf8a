/* Issue 21's first slice: ADD_ID, and the rows of the parameterised activations (UNARY EXPM1 / XIELU, GLU
   SWIGLU_OAI / SWIGLU_CLAMP) whose per-element math is the shared dialect text act_ext.h (also compiled by the
   OpenCL and CUDA kernels). ew.c loads and stores the rows; these run the math in place on float rows. */
#include "shared.h"
#include "act_ext.h"

/* UNARY sub-ops with parameters, over a float row: fp = (alpha_n, alpha_p, beta, eps) for XIELU */
int pgc_unary_ext(int kind, float *a, int64_t ne0, const float *fp) {
    switch (kind) {
    case PGC_U_EXPM1: for (int64_t k = 0; k < ne0; k++) a[k] = pg_expm1(a[k]); break;
    case PGC_U_XIELU:
        for (int64_t k = 0; k < ne0; k++) a[k] = pg_xielu(a[k], fp[0], fp[1], fp[2], fp[3]);
        break;
    default: return PGC_E_OP;
    }
    return PGC_OK;
}

/* GLU sub-ops with parameters: g = act(g, v) over a float row; fp = (alpha, limit) */
int pgc_glu_ext(int kind, float *g, const float *v, int64_t nc, const float *fp) {
    switch (kind) {
    case PGC_G_SWIGLU_OAI: for (int64_t k = 0; k < nc; k++) g[k] = pg_swiglu_oai(g[k], v[k], fp[0], fp[1]); break;
    case PGC_G_SWIGLU_CLAMP: for (int64_t k = 0; k < nc; k++) g[k] = pg_swiglu_clamp(g[k], v[k], fp[1]); break;
    default: return PGC_E_OP;
    }
    return PGC_OK;
}

/* ADD_ID: dst (slot 0) = a (slot 1) + b (slot 2) row ids[i1, i2] (slot 3, I32); any float types, rows split
   across threads; an id outside [0, b's ne[1]) fails the node */
int pgc_k_add_id(const pgc_node *n, const pgc_tctx *c) {
    const int64_t ne0 = n->ne[0][0], ne1 = n->ne[0][1], ne2 = n->ne[0][2], nrows_b = n->ne[2][1];
    int64_t r0, r1;
    pgc_split(pgc_nrows(n, 0), c->ith, c->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        int32_t id;
        memcpy(&id, pgc_ptr(n, 3, i1, i2, 0, 0), 4);
        if (id < 0 || id >= nrows_b) return PGC_E_INDEX;
        const char *pa = pgc_ptr(n, 1, 0, i1, i2, i3), *pb = pgc_ptr(n, 2, 0, id, 0, 0);
        char *pd = pgc_ptr(n, 0, 0, i1, i2, i3);
        const int ta = n->type[1], tb = n->type[2], td = n->type[0];
        if (ta == T_F32 && tb == T_F32 && td == T_F32 && n->nb[1][0] == 4 && n->nb[2][0] == 4 && n->nb[0][0] == 4) {
            const float *x = (const float *)pa, *y = (const float *)pb;
            float *d = (float *)pd;
            for (int64_t k = 0; k < ne0; k++) d[k] = x[k] + y[k];
            continue;
        }
        for (int64_t k = 0; k < ne0; k++)
            pgc_st(pd + k * n->nb[0][0], td, pgc_ld(pa + k * n->nb[1][0], ta) + pgc_ld(pb + k * n->nb[2][0], tb));
    }
    return PGC_OK;
}
