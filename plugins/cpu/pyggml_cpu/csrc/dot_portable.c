/* The portable kernels (no target flags), the dispatch table and CPU feature detection. */
#include "api.h"
#include "pgc.h"

#include <stdlib.h>
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

#define SFX(name) name##_portable
#define LD16(h) pgc_fp16_to_fp32(h)
#include "dot_impl.h"

void pgc_quant_portable(pgc_simd *s);

pgc_simd pgc_S;
float pgc_f16_table[65536];

void pgc_simd_portable(pgc_simd *s) {
    memset(s, 0, sizeof(*s));
    s->level = 0;
    register_portable(s);
    pgc_quant_portable(s);
    pgc_r8_portable(s);
}

int pgc_cpu_features(void) {
    int f = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse3")) f |= PGC_F_SSE3;
    if (__builtin_cpu_supports("avx")) f |= PGC_F_AVX;
    if (__builtin_cpu_supports("avx2")) f |= PGC_F_AVX2;
    if (__builtin_cpu_supports("fma")) f |= PGC_F_FMA;
    if (__builtin_cpu_supports("avx512f")) f |= PGC_F_AVX512F;
    if (__builtin_cpu_supports("avx512bw")) f |= PGC_F_AVX512BW;
    if (__builtin_cpu_supports("avx512vl")) f |= PGC_F_AVX512VL;
    if (__builtin_cpu_supports("avx512vnni")) f |= PGC_F_AVX512VNNI;
    if (__builtin_cpu_supports("avx512bf16")) f |= PGC_F_AVX512BF16;
    {   /* F16C and AVX-VNNI are not known to every GCC's __builtin_cpu_supports: ask CPUID */
        unsigned a, b, c, d;
        __asm__ __volatile__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
        if (c & (1u << 29)) f |= PGC_F_F16C;
        __asm__ __volatile__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
        if (a & (1u << 4)) f |= PGC_F_AVXVNNI;
    }
#elif defined(__aarch64__)
    f |= PGC_F_NEON; /* Advanced SIMD is part of every arm64 CPU */
#if defined(__ARM_FEATURE_DOTPROD)
    f |= PGC_F_ARM_DOTPROD; /* the build's own baseline has it */
#elif defined(__linux__)
    if (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) f |= PGC_F_ARM_DOTPROD;
#elif defined(__APPLE__)
    int dp = 0;
    size_t len = sizeof(dp);
    if (sysctlbyname("hw.optional.arm.FEAT_DotProd", &dp, &len, NULL, 0) == 0 && dp) f |= PGC_F_ARM_DOTPROD;
#endif
#endif
    return f;
}

/* Bytes ahead an R8 kernel prefetches the weight tiles it streams. Measured out of cache, one thread: on a Sapphire
   Rapids VM (Q4_1 mat-vec) none 11.4 GB/s, 1 KiB 14.6, 2 KiB 16.0, 4 KiB 15.4; on an AMD EPYC Zen 4 VM, whose
   hardware prefetchers keep ahead alone, every distance was slower than none (mat-vecs of the 1.5B model's shapes,
   interleaved in one process, median GB/s none / 1 KiB / 2 KiB: Q4_K 8960 x 1536 24.9 / 19.5 / 19.6, Q6_K 1536 x 8960
   22.7 / 19.8 / 21.2, Q4_0 22.2 / 19.4 / 20.8, Q8_0 27.1 / 23.1 / 23.3, Q5_K 25.3 / 20.1 / 20.4; 8 KiB was slower
   still). */
static int r8_prefetch_distance(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_is("amd")) return 0;
#endif
    return 2048;
}

/* kernel levels: 0 portable; 1 avx2 (+fma, f16c); 2 avx2 + avx-vnni; 3 avx-512 (F, VL, BW: 512-bit float dots,
   and the 256-bit byte dots compiled with 32 vector registers); 4 avx-512 + avx512-vnni; on arm64 5 neon and
   6 neon + dotprod (SDOT) */
#define PGC_MAX_LEVEL 6
static int level_ok(int level, int f) {
    const int avx2 = PGC_F_AVX2 | PGC_F_FMA | PGC_F_F16C, avx512 = avx2 | PGC_F_AVX512F | PGC_F_AVX512VL | PGC_F_AVX512BW;
    switch (level) {
    case 0: return 1;
    case 1: return (f & avx2) == avx2;
    case 2: return (f & (avx2 | PGC_F_AVXVNNI)) == (avx2 | PGC_F_AVXVNNI);
    case 3: return (f & avx512) == avx512;
    case 4: return (f & (avx512 | PGC_F_AVX512VNNI)) == (avx512 | PGC_F_AVX512VNNI);
    case 5: return (f & PGC_F_NEON) != 0;
    case 6: return (f & (PGC_F_NEON | PGC_F_ARM_DOTPROD)) == (PGC_F_NEON | PGC_F_ARM_DOTPROD);
    default: return 0;
    }
}

int pgc_set_simd_level(int level) {
    int f = pgc_cpu_features();
    if (level < 0 || !level_ok(level, f)) /* best available */
        for (level = PGC_MAX_LEVEL; level > 0 && !level_ok(level, f); level--) {}
    pgc_simd_portable(&pgc_S);
    pgc_S.r8_prefetch = r8_prefetch_distance();
#if defined(__x86_64__)
    if (level == 1) pgc_simd_avx2(&pgc_S);
    if (level == 2) pgc_simd_vnni(&pgc_S);
    if (level >= 3) pgc_simd_avx512(&pgc_S, level == 4);
#elif defined(__aarch64__)
    if (level >= 5) pgc_simd_neon(&pgc_S, level == 6);
#endif
    return pgc_S.level;
}

int pgc_simd_level(void) { return pgc_S.level; }

__attribute__((constructor)) static void pgc_init(void) {
    for (uint32_t h = 0; h < 65536; h++) pgc_f16_table[h] = pgc_fp16_to_fp32((uint16_t)h);
    const char *e = getenv("PYGGML_CPU_PORTABLE");
    pgc_set_simd_level(e && *e && *e != '0' ? 0 : -1);
}
