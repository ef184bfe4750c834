/* srv.c — the socket server's life and its poll loop: the Unix socket (default
 * path, directory 0700, socket 0600, stale-file detection, peer uid check),
 * the optional TCP listener, accepting and telling NDJSON from HTTP by the first
 * byte, per-listener connection limits (the oldest connection that has sent no
 * request yet makes room for a new one), per-connection input lines and capped
 * output buffers, dropping slow or dead clients, driving libmicrohttpd from the
 * same poll loop, and an orderly shutdown. The NDJSON methods are in srv_proto.c,
 * sessions in srv_sessions.c, HTTP in srv_http.c, the UI's notes in srv_note.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "app/server/srv_internal.h"

#define READ_CHUNK 65536

/* ---- paths and sockets ---- */

int srv_default_socket_path(char *buf, size_t n, llc_err *err) {
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    int w;
    if (xdg && xdg[0] == '/') w = snprintf(buf, n, "%s/llmchat/llmchat.sock", xdg);
    else w = snprintf(buf, n, "/tmp/llmchat-%u/llmchat.sock", (unsigned)getuid());
    if (w < 0 || (size_t)w >= n || (size_t)w >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return llc_fail(err, LLC_ERR_RANGE, "the socket path is too long (XDG_RUNTIME_DIR=%.200s)",
                        xdg ? xdg : "");
    return 0;
}

/* The directory of path: created 0700 when missing; when `strict` (our default
 * location) it must be a real directory of ours and is set to 0700. */
static int prepare_dir(const char *path, bool strict, llc_err *err) {
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return 0;
    *slash = 0;
    if (mkdir(dir, 0700) && errno != EEXIST)
        return llc_fail(err, LLC_ERR_IO, "%s: cannot create the directory: %s", dir, strerror(errno));
    if (!strict) return 0;
    struct stat st;
    if (lstat(dir, &st)) return llc_fail(err, LLC_ERR_IO, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode) || st.st_uid != getuid())
        return llc_fail(err, LLC_ERR_IO, "%s is not a directory of this user; refusing to use it", dir);
    if ((st.st_mode & 0777) != 0700 && chmod(dir, 0700))
        return llc_fail(err, LLC_ERR_IO, "%s: cannot make it private: %s", dir, strerror(errno));
    return 0;
}

/* Binds the Unix socket; a socket file nobody listens on any more is replaced,
 * a live one is left alone. */
static int open_unix(srv *s, llc_err *err) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(s->sock_path) >= sizeof a.sun_path)
        return llc_fail(err, LLC_ERR_RANGE, "%s: the socket path is too long", s->sock_path);
    memcpy(a.sun_path, s->sock_path, strlen(s->sock_path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return llc_fail(err, LLC_ERR_IO, "socket: %s", strerror(errno));
    for (int attempt = 0;; attempt++) {
        if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0) break;
        int e = errno;
        if (e != EADDRINUSE || attempt > 0) {
            close(fd);
            return llc_fail(err, LLC_ERR_IO, "%s: %s", s->sock_path, strerror(e));
        }
        struct stat st;
        if (lstat(s->sock_path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
            close(fd);
            return llc_fail(err, LLC_ERR_IO, "%s exists and is not a socket; not replacing it", s->sock_path);
        }
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int rc = probe < 0 ? -1 : connect(probe, (struct sockaddr *)&a, sizeof a);
        int pe = errno;
        if (probe >= 0) close(probe);
        if (rc == 0 || (pe != ECONNREFUSED && pe != ENOENT)) {
            close(fd);
            return llc_fail(err, LLC_ERR_IO, "another llmchat is serving %s", s->sock_path);
        }
        if (pe == ECONNREFUSED && unlink(s->sock_path) && errno != ENOENT) { /* stale */
            close(fd);
            return llc_fail(err, LLC_ERR_IO, "%s: cannot remove the stale socket: %s", s->sock_path,
                            strerror(errno));
        }
    }
    struct stat st;
    if (chmod(s->sock_path, 0600) || stat(s->sock_path, &st) || listen(fd, 128)) {
        int e = errno;
        unlink(s->sock_path);
        close(fd);
        return llc_fail(err, LLC_ERR_IO, "%s: %s", s->sock_path, strerror(e));
    }
    s->sock_dev = st.st_dev;
    s->sock_ino = st.st_ino;
    s->unix_fd = fd;
    return 0;
}

static bool is_loopback(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a)) return true;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return false;
}

static int open_tcp(srv *s, llc_err *err) {
    const char *spec = s->cfg.listen;
    char host[256];
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || !colon[1])
        return llc_fail(err, LLC_ERR_FORMAT, "--listen '%s': give HOST:PORT, e.g. 127.0.0.1:8080", spec);
    size_t hl = (size_t)(colon - spec);
    if (spec[0] == '[' && hl >= 2 && spec[hl - 1] == ']') spec++, hl -= 2; /* [::1]:8080 */
    if (hl >= sizeof host) return llc_fail(err, LLC_ERR_FORMAT, "--listen: the host name is too long");
    memcpy(host, spec, hl);
    host[hl] = 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res = NULL;
    int gr = getaddrinfo(host, colon + 1, &hints, &res);
    if (gr) return llc_fail(err, LLC_ERR_FORMAT, "--listen '%s': %s", s->cfg.listen, gai_strerror(gr));
    if (!is_loopback(res->ai_addr) && !s->api_key) {
        freeaddrinfo(res);
        return llc_fail(err, LLC_ERR_RANGE,
                        "--listen %s is not a loopback address: give --api-key KEY (or LLMCHAT_API_KEY) "
                        "so that other machines need it", s->cfg.listen);
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
    int rc = fd < 0 ? -1 : 0;
    if (!rc) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (!rc) rc = bind(fd, res->ai_addr, res->ai_addrlen);
    if (!rc) rc = listen(fd, 128);
    freeaddrinfo(res);
    if (rc) {
        int e = errno;
        if (fd >= 0) close(fd);
        return llc_fail(err, LLC_ERR_IO, "--listen %s: %s", s->cfg.listen, strerror(e));
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        s->tcp_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                     : ((struct sockaddr_in *)&ss)->sin_port);
    s->tcp_fd = fd;
    return 0;
}

/* ---- connections ---- */

static conn *conn_new(srv *s, int fd, bool tcp) {
    if (s->n_conns == s->cap_conns) {
        int cap = s->cap_conns ? 2 * s->cap_conns : 32;
        conn **p = realloc(s->conns, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        s->conns = p;
        s->cap_conns = cap;
    }
    conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = fd;
    c->tcp = tcp;
    c->t_accept = c->t_active = llc_now_ms();
    s->conns[s->n_conns++] = c;
    s->n_open[tcp]++;
    return c;
}

/* The connection no longer counts against its listener (evicted, or handed to
 * libmicrohttpd, which counts it from then on). */
static void conn_uncount(srv *s, conn *c) {
    if (c->uncounted) return;
    c->uncounted = true;
    s->n_open[c->tcp]--;
}

static void conn_free(srv *s, conn *c) {
    conn_uncount(s, c);
    srv_proto_conn_gone(s, c);
    if (c->fd >= 0) close(c->fd);
    sb_free(&c->in);
    sb_free(&c->out);
    free(c);
}

/* Splits the input into lines and handles each. */
static void conn_lines(srv *s, conn *c) {
    size_t start = 0;
    for (;;) {
        char *nl = c->in.len > start ? memchr(c->in.p + start, '\n', c->in.len - start) : NULL;
        if (!nl) break;
        size_t len = (size_t)(nl - (c->in.p + start));
        if (len > s->cfg.max_line) break;
        const char *line = c->in.p + start;
        size_t l = len;
        while (l > 0 && (line[l - 1] == '\r' || line[l - 1] == ' ' || line[l - 1] == '\t')) l--;
        size_t k = 0;
        while (k < l && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r')) k++;
        if (k < l) srv_proto_line(s, c, line + k, l - k);
        start += len + 1;
        if (c->dead || c->closing) break;
    }
    sb_drop(&c->in, start);
    if (!c->dead && !c->closing && c->in.len > s->cfg.max_line) {
        char msg[96];
        snprintf(msg, sizeof msg, "the request line is longer than %zu bytes; closing the connection",
                 s->cfg.max_line);
        srv_send_error(s, c, "null", "too_large", msg);
        c->closing = true;
        sb_clear(&c->in);
    }
}

static void conn_read(srv *s, conn *c) {
    /* what is kept is at most max_line (a longer line closes the connection),
       so the input stays under max_line + READ_CHUNK */
    if (!sb_reserve(&c->in, READ_CHUNK)) { /* out of memory */
        c->dead = true;
        return;
    }
    ssize_t r = recv(c->fd, c->in.p + c->in.len, READ_CHUNK, MSG_DONTWAIT);
    if (r > 0) {
        c->t_active = llc_now_ms();
        if (c->in.len == 0) c->t_partial = c->t_active;
        sb_wrote(&c->in, (size_t)r);
        size_t before = c->in.len;
        conn_lines(s, c);
        if (c->in.len < before) c->t_partial = c->in.len ? c->t_active : 0; /* a new line began */
    } else if (r == 0) {
        /* end of input: a last line without its newline still counts; answers
           still streaming are sent (a half-closed client waits for them); with
           nothing in flight the connection is done */
        if (c->in.len > 0 && !c->closing) { /* the room reserved above holds it */
            sb_putc(&c->in, '\n');
            conn_lines(s, c);
        }
        c->eof = true;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        c->dead = true;
    }
}

/* The first byte tells the protocol: an upper-case letter starts an HTTP
 * request line; anything else is NDJSON. */
static void conn_sniff(srv *s, conn *c) {
    char b;
    ssize_t r = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        c->dead = true;
        return;
    }
    if (r < 0) return;
    if (b >= 'A' && b <= 'Z') {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (getpeername(c->fd, (struct sockaddr *)&ss, &sl)) {
            memset(&ss, 0, sizeof ss);
            ss.ss_family = c->tcp ? AF_INET : AF_UNIX;
            sl = sizeof(sa_family_t);
        }
        int fd = c->fd;
        c->fd = -1;
        c->dead = true;
        conn_uncount(s, c);
        srv_http_add(s, fd, (struct sockaddr *)&ss, sl);
        return;
    }
    c->kind = CONN_NDJSON;
    c->authed = !c->tcp || !s->api_key;
}

/* Room for one more connection on a full listener: the oldest connection of
 * that listener that has not sent a request yet (no first byte, or an HTTP
 * connection without a complete request head) is shut. False when every
 * connection there is busy. */
static bool conn_idle(const conn *c);

/* Not serving anything: no first byte yet, or an NDJSON connection with no
 * request running, nothing to send and no unfinished line. */
static bool evictable(const conn *c) {
    if (c->uncounted || c->dead) return false;
    return c->kind == CONN_SNIFF || (conn_idle(c) && c->in.len == 0);
}

static bool make_room(srv *s, bool tcp) {
    conn *oldest = NULL;
    for (int i = 0; i < s->n_conns; i++) {
        conn *c = s->conns[i];
        if (c->tcp == tcp && evictable(c) && (!oldest || c->t_active < oldest->t_active)) oldest = c;
    }
    /* whichever has waited longer: an HTTP connection's deadline is set the same
       way from its last answer (or accept) */
    double since = oldest ? oldest->t_active + s->cfg.request_timeout_ms : 1e300;
    if (srv_http_evict_idle(s, tcp, since)) return true;
    if (!oldest) return false;
    oldest->dead = true;
    conn_uncount(s, oldest);
    return true;
}

static void do_accept(srv *s, int lfd, bool tcp) {
    for (int k = 0; k < 64; k++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                s->accept_pause_until = llc_now_ms() + 100; /* try again soon, do not spin */
            return;
        }
        if (!tcp) {
            struct ucred cr;
            socklen_t l = sizeof cr;
            if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) || cr.uid != getuid()) {
                close(fd); /* another user */
                continue;
            }
        }
        if ((s->n_open[tcp] >= s->cfg.max_clients && !make_room(s, tcp)) || !conn_new(s, fd, tcp)) {
            close(fd);
            continue;
        }
    }
}

static bool conn_idle(const conn *c) { return !c->reqs && !c->preps && srv_conn_pending(c) == 0; }

/* ---- the loop's handlers (srv_poll.c calls each every round, in order) ---- */

static void on_wake(srv *s, void *ctx, short revents, double now) {
    if (!(revents & POLLIN)) return;
    uint64_t v;
    ssize_t r = read(s->wake_fd, &v, sizeof v);
    (void)r;
}

static void on_accept_unix(srv *s, void *ctx, short revents, double now) {
    if (revents & POLLIN) do_accept(s, s->unix_fd, false);
}

static void on_accept_tcp(srv *s, void *ctx, short revents, double now) {
    if (revents & POLLIN) do_accept(s, s->tcp_fd, true);
}

static void on_warm(srv *s, void *ctx, short revents, double now) {
    if (revents & POLLIN) srv_warm_drain(s);
}

/* A connection's socket: the first byte decides its protocol (or its time to
 * send one runs out); then input lines, hang-ups, and lines that never end. */
static void on_conn_socket(srv *s, void *ctx, short revents, double now) {
    conn *c = ctx;
    if (c->dead) return; /* evicted to make room */
    if (c->kind == CONN_SNIFF) {
        if (revents & (POLLIN | POLLHUP | POLLERR)) conn_sniff(s, c);
        else if (now - c->t_accept > s->cfg.request_timeout_ms) c->dead = true;
        return;
    }
    if (revents & (POLLERR | POLLHUP | POLLNVAL)) { /* gone: cancel its requests */
        c->dead = true;
        return;
    }
    if (revents & POLLIN) conn_read(s, c);
    if (c->t_partial > 0 && c->in.len > 0 && !c->closing && now - c->t_partial > SRV_BODY_MS) {
        srv_send_error(s, c, "null", "timeout", "the request line did not end in time; closing the connection");
        c->closing = true; /* a line dripping in byte by byte */
        sb_clear(&c->in);
    }
}

/* A connection's engine client: events of its requests. */
static void on_conn_engine(srv *s, void *ctx, short revents, double now) {
    conn *c = ctx;
    if (!c->dead && c->kind == CONN_NDJSON && (revents & POLLIN)) srv_proto_events(s, c);
}

static void *srv_main(void *arg) {
    srv *s = arg;
    srv_pollset ps = {0};
    bool shutting = false;
    double deadline = 0;
    for (;;) {
        double now = llc_now_ms();
        if (!shutting && atomic_load(&s->stopping)) {
            shutting = true;
            deadline = now + SRV_SHUTDOWN_MS;
            for (int i = 0; i < s->n_conns; i++) srv_proto_cancel_all(s, s->conns[i]);
            srv_http_cancel_all(s);
        }
        if (shutting) {
            bool all_done = s->http_active == 0; /* every HTTP answer sent */
            for (int i = 0; i < s->n_conns; i++)
                if (s->conns[i]->kind == CONN_NDJSON && !s->conns[i]->dead && !conn_idle(s->conns[i]))
                    all_done = false;
            if (all_done || now >= deadline) break;
        }
        int timeout = 1000;
        bool accepting = !shutting && now >= s->accept_pause_until;
        if (!shutting && !accepting) timeout = 100;
        ps.n = 0;
        srv_poll_add(&ps, s->wake_fd, POLLIN, on_wake, NULL);
        srv_poll_add(&ps, accepting ? s->unix_fd : -1, POLLIN, on_accept_unix, NULL);
        srv_poll_add(&ps, accepting ? s->tcp_fd : -1, POLLIN, on_accept_tcp, NULL);
        srv_poll_add(&ps, s->warm_ec ? engine_client_fd(s->warm_ec) : -1, POLLIN, on_warm, NULL);
        srv_work_poll_add(s, &ps);
        /* (connections accepted this round join the next one) */
        for (int i = 0; i < s->n_conns; i++) {
            conn *c = s->conns[i];
            short ev = 0;
            if (!c->closing && !c->eof && !shutting) ev |= POLLIN;
            if (srv_conn_pending(c) > 0) ev |= POLLOUT;
            srv_poll_add(&ps, c->fd, ev, on_conn_socket, c);
            srv_poll_add(&ps, c->ec ? engine_client_fd(c->ec) : -1, POLLIN, on_conn_engine, c);
            if (c->kind == CONN_SNIFF) {
                int left = (int)(c->t_accept + s->cfg.request_timeout_ms - now) + 1;
                if (left < timeout) timeout = left > 0 ? left : 0;
            }
        }
        srv_http_poll_add(s, &ps, &timeout, now);
        if (ps.oom) break;
        if (shutting) timeout = timeout < 50 ? timeout : 50;
        int n = poll(ps.pfd, (nfds_t)ps.n, timeout);
        if (n < 0 && errno != EINTR) break;
        if (n < 0) /* interrupted: nothing to report */
            for (int i = 0; i < ps.n; i++) ps.pfd[i].revents = 0;
        now = llc_now_ms();
        srv_poll_run(s, &ps, now);
        for (int i = 0; i < s->n_conns; i++) { /* write what is queued; close what is over */
            conn *c = s->conns[i];
            if (c->dead || c->kind != CONN_NDJSON) continue;
            srv_conn_flush(c);
            /* after a protocol error: once the error is out; at end of input: once idle */
            if (srv_conn_pending(c) == 0 && (c->closing || (c->eof && !c->reqs && !c->preps))) c->dead = true;
        }
        int k = 0;
        for (int i = 0; i < s->n_conns; i++) {
            conn *c = s->conns[i];
            if (c->dead) conn_free(s, c);
            else s->conns[k++] = c;
        }
        s->n_conns = k;
        if (now - s->last_retry_ms >= 1000) {
            s->last_retry_ms = now;
            srv_sessions_retry(s, false);
        }
    }
    for (int i = 0; i < s->n_conns; i++) {
        srv_conn_flush(s->conns[i]);
        conn_free(s, s->conns[i]);
    }
    s->n_conns = 0;
    srv_http_stop(s); /* closes every HTTP connection (on this thread: MHD runs here) */
    srv_work_stop(s, s->work); /* requests still being read: their connections are gone */
    s->work = NULL;
    engine_client_free(s->warm_ec);
    s->warm_ec = NULL;
    srv_sessions_retry(s, true);
    srv_poll_free(&ps);
    return NULL;
}

/* ---- start and stop ---- */

static void srv_free(srv *s) {
    if (!s) return;
    if (s->unix_fd >= 0) {
        close(s->unix_fd);
        struct stat st; /* remove the socket file only if it is still ours */
        if (lstat(s->sock_path, &st) == 0 && st.st_dev == s->sock_dev && st.st_ino == s->sock_ino)
            unlink(s->sock_path);
    }
    if (s->tcp_fd >= 0) close(s->tcp_fd);
    if (s->wake_fd >= 0) close(s->wake_fd);
    srv_work_stop(NULL, s->work); /* (only when the server thread never ran) */
    for (srv_note_node *n = s->note_head, *next; n; n = next) {
        next = n->next;
        free(n->note.text);
        free(n);
    }
    if (s->note_fd >= 0) close(s->note_fd);
    pthread_mutex_destroy(&s->note_mu);
    db_close(s->db);
    free(s->conns);
    free(s->busy_sessions);
    free(s->api_key);
    free(s->model_name_copy);
    free(s->model_path);
    srv_memo_free(s->m.memo);
    free(s->cors_origins);
    free(s);
}

static void model_name_of(const llm *l, const char *given, char *out, size_t n) {
    if (given && *given) {
        snprintf(out, n, "%s", given);
        return;
    }
    gguf_str name = {0};
    if (gguf_get_str(l->file, "general.name", &name, NULL) == 0 && name.len > 0)
        snprintf(out, n, "%.*s", (int)(name.len < n - 1 ? name.len : n - 1), name.ptr);
    else
        snprintf(out, n, "model");
}

/* Two listeners' worth of connections, each with an engine client (an
 * eventfd), need more than the usual 1024 descriptors: take what the hard
 * limit allows. */
static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max && rl.rlim_cur < 65536) {
        rl.rlim_cur = rl.rlim_max < 65536 ? rl.rlim_max : 65536;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int srv_start(engine *e, const llm *l, chat_tmpl t, const srv_config *cfg, srv **out, llc_err *err) {
    *out = NULL;
    srv *s = calloc(1, sizeof *s);
    if (!s) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    s->unix_fd = s->tcp_fd = s->wake_fd = s->note_fd = -1;
    pthread_mutex_init(&s->note_mu, NULL);
    s->e = e;
    s->cfg = *cfg;
    if (s->cfg.max_clients <= 0) s->cfg.max_clients = 256;
    if (s->cfg.request_timeout_ms <= 0) s->cfg.request_timeout_ms = 5000;
    if (s->cfg.max_line == 0) s->cfg.max_line = 1 << 20;
    if (s->cfg.max_body == 0) s->cfg.max_body = 8 << 20;
    if (s->cfg.max_outbuf == 0) s->cfg.max_outbuf = 4 << 20;
    if (s->cfg.stall_ms <= 0) s->cfg.stall_ms = 30000;
    if (cfg->api_key && *cfg->api_key && !(s->api_key = strdup(cfg->api_key))) {
        srv_free(s);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    s->cfg.api_key = s->api_key;
    s->m.tok = l->tok;
    s->m.tmpl = t;
    s->m.tool_format = chat_tmpl_is_jinja(t) ? toolcall_detect(chat_tmpl_source(t)) : TOOLCALL_GENERIC;
    s->m.tmpl_reasoning = chat_tmpl_is_jinja(t) ? reasoning_detect(chat_tmpl_source(t)) : REASONING_NONE;
    s->m.reasoning = cfg->no_reasoning ? REASONING_NONE : s->m.tmpl_reasoning;
    s->m.n_ctx = model_hparams_of(l->m)->n_ctx_train;
    s->m.n_embd = model_hparams_of(l->m)->dim;
    s->m.n_vocab = tok_n_vocab(l->tok);
    s->m.has_fim = tok_special(l->tok, TOK_SPECIAL_FIM_PRE) >= 0 &&
                   tok_special(l->tok, TOK_SPECIAL_FIM_SUF) >= 0 &&
                   tok_special(l->tok, TOK_SPECIAL_FIM_MID) >= 0;
    model_name_of(l, cfg->model_name, s->m.name, sizeof s->m.name);
    s->m.file = l->file;
    s->m.gpu = l->be && l->be->name && strcmp(l->be->name, "cpu") != 0;
    s->m.loaded_at = (long long)time(NULL);
    s->cfg.model_name = s->m.name;
    s->chat_src = t && t == l->chat ? l->chat_src : NULL;
    if (!(s->m.memo = srv_memo_new()) || (cfg->model_path && !(s->model_path = strdup(cfg->model_path))) ||
        (cfg->cors_origins && !(s->cors_origins = strdup(cfg->cors_origins)))) {
        srv_free(s);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    s->cfg.model_path = s->model_path;
    s->cfg.cors_origins = s->cors_origins;

    int rc = 0;
    if (cfg->socket_path && *cfg->socket_path) {
        if (strlen(cfg->socket_path) >= sizeof s->sock_path)
            rc = llc_fail(err, LLC_ERR_RANGE, "%s: the socket path is too long", cfg->socket_path);
        else snprintf(s->sock_path, sizeof s->sock_path, "%s", cfg->socket_path);
        if (!rc) rc = prepare_dir(s->sock_path, false, err);
    } else {
        rc = srv_default_socket_path(s->sock_path, sizeof s->sock_path, err);
        if (!rc) rc = prepare_dir(s->sock_path, true, err);
    }
    s->cfg.socket_path = s->sock_path;
    if (!rc) rc = open_unix(s, err);
    if (!rc && cfg->listen && *cfg->listen) rc = open_tcp(s, err);
    if (!rc && (s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
        rc = llc_fail(err, LLC_ERR_IO, "eventfd: %s", strerror(errno));
    if (!rc && cfg->notify && (s->note_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
        rc = llc_fail(err, LLC_ERR_IO, "eventfd: %s", strerror(errno));
    if (rc) {
        srv_free(s);
        return rc;
    }
    /* the database: its trouble is reported to the clients that need it */
    char dbp[4096];
    const char *path = cfg->db_path;
    llc_err dberr = {{0}};
    if (!path && db_default_path(dbp, sizeof dbp, &dberr) == 0) path = dbp;
    if (path && *path) {
        if (db_open(path, &s->db, &dberr) == 0) db_set_busy_timeout(s->db, 250);
        else snprintf(s->db_error, sizeof s->db_error, "%s", dberr.msg);
    } else {
        snprintf(s->db_error, sizeof s->db_error, "%s",
                 path ? "no database (started without one)" : dberr.msg);
    }
    signal(SIGPIPE, SIG_IGN);
    /* the server's threads take no signals: they stay with the main thread */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    raise_fd_limit();
    rc = srv_work_start(&s->work, err); /* (its threads inherit the blocked signals) */
    if (!rc) rc = srv_http_start(s, err);
    if (!rc && pthread_create(&s->thread, NULL, srv_main, s)) {
        rc = llc_fail(err, LLC_ERR_NOMEM, "cannot start the server thread");
        srv_http_stop(s);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        srv_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void srv_stop(srv *s) {
    if (!s) return;
    atomic_store(&s->stopping, true);
    uint64_t one = 1;
    ssize_t w = write(s->wake_fd, &one, sizeof one);
    (void)w;
    pthread_join(s->thread, NULL); /* it stops the HTTP daemon itself */
    srv_free(s);
}

const char *srv_socket_path(const srv *s) { return s->sock_path; }
int srv_tcp_port(const srv *s) { return s->tcp_fd >= 0 ? s->tcp_port : 0; }
const char *srv_db_error(const srv *s) { return s->db ? "" : s->db_error; }
