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

/* srv_embed.c: the embeddings endpoints, one-piece answers that suspend the
 * connection like srv_http_generate's (*pending set until answered). */
typedef enum http_embed_kind {
    HTTP_EMBED_OPENAI,     /* POST /v1/embeddings, /embeddings */
    HTTP_EMBED_OLLAMA,     /* POST /api/embed */
    HTTP_EMBED_OLLAMA_OLD, /* POST /api/embeddings */
} http_embed_kind;
enum MHD_Result srv_http_embed(srv *s, struct MHD_Connection *mc, http_embed_kind kind, const char *body,
                               size_t len, srv_embed **pending);
enum MHD_Result srv_http_embed_resume(srv *s, struct MHD_Connection *mc, srv_embed **pending);
void srv_embed_free(srv_embed *q); /* cancels it when it still runs; NULL is a no-op */
/* The server loop's side: 2 poll entries per suspended request (engine fd,
 * socket), in list order; dispatch resumes those with news or a hang-up. */
int srv_embed_npoll(const srv *s);
int srv_embed_poll_fds(srv *s, struct pollfd *p);
void srv_embed_dispatch(srv *s, const struct pollfd *p, int n);
/* Shutdown: cancels every embeddings request (and resumes them, before the daemon stops). */
void srv_embed_cancel_all(srv *s, bool resume_all);

#endif
