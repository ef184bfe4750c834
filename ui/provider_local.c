/* provider_local.c — the local engine as a provider (see provider.h): the
 * conversation becomes prompt tokens (engine/prompt, the same as the socket
 * server builds), goes to the shared engine, and the engine's events come back
 * as provider events. */
#include "ui/provider.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/template/prompt.h"

typedef struct prov_local {
    provider base;
    prov_local_config cfg;
    engine_client *client;
    engine_metrics m;        /* the last read, for the status line and /stats */
    int64_t error_id;        /* the request of the last error event, and its message: */
    char error[256];         /* its samples' done events say why they failed */
} prov_local;

static int local_check(provider *p, const chat_msg *msgs, int n, const conv_settings *s, llc_err *err) {
    prov_local *l = (prov_local *)p;
    prompt pr;
    int rc = prompt_build(l->cfg.tok, l->cfg.tmpl, msgs, n, prompt_budget(l->cfg.n_ctx, s->max_tokens),
                          &pr, err);
    if (rc == 0) free(pr.ids);
    return rc;
}

static int64_t local_submit(provider *p, const chat_msg *msgs, int n, const conv_settings *s,
                            prov_started *out, llc_err *err) {
    prov_local *l = (prov_local *)p;
    prompt pr;
    int rc = prompt_build(l->cfg.tok, l->cfg.tmpl, msgs, n, prompt_budget(l->cfg.n_ctx, s->max_tokens),
                          &pr, err);
    if (rc) return rc;
    int k = s->beam > 0 ? 1 : s->n;
    gen_request r = {.prompt = pr.ids, .n_prompt = pr.n_ids, .n = k, .beam_width = s->beam,
                     .max_tokens = s->max_tokens};
    r.sampling = sampler_params_default();
    r.sampling.temperature = s->temperature;
    r.sampling.top_p = s->top_p;
    r.sampling.top_k = s->top_k;
    r.sampling.min_p = s->min_p;
    r.sampling.seed = s->seed;
    const char *const *stops = chat_stop_strings(l->cfg.tmpl);
    for (r.n_stop = 0; stops[r.n_stop]; r.n_stop++) {}
    r.stop = stops;
    int64_t id = engine_submit(l->cfg.e, l->client, &r, err);
    free(pr.ids);
    if (id > 0) *out = (prov_started){.n_answers = k, .n_dropped = pr.n_dropped};
    return id;
}

static void local_cancel(provider *p, int64_t id) { engine_cancel(((prov_local *)p)->cfg.e, id); }

static prov_event *local_next(provider *p) {
    prov_local *l = (prov_local *)p;
    engine_event *ev;
    while ((ev = engine_client_next(l->client))) {
        prov_event *out = NULL;
        if (ev->kind == EV_TOKEN) {
            out = prov_event_text(ev->request_id, ev->seq_index, ev->text ? ev->text : "", ev->text_len);
        } else if (ev->kind == EV_DONE) {
            static const char *names[] = {"", "stop", "length", "cancelled", "error"};
            int state = ev->finish == FINISH_CANCELLED ? DB_STATE_CANCELLED
                        : ev->finish == FINISH_ERROR   ? DB_STATE_ERROR
                                                       : DB_STATE_DONE;
            db_usage u = {ev->prompt_tokens, ev->cached_tokens, ev->completion_tokens, ev->ttft_ms,
                          ev->tpot_ms};
            const char *why = l->error_id == ev->request_id && l->error[0] ? l->error : "the engine failed";
            out = prov_event_done(ev->request_id, ev->seq_index, state,
                                  names[ev->finish <= FINISH_ERROR ? ev->finish : 0], &u,
                                  state == DB_STATE_ERROR ? why : NULL);
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
    if (engine_client_create(cfg->e, &l->client)) {
        free(l);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    engine_get_metrics(cfg->e, &l->m);
    *out = &l->base;
    return 0;
}
