/* srv_http.c — HTTP/1.1 through libmicrohttpd: the daemon (no listening socket
 * of its own: srv.c accepts, looks at the first byte and hands HTTP connections
 * over; one thread per connection, so a handler may block on engine events),
 * routing, the API key on TCP, size limits on headers and bodies, and the small
 * endpoints (/health, /v1/models). Generation endpoints are in srv_http_gen.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "app/server/srv_http.h"

#define HTTP_MEMORY_LIMIT (64 * 1024) /* per connection: headers beyond ~32 KiB get 431 */
#define HTTP_MAX_DISCARD (64u << 20)  /* an oversized chunked body is read this far, then cut */

typedef struct http_req {
    sbuf body;
    bool too_large; /* answered 413 (or will, once the body is read) */
    bool answered;  /* a response is queued already */
    size_t seen;
} http_req;

enum MHD_Result srv_http_json(struct MHD_Connection *mc, unsigned status, const char *body, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(mc, status, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result srv_http_error(struct MHD_Connection *mc, unsigned status, const char *type, const char *msg) {
    sbuf b = {0};
    sb_printf(&b, "{\"error\":{\"code\":%u,\"message\":", status);
    sb_json_str(&b, msg, strlen(msg));
    sb_str(&b, ",\"type\":");
    sb_json_str(&b, type, strlen(type));
    sb_str(&b, "}}");
    enum MHD_Result ret = b.oom ? MHD_NO : srv_http_json(mc, status, b.p, b.len);
    sb_free(&b);
    return ret;
}

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
    enum MHD_Result ret = MHD_queue_response(mc, 413 /* payload too large */, r);
    MHD_destroy_response(r);
    return ret;
}

static bool over_unix(struct MHD_Connection *mc) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return ci && ci->client_addr && ci->client_addr->sa_family == AF_UNIX;
}

/* "Authorization: Bearer KEY" on TCP when the server has a key. */
static bool authorized(srv *s, struct MHD_Connection *mc) {
    if (!s->api_key || over_unix(mc)) return true;
    const char *h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) return false;
    h += 7;
    while (*h == ' ') h++;
    return srv_secret_eq(h, s->api_key);
}

static enum MHD_Result models(srv *s, struct MHD_Connection *mc) {
    cJSON *o = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(o, "data"), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON_AddStringToObject(m, "id", s->m.name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "llmchat");
    cJSON *meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddNumberToObject(meta, "n_ctx_train", s->m.n_ctx);
    cJSON_AddNumberToObject(meta, "n_vocab", s->m.n_vocab);
    cJSON_AddStringToObject(meta, "chat_template", chat_tmpl_name(s->m.tmpl));
    cJSON_AddBoolToObject(meta, "fim", s->m.has_fim);
    cJSON_AddItemToArray(data, m);
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    enum MHD_Result ret = txt ? srv_http_json(mc, MHD_HTTP_OK, txt, strlen(txt)) : MHD_NO;
    free(txt);
    return ret;
}

static enum MHD_Result route(srv *s, struct MHD_Connection *mc, const char *url, const char *method,
                             const http_req *q) {
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
    for (size_t i = 0; i < sizeof gen / sizeof gen[0]; i++) {
        if (strcmp(url, gen[i].path)) continue;
        if (!post) return srv_http_error(mc, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", "use POST");
        if (atomic_load(&s->stopping))
            return srv_http_error(mc, MHD_HTTP_SERVICE_UNAVAILABLE, "unavailable_error", "shutting down");
        return srv_http_generate(s, mc, gen[i].ep, q->body.p ? q->body.p : "", q->body.len);
    }
    return srv_http_error(mc, MHD_HTTP_NOT_FOUND, "not_found_error", "File Not Found");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **ctx) {
    srv *s = cls;
    (void)version;
    http_req *q = *ctx;
    if (!q) { /* the headers are in */
        if (!(q = calloc(1, sizeof *q))) return MHD_NO;
        *ctx = q;
        bool health = !strcmp(url, "/health") || !strcmp(url, "/v1/health");
        if (!health && !authorized(s, mc)) {
            q->too_large = q->answered = true; /* ignore any body */
            return srv_http_error(mc, MHD_HTTP_UNAUTHORIZED, "authentication_error", "Invalid API Key");
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
    if (q->too_large) {
        if (q->answered) return MHD_YES;
        q->answered = true;
        return too_large(mc, s->cfg.max_body);
    }
    return route(s, mc, url, method, q);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **ctx, enum MHD_RequestTerminationCode t) {
    (void)cls, (void)mc, (void)t;
    http_req *q = *ctx;
    if (!q) return;
    sb_free(&q->body);
    free(q);
    *ctx = NULL;
}

int srv_http_start(srv *s, llc_err *err) {
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
    s->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_MEMORY_LIMIT,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.max_clients,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, /* idle or not reading: closed */
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                              MHD_OPTION_END);
    if (!s->mhd) return llc_fail(err, LLC_ERR_IO, "cannot start the HTTP server (libmicrohttpd)");
    return 0;
}

void srv_http_add(srv *s, int fd, const struct sockaddr *addr, socklen_t len) {
    if (!s->mhd || MHD_add_connection(s->mhd, fd, addr, len) != MHD_YES) {
        /* MHD closes the socket in any case */
    }
}

void srv_http_stop(srv *s, double deadline_ms) {
    if (!s->mhd) return;
    while (atomic_load(&s->http_active) > 0 && llc_now_ms() < deadline_ms) usleep(10000);
    MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
}
