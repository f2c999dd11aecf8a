/* The functions Python calls (declared to cffi in _build.py; keep in step). */
#ifndef PGC_API_H
#define PGC_API_H
#include "pgc.h"

/* cdef-begin: _build.py hands the text from here to cdef-end to cffi */
typedef struct pgc_pool pgc_pool;
pgc_pool *pgc_pool_new(int n_threads);
void pgc_pool_free(pgc_pool *p);
int pgc_pool_n_threads(pgc_pool *p);
/* node_ns (optional, n_nodes entries): nanoseconds each node took, barrier included */
int pgc_graph_compute(pgc_pool *p, const pgc_node *nodes, int n_nodes, int *failed_node, int64_t *node_ns);

/* SIMD: features of this CPU (bit mask PGC_F_*, see dot_portable.c), and the kernel level in use
   (0 portable, 1-4 x86-64 AVX2 .. AVX-512 + VNNI, 5-6 arm64 NEON, + SDOT; see dot_portable.c) */
int pgc_cpu_features(void);
int pgc_simd_level(void);
int pgc_set_simd_level(int level); /* 0 forces the portable kernels; returns the level now in use */

/* row conversions (tests and CPY helpers) */
int pgc_quantize_rows(int type, const float *src, void *dst, int64_t nrows, int64_t ne0);
int pgc_dequantize_rows(int type, const void *src, float *dst, int64_t nrows, int64_t ne0);
int pgc_vec_dot(int type, int64_t n, const void *x, const void *y, float *out);

/* BLAS: load an OpenBLAS-style library (returns 0 or -1), is one loaded */
int pgc_blas_load(const char *path, const char *sgemm_symbol, const char *set_threads_symbol);
int pgc_blas_loaded(void);
void pgc_blas_set_threads(int n);
/* cdef-end */

enum { PGC_F_SSE3 = 1, PGC_F_AVX = 2, PGC_F_AVX2 = 4, PGC_F_FMA = 8, PGC_F_F16C = 16, PGC_F_AVX512F = 32,
       PGC_F_AVX512BW = 64, PGC_F_AVX512VNNI = 128, PGC_F_AVXVNNI = 256, PGC_F_AVX512BF16 = 512,
       PGC_F_NEON = 1024, PGC_F_ARM_DOTPROD = 2048, PGC_F_AVX512VL = 4096 };
#endif
