/* The R8 weight layout: Q4_0, Q4_1 and Q8_0 matrices with rows interleaved by eight, chosen at load time for
   weights that only MUL_MAT reads (the cpu_repack buffer type), so that one 256-bit byte dot computes a partial
   sum for each of eight rows at once: no horizontal sums, and the block scales of eight rows convert as one
   vector. Same size as the plain layout, group by group: the bytes of rows 8g..8g+7 stay in their place.

   A group is a sequence of tiles, one per 32-value block: the eight rows' d (F16), Q4_1's eight m, then the
   values in chunks of 32 bytes, chunk j holding bytes 4j..4j+3 of each row's qs in turn (row r at 4r).
   Q8_0's values are stored plus 128 (unsigned), which VPDPBUSD wants. */
#ifndef PGC_REPACK_H
#define PGC_REPACK_H
#include "quants.h"


static inline int r8_ok(int type) { return type == T_Q4_0 || type == T_Q4_1 || type == T_Q8_0; }
/* bytes of a tile's header (scales, mins) and of its value chunks */
static inline int r8_hdr(int type) { return type == T_Q4_1 ? 32 : 16; }
static inline int r8_chunks(int type) { return type == T_Q8_0 ? 8 : 4; }
static inline int r8_tile(int type) { return r8_hdr(type) + 32 * r8_chunks(type); }
#endif
