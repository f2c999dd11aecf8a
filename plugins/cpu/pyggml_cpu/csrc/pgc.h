/* pyggml-cpu: shared declarations of the C kernels (node descriptor, op ids, thread context, helpers). */
#ifndef PGC_H
#define PGC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <math.h>

#define PGC_NSLOT 8 /* dst + up to 7 srcs (SSM_SCAN, RWKV_WKV7) */

/* cdef-begin */
typedef struct pgc_node {
    int32_t op;   /* PGC_OP_* */
    int32_t sub;  /* sub-operation (unary / glu / binary kind) */
    int32_t type[PGC_NSLOT]; /* ggml type ids; -1 for an absent slot */
    int64_t ne[PGC_NSLOT][4];
    int64_t nb[PGC_NSLOT][4];
    uint64_t data[PGC_NSLOT]; /* addresses (0: absent) */
    int32_t ip[16];
    float fp[16];
} pgc_node;

/* op ids, sub-ops and error codes: inside the cdef, so the Python side (op_table.py, kernels.py) reads every
   number from cffi's `lib` and cannot drift from this header */
enum {
    PGC_OP_NOP = 0,
    PGC_OP_BINARY = 1,    /* sub: 0 add 1 sub 2 mul 3 div */
    PGC_OP_UNARY = 2,     /* sub: PGC_U_* */
    PGC_OP_GLU = 3,       /* sub: PGC_G_*, ip[0] swapped */
    PGC_OP_SCALE = 4,     /* fp[0] s, fp[1] b */
    PGC_OP_CLAMP = 5,
    PGC_OP_LEAKY = 6,
    PGC_OP_FILL = 7,
    PGC_OP_ADD1 = 8,
    PGC_OP_ADD_ID = 9,    /* moe.c */
    PGC_OP_NORM = 10,     /* sub: 0 norm 1 rms 2 l2; fp[0] eps */
    PGC_OP_GROUP_NORM = 11,
    PGC_OP_SOFT_MAX = 12,
    PGC_OP_ROPE = 13,
    PGC_OP_DIAG_MASK = 14, /* sub: 0 -inf 1 zero */
    PGC_OP_FLASH_ATTN = 15,
    PGC_OP_MUL_MAT = 20,
    PGC_OP_MUL_MAT_ID = 21,
    PGC_OP_OUT_PROD = 22,
    PGC_OP_MUL_MAT_BLAS = 23,
    PGC_OP_CPY = 30,      /* CPY, CONT, DUP */
    PGC_OP_GET_ROWS = 31,
    PGC_OP_SET_ROWS = 32,
    PGC_OP_REPEAT = 33,
    PGC_OP_CONCAT = 34,
    PGC_OP_PAD = 35,
    PGC_OP_SET = 36,      /* sub: 0 set 1 acc */
    PGC_OP_DIAG = 37,
    PGC_OP_ARANGE = 38,
    PGC_OP_SUM = 40,
    PGC_OP_SUM_ROWS = 41, /* sub: 0 sum 1 mean */
    PGC_OP_CUMSUM = 42,
    PGC_OP_ARGMAX = 43,
    PGC_OP_COUNT_EQUAL = 44,
    PGC_OP_ARGSORT = 45,  /* sub: 0 asc 1 desc; ip[0] k (top_k) or 0 */
    /* conv.c; ip: ggml's op_params words */
    PGC_OP_IM2COL = 60, PGC_OP_IM2COL_3D = 61, PGC_OP_COL2IM_1D = 62, PGC_OP_CONV_TRANSPOSE_1D = 63,
    PGC_OP_CONV_2D = 64, PGC_OP_CONV_3D = 65, PGC_OP_CONV_2D_DW = 66, PGC_OP_CONV_TRANSPOSE_2D = 67,
    /* spatial.c: pgc_k_spatial, sub PGC_SP_* (ip: ggml's op_params words); deepseek.c: pgc_k_deepseek,
       LIGHTNING_INDEXER and DSV4_HC (sub 0 comb, 1 pre, 2 post) */
    PGC_OP_SPATIAL = 70, PGC_OP_LIGHTNING_INDEXER = 71, PGC_OP_DSV4_HC = 72,
    /* seq.c (ip[0]: TRI's ggml_tri_type, SSM_SCAN's and GATED_DELTA_NET's K; fp[0]: GLA's scale) */
    PGC_OP_TRI = 80, PGC_OP_SOLVE_TRI = 81, PGC_OP_SSM_CONV = 82, PGC_OP_SSM_SCAN = 83, PGC_OP_RWKV_WKV6 = 84,
    PGC_OP_GLA = 85, PGC_OP_RWKV_WKV7 = 86, PGC_OP_GATED_DELTA_NET = 87,
    /* back2.c (ip: ggml's op_params words, IM2COL's / POOL_2D's) */
    PGC_OP_IM2COL_BACK = 90, PGC_OP_POOL_2D_BACK = 91,
    /* backward.c: pgc_k_train (training: backward ops, loss, optimiser steps; ROPE_BACK is PGC_OP_ROPE sub 1) */
    PGC_OP_REPEAT_BACK = 50, PGC_OP_SILU_BACK = 51, PGC_OP_RMS_NORM_BACK = 52, PGC_OP_GET_ROWS_BACK = 53,
    PGC_OP_SOFT_MAX_BACK = 54, PGC_OP_CROSS_ENTROPY_LOSS = 55, PGC_OP_CROSS_ENTROPY_LOSS_BACK = 56,
    PGC_OP_OPT_STEP_ADAMW = 57, PGC_OP_OPT_STEP_SGD = 58,
    PGC_OP_COUNT
};

enum { PGC_U_ABS, PGC_U_SGN, PGC_U_NEG, PGC_U_STEP, PGC_U_TANH, PGC_U_ELU, PGC_U_RELU, PGC_U_SIGMOID,
       PGC_U_GELU, PGC_U_GELU_QUICK, PGC_U_GELU_ERF, PGC_U_SILU, PGC_U_HARDSWISH, PGC_U_HARDSIGMOID,
       PGC_U_EXP, PGC_U_SOFTPLUS, PGC_U_FLOOR, PGC_U_CEIL, PGC_U_ROUND, PGC_U_TRUNC,
       PGC_U_EXPM1, PGC_U_XIELU, /* moe.c: pgc_unary_ext, fp[0..3] XIELU's alpha_n alpha_p beta eps */
       PGC_U_SQR = 32, PGC_U_SQRT, PGC_U_LOG, PGC_U_SIN, PGC_U_COS };

enum { PGC_SP_POOL_1D, PGC_SP_POOL_2D, PGC_SP_UPSCALE, PGC_SP_PAD_REFLECT_1D, PGC_SP_ROLL, PGC_SP_TIMESTEP_EMBEDDING,
       PGC_SP_WIN_PART, PGC_SP_WIN_UNPART, PGC_SP_GET_REL_POS, PGC_SP_ADD_REL_POS };

enum { PGC_G_REGLU, PGC_G_GEGLU, PGC_G_SWIGLU, PGC_G_GEGLU_ERF, PGC_G_GEGLU_QUICK,
       PGC_G_SWIGLU_OAI, PGC_G_SWIGLU_CLAMP /* moe.c: pgc_glu_ext, fp[0] alpha, fp[1] limit */ };

/* ggml type ids */
enum { T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q4_1 = 3, T_Q5_0 = 6, T_Q5_1 = 7, T_Q8_0 = 8, T_Q8_1 = 9,
       T_Q2_K = 10, T_Q3_K = 11, T_Q4_K = 12, T_Q5_K = 13, T_Q6_K = 14, T_Q8_K = 15, T_I8 = 24, T_I16 = 25,
       T_I32 = 26, T_I64 = 27, T_F64 = 28, T_BF16 = 30, T_COUNT = 40 };

/* error codes */
enum { PGC_OK = 0, PGC_E_OP = 1, PGC_E_TYPE = 2, PGC_E_SHAPE = 3, PGC_E_NOMEM = 4, PGC_E_INDEX = 5,
       PGC_E_BLAS = 6 };
/* a slot's type | PGC_R8: its data is in the R8 layout (repack.h) */
enum { PGC_R8 = 256 };
/* cdef-end */

typedef struct pgc_pool pgc_pool;

/* what a kernel sees: its thread index, the thread count and the work memory */
typedef struct pgc_tctx {
    int ith, nth;
    char *wdata;     /* shared work memory (pgc_work_shared bytes) */
    char *scratch;   /* this thread's private scratch (pgc_work_thread bytes) */
    pgc_pool *pool;
    int *err_index;  /* shared: first failing index-like error found (e.g. a row id out of range) */
} pgc_tctx;

void pgc_barrier(const pgc_tctx *c);

typedef int (*pgc_kernel)(const pgc_node *n, const pgc_tctx *c);

/* kernels (one per family file) */
int pgc_k_binary(const pgc_node *n, const pgc_tctx *c);
int pgc_k_unary(const pgc_node *n, const pgc_tctx *c);
int pgc_k_glu(const pgc_node *n, const pgc_tctx *c);
int pgc_k_norm(const pgc_node *n, const pgc_tctx *c);
int pgc_k_group_norm(const pgc_node *n, const pgc_tctx *c);
int pgc_k_soft_max(const pgc_node *n, const pgc_tctx *c);
int pgc_k_rope(const pgc_node *n, const pgc_tctx *c);
int pgc_k_diag_mask(const pgc_node *n, const pgc_tctx *c);
int pgc_k_flash_attn(const pgc_node *n, const pgc_tctx *c);
int pgc_k_mul_mat(const pgc_node *n, const pgc_tctx *c);
int pgc_k_mul_mat_id(const pgc_node *n, const pgc_tctx *c);
int pgc_k_out_prod(const pgc_node *n, const pgc_tctx *c);
int pgc_k_mul_mat_blas(const pgc_node *n, const pgc_tctx *c);
int pgc_k_cpy(const pgc_node *n, const pgc_tctx *c);
int pgc_k_get_rows(const pgc_node *n, const pgc_tctx *c);
int pgc_k_set_rows(const pgc_node *n, const pgc_tctx *c);
int pgc_k_repeat(const pgc_node *n, const pgc_tctx *c);
int pgc_k_concat(const pgc_node *n, const pgc_tctx *c);
int pgc_k_pad(const pgc_node *n, const pgc_tctx *c);
int pgc_k_set(const pgc_node *n, const pgc_tctx *c);
int pgc_k_diag(const pgc_node *n, const pgc_tctx *c);
int pgc_k_arange(const pgc_node *n, const pgc_tctx *c);
int pgc_k_reduce(const pgc_node *n, const pgc_tctx *c);
int pgc_k_argsort(const pgc_node *n, const pgc_tctx *c);
int pgc_k_add_id(const pgc_node *n, const pgc_tctx *c);
int pgc_k_train(const pgc_node *n, const pgc_tctx *c);
size_t pgc_train_shared(const pgc_node *n, int nth); /* backward.c: CROSS_ENTROPY_LOSS's partial sums */
int pgc_k_im2col(const pgc_node *n, const pgc_tctx *c);         /* conv.c: IM2COL, IM2COL_3D */
int pgc_k_col2im_1d(const pgc_node *n, const pgc_tctx *c);
int pgc_k_conv_transpose(const pgc_node *n, const pgc_tctx *c); /* CONV_TRANSPOSE_1D, _2D */
int pgc_k_conv(const pgc_node *n, const pgc_tctx *c);           /* CONV_2D, CONV_3D */
int pgc_k_conv_2d_dw(const pgc_node *n, const pgc_tctx *c);
size_t pgc_conv_shared(const pgc_node *n, int nth);
int pgc_k_tri(const pgc_node *n, const pgc_tctx *c);
int pgc_k_solve_tri(const pgc_node *n, const pgc_tctx *c);
int pgc_k_ssm_conv(const pgc_node *n, const pgc_tctx *c);
int pgc_k_ssm_scan(const pgc_node *n, const pgc_tctx *c);
int pgc_k_rwkv_wkv6(const pgc_node *n, const pgc_tctx *c);
int pgc_k_gla(const pgc_node *n, const pgc_tctx *c);
int pgc_k_rwkv_wkv7(const pgc_node *n, const pgc_tctx *c);
int pgc_k_gated_delta_net(const pgc_node *n, const pgc_tctx *c);
int pgc_k_spatial(const pgc_node *n, const pgc_tctx *c);
int pgc_k_deepseek(const pgc_node *n, const pgc_tctx *c);
int pgc_k_im2col_back(const pgc_node *n, const pgc_tctx *c);   /* back2.c */
int pgc_k_pool_2d_back(const pgc_node *n, const pgc_tctx *c);
/* rows of the parameterised activations (moe.c), called by pgc_k_unary / pgc_k_glu */
int pgc_unary_ext(int kind, float *a, int64_t ne0, const float *fp);
int pgc_glu_ext(int kind, float *g, const float *v, int64_t nc, const float *fp);

/* work memory each op needs: shared bytes, and bytes per thread */
size_t pgc_work_shared(const pgc_node *n, int nth);
size_t pgc_work_thread(const pgc_node *n);

/* ---- type facts and conversions ---------------------------------------------------------------------- */
int pgc_blck_size(int type);
int pgc_type_size(int type);
static inline int64_t pgc_row_size(int type, int64_t ne0) { return ne0 / pgc_blck_size(type) * pgc_type_size(type); }

static inline float pgc_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0x1f) u = sign | 0x7f800000u | (man << 13);
    else if (exp != 0) u = sign | ((exp + 112) << 23) | (man << 13);
    else if (man == 0) u = sign;
    else { /* subnormal: value = man * 2^-24 */
        float f = (float)man * 5.9604644775390625e-08f;
        memcpy(&u, &f, 4);
        u |= sign;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t pgc_fp32_to_fp16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000, a = u & 0x7fffffff;
    if (a > 0x7f800000) return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff)); /* NaN stays NaN */
    if (a >= 0x477ff000) return (uint16_t)(sign | 0x7c00);                    /* overflow -> inf */
    if (a < 0x38800000) {                                                       /* subnormal or zero */
        float af;
        memcpy(&af, &a, 4);
        /* adding 0.5 forces rounding at the 2^-24 position (round to nearest even by the FPU) */
        float t = af + 0.5f;
        uint32_t tu;
        memcpy(&tu, &t, 4);
        return (uint16_t)(sign | (tu - 0x3f000000u));
    }
    uint32_t mant_odd = (a >> 13) & 1;
    a += 0xc8000fffu + mant_odd; /* rebias exponent (-112 << 23) and round to nearest even */
    return (uint16_t)(sign | (a >> 13));
}
static inline float pgc_bf16_to_fp32(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t pgc_fp32_to_bf16(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 64);
    return (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}
#define FP16_TO_F32(x) pgc_fp16_to_fp32(x)
#define F32_TO_FP16(x) pgc_fp32_to_fp16(x)

/* element load / store of plain float types */
static inline float pgc_ld(const char *p, int type) {
    switch (type) {
    case T_F32: return *(const float *)p;
    case T_F16: return pgc_fp16_to_fp32(*(const uint16_t *)p);
    case T_BF16: return pgc_bf16_to_fp32(*(const uint16_t *)p);
    case T_I32: return (float)*(const int32_t *)p;
    default: return 0.0f;
    }
}
static inline void pgc_st(char *p, int type, float v) {
    switch (type) {
    case T_F32: *(float *)p = v; break;
    case T_F16: *(uint16_t *)p = pgc_fp32_to_fp16(v); break;
    case T_BF16: *(uint16_t *)p = pgc_fp32_to_bf16(v); break;
    case T_I32: *(int32_t *)p = (int32_t)v; break;
    default: break;
    }
}

/* row <-> float conversion for any supported type (quantised ones whole blocks); 0 or PGC_E_TYPE */
int pgc_to_float(const void *src, float *dst, int64_t n, int type);
int pgc_from_float(const float *src, void *dst, int64_t n, int type);

/* ---- splitting work --------------------------------------------------------------------------------------- */
static inline void pgc_split(int64_t n, int ith, int nth, int64_t *i0, int64_t *i1) {
    int64_t d = (n + nth - 1) / nth;
    *i0 = d * ith < n ? d * ith : n;
    *i1 = *i0 + d < n ? *i0 + d : n;
}
/* Work items over nr rows of ne0 values: the rows, or where there are fewer rows than threads (a decode's one row)
   each row in pieces of whole units of `unit` values, the last piece taking the rest. Items [0, nr x pgc_pieces) are
   shared with pgc_split; pgc_piece gives item u's row and its values [k0, k1) (k0 == k1: none). */
static inline int64_t pgc_pieces(int64_t nr, int nth) { return nr < nth ? nth : 1; }
static inline int64_t pgc_piece(int64_t u, int64_t pieces, int64_t ne0, int64_t unit, int64_t *k0, int64_t *k1) {
    const int p = (int)(u % pieces);
    pgc_split(ne0 / unit, p, (int)pieces, k0, k1);
    *k0 *= unit;
    *k1 = p == pieces - 1 ? ne0 : *k1 * unit;
    return u / pieces;
}
static inline int64_t pgc_nrows(const pgc_node *n, int s) { return n->ne[s][1] * n->ne[s][2] * n->ne[s][3]; }
static inline char *pgc_ptr(const pgc_node *n, int s, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (char *)(uintptr_t)n->data[s] + i0 * n->nb[s][0] + i1 * n->nb[s][1] + i2 * n->nb[s][2] + i3 * n->nb[s][3];
}
/* whether slot s's matrices (dim 2) share its rows: a KV cache's heads, head h's values at h x head bytes of each
   cache row. Kernels that read such a tensor walk the heads fastest, so as to read the rows in order. */
static inline int pgc_heads_share_rows(const pgc_node *n, int s) { return n->nb[s][2] < n->nb[s][1]; }
/* nr rows of `bytes` bytes, `stride` bytes apart from p, asked into L2: the next rows of a kernel whose rows are
   scattered slices (one head's of a KV cache's rows), which the hardware's prefetchers do not follow. (Into L1
   they pushed out the rows at work.) */
static inline void pgc_prefetch_rows(const char *p, int64_t nr, int64_t stride, int64_t bytes) {
    for (int64_t j = 0; j < nr; j++, p += stride)
        for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(p + b, 0, 2);
}
/* row r of slot s in row-major order over dims 1..3 */
static inline char *pgc_row(const pgc_node *n, int s, int64_t r) {
    int64_t ne1 = n->ne[s][1], ne2 = n->ne[s][2];
    int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
    return pgc_ptr(n, s, 0, i1, i2, i3);
}

/* ---- SIMD dispatch --------------------------------------------------------------------------------------- */
typedef float (*pgc_dot_f32_fn)(int64_t n, const float *x, const float *y);
typedef float (*pgc_dot_f16_fn)(int64_t n, const uint16_t *x, const float *y);
typedef void (*pgc_vec_dot_fn)(int64_t n, float *s, const void *x, const void *y);
typedef void (*pgc_quant_fn)(const float *x, void *y, int64_t n);
typedef void (*pgc_dequant_fn)(const void *x, float *y, int64_t n);
/* x[i] = fp16_to_fp32(fp32_to_fp16(x[i])) (round to nearest even; NaN stays NaN) */
typedef void (*pgc_round_f16_fn)(float *x, int64_t n);
/* one weight row against two activation rows: s[0], s[1] */
typedef void (*pgc_vec_dot2_fn)(int64_t n, float *s, const void *x, const void *y0, const void *y1);
/* PGC_DOTR_ROWS weight rows, bx bytes apart, against one activation row (mat-vec): s[0..PGC_DOTR_ROWS-1] */
#define PGC_DOTR_ROWS 8
typedef void (*pgc_vec_dotr_fn)(int64_t n, float *s, const void *x, size_t bx, const void *y);
/* nr F16 weight rows (from x, bx bytes apart) against nc F32 activation rows holding F16-rounded values (from y,
   by bytes apart): output (r, c) to the float at d + r * dr + c * dc (dot_f16_tiles: n % 8 == 0) */
typedef void (*pgc_f16_tiles_fn)(int64_t n, const uint16_t *x, size_t bx, int64_t nr, const float *y, size_t by,
                                 int64_t nc, char *d, size_t dr, size_t dc);
/* dot_f16_tiles' bits for up to F16_PANEL_ROWS rows against many columns, the rows as the vector: scratch holds
   F16_PANEL_ROWS * 4 * n + 64 bytes (the rows converted and transposed once for all nc columns); matmul.c takes it
   for rows of at most F16_PANEL_MAX_K values */
#define F16_PANEL_ROWS 16
#define F16_PANEL_MAX_K 256
typedef void (*pgc_f16_panel_fn)(int64_t n, const uint16_t *x, size_t bx, int64_t nr, const float *y, size_t by,
                                 int64_t nc, char *d, size_t dr, size_t dc, char *scratch);
/* nr quantised weight rows (from x, bx bytes apart) against nc converted activation rows (from y, by bytes apart):
   output (r, c) to the float at d + r * dr + c * dc, each with vec_dot's bits (a prompt matmul's tile) */
typedef void (*pgc_q_tiles_fn)(int64_t n, const void *x, size_t bx, int64_t nr, const void *y, size_t by, int64_t nc,
                               char *d, size_t dr, size_t dc);
/* R8 (repack.h): a node's type | PGC_R8 marks a slot holding weights in the R8 layout (MUL_MAT's src0 only). A
   kernel takes ng <= R8_GROUPS groups of R8_ROWS rows (k values each, groups gb bytes apart) against nc <= R8_MAX_COLS
   activation rows (the weight type's dot partner, by bytes apart, from y) into out[(c * ng + g) * R8_ROWS + r],
   with the arithmetic repack.c's portable kernels define: for Q4_1 ggml's AVX2 vec_dot's (the plain kernels' bits
   on the x86 levels, which sum in that order too; the portable and NEON plain kernels sum in others), for the
   others a block's dot in integers, converted once. */
#define R8_ROWS 8
#define R8_COLS 8
#define R8_GROUPS 2
/* the most columns one kernel call takes (a wide pass unpacks a tile's block once for all of them) */
#define R8_MAX_COLS 256
typedef void (*pgc_r8_fn)(int64_t k, const void *x, size_t gb, int ng, const void *y, size_t by, int nc, float *out);
/* the one- and two-column table entries `name` of a kernel `cols(n, s, x, ys, NC)` written for NC columns */
#define PGC_VD1_ENTRY(name, cols)                                                                         \
    static void name(int64_t n, float *s, const void *vx, const void *vy) {                               \
        const void *ys[1] = {vy};                                                                         \
        cols(n, s, vx, ys, 1);                                                                            \
    }
#define PGC_VD2_ENTRY(name, cols)                                                                         \
    static void name(int64_t n, float *s, const void *vx, const void *vy0, const void *vy1) {            \
        const void *ys[2] = {vy0, vy1};                                                                   \
        cols(n, s, vx, ys, 2);                                                                            \
    }

typedef struct pgc_simd {
    int level;                 /* see dot_portable.c: 0 portable .. 4 avx-512 + vnni, 5-6 arm64 neon */
    int r8_prefetch;           /* bytes ahead an R8 kernel prefetches its weight tiles (0: none; dot_portable.c) */
    pgc_dot_f32_fn dot_f32;
    pgc_dot_f16_fn dot_f16;    /* f16 row x f32 row */
    pgc_dot_f16_fn dot_bf16;   /* bf16 row x f32 row */
    /* F16 matmul in ggml's two summation orders (same bits on every level: each is one fixed sequence of fmaf
       and adds): dot_f16_ggml as ggml_vec_dot_f16 (mat-vec, MUL_MAT_ID), dot_f16_tiles as llamafile's tinyBLAS
       (ggml's prompt matmul: one 8-lane accumulator per output, however many outputs a level computes at once) */
    pgc_dot_f16_fn dot_f16_ggml;
    pgc_f16_tiles_fn dot_f16_ggml_tiles; /* dot_f16_ggml of a tile: mat-vecs, and decode attention's query heads */
    pgc_f16_tiles_fn dot_f16_tiles;
    pgc_f16_panel_fn dot_f16_panel; /* dot_f16_tiles' bits, a panel of rows at once (NULL: dot_f16_tiles only) */
    pgc_round_f16_fn round_f16; /* F16 weights' activations rounded to F16 first, as ggml converts them */
    pgc_vec_dot_fn vec_dot[T_COUNT];   /* quantised row x its dot partner row */
    pgc_vec_dot2_fn vec_dot2[T_COUNT]; /* ... x two partner rows (NULL: use vec_dot twice) */
    pgc_vec_dotr_fn vec_dotr[T_COUNT]; /* PGC_DOTR_ROWS rows x one partner row (NULL: vec_dot per row) */
    pgc_q_tiles_fn q_tiles[T_COUNT];   /* tiles of rows x columns (NULL: vec_dot2 / vec_dot per column) */
    pgc_r8_fn r8[T_COUNT];             /* R8_ROWS R8 weight rows (Q4_0, Q4_1, Q8_0, Q4_K, Q5_K, Q6_K) x partner rows */
    pgc_quant_fn quantize[T_COUNT];    /* float row -> blocks (dot partners Q8_0/Q8_1/Q8_K and CPY targets) */
    pgc_dequant_fn dequant[T_COUNT];   /* blocks -> float row, pgc_dequant_row's bits (NULL: that one) */
} pgc_simd;

extern pgc_simd pgc_S;
/* the level's SIMD dequantisation of type t's blocks (NULL: none; pgc_to_float then takes quants.c's portable one) */
static inline pgc_dequant_fn pgc_simd_dequant(int t) { return t >= 0 && t < T_COUNT ? pgc_S.dequant[t] : NULL; }
/* fp16 -> fp32 for every half value: a load is cheaper than a conversion inside the dot product loops */
extern float pgc_f16_table[65536];
#define F16T(h) (pgc_f16_table[(uint16_t)(h)])
int pgc_vec_dot_type(int type);
void pgc_simd_portable(pgc_simd *s);
void pgc_r8_portable(pgc_simd *s); /* repack.c */
void pgc_simd_avx2(pgc_simd *s);   /* overrides entries with AVX2/FMA/F16C kernels */
void pgc_simd_vnni(pgc_simd *s);   /* ... and the byte dots with AVX-VNNI */
void pgc_simd_avx512(pgc_simd *s, int vnni); /* AVX-512 F/VL/BW kernels (+ AVX512-VNNI byte dots) */
void pgc_simd_neon(pgc_simd *s, int dotprod); /* arm64: NEON kernels (+ SDOT) for every dot product */

#endif
