/* srv_sessions.c — stored sessions over the llmchat protocol: sessions.list /
 * get / create / delete, and chat with a session (`chat` with "session",
 * `sessions.send`): the user message joins the session's active path, the
 * prompt is built from the system prompt and that path exactly as the chat UI
 * builds it (ui/conv + engine/prompt), and the answer is stored as it streams.
 * Uses the server's own database connection; server thread only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/server/srv_internal.h"

/* ---- sessions busy answering here ---- */

bool srv_session_busy(const srv *s, int64_t id) {
    for (int i = 0; i < s->n_busy; i++)
        if (s->busy_sessions[i] == id) return true;
    return false;
}

static bool busy_add(srv *s, int64_t id) {
    if (s->n_busy == s->cap_busy) {
        int cap = s->cap_busy ? 2 * s->cap_busy : 8;
        int64_t *p = realloc(s->busy_sessions, (size_t)cap * sizeof *p);
        if (!p) return false;
        s->busy_sessions = p;
        s->cap_busy = cap;
    }
    s->busy_sessions[s->n_busy++] = id;
    return true;
}

static void busy_remove(srv *s, int64_t id) {
    for (int i = 0; i < s->n_busy; i++)
        if (s->busy_sessions[i] == id) {
            s->busy_sessions[i] = s->busy_sessions[--s->n_busy];
            return;
        }
}

/* ---- JSON of sessions and messages ---- */

static cJSON *session_json(const db_session *ss) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)ss->id);
    cJSON_AddStringToObject(o, "title", ss->title);
    cJSON_AddStringToObject(o, "system_prompt", ss->system_prompt);
    cJSON_AddStringToObject(o, "model", ss->model);
    cJSON *params = ss->params_json && *ss->params_json ? cJSON_Parse(ss->params_json) : NULL;
    cJSON_AddItemToObject(o, "params", params ? params : cJSON_CreateNull());
    cJSON_AddNumberToObject(o, "created", (double)ss->created);
    cJSON_AddNumberToObject(o, "updated", (double)ss->updated);
    cJSON_AddBoolToObject(o, "archived", ss->archived);
    cJSON_AddNumberToObject(o, "active_leaf", (double)ss->active_leaf);
    return o;
}

static cJSON *message_json(const db_message *m) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)m->id);
    cJSON_AddNumberToObject(o, "parent_id", (double)m->parent_id);
    cJSON_AddStringToObject(o, "role", db_role_name(m->role));
    cJSON_AddStringToObject(o, "state", db_state_name(m->state));
    /* content may hold bytes cJSON would pass through unchecked: escape it ourselves */
    sbuf b = {0};
    sb_json_str(&b, m->content, m->content_len);
    cJSON *content = b.p ? cJSON_Parse(b.p) : NULL;
    sb_free(&b);
    cJSON_AddItemToObject(o, "content", content ? content : cJSON_CreateString(""));
    if (m->reasoning_len) { /* a thinking model's, stored apart */
        sb_json_str(&b, m->reasoning, m->reasoning_len);
        cJSON *r = b.p ? cJSON_Parse(b.p) : NULL;
        sb_free(&b);
        cJSON_AddItemToObject(o, "reasoning_content", r ? r : cJSON_CreateString(""));
    }
    cJSON_AddStringToObject(o, "finish", m->finish);
    cJSON_AddNumberToObject(o, "created", (double)m->created);
    if (m->role == DB_ROLE_ASSISTANT) {
        cJSON *u = cJSON_AddObjectToObject(o, "usage");
        cJSON_AddNumberToObject(u, "prompt_tokens", (double)m->usage.prompt_tokens);
        cJSON_AddNumberToObject(u, "cached_tokens", (double)m->usage.cached_tokens);
        cJSON_AddNumberToObject(u, "completion_tokens", (double)m->usage.completion_tokens);
        cJSON_AddNumberToObject(u, "ttft_ms", m->usage.ttft_ms);
        cJSON_AddNumberToObject(u, "tpot_ms", m->usage.tpot_ms);
        if (m->usage.reasoning_tokens) {
            cJSON_AddNumberToObject(u, "reasoning_tokens", (double)m->usage.reasoning_tokens);
            cJSON_AddNumberToObject(u, "reasoning_ms", m->usage.reasoning_ms);
        }
    }
    return o;
}

/* "session": a positive integer id. */
static int session_id_of(const cJSON *j, int64_t *id, llc_err *err) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "session");
    if (!cJSON_IsNumber(f) || f->valuedouble < 1 || f->valuedouble > 9.0e15 ||
        f->valuedouble != (double)(int64_t)f->valuedouble)
        return llc_fail(err, LLC_ERR_TYPE, "'session' (a session id, a positive integer) is required");
    *id = (int64_t)f->valuedouble;
    return 0;
}

static void send_db_error(srv *s, conn *c, const char *id_json, int rc, const char *msg) {
    srv_send_error(s, c, id_json, rc == LLC_ERR_NOTFOUND ? "not_found" : rc == LLC_ERR_TYPE ? "bad_request"
                                                                                           : "db_error", msg);
}

static void do_list(srv *s, conn *c, const cJSON *j, const char *id_json) {
    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(j, "archived");
    db_session *list = NULL;
    int n = 0;
    llc_err err = {{0}};
    int rc = db_session_list(s->db, cJSON_IsTrue(arch), &list, &n, &err);
    if (rc) {
        send_db_error(s, c, id_json, rc, err.msg);
        return;
    }
    cJSON *res = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(res, "sessions");
    for (int i = 0; i < n; i++) {
        cJSON *o = session_json(&list[i]);
        cJSON_AddBoolToObject(o, "busy", srv_session_busy(s, list[i].id));
        cJSON_AddItemToArray(arr, o);
    }
    db_sessions_free(list, n);
    srv_send_result(s, c, id_json, res);
}

static void do_get(srv *s, conn *c, const cJSON *j, const char *id_json) {
    int64_t id;
    llc_err err = {{0}};
    db_session ss = {0};
    db_message *path = NULL;
    int n = 0, rc = session_id_of(j, &id, &err);
    if (!rc) rc = db_session_get(s->db, id, &ss, &err);
    if (!rc) rc = db_message_path(s->db, ss.active_leaf, &path, &n, &err);
    if (rc) {
        db_session_clear(&ss);
        send_db_error(s, c, id_json, rc, err.msg);
        return;
    }
    cJSON *res = cJSON_CreateObject(), *o = session_json(&ss);
    cJSON_AddBoolToObject(o, "busy", srv_session_busy(s, id));
    cJSON *arr = cJSON_AddArrayToObject(o, "messages");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, message_json(&path[i]));
    cJSON_AddItemToObject(res, "session", o);
    db_messages_free(path, n);
    db_session_clear(&ss);
    srv_send_result(s, c, id_json, res);
}

static void do_create(srv *s, conn *c, const cJSON *j, const char *id_json) {
    const cJSON *title = cJSON_GetObjectItemCaseSensitive(j, "title");
    const cJSON *sys = cJSON_GetObjectItemCaseSensitive(j, "system_prompt");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(j, "params");
    if (!sys) sys = cJSON_GetObjectItemCaseSensitive(j, "system");
    if ((title && !cJSON_IsNull(title) && !cJSON_IsString(title)) ||
        (sys && !cJSON_IsNull(sys) && !cJSON_IsString(sys)) ||
        (params && !cJSON_IsNull(params) && !cJSON_IsObject(params))) {
        srv_send_error(s, c, id_json, "bad_request",
                       "'title' and 'system_prompt' must be strings, 'params' an object");
        return;
    }
    /* settings are kept in the UI's format (unknown fields dropped, ranges checked) */
    char *params_json = NULL;
    if (cJSON_IsObject(params)) {
        char *raw = cJSON_PrintUnformatted(params);
        conv_settings set;
        conv_settings_from_json(raw, &set);
        free(raw);
        params_json = conv_settings_to_json(&set);
    }
    int64_t id = 0;
    llc_err err = {{0}};
    int rc = db_session_create(s->db, cJSON_IsString(title) ? title->valuestring : "New chat",
                               cJSON_IsString(sys) ? sys->valuestring : "", s->m.name,
                               params_json ? params_json : "", &id, &err);
    free(params_json);
    db_session ss = {0};
    if (!rc) rc = db_session_get(s->db, id, &ss, &err);
    if (rc) {
        send_db_error(s, c, id_json, rc, err.msg);
        return;
    }
    cJSON *res = cJSON_CreateObject();
    cJSON_AddItemToObject(res, "session", session_json(&ss));
    db_session_clear(&ss);
    srv_send_result(s, c, id_json, res);
    srv_note_push(s, SRV_NOTE_SESSION, id, 0, 0, NULL, 0);
}

static void do_delete(srv *s, conn *c, const cJSON *j, const char *id_json) {
    int64_t id;
    llc_err err = {{0}};
    int rc = session_id_of(j, &id, &err);
    if (!rc && srv_session_busy(s, id)) {
        srv_send_error(s, c, id_json, "busy", "the session is answering a request; cancel it first");
        return;
    }
    if (!rc) rc = db_session_delete(s->db, id, &err);
    if (rc) {
        send_db_error(s, c, id_json, rc, err.msg);
        return;
    }
    cJSON *res = cJSON_CreateObject();
    cJSON_AddNumberToObject(res, "deleted", (double)id);
    srv_send_result(s, c, id_json, res);
    srv_note_push(s, SRV_NOTE_SESSION, id, 0, 0, NULL, 0);
}

static bool need_db(srv *s, conn *c, const char *id_json) {
    if (s->db) return true;
    char msg[400];
    snprintf(msg, sizeof msg, "sessions are not available: %s", s->db_error);
    srv_send_error(s, c, id_json, "no_database", msg);
    return false;
}

static void session_token(srv *s, srv_req *r, int index, const char *text, size_t len);
static void session_reasoning(srv *s, srv_req *r, int index, const char *text, size_t len);
static void session_done(srv_req *r, int index, const engine_event *ev);
static void session_release(srv *s, srv_req *r);
static const srv_req_hooks g_session_hooks = {session_token, session_reasoning, session_done, session_release};

void srv_sessions_method(srv *s, conn *c, const char *method, const cJSON *j, const char *id_json) {
    bool known = !strcmp(method, "sessions.list") || !strcmp(method, "sessions.get") ||
                 !strcmp(method, "sessions.create") || !strcmp(method, "sessions.send") ||
                 !strcmp(method, "sessions.delete");
    if (!known) {
        char msg[128];
        snprintf(msg, sizeof msg, "unknown method '%.60s'", method);
        srv_send_error(s, c, id_json, "unknown_method", msg);
        return;
    }
    if (!need_db(s, c, id_json)) return;
    if (!strcmp(method, "sessions.list")) do_list(s, c, j, id_json);
    else if (!strcmp(method, "sessions.get")) do_get(s, c, j, id_json);
    else if (!strcmp(method, "sessions.create")) do_create(s, c, j, id_json);
    else if (!strcmp(method, "sessions.delete")) do_delete(s, c, j, id_json);
    else srv_session_chat(s, c, j, id_json);
}

/* ---- chat with a session ---- */

/* The new user message: "content", else the last of "messages" (a user message). */
static int user_text(const cJSON *j, const char **out, llc_err *err) {
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(j, "content");
    if (cJSON_IsString(content)) {
        *out = content->valuestring;
        return 0;
    }
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(j, "messages");
    const cJSON *last = cJSON_IsArray(msgs) ? cJSON_GetArrayItem(msgs, cJSON_GetArraySize(msgs) - 1) : NULL;
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(last, "role");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(last, "content");
    if (cJSON_IsString(role) && !strcmp(role->valuestring, "user") && cJSON_IsString(text)) {
        *out = text->valuestring;
        return 0;
    }
    return llc_fail(err, LLC_ERR_TYPE, "give the new user message as 'content' (a string)");
}

/* The UI's rule: a new session is titled by the start of its first message. */
static void title_from(conv *cv, const char *text) {
    if (cv->n_msgs > 0 || (cv->title[0] && strcmp(cv->title, "New chat"))) return;
    char title[48];
    size_t n = 0, len = strlen(text);
    for (size_t i = 0; i < len && n < 40; i++) title[n++] = text[i] == '\n' ? ' ' : text[i];
    while (n > 0 && ((unsigned char)title[n - 1] & 0xC0) == 0x80) n--;
    if (n > 0 && ((unsigned char)title[n - 1] & 0x80)) n--;
    title[n] = 0;
    char *t = strdup(title);
    if (t) {
        free(cv->title);
        cv->title = t;
        cv->meta_dirty = true;
    }
}

void srv_session_chat(srv *s, conn *c, const cJSON *j, const char *id_json) {
    if (!need_db(s, c, id_json)) return;
    llc_err err = {{0}};
    int64_t sid;
    const char *text = NULL;
    int rc = session_id_of(j, &sid, &err);
    if (!rc) rc = user_text(j, &text, &err);
    if (rc) {
        srv_send_error(s, c, id_json, "bad_request", err.msg);
        return;
    }
    if (srv_req_full(s, c, id_json)) return;
    if (srv_session_busy(s, sid)) {
        srv_send_error(s, c, id_json, "busy", "the session is already answering a request");
        return;
    }
    conv *cv = NULL;
    if ((rc = conv_load(s->db, sid, &cv, &err))) {
        send_db_error(s, c, id_json, rc, err.msg);
        return;
    }
    /* the session's settings, then what the request sets */
    srv_gen g;
    srv_gen_init(&g);
    g.req.sampling.temperature = cv->set.temperature;
    g.req.sampling.top_p = cv->set.top_p;
    g.req.sampling.top_k = cv->set.top_k;
    g.req.sampling.min_p = cv->set.min_p;
    g.req.sampling.seed = cv->set.seed;
    g.req.max_tokens = conv_max_tokens(&cv->set);
    g.req.beam_width = cv->set.beam;
    g.req.n = cv->set.beam > 0 ? 1 : cv->set.n;
    rc = srv_gen_params(&s->m, SRV_NDJSON, j, &g, &err);
    if (rc) {
        srv_send_error(s, c, id_json, rc == LLC_ERR_RANGE ? "bad_param" : "bad_request", err.msg);
        goto fail;
    }
    title_from(cv, text);
    if (conv_add_user(cv, text, strlen(text))) {
        srv_send_error(s, c, id_json, "internal", "out of memory");
        goto fail;
    }
    if (conv_save(cv, s->db, s->m.name, true, llc_now_ms())) { /* stored before the engine sees it */
        srv_send_error(s, c, id_json, "db_error", cv->save_error);
        goto fail;
    }
    srv_note_push(s, SRV_NOTE_SESSION, sid, 0, 0, NULL, 0);
    chat_msg *msgs;
    int n;
    if (conv_chat_msgs(cv, &msgs, &n)) {
        srv_send_error(s, c, id_json, "internal", "out of memory");
        goto fail;
    }
    rc = srv_gen_chat_msgs(&s->m, msgs, n, &g, &err);
    if (!rc) rc = srv_gen_reasoning(&s->m, j, &g, &err); /* stored apart, as the chat does */
    free(msgs);
    if (rc) {
        srv_send_error(s, c, id_json, rc == LLC_ERR_RANGE ? "bad_param" : "internal", err.msg);
        goto fail;
    }
    srv_req *r = srv_req_submit(s, c, id_json, &g, &err);
    if (!r) goto fail;
    int first = conv_open_answers(cv, g.req.n);
    if (first < 0 || !busy_add(s, sid)) {
        engine_cancel(s->e, r->eid);
        first = first < 0 ? 0 : first;
    }
    r->cv = cv;
    r->hooks = &g_session_hooks;
    r->session_id = sid;
    r->alt_base = first;
    conv_save(cv, s->db, s->m.name, true, llc_now_ms()); /* the answers get their ids */
    srv_gen_free(&g);
    return;
fail:
    srv_gen_free(&g);
    conv_free(cv);
}

/* A session request's hooks (srv_req_hooks): its text into the stored answer, */
static void session_token(srv *s, srv_req *r, int index, const char *text, size_t len) {
    conv *cv = r->cv;
    int alt = r->alt_base + index;
    if (alt >= cv->n_alts) return;
    if (len) conv_reasoning_clock(cv->alts[alt], false, llc_now_ms()); /* the answer began: the time is kept */
    conv_append(cv, alt, text, len);
    srv_note_push(s, SRV_NOTE_TEXT, r->session_id, cv->alts[alt]->id, index, text, len);
    conv_save(cv, s->db, s->m.name, false, llc_now_ms()); /* about once a second */
}

/* its reasoning beside it, */
static void session_reasoning(srv *s, srv_req *r, int index, const char *text, size_t len) {
    int alt = r->alt_base + index;
    if (alt >= r->cv->n_alts) return;
    if (len) conv_reasoning_clock(r->cv->alts[alt], true, llc_now_ms()); /* "thought for 4.2 s", as the chat */
    conv_append_reasoning(r->cv, alt, text, len);
    conv_save(r->cv, s->db, s->m.name, false, llc_now_ms());
}

/* each sample's end, */
static void session_done(srv_req *r, int index, const engine_event *ev) {
    int state = ev->finish == FINISH_CANCELLED ? DB_STATE_CANCELLED
                : ev->finish == FINISH_ERROR   ? DB_STATE_ERROR
                                               : DB_STATE_DONE;
    db_usage u = {.prompt_tokens = ev->prompt_tokens, .cached_tokens = ev->cached_tokens,
                  .completion_tokens = ev->completion_tokens, .ttft_ms = ev->ttft_ms, .tpot_ms = ev->tpot_ms,
                  .reasoning_tokens = r->pend[index].rp ? reasoning_pieces(r->pend[index].rp) : 0};
    conv_finish(r->cv, r->alt_base + index, state, srv_finish_name(ev->finish), &u);
}

/* and the request's end (all samples finished, or the connection went away). */
static void session_release(srv *s, srv_req *r) {
    conv *cv = r->cv;
    if (!cv) return;
    r->cv = NULL;
    for (int i = 0; i < r->n; i++) { /* answers cut short by a disconnect */
        int alt = r->alt_base + i;
        if (alt < cv->n_alts && cv->alts[alt]->state == DB_STATE_STREAMING)
            conv_finish(cv, alt, DB_STATE_CANCELLED, "cancelled", NULL);
    }
    conv_save(cv, s->db, s->m.name, true, llc_now_ms());
    for (int i = 0; i < r->n; i++) {
        int alt = r->alt_base + i;
        if (alt < cv->n_alts) srv_note_push(s, SRV_NOTE_DONE, r->session_id, cv->alts[alt]->id, i, NULL, 0);
    }
    busy_remove(s, r->session_id);
    if (!conv_unsaved(cv)) {
        conv_free(cv);
        return;
    }
    srv_unsaved *u = calloc(1, sizeof *u); /* keep it and try again later */
    if (!u) {
        conv_free(cv);
        return;
    }
    u->cv = cv;
    u->next = s->unsaved;
    s->unsaved = u;
}

void srv_sessions_retry(srv *s, bool final) {
    for (srv_unsaved **pp = &s->unsaved; *pp;) {
        srv_unsaved *u = *pp;
        if (s->db) conv_save(u->cv, s->db, s->m.name, true, llc_now_ms());
        if (final || !s->db || !conv_unsaved(u->cv)) {
            *pp = u->next;
            conv_free(u->cv);
            free(u);
        } else {
            pp = &u->next;
        }
    }
}
