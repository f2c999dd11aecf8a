/* arm64 kernels: NEON intrinsics for every dot product (dot_neon.h), chosen at run time (dot_portable.c). This
   build uses plain Advanced SIMD, which every arm64 CPU has; dot_neon_dotprod.c compiles the same text with SDOT
   for CPUs that report it (pgc_cpu_features). */
#if defined(__aarch64__)
#include "pgc.h"

#define NEON_REGISTER register_neon_plain
#include "dot_neon.h"

void register_neon_dotprod(pgc_simd *s);

void pgc_simd_neon(pgc_simd *s, int dotprod) {
    if (dotprod) register_neon_dotprod(s);
    else register_neon_plain(s);
    s->level = dotprod ? 6 : 5;
}
#endif
