/* pool.c — persistent worker threads with a generation counter: the caller
 * publishes a job and bumps the generation; workers spin on it for a while, then
 * sleep on a condition variable.
 *
 * Each thread's share of a job (fn with its ith) is claimed once per generation,
 * by the worker or by the caller: after running its own share the caller claims
 * every share no worker has started and runs it itself, and waits only for the
 * shares workers did claim. A worker that another process kept off its core (or
 * that is still waking up) therefore never holds the job up unless it is already
 * inside its share; when it comes back it finds its share taken and waits for the
 * next job without touching this one. Shares are fixed by ith, so the results do
 * not depend on which thread ran them. */
#include "kernels/cpu/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
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
    /* per share i (1..n-1): the last generation claimed (by worker i or the caller)
     * and the last generation worker i finished; cache lines apart */
    struct share {
        _Alignas(64) atomic_uint claimed;
        atomic_uint done;
    } *shares;
    atomic_ulong taken_by_caller; /* shares the caller ran for a worker (statistics) */
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

/* Claims share i of generation gen; false if it was already claimed (by the other
 * party), or a later generation's was: a worker that saw gen and then lost its
 * core may come back after the caller has moved on. Generations only grow (modulo
 * 2^32), so the claim moves the word forward from an older value, never back. */
static bool claim_share(cpu_pool *p, int i, unsigned gen) {
    unsigned old = atomic_load(&p->shares[i].claimed);
    while ((int)(gen - old) > 0)
        if (atomic_compare_exchange_weak(&p->shares[i].claimed, &old, gen)) return true;
    return false;
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
        if (!claim_share(p, ith, gen)) continue; /* the caller ran it: not ours any more */
        p->fn(p->ctx, ith, p->n_threads);
        atomic_store_explicit(&p->shares[ith].done, gen, memory_order_release);
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
    p->shares = aligned_alloc(64, sizeof *p->shares * (size_t)n_threads);
    if (p->shares)
        for (int i = 0; i < n_threads; i++) {
            atomic_init(&p->shares[i].claimed, 0);
            atomic_init(&p->shares[i].done, 0);
        }
    if (!p->threads || !p->shares) {
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
    free(p->shares);
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
    /* seq_cst: published after fn/ctx, ordered before the sleepers check */
    const unsigned gen = atomic_fetch_add(&p->generation, 1) + 1;
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    fn(ctx, 0, p->n_threads);
    for (int i = 1; i < p->n_threads; i++) {
        if (claim_share(p, i, gen)) { /* worker i has not started: run its share here */
            fn(ctx, i, p->n_threads);
            atomic_fetch_add_explicit(&p->taken_by_caller, 1, memory_order_relaxed);
            continue;
        }
        while (atomic_load_explicit(&p->shares[i].done, memory_order_acquire) != gen) cpu_relax();
    }
}

unsigned long cpu_pool_shares_taken(const cpu_pool *p) {
    return atomic_load_explicit(&((cpu_pool *)p)->taken_by_caller, memory_order_relaxed);
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
