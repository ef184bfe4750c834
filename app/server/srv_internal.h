/* srv_internal.h — what the srv_*.c files share: the server and connection
 * structs, the generation request built from JSON (srv_gen), the byte buffer
 * with JSON escaping, and the entry points of each part. Not for other modules. */
#ifndef LLC_APP_SRV_INTERNAL_H
#define LLC_APP_SRV_INTERNAL_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "app/server/srv.h"
#include "kernels/sbuf.h"
#include "storage/db.h"
#include "storage/conv.h"
#include "engine/template/reasoning.h"
#include "engine/template/toolcall.h"

#define SRV_MAX_STOPS 16       /* stop strings per request (besides the template's) */
#define SRV_MAX_STOP_LEN 256   /* bytes per stop string */
#define SRV_BODY_MS 60000      /* an HTTP body must arrive within this once its head has */
#define SRV_HTTP_IDLE_S 10     /* an HTTP connection that moves no byte for this long is closed
                                  (not while its answer waits for the engine) */
#define SRV_MAX_WARM 4         /* warm-up requests (max_tokens 0) filling the cache at once */
#define SRV_SHUTDOWN_MS 3000   /* how long srv_stop lets clients receive their finish */
#define SRV_MAX_INFLIGHT 256   /* generation requests running on one NDJSON connection */
#define SRV_WORKERS 2          /* threads reading requests (srv_work.c) */
#define SRV_INLINE_BODY 16384  /* a request body up to this size is read on the server thread:
                                  its work is bounded to milliseconds, and the hop to a worker
                                  and back cost a loaded 2-core machine 10-30% of its
                                  throughput (docs/PERFORMANCE.md) */
#define SRV_MEMO_ENTRIES 64    /* responses the Responses API remembers (previous_response_id) */
#define SRV_MEMO_BYTES (32u << 20) /* ... and their conversations' bytes, at most */

/* ---- JSON into a growable buffer (kernels/sbuf.h) ---- */

/* Appends s[0..n) as a JSON string literal with quotes; invalid UTF-8 becomes U+FFFD. */
void sb_json_str(sbuf *b, const char *s, size_t n);
/* A finite number in JSON (NaN/inf as null). */
void sb_json_num(sbuf *b, double v);
/* Constant-time comparison of two NUL-terminated strings (API keys). */
bool srv_secret_eq(const char *a, const char *b);

/* srv_memo.c: the Responses API's memory of recent answers, by response id:
 * the conversation each one ended (JSON text), at most SRV_MEMO_ENTRIES of them
 * and SRV_MEMO_BYTES, the least recently used dropped first. Locks itself (the
 * workers read it, the server thread writes it). */
typedef struct srv_memo srv_memo;
srv_memo *srv_memo_new(void);
void srv_memo_free(srv_memo *m);
/* Remembers text (copied) under id; false when out of memory or too big. */
bool srv_memo_put(srv_memo *m, const char *id, const char *text);
/* A copy of what id holds (malloc'd; it becomes the most recently used), or NULL. */
char *srv_memo_get(srv_memo *m, const char *id);

/* ---- the model as the server describes it (read-only, shared by all threads) ---- */

typedef struct srv_model {
    const tokenizer *tok;
    chat_tmpl tmpl;
    int n_ctx, n_vocab;
    int n_embd;   /* the model's embedding width (the embeddings endpoints' vectors) */
    char name[128];
    bool has_fim; /* FIM prefix, suffix and middle tokens all present */
    toolcall_format tool_format; /* the Jinja template's tool calls (GENERIC: our prompt) */
    reasoning_format reasoning;  /* the Jinja template's reasoning markup (NONE: none, or
                                    --reasoning-format none) */
    reasoning_format tmpl_reasoning; /* the template's markup whatever --reasoning-format says
                                        (its reasoning_effort words: reasoning_effort_word) */
    const gguf *file;   /* the model file (metadata for Ollama's /api/show) */
    bool gpu;           /* the weights are on a GPU backend */
    long long loaded_at; /* unix seconds: when the server started */
    srv_memo *memo;     /* the Responses API's memory (the pointer is read-only; the memory locks itself) */
} srv_model;

/* ---- a generation request read from JSON ---- */

typedef enum srv_dialect {
    SRV_NDJSON,         /* llmchat protocol */
    SRV_OPENAI_CHAT,    /* POST /v1/chat/completions */
    SRV_OPENAI_TEXT,    /* POST /v1/completions */
    SRV_LLAMA,          /* POST /completion, /infill */
    SRV_OLLAMA,         /* POST /api/chat, /api/generate: the "options" object */
} srv_dialect;

typedef struct srv_gen {
    gen_request req;    /* prompt, stop point into the fields below */
    int32_t *ids;       /* the prompt */
    char **stops;       /* the request's stop strings, then the template's */
    int n_stops;
    int n_logprobs;     /* alternatives to report per token (0: none) */
    bool logprobs;      /* report the chosen token's logprob */
    bool warm_only;     /* llama n_predict 0: fill the prefix cache, report no token */
    bool echo_prompt;   /* return_prompt: put the prompt ids in the done event */
    int n_dropped;      /* chat turns left out to fit the context */
    double t_max_predict_ms; /* llama: stop after this long once a newline came (0: off) */
    cJSON *tools;       /* the tools offered (OpenAI's array; NULL: none, or tool_choice "none") */
    bool tools_required; /* tool_choice "required" or a named function */
    toolcall_format tool_format; /* how the answer's calls are read (with tools) */
    reasoning_format reasoning;  /* chat: how the answer's reasoning is read out (NONE: not at all) */
    cJSON *template_vars;        /* chat_template_kwargs: more variables for a Jinja template, or NULL */
    bool in_reasoning;           /* the prompt opened the reasoning block */
    grammar *grammar;   /* parsed from grammar / json_schema / response_format / the tools
                           (req.parsed_grammar) */
} srv_gen;

/* Sampling and length parameters of j (an object) in the given dialect, over
 * the defaults (sampler_params_default, n 1, max_tokens = the context). A field
 * of the wrong type or out of range gives LLC_ERR_TYPE / LLC_ERR_RANGE with a
 * message naming it; unknown fields are ignored. */
int srv_gen_params(const srv_model *m, srv_dialect d, const cJSON *j, srv_gen *g, llc_err *err);
/* OpenAI's `tools` and `tool_choice` of request j into g (validated: a 400
 * naming the field otherwise). tool_choice "none" offers no tools; a named
 * function offers only that one. */
int srv_gen_tools(const cJSON *j, srv_gen *g, llc_err *err);
/* Request j's "chat_template_kwargs" (an object, else LLC_ERR_TYPE) into g: more
 * variables for a Jinja template ({"enable_thinking": false}); and its
 * "reasoning_effort" (srv_gen_reasoning_effort). Call before srv_gen_chat. */
int srv_gen_template_vars(const cJSON *j, srv_gen *g, llc_err *err);
/* The template variable reasoning_effort (gpt-oss's "Reasoning: high"): "low",
 * "medium" or "high", else LLC_ERR_TYPE; chat_template_kwargs that set it win. */
int srv_gen_reasoning_effort(const char *effort, srv_gen *g, llc_err *err);
/* The template variables enable_thinking false, thinking_mode "disabled"
 * (MiniMax-M3's), thinking false (Kimi K3's) and reasoning false (Command-A's):
 * a thinking template renders
 * the prompt that skips the reasoning (Ollama's "think": false, Anthropic's
 * "thinking": {"type": "disabled"}). */
int srv_gen_thinking_off(srv_gen *g, llc_err *err);
/* How a chat answer's reasoning is read out (after srv_gen_chat: the prompt
 * tells whether the template opened the block): the model's format, or none
 * when request j's "reasoning_format" is "none" (auto, deepseek and
 * deepseek-legacy read it; another value is LLC_ERR_TYPE). Harmony's answers
 * show their control tokens (req.special_text). */
int srv_gen_reasoning(const srv_model *m, const cJSON *j, srv_gen *g, llc_err *err);
/* Structured output, in every dialect: grammar (GBNF text), json_schema (a
 * schema, llama-server), response_format ({"type": "text" | "json_object" |
 * "json_schema", "json_schema": {"name", "schema", "strict"}}, OpenAI; a
 * json_object with a "schema" as llama-server takes it). At most one of them;
 * a bad grammar or schema is LLC_ERR_FORMAT naming the field. Called by
 * srv_gen_params. */
int srv_gen_grammar(const cJSON *j, srv_gen *g, llc_err *err);
/* GBNF (malloc'd) forcing one call of one of tools in XML format f's markup
 * (srv_tools_xml.c); an error naming the tool and parameter it cannot enforce. */
int srv_xml_tools_grammar(toolcall_format f, const cJSON *tools, char **out, llc_err *err);
/* g's grammar (replacing any) for JSON documents valid against schema, or for
 * any JSON object when schema is NULL; field names where the schema came from
 * in an error ("'format': schema.properties.age: ..."). */
int srv_gen_json_grammar(const cJSON *schema, const char *field, srv_gen *g, llc_err *err);
/* The prompt of a conversation (array of {role, content}), built with
 * prompt_build within n_ctx - min(max_tokens, n_ctx / 2) tokens (as the UI
 * does); adds the template's stop strings. With tools (srv_gen_tools), tool
 * messages or assistant tool_calls: a Jinja template with a tool-call format
 * of engine/toolcall renders them itself; otherwise the conversation is
 * rewritten with toolcall_generic_messages. */
int srv_gen_chat(const srv_model *m, const cJSON *messages, srv_gen *g, llc_err *err);
/* The prompt of chat_msg's already in memory (sessions). */
int srv_gen_chat_msgs(const srv_model *m, const chat_msg *msgs, int n, srv_gen *g, llc_err *err);
/* A raw prompt: a string (tokenized with BOS as the vocabulary wants, special
 * token texts recognised) or an array of token ids (or a list of one of those). */
int srv_gen_text(const srv_model *m, const cJSON *prompt, srv_gen *g, llc_err *err);
/* OpenAI's prompt lists: how many prompts `prompt` holds (a list of strings or
 * of token-id lists: one per entry; anything else: 1), and the k-th of them
 * for srv_gen_text. */
int srv_prompt_count(const cJSON *prompt);
const cJSON *srv_prompt_at(const cJSON *prompt, int k);
/* A fill-in-the-middle prompt (llama-server's layout); LLC_ERR_UNSUPPORTED when
 * the vocabulary has no FIM tokens. extra: NULL or [{filename, text}]. */
int srv_gen_infill(const srv_model *m, const char *prefix, const char *suffix, const cJSON *extra,
                   const char *middle, srv_gen *g, llc_err *err);
/* Resets g to an empty request. */
void srv_gen_init(srv_gen *g);
void srv_gen_free(srv_gen *g);
/* "stop", "length", "cancelled", "error". */
const char *srv_finish_name(engine_finish f);

/* ---- the server ---- */

typedef struct srv_req srv_req;

/* srv_poll.c: one round's poll set. Each descriptor comes with its handler,
 * called after poll() in the order registered with the descriptor's revents
 * (0 when nothing happened); entries registered hold for that round only. */
typedef void (*srv_poll_fn)(srv *s, void *ctx, short revents, double now);
typedef struct srv_poll_cb {
    srv_poll_fn fn;
    void *ctx;
} srv_poll_cb;
typedef struct srv_pollset {
    struct pollfd *pfd; /* [n]: what poll() takes */
    srv_poll_cb *cb;    /* [n]: who handles each */
    int n, cap;
    bool oom;           /* an entry could not be added */
} srv_pollset;
void srv_poll_add(srv_pollset *ps, int fd, short events, srv_poll_fn fn, void *ctx);
void srv_poll_run(srv *s, srv_pollset *ps, double now);
void srv_poll_free(srv_pollset *ps);

/* What a request's owner (a session) is told beside the connection's events:
 * each piece of text, each sample's end, and the request's end. */
typedef struct srv_req_hooks {
    void (*token)(srv *s, srv_req *r, int index, const char *text, size_t len);
    /* a piece of a thinking model's reasoning (apart from the text) */
    void (*reasoning)(srv *s, srv_req *r, int index, const char *text, size_t len);
    void (*done)(srv_req *r, int index, const engine_event *ev);
    void (*release)(srv *s, srv_req *r);
} srv_req_hooks;

typedef enum conn_kind { CONN_SNIFF, CONN_NDJSON } conn_kind;

/* A generation request being read on a worker (srv_proto.c). */
typedef struct proto_prep proto_prep;

typedef struct conn {
    int fd;
    conn_kind kind;     /* CONN_SNIFF until the first byte (then HTTP goes to http_conn) */
    bool tcp;           /* came over TCP (the API key applies) */
    bool authed;        /* gave the API key (or none is needed) */
    bool closing;       /* stop reading; close once the output is flushed */
    bool eof;           /* the client sent all it will: close once idle */
    bool dead;          /* to be freed at the end of this loop iteration */
    bool uncounted;     /* no longer counted in s->n_open (evicted or handed to HTTP) */
    double t_accept;    /* ms */
    double t_active;    /* ms: the last byte read or event sent (eviction picks the oldest idle) */
    double t_partial;   /* ms: when the unfinished line in `in` began (0: none) */
    sbuf in;            /* unparsed input (at most max_line + a read) */
    sbuf out;           /* queued output: out.p[out_off..out.len) */
    size_t out_off;
    engine_client *ec;  /* created with the first generation request */
    srv_req *reqs;      /* requests in flight */
    proto_prep *preps;  /* requests being read on a worker, not yet submitted */
    int n_preps;
} conn;

/* An HTTP connection handed to libmicrohttpd (srv_http.c keeps the list; all
 * of it runs on the server thread). */
typedef struct http_conn {
    struct http_conn *prev, *next;
    struct MHD_Connection *mc;
    int fd;
    bool tcp;
    bool evicted;       /* shut down to make room; no longer counted */
    bool awaiting_head; /* between requests: no complete request head yet (evictable) */
    double deadline;    /* ms: shut down when passed (0: none) */
    char cors[256];     /* the current request's Access-Control-Allow-Origin ("": none) */
} http_conn;

/* An HTTP generation in flight (srv_http_gen.c). */
typedef struct http_gen http_gen;
/* An HTTP embeddings request in flight (srv_embed.c). */
typedef struct srv_embed srv_embed;

/* A session whose answer still has to be stored (the database refused). */
typedef struct srv_unsaved {
    struct srv_unsaved *next;
    conv *cv;
} srv_unsaved;

/* srv_work.c: the worker threads that read requests (parse, render, tokenize,
 * compile grammars) while the server thread moves bytes. `run` is called on a
 * worker and may touch only ctx and what is read-only (srv_model); `done` is
 * called afterwards on the server thread, which then owns ctx again. Jobs start
 * in the order submitted. */
typedef struct srv_work srv_work;
typedef void (*srv_job_run)(void *ctx);
typedef void (*srv_job_done)(srv *s, void *ctx);
int srv_work_start(srv_work **out, llc_err *err);
/* False when out of memory (then nothing was queued). */
bool srv_work_submit(srv_work *w, srv_job_run run, srv_job_done done, void *ctx);
/* Registers the wake-up of finished jobs; its handler calls their `done`. */
void srv_work_poll_add(srv *s, srv_pollset *ps);
/* Lets the workers finish every job queued, joins them, calls the jobs' `done`
 * (on the calling thread, with s; none when s is NULL) and frees w. */
void srv_work_stop(srv *s, srv_work *w);

typedef struct srv_note_node {
    struct srv_note_node *next;
    srv_note note;
} srv_note_node;

struct srv {
    engine *e;
    srv_model m;
    srv_config cfg;     /* strings point into the copies below */
    char *api_key;
    char sock_path[108];
    dev_t sock_dev;     /* the socket file we created (removed at stop if still ours) */
    ino_t sock_ino;
    int unix_fd, tcp_fd, tcp_port;
    int wake_fd;        /* eventfd: srv_stop */
    int n_open[2];      /* connections per listener ([0] Unix, [1] TCP): sniffing, NDJSON, HTTP */
    double accept_pause_until; /* ms: out of file descriptors, accept later */
    pthread_t thread;
    atomic_bool stopping;
    srv_work *work;     /* worker threads reading requests */

    db *db;
    char db_error[320]; /* why there is no database ("" when open) */
    char *model_name_copy;

    conn **conns;
    int n_conns, cap_conns;
    int64_t *busy_sessions; /* sessions with an answer streaming here */
    int n_busy, cap_busy;
    srv_unsaved *unsaved;
    double last_retry_ms;

    struct MHD_Daemon *mhd;  /* external epoll mode, run by the server thread */
    http_conn *http_head;    /* connections handed to it */
    struct prep_job *preps;  /* requests being read on a worker (srv_http.c) */
    http_gen *gens;          /* generations in flight */
    srv_embed *embeds;       /* embeddings requests in flight */
    int http_active;         /* generations not yet freed */
    engine_client *warm_ec;  /* warm-up requests: events dropped */
    int n_warm;

    /* srv_http_extra.c: GET /props, CORS */
    char *model_path, *cors_origins; /* copies of cfg's (NULL when not given) */
    const char *chat_src;    /* the chat template's Jinja source (the llm's), or NULL */

    /* notes for the UI */
    pthread_mutex_t note_mu;
    srv_note_node *note_head, *note_tail;
    int n_notes;
    int note_fd;
};

/* srv_conn.c: output to a connection (capped; the connection is dropped beyond
 * the cap), and sending what the socket takes now (c->dead on a hard error). */
void srv_conn_write(srv *s, conn *c, const char *p, size_t n);
void srv_conn_flush(conn *c);
size_t srv_conn_pending(const conn *c); /* bytes queued, not yet sent */
/* Appends a newline to b, queues it as one NDJSON line and frees b. */
void srv_conn_send(srv *s, conn *c, sbuf *b);
/* srv_note.c: a note for the UI (only with cfg.notify). */
void srv_note_push(srv *s, srv_note_kind kind, int64_t session, int64_t message, int index,
                   const char *text, size_t len);

/* srv_proto.c: NDJSON requests and engine events. */
void srv_proto_line(srv *s, conn *c, const char *line, size_t len);
void srv_proto_events(srv *s, conn *c);
/* The connection goes away: cancel its requests, store session answers as cancelled. */
void srv_proto_conn_gone(srv *s, conn *c);
/* Shutdown: cancel every request of c (their `done` events still come). */
void srv_proto_cancel_all(srv *s, conn *c);
/* srv_conn.c: the NDJSON error and result events. */
void srv_send_error(srv *s, conn *c, const char *id_json, const char *code, const char *msg);
void srv_send_result(srv *s, conn *c, const char *id_json, cJSON *result); /* takes result */
/* srv_reqs.c: the requests in flight on an NDJSON connection. Submits g for c
 * under request id id_json; session fields (cv, alt_base, hooks) are set by the
 * caller on the returned request. NULL after an error event. */
srv_req *srv_req_submit(srv *s, conn *c, const char *id_json, srv_gen *g, llc_err *err);
/* True (after a too_many_requests error) when c runs SRV_MAX_INFLIGHT requests
 * (those being read count). */
bool srv_req_full(srv *s, conn *c, const char *id_json);
srv_req *srv_req_find(conn *c, int64_t eid);
void srv_req_unlink(conn *c, srv_req *r);
void srv_req_free(srv_req *r);
/* The protocol's error code for a result code (bad_request, bad_param, ...). */
const char *srv_code_of(int rc);

/* srv_sessions.c */
void srv_sessions_method(srv *s, conn *c, const char *method, const cJSON *j, const char *id_json);
/* chat / sessions.send with a session. */
void srv_session_chat(srv *s, conn *c, const cJSON *j, const char *id_json);
/* Retries stores that failed (once a second) and, at stop, a last time. */
void srv_sessions_retry(srv *s, bool final);
bool srv_session_busy(const srv *s, int64_t id);

/* srv_http.c: libmicrohttpd in external epoll mode, driven by the server
 * thread's poll loop. */
int srv_http_start(srv *s, llc_err *err);
/* Hands a connection to libmicrohttpd (which closes it in any case); it then
 * counts against its listener (s->n_open) until closed. */
void srv_http_add(srv *s, int fd, const struct sockaddr *addr, socklen_t len);
/* Registers what the HTTP side waits on: each suspended generation's and
 * embeddings answer's engine fd and socket (hang-ups), then MHD's epoll fd,
 * whose handler enforces request deadlines and runs MHD (last, since MHD may
 * free answers); lowers *timeout_ms to MHD's next deadline. */
void srv_http_poll_add(srv *s, srv_pollset *ps, int *timeout_ms, double now);
/* Shuts down the oldest HTTP connection of that listener still waiting for a
 * request head, if its deadline is before older_than; false when there is none. */
bool srv_http_evict_idle(srv *s, bool tcp, double older_than);
/* Shutdown: cancels every generation (streams end with a cancelled finish). */
void srv_http_cancel_all(srv *s);
/* Stops the daemon (closes every HTTP connection). */
void srv_http_stop(srv *s);
/* srv_http_gen.c: the generations' side of the above: the suspended ones'
 * sockets and engine fds; a stream whose client has read nothing for
 * cfg.stall_ms while output waits is cancelled (the engine stops making it). */
void srv_http_gen_poll_add(srv *s, srv_pollset *ps, double now);
void srv_http_gen_cancel(srv *s, http_gen *g);
/* Cancels every generation; resume_all: also resumes the suspended ones (the
 * daemon stops). */
void srv_http_gen_cancel_all(srv *s, bool resume_all);
/* Warm-up requests (max_tokens 0): filled into the prefix cache in the
 * background; nothing is reported. Best effort: skipped when SRV_MAX_WARM run. */
void srv_warm_submit(srv *s, const srv_gen *g);
void srv_warm_drain(srv *s);
/* s[0..n) holds a NUL: a raw zero byte or a \u0000 escape in a JSON string. C
 * strings (the prompt, the database) would end there without a word, so such a
 * request is refused instead (400). */
bool srv_json_has_nul(const char *s, size_t n);
#define NUL_REFUSED "a string holds a NUL character (\\u0000), which llmchat cannot pass on"
/* Every byte of s[0..n) is part of valid UTF-8 (no overlongs, surrogates or
 * code points past U+10FFFF). */
bool srv_utf8_valid(const char *s, size_t n);

/* What srv_proto.c keeps per request in flight. */
struct srv_req {
    srv_req *next;
    char *id_json;        /* the client's id, as JSON */
    int64_t eid;          /* engine request id */
    int n;                /* samples: done events expected */
    int n_done;
    int n_logprobs;
    bool logprobs;
    bool warm_only;
    int32_t *prompt_ids;  /* echo_prompt: the prompt (malloc'd) */
    int n_prompt_ids;
    int n_dropped;
    char err_msg[256];    /* the engine's error, reported with the done events */
    struct srv_pending {  /* token ids not yet sent (their text was empty) */
        int32_t *ids;
        int n, cap;
        sbuf lp;          /* logprob entries, JSON, comma-separated */
        bool seen;        /* an event of this sample came */
        toolcall_parser *tc; /* chat with tools: the calls in the text (for done) */
        reasoning_parser *rp; /* a thinking model's chat: reads the reasoning out first */
        sbuf rtext, ctext;    /* what rp decided in this token: reasoning, and the rest */
    } *pend;
    /* sessions */
    conv *cv;
    int64_t session_id;
    int alt_base;
    const srv_req_hooks *hooks; /* set by whoever owns the request beside its
                                   connection (a session), or NULL */
};

#endif
