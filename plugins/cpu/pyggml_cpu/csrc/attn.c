/* FLASH_ATTN_EXT, tiled: the score matrix is never formed whole. The queries that share one K/V matrix (the r2
   heads of a KV head, over the query rows) are taken FA_QUERIES at a time; each block of FA_KV_BLOCK keys is read
   once for all of them (F16 and F32 rows in place, BF16 and quantised V rows converted to float first): the
   block's scores of every query are dot products (SIMD across the head dimension; a quantised K, as in ggml, is
   dotted in its blocks with the queries quantised once to its dot partner, by the matmul's tiles), a row of scores
   takes SOFT_MAX's scaled, masked row and exponentials (ew.c) with an online softmax across blocks (running maximum
   and sum, the accumulated values rescaled when the maximum grows), and the block's values are accumulated into
   each query's output (SIMD across the value dimension). A key that every query of the block masks (-inf) is
   skipped and its rows read as zeros (its score, computed from a quantised K's blocks, overwritten), so a masked
   cell holding garbage (NaN) changes nothing; a key that some queries mask and others see (two sequences in one
   batch, a causal block's diagonal) weighs 0 for the former, and where its K or V row holds NaN or an infinity
   (which 0 x NaN would pass on) the block is taken one query at a time, so that no query reads a key it masks,
   as ggml's per-query loop never does. Where the matrices are fewer than the threads (decode with few KV
   heads), the keys are split between threads too, each part's (max, sum, values) kept in the shared work memory
   and merged after a barrier. */
#include "pgc.h"
#include "shared.h"
#include "softmax.h" /* pg_online_softmax: the OpenCL and CUDA kernels' too */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FA_AVX2 __attribute__((target("avx2,fma,f16c")))
#endif

float pgc_alibi_slope(float max_bias, int64_t h, int64_t n_head);
double pgc_exp_sum_row(int64_t n, float *y, const float *x, float mx);                   /* ew.c */
float pgc_softmax_in_row(int64_t n, float *w, const float *x, float scale, const void *mask, int mask_f16,
                         float slope, float mx);                                         /* ew.c */

enum { FA_KV_BLOCK = 64, FA_QUERIES = 32 };

/* ---- the inner loops: scores and values -------------------------------------------------------------------- */
/* K and V rows are read in place where they are F16 or F32 with contiguous elements (`f16`: which), else from
   float copies; rows are `ks` / `vs` bytes apart. A dead row (dead[j] != 0; dead NULL: none) adds nothing. */

static inline float elem(const char *row, int64_t i, int f16) {
    return f16 ? F16T(((const uint16_t *)row)[i]) : ((const float *)row)[i];
}

/* S[m * lds + j] = Q[m] . K[j]: nq query rows of d floats against nk key rows */
static void scores_portable(int64_t d, const char *K, size_t ks, int f16, int64_t nk, const float *Q, int64_t nq,
                            float *S, int64_t lds) {
    for (int64_t m = 0; m < nq; m++)
        for (int64_t j = 0; j < nk; j++) {
            float s = 0.0f;
            for (int64_t i = 0; i < d; i++) s += Q[m * d + i] * elem(K + (size_t)j * ks, i, f16);
            S[m * lds + j] = s;
        }
}

/* O[m * dv + i] += sum over j of P[m * ldp + j] * V[j][i] */
static void values_portable(int64_t dv, const char *V, size_t vs, int f16, int64_t nk, const float *dead,
                            const float *P, int64_t ldp, int64_t nq, float *O) {
    for (int64_t m = 0; m < nq; m++)
        for (int64_t j = 0; j < nk; j++) {
            const float p = P[m * ldp + j];
            if (p == 0.0f || (dead && dead[j] != 0.0f)) continue;
            for (int64_t i = 0; i < dv; i++) O[m * dv + i] += p * elem(V + (size_t)j * vs, i, f16);
        }
}

#ifdef FA_AVX2
/* TILE(MQ) with MQ the constant mq (1-4), so that a tile function unrolls over its queries */
#define FA_FOR_MQ(TILE)                                                                                                \
    switch (mq) {                                                                                                      \
    case 4: TILE(4); break;                                                                                            \
    case 3: TILE(3); break;                                                                                            \
    case 2: TILE(2); break;                                                                                            \
    default: TILE(1); break;                                                                                           \
    }

FA_AVX2 static inline __m256 load8(const char *row, int64_t i, int f16) {
    return f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + i)))
               : _mm256_loadu_ps((const float *)row + i);
}

/* eight sums of eight lanes each, in one vector (lane l: the sum of a[l]) */
FA_AVX2 static inline __m256 hsum_x8(const __m256 a[8]) {
    const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* MQ (1-4) queries against two key rows: 2 MQ accumulators, each query loaded once for both rows */
FA_AVX2 static inline __attribute__((always_inline)) void scores_tile_avx2(int64_t d, const char *K, size_t ks,
                                                                          const float *Q, float *S, int64_t lds,
                                                                          const int MQ, const int F16) {
    __m256 a[8];
    for (int r = 0; r < 8; r++) a[r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < d; i += 8) {
        const __m256 k0 = load8(K, i, F16), k1 = load8(K + ks, i, F16);
        for (int m = 0; m < MQ; m++) {
            const __m256 q = _mm256_loadu_ps(Q + m * d + i);
            a[m] = _mm256_fmadd_ps(q, k0, a[m]);
            a[4 + m] = _mm256_fmadd_ps(q, k1, a[4 + m]);
        }
    }
    float s[8];
    _mm256_storeu_ps(s, hsum_x8(a));
    for (int m = 0; m < MQ; m++) {
        S[m * lds] = s[m];
        S[m * lds + 1] = s[4 + m];
    }
}

/* scores_avx2 with the row type F16 a constant */
FA_AVX2 static inline __attribute__((always_inline)) void scores_rows_avx2(int64_t d, const char *K, size_t ks,
                                                                          int64_t nk, const float *Q, int64_t nq,
                                                                          float *S, int64_t lds, const int F16) {
    for (int64_t m = 0; m < nq; m += 4) {
        const int mq = nq - m < 4 ? (int)(nq - m) : 4;
        const float *q = Q + m * d;
        float *s = S + m * lds;
        int64_t j = 0;
#define FA_SCORES(MQ) scores_tile_avx2(d, K + (size_t)j * ks, ks, q, s + j, lds, MQ, F16)
        for (; j + 2 <= nk; j += 2) FA_FOR_MQ(FA_SCORES)
#undef FA_SCORES
        if (j < nk) scores_portable(d, K + (size_t)j * ks, ks, F16, 1, q, mq, s + j, lds);
    }
}

FA_AVX2 static void scores_avx2(int64_t d, const char *K, size_t ks, int f16, int64_t nk, const float *Q, int64_t nq,
                                float *S, int64_t lds) {
    if (d % 8) scores_portable(d, K, ks, f16, nk, Q, nq, S, lds);
    else if (f16) scores_rows_avx2(d, K, ks, nk, Q, nq, S, lds, 1);
    else scores_rows_avx2(d, K, ks, nk, Q, nq, S, lds, 0);
}

/* MQ (1-4) queries' outputs, W (1-2) vectors of eight values wide, over nk key rows */
FA_AVX2 static inline __attribute__((always_inline)) void values_tile_avx2(const char *V, size_t vs, int64_t nk,
                                                                          const float *dead, const float *P,
                                                                          int64_t ldp, float *O, int64_t dv,
                                                                          const int MQ, const int W, const int F16) {
    __m256 a[4][2];
    for (int m = 0; m < MQ; m++)
        for (int w = 0; w < W; w++) a[m][w] = _mm256_loadu_ps(O + m * dv + 8 * w);
    for (int64_t j = 0; j < nk; j++) {
        if (dead && dead[j] != 0.0f) continue;
        __m256 v[2];
        for (int w = 0; w < W; w++) v[w] = load8(V + (size_t)j * vs, 8 * w, F16);
        for (int m = 0; m < MQ; m++) {
            const __m256 p = _mm256_broadcast_ss(P + m * ldp + j);
            for (int w = 0; w < W; w++) a[m][w] = _mm256_fmadd_ps(p, v[w], a[m][w]);
        }
    }
    for (int m = 0; m < MQ; m++)
        for (int w = 0; w < W; w++) _mm256_storeu_ps(O + m * dv + 8 * w, a[m][w]);
}

/* values_avx2 with the row type F16 a constant: 16 values at a time, then 8 */
FA_AVX2 static inline __attribute__((always_inline)) void values_rows_avx2(int64_t dv, const char *V, size_t vs,
                                                                          int64_t nk, const float *dead,
                                                                          const float *P, int64_t ldp, int64_t nq,
                                                                          float *O, const int F16) {
    const int64_t es = F16 ? 2 : 4;
    for (int64_t m = 0; m < nq; m += 4) {
        const int mq = nq - m < 4 ? (int)(nq - m) : 4;
        const float *p = P + m * ldp;
        float *o = O + m * dv;
        int64_t i = 0;
#define FA_VALUES(MQ) values_tile_avx2(V + i * es, vs, nk, dead, p, ldp, o + i, dv, MQ, W, F16)
        for (; i + 16 <= dv; i += 16) {
            const int W = 2;
            FA_FOR_MQ(FA_VALUES)
        }
        if (i < dv) {
            const int W = 1;
            FA_FOR_MQ(FA_VALUES)
        }
#undef FA_VALUES
    }
}

FA_AVX2 static void values_avx2(int64_t dv, const char *V, size_t vs, int f16, int64_t nk, const float *dead,
                                const float *P, int64_t ldp, int64_t nq, float *O) {
    if (dv % 8) values_portable(dv, V, vs, f16, nk, dead, P, ldp, nq, O);
    else if (f16) values_rows_avx2(dv, V, vs, nk, dead, P, ldp, nq, O, 1);
    else values_rows_avx2(dv, V, vs, nk, dead, P, ldp, nq, O, 0);
}
#undef FA_FOR_MQ
#endif

static void scores(int64_t d, const char *K, size_t ks, int f16, int64_t nk, const float *Q, int64_t nq, float *S,
                   int64_t lds) {
#ifdef FA_AVX2
    if (pgc_S.level >= 1) {
        scores_avx2(d, K, ks, f16, nk, Q, nq, S, lds);
        return;
    }
#endif
    scores_portable(d, K, ks, f16, nk, Q, nq, S, lds);
}

static void values(int64_t dv, const char *V, size_t vs, int f16, int64_t nk, const float *dead, const float *P,
                   int64_t ldp, int64_t nq, float *O) {
#ifdef FA_AVX2
    if (pgc_S.level >= 1) {
        values_avx2(dv, V, vs, f16, nk, dead, P, ldp, nq, O);
        return;
    }
#endif
    values_portable(dv, V, vs, f16, nk, dead, P, ldp, nq, O);
}

/* ---- the algorithm ------------------------------------------------------------------------------------------ */

/* K's dot partner where the queries are dotted with K's blocks (a quantised K with a dot product and a quantiser
   for its partner, blocks contiguous in a row), else -1 */
static int query_type(const pgc_node *n) {
    const int tk = n->type[2], tq = pgc_vec_dot_type(tk);
    if (tq < 0 || !pgc_S.vec_dot[tk] || !pgc_S.quantize[tq] || n->nb[2][0] != pgc_type_size(tk)) return -1;
    return n->ne[1][0] % pgc_blck_size(tq) ? -1 : tq;
}

/* one query in K's dot partner, in floats (its bytes rounded up; 0: none) */
static size_t qq_floats(const pgc_node *n) {
    const int tq = query_type(n);
    return tq < 0 ? 0 : ((size_t)pgc_row_size(tq, n->ne[1][0]) + 3) / 4;
}

/* the shape of the work: queries per K/V matrix and per unit, units (one query block of one matrix) and key parts.
   keys_outer: each thread takes a range of keys (a part) for every unit, block by block and unit by unit inside a
   block, where the units are single query blocks (decode) of matrices that share their rows (a KV cache's heads:
   head h's K at h x head bytes of a cache row), so that the threads read the cache rows in order rather than a
   head's slices of them */
typedef struct fa_plan {
    int64_t r2, r3, per, g, nqb, units, parts;
    int keys_outer;
    int tq;     /* query_type: K's dot partner the queries are quantised to, or -1 */
    size_t qqf; /* qq_floats: floats a quantised query takes (0: none) */
} fa_plan;

static fa_plan plan_of(const pgc_node *n, int nth) {
    fa_plan p;
    const int64_t n_q = n->ne[1][1], n_head = n->ne[1][2], B = n->ne[1][3];
    const int64_t n_kv = n->ne[2][1], n_head_kv = n->ne[2][2], Bk = n->ne[2][3];
    p.r2 = n_head / n_head_kv;
    p.r3 = B / Bk;
    p.per = n_q * p.r2;
    p.g = p.per < FA_QUERIES ? p.per : FA_QUERIES;
    p.nqb = (p.per + p.g - 1) / p.g;
    p.units = B * n_head_kv * p.nqb;
    const int64_t blocks = (n_kv + FA_KV_BLOCK - 1) / FA_KV_BLOCK;
    p.keys_outer = p.nqb == 1 && p.units > 1 && blocks >= nth && pgc_heads_share_rows(n, 2) &&
                   pgc_heads_share_rows(n, 3);
    int64_t parts = p.keys_outer ? nth : p.units >= nth ? 1 : (nth + p.units - 1) / p.units;
    p.parts = parts < blocks ? parts : blocks > 0 ? blocks : 1;
    p.tq = query_type(n);
    p.qqf = qq_floats(n);
    return p;
}

/* a unit's queries over a range of keys and their running state: g maxima, g sums, g x Dv unnormalised values,
   the g queries (Dk floats each), then the g queries in K's dot partner (qq_floats each; NULL: none) */
typedef struct fa_state {
    float *m, *l, *o, *q;
    char *qq;
} fa_state;

static size_t state_floats(const pgc_node *n, const fa_plan *p) {
    return (size_t)p->g * ((size_t)(n->ne[3][0] + 2 + n->ne[1][0]) + p->qqf);
}

static fa_state state_at(const pgc_node *n, const fa_plan *p, float *base) {
    float *q = base + p->g * (2 + n->ne[3][0]);
    const fa_state st = {base, base + p->g, base + 2 * p->g, q, p->qqf ? (char *)(q + p->g * n->ne[1][0]) : NULL};
    return st;
}

/* whether the units' states live in the shared memory, one per part (else in each thread's scratch) */
static int shared_states(const fa_plan *p) { return p->parts > 1 || p->keys_outer; }

/* part `part` of unit u in the shared memory */
static fa_state part_of(const pgc_tctx *c, const pgc_node *n, const fa_plan *p, int64_t u, int64_t part) {
    return state_at(n, p, (float *)c->wdata + state_floats(n, p) * (size_t)(u * p->parts + part));
}

size_t pgc_flash_attn_shared(const pgc_node *n, int nth) {
    const fa_plan p = plan_of(n, nth);
    return shared_states(&p) ? sizeof(float) * state_floats(n, &p) * (size_t)(p.units * p.parts) : 0;
}

/* a thread's scratch: a block's scores, converted K and V rows and dead flags, one unit's state, then what is known
   of each key's K and V rows (0: not looked at, 1: finite, 2: NaN or an infinity), for the matrix memo_of names */
typedef struct fa_scratch {
    float *s, *k, *v, *dead, *state;
    uint8_t *memo;
    int64_t *memo_of;
} fa_scratch;

/* the layout over `w` (NULL: none), and its size in floats */
static size_t scratch_of(const pgc_node *n, float *w, fa_scratch *sc) {
    const size_t dk = (size_t)n->ne[1][0], dv = (size_t)n->ne[3][0];
    const size_t len[7] = {FA_QUERIES * FA_KV_BLOCK, FA_KV_BLOCK * dk, FA_KV_BLOCK * dv, FA_KV_BLOCK,
                           FA_QUERIES * (dk + dv + 2 + qq_floats(n)), ((size_t)n->ne[2][1] + 7) / 8 * 2, 2};
    /* (every length even: memo_of falls on 8 bytes) */
    float *at[7];
    size_t off = 0;
    for (int i = 0; i < 7; i++) {
        at[i] = w ? w + off : NULL;
        off += len[i];
    }
    *sc = (fa_scratch){at[0], at[1], at[2], at[3], at[4], (uint8_t *)at[5], (int64_t *)(void *)at[6]};
    return off;
}

size_t pgc_flash_attn_thread(const pgc_node *n) {
    fa_scratch sc;
    return sizeof(float) * scratch_of(n, NULL, &sc) + 256;
}

/* rows [j0, j0 + nj) of K or V (slot s) of matrix (i2, i3), d values each: in place where they are F16 or F32
   with contiguous elements (*f16 says which, *stride their distance), else converted into `out` as floats (a
   dead row as zeros); NULL for a type without a conversion */
static const char *rows_of(const pgc_node *n, int s, int64_t j0, int64_t nj, int64_t i2, int64_t i3, int64_t d,
                           const float *dead, float *out, size_t *stride, int *f16) {
    const int t = n->type[s];
    const int64_t nb0 = n->nb[s][0];
    const char *first = pgc_ptr(n, s, 0, j0, i2, i3);
    if ((t == T_F16 && nb0 == 2) || (t == T_F32 && nb0 == 4)) {
        *stride = (size_t)n->nb[s][1];
        *f16 = t == T_F16;
        return first;
    }
    *stride = sizeof(float) * (size_t)d;
    *f16 = 0;
    /* blocks in a row with a SIMD kernel: taken once for the block, not pgc_to_float's type switch per row */
    const pgc_dequant_fn deq = nb0 == pgc_type_size(t) ? pgc_simd_dequant(t) : NULL;
    for (int64_t j = 0; j < nj; j++) {
        float *y = out + j * d;
        const char *x = first + j * n->nb[s][1];
        if (dead && dead[j] != 0.0f) memset(y, 0, sizeof(float) * (size_t)d);
        else if (deq) deq(x, y, d);
        else if (t == T_F16 || t == T_F32 || t == T_BF16)
            for (int64_t i = 0; i < d; i++) y[i] = pgc_ld(x + i * nb0, t);
        else if (pgc_to_float(x, y, d, t)) return NULL;
    }
    return (const char *)out;
}

/* rows [j0, j0 + nj) of slot s of matrix (i2, i3) asked into L2 (1.1-1.3x at depth 4096 against L1) */
static void prefetch_rows(const pgc_node *n, int s, int64_t j0, int64_t nj, int64_t i2, int64_t i3) {
    pgc_prefetch_rows(pgc_ptr(n, s, 0, j0, i2, i3), nj, n->nb[s][1], pgc_row_size(n->type[s], n->ne[s][0]));
}

/* the queries unit u holds (the last unit of a matrix may hold fewer than g) */
static inline int64_t unit_queries(const fa_plan *p, int64_t u) {
    const int64_t left = p->per - (u % p->nqb) * p->g;
    return left < p->g ? left : p->g;
}

/* unit u's K/V matrix (ik2, ik3), its query batch iq3 and its first query k0 among the matrix's */
typedef struct fa_unit {
    int64_t ik2, ik3, iq3, k0;
} fa_unit;

static fa_unit unit_at(const pgc_node *n, const fa_plan *p, int64_t u) {
    const int64_t n_head_kv = n->ne[2][2], iq3 = u / (p->nqb * n_head_kv);
    const fa_unit un = {(u / p->nqb) % n_head_kv, iq3 / p->r3, iq3, u % p->nqb * p->g};
    return un;
}

/* the query (q row, head) of index k among the matrix's queries */
static inline void query_of(int64_t k, int64_t ik2, int64_t r2, int64_t *iq1, int64_t *iq2) {
    *iq1 = k / r2;
    *iq2 = ik2 * r2 + k % r2;
}

/* S[m * FA_KV_BLOCK + j] = qq[m] . K[j] for nj rows of a quantised K from K0 and g queries in its dot partner: the
   matmul's tiles (vec_dot's bits, ggml's kq_vec_dot) where the level has them, else vec_dot a pair at a time */
static void block_scores(const pgc_node *n, const fa_plan *p, const char *K0, int64_t nj, const char *qq, int64_t g,
                         float *S) {
    const int tk = n->type[2];
    const int64_t Dk = n->ne[1][0];
    const size_t ks = (size_t)n->nb[2][1], qs = p->qqf * 4;
    const pgc_q_tiles_fn tiles = pgc_S.q_tiles[tk];
    if (tiles) {
        tiles(Dk, K0, ks, nj, qq, qs, g, (char *)S, sizeof(float), sizeof(float) * FA_KV_BLOCK);
        return;
    }
    for (int64_t m = 0; m < g; m++)
        for (int64_t j = 0; j < nj; j++) pgc_S.vec_dot[tk](Dk, S + m * FA_KV_BLOCK + j, K0 + j * ks, qq + m * qs);
}

/* unit u's queries into st, their maxima at -inf, sums and values at 0 */
static void unit_start(const pgc_node *n, const fa_plan *p, int64_t u, const fa_state *st) {
    const int64_t Dk = n->ne[1][0], Dv = n->ne[3][0];
    const fa_unit un = unit_at(n, p, u);
    for (int64_t m = 0; m < unit_queries(p, u); m++) {
        int64_t iq1, iq2;
        query_of(un.k0 + m, un.ik2, p->r2, &iq1, &iq2);
        const char *qp = pgc_ptr(n, 1, 0, iq1, iq2, un.iq3);
        for (int64_t i = 0; i < Dk; i++) st->q[m * Dk + i] = *(const float *)(qp + i * n->nb[1][0]);
        if (st->qq) pgc_S.quantize[p->tq](st->q + m * Dk, st->qq + m * p->qqf * 4, Dk);
        st->m[m] = -INFINITY;
        st->l[m] = 0.0f;
        memset(st->o + m * Dv, 0, sizeof(float) * (size_t)Dv);
    }
}

/* dead[j] = 1 where each of the g queries (mask rows mrow) masks key j (-inf) of the block (nj keys from j0), else
   0; returns the keys some query sees. shadow (NULL: not asked) [j] = 1 where some query masks key j and another
   sees it, *shadowed their count: none where the queries' rows of the block are the same (a decode step's heads,
   a causal prompt off the diagonal), so the rows are compared first */
static int64_t mask_block(const char *const *mrow, int64_t g, int64_t j0, int64_t nj, int mask_f16, float *dead,
                          uint8_t *shadow, int64_t *shadowed) {
    const size_t es = mask_f16 ? 2 : 4;
    int64_t rows = 1, live = nj;
    for (int64_t m = 1; m < g && rows == 1; m++)
        if (mrow[m] != mrow[0] && memcmp(mrow[m] + j0 * es, mrow[0] + j0 * es, (size_t)nj * es)) rows = g;
    uint8_t masked[FA_KV_BLOCK] = {0}; /* how many of the rows mask key j: -inf compared as bits, row by row */
    for (int64_t m = 0; m < rows; m++) {
        const char *r = mrow[m] + j0 * es;
        if (mask_f16)
            for (int64_t j = 0; j < nj; j++) masked[j] += ((const uint16_t *)r)[j] == 0xFC00u;
        else
            for (int64_t j = 0; j < nj; j++) masked[j] += ((const uint32_t *)r)[j] == 0xFF800000u;
    }
    if (shadow) *shadowed = 0;
    for (int64_t j = 0; j < nj; j++) {
        dead[j] = masked[j] == rows ? 1.0f : 0.0f;
        live -= masked[j] == rows;
        if (!shadow) continue;
        shadow[j] = masked[j] > 0 && masked[j] < rows;
        *shadowed += shadow[j];
    }
    return live;
}

/* whether row j of K or V (slot s) of matrix (i2, i3) holds NaN or an infinity, as the kernel reads it (a row of
   another type converted into `tmp` first) */
static int row_nonfinite(const pgc_node *n, int s, int64_t j, int64_t i2, int64_t i3, float *tmp) {
    const int64_t d = n->ne[s][0];
    const char *x = pgc_ptr(n, s, 0, j, i2, i3);
    int bad = 0;
    if (n->type[s] == T_F16 && n->nb[s][0] == 2) {
        for (int64_t i = 0; i < d; i++) bad |= (((const uint16_t *)x)[i] & 0x7C00u) == 0x7C00u;
        return bad;
    }
    size_t stride;
    int f16;
    const uint32_t *y = (const uint32_t *)rows_of(n, s, j, 1, i2, i3, d, NULL, tmp, &stride, &f16);
    for (int64_t i = 0; y && i < d; i++) bad |= (y[i] & 0x7F800000u) == 0x7F800000u;
    return bad;
}

/* whether a shadowed key of the block (some queries mask it, others see it) holds NaN or an infinity in its K or V
   row, which the queries that mask it must not read (the tiles weigh such a key 0 for them, and 0 x NaN is NaN);
   each key's rows are looked at once a matrix (the units of a matrix share them), in the thread's memo */
static int shadow_nonfinite(const pgc_node *n, const fa_unit *un, int64_t j0, int64_t nj, const uint8_t *shadow,
                            const fa_scratch *w) {
    const int64_t matrix = un->ik2 + un->ik3 * n->ne[2][2];
    if (*w->memo_of != matrix) {
        memset(w->memo, 0, (size_t)n->ne[2][1]);
        *w->memo_of = matrix;
    }
    for (int64_t j = 0; j < nj; j++) {
        if (!shadow[j]) continue;
        uint8_t *known = w->memo + j0 + j;
        if (!*known) {
            const int bad = row_nonfinite(n, 2, j0 + j, un->ik2, un->ik3, w->k) ||
                            row_nonfinite(n, 3, j0 + j, un->ik2, un->ik3, w->v);
            *known = bad ? 2 : 1;
        }
        if (*known == 2) return 1;
    }
    return 0;
}

/* queries [m0, m0 + g) of unit un (mask rows mrow) against the block of nj keys from j0, `live` of them seen
   (w->dead says which not), st updated; 0 or an error code */
static int block_queries(const pgc_node *n, const fa_plan *p, const fa_unit *un, int64_t j0, int64_t nj,
                         int64_t live, const fa_state *st, const fa_scratch *w, int64_t m0, int64_t g,
                         const char *const *mrow) {
    const int64_t Dk = n->ne[1][0], Dv = n->ne[3][0], n_head = n->ne[1][2];
    const int mask_f16 = n->type[4] == T_F16;
    const int64_t mask_es = mask_f16 ? 2 : 4;
    float scale = n->fp[0];
    const float max_bias = n->fp[1], softcap = n->fp[2];
    if (softcap != 0.0f) scale /= softcap;
    float *M = st->m + m0, *L = st->l + m0, *O = st->o + m0 * Dv, *S = w->s, *dead = w->dead;
    const float *dead_or_none = live < nj ? dead : NULL;
    size_t ks, vs;
    int kf16, vf16;
    if (st->qq) /* a dead row's score is overwritten below */
        block_scores(n, p, pgc_ptr(n, 2, 0, j0, un->ik2, un->ik3), nj, st->qq + m0 * p->qqf * 4, g, S);
    else {
        const char *K = rows_of(n, 2, j0, nj, un->ik2, un->ik3, Dk, dead_or_none, w->k, &ks, &kf16);
        if (!K) return PGC_E_TYPE;
        scores(Dk, K, ks, kf16, nj, st->q + m0 * Dk, g, S, FA_KV_BLOCK);
    }
    for (int64_t m = 0; m < g; m++) {
        float *s = S + m * FA_KV_BLOCK, sc = scale;
        if (softcap != 0.0f) {
            for (int64_t j = 0; j < nj; j++) s[j] = softcap * tanhf(s[j] * scale);
            sc = 1.0f;
        }
        for (int64_t j = 0; dead_or_none && j < nj; j++)
            if (dead[j] != 0.0f) s[j] = 0.0f; /* its mask is -inf: the sum below is -inf, never NaN */
        int64_t iq1, iq2;
        query_of(un->k0 + m0 + m, un->ik2, p->r2, &iq1, &iq2);
        const float mx = pgc_softmax_in_row(nj, s, s, sc, mrow[m] ? mrow[m] + j0 * mask_es : NULL, mask_f16,
                                            pgc_alibi_slope(max_bias, iq2, n_head), M[m]);
        if (mx == -INFINITY) { /* every key so far masked for this query, or the scores it sees NaN (no maximum) */
            for (int64_t j = 0; j < nj; j++)
                if (isnan(s[j])) { /* as in ggml, the NaN reaches the output (and a merge of parts) */
                    M[m] = L[m] = NAN;
                    break;
                }
            memset(s, 0, sizeof(float) * (size_t)nj);
            continue;
        }
        if (mx > M[m]) {
            const float r = expf(M[m] - mx);
            for (int64_t i = 0; i < Dv; i++) O[m * Dv + i] *= r;
            L[m] *= r;
            M[m] = mx;
        }
        L[m] += (float)pgc_exp_sum_row(nj, s, s, mx);
    }
    const char *V = rows_of(n, 3, j0, nj, un->ik2, un->ik3, Dv, dead_or_none, w->v, &vs, &vf16);
    if (!V) return PGC_E_TYPE;
    values(Dv, V, vs, vf16, nj, dead_or_none, S, FA_KV_BLOCK, g, O);
    return PGC_OK;
}

/* unit u's queries against the block of keys from j0 (up to FA_KV_BLOCK of them, before c1: the end of the keys
   this state covers), st updated; 0 or an error code */
static int unit_block(const pgc_node *n, const fa_plan *p, int64_t u, int64_t j0, int64_t c1, const fa_state *st,
                      const fa_scratch *w) {
    const int64_t nj = c1 - j0 < FA_KV_BLOCK ? c1 - j0 : FA_KV_BLOCK;
    const fa_unit un = unit_at(n, p, u);
    const int64_t g = unit_queries(p, u);
    const int mask_f16 = n->type[4] == T_F16;
    const char *mrow[FA_QUERIES];
    for (int64_t m = 0; m < g; m++) {
        int64_t iq1, iq2;
        query_of(un.k0 + m, un.ik2, p->r2, &iq1, &iq2);
        mrow[m] = n->data[4] ? pgc_ptr(n, 4, 0, iq1, iq2 % n->ne[4][2], un.iq3 % n->ne[4][3]) : NULL;
    }
    uint8_t shadow[FA_KV_BLOCK];
    int64_t shadowed = 0;
    const int64_t live = mrow[0] ? mask_block(mrow, g, j0, nj, mask_f16, w->dead, shadow, &shadowed) : nj;
    if (live == 0) return PGC_OK;
    if (j0 + FA_KV_BLOCK < c1) { /* the next block's rows while this one computes: 1.09x at depth 4096 */
        const int64_t nn = c1 - j0 - FA_KV_BLOCK < FA_KV_BLOCK ? c1 - j0 - FA_KV_BLOCK : FA_KV_BLOCK;
        prefetch_rows(n, 2, j0 + FA_KV_BLOCK, nn, un.ik2, un.ik3);
        prefetch_rows(n, 3, j0 + FA_KV_BLOCK, nn, un.ik2, un.ik3);
    }
    if (!shadowed || !shadow_nonfinite(n, &un, j0, nj, shadow, w))
        return block_queries(n, p, &un, j0, nj, live, st, w, 0, g, mrow);
    for (int64_t m = 0; m < g; m++) { /* one query at a time: each drops every key it masks */
        const int64_t seen = mask_block(mrow + m, 1, j0, nj, mask_f16, w->dead, NULL, NULL);
        const int rc = seen ? block_queries(n, p, &un, j0, nj, seen, st, w, m, 1, mrow + m) : PGC_OK;
        if (rc) return rc;
    }
    return PGC_OK;
}

/* the output of unit u's query m from its maximum mx, sum and unnormalised values o: the sink joins the sum */
static void finish(const pgc_node *n, const fa_plan *p, int64_t u, int64_t m, float mx, float sum, const float *o) {
    const int64_t Dv = n->ne[3][0];
    const fa_unit un = unit_at(n, p, u);
    int64_t iq1, iq2;
    query_of(un.k0 + m, un.ik2, p->r2, &iq1, &iq2);
    float r = 1.0f;
    if (n->data[5]) {
        const float sink = *(const float *)((const char *)(uintptr_t)n->data[5] + iq2 * n->nb[5][0]);
        float vs;
        pg_online_softmax(mx, sink, &r, &vs);
        sum = sum * r + vs;
    }
    const float inv = sum == 0.0f ? 0.0f : r / sum;
    char *dp = pgc_ptr(n, 0, 0, iq2, iq1, un.iq3);
    for (int64_t i = 0; i < Dv; i++) *(float *)(dp + i * n->nb[0][0]) = o[i] * inv;
}

/* the keys of part `part` */
static void part_keys(const pgc_node *n, const fa_plan *p, int64_t part, int64_t *c0, int64_t *c1) {
    *c0 = n->ne[2][1] * part / p->parts;
    *c1 = n->ne[2][1] * (part + 1) / p->parts;
}

/* this thread's units and parts, their states left in the shared memory or (one part) finished */
static int run_parts(const pgc_node *n, const fa_plan *p, const pgc_tctx *c, const fa_scratch *w) {
    int rc = PGC_OK;
    int64_t c0, c1;
    if (p->keys_outer) { /* thread ith: part ith of every unit, block by block */
        if (c->ith >= p->parts) return PGC_OK;
        part_keys(n, p, c->ith, &c0, &c1);
        for (int64_t u = 0; u < p->units; u++) {
            const fa_state st = part_of(c, n, p, u, c->ith);
            unit_start(n, p, u, &st);
        }
        for (int64_t j0 = c0; j0 < c1 && !rc; j0 += FA_KV_BLOCK)
            for (int64_t u = 0; u < p->units && !rc; u++) {
                const fa_state st = part_of(c, n, p, u, c->ith);
                rc = unit_block(n, p, u, j0, c1, &st, w);
            }
        return rc;
    }
    int64_t i0, i1;
    pgc_split(p->units * p->parts, c->ith, c->nth, &i0, &i1);
    for (int64_t it = i0; it < i1 && !rc; it++) {
        const int64_t u = it / p->parts, part = it % p->parts;
        const fa_state st = p->parts > 1 ? part_of(c, n, p, u, part) : state_at(n, p, w->state);
        part_keys(n, p, part, &c0, &c1);
        unit_start(n, p, u, &st);
        for (int64_t j0 = c0; j0 < c1 && !rc; j0 += FA_KV_BLOCK)
            rc = unit_block(n, p, u, j0, c1, &st, w);
        for (int64_t m = 0; !rc && p->parts == 1 && m < unit_queries(p, u); m++)
            finish(n, p, u, m, st.m[m], st.l[m], st.o + m * n->ne[3][0]);
    }
    return rc;
}

int pgc_k_flash_attn(const pgc_node *n, const pgc_tctx *c) {
    const int64_t Dk = n->ne[1][0], Dv = n->ne[3][0];
    const int tk = n->type[2], tv = n->type[3];
    if (Dk % pgc_blck_size(tk) || Dv % pgc_blck_size(tv)) return PGC_E_TYPE;
    const fa_plan p = plan_of(n, c->nth);
    fa_scratch w;
    scratch_of(n, (float *)c->scratch, &w);
    *w.memo_of = -1; /* the rows' values change from one run to the next */
    int rc = run_parts(n, &p, c, &w);
    if (!shared_states(&p)) return rc;
    pgc_barrier(c);
    if (rc) return rc;
    /* merge the parts of each query: the largest maximum, the others' sums and values scaled down to it */
    float *o = w.state;
    int64_t u0, u1;
    pgc_split(p.units * p.g, c->ith, c->nth, &u0, &u1);
    for (int64_t k = u0; k < u1; k++) {
        const int64_t u = k / p.g, m = k % p.g;
        if (m >= unit_queries(&p, u)) continue;
        float mx = -INFINITY, sum = 0.0f;
        for (int64_t part = 0; part < p.parts; part++) {
            const float pm = part_of(c, n, &p, u, part).m[m];
            mx = pm > mx ? pm : mx;
        }
        for (int64_t i = 0; i < Dv; i++) o[i] = 0.0f;
        for (int64_t part = 0; part < p.parts; part++) {
            const fa_state st = part_of(c, n, &p, u, part);
            if (st.m[m] == -INFINITY) continue;
            const float r = expf(st.m[m] - mx);
            sum += st.l[m] * r;
            for (int64_t i = 0; i < Dv; i++) o[i] += st.o[m * Dv + i] * r;
        }
        finish(n, &p, u, m, mx, sum, o);
    }
    return PGC_OK;
}
