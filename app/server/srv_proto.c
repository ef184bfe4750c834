/* srv_proto.c — the llmchat protocol (newline-delimited JSON, docs/PROTOCOL.md):
 * parsing a request line, the API key on TCP, the methods chat / complete /
 * infill / cancel / models / status / auth (sessions.* are in srv_sessions.c),
 * and turning engine events into `token`, `done` and `error` events (a request
 * a session made also tells the session, through its hooks). The requests in
 * flight are srv_reqs.c's. A generation request is read (rendered, tokenized,
 * its grammar compiled) on a worker thread (srv_work.c) and submitted when
 * read; everything else runs on the server thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/server/srv_internal.h"

typedef enum { GEN_CHAT, GEN_COMPLETE, GEN_INFILL } gen_kind;

/* A chat / complete / infill request being read on a worker (srv_work.c):
 * its template rendered, its prompt tokenized, its grammar compiled. It is
 * submitted on the server thread when done, unless its connection went away
 * (then c is NULL and it is dropped). */
struct proto_prep {
    proto_prep *next;   /* c->preps */
    conn *c;            /* NULL once the connection is gone */
    const srv_model *m;
    cJSON *j;           /* the request line (freed by the worker) */
    char *id_json;
    gen_kind kind;
    bool cancelled;     /* a `cancel` came while it was read */
    srv_gen g;
    int rc;
    llc_err err;
};

/* ---- engine events ---- */

static void lp_entry(sbuf *b, const srv_req *r, const sample_result *res) {
    if (b->len) sb_add(b, ",", 1);
    sb_printf(b, "{\"id\":%d,\"logprob\":", res->token);
    sb_json_num(b, res->logprob);
    if (r->n_logprobs > 0) {
        sb_str(b, ",\"top\":[");
        for (int k = 0; k < res->n_top && k < r->n_logprobs; k++) {
            sb_printf(b, "%s{\"id\":%d,\"logprob\":", k ? "," : "", res->top[k].id);
            sb_json_num(b, res->top[k].logprob);
            sb_add(b, "}", 1);
        }
        sb_add(b, "]", 1);
    }
    sb_add(b, "}", 1);
}

/* Sends the token event of sample idx: text, a thinking model's reasoning
 * apart from it (reasoning_content, when there is some), plus every id since
 * the last one. */
static void send_token(srv *s, conn *c, srv_req *r, int idx, const char *text, size_t len, const char *rtext,
                       size_t rlen) {
    struct srv_pending *p = &r->pend[idx];
    sbuf b = {0};
    sb_printf(&b, "{\"id\":%s,\"event\":\"token\",\"index\":%d,\"text\":", r->id_json, idx);
    sb_json_str(&b, text, len);
    if (rlen) {
        sb_str(&b, ",\"reasoning_content\":");
        sb_json_str(&b, rtext, rlen);
    }
    sb_str(&b, ",\"ids\":[");
    for (int i = 0; i < p->n; i++) sb_printf(&b, "%s%d", i ? "," : "", p->ids[i]);
    sb_add(&b, "]", 1);
    if (r->logprobs) {
        sb_str(&b, ",\"logprobs\":[");
        if (p->lp.len) sb_add(&b, p->lp.p, p->lp.len);
        sb_add(&b, "]", 1);
    }
    sb_add(&b, "}", 1);
    srv_conn_send(s, c, &b);
    p->n = 0;
    p->lp.len = 0;
}

/* A decided piece of sample idx's answer (text, reasoning: either may be
 * empty) to the client, the tool-call reader and the request's owner. */
static void emit_piece(srv *s, conn *c, srv_req *r, int idx, const char *text, size_t len, const char *rtext,
                       size_t rlen) {
    struct srv_pending *p = &r->pend[idx];
    if (!len && !rlen) return; /* (held markup: its ids go with the next event) */
    if (p->tc && len) toolcall_feed(p->tc, text, len);
    send_token(s, c, r, idx, text ? text : "", len, rtext, rlen);
    if (r->hooks && len) r->hooks->token(s, r, idx, text, len);
    if (r->hooks && rlen && r->hooks->reasoning) r->hooks->reasoning(s, r, idx, rtext, rlen);
}

/* Runs sample idx's reasoning parser over a piece (NULL: the end) and emits
 * what it decided. */
static void emit_split(srv *s, conn *c, srv_req *r, int idx, const char *text, size_t len) {
    struct srv_pending *p = &r->pend[idx];
    p->rtext.len = p->ctext.len = 0;
    if (text) reasoning_feed(p->rp, text, len);
    else reasoning_finish(p->rp);
    emit_piece(s, c, r, idx, p->ctext.p, p->ctext.len, p->rtext.p, p->rtext.len);
}

static void on_token(srv *s, conn *c, srv_req *r, const engine_event *ev) {
    int idx = ev->seq_index;
    if (idx < 0 || idx >= r->n) return;
    struct srv_pending *p = &r->pend[idx];
    p->seen = true;
    if (r->warm_only) return;
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 8;
        int32_t *q = realloc(p->ids, (size_t)cap * sizeof *q);
        if (!q) return;
        p->ids = q;
        p->cap = cap;
    }
    p->ids[p->n++] = ev->token;
    if (r->logprobs) lp_entry(&p->lp, r, &ev->lp);
    if (ev->text_len > 0 && p->rp) emit_split(s, c, r, idx, ev->text, ev->text_len);
    else if (ev->text_len > 0) emit_piece(s, c, r, idx, ev->text, ev->text_len, NULL, 0);
}

static void send_done(srv *s, conn *c, srv_req *r, const engine_event *ev) {
    int idx = ev->seq_index;
    r->pend[idx].seen = true;
    if (r->pend[idx].rp && !r->warm_only) emit_split(s, c, r, idx, NULL, 0); /* held text */
    if (r->pend[idx].n > 0 && !r->warm_only) send_token(s, c, r, idx, "", 0, NULL, 0);
    if (r->hooks) r->hooks->done(r, idx, ev);
    sbuf b = {0};
    toolcall_parser *tc = r->pend[idx].tc;
    if (tc) toolcall_finish(tc);
    int n_calls = tc ? toolcall_count(tc) : 0;
    sb_printf(&b, "{\"id\":%s,\"event\":\"done\",\"index\":%d,\"finish_reason\":\"%s\"", r->id_json, idx,
              n_calls && ev->finish == FINISH_STOP ? "tool_calls" : srv_finish_name(ev->finish));
    if (n_calls) { /* the text outside the calls, and the calls */
        size_t len;
        const char *text = toolcall_content(tc, &len);
        sb_str(&b, ",\"content\":");
        sb_json_str(&b, text, len);
        sb_str(&b, ",\"tool_calls\":[");
        for (int k = 0; k < n_calls; k++) {
            const char *name = toolcall_name(tc, k), *args = toolcall_arguments(tc, k);
            sb_printf(&b, "%s{\"id\":\"call_%lld_%d_%d\",\"type\":\"function\",\"function\":{\"name\":", k ? "," : "",
                      (long long)r->eid, idx, k);
            sb_json_str(&b, name, strlen(name));
            sb_str(&b, ",\"arguments\":");
            sb_json_str(&b, args, strlen(args));
            sb_str(&b, "}}");
        }
        sb_add(&b, "]", 1);
    }
    sb_printf(&b, ",\"usage\":{\"prompt_tokens\":%d,\"cached_tokens\":%d,\"completion_tokens\":%d",
              ev->prompt_tokens, ev->cached_tokens, ev->completion_tokens);
    if (r->pend[idx].rp) sb_printf(&b, ",\"reasoning_tokens\":%d", reasoning_pieces(r->pend[idx].rp));
    sb_add(&b, "}", 1);
    sb_str(&b, ",\"timings\":{\"queue_ms\":");
    sb_json_num(&b, ev->queue_ms);
    sb_str(&b, ",\"ttft_ms\":");
    sb_json_num(&b, ev->ttft_ms);
    sb_str(&b, ",\"tpot_ms\":");
    sb_json_num(&b, ev->tpot_ms);
    sb_add(&b, "}", 1);
    if (ev->finish == FINISH_ERROR && r->err_msg[0]) {
        sb_str(&b, ",\"error\":");
        sb_json_str(&b, r->err_msg, strlen(r->err_msg));
    }
    if (ev->drafted_tokens > 0)
        sb_printf(&b, ",\"speculative\":{\"drafted_tokens\":%d,\"accepted_tokens\":%d}",
                  ev->drafted_tokens, ev->accepted_tokens);
    if (r->n_dropped > 0) sb_printf(&b, ",\"dropped_turns\":%d", r->n_dropped);
    if (r->cv) {
        int alt = r->alt_base + idx;
        sb_printf(&b, ",\"session\":%lld,\"message_id\":%lld", (long long)r->session_id,
                  (long long)(alt < r->cv->n_alts ? r->cv->alts[alt]->id : 0));
    }
    if (r->prompt_ids) {
        sb_str(&b, ",\"prompt_ids\":[");
        for (int i = 0; i < r->n_prompt_ids; i++) sb_printf(&b, "%s%d", i ? "," : "", r->prompt_ids[i]);
        sb_add(&b, "]", 1);
    }
    sb_add(&b, "}", 1);
    srv_conn_send(s, c, &b);
    r->n_done++;
}

static void on_done(srv *s, conn *c, srv_req *r, const engine_event *ev) {
    if (ev->seq_index < 0 || ev->seq_index >= r->n) return;
    send_done(s, c, r, ev); /* the engine ends every sample with one, forked or not */
    if (r->n_done >= r->n) {
        srv_req_unlink(c, r);
        if (r->hooks) r->hooks->release(s, r);
        srv_req_free(r);
    }
}

void srv_proto_events(srv *s, conn *c) {
    if (!c->ec) return;
    engine_event *ev;
    while (!c->dead && (ev = engine_client_next(c->ec))) {
        srv_req *r = srv_req_find(c, ev->request_id);
        if (r) {
            if (ev->kind == EV_TOKEN) on_token(s, c, r, ev);
            else if (ev->kind == EV_DONE) on_done(s, c, r, ev);
            else snprintf(r->err_msg, sizeof r->err_msg, "%s", ev->message);
        }
        engine_event_free(ev);
    }
}

void srv_proto_cancel_all(srv *s, conn *c) {
    for (srv_req *r = c->reqs; r; r = r->next) engine_cancel(s->e, r->eid);
    for (proto_prep *p = c->preps; p; p = p->next) p->cancelled = true;
}

void srv_proto_conn_gone(srv *s, conn *c) {
    for (proto_prep *p = c->preps; p; p = p->next) p->c = NULL; /* dropped when read */
    c->preps = NULL;
    c->n_preps = 0;
    engine_client_free(c->ec); /* cancels what still runs; its blocks are freed */
    c->ec = NULL;
    while (c->reqs) {
        srv_req *r = c->reqs;
        c->reqs = r->next;
        if (r->hooks) r->hooks->release(s, r);
        srv_req_free(r);
    }
}

/* ---- methods ---- */

static const cJSON *field(const cJSON *j, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, name);
    return cJSON_IsNull(f) ? NULL : f;
}

/* A string field that may be absent (*out = def); an error when of another type. */
static int str_field(const cJSON *j, const char *name, const char *def, const char **out, llc_err *err) {
    const cJSON *f = field(j, name);
    *out = def;
    if (!f) return 0;
    if (!cJSON_IsString(f)) return llc_fail(err, LLC_ERR_TYPE, "'%s' must be a string", name);
    *out = f->valuestring;
    return 0;
}

/* On a worker: the request into p->g (touches only p and the read-only model). */
static void prep_read(void *ctx) {
    proto_prep *p = ctx;
    const cJSON *j = p->j;
    const srv_model *m = p->m;
    llc_err *err = &p->err;
    int rc = srv_gen_params(m, SRV_NDJSON, j, &p->g, err);
    if (!rc && p->kind == GEN_CHAT) {
        const cJSON *msgs = field(j, "messages");
        if (!msgs) rc = llc_fail(err, LLC_ERR_TYPE, "'messages' (or 'session') is required");
        if (!rc) rc = srv_gen_tools(j, &p->g, err);
        if (!rc) rc = srv_gen_template_vars(j, &p->g, err);
        if (!rc) rc = srv_gen_chat(m, msgs, &p->g, err);
        if (!rc) rc = srv_gen_reasoning(m, j, &p->g, err); /* a thinking model's: reasoning_content */
    } else if (!rc && p->kind == GEN_COMPLETE) {
        const cJSON *prompt = field(j, "prompt");
        rc = prompt ? srv_gen_text(m, prompt, &p->g, err) : llc_fail(err, LLC_ERR_TYPE, "'prompt' is required");
    } else if (!rc) {
        const char *prefix, *suffix, *middle;
        const cJSON *extra = field(j, "extra");
        if (!(rc = str_field(j, "prefix", "", &prefix, err)) &&
            !(rc = str_field(j, "suffix", "", &suffix, err)) &&
            !(rc = str_field(j, "prompt", "", &middle, err)))
            rc = srv_gen_infill(m, prefix, suffix, extra, middle, &p->g, err);
    }
    p->rc = rc;
    cJSON_Delete(p->j);
    p->j = NULL;
}

static void prep_free(proto_prep *p) {
    cJSON_Delete(p->j);
    srv_gen_free(&p->g);
    free(p->id_json);
    free(p);
}

/* On the server thread: the read request submitted (or refused). */
static void prep_submit(srv *s, void *ctx) {
    proto_prep *p = ctx;
    conn *c = p->c;
    if (c) {
        for (proto_prep **pp = &c->preps; *pp; pp = &(*pp)->next)
            if (*pp == p) {
                *pp = p->next;
                c->n_preps--;
                break;
            }
        if (p->rc) {
            srv_send_error(s, c, p->id_json, srv_code_of(p->rc), p->err.msg);
        } else {
            srv_req *r = srv_req_submit(s, c, p->id_json, &p->g, &p->err);
            if (r && p->cancelled) engine_cancel(s->e, r->eid); /* its done event says so */
        }
    }
    prep_free(p);
}

/* Takes *jp (the request line, len bytes) to be read on a worker, or at once
 * when it is small (SRV_INLINE_BODY). */
static void do_generate(srv *s, conn *c, cJSON **jp, size_t len, const char *id_json, gen_kind kind) {
    if (srv_req_full(s, c, id_json)) return;
    proto_prep *p = calloc(1, sizeof *p);
    if (p) {
        *p = (proto_prep){.c = c, .m = &s->m, .j = *jp, .kind = kind, .id_json = strdup(id_json)};
        srv_gen_init(&p->g);
    }
    if (p && p->id_json && len <= SRV_INLINE_BODY) {
        *jp = NULL;
        prep_read(p);
        prep_submit(s, p); /* (not on the connection's list) */
        return;
    }
    if (!p || !p->id_json || !srv_work_submit(s->work, prep_read, prep_submit, p)) {
        if (p) p->j = NULL; /* (still the caller's) */
        if (p) prep_free(p);
        srv_send_error(s, c, id_json, "internal", "out of memory");
        return;
    }
    *jp = NULL;
    p->next = c->preps;
    c->preps = p;
    c->n_preps++;
}

static void do_cancel(srv *s, conn *c, const cJSON *j, const char *id_json) {
    const cJSON *t = field(j, "request");
    if (!t || !(cJSON_IsNumber(t) || cJSON_IsString(t))) {
        srv_send_error(s, c, id_json, "bad_request", "'request' (the id of the request to cancel) is required");
        return;
    }
    char *tj = cJSON_PrintUnformatted(t);
    srv_req *r = c->reqs;
    while (tj && r && strcmp(r->id_json, tj)) r = r->next;
    proto_prep *p = c->preps;
    while (tj && !r && p && strcmp(p->id_json, tj)) p = p->next;
    free(tj);
    if (!r && !p) {
        srv_send_error(s, c, id_json, "not_found", "no request with that id is running on this connection");
        return;
    }
    if (r) engine_cancel(s->e, r->eid);
    else p->cancelled = true; /* still being read: cancelled once submitted */
    cJSON *res = cJSON_CreateObject();
    cJSON_AddBoolToObject(res, "cancelled", true);
    srv_send_result(s, c, id_json, res);
}

static void do_models(srv *s, conn *c, const char *id_json) {
    cJSON *res = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(res, "models"),
          *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "name", s->m.name);
    cJSON_AddNumberToObject(m, "n_ctx", s->m.n_ctx);
    cJSON_AddNumberToObject(m, "n_vocab", s->m.n_vocab);
    cJSON_AddStringToObject(m, "template", chat_tmpl_name(s->m.tmpl));
    cJSON_AddBoolToObject(m, "fim", s->m.has_fim);
    cJSON_AddItemToArray(arr, m);
    srv_send_result(s, c, id_json, res);
}

static void add_pct(cJSON *o, const char *name, double p50, double p90, double p99) {
    cJSON *p = cJSON_AddObjectToObject(o, name);
    cJSON_AddNumberToObject(p, "p50", p50);
    cJSON_AddNumberToObject(p, "p90", p90);
    cJSON_AddNumberToObject(p, "p99", p99);
}

static void do_status(srv *s, conn *c, const char *id_json) {
    engine_metrics m;
    engine_get_metrics(s->e, &m);
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "running", m.running);
    cJSON_AddNumberToObject(r, "waiting", m.waiting);
    cJSON_AddNumberToObject(r, "kv_used", m.kv_used);
    cJSON_AddNumberToObject(r, "kv_cached", m.kv_cached);
    cJSON_AddNumberToObject(r, "kv_free", m.kv_free);
    cJSON_AddNumberToObject(r, "kv_total", m.kv_total);
    cJSON_AddNumberToObject(r, "kv_peak_used", m.peak_kv_used);
    cJSON_AddNumberToObject(r, "tokens_per_s", m.gen_tokens_per_s);
    add_pct(r, "ttft_ms", m.ttft_ms_p50, m.ttft_ms_p90, m.ttft_ms_p99);
    add_pct(r, "tpot_ms", m.tpot_ms_p50, m.tpot_ms_p90, m.tpot_ms_p99);
    cJSON_AddNumberToObject(r, "prompt_tokens", (double)m.prompt_tokens);
    cJSON_AddNumberToObject(r, "cached_tokens", (double)m.cached_tokens);
    cJSON_AddNumberToObject(r, "prompt_cache_hit_rate",
                            m.prompt_tokens > 0 ? (double)m.cached_tokens / (double)m.prompt_tokens : 0);
    cJSON_AddNumberToObject(r, "computed_tokens", (double)m.computed_tokens);
    cJSON_AddNumberToObject(r, "generated_tokens", (double)m.generated_tokens);
    cJSON_AddNumberToObject(r, "steps", (double)m.steps);
    cJSON_AddNumberToObject(r, "preemptions", (double)m.preemptions);
    if (m.spec_verifies > 0) { /* speculative decoding */
        cJSON *sp = cJSON_AddObjectToObject(r, "speculative");
        cJSON_AddNumberToObject(sp, "drafted_tokens", (double)m.spec_drafted);
        cJSON_AddNumberToObject(sp, "accepted_tokens", (double)m.spec_accepted);
        cJSON_AddNumberToObject(sp, "acceptance_rate", m.spec_drafted ? (double)m.spec_accepted / (double)m.spec_drafted : 0);
        cJSON_AddNumberToObject(sp, "tokens_per_verify",
                                (double)(m.spec_accepted + m.spec_verifies) / (double)m.spec_verifies);
        cJSON_AddNumberToObject(sp, "draft_time_share", m.step_ms > 0 ? m.draft_ms / m.step_ms : 0);
    }
    int n_clients = 0;
    for (int i = 0; i < s->n_conns; i++) n_clients += s->conns[i]->kind == CONN_NDJSON && !s->conns[i]->dead;
    cJSON_AddNumberToObject(r, "clients", n_clients);
    cJSON_AddNumberToObject(r, "http_requests", s->http_active);
    cJSON_AddStringToObject(r, "database", s->db ? db_path(s->db) : "");
    if (!s->db) cJSON_AddStringToObject(r, "database_error", s->db_error);
    srv_send_result(s, c, id_json, r);
}

static bool has_request_id(const conn *c, const char *id_json) {
    for (const srv_req *r = c->reqs; r; r = r->next)
        if (!strcmp(r->id_json, id_json)) return true;
    for (const proto_prep *p = c->preps; p; p = p->next)
        if (!strcmp(p->id_json, id_json)) return true;
    return false;
}

void srv_proto_line(srv *s, conn *c, const char *line, size_t len) {
    if (!srv_utf8_valid(line, len)) { /* it would reach the prompt and the database */
        srv_send_error(s, c, "null", "bad_json", "the line is not valid UTF-8");
        return;
    }
    if (srv_json_has_nul(line, len)) {
        srv_send_error(s, c, "null", "bad_json", NUL_REFUSED);
        return;
    }
    cJSON *j = cJSON_ParseWithLength(line, len);
    if (!j) {
        srv_send_error(s, c, "null", "bad_json", "the line is not valid JSON");
        return;
    }
    char *id_json = NULL;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(j, "method");
    if (!cJSON_IsObject(j)) {
        srv_send_error(s, c, "null", "bad_request", "a request must be a JSON object");
        goto out;
    }
    if (!id || !(cJSON_IsNumber(id) || cJSON_IsString(id)) || !(id_json = cJSON_PrintUnformatted(id)) ||
        strlen(id_json) > 256) {
        srv_send_error(s, c, "null", "bad_request", "'id' (a number or a string of at most 254 bytes) is required");
        goto out;
    }
    if (!cJSON_IsString(method)) {
        srv_send_error(s, c, id_json, "bad_request", "'method' (a string) is required");
        goto out;
    }
    const char *m = method->valuestring;
    if (!c->authed) { /* TCP with an API key: an `auth` request first, or the key in each request */
        const cJSON *key = cJSON_GetObjectItemCaseSensitive(j, "api_key");
        bool ok = cJSON_IsString(key) && srv_secret_eq(key->valuestring, s->api_key);
        if (ok && !strcmp(m, "auth")) c->authed = true;
        if (!ok) {
            srv_send_error(s, c, id_json, "unauthorized", "this connection needs the API key: "
                                                          "send {\"method\":\"auth\",\"api_key\":...} first");
            goto out;
        }
    }
    if (has_request_id(c, id_json)) {
        srv_send_error(s, c, id_json, "duplicate_id", "a request with this id is still running on this connection");
        goto out;
    }
    if (!strcmp(m, "chat")) {
        if (field(j, "session")) srv_session_chat(s, c, j, id_json);
        else do_generate(s, c, &j, len, id_json, GEN_CHAT);
    } else if (!strcmp(m, "complete")) {
        do_generate(s, c, &j, len, id_json, GEN_COMPLETE);
    } else if (!strcmp(m, "infill")) {
        do_generate(s, c, &j, len, id_json, GEN_INFILL);
    } else if (!strcmp(m, "cancel")) {
        do_cancel(s, c, j, id_json);
    } else if (!strcmp(m, "models")) {
        do_models(s, c, id_json);
    } else if (!strcmp(m, "status")) {
        do_status(s, c, id_json);
    } else if (!strcmp(m, "auth")) {
        const cJSON *key = cJSON_GetObjectItemCaseSensitive(j, "api_key");
        if (c->tcp && s->api_key && !(cJSON_IsString(key) && srv_secret_eq(key->valuestring, s->api_key))) {
            srv_send_error(s, c, id_json, "unauthorized", "wrong API key");
        } else {
            c->authed = true;
            cJSON *res = cJSON_CreateObject();
            cJSON_AddBoolToObject(res, "ok", true);
            srv_send_result(s, c, id_json, res);
        }
    } else if (!strncmp(m, "sessions.", 9)) {
        srv_sessions_method(s, c, m, j, id_json);
    } else {
        char msg[128];
        snprintf(msg, sizeof msg, "unknown method '%.60s'", m);
        srv_send_error(s, c, id_json, "unknown_method", msg);
    }
out:
    free(id_json);
    cJSON_Delete(j);
}
