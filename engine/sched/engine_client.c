/* engine_client.c — the clients' event queues: a client is a mutex-guarded
 * list of events plus an eventfd that is readable while events wait. The engine
 * thread pushes (eng_client_push); the owning thread takes them out
 * (engine_client_next / _wait) and frees them. A client its owner lets go while
 * requests still run is freed by the engine when the last one ends
 * (eng_client_release). Each request reserves its samples' EV_DONE nodes at
 * submit, so that event, which clients wait for, survives running out of memory. */
#include "engine/sched/engine.h"

#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "engine/sched/engine_internal.h"
#include "kernels/fault.h"

static void enqueue(engine_client *c, ev_node *n) {
    n->next = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->tail) c->tail->next = n;
    else c->head = n;
    c->tail = n;
    pthread_mutex_unlock(&c->mu);
    uint64_t one = 1;
    ssize_t w = write(c->efd, &one, sizeof one);
    (void)w;
}

bool eng_client_push(engine_client *c, const engine_event *ev) {
    ev_node *n = llc_fault_event_fails() ? NULL : malloc(sizeof *n);
    if (!n) { /* out of memory: this event is lost, the engine goes on */
        free(ev->text);
        free(ev->embedding);
        return false;
    }
    n->ev = *ev;
    enqueue(c, n);
    return true;
}

void eng_client_push_done(request *r, const engine_event *ev) {
    ev_node *n = NULL;
    if (ev->seq_index >= 0 && ev->seq_index < r->n_done_nodes) {
        n = r->done_nodes[ev->seq_index];
        r->done_nodes[ev->seq_index] = NULL;
    }
    if (!n) { /* (used already: cannot happen, one EV_DONE per sample) */
        eng_client_push(r->client, ev);
        return;
    }
    n->ev = *ev;
    enqueue(r->client, n);
}

int eng_request_reserve_done(request *r, int n) {
    r->done_nodes = calloc((size_t)n, sizeof *r->done_nodes);
    if (!r->done_nodes) return LLC_ERR_NOMEM;
    r->n_done_nodes = n;
    for (int i = 0; i < n; i++)
        if (!(r->done_nodes[i] = malloc(sizeof *r->done_nodes[i]))) return LLC_ERR_NOMEM;
    return 0;
}

int engine_client_create(engine *e, engine_client **out) {
    engine_client *c = calloc(1, sizeof *c);
    if (!c) return LLC_ERR_NOMEM;
    c->e = e;
    pthread_mutex_init(&c->mu, NULL);
    c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (c->efd < 0) {
        free(c);
        return LLC_ERR_IO;
    }
    *out = c;
    return 0;
}

void eng_client_destroy(engine_client *c) {
    for (ev_node *n = c->head, *next; n; n = next) {
        next = n->next;
        free(n->ev.text);
        free(n->ev.embedding);
        free(n);
    }
    close(c->efd);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void engine_client_free(engine_client *c) {
    if (!c) return;
    engine *e = c->e;
    pthread_mutex_lock(&e->mu);
    c->closed = true;
    bool now = c->active == 0;
    pthread_mutex_unlock(&e->mu);
    if (now) {
        eng_client_destroy(c);
        return;
    }
    /* the engine cancels its requests and frees it when the last one ends */
    inbox_msg *msg = calloc(1, sizeof *msg);
    if (msg) {
        msg->kind = MSG_CLIENT_GONE;
        msg->client = c;
        eng_inbox_post(e, msg);
    }
}

int engine_client_fd(const engine_client *c) { return c->efd; }

engine_event *engine_client_next(engine_client *c) {
    pthread_mutex_lock(&c->mu);
    ev_node *n = c->head;
    if (n) {
        c->head = n->next;
        if (!c->head) c->tail = NULL;
    }
    if (!c->head) {
        uint64_t v;
        ssize_t r = read(c->efd, &v, sizeof v); /* drain the wake counter */
        (void)r;
    }
    pthread_mutex_unlock(&c->mu);
    return n ? &n->ev : NULL; /* ev is the first member: the node is freed through it */
}

engine_event *engine_client_wait(engine_client *c, int timeout_ms) {
    double deadline = llc_now_ms() + timeout_ms;
    for (;;) {
        engine_event *ev = engine_client_next(c);
        if (ev) return ev;
        int left = timeout_ms < 0 ? -1 : (int)(deadline - llc_now_ms());
        if (timeout_ms >= 0 && left <= 0) return NULL;
        struct pollfd pfd = {.fd = c->efd, .events = POLLIN};
        poll(&pfd, 1, left);
    }
}

void engine_event_free(engine_event *ev) {
    if (!ev) return;
    free(ev->text);
    free(ev->embedding);
    free((ev_node *)ev);
}

/* One request of c has ended; frees c if its owner let it go. */
void eng_client_release(engine *e, engine_client *c) {
    pthread_mutex_lock(&e->mu);
    bool destroy = --c->active == 0 && c->closed;
    pthread_mutex_unlock(&e->mu);
    if (destroy) eng_client_destroy(c);
}
