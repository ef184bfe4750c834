/* srv_http_extra.c — llama-server's small endpoints that editor plugins and
 * dashboards use, and OpenAI's model lookup:
 *   POST /tokenize, POST /detokenize   text <-> token ids (with pieces)
 *   POST /apply-template               the prompt a conversation renders to
 *   GET /props                         the defaults, the model, the template
 *   GET /metrics                       Prometheus text (engine_metrics)
 *   GET /slots                         the live sequences (engine_get_slots)
 *   GET /v1/models/{id}                one model object, or 404
 * None of them waits for the engine. The POSTs read only the model and are
 * answered through an http_prep (a big body is read on a worker); the GETs at
 * once on the server thread (metrics and slots are the engine's last published
 * snapshot). */
#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/server/srv_http.h"

/* ---- /tokenize, /detokenize, /apply-template: answers made on a worker ---- */

/* What one of them answers: a 200 with a JSON body, or an error. They read
 * only the model (read-only), so big bodies are read off the server thread
 * (srv_http_extra_prep). */
typedef enum { X_TOKENIZE, X_DETOKENIZE, X_APPLY_TEMPLATE } x_kind;
typedef struct x_answer {
    unsigned status;      /* 200, or the error's */
    const char *type;     /* the error's type (NULL for a 200) */
    char msg[512];        /* the error's message */
    sbuf body;            /* a 200's JSON */
} x_answer;

static void x_fail(x_answer *a, unsigned status, const char *type, const char *msg) {
    a->status = status;
    a->type = type;
    snprintf(a->msg, sizeof a->msg, "%s", msg);
}

static void bad(x_answer *a, const char *msg) { x_fail(a, MHD_HTTP_BAD_REQUEST, "invalid_request_error", msg); }

/* The body as a JSON object, or NULL after a 400 in a. */
static cJSON *parse_body(x_answer *a, const char *body, size_t len) {
    if (!srv_utf8_valid(body, len)) {
        bad(a, "the body is not valid UTF-8");
        return NULL;
    }
    if (srv_json_has_nul(body, len)) {
        bad(a, NUL_REFUSED);
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        bad(a, "the body must be a JSON object");
        return NULL;
    }
    return j;
}

/* An optional boolean field: 0, or -1 after a 400 in a. */
static int opt_bool(x_answer *a, const cJSON *j, const char *name, bool *dst) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, name);
    if (!f || cJSON_IsNull(f)) return 0;
    if (cJSON_IsBool(f)) {
        *dst = cJSON_IsTrue(f);
        return 0;
    }
    char msg[96];
    snprintf(msg, sizeof msg, "'%s' must be true or false", name);
    bad(a, msg);
    return -1;
}

/* {"id": ID, "piece": "text"} or, when the piece is not valid UTF-8 on its own
 * (part of a multi-byte character), {"id": ID, "piece": [bytes]}, as llama-server. */
static void piece_entry(sbuf *b, const tokenizer *tok, int32_t id) {
    char small[64], *buf = small;
    int n = tok_piece(tok, id, true, small, sizeof small);
    if (n > (int)sizeof small && (buf = malloc((size_t)n))) tok_piece(tok, id, true, buf, n);
    if (!buf) buf = small, n = sizeof small;
    if (n < 0) n = 0;
    sb_printf(b, "{\"id\":%d,\"piece\":", id);
    if (srv_utf8_valid(buf, (size_t)n)) {
        sb_json_str(b, buf, (size_t)n);
    } else {
        sb_str(b, "[");
        for (int i = 0; i < n; i++) sb_printf(b, "%s%u", i ? "," : "", (unsigned char)buf[i]);
        sb_str(b, "]");
    }
    sb_str(b, "}");
    if (buf != small) free(buf);
}

static void tokenize(const srv_model *m, const cJSON *j, x_answer *a) {
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(j, "content");
    if (!cJSON_IsString(content)) return bad(a, "'content' must be a string");
    bool add_special = false, parse_special = true, with_pieces = false;
    if (opt_bool(a, j, "add_special", &add_special) || opt_bool(a, j, "parse_special", &parse_special) ||
        opt_bool(a, j, "with_pieces", &with_pieces))
        return;
    const tokenizer *tok = m->tok;
    int32_t *ids = NULL;
    int n = llm_tokenize(tok, content->valuestring, strlen(content->valuestring), add_special && tok_add_bos(tok),
                         parse_special, &ids);
    if (n < 0) return bad(a, "'content' cannot be tokenized");
    int32_t eos = tok_eos(tok);
    bool add_eos = add_special && tok_add_eos(tok) && eos >= 0;
    sb_str(&a->body, "{\"tokens\":[");
    for (int i = 0; i < n + add_eos; i++) {
        int32_t id = i < n ? ids[i] : eos;
        if (i) sb_str(&a->body, ",");
        if (with_pieces) piece_entry(&a->body, tok, id);
        else sb_printf(&a->body, "%d", id);
    }
    sb_str(&a->body, "]}");
    free(ids);
}

static void detokenize(const srv_model *m, const cJSON *j, x_answer *a) {
    const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(j, "tokens");
    if (!cJSON_IsArray(tokens)) return bad(a, "'tokens' must be an array of token ids");
    int n = cJSON_GetArraySize(tokens), i = 0;
    int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids) return x_fail(a, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, tokens) {
        if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 ||
            e->valuedouble >= m->n_vocab) {
            free(ids);
            char msg[128];
            snprintf(msg, sizeof msg, "tokens[%d] is not a token id of this model (0..%d)", i, m->n_vocab - 1);
            return bad(a, msg);
        }
        ids[i++] = (int32_t)e->valuedouble;
    }
    char *text = NULL;
    size_t len = 0;
    int rc = tok_decode(m->tok, ids, n, true, &text, &len);
    free(ids);
    if (rc < 0) return bad(a, "the tokens cannot be decoded");
    sb_str(&a->body, "{\"content\":");
    sb_json_str(&a->body, text, len); /* a cut multi-byte character becomes U+FFFD */
    sb_str(&a->body, "}");
    free(text);
}

static void apply_template(const srv_model *m, const cJSON *j, x_answer *a) {
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(j, "messages");
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(j, "tools");
    if (!cJSON_IsArray(messages)) return bad(a, "'messages' must be an array of {role, content}");
    if (cJSON_IsNull(tools)) tools = NULL;
    if (tools && !cJSON_IsArray(tools)) return bad(a, "'tools' must be an array");
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(j, "chat_template_kwargs");
    if (cJSON_IsNull(kw)) kw = NULL;
    if (kw && !cJSON_IsObject(kw)) return bad(a, "'chat_template_kwargs' must be an object");
    bool add = true;
    if (opt_bool(a, j, "add_generation_prompt", &add)) return;
    char *prompt = NULL;
    llc_err err = {{0}};
    int rc = chat_apply_json_vars(m->tmpl, messages, tools, add, kw, &prompt, &err);
    if (rc == LLC_ERR_NOMEM) return x_fail(a, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", err.msg);
    if (rc == LLC_ERR_UNSUPPORTED) return x_fail(a, MHD_HTTP_NOT_IMPLEMENTED, "not_supported_error", err.msg);
    if (rc) return bad(a, err.msg);
    sb_str(&a->body, "{\"prompt\":");
    sb_json_str(&a->body, prompt, strlen(prompt));
    sb_str(&a->body, "}");
    free(prompt);
}

static void *x_prepare(const srv_model *m, int which, const char *body, size_t len) {
    x_answer *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->status = MHD_HTTP_OK;
    cJSON *j = parse_body(a, body, len);
    if (j && which == X_TOKENIZE) tokenize(m, j, a);
    else if (j && which == X_DETOKENIZE) detokenize(m, j, a);
    else if (j) apply_template(m, j, a);
    cJSON_Delete(j);
    return a;
}

static void x_discard(void *ready) {
    x_answer *a = ready;
    sb_free(&a->body);
    free(a);
}

static enum MHD_Result x_start(srv *s, struct MHD_Connection *mc, void *ready, http_pending *pending) {
    x_answer *a = ready;
    if (!a) return MHD_NO;
    enum MHD_Result ret = a->type       ? srv_http_error(mc, a->status, a->type, a->msg)
                          : a->body.oom ? MHD_NO
                                        : srv_http_json(mc, MHD_HTTP_OK, a->body.p, a->body.len);
    x_discard(a);
    return ret;
}

static const http_prep x_prep = {x_prepare, x_start, x_discard};
static const char *const x_paths[] = {"/tokenize", "/detokenize", "/apply-template"};

const http_prep *srv_http_extra_prep(const char *url, const char *method, int *which) {
    if (strcmp(method, "POST")) return NULL;
    for (int i = 0; i < 3; i++)
        if (!strcmp(url, x_paths[i])) {
            *which = i;
            return &x_prep;
        }
    return NULL;
}

/* ---- /props, /slots ---- */

static const char *token_text(const tokenizer *tok, int32_t id) {
    const char *t = id >= 0 ? tok_text(tok, id) : NULL;
    return t ? t : "";
}

/* A float as its shortest decimal (0.8, not 0.800000011920929). */
static double dec(float v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.7g", (double)v);
    return strtod(buf, NULL);
}

/* Sampling and length parameters in llama-server's "params" shape. */
static cJSON *params_json(const srv *s, const sampler_params *sp, int n_predict, int n) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddNumberToObject(p, "n_predict", n_predict);
    cJSON_AddNumberToObject(p, "n", n);
    char seed[24]; /* every digit (cJSON would print a large one to 15 significant digits) */
    if (sp->seed == SAMPLER_SEED_RANDOM) snprintf(seed, sizeof seed, "-1");
    else snprintf(seed, sizeof seed, "%" PRIu64, (uint64_t)sp->seed);
    cJSON_AddRawToObject(p, "seed", seed);
    cJSON_AddNumberToObject(p, "temperature", dec(sp->temperature));
    cJSON_AddNumberToObject(p, "top_k", sp->top_k);
    cJSON_AddNumberToObject(p, "top_p", dec(sp->top_p));
    cJSON_AddNumberToObject(p, "min_p", dec(sp->min_p));
    cJSON_AddNumberToObject(p, "repeat_last_n", sp->repeat_last_n);
    cJSON_AddNumberToObject(p, "repeat_penalty", dec(sp->repeat_penalty));
    cJSON_AddNumberToObject(p, "presence_penalty", dec(sp->presence_penalty));
    cJSON_AddNumberToObject(p, "frequency_penalty", dec(sp->frequency_penalty));
    cJSON_AddNumberToObject(p, "n_probs", sp->n_logprobs);
    cJSON *stop = cJSON_AddArrayToObject(p, "stop");
    for (const char *const *st = chat_stop_strings(s->m.tmpl); *st; st++)
        cJSON_AddItemToArray(stop, cJSON_CreateString(*st));
    return p;
}

static enum MHD_Result props(srv *s, struct MHD_Connection *mc) {
    engine_metrics em;
    engine_get_metrics(s->e, &em);
    cJSON *o = cJSON_CreateObject(), *d = cJSON_AddObjectToObject(o, "default_generation_settings");
    cJSON_AddNumberToObject(d, "id", 0);
    cJSON_AddNumberToObject(d, "id_task", -1);
    cJSON_AddNumberToObject(d, "n_ctx", s->m.n_ctx);
    cJSON_AddBoolToObject(d, "is_processing", false);
    sampler_params sp = sampler_params_default();
    sp.seed = SAMPLER_SEED_RANDOM; /* HTTP requests without a seed */
    cJSON_AddItemToObject(d, "params", params_json(s, &sp, -1, 1));
    cJSON_AddNumberToObject(o, "total_slots", em.max_running);
    cJSON_AddStringToObject(o, "model_path", s->model_path ? s->model_path : "");
    cJSON_AddStringToObject(o, "model_alias", s->m.name);
    cJSON_AddStringToObject(o, "chat_template", s->chat_src ? s->chat_src : "");
    cJSON_AddStringToObject(o, "chat_template_name", chat_tmpl_name(s->m.tmpl));
    cJSON_AddStringToObject(o, "bos_token", token_text(s->m.tok, tok_bos(s->m.tok)));
    cJSON_AddStringToObject(o, "eos_token", token_text(s->m.tok, tok_eos(s->m.tok)));
    cJSON *mod = cJSON_AddObjectToObject(o, "modalities");
    cJSON_AddBoolToObject(mod, "vision", false);
    cJSON_AddBoolToObject(mod, "audio", false);
    cJSON_AddBoolToObject(o, "fim", s->m.has_fim);
    cJSON_AddStringToObject(o, "build_info", "llmchat");
    return srv_http_send_json(mc, o);
}

static enum MHD_Result slots(srv *s, struct MHD_Connection *mc) {
    engine_slot *sl = NULL;
    int n = engine_get_slots(s->e, &sl);
    if (n < 0) return srv_http_error(mc, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", "out of memory");
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        const engine_slot *e = &sl[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", i);
        cJSON_AddNumberToObject(o, "id_task", (double)e->request_id);
        cJSON_AddNumberToObject(o, "index", e->index);
        cJSON_AddNumberToObject(o, "n_ctx", s->m.n_ctx);
        cJSON_AddBoolToObject(o, "is_processing", e->running);
        cJSON_AddNumberToObject(o, "n_prompt_tokens", e->n_prompt);
        cJSON_AddNumberToObject(o, "n_prompt_tokens_cached", e->n_cached);
        cJSON_AddNumberToObject(o, "priority", e->priority);
        cJSON_AddNumberToObject(o, "beam_width", e->beam_width);
        cJSON_AddItemToObject(o, "params", params_json(s, &e->sampling, e->max_tokens, e->n));
        cJSON *nt = cJSON_AddObjectToObject(o, "next_token");
        cJSON_AddBoolToObject(nt, "has_next_token", e->n_decoded < e->max_tokens);
        cJSON_AddNumberToObject(nt, "n_remain", e->max_tokens - e->n_decoded);
        cJSON_AddNumberToObject(nt, "n_decoded", e->n_decoded);
        cJSON_AddItemToArray(a, o);
    }
    free(sl);
    return srv_http_send_json(mc, a);
}

/* ---- /metrics ---- */

static void metric(sbuf *b, const char *name, const char *type, const char *help, double v) {
    sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

static void histogram(sbuf *b, const char *name, const char *help, const int64_t *buckets, int64_t count,
                      double sum_ms) {
    sb_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    int64_t cum = 0;
    for (int i = 0; i < ENGINE_LAT_BUCKETS; i++) {
        cum += buckets[i];
        if (isinf(engine_latency_bounds_ms[i])) sb_printf(b, "%s_bucket{le=\"+Inf\"} %lld\n", name, (long long)cum);
        else sb_printf(b, "%s_bucket{le=\"%g\"} %lld\n", name, engine_latency_bounds_ms[i] / 1e3, (long long)cum);
    }
    sb_printf(b, "%s_sum %.17g\n%s_count %lld\n", name, sum_ms / 1e3, name, (long long)count);
}

static enum MHD_Result metrics(srv *s, struct MHD_Connection *mc) {
    engine_metrics m;
    engine_get_metrics(s->e, &m);
    sbuf b = {0};
    metric(&b, "llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed (not found in the cache).",
           (double)(m.prompt_tokens - m.cached_tokens));
    metric(&b, "llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.",
           (double)m.generated_tokens);
    metric(&b, "llamacpp:n_decode_total", "counter", "Total number of engine steps (forward passes).", (double)m.steps);
    metric(&b, "llamacpp:requests_processing", "gauge", "Number of sequences processing.", m.running);
    metric(&b, "llamacpp:requests_deferred", "gauge", "Number of sequences waiting (queued or preempted).", m.waiting);
    metric(&b, "llamacpp:kv_cache_usage_ratio", "gauge", "KV-cache usage: blocks in use / all blocks.",
           m.kv_total > 0 ? (double)m.kv_used / m.kv_total : 0);
    metric(&b, "llamacpp:kv_cache_tokens", "gauge", "KV-cache tokens: the token slots of the blocks in use.",
           (double)m.kv_used * m.block_size);
    metric(&b, "llmchat:prompt_tokens_cached_total", "counter", "Prompt tokens found in the prefix cache.",
           (double)m.cached_tokens);
    metric(&b, "llmchat:preemptions_total", "counter", "Sequences preempted for want of KV blocks.",
           (double)m.preemptions);
    metric(&b, "llmchat:kv_cache_blocks_cached", "gauge", "Free KV blocks still holding a reusable prefix.",
           m.kv_cached);
    histogram(&b, "llmchat:time_to_first_token_seconds", "Time from a request's arrival to its first token.",
              m.ttft_buckets, m.ttft_count, m.ttft_sum_ms);
    histogram(&b, "llmchat:time_per_output_token_seconds", "Mean time between tokens, per finished sample.",
              m.tpot_buckets, m.tpot_count, m.tpot_sum_ms);
    if (b.oom) {
        sb_free(&b);
        return MHD_NO;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(b.len, b.p, MHD_RESPMEM_MUST_COPY);
    sb_free(&b);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    enum MHD_Result ret = srv_http_queue(mc, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- models ---- */

cJSON *srv_http_model_object(const srv *s) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", s->m.name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "llmchat");
    cJSON *meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddNumberToObject(meta, "n_ctx_train", s->m.n_ctx);
    cJSON_AddNumberToObject(meta, "n_vocab", s->m.n_vocab);
    cJSON_AddStringToObject(meta, "chat_template", chat_tmpl_name(s->m.tmpl));
    cJSON_AddBoolToObject(meta, "fim", s->m.has_fim);
    return m;
}

/* GET /v1/models/{id}: the model, or OpenAI's 404 for another id. */
static enum MHD_Result model_by_id(srv *s, struct MHD_Connection *mc, const char *id) {
    if (!strcmp(id, s->m.name)) return srv_http_send_json(mc, srv_http_model_object(s));
    sbuf b = {0};
    sb_str(&b, "{\"error\":{\"message\":");
    char msg[300];
    snprintf(msg, sizeof msg, "The model '%.200s' does not exist", id);
    sb_json_str(&b, msg, strlen(msg));
    sb_str(&b, ",\"type\":\"invalid_request_error\",\"param\":\"model\",\"code\":\"model_not_found\"}}");
    enum MHD_Result ret = b.oom ? MHD_NO : srv_http_json(mc, MHD_HTTP_NOT_FOUND, b.p, b.len);
    sb_free(&b);
    return ret;
}

/* ---- routing ---- */

bool srv_http_extra(srv *s, struct MHD_Connection *mc, const char *url, const char *method, enum MHD_Result *ret) {
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    for (int i = 0; i < 3; i++)
        if (!strcmp(url, x_paths[i])) { /* (a POST went to srv_http_extra_prep) */
            *ret = srv_http_error(mc, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", "use POST");
            return true;
        }
    const char *id = !strncmp(url, "/v1/models/", 11) ? url + 11 : !strncmp(url, "/models/", 8) ? url + 8 : NULL;
    bool is_props = !strcmp(url, "/props"), is_metrics = !strcmp(url, "/metrics"), is_slots = !strcmp(url, "/slots");
    if (!id && !is_props && !is_metrics && !is_slots) return false;
    if (!get) {
        *ret = srv_http_error(mc, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", "use GET");
        return true;
    }
    if ((is_metrics && s->cfg.no_metrics) || (is_slots && s->cfg.no_slots)) {
        *ret = srv_http_error(mc, MHD_HTTP_NOT_IMPLEMENTED, "not_supported_error",
                              is_metrics ? "GET /metrics is off (the server was started with --no-metrics)"
                                         : "GET /slots is off (the server was started with --no-slots)");
        return true;
    }
    *ret = id ? model_by_id(s, mc, id) : is_props ? props(s, mc) : is_metrics ? metrics(s, mc) : slots(s, mc);
    return true;
}
