/* srv_http.h — shared by srv_http.c (the libmicrohttpd daemon, routing,
 * authentication, request bodies) and srv_http_gen.c (the generation
 * endpoints). Private to the server. */
#ifndef LLC_APP_SRV_HTTP_H
#define LLC_APP_SRV_HTTP_H

#include <microhttpd.h>

#include "app/server/srv_internal.h"

typedef enum http_endpoint {
    HTTP_OPENAI_CHAT,  /* POST /v1/chat/completions */
    HTTP_OPENAI_TEXT,  /* POST /v1/completions */
    HTTP_LLAMA_COMPLETION, /* POST /completion */
    HTTP_LLAMA_INFILL, /* POST /infill */
} http_endpoint;

/* Queues r with the headers every answer carries (CORS on TCP). */
enum MHD_Result srv_http_queue(struct MHD_Connection *mc, unsigned status, struct MHD_Response *r);
/* The connection's entry in the server's list, or NULL. */
http_conn *srv_http_conn_of(struct MHD_Connection *mc);

/* srv_http_cors.c: at a request's head, decides the CORS headers of its
 * answers (cfg.cors_origins against its Origin header; TCP only). */
void srv_http_cors_begin(srv *s, struct MHD_Connection *mc, http_conn *hc);
/* Adds them to r (nothing on the Unix socket or for an origin not allowed). */
void srv_http_cors_headers(struct MHD_Connection *mc, struct MHD_Response *r);
/* Answers an OPTIONS request (a CORS preflight) on any path: 204 with the
 * allowed methods and headers, or 403 for an origin not allowed. No API key
 * is asked for. */
enum MHD_Result srv_http_preflight(srv *s, struct MHD_Connection *mc);

/* srv_http_extra.c: /tokenize, /detokenize, /apply-template, /props,
 * /metrics, /slots, /v1/models/{id}. True when url is one of them; *ret is
 * then the answer. */
bool srv_http_extra(srv *s, struct MHD_Connection *mc, const char *url, const char *method,
                    const char *body, size_t len, enum MHD_Result *ret);
/* The model as /v1/models lists it (OpenAI's model object). */
cJSON *srv_http_model_object(const srv *s);

/* Queues a JSON response (body copied). */
enum MHD_Result srv_http_json(struct MHD_Connection *mc, unsigned status, const char *body, size_t len);
/* Queues {"error":{"code":status,"message":msg,"type":type}} (OpenAI's and
 * llama-server's error shape). */
enum MHD_Result srv_http_error(struct MHD_Connection *mc, unsigned status, const char *type,
                               const char *msg);
/* Runs a generation endpoint on a complete request body. A streaming answer is
 * queued at once (its reader suspends the connection while the engine has
 * nothing new); a one-piece answer suspends the connection and leaves *pending
 * set: srv_http_generate_resume is then called each time it is resumed, until
 * it queues the answer. Never blocks. */
enum MHD_Result srv_http_generate(srv *s, struct MHD_Connection *mc, http_endpoint ep, const char *body,
                                  size_t len, http_gen **pending);
enum MHD_Result srv_http_generate_resume(srv *s, struct MHD_Connection *mc, http_gen **pending);
/* Frees a generation (cancelling it when it still runs); NULL is a no-op. */
void srv_http_gen_free(http_gen *g);

#endif
