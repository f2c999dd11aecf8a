/* The R8 layout (repack.h): conversion from and to ggml's block layout, and the portable kernel, which defines
   the bits every SIMD level's kernel (dot_x86_r8.h) reproduces. */
#include "repack.h"

#include "api.h"

#include <pthread.h>
#include <unistd.h>

/* Q4_K's 6-bit scales and mins (repack.h): scale / min `idx` (8 * sub-block + row) of a tile's header. k4_header
   writes all 64 of a tile at once, k4_get reads one. */
static inline void k4_header(uint8_t *h, const uint8_t sc[64], const uint8_t mn[64]) {
    for (int i = 0; i < 32; i++) {
        h[32 + i] = (uint8_t)((sc[i] & 15) | (sc[i + 32] & 15) << 4);
        h[64 + i] = (uint8_t)((mn[i] & 15) | (mn[i + 32] & 15) << 4);
        h[96 + i] = (uint8_t)(sc[i] >> 4 | (sc[i + 32] >> 4) << 2 | (mn[i] >> 4) << 4 | (mn[i + 32] >> 4) << 6);
    }
}

static void k4_get(const uint8_t *h, int idx, int *sc, int *mn) {
    const int i = idx & 31, hi = idx >> 5;
    *sc = (h[32 + i] >> (4 * hi) & 15) | (h[96 + i] >> (2 * hi) & 3) << 4;
    *mn = (h[64 + i] >> (4 * hi) & 15) | (h[96 + i] >> (4 + 2 * hi) & 3) << 4;
}

/* the offset in a block of the 4 bytes (of each row) that a tile's value chunk c holds (repack.h): the K types'
   chunks in the order their kernels first read them, so that a mat-vec streams each tile front to back */
static int chunk_off(int type, int c) {
    switch (type) {
    case T_Q4_0: return 2 + 4 * c;
    case T_Q4_1: return 4 + 4 * c;
    case T_Q5_0: return c ? 6 + 4 * (c - 1) : 2; /* qh (its bits regrouped: q5_bits), then qs */
    case T_Q5_1: return c ? 8 + 4 * (c - 1) : 4;
    case T_Q8_0: return 2 + 4 * c;
    case T_Q4_K: return 16 + 4 * c;
    case T_Q5_K: return c < 8 ? 16 + 4 * c : 48 + 4 * (c - 8); /* qh, then qs */
    default: {                                                 /* Q6_K: (ql, ql, qh) triples */
        const int t = c / 3, h = t / 8, mm = t % 8;
        return c % 3 == 2 ? 128 + 4 * (8 * h + mm) : 4 * (16 * h + 8 * (c % 3) + mm);
    }
    }
}

/* the offset in a block of its d (Q6_K keeps it last) */
static int d_off(int type) { return type == T_Q6_K ? 208 : 0; }

/* Q5_0's and Q5_1's qh word (bit j: the fifth bit of value j) regrouped for the R8 layout: bit l of byte i holds bit 4l + i */
static uint32_t q5_bits(uint32_t qh, int to_plain) {
    uint32_t out = 0;
    for (int l = 0; l < 8; l++)
        for (int i = 0; i < 4; i++) {
            const int plain = 4 * l + i, r8 = 8 * i + l;
            out |= (qh >> (to_plain ? r8 : plain) & 1u) << (to_plain ? plain : r8);
        }
    return out;
}

/* what a value chunk's bytes are XORed with in the R8 layout (Q8_0's bytes become unsigned) */
static inline uint32_t chunk_flip(int type) { return type == T_Q8_0 ? 0x80808080u : 0; }

/* block b of the group's rows (plain layout) <-> tile b of the group: the header fields and the value bytes. Both
   are inlined into a loop per type (convert_groups), so that the chunks' offsets are constants. */
static inline __attribute__((always_inline)) void tile_from_rows(int type, const uint8_t *rows, size_t row_bytes,
                                                                 int64_t b, uint8_t *tile) {
    const int bs = pgc_type_size(type);
    uint16_t d[R8_ROWS], m[R8_ROWS];
    uint8_t scs[64], mns[64];
    uint8_t *q = tile + r8_hdr(type);
    for (int r = 0; r < R8_ROWS; r++) {
        const uint8_t *blk = rows + r * row_bytes + b * bs;
        memcpy(&d[r], blk + d_off(type), 2);
        if (type == T_Q4_1 || type == T_Q5_1 || type == T_Q4_K || type == T_Q5_K) memcpy(&m[r], blk + 2, 2);
        if (type == T_Q4_K || type == T_Q5_K)
            for (int j = 0; j < 8; j++) {
                int sc, mn;
                pg_scale_min_k4(j, blk + 4, &sc, &mn);
                scs[8 * j + r] = (uint8_t)sc;
                mns[8 * j + r] = (uint8_t)mn;
            }
        if (type == T_Q6_K)
            for (int j = 0; j < 16; j++) tile[16 + 8 * j + r] = blk[192 + j];
        _Pragma("GCC unroll 48") for (int c = 0; c < r8_chunks(type); c++) {
            uint32_t v;
            memcpy(&v, blk + chunk_off(type, c), 4);
            v = (type == T_Q5_0 || type == T_Q5_1) && c == 0 ? q5_bits(v, 0) : v ^ chunk_flip(type);
            memcpy(q + 32 * c + 4 * r, &v, 4);
        }
    }
    memcpy(tile, d, sizeof(d));
    if (type == T_Q4_1 || type == T_Q5_1 || type == T_Q4_K || type == T_Q5_K) memcpy(tile + 16, m, sizeof(m));
    if (type == T_Q4_K || type == T_Q5_K) k4_header(tile, scs, mns);
}

static inline __attribute__((always_inline)) void rows_from_tile(int type, const uint8_t *tile, uint8_t *rows,
                                                                 size_t row_bytes, int64_t b) {
    const int bs = pgc_type_size(type);
    const uint8_t *q = tile + r8_hdr(type);
    for (int r = 0; r < R8_ROWS; r++) {
        uint8_t *blk = rows + r * row_bytes + b * bs;
        memcpy(blk + d_off(type), tile + 2 * r, 2);
        if (type == T_Q4_1 || type == T_Q5_1 || type == T_Q4_K || type == T_Q5_K) memcpy(blk + 2, tile + 16 + 2 * r, 2);
        if (type == T_Q4_K || type == T_Q5_K) { /* the inverse of pg_scale_min_k4 */
            int sc[8], mn[8];
            for (int j = 0; j < 8; j++) k4_get(tile, 8 * j + r, &sc[j], &mn[j]);
            for (int j = 0; j < 4; j++) {
                blk[4 + j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
                blk[8 + j] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
                blk[12 + j] = (uint8_t)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
            }
        }
        if (type == T_Q6_K)
            for (int j = 0; j < 16; j++) blk[192 + j] = tile[16 + 8 * j + r];
        _Pragma("GCC unroll 48") for (int c = 0; c < r8_chunks(type); c++) {
            uint32_t v;
            memcpy(&v, q + 32 * c + 4 * r, 4);
            v = (type == T_Q5_0 || type == T_Q5_1) && c == 0 ? q5_bits(v, 1) : v ^ chunk_flip(type);
            memcpy(blk + chunk_off(type, c), &v, 4);
        }
    }
}

typedef struct {
    int type, to_plain;
    const uint8_t *src;
    uint8_t *dst;
    int64_t g0, g1, nb;
    size_t row_bytes;
} convert_job;

static inline size_t base(const convert_job *j, int64_t g) { return (size_t)g * R8_ROWS * j->row_bytes; }

/* the job's groups to or from the R8 layout, type T a constant (measured: the loop over a run-time type converted
   2.6 GB/s a core); a group keeps its rows' bytes */
#define CONVERT(T)                                                                                                    \
    case T:                                                                                                           \
        for (int64_t g = j->g0; g < j->g1; g++)                                                                       \
            for (int64_t b = 0; b < j->nb; b++) {                                                                     \
                const size_t at = base(j, g), tile = (size_t)b * r8_tile(T);                                          \
                if (j->to_plain) rows_from_tile(T, j->src + at + tile, j->dst + at, j->row_bytes, b);                 \
                else tile_from_rows(T, j->src + at, j->row_bytes, b, j->dst + at + tile);                             \
            }                                                                                                         \
        break;

static void *convert_groups(void *arg) {
    const convert_job *j = (const convert_job *)arg;
    switch (j->type) {
        CONVERT(T_Q4_0)
        CONVERT(T_Q4_1)
        CONVERT(T_Q5_0)
        CONVERT(T_Q5_1)
        CONVERT(T_Q8_0)
        CONVERT(T_Q4_K)
        CONVERT(T_Q5_K)
        CONVERT(T_Q6_K)
    }
    return NULL;
}
#undef CONVERT

/* conversions of 8 MiB or more split their groups over up to 8 threads (a model's load repacks every weight) */
#define CONVERT_SPLIT_BYTES (8u << 20)

int pgc_repack_r8(int type, const void *src, void *dst, int64_t nrows, int64_t ne0, int to_plain) {
    if (!r8_ok(type)) return PGC_E_TYPE;
    if (nrows % R8_ROWS || ne0 % r8_blck(type) || src == dst) return PGC_E_SHAPE;
    const size_t row_bytes = (size_t)pgc_row_size(type, ne0);
    const int64_t ng = nrows / R8_ROWS;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = (size_t)nrows * row_bytes >= CONVERT_SPLIT_BYTES && cpus > 1 ? (int)(cpus < 8 ? cpus : 8) : 1;
    if (nt > ng) nt = (int)(ng > 0 ? ng : 1);
    convert_job jobs[8];
    pthread_t th[8];
    int started = 0;
    for (int t = 0; t < nt; t++) {
        jobs[t] = (convert_job){type, to_plain, (const uint8_t *)src, (uint8_t *)dst, ng * t / nt, ng * (t + 1) / nt,
                                ne0 / r8_blck(type), row_bytes};
        if (t && pthread_create(&th[t], NULL, convert_groups, &jobs[t]) == 0) started |= 1 << t;
        else if (t) convert_groups(&jobs[t]); /* no thread: this one does its share */
    }
    convert_groups(&jobs[0]);
    for (int t = 1; t < nt; t++)
        if (started & 1 << t) pthread_join(th[t], NULL);
    return PGC_OK;
}

/* the portable kernels, which define the bits. Q4_1: ggml's AVX2 vec_dot arithmetic, row by row. A block's dot is
   eight integer lane sums (lane l: values 4l..4l+3 of the 32-byte value vector: the low nibbles of bytes 0..15 then
   the high ones), each scaled and added to its own float accumulator; the row's accumulators sum as hsum_float_8
   does, then the min terms, summed apart. */
static void r8_q4_1_rows(int type, int64_t k, const void *vx, const void *vy, float out[R8_ROWS]) {
    (void)type;
    const int hdr = r8_hdr(T_Q4_1), tile = r8_tile(T_Q4_1);
    for (int r = 0; r < R8_ROWS; r++) {
        float acc[8] = {0}, summs = 0.0f;
        for (int64_t b = 0; b < k / QK; b++) {
            const uint8_t *t = (const uint8_t *)vx + b * tile, *q = t + hdr;
            const uint16_t *d = (const uint16_t *)t;
            const bq8_1 *y = (const bq8_1 *)vy + b;
            for (int l = 0; l < 8; l++) {
                int32_t lane = 0;
                for (int i = 0; i < 4; i++) {
                    const uint8_t byte = q[32 * (l % 4) + 4 * r + i];
                    lane += (l < 4 ? byte & 0xF : byte >> 4) * y->qs[4 * l + i];
                }
                acc[l] = fmaf((float)lane, F16T(d[r]) * F16T(y->d), acc[l]);
            }
            summs = fmaf(F16T(d[R8_ROWS + r]), F16T(y->s), summs);
        }
        const float sum = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
        out[r] = sum + summs;
    }
}

/* Q4_0, Q5_0, Q5_1 and Q8_0 (R8 only, not ggml's order): a block's dot in integers, values (nibble - 8, nibble + 16
   x fifth bit, less 16 for Q5_0, or the byte) . activations, converted once and added with one fused multiply-add of
   d x y.d, as the K types'; Q5_1's min terms m x y.s summed apart and added at the end. */
static void r8_q4_0_q8_0_rows(int type, int64_t k, const void *vx, const void *vy, float out[R8_ROWS]) {
    const int tile = r8_tile(type), bs = pgc_type_size(type), q8_1 = type == T_Q5_1;
    float acc[R8_ROWS] = {0}, accm[R8_ROWS] = {0};
    uint8_t blocks[R8_ROWS * sizeof(bq8_0)];
    for (int64_t b = 0; b < k / QK; b++) {
        rows_from_tile(type, (const uint8_t *)vx + b * tile, blocks, (size_t)bs, 0);
        const bq8_0 *y0 = (const bq8_0 *)vy + b;
        const bq8_1 *y1 = (const bq8_1 *)vy + b;
        const int8_t *yq = q8_1 ? y1->qs : y0->qs;
        for (int r = 0; r < R8_ROWS; r++) {
            const uint8_t *blk = blocks + r * bs;
            int32_t sumi = 0;
            uint32_t qh;
            memcpy(&qh, blk + (q8_1 ? 4 : 2), 4);
            const uint8_t *qs = blk + (type == T_Q5_0 ? 6 : q8_1 ? 8 : 2);
            for (int i = 0; i < QK; i++) {
                const int nib = qs[i % 16] >> (i / 16 * 4) & 15, fifth = (int)(qh >> i & 1) << 4;
                const int v = type == T_Q8_0 ? (int8_t)qs[i] : type == T_Q5_0 ? (nib | fifth) - 16
                            : q8_1 ? nib | fifth : nib - 8;
                sumi += v * yq[i];
            }
            uint16_t d, m;
            memcpy(&d, blk, 2);
            memcpy(&m, blk + 2, 2);
            acc[r] = fmaf(F16T(d) * F16T(q8_1 ? y1->d : y0->d), (float)sumi, acc[r]);
            if (q8_1) accm[r] = fmaf(F16T(m), F16T(y1->s), accm[r]);
        }
    }
    for (int r = 0; r < R8_ROWS; r++) out[r] = q8_1 ? acc[r] + accm[r] : acc[r];
}

/* The K types (R8 only, not ggml's order): a block's whole dot in integers, sum over sub-blocks of scale x (values .
   activations), and for Q4_K and Q5_K of the mins term, min x (the sub-block's activation sum); each converted once
   and added to the row's float accumulators with one fused multiply-add, d x y.d (and dmin x y.d, subtracted at the
   end). Rounded once per block rather than once per lane: as close to the exact dot as ggml's. Written over a tile's
   eight rows unpacked back to ggml's blocks (rows_from_tile), in ggml's value order. */
static void r8_k_rows(int type, int64_t k, const void *vx, const void *vy, float out[R8_ROWS]) {
    const int tile = r8_tile(type), bs = pgc_type_size(type);
    float acc[R8_ROWS] = {0}, accm[R8_ROWS] = {0};
    uint8_t blocks[R8_ROWS * 210];
    for (int64_t b = 0; b < k / QKK; b++) {
        rows_from_tile(type, (const uint8_t *)vx + b * tile, blocks, (size_t)bs, 0);
        const bq8_K *y = (const bq8_K *)vy + b;
        for (int r = 0; r < R8_ROWS; r++) {
            const uint8_t *blk = blocks + r * bs;
            int32_t sumi = 0, summ = 0;
            if (type == T_Q6_K) {
                const bq6_K *x = (const bq6_K *)blk;
                for (int v = 0; v < QKK; v++) { /* ggml's order: half h, quarter s, l */
                    const int h = v / 128, s = v / 32 % 4, l = v % 32;
                    const uint8_t lo = x->ql[64 * h + 32 * (s & 1) + l];
                    const int q = (s >= 2 ? lo >> 4 : lo & 15) | (x->qh[32 * h + l] >> (2 * s) & 3) << 4;
                    sumi += x->scales[v / 16] * ((q - 32) * y->qs[v]);
                }
            } else {
                const uint8_t *qs = blk + (type == T_Q5_K ? 48 : 16), *qh = blk + 16;
                for (int sb = 0; sb < 8; sb++) {
                    int sc, mn, dot = 0;
                    pg_scale_min_k4(sb, blk + 4, &sc, &mn);
                    for (int p = 0; p < 32; p++) { /* value 32 sb + p: qs byte 32 (sb / 2) + p, high nibble for odd sb */
                        const uint8_t byte = qs[32 * (sb / 2) + p];
                        int v = sb & 1 ? byte >> 4 : byte & 15;
                        if (type == T_Q5_K) v |= (qh[p] >> sb & 1) << 4;
                        dot += v * y->qs[32 * sb + p];
                    }
                    sumi += sc * dot;
                    summ += mn * (y->bsums[2 * sb] + y->bsums[2 * sb + 1]);
                }
            }
            uint16_t d, dmin;
            memcpy(&d, blk + (type == T_Q6_K ? 208 : 0), 2);
            memcpy(&dmin, blk + 2, 2);
            acc[r] = fmaf(F16T(d) * y->d, (float)sumi, acc[r]);
            if (type != T_Q6_K) accm[r] = fmaf(F16T(dmin) * y->d, (float)summ, accm[r]);
        }
    }
    for (int r = 0; r < R8_ROWS; r++) out[r] = acc[r] - accm[r];
}

/* a pgc_r8_fn from a one-group, one-column kernel of type T */
#define R8_ENTRY(t, T, rows)                                                                                  \
    static void r8_##t##_portable(int64_t k, const void *x, size_t gb, int ng, const void *y, size_t by, int nc, \
                                  float *out) {                                                               \
        for (int c = 0; c < nc; c++)                                                                          \
            for (int g = 0; g < ng; g++)                                                                      \
                rows(T, k, (const char *)x + g * gb, (const char *)y + c * by, out + (c * ng + g) * R8_ROWS); \
    }
R8_ENTRY(q4_0, T_Q4_0, r8_q4_0_q8_0_rows)
R8_ENTRY(q4_1, T_Q4_1, r8_q4_1_rows)
R8_ENTRY(q5_0, T_Q5_0, r8_q4_0_q8_0_rows)
R8_ENTRY(q5_1, T_Q5_1, r8_q4_0_q8_0_rows)
R8_ENTRY(q8_0, T_Q8_0, r8_q4_0_q8_0_rows)
R8_ENTRY(q4_K, T_Q4_K, r8_k_rows)
R8_ENTRY(q5_K, T_Q5_K, r8_k_rows)
R8_ENTRY(q6_K, T_Q6_K, r8_k_rows)
#undef R8_ENTRY

/* the portable kernel of each R8 type (r8_ok) */
static const pgc_r8_fn PORTABLE[T_COUNT] = {
    [T_Q4_0] = r8_q4_0_portable, [T_Q4_1] = r8_q4_1_portable, [T_Q5_0] = r8_q5_0_portable,
    [T_Q5_1] = r8_q5_1_portable, [T_Q8_0] = r8_q8_0_portable, [T_Q4_K] = r8_q4_K_portable,
    [T_Q5_K] = r8_q5_K_portable, [T_Q6_K] = r8_q6_K_portable};

void pgc_r8_portable(pgc_simd *s) {
    for (int t = 0; t < T_COUNT; t++)
        if (PORTABLE[t]) s->r8[t] = PORTABLE[t];
}

int pgc_r8_simd(int type) {
    if (!r8_ok(type) || !pgc_S.r8[type]) return 0;
    return pgc_S.r8[type] != PORTABLE[type];
}

int pgc_r8_matmul(int type, const void *x, int64_t nrows, int64_t k, const void *y, int64_t ny, float *out) {
    if (!r8_ok(type) || !pgc_S.r8[type]) return PGC_E_TYPE;
    if (nrows % R8_ROWS || k % r8_blck(type) || ny < 0) return PGC_E_SHAPE;
    const size_t group = (size_t)R8_ROWS * (size_t)pgc_row_size(type, k);
    const size_t by = (size_t)pgc_row_size(pgc_vec_dot_type(type), k);
    const int64_t ngroups = nrows / R8_ROWS;
    float o[R8_MAX_COLS * R8_GROUPS * R8_ROWS];
    for (int64_t c0 = 0; c0 < ny; c0 += R8_MAX_COLS) {
        const int nc = ny - c0 < R8_MAX_COLS ? (int)(ny - c0) : R8_MAX_COLS;
        for (int64_t g = 0; g < ngroups; g += R8_GROUPS) {
            const int ng = ngroups - g < R8_GROUPS ? (int)(ngroups - g) : R8_GROUPS;
            pgc_S.r8[type](k, (const char *)x + g * group, group, ng, (const char *)y + c0 * by, by, nc, o);
            for (int c = 0; c < nc; c++)
                memcpy(out + (c0 + c) * nrows + g * R8_ROWS, o + c * ng * R8_ROWS, sizeof(float) * ng * R8_ROWS);
        }
    }
    return PGC_OK;
}
