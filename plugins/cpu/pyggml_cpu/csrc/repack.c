/* The R8 layout (repack.h): conversion from and to ggml's block layout, and the portable kernel, which defines
   the bits every SIMD level's kernel (dot_x86_r8.h) reproduces. */
#include "repack.h"

#include "api.h"

/* block b of row r (plain layout) <-> tile b of its group: the header fields and the value bytes */
static void tile_from_rows(int type, const uint8_t *rows, size_t row_bytes, int64_t b, uint8_t *tile) {
    const int bs = pgc_type_size(type), nq = 32 * r8_chunks(type), nibbles = type != T_Q8_0;
    uint16_t *d = (uint16_t *)tile, *m = d + R8_ROWS;
    uint8_t *q = tile + r8_hdr(type);
    for (int r = 0; r < R8_ROWS; r++) {
        const uint8_t *blk = rows + r * row_bytes + b * bs;
        memcpy(&d[r], blk, 2);
        if (type == T_Q4_1) memcpy(&m[r], blk + 2, 2);
        const uint8_t *qs = blk + (type == T_Q4_1 ? 4 : 2);
        for (int j = 0; j < nq / 32; j++)
            for (int i = 0; i < 4; i++) q[32 * j + 4 * r + i] = nibbles ? qs[4 * j + i] : qs[4 * j + i] ^ 0x80;
    }
}

static void rows_from_tile(int type, const uint8_t *tile, uint8_t *rows, size_t row_bytes, int64_t b) {
    const int bs = pgc_type_size(type), nq = 32 * r8_chunks(type), nibbles = type != T_Q8_0;
    const uint16_t *d = (const uint16_t *)tile, *m = d + R8_ROWS;
    const uint8_t *q = tile + r8_hdr(type);
    for (int r = 0; r < R8_ROWS; r++) {
        uint8_t *blk = rows + r * row_bytes + b * bs;
        memcpy(blk, &d[r], 2);
        if (type == T_Q4_1) memcpy(blk + 2, &m[r], 2);
        uint8_t *qs = blk + (type == T_Q4_1 ? 4 : 2);
        for (int j = 0; j < nq / 32; j++)
            for (int i = 0; i < 4; i++) qs[4 * j + i] = nibbles ? q[32 * j + 4 * r + i] : q[32 * j + 4 * r + i] ^ 0x80;
    }
}

int pgc_repack_r8(int type, const void *src, void *dst, int64_t nrows, int64_t ne0, int to_plain) {
    if (!r8_ok(type)) return PGC_E_TYPE;
    if (nrows % R8_ROWS || ne0 % QK || src == dst) return PGC_E_SHAPE;
    const size_t row_bytes = (size_t)pgc_row_size(type, ne0), tile = (size_t)r8_tile(type);
    const int64_t nb = ne0 / QK;
    for (int64_t g = 0; g < nrows / R8_ROWS; g++) {
        const size_t base = (size_t)g * R8_ROWS * row_bytes; /* a group keeps its rows' bytes */
        for (int64_t b = 0; b < nb; b++) {
            if (to_plain)
                rows_from_tile(type, (const uint8_t *)src + base + b * tile, (uint8_t *)dst + base, row_bytes, b);
            else
                tile_from_rows(type, (const uint8_t *)src + base, row_bytes, b, (uint8_t *)dst + base + b * tile);
        }
    }
    return PGC_OK;
}

/* the portable kernel: ggml's AVX2 vec_dot arithmetic, row by row. A block's dot is eight integer lane sums (lane
   l: values 4l..4l+3 of the 32-byte value vector, for the nibble types the low nibbles of bytes 0..15 then the
   high ones), each scaled and added to its own float accumulator; the row's accumulators sum as hsum_float_8 does;
   Q4_1 adds the min terms, summed apart. */
static void r8_portable(int type, int64_t k, const void *vx, const void *vy, float out[R8_ROWS]) {
    const int hdr = r8_hdr(type), tile = r8_tile(type);
    for (int r = 0; r < R8_ROWS; r++) {
            float acc[8] = {0}, summs = 0.0f;
            for (int64_t b = 0; b < k / QK; b++) {
                const uint8_t *t = (const uint8_t *)vx + b * tile, *q = t + hdr;
                const uint16_t *d = (const uint16_t *)t;
                const bq8_1 *y1 = (const bq8_1 *)vy + b;
                const bq8_0 *y0 = (const bq8_0 *)vy + b;
                const int8_t *yq = type == T_Q4_1 ? y1->qs : y0->qs;
                const float dy = F16T(type == T_Q4_1 ? y1->d : y0->d);
                for (int l = 0; l < 8; l++) {
                    int32_t lane = 0;
                    for (int i = 0; i < 4; i++) {
                        int v;
                        if (type == T_Q8_0) v = (int)q[32 * l + 4 * r + i] - 128;
                        else if (l < 4) v = (q[32 * l + 4 * r + i] & 0xF) - (type == T_Q4_0 ? 8 : 0);
                        else v = (q[32 * (l - 4) + 4 * r + i] >> 4) - (type == T_Q4_0 ? 8 : 0);
                        lane += v * yq[4 * l + i];
                    }
                    acc[l] = fmaf((float)lane, F16T(d[r]) * dy, acc[l]);
                }
                if (type == T_Q4_1) summs = fmaf(F16T(d[R8_ROWS + r]), F16T(y1->s), summs);
            }
            const float sum = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
            out[r] = type == T_Q4_1 ? sum + summs : sum;
        }
}

#define R8_ENTRY(name, T)                                                                                \
    static void name(int64_t k, const void *x, const void *y, float out[R8_ROWS]) {                      \
        r8_portable(T, k, x, y, out);                                                                    \
    }
R8_ENTRY(r8_q4_0_portable, T_Q4_0)
R8_ENTRY(r8_q4_1_portable, T_Q4_1)
R8_ENTRY(r8_q8_0_portable, T_Q8_0)

void pgc_r8_portable(pgc_simd *s) {
    s->r8[T_Q4_0] = r8_q4_0_portable;
    s->r8[T_Q4_1] = r8_q4_1_portable;
    s->r8[T_Q8_0] = r8_q8_0_portable;
}

int pgc_r8_simd(int type) {
    if (!r8_ok(type) || !pgc_S.r8[type]) return 0;
    const pgc_r8_fn portable = type == T_Q4_0 ? r8_q4_0_portable : type == T_Q4_1 ? r8_q4_1_portable
                             : r8_q8_0_portable;
    return pgc_S.r8[type] != portable;
}

int pgc_r8_matvec(int type, const void *x, int64_t nrows, int64_t k, const void *y, float *out) {
    if (!r8_ok(type) || !pgc_S.r8[type]) return PGC_E_TYPE;
    if (nrows % R8_ROWS || k % QK) return PGC_E_SHAPE;
    const size_t group = (size_t)R8_ROWS * (size_t)pgc_row_size(type, k);
    for (int64_t g = 0; g < nrows / R8_ROWS; g++) pgc_S.r8[type](k, (const char *)x + g * group, y, out + g * R8_ROWS);
    return PGC_OK;
}
