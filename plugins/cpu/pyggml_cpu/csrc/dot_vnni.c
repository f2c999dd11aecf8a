/* x86-64 kernels for CPUs that also have AVX-VNNI: the byte dot products of dot_x86.h use VPDPBUSD. */
#if defined(__x86_64__)
#pragma GCC target("avx2,fma,f16c,avxvnni")
#define PGC_VNNI 1
#include "pgc.h"

#define XSFX(name) name##_vnni
#include "dot_x86.h"

void pgc_simd_vnni(pgc_simd *s) {
    pgc_simd_avx2(s);
    register_x86_vnni(s);
    s->level = 2;
}
#endif
