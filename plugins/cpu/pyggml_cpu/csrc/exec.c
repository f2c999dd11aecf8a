/* The graph executor: a persistent pthread pool that runs a whole plan of node descriptors in one call,
   with a barrier between nodes and rows split by (ith, nth). */
#define _GNU_SOURCE
#include "pgc.h"
#include "api.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#if defined(__x86_64__)
#include <immintrin.h>
#define PGC_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define PGC_PAUSE() __asm__ __volatile__("yield")
#else
#define PGC_PAUSE() ((void)0)
#endif

struct pgc_pool {
    int n_threads;
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int gen;  /* bumped (under mu) for every graph */
    atomic_int stop;
    int sleepers;    /* workers waiting on cv (under mu) */
    /* the job */
    const pgc_node *nodes;
    int n_nodes;
    char *wdata;
    size_t wcap, shared, per_thread;
    atomic_int bar_count;
    atomic_int bar_phase;
    atomic_int err;
    atomic_int err_node;
    atomic_int active;
    int err_index;
    int64_t *stamps; /* profiling (NULL: off): per node, per thread, the kernel's start and end (ns) */
};

static pgc_kernel kernel_of(int op) {
    switch (op) {
    case PGC_OP_BINARY: case PGC_OP_ADD1: return pgc_k_binary;
    case PGC_OP_UNARY: case PGC_OP_CLAMP: case PGC_OP_LEAKY: case PGC_OP_FILL: case PGC_OP_SCALE: return pgc_k_unary;
    case PGC_OP_GLU: return pgc_k_glu;
    case PGC_OP_NORM: return pgc_k_norm;
    case PGC_OP_GROUP_NORM: return pgc_k_group_norm;
    case PGC_OP_SOFT_MAX: return pgc_k_soft_max;
    case PGC_OP_ROPE: return pgc_k_rope;
    case PGC_OP_DIAG_MASK: return pgc_k_diag_mask;
    case PGC_OP_FLASH_ATTN: return pgc_k_flash_attn;
    case PGC_OP_MUL_MAT: return pgc_k_mul_mat;
    case PGC_OP_MUL_MAT_ID: return pgc_k_mul_mat_id;
    case PGC_OP_OUT_PROD: return pgc_k_out_prod;
    case PGC_OP_MUL_MAT_BLAS: return pgc_k_mul_mat_blas;
    case PGC_OP_CPY: return pgc_k_cpy;
    case PGC_OP_GET_ROWS: return pgc_k_get_rows;
    case PGC_OP_SET_ROWS: return pgc_k_set_rows;
    case PGC_OP_REPEAT: return pgc_k_repeat;
    case PGC_OP_CONCAT: return pgc_k_concat;
    case PGC_OP_PAD: return pgc_k_pad;
    case PGC_OP_SET: return pgc_k_set;
    case PGC_OP_DIAG: return pgc_k_diag;
    case PGC_OP_ARANGE: return pgc_k_arange;
    case PGC_OP_SUM: case PGC_OP_SUM_ROWS: case PGC_OP_CUMSUM: case PGC_OP_ARGMAX: case PGC_OP_COUNT_EQUAL:
        return pgc_k_reduce;
    case PGC_OP_ARGSORT: return pgc_k_argsort;
    case PGC_OP_ADD_ID: return pgc_k_add_id;
    case PGC_OP_REPEAT_BACK: case PGC_OP_SILU_BACK: case PGC_OP_RMS_NORM_BACK: case PGC_OP_GET_ROWS_BACK:
    case PGC_OP_SOFT_MAX_BACK: case PGC_OP_CROSS_ENTROPY_LOSS: case PGC_OP_CROSS_ENTROPY_LOSS_BACK:
    case PGC_OP_OPT_STEP_ADAMW: case PGC_OP_OPT_STEP_SGD: return pgc_k_train;
    case PGC_OP_IM2COL: case PGC_OP_IM2COL_3D: return pgc_k_im2col;
    case PGC_OP_COL2IM_1D: return pgc_k_col2im_1d;
    case PGC_OP_CONV_TRANSPOSE_1D: case PGC_OP_CONV_TRANSPOSE_2D: return pgc_k_conv_transpose;
    case PGC_OP_CONV_2D: case PGC_OP_CONV_3D: return pgc_k_conv;
    case PGC_OP_CONV_2D_DW: return pgc_k_conv_2d_dw;
    case PGC_OP_TRI: return pgc_k_tri;
    case PGC_OP_SOLVE_TRI: return pgc_k_solve_tri;
    case PGC_OP_SSM_CONV: return pgc_k_ssm_conv;
    case PGC_OP_SSM_SCAN: return pgc_k_ssm_scan;
    case PGC_OP_RWKV_WKV6: return pgc_k_rwkv_wkv6;
    case PGC_OP_GLA: return pgc_k_gla;
    case PGC_OP_RWKV_WKV7: return pgc_k_rwkv_wkv7;
    case PGC_OP_GATED_DELTA_NET: return pgc_k_gated_delta_net;
    case PGC_OP_SPATIAL: return pgc_k_spatial;
    case PGC_OP_LIGHTNING_INDEXER: case PGC_OP_DSV4_HC: return pgc_k_deepseek;
    case PGC_OP_IM2COL_BACK: return pgc_k_im2col_back;
    case PGC_OP_POOL_2D_BACK: return pgc_k_pool_2d_back;
    default: return NULL;
    }
}

void pgc_barrier(const pgc_tctx *c) {
    pgc_pool *p = c->pool;
    if (c->nth == 1) return;
    int phase = atomic_load_explicit(&p->bar_phase, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == c->nth - 1) {
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->bar_phase, 1, memory_order_release);
        return;
    }
    int spins = 0;
    while (atomic_load_explicit(&p->bar_phase, memory_order_acquire) == phase) {
        if (++spins < 2000) PGC_PAUSE();
        else sched_yield();
    }
}

/* CLOCK_MONOTONIC: the clock of pyggml.profile (Python's time.monotonic_ns) */
static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void run_nodes(pgc_pool *p, int ith, int nth) {
    pgc_tctx c;
    c.ith = ith;
    c.nth = nth;
    c.wdata = p->wdata;
    c.scratch = p->wdata + p->shared + (size_t)ith * p->per_thread;
    c.pool = p;
    c.err_index = &p->err_index;
    const pgc_node *nodes = p->nodes;
    int n_nodes = p->n_nodes;
    int64_t *stamps = p->stamps ? p->stamps + 2 * ith : NULL; /* this thread's pair of node 0; node i: + 2*nth*i */
    for (int i = 0; i < n_nodes; i++) {
        const pgc_node *n = &nodes[i];
        pgc_kernel k = kernel_of(n->op);
        if (stamps) stamps[2 * (int64_t)nth * i] = now_ns();
        int rc = k ? k(n, &c) : PGC_E_OP;
        if (stamps) stamps[2 * (int64_t)nth * i + 1] = now_ns();
        if (rc) {
            int zero = 0;
            if (atomic_compare_exchange_strong(&p->err, &zero, rc)) atomic_store(&p->err_node, i);
        }
        pgc_barrier(&c);
        if (atomic_load_explicit(&p->err, memory_order_relaxed)) break;
    }
}

typedef struct { pgc_pool *p; int ith; } worker_arg;

/* after a graph a worker polls for the next one this long before it sleeps: back-to-back graphs (a decode
   loop) then start without a wake-up, and an idle pool costs no CPU */
#define PGC_POLL_NS 100000

static void *worker(void *arg) {
    worker_arg *a = (worker_arg *)arg;
    pgc_pool *p = a->p;
    int ith = a->ith;
    free(a);
    int seen = 0;
    for (;;) {
        int64_t until = now_ns() + PGC_POLL_NS;
        for (int k = 1; atomic_load_explicit(&p->gen, memory_order_acquire) == seen && !atomic_load(&p->stop); k++) {
            PGC_PAUSE();
            if ((k & 255) == 0 && now_ns() > until) break;
        }
        if (atomic_load_explicit(&p->gen, memory_order_acquire) == seen && !atomic_load(&p->stop)) {
            pthread_mutex_lock(&p->mu);
            p->sleepers++;
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv, &p->mu);
            p->sleepers--;
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        seen = atomic_load_explicit(&p->gen, memory_order_acquire);
        run_nodes(p, ith, p->n_threads);
        atomic_fetch_sub_explicit(&p->active, 1, memory_order_release);
    }
    return NULL;
}

pgc_pool *pgc_pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    pgc_pool *p = (pgc_pool *)calloc(1, sizeof(pgc_pool));
    if (!p) return NULL;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->th = (pthread_t *)calloc((size_t)n_threads, sizeof(pthread_t));
    for (int i = 1; i < n_threads; i++) {
        worker_arg *a = (worker_arg *)malloc(sizeof(worker_arg));
        a->p = p;
        a->ith = i;
        if (pthread_create(&p->th[i], NULL, worker, a) != 0) {
            free(a);
            p->n_threads = i; /* run with the threads we got */
            break;
        }
    }
    return p;
}

void pgc_pool_free(pgc_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->th);
    free(p->wdata);
    free(p);
}

int pgc_pool_n_threads(pgc_pool *p) { return p->n_threads; }

static size_t align64(size_t x) { return (x + 63) & ~(size_t)63; }

int pgc_graph_compute(pgc_pool *p, const pgc_node *nodes, int n_nodes, int *failed_node, int64_t *stamps) {
    *failed_node = -1;
    if (n_nodes <= 0) return PGC_OK;
    int nth = p->n_threads;
    size_t shared = 0, per = 0;
    for (int i = 0; i < n_nodes; i++) {
        if (!kernel_of(nodes[i].op)) { *failed_node = i; return PGC_E_OP; }
        size_t s = pgc_work_shared(&nodes[i], nth), t = pgc_work_thread(&nodes[i]);
        if (s > shared) shared = s;
        if (t > per) per = t;
    }
    shared = align64(shared);
    per = align64(per + 64);
    size_t need = shared + per * (size_t)nth + 64;
    if (need > p->wcap) {
        free(p->wdata);
        p->wdata = (char *)aligned_alloc(64, align64(need));
        if (!p->wdata) { p->wcap = 0; return PGC_E_NOMEM; }
        p->wcap = align64(need);
    }
    p->shared = shared;
    p->per_thread = per;
    p->nodes = nodes;
    p->n_nodes = n_nodes;
    atomic_store(&p->err, 0);
    atomic_store(&p->err_node, -1);
    atomic_store(&p->bar_count, 0);
    p->err_index = 0;
    p->stamps = stamps;
    if (nth > 1) {
        atomic_store(&p->active, nth - 1);
        pthread_mutex_lock(&p->mu);
        atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
        if (p->sleepers) pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    run_nodes(p, 0, nth);
    /* workers must be out of this plan before the caller may free or change it */
    while (atomic_load_explicit(&p->active, memory_order_acquire) > 0) sched_yield();
    int err = atomic_load(&p->err);
    if (err) *failed_node = atomic_load(&p->err_node);
    return err;
}
