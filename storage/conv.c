/* conv.c — a conversation in memory and in the database (see conv.h). */
#include "storage/conv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "engine/sched/sampler.h"

conv_settings conv_default_settings(void) {
    sampler_params d = sampler_params_default();
    return (conv_settings){.temperature = d.temperature, .top_p = d.top_p, .min_p = d.min_p,
                           .top_k = d.top_k, .max_tokens = 0, .seed = SAMPLER_SEED_RANDOM,
                           .n = 1, .beam = 0};
}

int conv_max_tokens(const conv_settings *s) { return s->max_tokens > 0 ? s->max_tokens : CONV_MAX_TOKENS; }

static void msg_free(conv_msg *m) {
    if (!m) return;
    free(m->text);
    free(m->reasoning);
    free(m->wrap.v); /* the UI's wrap caches */
    free(m->r_wrap.v);
    if (m->view_free) m->view_free(m->view);
    free(m);
}

static conv_msg *msg_new(int role, const char *text, size_t len, int state) {
    conv_msg *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->cap = len + 1 > 64 ? len + 1 : 64;
    m->text = malloc(m->cap);
    if (!m->text) {
        free(m);
        return NULL;
    }
    if (len) memcpy(m->text, text, len);
    m->text[len] = 0;
    m->len = len;
    m->role = role;
    m->state = state;
    m->dirty = true;
    return m;
}

static int msgs_push(conv *c, conv_msg *m) {
    if (c->n_msgs == c->cap_msgs) {
        int cap = c->cap_msgs ? 2 * c->cap_msgs : 16;
        conv_msg **p = realloc(c->msgs, (size_t)cap * sizeof *p);
        if (!p) return LLC_ERR_NOMEM;
        c->msgs = p;
        c->cap_msgs = cap;
    }
    c->msgs[c->n_msgs++] = m;
    return 0;
}

static void alts_clear(conv *c, conv_msg *keep) {
    for (int i = 0; i < c->n_alts; i++)
        if (c->alts[i] != keep) msg_free(c->alts[i]);
    free(c->alts);
    c->alts = NULL;
    c->n_alts = c->alt_cur = 0;
}

int conv_create(const char *title, conv **out) {
    conv *c = calloc(1, sizeof *c);
    if (!c) return LLC_ERR_NOMEM;
    c->title = strdup(title ? title : "New chat");
    c->system = strdup("");
    c->model = strdup("");
    c->set = conv_default_settings();
    c->meta_dirty = true;
    if (!c->title || !c->system || !c->model) {
        conv_free(c);
        return LLC_ERR_NOMEM;
    }
    *out = c;
    return 0;
}

void conv_free(conv *c) {
    if (!c) return;
    for (int i = 0; i < c->n_msgs; i++) msg_free(c->msgs[i]);
    free(c->msgs);
    alts_clear(c, NULL);
    free(c->title);
    free(c->system);
    free(c->queued);
    free(c->model);
    free(c->model_prev);
    free(c->draft);
    free(c);
}

char *conv_settings_to_json(const conv_settings *s) {
    cJSON *j = cJSON_CreateObject();
    if (!j) return NULL;
    cJSON_AddNumberToObject(j, "temperature", s->temperature);
    cJSON_AddNumberToObject(j, "top_p", s->top_p);
    cJSON_AddNumberToObject(j, "top_k", s->top_k);
    cJSON_AddNumberToObject(j, "min_p", s->min_p);
    if (s->max_tokens > 0) cJSON_AddNumberToObject(j, "max_tokens", s->max_tokens);
    if (s->seed != SAMPLER_SEED_RANDOM) cJSON_AddNumberToObject(j, "seed", (double)s->seed);
    cJSON_AddNumberToObject(j, "n", s->n);
    cJSON_AddNumberToObject(j, "beam", s->beam);
    if (s->no_think) cJSON_AddFalseToObject(j, "think");
    char *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return out;
}

/* Reads a number field within [lo, hi] into *v; leaves *v alone otherwise. */
static void num_field(const cJSON *j, const char *name, double lo, double hi, double *v) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, name);
    if (cJSON_IsNumber(f) && f->valuedouble >= lo && f->valuedouble <= hi) *v = f->valuedouble;
}

void conv_settings_from_json(const char *json, conv_settings *s) {
    *s = conv_default_settings();
    cJSON *j = json && *json ? cJSON_Parse(json) : NULL;
    if (!j) return; /* a damaged row keeps the defaults */
    double v;
    v = s->temperature, num_field(j, "temperature", 0, 100, &v), s->temperature = (float)v;
    v = s->top_p, num_field(j, "top_p", 0, 1, &v), s->top_p = (float)v;
    v = s->min_p, num_field(j, "min_p", 0, 1, &v), s->min_p = (float)v;
    v = s->top_k, num_field(j, "top_k", 0, 1e9, &v), s->top_k = (int)v;
    v = s->max_tokens, num_field(j, "max_tokens", 1, 1e9, &v), s->max_tokens = (int)v;
    v = -1, num_field(j, "seed", 0, 9.2e18, &v);
    if (v >= 0) s->seed = (uint64_t)v;
    v = s->n, num_field(j, "n", 1, 16, &v), s->n = (int)v;
    v = s->beam, num_field(j, "beam", 0, 16, &v), s->beam = (int)v;
    s->no_think = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "think"));
    cJSON_Delete(j);
}

static conv_msg *msg_from_db(const db_message *m) {
    conv_msg *c = msg_new(m->role, m->content, m->content_len, m->state);
    if (!c) return NULL;
    c->id = m->id;
    c->dirty = false;
    c->usage = m->usage;
    if (m->reasoning_len) {
        if (!(c->reasoning = malloc(m->reasoning_len + 1))) {
            msg_free(c);
            return NULL;
        }
        memcpy(c->reasoning, m->reasoning, m->reasoning_len + 1);
        c->r_len = m->reasoning_len;
        c->r_cap = m->reasoning_len + 1;
    }
    snprintf(c->finish, sizeof c->finish, "%s", m->finish ? m->finish : "");
    return c;
}

int conv_load(db *d, int64_t session_id, conv **out, llc_err *err) {
    db_session s;
    int rc = db_session_get(d, session_id, &s, err);
    if (rc) return rc;
    conv *c;
    if ((rc = conv_create(s.title, &c))) {
        db_session_clear(&s);
        return llc_fail(err, rc, "out of memory");
    }
    c->session_id = s.id;
    free(c->system);
    c->system = strdup(s.system_prompt ? s.system_prompt : "");
    conv_settings_from_json(s.params_json, &c->set);
    if (s.model && strchr(s.model, '/')) { /* a model file of its own (a bare name is the default's) */
        free(c->model);
        c->model = strdup(s.model);
    }
    c->meta_dirty = false;
    db_message *path = NULL;
    int n = 0;
    rc = c->system && c->model ? db_message_path(d, s.active_leaf, &path, &n, err) : LLC_ERR_NOMEM;
    int64_t last_parent = 0;
    bool last_is_answer = n > 0 && path[n - 1].role == DB_ROLE_ASSISTANT;
    for (int i = 0; !rc && i < n - (last_is_answer ? 1 : 0); i++) {
        if (path[i].role == DB_ROLE_SYSTEM) continue;
        conv_msg *m = msg_from_db(&path[i]);
        if (!m || msgs_push(c, m)) {
            msg_free(m);
            rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
        }
    }
    if (!rc && last_is_answer) { /* the answers to the last user message */
        last_parent = path[n - 1].parent_id;
        db_message *sib = NULL;
        int n_sib = 0;
        rc = db_message_children(d, s.id, last_parent, &sib, &n_sib, err);
        if (!rc && n_sib > 0) {
            c->alts = calloc((size_t)n_sib, sizeof *c->alts);
            for (int i = 0; c->alts && i < n_sib; i++) {
                if (sib[i].role != DB_ROLE_ASSISTANT) continue;
                if (!(c->alts[c->n_alts] = msg_from_db(&sib[i]))) break;
                if (sib[i].id == path[n - 1].id) c->alt_cur = c->n_alts;
                c->n_alts++;
            }
        }
        db_messages_free(sib, n_sib);
    }
    db_messages_free(path, n);
    db_session_clear(&s);
    if (rc) {
        conv_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

conv_msg *conv_last(const conv *c) {
    if (c->n_alts > 0) return c->alts[c->alt_cur];
    return c->n_msgs ? c->msgs[c->n_msgs - 1] : NULL;
}

int conv_n_shown(const conv *c) { return c->n_msgs + (c->n_alts > 0); }

conv_msg *conv_shown(const conv *c, int i) {
    return i < c->n_msgs ? c->msgs[i] : c->alts[c->alt_cur];
}

int conv_add_user(conv *c, const char *text, size_t len) {
    conv_msg *m = msg_new(DB_ROLE_USER, text, len, DB_STATE_DONE);
    if (!m) return LLC_ERR_NOMEM;
    if (c->n_alts > 0) { /* the answer that was shown joins the path */
        conv_msg *keep = c->alts[c->alt_cur];
        if (msgs_push(c, keep)) {
            msg_free(m);
            return LLC_ERR_NOMEM;
        }
        alts_clear(c, keep);
    }
    if (msgs_push(c, m)) {
        msg_free(m);
        return LLC_ERR_NOMEM;
    }
    return 0;
}

int conv_open_answers(conv *c, int k) {
    conv_msg **a = realloc(c->alts, (size_t)(c->n_alts + k) * sizeof *a);
    if (!a) return LLC_ERR_NOMEM;
    c->alts = a;
    int first = c->n_alts;
    for (int i = 0; i < k; i++) {
        conv_msg *m = msg_new(DB_ROLE_ASSISTANT, "", 0, DB_STATE_STREAMING);
        if (!m) return LLC_ERR_NOMEM;
        c->alts[c->n_alts++] = m;
    }
    c->alt_cur = first;
    return first;
}

/* Appends text[0..len) to the NUL-terminated *buf of *len bytes in *cap. */
static int grow_append(char **buf, size_t *n, size_t *cap, const char *text, size_t len) {
    if (*n + len + 1 > *cap) {
        size_t want = *cap * 2 > *n + len + 1 ? *cap * 2 : *n + len + 1;
        char *t = realloc(*buf, want);
        if (!t) return LLC_ERR_NOMEM;
        *buf = t;
        *cap = want;
    }
    memcpy(*buf + *n, text, len);
    *n += len;
    (*buf)[*n] = 0;
    return 0;
}

int conv_append(conv *c, int alt, const char *text, size_t len) {
    if (alt < 0 || alt >= c->n_alts) return LLC_ERR_RANGE;
    conv_msg *m = c->alts[alt];
    if (grow_append(&m->text, &m->len, &m->cap, text, len)) return LLC_ERR_NOMEM;
    m->dirty = true;
    return 0;
}

void conv_reasoning_clock(conv_msg *m, bool reasoning, double now_ms) {
    if (!m->reasoning_t0) { /* not running: the reasoning (re)starts it, its time so far kept */
        const double t0 = now_ms - m->usage.reasoning_ms;
        if (reasoning) m->reasoning_t0 = t0 > 0 ? t0 : 1e-9; /* (0 means stopped) */
        return;
    }
    if (reasoning || !m->len) m->usage.reasoning_ms = now_ms - m->reasoning_t0;
    if (!reasoning) m->reasoning_t0 = 0; /* the answer began: the time is kept */
}

int conv_append_reasoning(conv *c, int alt, const char *text, size_t len) {
    if (alt < 0 || alt >= c->n_alts) return LLC_ERR_RANGE;
    conv_msg *m = c->alts[alt];
    if (grow_append(&m->reasoning, &m->r_len, &m->r_cap, text, len)) return LLC_ERR_NOMEM;
    m->reasoning_dirty = m->dirty = true;
    return 0;
}

void conv_finish(conv *c, int alt, int state, const char *finish, const db_usage *usage) {
    if (alt < 0 || alt >= c->n_alts) return;
    conv_msg *m = c->alts[alt];
    m->state = state;
    snprintf(m->finish, sizeof m->finish, "%s", finish ? finish : "");
    if (usage) { /* what was measured while it streamed stays unless the end says otherwise */
        const db_usage seen = m->usage;
        m->usage = *usage;
        if (!m->usage.reasoning_tokens) m->usage.reasoning_tokens = seen.reasoning_tokens;
        if (!m->usage.reasoning_ms) m->usage.reasoning_ms = seen.reasoning_ms;
    }
    m->dirty = true;
}

int64_t conv_drop_last_user(conv *c) {
    alts_clear(c, NULL);
    if (c->n_msgs == 0) return 0;
    conv_msg *u = c->msgs[c->n_msgs - 1];
    if (u->role != DB_ROLE_USER) return 0;
    c->n_msgs--;
    msg_free(u);
    return c->n_msgs ? c->msgs[c->n_msgs - 1]->id : 0;
}

bool conv_unsaved(const conv *c) {
    if (c->meta_dirty && c->session_id) return true;
    for (int i = 0; i < conv_n_shown(c); i++)
        if (conv_shown(c, i)->dirty) return true;
    for (int i = 0; i < c->n_alts; i++)
        if (c->alts[i]->dirty) return true;
    return false;
}

/* Stores a message's reasoning when it changed (the message is stored). */
static int save_reasoning(db *d, conv_msg *m, llc_err *err) {
    if (!m->reasoning_dirty || !m->id) return 0;
    if (db_message_set_reasoning(d, m->id, m->reasoning ? m->reasoning : "", m->r_len, err)) return -1;
    m->reasoning_dirty = false;
    return 0;
}

/* Stores one message whose parent is `parent` (0 = root). */
static int save_msg(conv *c, db *d, conv_msg *m, int64_t parent, bool force, double now_ms, bool *added,
                    llc_err *err) {
    if (!m->dirty) return 0;
    if (m->id == 0 && added) *added = true;
    if (m->id == 0) {
        if (db_message_add(d, c->session_id, parent, m->role, m->text, m->len, m->state, &m->id, err)) return -1;
        if (save_reasoning(d, m, err)) return -1;
        m->dirty = m->state == DB_STATE_STREAMING && m->len > 0;
        /* an answer that ended before its first save: its usage and finish reason too */
        if (m->role == DB_ROLE_ASSISTANT && m->state != DB_STATE_STREAMING &&
            db_message_finish(d, m->id, NULL, 0, m->state, &m->usage, m->finish, err)) {
            m->dirty = true; /* (the next save finishes it) */
            return -1;
        }
        return 0;
    }
    if (m->state == DB_STATE_STREAMING) {
        if (!force && now_ms - c->last_save_ms < CONV_STREAM_SAVE_MS) return 0;
        if (db_message_set_content(d, m->id, m->text, m->len, m->state, err)) return -1;
    } else if (db_message_finish(d, m->id, m->text, m->len, m->state, &m->usage, m->finish, err)) {
        return -1;
    }
    if (save_reasoning(d, m, err)) return -1;
    m->dirty = false;
    return 0;
}

int conv_save(conv *c, db *d, const char *model_name, bool force, double now_ms) {
    llc_err err = {{0}};
    if (!d) {
        snprintf(c->save_error, sizeof c->save_error, "no database: kept in memory only");
        return LLC_ERR_IO;
    }
    if (c->session_id == 0 && c->n_msgs == 0) return 0; /* nothing worth a session yet */
    int rc = 0;
    if (c->session_id == 0 || c->meta_dirty) {
        char *params = conv_settings_to_json(&c->set);
        if (c->session_id == 0)
            rc = db_session_create(d, c->title, c->system, model_name, params, &c->session_id, &err);
        else if (!(rc = db_session_set_title(d, c->session_id, c->title, &err)) &&
                 !(rc = db_session_set_system(d, c->session_id, c->system, &err)))
            rc = db_session_set_params(d, c->session_id, params ? params : "", &err);
        free(params);
        if (!rc) c->meta_dirty = false;
    }
    bool streaming_saved = false, added = false;
    int64_t parent = 0;
    for (int i = 0; !rc && i < c->n_msgs; i++) {
        rc = save_msg(c, d, c->msgs[i], parent, force, now_ms, &added, &err);
        parent = c->msgs[i]->id;
    }
    for (int i = 0; !rc && i < c->n_alts; i++) {
        bool was_streaming = c->alts[i]->state == DB_STATE_STREAMING && c->alts[i]->dirty;
        rc = save_msg(c, d, c->alts[i], parent, force, now_ms, &added, &err);
        if (!rc && was_streaming && !c->alts[i]->dirty) streaming_saved = true;
    }
    /* the active path ends at the alternative shown (adding a message moves the
     * stored one: set it again then; a streaming save is one UPDATE) */
    if (!rc && c->n_alts > 0 && c->alts[c->alt_cur]->id &&
        (added || c->alts[c->alt_cur]->id != c->leaf_saved)) {
        rc = db_session_set_active_leaf(d, c->session_id, c->alts[c->alt_cur]->id, &err);
        if (!rc) c->leaf_saved = c->alts[c->alt_cur]->id;
    }
    if (streaming_saved) c->last_save_ms = now_ms;
    if (rc) {
        snprintf(c->save_error, sizeof c->save_error, "%.300s", err.msg[0] ? err.msg : "save failed");
        return rc < 0 ? rc : LLC_ERR_IO;
    }
    c->save_error[0] = 0;
    return 0;
}

int conv_write_markdown(const conv *c, FILE *f) {
    fprintf(f, "# %s\n\n", c->title && *c->title ? c->title : "Chat");
    if (c->system && *c->system) fprintf(f, "**System prompt**\n\n%s\n\n", c->system);
    for (int i = 0; i < conv_n_shown(c); i++) {
        const conv_msg *m = conv_shown(c, i);
        fprintf(f, "**%s**%s\n\n", m->role == DB_ROLE_USER ? "User" : "Assistant", m->id ? "" : " *(not saved)*");
        if (m->r_len) db_markdown_reasoning(f, m->reasoning, m->r_len);
        fwrite(m->text, 1, m->len, f);
        fputs("\n\n", f);
    }
    return fflush(f) || ferror(f) ? LLC_ERR_IO : 0;
}

/* The prompt's turns, built into one allocation: the array, then the text of
 * user turns that had to be joined. */
typedef struct turns {
    chat_msg *m;
    int k;
    char *buf;   /* where joined text goes next */
    char *last;  /* the joined text being grown (m[k-1].content), or NULL */
} turns;

/* A failed or empty answer is no turn (a server would read it as the model
 * saying nothing, and answer that); a user turn after a user turn (the
 * answer between them left out) joins it, so that the roles still alternate. */
static void add_turn(turns *t, int role, int state, const char *text, size_t len, const char *reasoning) {
    if (role == DB_ROLE_ASSISTANT && (state == DB_STATE_ERROR || len == 0)) return;
    bool user = role == DB_ROLE_USER;
    if (!user || t->k == 0 || t->m[t->k - 1].role != CHAT_USER) {
        t->m[t->k++] = (chat_msg){user ? CHAT_USER : CHAT_ASSISTANT, text, user ? NULL : reasoning};
        t->last = NULL;
        return;
    }
    if (!t->last) { /* the first join: copy the earlier turn first */
        size_t n = strlen(t->m[t->k - 1].content);
        t->last = t->buf;
        memcpy(t->buf, t->m[t->k - 1].content, n);
        t->buf += n;
    } else {
        t->buf--; /* over the NUL */
    }
    memcpy(t->buf, "\n\n", 2);
    memcpy(t->buf + 2, text, len);
    t->buf += 2 + len;
    *t->buf++ = 0;
    t->m[t->k - 1].content = t->last;
}

/* The turns of the path (the last user message left out when /edit replaces
 * it), the answer shown (when next follows it) and next (NULL: none). */
static int build_turns(const conv *c, const char *next, chat_msg **out, int *n) {
    size_t bytes = 1 + (next ? strlen(next) + 2 : 0);
    for (int i = 0; i < c->n_msgs; i++)
        if (c->msgs[i]->role == DB_ROLE_USER) bytes += c->msgs[i]->len + 2;
    turns t = {.m = malloc((size_t)(c->n_msgs + 3) * sizeof(chat_msg) + bytes)};
    if (!t.m) return LLC_ERR_NOMEM;
    t.buf = (char *)(t.m + c->n_msgs + 3);
    if (c->system[0]) t.m[t.k++] = (chat_msg){CHAT_SYSTEM, c->system, NULL};
    int path = c->n_msgs;
    if (next && c->editing && path > 0 && c->msgs[path - 1]->role == DB_ROLE_USER) path--;
    for (int i = 0; i < path; i++)
        add_turn(&t, c->msgs[i]->role, c->msgs[i]->state, c->msgs[i]->text, c->msgs[i]->len, c->msgs[i]->reasoning);
    const conv_msg *shown = c->n_alts ? c->alts[c->alt_cur] : NULL;
    if (next && !c->editing && shown) add_turn(&t, shown->role, shown->state, shown->text, shown->len, shown->reasoning);
    if (next) add_turn(&t, DB_ROLE_USER, DB_STATE_DONE, next, strlen(next), NULL);
    *out = t.m;
    *n = t.k;
    return 0;
}

int conv_chat_msgs(const conv *c, chat_msg **out, int *n) { return build_turns(c, NULL, out, n); }

int conv_chat_msgs_next(const conv *c, const char *next, chat_msg **out, int *n) {
    return build_turns(c, next, out, n);
}
