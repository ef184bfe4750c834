/* srv_poll.c — the poll set of one round of the server loop: each descriptor is
 * registered with the function that handles it (as redis's ae and tmux do), and
 * after poll() every function is called, in the order registered, with its
 * descriptor's revents (0 when nothing happened: handlers check their own
 * deadlines then). Nothing couples two arrays by position. */
#include <stdlib.h>

#include "app/server/srv_internal.h"

void srv_poll_add(srv_pollset *ps, int fd, short events, srv_poll_fn fn, void *ctx) {
    if (ps->oom) return;
    if (ps->n == ps->cap) {
        const int cap = ps->cap ? 2 * ps->cap : 64;
        struct pollfd *p = realloc(ps->pfd, (size_t)cap * sizeof *p);
        if (p) ps->pfd = p;
        srv_poll_cb *cb = p ? realloc(ps->cb, (size_t)cap * sizeof *cb) : NULL;
        if (!p || !cb) {
            ps->oom = true;
            return;
        }
        ps->cb = cb;
        ps->cap = cap;
    }
    ps->pfd[ps->n] = (struct pollfd){.fd = fd, .events = events};
    ps->cb[ps->n] = (srv_poll_cb){fn, ctx};
    ps->n++;
}

void srv_poll_run(srv *s, srv_pollset *ps, double now) {
    for (int i = 0; i < ps->n; i++) ps->cb[i].fn(s, ps->cb[i].ctx, ps->pfd[i].revents, now);
}

void srv_poll_free(srv_pollset *ps) {
    free(ps->pfd);
    free(ps->cb);
    *ps = (srv_pollset){0};
}
