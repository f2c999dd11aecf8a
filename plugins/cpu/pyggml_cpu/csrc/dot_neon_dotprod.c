/* arm64 kernels with the dot product instructions (SDOT, Armv8.2-A's optional DotProd, present on most cores
   since Cortex-A55/A75 and on Apple M1): dot_neon.h under a dotprod target; selected only when the CPU reports
   the feature (getauxval HWCAP_ASIMDDP on Linux, see dot_portable.c). */
#if defined(__aarch64__)
#if defined(__clang__) /* every function gets the target; arm_neon.h may hide vdotq_s32, so SDOT is inline asm */
#pragma clang attribute push(__attribute__((target("dotprod"))), apply_to = function)
#define PGC_DOTPROD_ASM 1
#else
#pragma GCC target("arch=armv8.2-a+dotprod") /* also defines __ARM_FEATURE_DOTPROD: vdotq_s32 */
#endif
#include "pgc.h"

#define NEON_REGISTER register_neon_dotprod
#include "dot_neon.h"

#if defined(__clang__)
#pragma clang attribute pop
#endif
#endif
