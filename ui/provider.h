/* provider.h — where the chat's answers come from: the one interface the chat
 * application (ui/app) talks to. Two implementations: the local engine
 * (ui/provider_local.c: a model in this process) and an OpenAI-compatible
 * server over HTTP (ui/remote.c: vLLM, SGLang, llama-server, Ollama, a hosted
 * API). The application never asks which one it has.
 *
 * A request is a conversation (system first if any, the last message the
 * user's) plus the tab's settings; its answers stream back as events on the
 * provider's queue, whose fd becomes readable while events wait. A thinking
 * model's reasoning comes apart from the answer (PROV_REASONING): the local
 * engine reads it out of the text (engine/template/reasoning), a remote server
 * sends it as reasoning_content. Every answer
 * (seq_index 0..n_answers-1) ends with exactly one PROV_DONE. Only the UI
 * thread calls these functions; the sender allocates an event, the receiver
 * frees it with prov_event_free. */
#ifndef LLC_UI_PROVIDER_H
#define LLC_UI_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/common.h"
#include "engine/template/chat.h"
#include "engine/sched/engine.h"
#include "storage/db.h"
#include "storage/conv.h"

typedef struct provider provider;

typedef enum prov_event_kind {
    PROV_TEXT, /* a piece of an answer's text */
    PROV_REASONING, /* a piece of a thinking model's reasoning before the answer */
    PROV_DONE, /* an answer ended: state, finish, usage (message says why for an error) */
} prov_event_kind;

typedef struct prov_event {
    prov_event_kind kind;
    int64_t request_id;
    int seq_index;      /* which answer of the request */
    char *text;         /* PROV_TEXT, PROV_REASONING: NUL-terminated piece (may be empty) */
    size_t text_len;
    int state;          /* PROV_DONE: DB_STATE_DONE, DB_STATE_CANCELLED or DB_STATE_ERROR */
    char finish[16];    /* "stop", "length", "cancelled", "error" */
    db_usage usage;
    char message[256];  /* PROV_DONE with DB_STATE_ERROR: why, one line */
} prov_event;

/* What a submitted request turned into. */
typedef struct prov_started {
    int n_answers;      /* answers that will stream (seq_index 0..n_answers-1) */
    int n_dropped;      /* oldest turns left out so the prompt fits the context */
} prov_started;

typedef struct provider_ops {
    /* Refuses a conversation that can never be answered (the last message alone
     * does not fit the context): LLC_ERR_RANGE with err saying why. 0 when it
     * may be sent (a remote server may still refuse it later). */
    int (*check)(provider *p, const chat_msg *msgs, int n, const conv_settings *s, llc_err *err);
    /* Starts answering; returns the request id (> 0) or negative with err set. */
    int64_t (*submit)(provider *p, const chat_msg *msgs, int n, const conv_settings *s,
                      prov_started *out, llc_err *err);
    /* Stops a request: each of its answers still streaming ends with a
     * PROV_DONE (cancelled); what streamed before stays theirs. */
    void (*cancel)(provider *p, int64_t request_id);
    prov_event *(*next)(provider *p); /* NULL when none waits */
    int (*fd)(const provider *p);
    /* One line for the status bar (model, where it runs, speed). */
    void (*status)(provider *p, char *buf, size_t n);
    /* Texts for the /stats and /model panels (malloc'd; NULL when out of memory). */
    char *(*stats)(provider *p);
    char *(*about)(provider *p);
    const char *(*model_name)(const provider *p); /* stored with sessions */
    void (*destroy)(provider *p);
    /* Refuses settings it cannot honour (a remote server: beam search), with
     * err saying why, so /beam is refused when typed. NULL: it takes them all. */
    int (*check_settings)(provider *p, const conv_settings *s, llc_err *err);
} provider_ops;

/* Implementations put this first in their own struct. */
struct provider {
    const provider_ops *ops;
};

static inline int prov_check(provider *p, const chat_msg *msgs, int n, const conv_settings *s,
                             llc_err *err) {
    return p->ops->check(p, msgs, n, s, err);
}
static inline int64_t prov_submit(provider *p, const chat_msg *msgs, int n, const conv_settings *s,
                                  prov_started *out, llc_err *err) {
    return p->ops->submit(p, msgs, n, s, out, err);
}
static inline int prov_check_settings(provider *p, const conv_settings *s, llc_err *err) {
    return p->ops->check_settings ? p->ops->check_settings(p, s, err) : 0;
}
static inline void prov_cancel(provider *p, int64_t id) { p->ops->cancel(p, id); }
static inline prov_event *prov_next(provider *p) { return p->ops->next(p); }
static inline int prov_fd(const provider *p) { return p->ops->fd(p); }
static inline void prov_status(provider *p, char *buf, size_t n) { p->ops->status(p, buf, n); }
static inline char *prov_stats(provider *p) { return p->ops->stats(p); }
static inline char *prov_about(provider *p) { return p->ops->about(p); }
static inline const char *prov_model_name(const provider *p) { return p->ops->model_name(p); }
static inline void prov_free(provider *p) {
    if (p) p->ops->destroy(p);
}

/* Events are plain malloc'd structs: any implementation creates them with
 * these, the receiver frees them. */
prov_event *prov_event_text(int64_t request_id, int seq_index, const char *text, size_t len);
prov_event *prov_event_reasoning(int64_t request_id, int seq_index, const char *text, size_t len);
prov_event *prov_event_done(int64_t request_id, int seq_index, int state, const char *finish,
                            const db_usage *usage, const char *message);
void prov_event_free(prov_event *ev);

/* The local engine. The engine, tokenizer and strings stay the caller's and
 * must outlive the provider. */
typedef struct prov_local_config {
    engine *e;
    const tokenizer *tok;
    chat_tmpl tmpl;
    int n_ctx;
    const char *model_name;  /* shown in the status line and stored with sessions */
    const char *device_name; /* "cpu", "cuda" */
    /* called after the provider is freed (e.g. to free the engine it ran on); may be NULL */
    void (*on_destroy)(void *ctx);
    void *destroy_ctx;
} prov_local_config;
int prov_local_create(const prov_local_config *cfg, provider **out, llc_err *err);

#endif
