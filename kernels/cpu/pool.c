/* pool.c — persistent worker threads with a generation counter: the caller
 * publishes a job and bumps the generation; workers spin on it for a while, then
 * sleep on a condition variable; the caller waits for the pending count to reach 0. */
#include "kernels/cpu/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/common.h"

#define SPIN_ITERS 20000

struct cpu_pool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    atomic_uint generation; /* bumped once per job */
    atomic_int pending;     /* workers still running the current job */
    atomic_bool stop;
    atomic_int sleepers;
    void (*fn)(void *ctx, int ith, int nth);
    void *ctx;
    void *scratch;
    size_t scratch_size;
};

typedef struct worker_arg {
    cpu_pool *pool;
    int ith;
} worker_arg;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker_main(void *arg_) {
    worker_arg *arg = arg_;
    cpu_pool *p = arg->pool;
    int ith = arg->ith;
    free(arg);
    unsigned seen = 0;
    for (;;) {
        unsigned gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
               !atomic_load(&p->stop)) {
            if (++spins < SPIN_ITERS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = gen;
        p->fn(p->ctx, ith, p->n_threads);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
    }
}

int cpu_pool_create(int n_threads, cpu_pool **out) {
    *out = NULL;
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    cpu_pool *p = calloc(1, sizeof *p);
    if (!p) return LLC_ERR_NOMEM;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) {
        cpu_pool_free(p);
        return LLC_ERR_NOMEM;
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *arg = malloc(sizeof *arg);
        if (!arg) {
            p->n_threads = i;
            cpu_pool_free(p);
            return LLC_ERR_NOMEM;
        }
        arg->pool = p;
        arg->ith = i;
        if (pthread_create(&p->threads[i], NULL, worker_main, arg) != 0) {
            free(arg);
            p->n_threads = i;
            cpu_pool_free(p);
            return LLC_ERR_NOMEM;
        }
    }
    *out = p;
    return 0;
}

void cpu_pool_free(cpu_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++)
        if (p->threads[i]) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    free(p->threads);
    free(p->scratch);
    free(p);
}

int cpu_pool_size(const cpu_pool *p) { return p->n_threads; }

void cpu_pool_run(cpu_pool *p, void (*fn)(void *ctx, int ith, int nth), void *ctx) {
    if (p->n_threads == 1) {
        fn(ctx, 0, 1);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->pending, p->n_threads - 1);
    atomic_fetch_add(&p->generation, 1); /* seq_cst: ordered before the sleepers check */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    fn(ctx, 0, p->n_threads);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) cpu_relax();
}

void *cpu_pool_scratch(cpu_pool *p, size_t bytes) {
    if (bytes <= p->scratch_size) return p->scratch;
    free(p->scratch);
    size_t size = (bytes + 63) / 64 * 64;
    p->scratch = aligned_alloc(64, size);
    p->scratch_size = p->scratch ? size : 0;
    LLC_ASSERT(p->scratch != NULL);
    return p->scratch;
}
