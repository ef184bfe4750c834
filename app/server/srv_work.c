/* srv_work.c — the server's worker threads for the work of reading a request:
 * parsing a big body, rendering a chat template, tokenizing, compiling a
 * grammar, fitting a long conversation into the context. Any of these can take
 * seconds on a hostile or merely large request, and the server thread must keep
 * moving every other client's bytes meanwhile (/health included).
 *
 * A job is two functions and a context: `run` on a worker (it touches only its
 * context and what is read-only: the model, tokenizer and template), then `done`
 * on the server thread, which owns the context again. Finished jobs wait in a
 * list; an eventfd in the server's poll set wakes the server thread for them
 * (the queue-plus-wake-pipe of redis's bio.c). Jobs run in the order they came,
 * SRV_WORKERS at a time. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "app/server/srv_internal.h"

typedef struct srv_job {
    struct srv_job *next;
    srv_job_run run;
    srv_job_done done;
    void *ctx;
} srv_job;

typedef struct job_list {
    srv_job *head, *tail;
} job_list;

struct srv_work {
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* a job was queued, or the workers are to stop */
    job_list queued, finished;
    bool stopping;
    int wake_fd;             /* eventfd: a job finished */
    pthread_t threads[SRV_WORKERS];
    int n_threads;
};

static void list_push(job_list *l, srv_job *j) {
    j->next = NULL;
    if (l->tail) l->tail->next = j;
    else l->head = j;
    l->tail = j;
}

static srv_job *list_take_all(job_list *l) {
    srv_job *h = l->head;
    l->head = l->tail = NULL;
    return h;
}

static void *worker(void *arg) {
    srv_work *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->queued.head && !w->stopping) pthread_cond_wait(&w->cv, &w->mu);
        srv_job *j = w->queued.head;
        if (!j) break; /* stopping, and nothing left to run */
        w->queued.head = j->next;
        if (!w->queued.head) w->queued.tail = NULL;
        pthread_mutex_unlock(&w->mu);
        j->run(j->ctx);
        pthread_mutex_lock(&w->mu);
        list_push(&w->finished, j);
        uint64_t one = 1;
        ssize_t n = write(w->wake_fd, &one, sizeof one); /* (a full counter still wakes) */
        (void)n;
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int srv_work_start(srv_work **out, llc_err *err) {
    *out = NULL;
    srv_work *w = calloc(1, sizeof *w);
    if (!w) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->wake_fd < 0) {
        int e = errno;
        srv_work_stop(NULL, w);
        return llc_fail(err, LLC_ERR_IO, "eventfd: %s", strerror(e));
    }
    for (int i = 0; i < SRV_WORKERS; i++) {
        int rc = pthread_create(&w->threads[i], NULL, worker, w);
        if (rc) {
            srv_work_stop(NULL, w);
            return llc_fail(err, LLC_ERR_IO, "cannot start a server worker thread: %s", strerror(rc));
        }
        w->n_threads++;
    }
    *out = w;
    return 0;
}

bool srv_work_submit(srv_work *w, srv_job_run run, srv_job_done done, void *ctx) {
    srv_job *j = malloc(sizeof *j);
    if (!j) return false;
    *j = (srv_job){.run = run, .done = done, .ctx = ctx};
    pthread_mutex_lock(&w->mu);
    list_push(&w->queued, j);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return true;
}

/* Calls `done` of every finished job, in the order they finished. */
static void run_finished(srv *s, srv_work *w) {
    pthread_mutex_lock(&w->mu);
    srv_job *j = list_take_all(&w->finished);
    pthread_mutex_unlock(&w->mu);
    while (j) {
        srv_job *next = j->next;
        j->done(s, j->ctx);
        free(j);
        j = next;
    }
}

static void on_finished(srv *s, void *ctx, short revents, double now) {
    (void)now;
    srv_work *w = ctx;
    if (!(revents & POLLIN)) return;
    uint64_t v;
    ssize_t r = read(w->wake_fd, &v, sizeof v);
    (void)r;
    run_finished(s, w);
}

void srv_work_poll_add(srv *s, srv_pollset *ps) {
    if (s->work) srv_poll_add(ps, s->work->wake_fd, POLLIN, on_finished, s->work);
}

void srv_work_stop(srv *s, srv_work *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->stopping = true; /* the workers finish what is queued, then leave */
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < w->n_threads; i++) pthread_join(w->threads[i], NULL);
    if (s) run_finished(s, w);
    if (w->wake_fd >= 0) close(w->wake_fd);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
