/* srv_http.h — what the HTTP side of the server shares: srv_http.c (the
 * libmicrohttpd daemon, routing, authentication, request bodies) and the
 * endpoint files srv_http_*.c, srv_ollama.c, srv_embed.c. Private to
 * app/server/. */
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

/* ---- srv_http_reply.c: the answers (endpoints call these; they call no endpoint) ---- */

/* Queues r with the headers every answer carries (CORS on TCP). */
enum MHD_Result srv_http_queue(struct MHD_Connection *mc, unsigned status, struct MHD_Response *r);
/* The connection's entry in the server's list, or NULL. */
http_conn *srv_http_conn_of(struct MHD_Connection *mc);

/* At a request's head, decides the CORS headers of its answers (cfg.cors_origins
 * against its Origin header; TCP only). */
void srv_http_cors_begin(srv *s, struct MHD_Connection *mc, http_conn *hc);
/* Adds them to r (nothing on the Unix socket or for an origin not allowed). */
void srv_http_cors_headers(struct MHD_Connection *mc, struct MHD_Response *r);
/* Answers an OPTIONS request (a CORS preflight) on any path: 204 with the
 * allowed methods and headers, or 403 for an origin not allowed. No API key
 * is asked for. */
enum MHD_Result srv_http_preflight(srv *s, struct MHD_Connection *mc);

/* Queues a JSON response (body copied). */
enum MHD_Result srv_http_json(struct MHD_Connection *mc, unsigned status, const char *body, size_t len);
/* Queues o as a 200 JSON answer and deletes it (NULL, or out of memory: MHD_NO). */
enum MHD_Result srv_http_send_json(struct MHD_Connection *mc, cJSON *o);
/* Queues {"error":{"code":status,"message":msg,"type":type}} (OpenAI's and
 * llama-server's error shape). */
/* The status of a request refused for result code rc where the API has no
 * finer one: 500 when the server ran out of memory, 400 (the request) else. */
unsigned srv_http_status_of(int rc);
enum MHD_Result srv_http_error(struct MHD_Connection *mc, unsigned status, const char *type,
                               const char *msg);

/* ---- the endpoints ---- */

/* srv_http_extra.c: POST /tokenize, /detokenize and /apply-template (through an
 * http_prep: srv_http_extra_prep; NULL for any other request), and GET /props,
 * /metrics, /slots, /v1/models/{id} (srv_http_extra: true when url is one of
 * them or another method on the POST paths; *ret is then the answer). */
bool srv_http_extra(srv *s, struct MHD_Connection *mc, const char *url, const char *method, enum MHD_Result *ret);
/* The model as /v1/models lists it (OpenAI's model object). */
cJSON *srv_http_model_object(const srv *s);

/* ---- requests read off the server thread (srv_http.c on srv_work.c) ----
 * An endpoint whose request takes real work to read (a generation's: parse,
 * render the template, tokenize, compile a grammar, fit the context) comes in
 * two halves: `prepare` runs on a worker with the body, `start` then runs on
 * the server thread as a handler would, taking what prepare made, and queues an
 * answer or starts the work (then sets the pending answer it waits with). The
 * connection is suspended in between; `discard` frees what prepare made when
 * the connection went away first. */
typedef struct http_pending {
    http_gen *gen;      /* a one-piece generation answer waiting for the engine */
    srv_embed *emb;     /* an embeddings answer waiting for the engine */
} http_pending;

typedef struct http_prep {
    /* On a worker: reads body[0..len) for the endpoint's case `which` (its
     * errors are kept for start); touches only m. NULL: out of memory. */
    void *(*prepare)(const srv_model *m, int which, const char *body, size_t len);
    enum MHD_Result (*start)(srv *s, struct MHD_Connection *mc, void *ready, http_pending *pending);
    void (*discard)(void *ready);
} http_prep;

/* The generation endpoints (srv_http_gen.c), `which` an http_endpoint. A
 * streaming answer is queued at once (its reader suspends the connection while
 * the engine has nothing new); a one-piece answer suspends the connection and
 * leaves *pending set: srv_http_generate_resume is then called each time it is
 * resumed, until it queues the answer. Never blocks. */
extern const http_prep srv_http_gen_prep;
/* srv_http_extra.c's POSTs (see srv_http_extra above). */
const http_prep *srv_http_extra_prep(const char *url, const char *method, int *which);
enum MHD_Result srv_http_generate_resume(srv *s, struct MHD_Connection *mc, http_gen **pending);

/* ---- endpoints with their own answer format (Ollama's, srv_ollama.c; the
 * Responses API, srv_responses.c; Anthropic's Messages API, srv_anthropic.c) ----
 * The endpoint reads its request into a srv_gen itself; srv_http_gen.c runs it
 * (engine client, suspend/resume, hang-ups, shutdown) and asks the format for
 * the bytes of each piece and of the end. */
typedef struct http_gen_report {
    const char *text;       /* piece: the new text; end: everything generated (the answer
                               apart from its reasoning, when that is read out) */
    size_t len;
    const char *thinking;   /* piece: new reasoning (then len is 0); end: all of it */
    size_t thinking_len;
    int n_tokens;           /* tokens generated so far */
    engine_finish finish;   /* end only */
    const char *error;      /* end only: the engine's error message, or NULL */
    int prompt_tokens, cached_tokens;
    double queue_ms, ttft_ms, tpot_ms; /* the engine's timings (end only) */
    double t_start_ms;      /* llc_now_ms() when the request arrived */
    double t_first_ms;      /* when the first token came (0: none) */
    const toolcall_parser *calls; /* end only, a chat with tools: the calls read (text is then
                                     the content outside them); NULL without tools */
    bool stop_text;         /* end only: a stop string ended it (finish stop, no end-of-text
                               token: the request's stop strings or the template's) */
} http_gen_report;

typedef struct http_format {
    const char *stream_type; /* Content-Type of a streamed answer */
    /* Appends what a stream sends before its first piece (NULL: nothing); r
     * holds no text yet, prompt_tokens is the prompt's length. */
    void (*begin)(void *ctx, const http_gen_report *r, sbuf *out);
    /* Appends what a stream sends for a piece of text (len > 0) or of reasoning. */
    void (*piece)(void *ctx, const http_gen_report *r, sbuf *out);
    /* Appends what a stream sends as a tool call is read (NULL: the calls come
     * whole in the end's report): call k's start when name is set (args ""),
     * else a piece of its arguments. */
    void (*call)(void *ctx, int k, const char *name, const char *args, size_t len, sbuf *out);
    /* Appends the end of a stream, or the whole one-piece answer (stream
     * false); returns the HTTP status of a one-piece answer. */
    unsigned (*end)(void *ctx, const http_gen_report *r, bool stream, sbuf *out);
    /* Queues an error answer (a request the engine refused). */
    enum MHD_Result (*error)(struct MHD_Connection *mc, unsigned status, const char *msg);
    void (*free_ctx)(void *ctx);
} http_format;

/* Runs g (taken: *g is reset) with format f and its ctx (taken: freed with
 * f->free_ctx), streamed or in one piece, as srv_http_generate does. */
enum MHD_Result srv_http_generate_as(srv *s, struct MHD_Connection *mc, const http_format *f, void *ctx,
                                     srv_gen *g, bool stream, http_gen **pending);

/* srv_ollama.c: Ollama's API (/, /api/version, /api/tags, /api/ps, /api/show,
 * /api/chat, /api/generate, and an Ollama-shaped refusal for every other /api/
 * path but the embeddings'). True when url is one of its paths. */
bool srv_ollama_path(const char *url);
/* Queues Ollama's {"error": msg}. */
enum MHD_Result srv_ollama_error(struct MHD_Connection *mc, unsigned status, const char *msg);
enum MHD_Result srv_ollama_route(srv *s, struct MHD_Connection *mc, const char *url, const char *method,
                                 const char *body, size_t len);
/* /api/chat and /api/generate (POST): read on a worker; NULL for other requests. */
const http_prep *srv_ollama_prep(const char *url, const char *method, int *which);

/* srv_responses.c: OpenAI's Responses API, POST /v1/responses (also /responses). */
extern const http_prep srv_responses_prep;

/* srv_anthropic.c: Anthropic's Messages API, POST /v1/messages and
 * /v1/messages/count_tokens (`which`: srv_anthropic_which of the path). */
extern const http_prep srv_anthropic_prep;
bool srv_anthropic_path(const char *url);
int srv_anthropic_which(const char *url);
/* Queues Anthropic's {"type":"error","error":{"type":..,"message":msg}}, the
 * type following the status (invalid_request_error, authentication_error...). */
enum MHD_Result srv_anthropic_error(struct MHD_Connection *mc, unsigned status, const char *msg);

/* Frees a generation (cancelling it when it still runs); NULL is a no-op. */
void srv_http_gen_free(http_gen *g);

/* srv_embed.c: the embeddings endpoints (`which` an http_embed_kind), one-piece
 * answers that suspend the connection like srv_http_gen_prep's (pending->emb set
 * until answered; srv_http_embed_resume is called each time it is resumed). */
typedef enum http_embed_kind {
    HTTP_EMBED_OPENAI,     /* POST /v1/embeddings, /embeddings */
    HTTP_EMBED_OLLAMA,     /* POST /api/embed */
    HTTP_EMBED_OLLAMA_OLD, /* POST /api/embeddings */
} http_embed_kind;
extern const http_prep srv_http_embed_prep;
enum MHD_Result srv_http_embed_resume(srv *s, struct MHD_Connection *mc, srv_embed **pending);
void srv_embed_free(srv_embed *q); /* cancels it when it still runs; NULL is a no-op */
/* The server loop's side: 2 poll entries per suspended request (engine fd,
 * socket), in list order; dispatch resumes those with news or a hang-up. */
/* Registers each suspended embeddings answer's engine fd and socket. */
void srv_embed_poll_add(srv *s, srv_pollset *ps);
/* Shutdown: cancels every embeddings request (and resumes them, before the daemon stops). */
void srv_embed_cancel_all(srv *s, bool resume_all);

#endif
