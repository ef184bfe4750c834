/* test_pool.c — the CPU worker pool: every share of every job runs exactly once,
 * whichever thread runs it; the caller runs the shares of workers that have not
 * started (here: workers asleep after an idle pause), and a worker that wakes to
 * find its share taken leaves the job alone; more threads than cores work too. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "kernels/cpu/pool.h"
#include "tests/test.h"

enum { MAX_SHARES = 8 };

typedef struct job_count {
    atomic_int runs[MAX_SHARES]; /* times share i of this job ran */
    atomic_int by_caller;        /* shares of this job run on the calling thread */
    pthread_t caller;
} job_count;

static void count_share(void *ctx, int ith, int nth) {
    job_count *j = ctx;
    (void)nth;
    atomic_fetch_add(&j->runs[ith], 1);
    if (ith != 0 && pthread_equal(pthread_self(), j->caller)) atomic_fetch_add(&j->by_caller, 1);
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* n_jobs jobs on a pool of n_threads, with pause_ms between them (0: back to back);
 * returns how many worker shares the caller ran. */
static int run_jobs(int n_threads, int n_jobs, int pause_ms) {
    cpu_pool *p = NULL;
    CHECK(cpu_pool_create(n_threads, &p) == 0);
    job_count *jobs = calloc((size_t)n_jobs, sizeof *jobs);
    if (!p || !jobs) {
        CHECK(0);
        cpu_pool_free(p);
        free(jobs);
        return 0;
    }
    const unsigned long taken0 = cpu_pool_shares_taken(p);
    for (int k = 0; k < n_jobs; k++) {
        jobs[k].caller = pthread_self();
        cpu_pool_run(p, count_share, &jobs[k]);
        /* every share has run by the time the call returns */
        for (int i = 0; i < n_threads; i++)
            CHECKF(atomic_load(&jobs[k].runs[i]) == 1, "%d threads, job %d: share %d ran %d times at return",
                   n_threads, k, i, atomic_load(&jobs[k].runs[i]));
        if (pause_ms) sleep_ms(pause_ms);
    }
    sleep_ms(50); /* a worker that woke late must not have run a share after all */
    int by_caller = 0, bad = 0;
    for (int k = 0; k < n_jobs && bad < 3; k++) {
        for (int i = 0; i < n_threads; i++)
            if (atomic_load(&jobs[k].runs[i]) != 1) {
                bad++;
                CHECKF(0, "%d threads, job %d: share %d ran %d times", n_threads, k, i,
                       atomic_load(&jobs[k].runs[i]));
            }
        by_caller += atomic_load(&jobs[k].by_caller);
    }
    CHECKF(cpu_pool_shares_taken(p) - taken0 == (unsigned long)by_caller,
           "the pool counted %lu shares taken by the caller, the jobs saw %d",
           cpu_pool_shares_taken(p) - taken0, by_caller);
    cpu_pool_free(p);
    free(jobs);
    return by_caller;
}

/* Back to back: the workers spin between jobs and mostly run their own shares. */
static void test_back_to_back(void) {
    run_jobs(2, 20000, 0);
    run_jobs(1, 100, 0);
}

/* More threads than cores: someone is always waiting for a core. */
static void test_oversubscribed(void) { run_jobs(MAX_SHARES, 5000, 0); }

/* After an idle pause the workers sleep; the caller wakes them and, finding their
 * shares unclaimed after its own, runs them itself rather than waiting. */
static void test_caller_takes_unstarted_shares(void) {
    int taken = run_jobs(4, 20, 30);
    CHECKF(taken > 0, "the caller never ran a sleeping worker's share in 20 jobs");
}

int main(void) {
    RUN(test_back_to_back);
    RUN(test_oversubscribed);
    RUN(test_caller_takes_unstarted_shares);
    return t_summary();
}
