/* provider_local.c — the local engine as a provider (see provider.h): the
 * conversation becomes prompt tokens (engine/prompt, the same as the socket
 * server builds), goes to the shared engine, and the engine's events come back
 * as provider events — a thinking model's text through a reasoning parser per
 * answer, whose two outputs queue up as text and reasoning events. */
#include "ui/provider.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "engine/template/prompt.h"
#include "engine/template/reasoning.h"

/* An answer being read by a reasoning parser. */
typedef struct answer_parser {
    int64_t request_id;
    int seq_index;
    reasoning_parser *p;
    struct prov_local *l;
} answer_parser;

typedef struct prov_local {
    provider base;
    prov_local_config cfg;
    reasoning_format reasoning; /* the template's reasoning markup */
    answer_parser **parsers;    /* one per answer streaming now (thinking models) */
    int n_parsers, cap_parsers;
    prov_event **pending;       /* events a parser produced, not yet handed out */
    int n_pending, cap_pending, pending_head;
    engine_client *client;
    engine_metrics m;        /* the last read, for the status line and /stats */
    int64_t error_id;        /* the request of the last error event, and its message: */
    char error[256];         /* its samples' done events say why they failed */
} prov_local;

static int local_check(provider *p, const chat_msg *msgs, int n, const conv_settings *s, llc_err *err) {
    prov_local *l = (prov_local *)p;
    prompt pr;
    int rc = prompt_build(l->cfg.tok, l->cfg.tmpl, msgs, n, prompt_budget(l->cfg.n_ctx, conv_max_tokens(s)),
                          &pr, err);
    if (rc == 0) free(pr.ids);
    return rc;
}

/* ---- reasoning parsers and the events they queue ---- */

static void queue_event(prov_local *l, prov_event *ev) {
    if (!ev) return;
    if (l->n_pending == l->cap_pending) {
        if (l->pending_head > 0) { /* compact first */
            memmove(l->pending, l->pending + l->pending_head, (size_t)(l->n_pending - l->pending_head) * sizeof *l->pending);
            l->n_pending -= l->pending_head;
            l->pending_head = 0;
        }
        if (l->n_pending == l->cap_pending) {
            int cap = l->cap_pending ? 2 * l->cap_pending : 16;
            prov_event **q = realloc(l->pending, (size_t)cap * sizeof *q);
            if (!q) {
                prov_event_free(ev); /* (a piece of text lost rather than a crash) */
                return;
            }
            l->pending = q;
            l->cap_pending = cap;
        }
    }
    l->pending[l->n_pending++] = ev;
}

static prov_event *next_pending(prov_local *l) {
    if (l->pending_head >= l->n_pending) {
        l->pending_head = l->n_pending = 0;
        return NULL;
    }
    return l->pending[l->pending_head++];
}

static void on_reasoning(void *ud, const char *text, size_t len) {
    answer_parser *a = ud;
    queue_event(a->l, prov_event_reasoning(a->request_id, a->seq_index, text, len));
}

static void on_content(void *ud, const char *text, size_t len) {
    answer_parser *a = ud;
    queue_event(a->l, prov_event_text(a->request_id, a->seq_index, text, len));
}

/* A parser for answer seq of request id (each its own allocation: its sink
 * points at it). */
static int add_parser(prov_local *l, int64_t id, int seq, bool opened) {
    if (l->n_parsers == l->cap_parsers) {
        int cap = l->cap_parsers ? 2 * l->cap_parsers : 8;
        answer_parser **arr = realloc(l->parsers, (size_t)cap * sizeof *arr);
        if (!arr) return LLC_ERR_NOMEM;
        l->parsers = arr;
        l->cap_parsers = cap;
    }
    answer_parser *a = calloc(1, sizeof *a);
    if (!a) return LLC_ERR_NOMEM;
    *a = (answer_parser){.request_id = id, .seq_index = seq, .l = l};
    reasoning_sink sink = {a, on_reasoning, on_content};
    if (reasoning_parser_create(l->reasoning, opened, &sink, &a->p)) {
        free(a);
        return LLC_ERR_NOMEM;
    }
    l->parsers[l->n_parsers++] = a;
    return 0;
}

static int find_parser(prov_local *l, int64_t id, int seq) {
    for (int i = 0; i < l->n_parsers; i++)
        if (l->parsers[i]->request_id == id && l->parsers[i]->seq_index == seq) return i;
    return -1;
}

/* Answer i is over: what its parser holds goes out, then it goes.
 * Returns how many reasoning pieces it saw (one a token). */
static int end_parser(prov_local *l, int i) {
    answer_parser *a = l->parsers[i];
    reasoning_finish(a->p);
    const int pieces = reasoning_pieces(a->p);
    reasoning_parser_free(a->p);
    free(a);
    l->parsers[i] = l->parsers[--l->n_parsers];
    return pieces;
}

/* The prompt; with thinking off (/think off) a Jinja template renders with
 * enable_thinking false (and thinking_mode "disabled": MiniMax-M3's; thinking
 * false: Kimi K3's, DeepSeek V3.1's; reasoning false: Command-A's). */
static int build_prompt(prov_local *l, const chat_msg *msgs, int n, const conv_settings *s, prompt *pr,
                        llc_err *err) {
    const int budget = prompt_budget(l->cfg.n_ctx, conv_max_tokens(s));
    if (!s->no_think || !chat_tmpl_is_jinja(l->cfg.tmpl)) return prompt_build(l->cfg.tok, l->cfg.tmpl, msgs, n, budget, pr, err);
    cJSON *arr = chat_msgs_to_json(msgs, n), *vars = cJSON_CreateObject();
    bool ok = arr && vars && cJSON_AddFalseToObject(vars, "enable_thinking") &&
              cJSON_AddStringToObject(vars, "thinking_mode", "disabled") && cJSON_AddFalseToObject(vars, "thinking") &&
              cJSON_AddFalseToObject(vars, "reasoning");
    int rc = ok ? prompt_build_json(l->cfg.tok, l->cfg.tmpl, arr, NULL, vars, budget, pr, err)
                : llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    cJSON_Delete(arr);
    cJSON_Delete(vars);
    return rc;
}

static int64_t local_submit(provider *p, const chat_msg *msgs, int n, const conv_settings *s,
                            prov_started *out, llc_err *err) {
    prov_local *l = (prov_local *)p;
    prompt pr;
    int rc = build_prompt(l, msgs, n, s, &pr, err);
    if (rc) return rc;
    int k = s->beam > 0 ? 1 : s->n;
    gen_request r = {.prompt = pr.ids, .n_prompt = pr.n_ids, .n = k, .beam_width = s->beam,
                     .max_tokens = conv_max_tokens(s)};
    r.sampling = sampler_params_default();
    r.sampling.temperature = s->temperature;
    r.sampling.top_p = s->top_p;
    r.sampling.top_k = s->top_k;
    r.sampling.min_p = s->min_p;
    r.sampling.seed = s->seed;
    const char *const *stops = chat_stop_strings(l->cfg.tmpl);
    for (r.n_stop = 0; stops[r.n_stop]; r.n_stop++) {}
    r.stop = stops;
    r.special_text = reasoning_special_text(l->reasoning); /* its markers are control tokens */
    const bool opened = reasoning_prompt_ids_open(l->reasoning, l->cfg.tok, pr.ids, pr.n_ids);
    int64_t id = engine_submit(l->cfg.e, l->client, &r, err);
    free(pr.ids);
    for (int i = 0; id > 0 && l->reasoning != REASONING_NONE && i < k; i++)
        if (add_parser(l, id, i, opened)) break; /* (out of memory: that answer stays whole) */
    if (id > 0) *out = (prov_started){.n_answers = k, .n_dropped = pr.n_dropped};
    return id;
}

static void local_cancel(provider *p, int64_t id) { engine_cancel(((prov_local *)p)->cfg.e, id); }

static prov_event *local_next(provider *p) {
    prov_local *l = (prov_local *)p;
    prov_event *queued = next_pending(l);
    if (queued) return queued;
    engine_event *ev;
    while ((ev = engine_client_next(l->client))) {
        prov_event *out = NULL;
        const int pi = ev->kind == EV_TOKEN || ev->kind == EV_DONE ? find_parser(l, ev->request_id, ev->seq_index) : -1;
        if (ev->kind == EV_TOKEN && pi >= 0) { /* a thinking model: through its parser */
            if (ev->text_len) reasoning_feed(l->parsers[pi]->p, ev->text, ev->text_len);
            out = next_pending(l);
        } else if (ev->kind == EV_TOKEN) {
            out = prov_event_text(ev->request_id, ev->seq_index, ev->text ? ev->text : "", ev->text_len);
        } else if (ev->kind == EV_DONE) {
            const int reasoning_tokens = pi >= 0 ? end_parser(l, pi) : 0; /* held text queued before the done */
            static const char *names[] = {"", "stop", "length", "cancelled", "error"};
            int state = ev->finish == FINISH_CANCELLED ? DB_STATE_CANCELLED
                        : ev->finish == FINISH_ERROR   ? DB_STATE_ERROR
                                                       : DB_STATE_DONE;
            db_usage u = {.prompt_tokens = ev->prompt_tokens, .cached_tokens = ev->cached_tokens,
                          .completion_tokens = ev->completion_tokens, .ttft_ms = ev->ttft_ms, .tpot_ms = ev->tpot_ms};
            u.reasoning_tokens = reasoning_tokens;
            const char *why = l->error_id == ev->request_id && l->error[0] ? l->error : "the engine failed";
            out = prov_event_done(ev->request_id, ev->seq_index, state,
                                  names[ev->finish <= FINISH_ERROR ? ev->finish : 0], &u,
                                  state == DB_STATE_ERROR ? why : NULL);
            if (pi >= 0 && l->pending_head < l->n_pending) { /* the held text first */
                queue_event(l, out);
                out = next_pending(l);
            }
        } else if (ev->kind == EV_ERROR) { /* why: the done events of the samples it ended follow */
            l->error_id = ev->request_id;
            snprintf(l->error, sizeof l->error, "%s", ev->message);
        }
        engine_event_free(ev);
        if (out) return out;
    }
    return NULL;
}

static int local_fd(const provider *p) { return engine_client_fd(((const prov_local *)p)->client); }

static void local_status(provider *p, char *s, size_t n) {
    prov_local *l = (prov_local *)p;
    engine_get_metrics(l->cfg.e, &l->m);
    const engine_metrics *m = &l->m;
    double hit = m->prompt_tokens ? 100.0 * (double)m->cached_tokens / (double)m->prompt_tokens : 0;
    char spec[48] = "";
    if (m->spec_drafted > 0)
        snprintf(spec, sizeof spec, " | draft %.0f%%", 100.0 * (double)m->spec_accepted / (double)m->spec_drafted);
    char kv[48] = ""; /* (the engine has not published its cache yet at the first draw) */
    if (m->kv_total > 0) snprintf(kv, sizeof kv, " | KV %d/%d", m->kv_used, m->kv_total);
    snprintf(s, n, " %s | %s | %.1f tok/s | TTFT %.0f ms | cache %.0f%%%s | run %d%s ", l->cfg.model_name,
             l->cfg.device_name, m->gen_tokens_per_s, m->ttft_ms_p50, hit, kv, m->running, spec);
}

static char *printf_alloc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *printf_alloc(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

static char *local_stats(provider *p) {
    prov_local *l = (prov_local *)p;
    engine_get_metrics(l->cfg.e, &l->m);
    const engine_metrics *m = &l->m;
    double hit = m->prompt_tokens ? 100.0 * (double)m->cached_tokens / (double)m->prompt_tokens : 0;
    return printf_alloc(
        "Engine\n"
        "  running %d, waiting %d, %lld steps, %lld preemptions\n"
        "  KV blocks: %d used, %d cached, %d free of %d (peak %d)\n"
        "  prompt tokens: %lld, %lld from the prefix cache (%.0f%%)\n"
        "  generated %lld tokens; now %.1f tokens/s\n"
        "  TTFT ms p50 %.0f p90 %.0f p99 %.0f; TPOT ms p50 %.1f p90 %.1f p99 %.1f\n"
        "  speculation: %lld of %lld drafted tokens accepted, %.2f tokens per check, "
        "%.0f%% of step time drafting",
        m->running, m->waiting, (long long)m->steps, (long long)m->preemptions, m->kv_used, m->kv_cached,
        m->kv_free, m->kv_total, m->peak_kv_used, (long long)m->prompt_tokens, (long long)m->cached_tokens,
        hit, (long long)m->generated_tokens, m->gen_tokens_per_s, m->ttft_ms_p50, m->ttft_ms_p90,
        m->ttft_ms_p99, m->tpot_ms_p50, m->tpot_ms_p90, m->tpot_ms_p99, (long long)m->spec_accepted,
        (long long)m->spec_drafted,
        m->spec_verifies ? (double)(m->spec_accepted + m->spec_verifies) / (double)m->spec_verifies : 0,
        m->step_ms > 0 ? 100 * m->draft_ms / m->step_ms : 0);
}

static char *local_about(provider *p) {
    prov_local *l = (prov_local *)p;
    return printf_alloc("Model\n  %s\n  context %d tokens, vocabulary %d, template %s, device %s",
                        l->cfg.model_name, l->cfg.n_ctx, tok_n_vocab(l->cfg.tok),
                        chat_tmpl_name(l->cfg.tmpl), l->cfg.device_name);
}

static const char *local_model_name(const provider *p) { return ((const prov_local *)p)->cfg.model_name; }

static void local_destroy(provider *p) {
    prov_local *l = (prov_local *)p;
    engine_client_free(l->client); /* cancels what still runs */
    for (int i = 0; i < l->n_parsers; i++) {
        reasoning_parser_free(l->parsers[i]->p);
        free(l->parsers[i]);
    }
    free(l->parsers);
    for (int i = l->pending_head; i < l->n_pending; i++) prov_event_free(l->pending[i]);
    free(l->pending);
    void (*done)(void *) = l->cfg.on_destroy;
    void *ctx = l->cfg.destroy_ctx;
    free(l);
    if (done) done(ctx);
}

static const provider_ops local_ops = {
    .check = local_check,
    .submit = local_submit,
    .cancel = local_cancel,
    .next = local_next,
    .fd = local_fd,
    .status = local_status,
    .stats = local_stats,
    .about = local_about,
    .model_name = local_model_name,
    .destroy = local_destroy,
};

int prov_local_create(const prov_local_config *cfg, provider **out, llc_err *err) {
    prov_local *l = calloc(1, sizeof *l);
    if (!l) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    l->base.ops = &local_ops;
    l->cfg = *cfg;
    l->reasoning = chat_tmpl_is_jinja(cfg->tmpl) ? reasoning_detect(chat_tmpl_source(cfg->tmpl)) : REASONING_NONE;
    if (engine_client_create(cfg->e, &l->client)) {
        free(l);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    engine_get_metrics(cfg->e, &l->m);
    *out = &l->base;
    return 0;
}
