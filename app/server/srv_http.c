/* srv_http.c — HTTP/1.1 through libmicrohttpd: the daemon in external epoll
 * mode, run by the server thread's own poll loop (no thread per connection: no
 * handler ever blocks; a request waiting for the engine is a suspended
 * connection), with no listening socket of its own (srv.c accepts, looks at the
 * first byte and hands HTTP connections over); the list of those connections
 * with their per-listener count, request deadlines and eviction; routing, the
 * API key on TCP, size limits on headers and bodies, and the small endpoints
 * (/health, /v1/models). Generation endpoints are in srv_http_gen.c, Ollama's
 * API in srv_ollama.c, OpenAI's Responses API in srv_responses.c, Anthropic's
 * Messages API in srv_anthropic.c, the embeddings endpoints in srv_embed.c, the small
 * llama-server extras (/tokenize, /props, /metrics, ...) in srv_http_extra.c;
 * the answers themselves (JSON, errors, CORS headers) in srv_http_reply.c,
 * which every endpoint calls and which calls none of them back.
 *
 * Why not MHD's thread-per-connection mode: libmicrohttpd 0.9.75 deadlocks in
 * it once its own connection limit is reached (its listen thread locks a mutex
 * it already holds; every connection thread then waits on that mutex for
 * good). Here MHD's own limit is set above what srv.c ever hands it, and its
 * threads are not used at all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <unistd.h>

#include "app/server/srv_http.h"

#define HTTP_MEMORY_LIMIT (64 * 1024) /* per connection: headers beyond ~32 KiB get 431 */
#define HTTP_MAX_DISCARD (64u << 20)  /* an oversized chunked body is read this far, then cut */

typedef struct prep_job prep_job;

typedef struct http_req {
    sbuf body;
    bool too_large; /* answered 413 (or will, once the body is read) */
    bool answered;  /* a response is queued already */
    size_t seen;
    bool have_body; /* the body is complete */
    prep_job *prep; /* the request being read on a worker */
    http_pending pend; /* an answer waiting for the engine */
} http_req;

/* A request body being read on a worker (http_prep). The connection stays
 * suspended until the job is done; if it goes away first (shutdown), the job
 * is abandoned and frees itself when done. */
struct prep_job {
    prep_job *prev, *next; /* s->preps: in flight or done, not yet started */
    srv *s;
    http_req *q;           /* the request; NULL once abandoned */
    struct MHD_Connection *mc;
    const http_prep *ops;
    int which;
    sbuf body;             /* taken from the request; freed by the worker */
    void *ready;           /* what ops->prepare made */
    bool done;
};

static enum MHD_Result too_large(struct MHD_Connection *mc, size_t limit) {
    char msg[96];
    snprintf(msg, sizeof msg, "the request body is larger than %zu bytes", limit);
    sbuf b = {0};
    sb_printf(&b, "{\"error\":{\"code\":413,\"message\":\"%s\",\"type\":\"invalid_request_error\"}}", msg);
    struct MHD_Response *r = b.oom ? NULL : MHD_create_response_from_buffer(b.len, b.p, MHD_RESPMEM_MUST_COPY);
    sb_free(&b);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result ret = srv_http_queue(mc, 413 /* payload too large */, r);
    MHD_destroy_response(r);
    return ret;
}

static bool over_unix(struct MHD_Connection *mc) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return ci && ci->client_addr && ci->client_addr->sa_family == AF_UNIX;
}

/* "Authorization: Bearer KEY" on TCP when the server has a key; on
 * Anthropic's paths "x-api-key: KEY" too (what Anthropic's clients send). */
static bool authorized(srv *s, struct MHD_Connection *mc, const char *url) {
    if (!s->api_key || over_unix(mc)) return true;
    const char *x = srv_anthropic_path(url) ? MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "x-api-key") : NULL;
    if (x && srv_secret_eq(x, s->api_key)) return true;
    const char *h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) return false;
    h += 7;
    while (*h == ' ') h++;
    return srv_secret_eq(h, s->api_key);
}

static enum MHD_Result models(srv *s, struct MHD_Connection *mc) {
    cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data");
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddItemToArray(data, srv_http_model_object(s));
    return srv_http_send_json(mc, o);
}

/* ---- requests read on a worker ---- */

static void prep_unlink(prep_job *p) {
    if (p->prev) p->prev->next = p->next;
    else p->s->preps = p->next;
    if (p->next) p->next->prev = p->prev;
}

static void prep_run(void *ctx) {
    prep_job *p = ctx;
    p->ready = p->ops->prepare(&p->s->m, p->which, p->body.p ? p->body.p : "", p->body.len);
    sb_free(&p->body);
}

static void prep_done(srv *s, void *ctx) {
    (void)s;
    prep_job *p = ctx;
    p->done = true;
    if (p->q) {
        MHD_resume_connection(p->mc); /* on_request then starts it */
        return;
    }
    prep_unlink(p); /* abandoned */
    if (p->ready) p->ops->discard(p->ready);
    free(p);
}

/* Hands q's body to a worker for ops and suspends the connection; a small body
 * is read here at once (SRV_INLINE_BODY). */
static enum MHD_Result prep_begin(srv *s, struct MHD_Connection *mc, http_req *q, const http_prep *ops, int which) {
    if (q->body.len <= SRV_INLINE_BODY) {
        void *ready = ops->prepare(&s->m, which, q->body.p ? q->body.p : "", q->body.len);
        sb_free(&q->body);
        return ops->start(s, mc, ready, &q->pend);
    }
    prep_job *p = calloc(1, sizeof *p);
    if (!p) return MHD_NO;
    *p = (prep_job){.s = s, .q = q, .mc = mc, .ops = ops, .which = which, .body = q->body};
    q->body = (sbuf){0};
    if (!srv_work_submit(s->work, prep_run, prep_done, p)) {
        sb_free(&p->body);
        free(p);
        return MHD_NO;
    }
    p->next = s->preps;
    if (s->preps) s->preps->prev = p;
    s->preps = p;
    q->prep = p;
    MHD_suspend_connection(mc);
    return MHD_YES;
}

/* Drops q's job: freed now when done, else abandoned (freed by prep_done). */
static void prep_drop(http_req *q) {
    prep_job *p = q->prep;
    if (!p) return;
    q->prep = NULL;
    p->q = NULL;
    if (!p->done) return;
    prep_unlink(p);
    if (p->ready) p->ops->discard(p->ready);
    free(p);
}

/* The connection resumed: the job is done (or the server stops). */
static enum MHD_Result prep_resume(srv *s, struct MHD_Connection *mc, http_req *q) {
    prep_job *p = q->prep;
    if (!p->done) {
        if (!atomic_load(&s->stopping)) { /* (not woken by prep_done) */
            MHD_suspend_connection(mc);
            return MHD_YES;
        }
        prep_drop(q);
        return srv_http_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable_error", "shutting down");
    }
    q->prep = NULL;
    prep_unlink(p);
    const http_prep *ops = p->ops;
    void *ready = p->ready;
    free(p);
    return ops->start(s, mc, ready, &q->pend);
}

static enum MHD_Result route(srv *s, struct MHD_Connection *mc, const char *url, const char *method,
                             http_req *q) {
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/health") || !strcmp(url, "/v1/health")) {
        if (atomic_load(&s->stopping))
            return srv_http_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable_error", "shutting down");
        static const char ok[] = "{\"status\":\"ok\"}";
        return srv_http_json(mc, MHD_HTTP_OK, ok, sizeof ok - 1);
    }
    if (!strcmp(url, "/v1/models") || !strcmp(url, "/models")) {
        if (!get) return srv_http_error(mc, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", "use GET");
        return models(s, mc);
    }
    static const struct {
        const char *path;
        http_endpoint ep;
    } gen[] = {
        {"/v1/chat/completions", HTTP_OPENAI_CHAT}, {"/chat/completions", HTTP_OPENAI_CHAT},
        {"/v1/completions", HTTP_OPENAI_TEXT},      {"/completion", HTTP_LLAMA_COMPLETION},
        {"/completions", HTTP_LLAMA_COMPLETION},    {"/infill", HTTP_LLAMA_INFILL},
    };
    int which;
    const http_prep *extra_post = srv_http_extra_prep(url, method, &which);
    if (extra_post) return prep_begin(s, mc, q, extra_post, which); /* /tokenize, /detokenize, /apply-template */
    enum MHD_Result extra;
    if (srv_http_extra(s, mc, url, method, &extra)) return extra;
    const http_prep *ollama_gen = srv_ollama_prep(url, method, &which);
    if (ollama_gen) { /* Ollama's /api/chat, /api/generate */
        if (atomic_load(&s->stopping)) return srv_ollama_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "shutting down");
        return prep_begin(s, mc, q, ollama_gen, which);
    }
    if (!strcmp(url, "/v1/responses") || !strcmp(url, "/responses")) { /* OpenAI's Responses API: srv_responses.c */
        if (!post) return srv_http_error(mc, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", "use POST");
        if (atomic_load(&s->stopping))
            return srv_http_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable_error", "shutting down");
        return prep_begin(s, mc, q, &srv_responses_prep, 0);
    }
    if (srv_anthropic_path(url)) { /* Anthropic's Messages API: srv_anthropic.c */
        if (!post) return srv_anthropic_error(mc, MHD_HTTP_METHOD_NOT_ALLOWED, "use POST");
        if (atomic_load(&s->stopping)) return srv_anthropic_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "shutting down");
        return prep_begin(s, mc, q, &srv_anthropic_prep, srv_anthropic_which(url));
    }
    if (srv_ollama_path(url)) /* the rest of Ollama's API: srv_ollama.c */
        return srv_ollama_route(s, mc, url, method, q->body.p ? q->body.p : "", q->body.len);
    for (size_t i = 0; i < sizeof gen / sizeof gen[0]; i++) {
        if (strcmp(url, gen[i].path)) continue;
        if (!post) return srv_http_error(mc, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", "use POST");
        if (atomic_load(&s->stopping))
            return srv_http_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable_error", "shutting down");
        return prep_begin(s, mc, q, &srv_http_gen_prep, gen[i].ep);
    }
    static const struct {
        const char *path;
        http_embed_kind kind;
    } embed[] = {
        {"/v1/embeddings", HTTP_EMBED_OPENAI}, {"/embeddings", HTTP_EMBED_OPENAI},
        {"/api/embed", HTTP_EMBED_OLLAMA},     {"/api/embeddings", HTTP_EMBED_OLLAMA_OLD},
    };
    for (size_t i = 0; i < sizeof embed / sizeof embed[0]; i++) {
        if (strcmp(url, embed[i].path)) continue;
        if (!post && embed[i].kind != HTTP_EMBED_OPENAI) return srv_ollama_error(mc, MHD_HTTP_METHOD_NOT_ALLOWED, "use POST");
        if (!post) return srv_http_error(mc, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", "use POST");
        if (atomic_load(&s->stopping))
            return srv_http_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable_error", "shutting down");
        return prep_begin(s, mc, q, &srv_http_embed_prep, embed[i].kind);
    }
    return srv_http_error(mc, MHD_HTTP_NOT_FOUND, "not_found_error", "File Not Found");
}

/* Counts the request's Content-Length headers; differing values make it true. */
typedef struct cl_scan {
    const char *first;
    bool conflict;
} cl_scan;

static enum MHD_Result scan_length(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    cl_scan *c = cls;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) return MHD_YES;
    if (!c->first) c->first = value ? value : "";
    else if (strcmp(c->first, value ? value : "")) c->conflict = true;
    return MHD_YES;
}

static bool conflicting_lengths(struct MHD_Connection *mc) {
    cl_scan c = {0};
    MHD_get_connection_values(mc, MHD_HEADER_KIND, scan_length, &c);
    return c.conflict;
}

/* An error for a request whose body cannot be trusted: the connection closes. */
static enum MHD_Result closing_error(struct MHD_Connection *mc, unsigned status, const char *msg) {
    sbuf b = {0};
    sb_printf(&b, "{\"error\":{\"code\":%u,\"message\":", status);
    sb_json_str(&b, msg, strlen(msg));
    sb_str(&b, ",\"type\":\"invalid_request_error\"}}");
    struct MHD_Response *r = b.oom ? NULL : MHD_create_response_from_buffer(b.len, b.p, MHD_RESPMEM_MUST_COPY);
    sb_free(&b);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result ret = srv_http_queue(mc, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **ctx) {
    srv *s = cls;
    (void)version;
    http_req *q = *ctx;
    if (q && q->prep) return prep_resume(s, mc, q); /* resumed: the request has been read */
    if (q && q->pend.gen) /* resumed: the engine has news for a one-piece answer */
        return srv_http_generate_resume(s, mc, &q->pend.gen);
    if (q && q->pend.emb) return srv_http_embed_resume(s, mc, &q->pend.emb);
    if (!q) { /* the headers are in */
        if (!(q = calloc(1, sizeof *q))) return MHD_NO;
        *ctx = q;
        http_conn *hc = srv_http_conn_of(mc);
        if (hc) { /* the head came: the body has its own, longer deadline */
            hc->awaiting_head = false;
            hc->deadline = llc_now_ms() + SRV_BODY_MS;
            srv_http_cors_begin(s, mc, hc);
        }
        if (!strcmp(method, "OPTIONS")) { /* a CORS preflight: no key asked */
            q->too_large = q->answered = true; /* ignore any body */
            return srv_http_preflight(s, mc);
        }
        bool health = !strcmp(url, "/health") || !strcmp(url, "/v1/health") || !strcmp(url, "/"); /* "/": Ollama's probe */
        if (!health && !authorized(s, mc, url)) {
            q->too_large = q->answered = true; /* ignore any body */
            if (srv_ollama_path(url) || !strncmp(url, "/api/", 5)) /* Ollama's error shape */
                return srv_ollama_error(mc, MHD_HTTP_UNAUTHORIZED, "Invalid API Key");
            if (srv_anthropic_path(url))
                return srv_anthropic_error(mc, MHD_HTTP_UNAUTHORIZED, "invalid x-api-key");
            return srv_http_error(mc, MHD_HTTP_UNAUTHORIZED, "authentication_error", "Invalid API Key");
        }
        if (conflicting_lengths(mc)) { /* which body is meant? (request smuggling past a proxy) */
            q->too_large = q->answered = true; /* ignore any body */
            return closing_error(mc, MHD_HTTP_BAD_REQUEST, "conflicting Content-Length headers");
        }
        const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->cfg.max_body) {
            q->too_large = q->answered = true;
            return too_large(mc, s->cfg.max_body);
        }
        return MHD_YES;
    }
    if (*upload_size > 0) { /* a piece of the body */
        q->seen += *upload_size;
        if (!q->too_large && q->body.len + *upload_size > s->cfg.max_body) {
            q->too_large = true; /* chunked: read on, answer 413 at the end */
            sb_free(&q->body);
        }
        if (!q->too_large) sb_add(&q->body, upload, *upload_size);
        *upload_size = 0;
        if (q->body.oom || q->seen > HTTP_MAX_DISCARD) return MHD_NO;
        return MHD_YES;
    }
    if (!q->have_body) { /* the whole request is in: no deadline while it is answered */
        q->have_body = true;
        http_conn *hc = srv_http_conn_of(mc);
        if (hc) hc->deadline = 0;
    }
    if (q->too_large) {
        if (q->answered) return MHD_YES;
        q->answered = true;
        return too_large(mc, s->cfg.max_body);
    }
    return route(s, mc, url, method, q);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **ctx, enum MHD_RequestTerminationCode t) {
    srv *s = cls;
    (void)t;
    http_req *q = *ctx;
    http_conn *hc = srv_http_conn_of(mc);
    if (hc && !hc->evicted) { /* kept alive: the next request head has the same deadline */
        hc->awaiting_head = true;
        hc->deadline = llc_now_ms() + s->cfg.request_timeout_ms;
    }
    if (!q) return;
    prep_drop(q);
    srv_http_gen_free(q->pend.gen);
    srv_embed_free(q->pend.emb);
    sb_free(&q->body);
    free(q);
    *ctx = NULL;
}

/* Connections come and go: the list, the per-listener count, the deadline of
 * the first request head. */
static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code) {
    srv *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        http_conn *hc = calloc(1, sizeof *hc);
        if (!hc) return; /* not tracked: it still has MHD's idle timeout */
        hc->mc = mc;
        hc->tcp = !over_unix(mc);
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        hc->fd = ci ? ci->connect_fd : -1;
        hc->awaiting_head = true;
        hc->deadline = llc_now_ms() + s->cfg.request_timeout_ms;
        hc->next = s->http_head;
        if (s->http_head) s->http_head->prev = hc;
        s->http_head = hc;
        s->n_open[hc->tcp]++;
        *socket_ctx = hc;
        return;
    }
    http_conn *hc = *socket_ctx;
    if (!hc) return;
    if (!hc->evicted) s->n_open[hc->tcp]--;
    if (hc->prev) hc->prev->next = hc->next;
    else s->http_head = hc->next;
    if (hc->next) hc->next->prev = hc->prev;
    free(hc);
    *socket_ctx = NULL;
}

int srv_http_start(srv *s, llc_err *err) {
    /* MHD's own limit is never what stops a connection: srv.c keeps each
       listener below cfg.max_clients before handing one over */
    unsigned limit = 2u * (unsigned)s->cfg.max_clients + 256; /* + shut ones not yet closed */
    unsigned flags = MHD_USE_EPOLL | MHD_USE_NO_LISTEN_SOCKET | MHD_ALLOW_SUSPEND_RESUME;
    s->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_MEMORY_LIMIT,
                              MHD_OPTION_CONNECTION_LIMIT, limit,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SRV_HTTP_IDLE_S,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                              MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                              MHD_OPTION_END);
    if (!s->mhd) return llc_fail(err, LLC_ERR_IO, "cannot start the HTTP server (libmicrohttpd)");
    return 0;
}

void srv_http_add(srv *s, int fd, const struct sockaddr *addr, socklen_t len) {
    if (!s->mhd) {
        close(fd);
        return;
    }
    MHD_add_connection(s->mhd, fd, addr, len); /* closes fd itself when it fails */
}

static void shut(http_conn *hc) {
    /* MHD owns the fd: shut it down (never close it), MHD sees the end and closes */
    if (hc->fd >= 0) shutdown(hc->fd, SHUT_RDWR);
    hc->deadline = 0;
}

/* MHD's epoll fd, last of the round: requests too slow to send their head are
 * shut, then MHD does what is ready (it may free answers registered above). */
static void on_mhd(srv *s, void *ctx, short revents, double now) {
    if (!s->mhd) return;
    for (http_conn *hc = s->http_head; hc; hc = hc->next)
        if (hc->deadline > 0 && now >= hc->deadline) shut(hc); /* too slow to send its request */
    MHD_run(s->mhd);
}

void srv_http_poll_add(srv *s, srv_pollset *ps, int *timeout_ms, double now) {
    srv_http_gen_poll_add(s, ps, now);
    srv_embed_poll_add(s, ps);
    const union MHD_DaemonInfo *di = s->mhd ? MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    srv_poll_add(ps, di ? di->epoll_fd : -1, POLLIN, on_mhd, NULL);
    MHD_UNSIGNED_LONG_LONG t;
    if (s->mhd && MHD_get_timeout(s->mhd, &t) == MHD_YES && t < (MHD_UNSIGNED_LONG_LONG)*timeout_ms)
        *timeout_ms = (int)t;
    for (const http_conn *hc = s->http_head; hc; hc = hc->next)
        if (hc->deadline > 0 && !hc->evicted) {
            int left = (int)(hc->deadline - now) + 1;
            if (left < *timeout_ms) *timeout_ms = left > 0 ? left : 0;
        }
}

bool srv_http_evict_idle(srv *s, bool tcp, double older_than) {
    http_conn *best = NULL;
    for (http_conn *hc = s->http_head; hc; hc = hc->next)
        if (hc->tcp == tcp && hc->awaiting_head && !hc->evicted && hc->deadline < older_than &&
            (!best || hc->deadline < best->deadline))
            best = hc;
    if (!best) return false;
    best->evicted = true;
    best->awaiting_head = false;
    s->n_open[tcp]--;
    shut(best);
    return true;
}

void srv_http_cancel_all(srv *s) {
    srv_http_gen_cancel_all(s, false);
    srv_embed_cancel_all(s, false);
}

void srv_http_stop(srv *s) {
    if (!s->mhd) return;
    /* nothing may stay suspended when the daemon stops */
    for (prep_job *p = s->preps; p; p = p->next)
        if (p->q && !p->done) MHD_resume_connection(p->mc); /* answered "shutting down" */
    srv_http_gen_cancel_all(s, true);
    srv_embed_cancel_all(s, true);
    MHD_run(s->mhd);
    MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
}
