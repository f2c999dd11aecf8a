/* The R8 weight layout: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K matrices with rows interleaved by eight,
   chosen at load time for weights that only MUL_MAT reads (the cpu_repack buffer type), so that one 256-bit byte dot
   computes a partial sum for each of eight rows at once: no horizontal sums, and the block scales of eight rows
   convert as one vector. Same size as the plain layout, group by group: the bytes of rows 8g..8g+7 stay in place.

   A group is a sequence of tiles, one per block (32 values; the K types: 256): the eight rows' d (F16), the eight m
   of Q4_1 and Q5_1 (dmin of Q4_K and Q5_K), the K types' scales (and mins), then the values in chunks of 32 bytes,
   chunk j holding bytes 4j..4j+3 of each row's value bytes in turn (row r at 4r). Q8_0's values are stored plus
   128 (unsigned), which VPDPBUSD wants. The first chunk of Q5_0 and Q5_1 holds their qh with the bits regrouped:
   bit l of byte i is the fifth bit of value 4l + i, so that one shift and mask place values 4l..4l+3's fifth bits.
   - Q4_K and Q5_K: the 6-bit scales and mins (index 8 * sub-block + row) are regrouped so that a few vector
     operations unpack all 64 of each: 32 bytes of scale low nibbles (byte i: index i low, index i + 32 high), 32 of
     min low nibbles, then 32 of high bits (byte i: bits 0-1 scale i, 2-3 scale i + 32, 4-5 min i, 6-7 min i + 32).
     Then 32 chunks of qs; Q5_K's 8 chunks of qh (its fifth bits) come before them.
   - Q6_K: the 16 scales of each row as bytes (index 8 * sub-block + row, sub-blocks of 16 values), then 16 triples
     of chunks, triple 8h + mm being ql chunks 16h + mm and 16h + 8 + mm (the low four bits) and qh chunk 8h + mm (the
     high two) of the values of half h.
   The K types' chunks are in the order their kernels first read them, so that a mat-vec streams each tile. */
#ifndef PGC_REPACK_H
#define PGC_REPACK_H
#include "quants.h"

static inline int r8_ok(int type) {
    return type == T_Q4_0 || type == T_Q4_1 || type == T_Q5_0 || type == T_Q5_1 || type == T_Q8_0 || type == T_Q4_K ||
           type == T_Q5_K || type == T_Q6_K;
}
static inline int r8_k(int type) { return type == T_Q4_K || type == T_Q5_K || type == T_Q6_K; }
/* values per tile, bytes of a tile's header (scales, mins) and of its value chunks */
static inline int r8_blck(int type) { return r8_k(type) ? QKK : QK; }
static inline int r8_hdr(int type) {
    return type == T_Q6_K ? 16 + 128 : type == T_Q4_K || type == T_Q5_K ? 128 : type == T_Q4_1 || type == T_Q5_1 ? 32 : 16;
}
static inline int r8_chunks(int type) {
    return type == T_Q6_K ? 48 : type == T_Q5_K ? 40 : type == T_Q4_K ? 32 : type == T_Q8_0 ? 8 : type == T_Q5_0 || type == T_Q5_1 ? 5 : 4;
}
static inline int r8_tile(int type) { return r8_hdr(type) + 32 * r8_chunks(type); }
#endif
