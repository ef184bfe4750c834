/* pool.h — the persistent CPU worker pool every CPU op runs on.
 *
 * cpu_pool_run(fn) runs fn(ctx, ith, nth) once for each ith in [0, nth) and
 * returns when all are done. The caller runs share 0, and also any share whose
 * worker has not started it by then (a worker another process keeps off its core
 * does not stall the job), so fn must not assume share ith runs on thread ith:
 * per-share scratch indexed by ith is fine, thread-local state is not. Workers spin
 * briefly after a job before sleeping, since a forward pass issues hundreds of
 * small jobs. Only one thread (the engine thread) may call cpu_pool_run at a time. */
#ifndef LLC_CPU_POOL_H
#define LLC_CPU_POOL_H

#include <stddef.h>

typedef struct cpu_pool cpu_pool;

/* n_threads <= 0 means one per online core. */
int cpu_pool_create(int n_threads, cpu_pool **out);
void cpu_pool_free(cpu_pool *p);
int cpu_pool_size(const cpu_pool *p);
void cpu_pool_run(cpu_pool *p, void (*fn)(void *ctx, int ith, int nth), void *ctx);

/* How many workers' shares the caller has run itself so far (a sign of contention
 * for the cores). */
unsigned long cpu_pool_shares_taken(const cpu_pool *p);

/* A reusable scratch buffer of at least `bytes` (64-byte aligned), owned by the pool;
 * valid until the next call. Call only from the pool's caller thread, outside jobs. */
void *cpu_pool_scratch(cpu_pool *p, size_t bytes);

/* Splits [0, n) into nth nearly equal ranges; thread ith gets [*lo, *hi). */
static inline void cpu_split(long n, int ith, int nth, long *lo, long *hi) {
    long per = n / nth, rem = n % nth;
    *lo = ith * per + (ith < rem ? ith : rem);
    *hi = *lo + per + (ith < rem);
}

#endif
