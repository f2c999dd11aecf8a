/* pyggml kernel dialect: one text for OpenCL C (1.2), CUDA C++ and host C.
 *
 * Kernel files and the shared block helpers are written against these macros only, so one text serves the OpenCL
 * plugin (compiled as it is), the CUDA plugin (nvcc, after its prelude) and, for the helpers without work-items
 * (block quantisers and readers), the cpu plugin's C (gcc through cffi). This folder is package data of pyggml
 * (pyggml.kernelsrc.directory()); the OpenCL and CUDA hosts expand `#include "x.h"` themselves and prepend
 * `#define NAME VALUE` lines for the type specialisation (T0, T1, TD, WT ... : f32 f16 bf16 i32 q4_0 ...), so one
 * source hash covers everything a program uses.
 *
 *   KERNEL          a kernel entry point (returns void)
 *   GLOBAL          address space of kernel pointer arguments (device memory)
 *   LOCAL           declares work-group shared memory inside a kernel body
 *   LOCAL_PTR       qualifies a helper's pointer parameter into such memory
 *   BARRIER()       work-group barrier with local memory fence
 *   GID(d) LID(d) GRP(d) LSZ(d) NGRP(d)   global / local / group ids, local size, number of groups (d = 0,1,2)
 *   INLINE          a device helper function
 *   i64 u64 i32 u32 u8 i8 u16   fixed-width integers
 *   LOAD_HALF(p, i) / STORE_HALF(p, i, v)   IEEE half storage without needing half arithmetic
 *   ROUND_HALF(v)   v rounded to the nearest half (to even), back as a float: what a value stored as F16 reads
 *   FMAX FMIN FABS EXP EXPM1 LOG SQRT RSQRT SIN COS TANH ERF POW FLOOR CEIL ROUND RINT TRUNC   float math
 *   (ROUND: half away from zero; RINT: half to even)
 *   acc_t           accumulator type of long sums and angles: double where the device has it (the host
 *                   defines PYGGML_FP64 for OpenCL devices with cl_khr_fp64), else float; cos/sin/pow of
 *                   an acc_t use the overloaded OpenCL names, so kernels write cos(), sin(), pow() for it
 *
 * Host C (neither OpenCL nor CUDA): KERNEL, GLOBAL, LOCAL and LOCAL_PTR are empty and the work-item macros
 * (BARRIER, GID ...) are not defined, since only helpers are compiled there; the includer defines
 * PG_HOST_HALF_TO_FLOAT(u16) and PG_HOST_FLOAT_TO_HALF(f) first (its own IEEE half conversions, round to nearest
 * even, so a helper's half values are the ones the rest of that program reads and writes) and compiles with
 * -ffp-contract=off.
 */
#ifndef PYGGML_DIALECT_H
#define PYGGML_DIALECT_H

#if defined(__OPENCL_VERSION__)

/* no fused multiply-add contraction: results follow the written operations, as the CPU plugin's C
 * (built with -ffp-contract=off); CUDA builds get the same with nvcc --fmad=false */
#pragma OPENCL FP_CONTRACT OFF
#define KERNEL __kernel
#define GLOBAL __global
#define LOCAL __local
#define LOCAL_PTR __local
#define BARRIER() barrier(CLK_LOCAL_MEM_FENCE)
#define GID(d) ((i64)get_global_id(d))
#define LID(d) ((i32)get_local_id(d))
#define GRP(d) ((i64)get_group_id(d))
#define LSZ(d) ((i32)get_local_size(d))
#define NGRP(d) ((i64)get_num_groups(d))
#define INLINE inline
typedef long i64;
typedef ulong u64;
typedef int i32;
typedef uint u32;
typedef uchar u8;
typedef char i8;
typedef ushort u16;
typedef short i16;
#define LOAD_HALF(p, i) vload_half((i), (GLOBAL const half *)(p))
#define STORE_HALF(p, i, v) vstore_half_rte((v), (i), (GLOBAL half *)(p))
inline float pg_round_half(float v) {
    ushort h; /* half storage in a private variable: no cl_khr_fp16 needed */
    vstore_half_rte(v, 0, (half *)&h);
    return vload_half(0, (const half *)&h);
}
#define ROUND_HALF(v) pg_round_half(v)
#define AS_FLOAT(u) as_float(u)
#define AS_UINT(f) as_uint(f)
#define FMAX fmax
#define FMIN fmin
#define FABS fabs
#define EXP exp
#define EXPM1 expm1
#define LOG log
#define SQRT sqrt
#define RSQRT rsqrt
#define SIN sin
#define COS cos
#define TANH tanh
#define ERF erf
#define POW pow
#define FLOOR floor
#define CEIL ceil
#define ROUND round
#define RINT rint
#define TRUNC trunc
#define INFINITY_F INFINITY
#if PYGGML_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double acc_t;
#else
typedef float acc_t;
#endif

#elif defined(__CUDACC__)

#include <cuda_fp16.h>
#define KERNEL extern "C" __global__
#define GLOBAL
#define LOCAL __shared__
#define LOCAL_PTR
#define BARRIER() __syncthreads()
__device__ __forceinline__ unsigned pyggml_dim3(const dim3 v, int d) { return d == 0 ? v.x : d == 1 ? v.y : v.z; }
#define GID(d) ((i64)pyggml_dim3(blockIdx, d) * pyggml_dim3(blockDim, d) + pyggml_dim3(threadIdx, d))
#define LID(d) ((i32)pyggml_dim3(threadIdx, d))
#define GRP(d) ((i64)pyggml_dim3(blockIdx, d))
#define LSZ(d) ((i32)pyggml_dim3(blockDim, d))
#define NGRP(d) ((i64)pyggml_dim3(gridDim, d))
#define INLINE __device__ __forceinline__
typedef long long i64;
typedef unsigned long long u64;
typedef int i32;
typedef unsigned int u32;
typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef short i16;
#define LOAD_HALF(p, i) __half2float(((const __half *)(p))[i])
#define STORE_HALF(p, i, v) (((__half *)(p))[i] = __float2half_rn(v))
#define ROUND_HALF(v) __half2float(__float2half_rn(v))
#define AS_FLOAT(u) __uint_as_float(u)
#define AS_UINT(f) __float_as_uint(f)
#define RSQRT rsqrtf
#define INFINITY_F __int_as_float(0x7f800000)

#else /* host C */

#if !defined(PG_HOST_HALF_TO_FLOAT) || !defined(PG_HOST_FLOAT_TO_HALF)
#error "pyggml dialect, host C: define PG_HOST_HALF_TO_FLOAT(u16) and PG_HOST_FLOAT_TO_HALF(f) before dialect.h"
#endif
#include <math.h>
#include <stdint.h>
#include <string.h>
#define KERNEL
#define GLOBAL
#define LOCAL
#define LOCAL_PTR
#define INLINE static inline
typedef int64_t i64;
typedef uint64_t u64;
typedef int32_t i32;
typedef uint32_t u32;
typedef uint8_t u8;
typedef int8_t i8;
typedef uint16_t u16;
typedef int16_t i16;
/* memcpy: block fields sit at any even offset, and the bytes are read without type punning */
static inline float pg_host_load_half(const void *p, i64 i) {
    u16 h;
    memcpy(&h, (const char *)p + 2 * i, 2);
    return PG_HOST_HALF_TO_FLOAT(h);
}
static inline void pg_host_store_half(void *p, i64 i, float v) {
    u16 h = PG_HOST_FLOAT_TO_HALF(v);
    memcpy((char *)p + 2 * i, &h, 2);
}
static inline float pg_host_as_float(u32 u) { float f; memcpy(&f, &u, 4); return f; }
static inline u32 pg_host_as_uint(float f) { u32 u; memcpy(&u, &f, 4); return u; }
static inline float pg_host_rsqrt(float x) { return 1.0f / sqrtf(x); }
#define LOAD_HALF(p, i) pg_host_load_half((p), (i))
#define STORE_HALF(p, i, v) pg_host_store_half((p), (i), (v))
#define ROUND_HALF(v) PG_HOST_HALF_TO_FLOAT(PG_HOST_FLOAT_TO_HALF(v))
#define AS_FLOAT(u) pg_host_as_float(u)
#define AS_UINT(f) pg_host_as_uint(f)
#define RSQRT pg_host_rsqrt
#define INFINITY_F INFINITY

#endif

#if !defined(__OPENCL_VERSION__)
/* CUDA and host C: the float functions of C's math library, and double sums */
#define FMAX fmaxf
#define FMIN fminf
#define FABS fabsf
#define EXP expf
#define EXPM1 expm1f
#define LOG logf
#define SQRT sqrtf
#define SIN sinf
#define COS cosf
#define TANH tanhf
#define ERF erff
#define POW powf
#define FLOOR floorf
#define CEIL ceilf
#define ROUND roundf
#define RINT rintf
#define TRUNC truncf
typedef double acc_t;
#endif

#define PG_CAT_(a, b) a##b
#define PG_CAT(a, b) PG_CAT_(a, b)

#endif
