/* Reductions and orderings: SUM, SUM_ROWS / MEAN, CUMSUM, ARGMAX, COUNT_EQUAL, ARGSORT / TOP_K. */
#include "pgc.h"

#include <math.h>
#include <stdlib.h>

static int reduce_all(const pgc_node *n, const pgc_tctx *c) {
    if (c->ith != 0) return PGC_OK;
    if (n->op == PGC_OP_COUNT_EQUAL) {
        int64_t cnt = 0;
        for (int64_t r = 0; r < pgc_nrows(n, 1); r++) {
            int64_t i1 = r % n->ne[1][1], i2 = (r / n->ne[1][1]) % n->ne[1][2], i3 = r / (n->ne[1][1] * n->ne[1][2]);
            for (int64_t i0 = 0; i0 < n->ne[1][0]; i0++)
                cnt += *(const int32_t *)pgc_ptr(n, 1, i0, i1, i2, i3) == *(const int32_t *)pgc_ptr(n, 2, i0, i1, i2, i3);
        }
        *(int64_t *)(uintptr_t)n->data[0] = cnt;
        return PGC_OK;
    }
    double s = 0.0;
    for (int64_t r = 0; r < pgc_nrows(n, 1); r++) {
        int64_t i1 = r % n->ne[1][1], i2 = (r / n->ne[1][1]) % n->ne[1][2], i3 = r / (n->ne[1][1] * n->ne[1][2]);
        for (int64_t i0 = 0; i0 < n->ne[1][0]; i0++) s += pgc_ld(pgc_ptr(n, 1, i0, i1, i2, i3), n->type[1]);
    }
    pgc_st((char *)(uintptr_t)n->data[0], n->type[0], (float)s);
    return PGC_OK;
}

int pgc_k_reduce(const pgc_node *n, const pgc_tctx *c) {
    if (n->op == PGC_OP_SUM || n->op == PGC_OP_COUNT_EQUAL) return reduce_all(n, c);
    const int64_t ne0 = n->ne[1][0];
    int64_t r0, r1;
    pgc_split(pgc_nrows(n, 1), c->ith, c->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1 = r % n->ne[1][1], i2 = (r / n->ne[1][1]) % n->ne[1][2], i3 = r / (n->ne[1][1] * n->ne[1][2]);
        const char *sp = pgc_ptr(n, 1, 0, i1, i2, i3);
        const int64_t sb = n->nb[1][0];
        if (n->op == PGC_OP_SUM_ROWS) {
            double s = 0.0;
            for (int64_t k = 0; k < ne0; k++) s += *(const float *)(sp + k * sb);
            *(float *)pgc_ptr(n, 0, 0, i1, i2, i3) = (float)(n->sub ? s / ne0 : s);
        } else if (n->op == PGC_OP_CUMSUM) {
            double s = 0.0;
            char *dp = pgc_ptr(n, 0, 0, i1, i2, i3);
            for (int64_t k = 0; k < ne0; k++) {
                s += *(const float *)(sp + k * sb);
                *(float *)(dp + k * n->nb[0][0]) = (float)s;
            }
        } else { /* ARGMAX over a matrix: dst[i1]; the first of the largest, a NaN above every number */
            float best = -INFINITY;
            int32_t bi = 0;
            for (int64_t k = 0; k < ne0; k++) {
                float v = *(const float *)(sp + k * sb);
                if (isnan(v)) { bi = (int32_t)k; break; }
                if (v > best) { best = v; bi = (int32_t)k; }
            }
            *(int32_t *)pgc_ptr(n, 0, i1, 0, 0, 0) = bi;
        }
    }
    return PGC_OK;
}

typedef struct { float v; int32_t i; } vi;

/* the order of values: NaN above every number (+inf included), NaNs equal to each other, as numpy sorts; a total
 * order, so qsort never sees an inconsistent comparator */
static int cmp_val(float a, float b) {
    int an = isnan(a), bn = isnan(b);
    if (an || bn) return an - bn;
    return (a > b) - (a < b);
}

static int cmp_asc(const void *a, const void *b) {
    const vi *x = (const vi *)a, *y = (const vi *)b;
    int r = cmp_val(x->v, y->v);
    return r ? r : (x->i > y->i) - (x->i < y->i);
}

static int cmp_desc(const void *a, const void *b) {
    const vi *x = (const vi *)a, *y = (const vi *)b;
    int r = cmp_val(y->v, x->v);
    return r ? r : (x->i > y->i) - (x->i < y->i);
}

/* ARGSORT (sub 0 asc, 1 desc) and TOP_K (ip[0] = k > 0: the k largest, in descending order) */
int pgc_k_argsort(const pgc_node *n, const pgc_tctx *c) {
    const int64_t ne0 = n->ne[1][0], k = n->ip[0] > 0 ? n->ip[0] : ne0;
    vi *buf = (vi *)c->scratch;
    int desc = n->ip[0] > 0 ? 1 : n->sub;
    int64_t r0, r1;
    pgc_split(pgc_nrows(n, 1), c->ith, c->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1 = r % n->ne[1][1], i2 = (r / n->ne[1][1]) % n->ne[1][2], i3 = r / (n->ne[1][1] * n->ne[1][2]);
        const char *sp = pgc_ptr(n, 1, 0, i1, i2, i3);
        for (int64_t j = 0; j < ne0; j++) {
            buf[j].v = *(const float *)(sp + j * n->nb[1][0]);
            buf[j].i = (int32_t)j;
        }
        qsort(buf, (size_t)ne0, sizeof(vi), desc ? cmp_desc : cmp_asc);
        char *dp = pgc_ptr(n, 0, 0, i1, i2, i3);
        for (int64_t j = 0; j < k; j++) *(int32_t *)(dp + j * n->nb[0][0]) = buf[j].i;
    }
    return PGC_OK;
}
