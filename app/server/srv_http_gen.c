/* srv_http_gen.c — the HTTP generation endpoints: OpenAI's
 * /v1/chat/completions and /v1/completions, llama-server's /completion and
 * /infill, each streaming (SSE, chunked) or in one JSON answer. Everything runs
 * on the server thread and never waits: a generation submits to the engine
 * through its own engine client; while the engine has nothing new, its
 * connection is suspended, and the server loop polls the client's fd (resume)
 * and the socket (a hang-up cancels the request). Shutdown cancels every
 * generation, so streams end with a `cancelled` finish. Warm-up requests
 * (max_tokens 0, n_predict 0) are answered at once and fill the prefix cache
 * in the background (srv_warm_*). An endpoint with its own answer format
 * (Ollama's, srv_ollama.c) reads its request itself and runs it here through
 * srv_http_generate_as, its http_format writing the bytes. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/server/srv_http.h"

typedef struct gen_sample {
    sbuf text;            /* everything generated (non-streaming answers) */
    int n_tokens;
    engine_finish finish;
    bool started;         /* OpenAI: the role was sent */
    int32_t *ids;         /* ids since the last chunk (llama streaming "tokens") */
    int n_ids, cap_ids;
    cJSON *lp_all;        /* every logprob entry (non-streaming) */
    cJSON *lp_pend;       /* entries since the last chunk (streaming) */
    bool seen, done;      /* an event came; its done came */
    int32_t end_token;    /* the end-of-text token that ended it (-1: none, e.g. a stop string) */
    toolcall_parser *tc;  /* chat with tools: reads the calls out of the text */
    reasoning_parser *rp; /* a thinking model's chat: reads the reasoning out of the text first */
    sbuf reasoning, answer; /* non-streaming: the reasoning, and the rest (when rp) */
    struct http_gen *st;  /* for the parser's callbacks */
    int idx;
} gen_sample;

typedef struct http_gen gen_state;

/* One prompt of a request (/v1/completions takes a list): its engine request. */
typedef struct gen_part {
    srv_gen g;            /* prompts after the first (the first is the state's g) */
    int64_t eid;
    bool counted;         /* its prompt is in the usage */
    char *echo;           /* /v1/completions "echo": the prompt's text, before each of its choices' */
} gen_part;

#define HTTP_MAX_CHOICES 256 /* prompts x n in one request */

struct http_gen {
    http_gen *prev, *next; /* s->gens */
    struct MHD_Connection *mc;
    bool suspended;       /* waiting for the engine */
    bool gone;            /* the client hung up: the request is cancelled */
    srv *s;
    http_endpoint ep;
    srv_dialect d;
    bool stream, include_usage;
    cJSON *fields;        /* llama "response_fields" */
    srv_gen g;
    engine_client *ec;
    int fd;               /* the client's socket, watched for a hang-up */
    int n, n_done;        /* choices: n_parts x the request's n */
    gen_sample *sm;
    gen_part *parts;      /* [n_parts]; choice index = part * g.req.n + sample */
    int n_parts;
    int prompt_tokens, cached_tokens, completion_tokens;
    int reasoning_tokens;   /* of them, a thinking model's reasoning (its parsers' count) */
    double queue_ms, ttft_ms, tpot_ms;
    char err_msg[256];
    bool cancel_sent, time_limited;
    double t_first;
    bool saw_newline;
    char id[48];
    long long created;
    sbuf out;             /* streaming: bytes not yet handed to MHD */
    size_t out_off;
    bool finished;
    const http_format *fmt; /* an endpoint's own format (srv_http_generate_as), or NULL */
    void *fmt_ctx;
    double t_start;
    double last_read_ms;  /* a stream: when MHD last asked for bytes (a client that stops reading stalls it) */
    int read_rc;          /* gen_prepare: what was wrong with the request (0: nothing) */
    llc_err read_err;
};

static unsigned g_counter;

static void state_free(gen_state *st) {
    if (!st) return;
    if (st->s) { /* listed (gen_link) */
        if (st->prev) st->prev->next = st->next;
        else if (st->s->gens == st) st->s->gens = st->next;
        if (st->next) st->next->prev = st->prev;
        st->s->http_active--;
    }
    engine_client_free(st->ec); /* cancels the request if it still runs */
    for (int i = 0; st->sm && i < st->n; i++) {
        sb_free(&st->sm[i].text);
        free(st->sm[i].ids);
        cJSON_Delete(st->sm[i].lp_all);
        cJSON_Delete(st->sm[i].lp_pend);
        toolcall_parser_free(st->sm[i].tc);
        reasoning_parser_free(st->sm[i].rp);
        sb_free(&st->sm[i].reasoning);
        sb_free(&st->sm[i].answer);
    }
    free(st->sm);
    for (int i = 0; st->parts && i < st->n_parts; i++) srv_gen_free(&st->parts[i].g), free(st->parts[i].echo);
    free(st->parts);
    cJSON_Delete(st->fields);
    if (st->fmt && st->fmt->free_ctx) st->fmt->free_ctx(st->fmt_ctx);
    srv_gen_free(&st->g);
    sb_free(&st->out);
    free(st);
}

void srv_http_gen_free(http_gen *g) { state_free(g); }

/* ---- the server loop's side ---- */

void srv_http_gen_cancel(srv *s, http_gen *g) {
    if (g->cancel_sent || !g->ec) return;
    for (int i = 0; i < g->n_parts; i++)
        if (g->parts[i].eid > 0) engine_cancel(s->e, g->parts[i].eid);
    g->cancel_sent = true;
}

static void resume(http_gen *g) {
    if (!g->suspended) return;
    g->suspended = false;
    MHD_resume_connection(g->mc);
}

/* A suspended answer's socket: a hang-up cancels it and resumes the connection
 * (which then ends). */
static void on_socket(srv *s, void *ctx, short revents, double now) {
    http_gen *g = ctx;
    if (!g->suspended || !(revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) return;
    srv_http_gen_cancel(s, g);
    g->gone = true;
    resume(g);
}

/* Its engine fd, every round: the t_max_predict_ms limit, and new events resume
 * the connection. */
static void on_engine(srv *s, void *ctx, short revents, double now) {
    http_gen *g = ctx;
    if (!g->suspended) return;
    if (!g->cancel_sent && g->g.t_max_predict_ms > 0 && g->t_first > 0 && g->saw_newline &&
        now - g->t_first > g->g.t_max_predict_ms) {
        srv_http_gen_cancel(s, g);
        g->time_limited = true;
    }
    if (revents & POLLIN) resume(g);
}

void srv_http_gen_cancel_all(srv *s, bool resume_all) {
    for (http_gen *g = s->gens; g; g = g->next) {
        srv_http_gen_cancel(s, g);
        if (resume_all) resume(g);
    }
}

void srv_http_gen_poll_add(srv *s, srv_pollset *ps, double now) {
    for (http_gen *g = s->gens; g; g = g->next) {
        if (!g->suspended) { /* output waits for the client: is it still reading? */
            if (g->stream && !g->finished && !g->cancel_sent && g->last_read_ms > 0 &&
                now - g->last_read_ms > s->cfg.stall_ms)
                srv_http_gen_cancel(s, g); /* its answer ends as cancelled, should it read again */
            continue;
        }
        srv_poll_add(ps, g->fd, POLLRDHUP, on_socket, g);
        srv_poll_add(ps, g->ec ? engine_client_fd(g->ec) : -1, POLLIN, on_engine, g);
    }
}

static void suspend(gen_state *st) {
    st->suspended = true;
    MHD_suspend_connection(st->mc);
}

/* ---- logprobs ---- */

static cJSON *piece_json(const gen_state *st, int32_t id, float lp, bool with_bytes) {
    char buf[256];
    int n = tok_piece(st->s->m.tok, id, false, buf, sizeof buf);
    if (n < 0) n = 0;
    if (n > (int)sizeof buf) n = sizeof buf;
    sbuf b = {0};
    sb_json_str(&b, buf, (size_t)n);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", id);
    cJSON *tok = b.p ? cJSON_Parse(b.p) : NULL;
    sb_free(&b);
    cJSON_AddItemToObject(o, "token", tok ? tok : cJSON_CreateString(""));
    cJSON_AddNumberToObject(o, "logprob", lp);
    if (with_bytes) {
        cJSON *bytes = cJSON_AddArrayToObject(o, "bytes");
        for (int i = 0; i < n; i++) cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)buf[i]));
    }
    return o;
}

static cJSON *lp_entry(const gen_state *st, const sample_result *r) {
    cJSON *o = piece_json(st, r->token, r->logprob, true);
    cJSON *top = cJSON_AddArrayToObject(o, "top_logprobs");
    for (int k = 0; k < r->n_top && k < st->g.n_logprobs; k++)
        cJSON_AddItemToArray(top, piece_json(st, r->top[k].id, r->top[k].logprob, true));
    return o;
}

/* OpenAI /v1/completions' logprobs shape from our entries. */
static cJSON *lp_text_shape(const cJSON *entries, size_t text_offset) {
    cJSON *o = cJSON_CreateObject(), *toks = cJSON_AddArrayToObject(o, "tokens"),
          *lps = cJSON_AddArrayToObject(o, "token_logprobs"), *tops = cJSON_AddArrayToObject(o, "top_logprobs"),
          *offs = cJSON_AddArrayToObject(o, "text_offset");
    const cJSON *e;
    cJSON_ArrayForEach(e, entries) {
        const cJSON *tok = cJSON_GetObjectItemCaseSensitive(e, "token");
        cJSON_AddItemToArray(toks, cJSON_CreateString(tok->valuestring));
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(cJSON_GetObjectItemCaseSensitive(e, "logprob")->valuedouble));
        cJSON *t = cJSON_CreateObject();
        const cJSON *alt;
        cJSON_ArrayForEach(alt, cJSON_GetObjectItemCaseSensitive(e, "top_logprobs"))
            cJSON_AddNumberToObject(t, cJSON_GetObjectItemCaseSensitive(alt, "token")->valuestring,
                                    cJSON_GetObjectItemCaseSensitive(alt, "logprob")->valuedouble);
        cJSON_AddItemToArray(tops, t);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)text_offset));
        text_offset += strlen(tok->valuestring);
    }
    return o;
}

/* ---- building answers ---- */

static const char *openai_finish(const gen_state *st, engine_finish f) {
    if (st->time_limited && f == FINISH_CANCELLED) return "length";
    return srv_finish_name(f);
}

/* "tool_calls" when the answer ended by itself after calling tools. */
static const char *choice_finish(const gen_state *st, const gen_sample *sm) {
    if (sm->tc && sm->finish == FINISH_STOP && toolcall_count(sm->tc) > 0) return "tool_calls";
    return openai_finish(st, sm->finish);
}

/* A call's id: unique per answer, sample and call. */
static void call_id(const gen_state *st, int idx, int k, char *buf, size_t cap) {
    snprintf(buf, cap, "call_%s_%d_%d", st->id + 9, idx, k); /* after "chatcmpl-" */
}

/* The message of a chat answer: content, and the calls read with tools. */
static void add_message(const gen_state *st, int idx, cJSON *c) {
    const gen_sample *sm = &st->sm[idx];
    cJSON *m = cJSON_AddObjectToObject(c, "message");
    cJSON_AddStringToObject(m, "role", "assistant");
    int n_calls = sm->tc ? toolcall_count(sm->tc) : 0;
    const sbuf *all = sm->rp ? &sm->answer : &sm->text;
    const char *text = sm->tc ? toolcall_content(sm->tc, NULL) : all->p ? all->p : "";
    if (n_calls > 0 && !text[0]) cJSON_AddNullToObject(m, "content");
    else cJSON_AddStringToObject(m, "content", text);
    if (sm->reasoning.len) cJSON_AddStringToObject(m, "reasoning_content", sm->reasoning.p);
    if (n_calls == 0) return;
    cJSON *calls = cJSON_AddArrayToObject(m, "tool_calls");
    for (int k = 0; k < n_calls; k++) {
        char id[96];
        call_id(st, idx, k, id, sizeof id);
        cJSON *tc = cJSON_CreateObject();
        cJSON_AddStringToObject(tc, "id", id);
        cJSON_AddStringToObject(tc, "type", "function");
        cJSON *f = cJSON_AddObjectToObject(tc, "function");
        cJSON_AddStringToObject(f, "name", toolcall_name(sm->tc, k));
        cJSON_AddStringToObject(f, "arguments", toolcall_arguments(sm->tc, k));
        cJSON_AddItemToArray(calls, tc);
    }
}

static void add_usage(const gen_state *st, cJSON *o) {
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", st->prompt_tokens);
    cJSON_AddNumberToObject(u, "completion_tokens", st->completion_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", st->prompt_tokens + st->completion_tokens);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", st->cached_tokens);
    if (st->g.reasoning != REASONING_NONE) /* OpenAI's and vLLM's count of a thinking model's reasoning */
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "completion_tokens_details"), "reasoning_tokens",
                                st->reasoning_tokens);
}

static cJSON *timings(const gen_state *st, int n_tokens) {
    cJSON *t = cJSON_CreateObject();
    int prompt_n = st->prompt_tokens - st->cached_tokens;
    double prompt_ms = st->ttft_ms - st->queue_ms > 0 ? st->ttft_ms - st->queue_ms : 0;
    double pred_ms = n_tokens > 1 ? st->tpot_ms * (n_tokens - 1) : 0;
    cJSON_AddNumberToObject(t, "prompt_n", prompt_n);
    cJSON_AddNumberToObject(t, "prompt_ms", prompt_ms);
    cJSON_AddNumberToObject(t, "prompt_per_token_ms", prompt_n > 0 ? prompt_ms / prompt_n : 0);
    cJSON_AddNumberToObject(t, "prompt_per_second", prompt_ms > 0 ? 1e3 * prompt_n / prompt_ms : 0);
    cJSON_AddNumberToObject(t, "predicted_n", n_tokens);
    cJSON_AddNumberToObject(t, "predicted_ms", pred_ms);
    cJSON_AddNumberToObject(t, "predicted_per_token_ms", st->tpot_ms);
    cJSON_AddNumberToObject(t, "predicted_per_second", st->tpot_ms > 0 ? 1e3 / st->tpot_ms : 0);
    cJSON_AddNumberToObject(t, "queue_ms", st->queue_ms);
    cJSON_AddNumberToObject(t, "ttft_ms", st->ttft_ms);
    return t;
}

/* llama-server's answer object (also the last chunk of a stream, content ""). */
static cJSON *llama_answer(const gen_state *st, int idx, bool final_chunk) {
    const gen_sample *sm = &st->sm[idx];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", idx);
    cJSON_AddStringToObject(o, "content", final_chunk || !sm->text.p ? "" : sm->text.p);
    cJSON_AddNumberToObject(o, "id_slot", 0);
    cJSON_AddBoolToObject(o, "stop", true);
    cJSON_AddStringToObject(o, "model", st->s->m.name);
    cJSON_AddNumberToObject(o, "tokens_predicted", sm->n_tokens);
    cJSON_AddNumberToObject(o, "tokens_evaluated", st->prompt_tokens);
    cJSON_AddNumberToObject(o, "tokens_cached", st->prompt_tokens + sm->n_tokens);
    cJSON_AddBoolToObject(o, "truncated", false);
    cJSON_AddBoolToObject(o, "has_new_line", st->saw_newline);
    const char *type = sm->finish == FINISH_STOP ? "eos"
                       : sm->finish == FINISH_LENGTH || st->time_limited ? "limit"
                                                                         : "none";
    cJSON_AddStringToObject(o, "stop_type", type);
    cJSON_AddStringToObject(o, "stopping_word", "");
    cJSON_AddStringToObject(o, "finish_reason", openai_finish(st, sm->finish));
    if (sm->finish == FINISH_ERROR && st->err_msg[0]) cJSON_AddStringToObject(o, "error", st->err_msg);
    cJSON *gs = cJSON_AddObjectToObject(o, "generation_settings");
    const sampler_params *sp = &st->g.req.sampling;
    cJSON_AddNumberToObject(gs, "n_predict", st->g.warm_only ? 0 : st->g.req.max_tokens);
    cJSON_AddNumberToObject(gs, "temperature", sp->temperature);
    cJSON_AddNumberToObject(gs, "top_k", sp->top_k);
    cJSON_AddNumberToObject(gs, "top_p", sp->top_p);
    cJSON_AddNumberToObject(gs, "min_p", sp->min_p);
    cJSON_AddItemToObject(o, "timings", timings(st, sm->n_tokens));
    if (st->g.logprobs && !final_chunk)
        cJSON_AddItemToObject(o, "completion_probabilities",
                              sm->lp_all ? cJSON_Duplicate(sm->lp_all, true) : cJSON_CreateArray());
    return o;
}

/* llama "response_fields": only those paths ("timings/prompt_n"), flat. */
static cJSON *pick_fields(cJSON *full, const cJSON *fields) {
    cJSON *o = cJSON_CreateObject();
    const cJSON *f;
    cJSON_ArrayForEach(f, fields) {
        if (!cJSON_IsString(f)) continue;
        char path[256];
        snprintf(path, sizeof path, "%s", f->valuestring);
        cJSON *cur = full;
        for (char *save = NULL, *part = strtok_r(path, "/", &save); cur && part; part = strtok_r(NULL, "/", &save))
            cur = cJSON_GetObjectItemCaseSensitive(cur, part);
        if (cur) cJSON_AddItemToObject(o, f->valuestring, cJSON_Duplicate(cur, true));
    }
    cJSON_Delete(full);
    return o;
}

static cJSON *openai_head(const gen_state *st, const char *object) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", st->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)st->created);
    cJSON_AddStringToObject(o, "model", st->s->m.name);
    return o;
}

/* A text completion's "text": the piece, after the prompt ("echo") when it
 * is the choice's first. */
static void add_text(const gen_state *st, int idx, const char *text, size_t len, cJSON *c) {
    const char *echo = st->sm[idx].started ? NULL : st->parts[idx / st->g.req.n].echo;
    sbuf tb = {0};
    sb_str(&tb, echo);
    sb_add(&tb, text, len);
    cJSON_AddStringToObject(c, "text", tb.p ? tb.p : "");
    sb_free(&tb);
}

static cJSON *answer_json(const gen_state *st) {
    if (st->d == SRV_LLAMA) {
        cJSON *a = llama_answer(st, 0, false);
        return st->fields ? pick_fields(a, st->fields) : a;
    }
    bool chat = st->d == SRV_OPENAI_CHAT;
    cJSON *o = openai_head(st, chat ? "chat.completion" : "text_completion");
    cJSON *choices = cJSON_AddArrayToObject(o, "choices");
    for (int i = 0; i < st->n; i++) {
        const gen_sample *sm = &st->sm[i];
        cJSON *c = cJSON_CreateObject();
        cJSON_AddNumberToObject(c, "index", i);
        if (chat) {
            add_message(st, i, c);
        } else {
            add_text(st, i, sm->text.p ? sm->text.p : "", sm->text.len, c);
        }
        if (!st->g.logprobs) {
            cJSON_AddNullToObject(c, "logprobs");
        } else if (chat) {
            cJSON *lp = cJSON_AddObjectToObject(c, "logprobs");
            cJSON_AddItemToObject(lp, "content", sm->lp_all ? cJSON_Duplicate(sm->lp_all, true) : cJSON_CreateArray());
        } else {
            cJSON *empty = cJSON_CreateArray();
            cJSON_AddItemToObject(c, "logprobs", lp_text_shape(sm->lp_all ? sm->lp_all : empty, 0));
            cJSON_Delete(empty);
        }
        cJSON_AddStringToObject(c, "finish_reason", choice_finish(st, sm));
        cJSON_AddItemToArray(choices, c);
    }
    add_usage(st, o);
    cJSON_AddItemToObject(o, "timings", timings(st, st->sm[0].n_tokens));
    return o;
}

/* What an endpoint's own format is told (text: a piece, or NULL for all of it). */
static http_gen_report report_of(const gen_state *st, int idx, const char *text, size_t len) {
    const gen_sample *sm = &st->sm[idx];
    const sbuf *all = sm->rp ? &sm->answer : &sm->text;
    size_t outside = 0; /* with tools: the content outside the calls */
    const char *content = sm->tc ? toolcall_content(sm->tc, &outside) : all->p ? all->p : "";
    return (http_gen_report){
        .text = text ? text : content, .len = text ? len : sm->tc ? outside : all->len,
        .calls = text ? NULL : sm->tc,
        .thinking = text ? NULL : sm->reasoning.p, .thinking_len = text ? 0 : sm->reasoning.len,
        .n_tokens = sm->n_tokens, .finish = sm->finish,
        .error = sm->finish == FINISH_ERROR && st->err_msg[0] ? st->err_msg : NULL,
        .prompt_tokens = st->prompt_tokens, .cached_tokens = st->cached_tokens,
        .queue_ms = st->queue_ms, .ttft_ms = st->ttft_ms, .tpot_ms = st->tpot_ms,
        .t_start_ms = st->t_start, .t_first_ms = st->t_first,
        .stop_text = !text && sm->finish == FINISH_STOP && sm->end_token < 0};
}

/* ---- streaming ---- */

static void sse(gen_state *st, cJSON *o) {
    char *txt = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!txt) return;
    sb_str(&st->out, "data: ");
    sb_str(&st->out, txt);
    sb_str(&st->out, "\n\n");
    free(txt);
}

static void chunk_token(gen_state *st, int idx, const char *text, size_t len) {
    gen_sample *sm = &st->sm[idx];
    if (st->fmt) {
        http_gen_report r = report_of(st, idx, text, len);
        if (len) st->fmt->piece(st->fmt_ctx, &r, &st->out);
        sm->n_ids = 0;
        return;
    }
    sbuf tb = {0};
    sb_add(&tb, text, len);
    cJSON *o;
    if (st->d == SRV_LLAMA) {
        o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "index", idx);
        cJSON_AddStringToObject(o, "content", tb.p ? tb.p : "");
        cJSON *ids = cJSON_AddArrayToObject(o, "tokens");
        for (int i = 0; i < sm->n_ids; i++) cJSON_AddItemToArray(ids, cJSON_CreateNumber(sm->ids[i]));
        cJSON_AddBoolToObject(o, "stop", false);
        cJSON_AddNumberToObject(o, "id_slot", 0);
        cJSON_AddNumberToObject(o, "tokens_predicted", sm->n_tokens);
        cJSON_AddNumberToObject(o, "tokens_evaluated", st->g.req.n_prompt);
        if (st->g.logprobs) {
            cJSON_AddItemToObject(o, "completion_probabilities", sm->lp_pend ? sm->lp_pend : cJSON_CreateArray());
            sm->lp_pend = NULL;
        }
    } else {
        bool chat = st->d == SRV_OPENAI_CHAT;
        o = openai_head(st, chat ? "chat.completion.chunk" : "text_completion");
        cJSON *c = cJSON_CreateObject();
        cJSON_AddNumberToObject(c, "index", idx);
        if (chat) {
            cJSON *delta = cJSON_AddObjectToObject(c, "delta");
            if (!sm->started) cJSON_AddStringToObject(delta, "role", "assistant");
            cJSON_AddStringToObject(delta, "content", tb.p ? tb.p : "");
        } else {
            add_text(st, idx, text, len, c);
        }
        sm->started = true;
        if (!st->g.logprobs) {
            cJSON_AddNullToObject(c, "logprobs");
        } else if (chat) {
            cJSON *lp = cJSON_AddObjectToObject(c, "logprobs");
            cJSON_AddItemToObject(lp, "content", sm->lp_pend ? sm->lp_pend : cJSON_CreateArray());
            sm->lp_pend = NULL;
        } else {
            cJSON *empty = cJSON_CreateArray();
            cJSON_AddItemToObject(c, "logprobs", lp_text_shape(sm->lp_pend ? sm->lp_pend : empty, 0));
            cJSON_Delete(empty);
            cJSON_Delete(sm->lp_pend);
            sm->lp_pend = NULL;
        }
        cJSON_AddNullToObject(c, "finish_reason");
        cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), c);
    }
    sb_free(&tb);
    sm->n_ids = 0;
    sse(st, o);
}

/* A tool call's delta: its start (id, type, name, arguments "") when name is
 * set, else a piece of its arguments. */
static void chunk_tool(gen_state *st, int idx, int k, const char *name, const char *args, size_t len) {
    gen_sample *sm = &st->sm[idx];
    cJSON *o = openai_head(st, "chat.completion.chunk");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", idx);
    cJSON *delta = cJSON_AddObjectToObject(c, "delta");
    if (!sm->started) cJSON_AddStringToObject(delta, "role", "assistant"), cJSON_AddNullToObject(delta, "content");
    sm->started = true;
    cJSON *tc = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(delta, "tool_calls"), tc);
    cJSON_AddNumberToObject(tc, "index", k);
    sbuf a = {0};
    sb_add(&a, args, len);
    if (name) {
        char id[96];
        call_id(st, idx, k, id, sizeof id);
        cJSON_AddStringToObject(tc, "id", id);
        cJSON_AddStringToObject(tc, "type", "function");
    }
    cJSON *f = cJSON_AddObjectToObject(tc, "function");
    if (name) cJSON_AddStringToObject(f, "name", name);
    cJSON_AddStringToObject(f, "arguments", a.p ? a.p : "");
    sb_free(&a);
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), c);
    sse(st, o);
}

/* A piece of a chat answer's reasoning: delta.reasoning_content, as llama-server
 * and vLLM stream it. */
static void chunk_reasoning(gen_state *st, int idx, const char *text, size_t len) {
    gen_sample *sm = &st->sm[idx];
    if (st->fmt) { /* an endpoint's own format (Ollama's thinking) */
        http_gen_report r = report_of(st, idx, "", 0);
        r.thinking = text, r.thinking_len = len;
        st->fmt->piece(st->fmt_ctx, &r, &st->out);
        return;
    }
    sbuf tb = {0};
    sb_add(&tb, text, len);
    cJSON *o = openai_head(st, "chat.completion.chunk");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", idx);
    cJSON *delta = cJSON_AddObjectToObject(c, "delta");
    if (!sm->started) cJSON_AddStringToObject(delta, "role", "assistant");
    sm->started = true;
    cJSON_AddStringToObject(delta, "reasoning_content", tb.p ? tb.p : "");
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), c);
    sb_free(&tb);
    sse(st, o);
}

/* The reasoning parser's output: reasoning to its own field, the rest on to the
 * tool-call reader or out as content. */
static void rp_reasoning(void *ud, const char *text, size_t len) {
    gen_sample *sm = ud;
    if (sm->st->stream) chunk_reasoning(sm->st, sm->idx, text, len);
    else sb_add(&sm->reasoning, text, len);
}

static void rp_content(void *ud, const char *text, size_t len) {
    gen_sample *sm = ud;
    if (sm->tc) toolcall_feed(sm->tc, text, len);
    else if (sm->st->stream) chunk_token(sm->st, sm->idx, text, len);
    else sb_add(&sm->answer, text, len);
}

static void tc_content(void *ud, const char *text, size_t len) {
    gen_sample *sm = ud;
    if (sm->st->stream) chunk_token(sm->st, sm->idx, text, len);
}

/* A call's start and its arguments' pieces: OpenAI's deltas, or a format's
 * own events; a format without a `call` (Ollama) writes the calls whole at the
 * end (http_gen_report.calls). */
static void tc_call(void *ud, int k, const char *name) {
    gen_sample *sm = ud;
    gen_state *st = sm->st;
    if (!st->stream) return;
    if (!st->fmt) chunk_tool(st, sm->idx, k, name, "", 0);
    else if (st->fmt->call) st->fmt->call(st->fmt_ctx, k, name, "", 0, &st->out);
}

static void tc_args(void *ud, int k, const char *piece, size_t len) {
    gen_sample *sm = ud;
    gen_state *st = sm->st;
    if (!st->stream) return;
    if (!st->fmt) chunk_tool(st, sm->idx, k, NULL, piece, len);
    else if (st->fmt->call) st->fmt->call(st->fmt_ctx, k, NULL, piece, len, &st->out);
}

/* A sample the engine ended with an error (out of memory in a step): a stream
 * says so in an error chunk before the sample's finish, as OpenAI's and
 * llama-server's streams do (the official clients raise it). */
static void chunk_error(gen_state *st) {
    const char *msg = st->err_msg[0] ? st->err_msg : "the generation failed";
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddNumberToObject(e, "code", MHD_HTTP_INTERNAL_SERVER_ERROR);
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", "server_error");
    sse(st, o);
}

static void chunk_finish(gen_state *st, int idx, bool last) {
    if (!st->fmt && st->sm[idx].finish == FINISH_ERROR) chunk_error(st);
    if (st->fmt) {
        http_gen_report r = report_of(st, idx, NULL, 0);
        st->fmt->end(st->fmt_ctx, &r, true, &st->out);
        return;
    }
    if (st->d == SRV_LLAMA) {
        sse(st, llama_answer(st, idx, true));
        return;
    }
    gen_sample *sm = &st->sm[idx];
    bool chat = st->d == SRV_OPENAI_CHAT;
    cJSON *o = openai_head(st, chat ? "chat.completion.chunk" : "text_completion");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", idx);
    if (chat) {
        cJSON *delta = cJSON_AddObjectToObject(c, "delta");
        if (!sm->started) cJSON_AddStringToObject(delta, "role", "assistant");
    } else {
        add_text(st, idx, "", 0, c);
    }
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddStringToObject(c, "finish_reason", choice_finish(st, sm));
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), c);
    if (last && !st->include_usage) { /* usage rides on the last chunk with a finish reason */
        add_usage(st, o);
        cJSON_AddItemToObject(o, "timings", timings(st, sm->n_tokens));
    }
    sse(st, o);
    if (last && st->include_usage) { /* OpenAI's stream_options.include_usage chunk */
        cJSON *u = openai_head(st, chat ? "chat.completion.chunk" : "text_completion");
        cJSON_AddArrayToObject(u, "choices");
        add_usage(st, u);
        sse(st, u);
    }
}

/* ---- events ---- */

static void on_event(gen_state *st, const engine_event *ev) {
    int part = 0;
    while (part < st->n_parts - 1 && st->parts[part].eid != ev->request_id) part++;
    int idx = part * st->g.req.n + ev->seq_index;
    if (ev->kind == EV_ERROR) {
        snprintf(st->err_msg, sizeof st->err_msg, "%s", ev->message);
        return;
    }
    if (ev->seq_index < 0 || ev->seq_index >= st->g.req.n || st->sm[idx].done) return;
    gen_sample *sm = &st->sm[idx];
    sm->seen = true;
    if (ev->kind == EV_TOKEN) {
        if (st->g.warm_only) return;
        sm->n_tokens++;
        if (st->t_first == 0) st->t_first = llc_now_ms();
        if (ev->text_len) sb_add(&sm->text, ev->text, ev->text_len);
        if (ev->text_len && memchr(ev->text, '\n', ev->text_len)) st->saw_newline = true;
        if (st->stream && sm->n_ids < 4096) {
            if (sm->n_ids == sm->cap_ids) {
                int cap = sm->cap_ids ? 2 * sm->cap_ids : 16;
                int32_t *p = realloc(sm->ids, (size_t)cap * sizeof *p);
                if (p) sm->ids = p, sm->cap_ids = cap;
            }
            if (sm->n_ids < sm->cap_ids) sm->ids[sm->n_ids++] = ev->token;
        }
        if (st->g.logprobs) {
            cJSON **arr = st->stream ? &sm->lp_pend : &sm->lp_all;
            if (!*arr) *arr = cJSON_CreateArray();
            if (*arr) cJSON_AddItemToArray(*arr, lp_entry(st, &ev->lp));
        }
        if (sm->rp) reasoning_feed(sm->rp, ev->text, ev->text_len); /* streams through rp_* */
        else if (sm->tc) toolcall_feed(sm->tc, ev->text, ev->text_len); /* streams through tc_* */
        else if (st->stream && ev->text_len) chunk_token(st, idx, ev->text, ev->text_len);
        return;
    }
    /* EV_DONE */
    sm->done = true;
    sm->finish = ev->finish;
    sm->end_token = ev->end_token;
    if (sm->rp) reasoning_finish(sm->rp); /* held text */
    if (sm->rp) st->reasoning_tokens += reasoning_pieces(sm->rp);
    if (sm->tc) toolcall_finish(sm->tc); /* held text, an unfinished call */
    if (!st->parts[part].counted) { /* the samples of one prompt share it */
        st->parts[part].counted = true;
        st->prompt_tokens += ev->prompt_tokens;
        st->cached_tokens += ev->cached_tokens;
    }
    st->completion_tokens += st->g.warm_only ? 0 : ev->completion_tokens;
    st->queue_ms = ev->queue_ms, st->ttft_ms = ev->ttft_ms, st->tpot_ms = ev->tpot_ms;
    st->n_done++;
    bool last = st->n_done >= st->n;
    if (st->stream) {
        /* what no piece carried yet: llama-server's token ids (OpenAI's chunks
           show none: the ids of text held back or read as a tool call end
           in no empty content delta), log-probabilities */
        if ((st->d == SRV_LLAMA && sm->n_ids > 0) || (sm->lp_pend && cJSON_GetArraySize(sm->lp_pend) > 0))
            chunk_token(st, idx, "", 0);
        chunk_finish(st, idx, last);
        if (last && st->d != SRV_LLAMA && !st->fmt) sb_str(&st->out, "data: [DONE]\n\n");
    }
    if (last) st->finished = true; /* the engine ends every sample with one done, forked or not */
}

/* Handles every event the engine has for st, without waiting. */
static void drain(gen_state *st) {
    engine_event *ev;
    while (st->ec && !st->finished && (ev = engine_client_next(st->ec))) {
        on_event(st, ev);
        engine_event_free(ev);
    }
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max) {
    gen_state *st = cls;
    (void)pos;
    st->last_read_ms = llc_now_ms();
    if (st->out_off >= st->out.len) {
        st->out.len = st->out_off = 0;
        drain(st);
    }
    if (st->out.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
    if (st->out_off < st->out.len) {
        size_t n = st->out.len - st->out_off;
        if (n > max) n = max;
        memcpy(buf, st->out.p + st->out_off, n);
        st->out_off += n;
        return (ssize_t)n;
    }
    if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
    if (st->gone) return MHD_CONTENT_READER_END_WITH_ERROR;
    suspend(st); /* resumed by the server loop when the engine client's fd wakes */
    return 0;
}

static void reader_free(void *cls) { state_free(cls); }

/* ---- the request ---- */

/* The text of a prompt (a string, or token ids decoded), for "echo". */
static int echo_text(const tokenizer *tok, const cJSON *prompt, char **out, llc_err *err) {
    if (cJSON_IsArray(prompt) && cJSON_GetArraySize(prompt) == 1 && !cJSON_IsNumber(prompt->child))
        prompt = prompt->child; /* a list of one prompt */
    if (cJSON_IsString(prompt)) {
        *out = strdup(prompt->valuestring);
        return *out ? 0 : llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    int n = cJSON_GetArraySize(prompt), i = 0;
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, prompt) ids[i++] = (int32_t)e->valuedouble; /* checked by srv_gen_text */
    size_t len;
    int rc = tok_decode(tok, ids, n, true, out, &len);
    free(ids);
    return rc ? llc_fail(err, rc, "the prompt's tokens cannot be decoded") : 0;
}

/* /v1/completions: a prompt, or a list of them (strings or token-id lists),
 * each its own engine request with the same parameters. */
static int build_prompts(const srv_model *m, gen_state *st, const cJSON *j, llc_err *err) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "prompt"), *e = cJSON_GetObjectItemCaseSensitive(j, "echo");
    if (!f) return llc_fail(err, LLC_ERR_TYPE, "'prompt' is required");
    if (e && !cJSON_IsBool(e) && !cJSON_IsNull(e)) return llc_fail(err, LLC_ERR_TYPE, "'echo' must be true or false");
    bool echo = cJSON_IsTrue(e);
    if (echo && st->g.logprobs)
        return llc_fail(err, LLC_ERR_RANGE, "'echo' with 'logprobs' is not supported (no log-probabilities of prompt tokens)");
    int k = srv_prompt_count(f);
    if (k < 1) return llc_fail(err, LLC_ERR_RANGE, "'prompt' is an empty list");
    if (k * st->g.req.n > HTTP_MAX_CHOICES)
        return llc_fail(err, LLC_ERR_RANGE, "%d prompts x n %d is more than %d choices", k, st->g.req.n,
                        HTTP_MAX_CHOICES);
    gen_part *p = calloc((size_t)k, sizeof *p);
    if (!p) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    free(st->parts);
    st->parts = p;
    st->n_parts = k;
    for (int i = 0; i < k; i++) {
        const cJSON *one = srv_prompt_at(f, i);
        if (k > 1 && !cJSON_IsString(one) && !cJSON_IsArray(one))
            return llc_fail(err, LLC_ERR_TYPE, "prompt[%d] must be a string or an array of token ids", i);
        srv_gen_init(&p[i].g);
        llc_err e1 = {{0}};
        int rc = srv_gen_text(m, one, i ? &p[i].g : &st->g, &e1);
        if (!rc && echo) rc = echo_text(m->tok, one, &p[i].echo, &e1);
        if (rc) return k > 1 ? llc_fail(err, rc, "prompt[%d]: %s", i, e1.msg) : llc_fail(err, rc, "%s", e1.msg);
    }
    return 0;
}

static int build_prompt(const srv_model *m, gen_state *st, const cJSON *j, llc_err *err) {
    const cJSON *f;
    switch (st->ep) {
    case HTTP_OPENAI_CHAT: {
        int rc = srv_gen_tools(j, &st->g, err);
        if (!rc) rc = srv_gen_template_vars(j, &st->g, err);
        if (!rc) rc = srv_gen_chat(m, cJSON_GetObjectItemCaseSensitive(j, "messages"), &st->g, err);
        return rc ? rc : srv_gen_reasoning(m, j, &st->g, err);
    }
    case HTTP_OPENAI_TEXT:
        return build_prompts(m, st, j, err);
    case HTTP_LLAMA_COMPLETION:
        f = cJSON_GetObjectItemCaseSensitive(j, "prompt");
        if (!f) return llc_fail(err, LLC_ERR_TYPE, "'prompt' is required");
        return srv_gen_text(m, f, &st->g, err);
    case HTTP_LLAMA_INFILL: {
        const char *names[3] = {"input_prefix", "input_suffix", "prompt"}, *vals[3] = {"", "", ""};
        for (int i = 0; i < 3; i++) {
            f = cJSON_GetObjectItemCaseSensitive(j, names[i]);
            if (f && !cJSON_IsNull(f) && !cJSON_IsString(f))
                return llc_fail(err, LLC_ERR_TYPE, "'%s' must be a string", names[i]);
            if (cJSON_IsString(f)) vals[i] = f->valuestring;
        }
        f = cJSON_GetObjectItemCaseSensitive(j, "input_extra");
        return srv_gen_infill(m, vals[0], vals[1], cJSON_IsNull(f) ? NULL : f, vals[2], &st->g, err);
    }
    }
    return llc_fail(err, LLC_ERR_RANGE, "unknown endpoint");
}

static enum MHD_Result bad_request(struct MHD_Connection *mc, int rc, const char *msg) {
    if (rc == LLC_ERR_UNSUPPORTED) return srv_http_error(mc, MHD_HTTP_NOT_IMPLEMENTED, "not_supported_error", msg);
    if (rc == LLC_ERR_NOMEM) return srv_http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", msg);
    return srv_http_error(mc, MHD_HTTP_BAD_REQUEST, "invalid_request_error", msg);
}

/* A refused request, in the format's own error shape when it has one. */
static enum MHD_Result refuse(const http_format *f, struct MHD_Connection *mc, int rc, const char *msg) {
    if (!f) return bad_request(mc, rc, msg);
    return f->error(mc, rc == LLC_ERR_UNSUPPORTED ? MHD_HTTP_NOT_IMPLEMENTED
                        : rc == LLC_ERR_NOMEM     ? MHD_HTTP_INTERNAL_SERVER_ERROR
                                                  : MHD_HTTP_BAD_REQUEST, msg);
}

/* The answer to a warm-up request (max_tokens 0): every sample ends at once
 * with no text ("length"); the prompt went to srv_warm_submit. */
static void answer_warm(gen_state *st) {
    st->prompt_tokens = st->g.req.n_prompt;
    for (int i = 1; i < st->n_parts; i++) st->prompt_tokens += st->parts[i].g.req.n_prompt;
    for (int i = 0; i < st->n; i++) {
        st->sm[i].done = true;
        st->sm[i].finish = FINISH_LENGTH;
        st->n_done++;
        if (st->stream) chunk_finish(st, i, i == st->n - 1);
    }
    if (st->stream && st->d != SRV_LLAMA) sb_str(&st->out, "data: [DONE]\n\n");
    st->finished = true;
}

static enum MHD_Result answer_now(gen_state *st, struct MHD_Connection *mc) {
    if (st->fmt) {
        http_gen_report r = report_of(st, 0, NULL, 0);
        sbuf b = {0};
        unsigned status = st->fmt->end(st->fmt_ctx, &r, false, &b);
        state_free(st);
        enum MHD_Result ret = b.oom || !b.p ? MHD_NO : srv_http_json(mc, status, b.p, b.len);
        sb_free(&b);
        return ret;
    }
    bool failed = st->n > 0;
    for (int i = 0; i < st->n; i++) failed = failed && st->sm[i].finish == FINISH_ERROR;
    if (failed) { /* no answer at all: an error status, not a 200 with nothing in it */
        char msg[sizeof st->err_msg];
        snprintf(msg, sizeof msg, "%s", st->err_msg[0] ? st->err_msg : "the generation failed");
        state_free(st);
        return srv_http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", msg);
    }
    cJSON *a = answer_json(st);
    char *txt = a ? cJSON_PrintUnformatted(a) : NULL;
    cJSON_Delete(a);
    state_free(st);
    enum MHD_Result ret = txt ? srv_http_json(mc, MHD_HTTP_OK, txt, strlen(txt)) : MHD_NO;
    free(txt);
    return ret;
}

enum MHD_Result srv_http_generate_resume(srv *s, struct MHD_Connection *mc, http_gen **pending) {
    (void)s;
    gen_state *st = *pending;
    drain(st);
    if (st->finished) {
        *pending = NULL;
        return answer_now(st, mc);
    }
    if (st->gone) { /* the client is gone */
        *pending = NULL;
        state_free(st);
        return MHD_NO;
    }
    suspend(st);
    return MHD_YES;
}

/* A generation not yet listed (any thread: a worker reads requests into one). */
static gen_state *gen_alloc(void) {
    gen_state *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->fd = -1;
    st->t_start = llc_now_ms();
    srv_gen_init(&st->g);
    return st;
}

/* Lists st on the server thread: the server loop polls it while suspended. */
static void gen_link(srv *s, gen_state *st, struct MHD_Connection *mc) {
    s->http_active++;
    st->s = s;
    st->mc = mc;
    st->next = s->gens;
    if (s->gens) s->gens->prev = st;
    s->gens = st;
}

static gen_state *gen_new(srv *s, struct MHD_Connection *mc) {
    gen_state *st = gen_alloc();
    if (st) gen_link(s, st, mc);
    return st;
}

static enum MHD_Result gen_run(gen_state *st, struct MHD_Connection *mc, http_gen **pending);

enum MHD_Result srv_http_generate_as(srv *s, struct MHD_Connection *mc, const http_format *f, void *ctx,
                                     srv_gen *g, bool stream, http_gen **pending) {
    gen_state *st = gen_new(s, mc);
    if (!st) {
        if (f->free_ctx) f->free_ctx(ctx);
        srv_gen_free(g);
        return MHD_NO;
    }
    st->fmt = f;
    st->fmt_ctx = ctx;
    st->d = SRV_OLLAMA; /* none of OpenAI's or llama-server's paths: the format writes every byte */
    st->stream = stream;
    st->g = *g;
    memset(g, 0, sizeof *g);
    st->g.req.n = 1;
    return gen_run(st, mc, pending);
}

/* On a worker: the request body of endpoint `which` read into a generation
 * not yet listed; what is wrong with it is kept for gen_start (read_rc). */
static void *gen_prepare(const srv_model *m, int which, const char *body, size_t len) {
    gen_state *st = gen_alloc();
    if (!st) return NULL;
    st->ep = (http_endpoint)which;
    st->d = st->ep == HTTP_OPENAI_CHAT ? SRV_OPENAI_CHAT : st->ep == HTTP_OPENAI_TEXT ? SRV_OPENAI_TEXT : SRV_LLAMA;
    llc_err *err = &st->read_err;
    cJSON *j = NULL;
    int rc = 0;
    if (!srv_utf8_valid(body, len)) rc = llc_fail(err, LLC_ERR_TYPE, "the body is not valid UTF-8");
    else if (srv_json_has_nul(body, len)) rc = llc_fail(err, LLC_ERR_TYPE, NUL_REFUSED);
    else if (!(j = cJSON_ParseWithLength(body, len))) rc = llc_fail(err, LLC_ERR_TYPE, "the body is not valid JSON");
    const cJSON *stream = cJSON_GetObjectItemCaseSensitive(j, "stream");
    const cJSON *opts = cJSON_GetObjectItemCaseSensitive(j, "stream_options");
    const cJSON *fields = cJSON_GetObjectItemCaseSensitive(j, "response_fields");
    if (!rc && stream && !cJSON_IsBool(stream) && !cJSON_IsNull(stream))
        rc = llc_fail(err, LLC_ERR_TYPE, "'stream' must be true or false");
    st->stream = cJSON_IsTrue(stream);
    st->include_usage = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(opts, "include_usage"));
    if (st->d == SRV_LLAMA && cJSON_IsArray(fields)) st->fields = cJSON_Duplicate(fields, true);
    if (!rc) rc = srv_gen_params(m, st->d, j, &st->g, err);
    if (!rc && st->d == SRV_LLAMA) st->g.req.n = 1; /* llama-server answers one sample */
    if (!rc) rc = build_prompt(m, st, j, err);
    cJSON_Delete(j);
    st->read_rc = rc;
    return st;
}

/* On the server thread: the read request answered (refused) or started. */
static enum MHD_Result gen_start(srv *s, struct MHD_Connection *mc, void *ready, http_pending *pending) {
    gen_state *st = ready;
    if (!st) return MHD_NO;
    gen_link(s, st, mc);
    if (st->read_rc) {
        enum MHD_Result ret = bad_request(mc, st->read_rc, st->read_err.msg);
        state_free(st);
        return ret;
    }
    return gen_run(st, mc, &pending->gen);
}

static void gen_discard(void *ready) { state_free(ready); }

const http_prep srv_http_gen_prep = {gen_prepare, gen_start, gen_discard};

/* Submits st's request (or answers a warm-up) and queues the stream, or waits
 * for a one-piece answer. */
static enum MHD_Result gen_run(gen_state *st, struct MHD_Connection *mc, http_gen **pending) {
    srv *s = st->s;
    const http_format *f = st->fmt;
    llc_err err = {{0}};
    if (!st->parts && !(st->parts = calloc(1, sizeof *st->parts))) {
        state_free(st);
        return MHD_NO;
    }
    if (st->n_parts < 1) st->n_parts = 1;
    st->n = st->g.req.n * st->n_parts;
    st->sm = calloc((size_t)st->n, sizeof *st->sm);
    if (!st->sm) {
        state_free(st);
        return MHD_NO;
    }
    for (int i = 0; st->g.tools && i < st->n; i++) { /* chat with tools: calls are read out of the answer */
        st->sm[i].st = st;
        st->sm[i].idx = i;
        toolcall_sink sink = {&st->sm[i], tc_content, tc_call, tc_args};
        if (toolcall_parser_create(st->g.tool_format, st->g.tools, &sink, &st->sm[i].tc)) {
            state_free(st);
            return MHD_NO;
        }
    }
    for (int i = 0; st->g.reasoning != REASONING_NONE && i < st->n; i++) { /* a thinking model's chat */
        st->sm[i].st = st;
        st->sm[i].idx = i;
        reasoning_sink sink = {&st->sm[i], rp_reasoning, rp_content};
        if (reasoning_parser_create(st->g.reasoning, st->g.in_reasoning, &sink, &st->sm[i].rp)) {
            state_free(st);
            return MHD_NO;
        }
    }
    st->created = (long long)time(NULL);
    snprintf(st->id, sizeof st->id, "%s-%llx%05x", st->d == SRV_OPENAI_CHAT ? "chatcmpl" : "cmpl",
             st->created, g_counter++ & 0xFFFFF);
    if (st->stream && f && f->begin) { /* a format's opening events */
        http_gen_report r = report_of(st, 0, "", 0);
        r.prompt_tokens = st->g.req.n_prompt;
        f->begin(st->fmt_ctx, &r, &st->out);
    }
    if (st->g.warm_only) { /* answered now; the cache fills in the background */
        for (int i = 0; i < st->n_parts; i++) {
            srv_gen one = st->g; /* (a shallow copy: the same parameters, prompt i) */
            if (i) one.req.prompt = st->parts[i].g.req.prompt, one.req.n_prompt = st->parts[i].g.req.n_prompt;
            srv_warm_submit(s, &one);
        }
        answer_warm(st);
    } else {
        if (engine_client_create(s->e, &st->ec)) {
            state_free(st);
            return MHD_NO;
        }
        for (int i = 0; i < st->n_parts; i++) {
            gen_request req = st->g.req;
            if (i) req.prompt = st->parts[i].g.req.prompt, req.n_prompt = st->parts[i].g.req.n_prompt;
            int64_t eid = engine_submit(s->e, st->ec, &req, &err);
            if (eid < 0) { /* freeing the client cancels the prompts already submitted */
                char msg[sizeof err.msg + 32];
                if (st->n_parts > 1) snprintf(msg, sizeof msg, "prompt[%d]: %s", i, err.msg);
                else snprintf(msg, sizeof msg, "%s", err.msg);
                state_free(st);
                return refuse(f, mc, (int)eid, msg);
            }
            st->parts[i].eid = eid;
        }
        if (atomic_load(&s->stopping)) srv_http_gen_cancel(s, st);
    }
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    st->fd = ci ? ci->connect_fd : -1;
    if (st->stream) {
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, reader, st, reader_free);
        if (!r) {
            state_free(st);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", f ? f->stream_type : "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        enum MHD_Result ret = srv_http_queue(mc, MHD_HTTP_OK, r);
        MHD_destroy_response(r); /* st is freed with the response */
        return ret;
    }
    *pending = st;
    return srv_http_generate_resume(s, mc, pending);
}

/* ---- warm-up requests ---- */

void srv_warm_submit(srv *s, const srv_gen *g) {
    if (s->n_warm >= SRV_MAX_WARM || atomic_load(&s->stopping)) return; /* best effort */
    if (!s->warm_ec && engine_client_create(s->e, &s->warm_ec)) return;
    gen_request req = g->req;
    req.n = 1;
    req.beam_width = 0;
    req.max_tokens = 1;
    req.sampling.n_logprobs = 0;
    llc_err err;
    if (engine_submit(s->e, s->warm_ec, &req, &err) >= 0) s->n_warm++;
}

void srv_warm_drain(srv *s) {
    engine_event *ev;
    while (s->warm_ec && (ev = engine_client_next(s->warm_ec))) {
        if (ev->kind == EV_DONE && s->n_warm > 0) s->n_warm--;
        engine_event_free(ev);
    }
}
