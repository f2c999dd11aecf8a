/* pyggml kernel dialect: one text for OpenCL C (1.2) and CUDA C++.
 *
 * Kernels in this folder are written against these macros only, so the CUDA plugin can compile the same
 * files (nvcc -include dialect.h) and the OpenCL plugin compiles them as they are. Host code expands
 * `#include "x.h"` itself and prepends `#define NAME VALUE` lines for the type specialisation
 * (T0, T1, TD, WT ... : f32 f16 bf16 i32 q4_0 ...), so one source hash covers everything a program uses.
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
 *   FMAX FMIN FABS EXP LOG SQRT RSQRT SIN COS TANH ERF POW FLOOR CEIL ROUND RINT TRUNC   float math
 *   (ROUND: half away from zero; RINT: half to even)
 *   acc_t           accumulator type of long sums and angles: double where the device has it (the host
 *                   defines PYGGML_FP64 for OpenCL devices with cl_khr_fp64), else float; cos/sin/pow of
 *                   an acc_t use the overloaded OpenCL names, so kernels write cos(), sin(), pow() for it
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
#define AS_FLOAT(u) as_float(u)
#define AS_UINT(f) as_uint(f)
#define FMAX fmax
#define FMIN fmin
#define FABS fabs
#define EXP exp
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
#define AS_FLOAT(u) __uint_as_float(u)
#define AS_UINT(f) __float_as_uint(f)
#define FMAX fmaxf
#define FMIN fminf
#define FABS fabsf
#define EXP expf
#define LOG logf
#define SQRT sqrtf
#define RSQRT rsqrtf
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
#define INFINITY_F __int_as_float(0x7f800000)
typedef double acc_t;

#else
#error "pyggml dialect: compile as OpenCL C or CUDA"
#endif

#define PG_CAT_(a, b) a##b
#define PG_CAT(a, b) PG_CAT_(a, b)

#endif
