/* MUL_MAT through an OpenBLAS-style sgemm loaded at run time (dlopen): weights of F16/BF16 are widened to F32
   by all threads, then thread 0 calls sgemm per batch while the library's own threads do the work. */
#include "api.h"
#include "pgc.h"

#include <dlfcn.h>

typedef void (*sgemm32_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                           float *, int);
typedef void (*sgemm64_fn)(int, int, int, int64_t, int64_t, int64_t, float, const float *, int64_t,
                           const float *, int64_t, float, float *, int64_t);
typedef void (*set_threads_fn)(int);

static void *blas_sgemm;
static int blas_int64;
static set_threads_fn blas_threads;

int pgc_blas_load(const char *path, const char *sgemm_symbol, const char *set_threads_symbol) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) return -1;
    void *f = dlsym(h, sgemm_symbol);
    if (!f) return -1;
    blas_sgemm = f;
    size_t l = strlen(sgemm_symbol);
    blas_int64 = l > 2 && strcmp(sgemm_symbol + l - 3, "64_") == 0;
    blas_threads = set_threads_symbol ? (set_threads_fn)dlsym(h, set_threads_symbol) : NULL;
    return 0;
}

int pgc_blas_loaded(void) { return blas_sgemm != NULL; }

void pgc_blas_set_threads(int n) {
    if (blas_threads) blas_threads(n);
}

static int need_a(const pgc_node *n) { return n->type[1] != T_F32; }
static int need_b(const pgc_node *n) { return n->type[2] != T_F32 || n->nb[2][0] != 4; }

size_t pgc_blas_shared(const pgc_node *n) {
    size_t s = 0;
    if (need_a(n)) s += (size_t)pgc_nrows(n, 1) * (size_t)n->ne[1][0] * 4 + 64;
    if (need_b(n)) s += (size_t)pgc_nrows(n, 2) * (size_t)n->ne[2][0] * 4 + 64;
    return s;
}

static void widen(const pgc_node *n, int s, float *dst, const pgc_tctx *c) {
    const int64_t ne0 = n->ne[s][0];
    int64_t r0, r1;
    pgc_split(pgc_nrows(n, s), c->ith, c->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const char *p = pgc_row(n, s, r);
        float *d = dst + r * ne0;
        for (int64_t k = 0; k < ne0; k++) d[k] = pgc_ld(p + k * n->nb[s][0], n->type[s]);
    }
}

int pgc_k_mul_mat_blas(const pgc_node *n, const pgc_tctx *c) {
    if (!blas_sgemm) return PGC_E_BLAS;
    const int64_t K = n->ne[1][0], M = n->ne[1][1], ne02 = n->ne[1][2], ne03 = n->ne[1][3];
    const int64_t N = n->ne[2][1], ne12 = n->ne[2][2], ne13 = n->ne[2][3];
    float *wa = (float *)c->wdata;
    float *wb = need_a(n) ? (float *)(c->wdata + (((size_t)pgc_nrows(n, 1) * K * 4 + 63) & ~(size_t)63)) : wa;
    if (need_a(n)) widen(n, 1, wa, c);
    if (need_b(n)) widen(n, 2, wb, c);
    pgc_barrier(c);
    if (c->ith != 0) return PGC_OK;
    for (int64_t i13 = 0; i13 < ne13; i13++)
        for (int64_t i12 = 0; i12 < ne12; i12++) {
            int64_t i02 = i12 / (ne12 / ne02), i03 = i13 / (ne13 / ne03);
            const float *A, *B;
            int64_t lda, ldb;
            if (need_a(n)) { A = wa + ((i03 * ne02 + i02) * M) * K; lda = K; }
            else { A = (const float *)pgc_ptr(n, 1, 0, 0, i02, i03); lda = n->nb[1][1] / 4; }
            if (need_b(n)) { B = wb + ((i13 * ne12 + i12) * N) * K; ldb = K; }
            else { B = (const float *)pgc_ptr(n, 2, 0, 0, i12, i13); ldb = n->nb[2][1] / 4; }
            float *C = (float *)pgc_ptr(n, 0, 0, 0, i12, i13);
            int64_t ldc = n->nb[0][1] / 4;
            /* C[N x M] = B[N x K] * A[M x K]^T, row-major */
            if (blas_int64)
                ((sgemm64_fn)blas_sgemm)(101, 111, 112, N, M, K, 1.0f, B, ldb, A, lda, 0.0f, C, ldc);
            else
                ((sgemm32_fn)blas_sgemm)(101, 111, 112, (int)N, (int)M, (int)K, 1.0f, B, (int)ldb, A, (int)lda, 0.0f,
                                         C, (int)ldc);
        }
    return PGC_OK;
}
