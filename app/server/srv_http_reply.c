/* srv_http_reply.c — the answers on an HTTP connection: the http_conn of an MHD
 * connection, a response queued with its CORS headers, JSON bodies, OpenAI-shaped
 * errors, and CORS itself. Every endpoint (srv_http.c's router, srv_http_gen.c,
 * srv_ollama.c, srv_embed.c, srv_http_extra.c) calls these; they call nothing of
 * the router or the endpoints back.
 *
 * CORS: Cross-Origin Resource Sharing on the TCP listener, so a web page (a
 * browser UI, a dashboard) may call the API: which origin each answer names in
 * Access-Control-Allow-Origin, and the OPTIONS preflight browsers send before a
 * POST with a JSON body or an Authorization header. cfg.cors_origins: NULL or "*" lets any origin read the answers (what
 * llama-server does; the API key, when set, still guards every request but
 * the preflight); a comma-separated list lets only those ("http://a:3000,
 * https://b"): the answer names the request's Origin when it is listed, and
 * nothing otherwise (the browser then withholds the answer from the page);
 * "none" sends no CORS header at all. The Unix socket gets no CORS header:
 * browsers cannot reach it. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/server/srv_http.h"

http_conn *srv_http_conn_of(struct MHD_Connection *mc) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

enum MHD_Result srv_http_queue(struct MHD_Connection *mc, unsigned status, struct MHD_Response *r) {
    srv_http_cors_headers(mc, r);
    return MHD_queue_response(mc, status, r);
}

enum MHD_Result srv_http_json(struct MHD_Connection *mc, unsigned status, const char *body, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = srv_http_queue(mc, status, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result srv_http_send_json(struct MHD_Connection *mc, cJSON *o) {
    char *txt = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    enum MHD_Result ret = txt ? srv_http_json(mc, MHD_HTTP_OK, txt, strlen(txt)) : MHD_NO;
    free(txt);
    return ret;
}

unsigned srv_http_status_of(int rc) {
    return rc == LLC_ERR_NOMEM ? MHD_HTTP_INTERNAL_SERVER_ERROR : MHD_HTTP_BAD_REQUEST;
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


#define CORS_METHODS "GET, POST, DELETE, OPTIONS"
#define CORS_HEADERS "Authorization, Content-Type"

/* origin is one of the comma-separated entries of list (spaces around them ignored). */
static bool listed(const char *list, const char *origin) {
    size_t n = strlen(origin);
    for (const char *p = list; *p;) {
        while (*p == ',' || isspace((unsigned char)*p)) p++;
        const char *end = p;
        while (*end && *end != ',') end++;
        const char *last = end;
        while (last > p && isspace((unsigned char)last[-1])) last--;
        if ((size_t)(last - p) == n && n > 0 && !memcmp(p, origin, n)) return true;
        p = end;
    }
    return false;
}

void srv_http_cors_begin(srv *s, struct MHD_Connection *mc, http_conn *hc) {
    hc->cors[0] = 0;
    const char *list = s->cfg.cors_origins;
    if (!hc->tcp || (list && !strcmp(list, "none"))) return;
    if (!list || !strcmp(list, "*")) {
        snprintf(hc->cors, sizeof hc->cors, "*");
        return;
    }
    const char *origin = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Origin");
    if (origin && strlen(origin) < sizeof hc->cors && listed(list, origin))
        snprintf(hc->cors, sizeof hc->cors, "%s", origin);
}

void srv_http_cors_headers(struct MHD_Connection *mc, struct MHD_Response *r) {
    const http_conn *hc = srv_http_conn_of(mc);
    if (!hc || !hc->tcp) return;
    if (!hc->cors[0]) return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", hc->cors);
    if (strcmp(hc->cors, "*") != 0) MHD_add_response_header(r, "Vary", "Origin"); /* the answer depends on it */
}

/* The headers a preflight asks for (Access-Control-Request-Headers), when
 * they are a plain list of header names; "" otherwise. */
static void requested_headers(struct MHD_Connection *mc, char *out, size_t cap) {
    out[0] = 0;
    const char *h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    if (!h || strlen(h) >= cap) return;
    for (const char *p = h; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("-_, ", *p)) return;
    snprintf(out, cap, "%s", h);
}

enum MHD_Result srv_http_preflight(srv *s, struct MHD_Connection *mc) {
    const http_conn *hc = srv_http_conn_of(mc);
    const char *origin = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Origin");
    const char *list = s->cfg.cors_origins;
    bool restricted = list && strcmp(list, "*") && strcmp(list, "none");
    if (hc && hc->tcp && restricted && origin && !hc->cors[0])
        return srv_http_error(mc, MHD_HTTP_FORBIDDEN, "permission_error", "this origin is not allowed (--cors-origin)");
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    char asked[1024], allow[1100];
    requested_headers(mc, asked, sizeof asked);
    snprintf(allow, sizeof allow, "%s%s%s", CORS_HEADERS, asked[0] ? ", " : "", asked);
    MHD_add_response_header(r, "Allow", CORS_METHODS);
    if (hc && hc->tcp && hc->cors[0]) {
        MHD_add_response_header(r, "Access-Control-Allow-Methods", CORS_METHODS);
        MHD_add_response_header(r, "Access-Control-Allow-Headers", allow);
        MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
    }
    enum MHD_Result ret = srv_http_queue(mc, MHD_HTTP_NO_CONTENT, r);
    MHD_destroy_response(r);
    return ret;
}
