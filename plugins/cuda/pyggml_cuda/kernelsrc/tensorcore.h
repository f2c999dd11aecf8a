/* Tensor-core fragments for this plugin's prompt kernels (mma.cu: F16, mmq.cu: signed 8-bit), 16 x 16 x 16 WMMA
 * tiles of one warp, and their portable form, so the same kernel texts build as OpenCL C and run on PoCL.
 *
 * Operands live in shared memory: A (16 rows of k) with row r's k at a[r * ld + k], B (16 columns of k) with
 * column j's k at b[j * ld + k] (ld in elements: a multiple of 8 for F16, 16 for 8-bit; every fragment's address
 * 32-byte aligned). Stored accumulators are column-major, entry (r, j) at s[j * 16 + r]. In the portable form lane l
 * of a warp (32 consecutive local ids) holds entries l, l + 32, ... of the 16 x 16 tile, with the tensor cores'
 * operands (F16 values, exact 8-bit integers) and sums (F32, exact 32-bit integers); only F32 sums may come out in
 * another order. TC_SYNC() orders a warp's stores before its lanes read them (the portable form: a work-group
 * barrier, so every lane of the work-group must reach it). */
#ifndef PYGGML_TENSORCORE_H
#define PYGGML_TENSORCORE_H

#if defined(__CUDACC__)
#define TC_ALIGNED __align__(32)
#define TC_SYNC() __syncwarp()
typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> tc_accf;
typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, int> tc_acci;
INLINE void tc_zero_f(tc_accf *c) { nvcuda::wmma::fill_fragment(*c, 0.f); }
INLINE void tc_zero_i(tc_acci *c) { nvcuda::wmma::fill_fragment(*c, 0); }
/* c += A B, F16 operands */
INLINE void tc_step_f16(tc_accf *c, const u16 *a, const u16 *b, u32 ld) {
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __half, nvcuda::wmma::row_major> fa;
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __half, nvcuda::wmma::col_major> fb;
    nvcuda::wmma::load_matrix_sync(fa, (const __half *)a, ld);
    nvcuda::wmma::load_matrix_sync(fb, (const __half *)b, ld);
    nvcuda::wmma::mma_sync(*c, fa, fb, *c);
}
/* c += A B, signed 8-bit operands (sm_72+) */
INLINE void tc_step_s8(tc_acci *c, const i8 *a, const i8 *b, u32 ld) {
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, signed char, nvcuda::wmma::row_major> fa;
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, signed char, nvcuda::wmma::col_major> fb;
    nvcuda::wmma::load_matrix_sync(fa, (const signed char *)a, ld);
    nvcuda::wmma::load_matrix_sync(fb, (const signed char *)b, ld);
    nvcuda::wmma::mma_sync(*c, fa, fb, *c);
}
INLINE void tc_store_f(float *s, const tc_accf *c) {
    nvcuda::wmma::store_matrix_sync(s, *c, 16, nvcuda::wmma::mem_col_major);
}
INLINE void tc_store_i(i32 *s, const tc_acci *c) {
    nvcuda::wmma::store_matrix_sync(s, *c, 16, nvcuda::wmma::mem_col_major);
}
/* an F16 operand into shared memory */
INLINE void tc_put_half(u16 *p, i32 i, float v) { ((__half *)p)[i] = __float2half_rn(v); }
#else
#define TC_ALIGNED
#define TC_SYNC() BARRIER()
typedef struct { float v[8]; } tc_accf;
typedef struct { i32 v[8]; } tc_acci;
INLINE void tc_zero_f(tc_accf *c) {
    for (i32 m = 0; m < 8; m++) c->v[m] = 0.f;
}
INLINE void tc_zero_i(tc_acci *c) {
    for (i32 m = 0; m < 8; m++) c->v[m] = 0;
}
INLINE void tc_step_f16(tc_accf *c, LOCAL_PTR const u16 *a, LOCAL_PTR const u16 *b, u32 ld) {
    i32 lane = LID(0) % 32;
    for (i32 m = 0; m < 8; m++) {
        i32 e = lane + 32 * m, r = e % 16, j = e / 16;
        float s = 0.f;
        for (u32 k = 0; k < 16; k++) {
            s += vload_half(r * ld + k, (LOCAL_PTR const half *)a) * vload_half(j * ld + k, (LOCAL_PTR const half *)b);
        }
        c->v[m] += s;
    }
}
INLINE void tc_step_s8(tc_acci *c, LOCAL_PTR const i8 *a, LOCAL_PTR const i8 *b, u32 ld) {
    i32 lane = LID(0) % 32;
    for (i32 m = 0; m < 8; m++) {
        i32 e = lane + 32 * m, r = e % 16, j = e / 16, s = 0;
        for (u32 k = 0; k < 16; k++) s += (i32)a[r * ld + k] * (i32)b[j * ld + k];
        c->v[m] += s;
    }
}
INLINE void tc_store_f(LOCAL_PTR float *s, const tc_accf *c) {
    for (i32 m = 0; m < 8; m++) s[LID(0) % 32 + 32 * m] = c->v[m];
}
INLINE void tc_store_i(LOCAL_PTR i32 *s, const tc_acci *c) {
    for (i32 m = 0; m < 8; m++) s[LID(0) % 32 + 32 * m] = c->v[m];
}
INLINE void tc_put_half(LOCAL_PTR u16 *p, i32 i, float v) { vstore_half_rte(v, i, (LOCAL_PTR half *)p); }
#endif

#endif
