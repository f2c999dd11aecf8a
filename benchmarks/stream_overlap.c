/* How much of a machine's read bandwidth a stream keeps when each byte it reads is also computed on: the question
   behind a decode step's decode_bw_fraction (bench_stream_overlap.py builds and drives this program).

   n threads each stream their share of a buffer once, and for every 32 bytes they read run `work` rounds of integer
   vector arithmetic on them (a byte multiply-add and an add per round, AVX2: the kind of work a quantised mat-vec
   does per weight byte, in two independent chains so the rounds are not one latency chain). The same loop over a
   buffer that stays in each core's L2 gives the arithmetic's own pace (`compute`), the loop with work 0 over the
   large buffer the memory's (`memory`). Printed: one line per measurement, `kind work GB/s`.

       stream_overlap THREADS BUFFER_MB WORK[,WORK...] ROUNDS

   Each round takes, per work value, memory then the stream with work then its compute then memory again, so that a
   measurement sits between two probes of the memory's state (a VM's can move within seconds). */
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    const uint8_t *p;
    size_t n, passes;
    int work;
    int64_t sum;
} part;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

__attribute__((target("avx2"))) static void *stream(void *arg) {
    part *w = (part *)arg;
    const __m256i ones = _mm256_set1_epi8(1), m = _mm256_set1_epi8(0x0F);
    __m256i a0 = _mm256_setzero_si256(), a1 = a0;
    for (size_t r = 0; r < w->passes; r++)
        for (size_t i = 0; i + 64 <= w->n; i += 64) {
            __m256i x0 = _mm256_load_si256((const __m256i *)(w->p + i));
            __m256i x1 = _mm256_load_si256((const __m256i *)(w->p + i + 32));
            for (int k = 0; k < w->work; k++) {
                a0 = _mm256_add_epi16(a0, _mm256_maddubs_epi16(_mm256_and_si256(x0, m), ones));
                a1 = _mm256_add_epi16(a1, _mm256_maddubs_epi16(_mm256_and_si256(x1, m), ones));
                x0 = _mm256_srli_epi16(x0, 1);
                x1 = _mm256_srli_epi16(x1, 1);
            }
            a0 = _mm256_add_epi16(a0, x0);
            a1 = _mm256_add_epi16(a1, x1);
        }
    int16_t lanes[16];
    _mm256_storeu_si256((__m256i *)lanes, _mm256_add_epi16(a0, a1));
    w->sum = 0;
    for (int i = 0; i < 16; i++) w->sum += lanes[i];
    return NULL;
}

/* GB/s of n threads streaming their shares of buf `passes` times with `work` rounds a 32-byte vector */
static double run(int n, const uint8_t *buf, size_t bytes, size_t passes, int work, int64_t *sink) {
    pthread_t th[64];
    part ps[64];
    const size_t per = bytes / (size_t)n / 64 * 64;
    const double t0 = now();
    for (int t = 0; t < n; t++) {
        ps[t] = (part){buf + (size_t)t * per, per, passes, work, 0};
        if (t && pthread_create(&th[t], NULL, stream, &ps[t])) {
            fprintf(stderr, "stream_overlap: cannot start thread %d\n", t);
            exit(1);
        }
    }
    stream(&ps[0]);
    for (int t = 1; t < n; t++) pthread_join(th[t], NULL);
    const double s = now() - t0;
    for (int t = 0; t < n; t++) *sink += ps[t].sum;
    return (double)(per * (size_t)n * passes) / s / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: stream_overlap THREADS BUFFER_MB WORK[,WORK...] ROUNDS\n");
        return 2;
    }
    if (!__builtin_cpu_supports("avx2")) {
        fprintf(stderr, "stream_overlap: this CPU has no AVX2\n");
        return 1;
    }
    const int n = atoi(argv[1]), rounds = atoi(argv[4]);
    const size_t bytes = (size_t)atol(argv[2]) << 20, small = (size_t)n * (256 << 10); /* 256 KiB a thread: L2 */
    if (n < 1 || n > 64 || rounds < 1 || bytes < small) {
        fprintf(stderr, "stream_overlap: 1-64 threads, at least one round, a buffer past the threads' L2 share\n");
        return 2;
    }
    int works[64], nw = 0;
    for (char *s = strtok(argv[3], ","); s && nw < 64; s = strtok(NULL, ",")) works[nw++] = atoi(s);
    uint8_t *big = aligned_alloc(4096, bytes), *hot = aligned_alloc(4096, small);
    if (!big || !hot) {
        fprintf(stderr, "stream_overlap: cannot allocate %zu bytes\n", bytes);
        return 1;
    }
    memset(big, 0x5A, bytes); /* every page touched before timing */
    memset(hot, 0x5A, small);
    int64_t sink = 0;
    const size_t hot_passes = bytes / small / 4 + 1; /* about a quarter of the big stream's bytes */
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < nw; i++) {
            printf("memory %d %.2f\n", works[i], run(n, big, bytes, 1, 0, &sink));
            printf("stream %d %.2f\n", works[i], run(n, big, bytes, 1, works[i], &sink));
            printf("compute %d %.2f\n", works[i], run(n, hot, small, hot_passes, works[i], &sink));
            printf("memory %d %.2f\n", works[i], run(n, big, bytes, 1, 0, &sink));
            fflush(stdout);
        }
    return sink == 42; /* the sums are used: nothing is optimised away */
}
