/* The functions Python calls (declared to cffi in _build.py; keep in step). */
#ifndef PGC_API_H
#define PGC_API_H
#include "pgc.h"

/* cdef-begin: _build.py hands the text from here to cdef-end to cffi */
typedef struct pgc_pool pgc_pool;
pgc_pool *pgc_pool_new(int n_threads);
void pgc_pool_free(pgc_pool *p);
int pgc_pool_n_threads(pgc_pool *p);
/* stamps (optional: profiling; NULL: off, no clock read): 2 * n_nodes * n_threads entries, where thread t
   writes node i's kernel start and end (CLOCK_MONOTONIC ns) at [2 * (i * n_threads + t)] and the next slot */
int pgc_graph_compute(pgc_pool *p, const pgc_node *nodes, int n_nodes, int *failed_node, int64_t *stamps);

/* SIMD: features of this CPU (bit mask PGC_F_*, see dot_portable.c), and the kernel level in use
   (0 portable, 1-4 x86-64 AVX2 .. AVX-512 + VNNI, 5-6 arm64 NEON, + SDOT; see dot_portable.c) */
int pgc_cpu_features(void);
int pgc_simd_level(void);
int pgc_set_simd_level(int level); /* 0 forces the portable kernels; returns the level now in use */

/* row conversions (tests and CPY helpers) */
int pgc_quantize_rows(int type, const float *src, void *dst, int64_t nrows, int64_t ne0);
int pgc_dequantize_rows(int type, const void *src, float *dst, int64_t nrows, int64_t ne0);
int pgc_vec_dot(int type, int64_t n, const void *x, const void *y, float *out);
/* the R8 weight layout (repack.h) of Q4_0 / Q4_1 / Q8_0 / Q4_K / Q5_K / Q6_K rows: from plain (to_plain 0) or back (1); nrows % 8 == 0 */
int pgc_repack_r8(int type, const void *src, void *dst, int64_t nrows, int64_t ne0, int to_plain);
/* whether the kernel level in use has a SIMD R8 kernel for type (else R8 runs the portable one, slower than the
   level's plain kernels: the cpu_repack buffer type then takes no weights) */
int pgc_r8_simd(int type);
/* R8 rows x ny activation rows (already the weight type's dot partner, packed) into out[c * nrows + r], as many
   groups and columns a kernel call as a matmul passes (tests) */
int pgc_r8_matmul(int type, const void *x, int64_t nrows, int64_t k, const void *y, int64_t ny, float *out);

/* memory read bandwidth in bytes/s: n_threads stream `bytes` of buf at once, best of reps (-1 on bad input) */
double pgc_read_bandwidth(const void *buf, size_t bytes, int n_threads, int reps);

/* BLAS: load an OpenBLAS-style library (returns 0 or -1), is one loaded */
int pgc_blas_load(const char *path, const char *sgemm_symbol, const char *set_threads_symbol);
int pgc_blas_loaded(void);
void pgc_blas_set_threads(int n);
/* cdef-end */

enum { PGC_F_SSE3 = 1, PGC_F_AVX = 2, PGC_F_AVX2 = 4, PGC_F_FMA = 8, PGC_F_F16C = 16, PGC_F_AVX512F = 32,
       PGC_F_AVX512BW = 64, PGC_F_AVX512VNNI = 128, PGC_F_AVXVNNI = 256, PGC_F_AVX512BF16 = 512,
       PGC_F_NEON = 1024, PGC_F_ARM_DOTPROD = 2048, PGC_F_AVX512VL = 4096 };
#endif
