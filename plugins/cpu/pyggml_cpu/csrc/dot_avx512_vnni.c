/* x86-64 CPUs with AVX-512 (F, VL, BW) and AVX512-VNNI: the byte dots of dot_x86.h with the EVEX VPDPBUSD. */
#if defined(__x86_64__)
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512vnni,avx2,fma,f16c")
#define PGC_VNNI512 1
#include "pgc.h"

#define XSFX(name) name##_512v
#include "dot_x86.h"

void pgc_simd_avx512_vnni(pgc_simd *s) { register_x86_512v(s); }
#endif
