/* x86-64 kernels for CPUs with AVX2 + FMA + F16C, selected at run time (dot_portable.c). The plain-C text of
   dot_impl.h is compiled here again under the target pragma (auto-vectorised); the hottest dots, written with
   intrinsics in dot_x86.h, replace those entries. */
#if defined(__x86_64__)
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>

#include "pgc.h"

#define SFX(name) name##_avx2
#define LD16(h) F16T(h)
#include "dot_impl.h"

#define XSFX(name) name##_x2
#include "dot_x86.h"
#include "dot_x86_f16.h"

void pgc_simd_avx2(pgc_simd *s) {
    register_avx2(s);
    register_x86_x2(s);
    register_x86_f16_x2(s);
    s->level = 1;
}
#endif
