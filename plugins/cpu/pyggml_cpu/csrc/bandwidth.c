/* The machine's memory read bandwidth, as the decode benchmark's limit: n threads each stream their share of a
   buffer (a plain sum of 64-bit words the compiler vectorises, eight independent partial sums) at once. */
#include "api.h"

#include <pthread.h>
#include <time.h>

typedef struct {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} bw_part;

static void *bw_read(void *arg) {
    bw_part *w = (bw_part *)arg;
    uint64_t s[8] = {0};
    size_t i = 0;
    for (; i + 8 <= w->n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += w->p[i + j];
    for (; i < w->n; i++) s[0] += w->p[i];
    w->sum = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
    return NULL;
}

double pgc_read_bandwidth(const void *buf, size_t bytes, int n_threads, int reps) {
    if (n_threads < 1 || n_threads > 256 || bytes < 64 * (size_t)n_threads || reps < 1) return -1.0;
    const size_t words = bytes / 8, per = words / (size_t)n_threads;
    pthread_t th[256];
    bw_part parts[256];
    double best = 0.0;
    uint64_t sink = 0;
    for (int r = 0; r < reps; r++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int t = 0; t < n_threads; t++) {
            parts[t] = (bw_part){(const uint64_t *)buf + (size_t)t * per, per, 0};
            if (t && pthread_create(&th[t], NULL, bw_read, &parts[t])) {
                for (int j = 1; j < t; j++) pthread_join(th[j], NULL); /* none may outlive buf or parts */
                return -1.0;
            }
        }
        bw_read(&parts[0]);
        for (int t = 1; t < n_threads; t++) pthread_join(th[t], NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        for (int t = 0; t < n_threads; t++) sink += parts[t].sum;
        if (s > 0 && (double)(per * (size_t)n_threads * 8) / s > best) best = (double)(per * (size_t)n_threads * 8) / s;
    }
    return sink == 42 ? best + 0.0 : best; /* the sums are used: nothing is optimised away */
}
