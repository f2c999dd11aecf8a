/* pyggml kernel conventions shared by every kernel file (OpenCL and CUDA, through dialect.h).
 *
 * A tensor argument is TENSOR(x): a byte pointer to the start of its buffer, the tensor's byte offset in it,
 * ne[4] and nb[4] (ggml's element counts and byte strides, dim 0 innermost). The host passes the buffer and
 * offset separately because sub-buffers would need aligned origins.
 *
 * Plain element types are named f32 f16 bf16 i32 i16 i8 i64; LOADT(T, p) reads one element at byte address p
 * as float, STORET(T, p, v) writes one. Quantised types (quants.h) add ELEM(T, row, k): element k of a row.
 */
#ifndef PYGGML_COMMON_H
#define PYGGML_COMMON_H
#include "dialect.h"

#define TENSOR(x) GLOBAL char *x##_p, i64 x##_off, i64 x##_ne0, i64 x##_ne1, i64 x##_ne2, i64 x##_ne3, \
    i64 x##_nb0, i64 x##_nb1, i64 x##_nb2, i64 x##_nb3
/* the arguments of TENSOR(x), to hand x on to a helper that takes a TENSOR */
#define TENSOR_ARGS(x) x##_p, x##_off, x##_ne0, x##_ne1, x##_ne2, x##_ne3, x##_nb0, x##_nb1, x##_nb2, x##_nb3
#define BASE(x) (x##_p + x##_off)
#define AT(x, i0, i1, i2, i3) (BASE(x) + (i0) * x##_nb0 + (i1) * x##_nb1 + (i2) * x##_nb2 + (i3) * x##_nb3)
#define NEL(x) (x##_ne0 * x##_ne1 * x##_ne2 * x##_ne3)
#define NROWS(x) (x##_ne1 * x##_ne2 * x##_ne3)

/* split a linear index over ne0..ne2 (ne3 implied) into four indices */
#define UNRAVEL(x, i, i0, i1, i2, i3) \
    i64 i0 = (i) % x##_ne0; i64 i1 = ((i) / x##_ne0) % x##_ne1; \
    i64 i2 = ((i) / (x##_ne0 * x##_ne1)) % x##_ne2; i64 i3 = (i) / (x##_ne0 * x##_ne1 * x##_ne2)

INLINE float load_f32(GLOBAL const char *p) { return *(GLOBAL const float *)p; }
INLINE float load_f16(GLOBAL const char *p) { return LOAD_HALF(p, 0); }
INLINE float load_bf16(GLOBAL const char *p) { return AS_FLOAT(((u32)*(GLOBAL const u16 *)p) << 16); }
INLINE float load_i32(GLOBAL const char *p) { return (float)*(GLOBAL const i32 *)p; }
INLINE float load_i16(GLOBAL const char *p) { return (float)*(GLOBAL const i16 *)p; }
INLINE float load_i8(GLOBAL const char *p) { return (float)*(GLOBAL const i8 *)p; }
INLINE float load_i64(GLOBAL const char *p) { return (float)*(GLOBAL const i64 *)p; }

INLINE void store_f32(GLOBAL char *p, float v) { *(GLOBAL float *)p = v; }
INLINE void store_f16(GLOBAL char *p, float v) { STORE_HALF(p, 0, v); }
INLINE void store_bf16(GLOBAL char *p, float v) {
    u32 u = AS_UINT(v);
    u16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        r = (u16)((u >> 16) | 64u);          /* quiet NaN */
    } else {
        r = (u16)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);   /* round to nearest even */
    }
    *(GLOBAL u16 *)p = r;
}
INLINE void store_i32(GLOBAL char *p, float v) { *(GLOBAL i32 *)p = (i32)v; }
INLINE void store_i16(GLOBAL char *p, float v) { *(GLOBAL i16 *)p = (i16)v; }
INLINE void store_i8(GLOBAL char *p, float v) { *(GLOBAL i8 *)p = (i8)v; }
INLINE void store_i64(GLOBAL char *p, float v) { *(GLOBAL i64 *)p = (i64)v; }

#define TSZ_f32 4
#define TSZ_f16 2
#define TSZ_bf16 2
#define TSZ_i32 4
#define TSZ_i16 2
#define TSZ_i8 1
#define TSZ_i64 8

#define LOADT(T, p) PG_CAT(load_, T)(p)
#define STORET(T, p, v) PG_CAT(store_, T)((p), (v))
#define TSZ(T) PG_CAT(TSZ_, T)

/* tanh that reaches +-1: PoCL's tanh stops one ulp short for every large argument, infinities included
 * (tanh(-inf) = -0.99999994). Past |x| = 10 the correctly rounded float is +-1 (1 - tanh(10) = 4e-9 is below
 * half an ulp of 1); NaN fails both comparisons and stays NaN. */
INLINE float pg_tanh(float x) { return x > 10.f ? 1.f : (x < -10.f ? -1.f : TANH(x)); }

/* one element of a contiguous row of a plain type; quants.h defines the block types' ELEM */
INLINE float elem_f32(GLOBAL const char *row, i64 k) { return ((GLOBAL const float *)row)[k]; }
INLINE float elem_f16(GLOBAL const char *row, i64 k) { return LOAD_HALF(row, k); }
INLINE float elem_bf16(GLOBAL const char *row, i64 k) { return load_bf16(row + 2 * k); }
#define ELEM(T, row, k) PG_CAT(elem_, T)((row), (k))

/* an index outside [0, n): store `code` in the device's status word and leave (the host raises an error
 * naming the node once the queue has drained); kernels with such checks take ERR_ARGS last */
#define ERR_ARGS GLOBAL i32 *err, i32 code
#define CHECK_INDEX(r, n) if ((r) < 0 || (r) >= (n)) { *err = code; return; }

/* copy one element's bytes (same type on both sides: exact for integers) */
INLINE void copy_bytes(GLOBAL char *d, GLOBAL const char *s, i32 n) {
    for (i32 i = 0; i < n; i++) d[i] = s[i];
}

#endif
