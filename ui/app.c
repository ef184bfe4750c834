/* app.c — the chat application's state and actions (see app.h): creating and
 * freeing it, the input history, sending turns to the provider and routing its
 * events back, and the commands, each dispatched to its file (app_*.c). The
 * tab list and the helpers every command shares are in app_tabs.c. */
#include "ui/app.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "ui/app_internal.h"
#include "ui/command.h"
#include "ui/markdown.h"
#include "ui/thinking.h"

#include <cjson/cJSON.h>

void ui_app_warn(ui_app *a, const char *fmt, ...) {
    sbuf w = {0};
    sb_str(&w, a->warnings);
    if (w.len) sb_putc(&w, '\n');
    size_t start = w.len;
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&w, fmt, ap);
    va_end(ap);
    for (size_t i = start; !w.oom && i < w.len; i++) /* one line each */
        if (w.p[i] == '\n' || w.p[i] == '\r') w.p[i] = ' ';
    char *all = sb_take(&w);
    if (!all) return; /* out of memory: the warnings so far stay */
    free(a->warnings);
    a->warnings = all;
    a->changed = true;
}

int ui_app_fds(const ui_app *a, int *fds, int max) {
    int n = 0;
    if (n < max) fds[n++] = prov_fd(a->cfg.prov);
    for (int i = 0; i < a->n_models && n < max; i++) fds[n++] = prov_fd(a->models[i].prov);
    if (app_models_fd(a) >= 0 && n < max) fds[n++] = app_models_fd(a);
    return n;
}

/* ---- input history (a settings row of the database: a JSON list) ---- */

static const char HISTORY_KEY[] = "input_history";

int ui_app_history_count(const ui_app *a) { return a->n_history; }
const char *ui_app_history_get(const ui_app *a, int i) { return i >= 0 && i < a->n_history ? a->history[i] : NULL; }

static void history_push(ui_app *a, const char *text) {
    if (a->n_history == UI_HISTORY_MAX) {
        free(a->history[0]);
        memmove(a->history, a->history + 1, (size_t)(--a->n_history) * sizeof *a->history);
    }
    char *t = strdup(text);
    char **h = t ? realloc(a->history, (size_t)(a->n_history + 1) * sizeof *h) : NULL;
    if (!h) {
        free(t);
        return;
    }
    a->history = h;
    a->history[a->n_history++] = t;
}

static void history_load(ui_app *a) {
    char *json = NULL;
    if (!a->db || db_setting_get(a->db, HISTORY_KEY, &json, NULL) || !json) return;
    cJSON *j = cJSON_Parse(json);
    const cJSON *e;
    if (cJSON_IsArray(j))
        cJSON_ArrayForEach(e, j) if (cJSON_IsString(e)) history_push(a, e->valuestring); /* else skipped */
    cJSON_Delete(j);
    free(json);
}

void ui_app_history_add(ui_app *a, const char *text) {
    if (a->n_history && !strcmp(a->history[a->n_history - 1], text)) return;
    history_push(a, text);
    if (!a->db) return;
    cJSON *j = cJSON_CreateStringArray((const char *const *)a->history, a->n_history);
    char *json = j ? cJSON_PrintUnformatted(j) : NULL;
    if (json) db_setting_set(a->db, HISTORY_KEY, json, NULL); /* a failure only loses history */
    free(json);
    cJSON_Delete(j);
}

/* One chat UI per database: an exclusive flock(2) on "PATH-ui.lock" holding the
 * owner's pid (the kernel drops it when that process ends, however it ends).
 * A second UI on the same file still runs, warned: the open tabs and the input
 * history are one set per database, and the last UI to write them wins. */
static void take_ui_lock(ui_app *a) {
    char path[1100];
    snprintf(path, sizeof path, "%s-ui.lock", a->cfg.db_path);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return; /* a read-only directory: nothing to warn with */
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
        char pid[32];
        int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) || pwrite(fd, pid, (size_t)n, 0) != n) { /* the pid is only for the warning */
        }
        a->lock_fd = fd;
        return;
    }
    char pid[32] = "";
    ssize_t n = errno == EWOULDBLOCK ? pread(fd, pid, sizeof pid - 1, 0) : -1;
    pid[n > 0 ? n : 0] = 0;
    pid[strcspn(pid, "\n")] = 0;
    close(fd);
    ui_app_warn(a, "another llmchat chat%s%s%s uses this database: the open tabs and input history are "
                "saved by whichever quits last", pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "");
}

int ui_app_create(const ui_app_config *cfg, ui_app **out, llc_err *err) {
    ui_app *a = calloc(1, sizeof *a);
    if (!a) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    a->cfg = *cfg;
    a->lock_fd = -1;
    prov_status(cfg->prov, a->status, sizeof a->status);
    llc_err dberr = {{0}};
    if (!cfg->db_path)
        snprintf(a->db_error, sizeof a->db_error, "no database: conversations are not saved");
    else if (db_open(cfg->db_path, &a->db, &dberr))
        snprintf(a->db_error, sizeof a->db_error, "%s", dberr.msg);
    if (a->db) db_set_busy_timeout(a->db, 100); /* a locked database: retry later, never freeze the UI */
    if (a->db) {
        int64_t *ids = NULL;
        int n = 0, active = -1;
        if (db_tabs_load(a->db, &ids, &n, &active, NULL) == 0)
            for (int i = 0; i < n; i++) {
                conv *c;
                if (conv_load(a->db, ids[i], &c, NULL)) continue;
                app_loaded_conv(a, c);
                if (app_add_tab(a, c)) conv_free(c);
            }
        free(ids);
        if (active >= 0 && active < a->n_tabs) a->cur = active;
        history_load(a);
        int interrupted = db_interrupted_at_open(a->db);
        if (interrupted > 0)
            ui_app_warn(a, "%d answer%s cut short last time (marked interrupted)", interrupted,
                        interrupted == 1 ? " was" : "s were");
        if (!db_is_readonly(a->db)) take_ui_lock(a);
    } else {
        ui_app_warn(a, "%s", a->db_error);
    }
    if (a->n_tabs == 0) ui_app_new_tab(a);
    if (a->n_tabs == 0) {
        ui_app_free(a);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    app_models_load_next(a); /* sessions that remember a model of their own */
    *out = a;
    return 0;
}

/* Tabs with messages not saved (after trying once more). */
static int unsaved_tabs(ui_app *a) {
    int n = 0;
    for (int i = 0; i < a->n_tabs; i++) {
        if (conv_unsaved(a->tabs[i])) app_save_conv(a, a->tabs[i], true, 0);
        n += conv_unsaved(a->tabs[i]);
    }
    return n;
}

/* Writes every tab that is not saved to a Markdown file, next to the database or
 * else in the temporary directory (a full disk refuses both the database and a
 * file beside it); a->recovery says where, or stays "" when nothing could. */
static void write_recovery(ui_app *a) {
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    const char *tmp = getenv("TMPDIR");
    char dir[400];
    const char *slash = a->cfg.db_path ? strrchr(a->cfg.db_path, '/') : NULL;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - a->cfg.db_path) : 1, slash ? a->cfg.db_path : ".");
    const char *dirs[2] = {dir, tmp && *tmp ? tmp : "/tmp"};
    for (int d = 0; d < 2; d++) {
        snprintf(a->recovery, sizeof a->recovery, "%s/llmchat-unsaved-%s.md", dirs[d], stamp);
        int fd = open(a->recovery, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600); /* conversations: private */
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!f) {
            if (fd >= 0) close(fd);
            continue;
        }
        bool ok = true;
        for (int i = 0; i < a->n_tabs; i++)
            if (conv_unsaved(a->tabs[i])) ok = conv_write_markdown(a->tabs[i], f) == 0 && ok;
        if (fclose(f) == 0 && ok) return;
        unlink(a->recovery);
    }
    a->recovery[0] = 0;
}

void ui_app_quit(ui_app *a) {
    int n = unsaved_tabs(a);
    if (n == 0 || a->quit_confirm) {
        if (n > 0) write_recovery(a);
        a->quit = true;
        return;
    }
    a->quit_confirm = true;
    ui_app_notice(a, true, "%d tab%s not saved: Ctrl-Q again quits and writes %s to a file (%s)", n,
                  n == 1 ? " is" : "s are", n == 1 ? "it" : "them", a->db ? ui_app_tab(a)->save_error : a->db_error);
}

void ui_app_free(ui_app *a) {
    if (!a) return;
    for (int i = 0; i < a->n_tabs; i++)
        if (a->tabs[i]->req_id) prov_cancel(app_tab_prov(a, a->tabs[i]), a->tabs[i]->req_id);
    double now = 0;
    for (int i = 0; i < a->n_tabs; i++) {
        conv *c = a->tabs[i];
        for (int k = 0; k < c->n_alts; k++) /* what streamed so far is kept, marked */
            if (c->alts[k]->state == DB_STATE_STREAMING)
                conv_finish(c, k, DB_STATE_CANCELLED, "cancelled", NULL);
        if (a->db) conv_save(c, a->db, app_model_name(a, c), true, now);
    }
    app_save_tabs(a);
    bool lost = false; /* (quit by a signal, or a save that failed just now) */
    for (int i = 0; i < a->n_tabs; i++) lost = lost || conv_unsaved(a->tabs[i]);
    if (lost && !a->recovery[0]) write_recovery(a);
    if (lost && a->recovery[0])
        fprintf(stderr, "llmchat: the database did not take every message: they are in %s\n", a->recovery);
    else if (lost)
        fprintf(stderr, "llmchat: some messages could not be saved, nor written to a file\n");
    for (int i = 0; i < a->n_tabs; i++) conv_free(a->tabs[i]);
    app_models_free(a);
    free(a->tabs);
    db_close(a->db);
    if (a->lock_fd >= 0) close(a->lock_fd);
    free(a->panel);
    free(a->warnings);
    free(a->listed);
    free(a->listed_msgs);
    free(a->edit_text);
    free(a->clipboard);
    for (int i = 0; i < a->n_history; i++) free(a->history[i]);
    free(a->history);
    free(a);
}

/* ---- generating ---- */

static conv *tab_of_request(ui_app *a, const provider *p, int64_t id) {
    for (int i = 0; i < a->n_tabs; i++)
        if (a->tabs[i]->req_id == id && app_tab_prov(a, a->tabs[i]) == p) return a->tabs[i];
    return NULL;
}

/* Sends the conversation up to its last user message to the provider; the
 * answers stream into new alternatives. */
static void start_answer(ui_app *a, conv *c) {
    chat_msg *msgs;
    int n;
    if (conv_chat_msgs(c, &msgs, &n)) {
        ui_app_notice(a, true, "out of memory");
        return;
    }
    llc_err err;
    prov_started st;
    int64_t id = prov_submit(app_tab_prov(a, c), msgs, n, &c->set, &st, &err);
    free(msgs);
    if (id < 0) {
        ui_app_notice(a, true, "%s", err.msg);
        return;
    }
    c->dropped_turns = st.n_dropped;
    int first = conv_open_answers(c, st.n_answers);
    if (first < 0) {
        prov_cancel(app_tab_prov(a, c), id);
        ui_app_notice(a, true, "out of memory");
        return;
    }
    c->req_id = id;
    c->alt_base = first;
    c->n_streaming = st.n_answers;
    c->scroll = 0;
    a->changed = true;
}

/* Whether the conversation with this new message can be answered at all (the
 * provider refuses one whose last message alone outgrows the context). */
static int check_message(ui_app *a, conv *c, const char *text, size_t len, llc_err *err) {
    chat_msg *m;
    int n;
    char *t = strndup(text, len);
    if (!t || conv_chat_msgs_next(c, t, &m, &n)) {
        free(t);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    int rc = prov_check(app_tab_prov(a, c), m, n, &c->set, err);
    free(m);
    free(t);
    return rc;
}

static void send_message(ui_app *a, conv *c, const char *text, size_t len) {
    if (c->req_id) { /* one message may wait for the answer to end */
        if (c->queued) {
            app_reject(a, "a message is already waiting for this answer (Ctrl-C stops the answer)");
            return;
        }
        if (!(c->queued = strndup(text, len))) {
            app_reject(a, "out of memory");
            return;
        }
        c->queued_len = len;
        ui_app_notice(a, false, "queued: sent when this answer ends (Ctrl-C ends it now)");
        return;
    }
    if (c->model[0] && !c->prov) {
        app_reject(a, "this tab's model (%s) is still loading", app_base_name(c->model));
        return;
    }
    llc_err err;
    if (check_message(a, c, text, len, &err)) {
        app_reject(a, "not sent: %s", err.msg);
        return;
    }
    bool edited = c->editing;
    if (c->editing) { /* the edited message becomes a sibling of the old one */
        conv_drop_last_user(c);
        c->editing = false;
    }
    if (c->session_id == 0 && c->n_msgs == 0 && !c->titled) { /* title: the start of the first message */
        char title[48];
        size_t n = 0;
        for (size_t i = 0; i < len && n < 40; i++) title[n++] = text[i] == '\n' ? ' ' : text[i];
        while (n > 0 && ((unsigned char)title[n - 1] & 0xC0) == 0x80) n--; /* whole characters */
        if (n > 0 && ((unsigned char)title[n - 1] & 0x80)) n--;
        title[n] = 0;
        char *t = strdup(title);
        if (t) free(c->title), c->title = t;
    }
    if (conv_add_user(c, text, len)) {
        app_reject(a, "out of memory");
        return;
    }
    app_save_conv(a, c, true, 0); /* stored before the provider sees it */
    if (edited) app_count_versions(a, c);
    app_set_panel(a, NULL);
    start_answer(a, c);
}

/* The answer ended: a message queued meanwhile goes now (if it cannot, it
 * comes back into the input box). */
static void send_queued(ui_app *a, conv *c) {
    char *q = c->queued;
    size_t n = c->queued_len;
    c->queued = NULL;
    c->queued_len = 0;
    a->rejected = false;
    send_message(a, c, q, n);
    if (a->rejected && !a->edit_text) a->edit_text = q, q = NULL;
    a->rejected = false;
    free(q);
}

bool ui_app_cancel(ui_app *a) {
    conv *c = ui_app_tab(a);
    if (!c || !c->req_id) return false;
    prov_cancel(app_tab_prov(a, c), c->req_id);
    ui_app_notice(a, false, "stopping the answer (what came so far is kept)");
    return true;
}

/* An answer ended (seq_index -1: the whole request failed). */
static void answer_done(ui_app *a, conv *c, const prov_event *ev, double now_ms) {
    if (ev->state == DB_STATE_ERROR && ev->message[0])
        ui_app_notice(a, true, "the answer failed: %s", ev->message);
    int lo = ev->seq_index < 0 ? 0 : ev->seq_index, hi = ev->seq_index < 0 ? c->n_alts - c->alt_base : ev->seq_index + 1;
    for (int i = lo; i < hi; i++) {
        int alt = c->alt_base + i;
        if (alt >= c->n_alts || c->alts[alt]->state != DB_STATE_STREAMING) continue;
        /* "length" before max_tokens: the context ran out (stored as "context") */
        bool context_end = !strcmp(ev->finish, "length") && ev->seq_index >= 0 && ev->usage.completion_tokens > 0 &&
                           ev->usage.completion_tokens < conv_max_tokens(&c->set);
        conv_finish(c, alt, ev->state, context_end ? "context" : ev->finish, ev->seq_index < 0 ? NULL : &ev->usage);
        snprintf(c->alts[alt]->error, sizeof c->alts[alt]->error, "%s",
                 ev->state == DB_STATE_ERROR ? ev->message : "");
        c->n_streaming--;
    }
    if (ev->seq_index < 0) c->n_streaming = 0;
    if (c->n_streaming <= 0) {
        c->req_id = 0;
        if (!strncmp(a->notice, "stopping the answer", 19)) ui_app_notice(a, false, "stopped: what came so far is kept");
        app_save_conv(a, c, true, now_ms);
        if (c->queued) send_queued(a, c);
    }
}

static void poll_provider(ui_app *a, provider *p, double now_ms) {
    prov_event *ev;
    while ((ev = prov_next(p))) {
        conv *c = tab_of_request(a, p, ev->request_id);
        if (c) {
            const int alt = c->alt_base + ev->seq_index;
            if (ev->kind != PROV_DONE && ev->text_len && alt >= 0 && alt < c->n_alts) /* "thought for 4.2 s" */
                conv_reasoning_clock(c->alts[alt], ev->kind == PROV_REASONING, now_ms);
            if (ev->kind == PROV_TEXT) {
                if (ev->text_len) conv_append(c, alt, ev->text, ev->text_len);
            } else if (ev->kind == PROV_REASONING) {
                if (ev->text_len) conv_append_reasoning(c, alt, ev->text, ev->text_len);
            } else {
                answer_done(a, c, ev, now_ms);
            }
            a->changed = true;
        }
        prov_event_free(ev);
    }
}

void ui_app_poll_events(ui_app *a, double now_ms) {
    poll_provider(a, a->cfg.prov, now_ms);
    for (int i = 0; i < a->n_models; i++) poll_provider(a, a->models[i].prov, now_ms);
    app_models_poll(a, now_ms);
}

void ui_app_tick(ui_app *a, double now_ms) {
    bool retry = now_ms - a->last_retry_ms >= 2000;
    if (retry) a->last_retry_ms = now_ms;
    for (int i = 0; i < a->n_tabs; i++) {
        conv *c = a->tabs[i];
        if (c->req_id) app_save_conv(a, c, false, now_ms); /* throttled to once a second */
        else if (retry && conv_unsaved(c)) app_save_conv(a, c, true, now_ms);
    }
    if (retry && !a->db && a->cfg.db_path) { /* the database may have come back */
        llc_err err;
        if (db_open(a->cfg.db_path, &a->db, &err) == 0) {
            db_set_busy_timeout(a->db, 100);
            a->db_error[0] = 0;
            ui_app_notice(a, false, "database open again: saving");
        }
    }
    char status[sizeof a->status];
    prov_status(app_tab_prov(a, ui_app_tab(a)), status, sizeof status);
    if (strcmp(status, a->status)) {
        memcpy(a->status, status, sizeof status);
        a->changed = true;
    }
    bool all_saved = true;
    for (int i = 0; i < a->n_tabs; i++) all_saved = all_saved && !a->tabs[i]->save_error[0];
    if (all_saved && a->notice_error && !strncmp(a->notice, "not saved", 9)) ui_app_notice(a, false, "saved");
}

/* ---- commands ---- */

/* /reasoning: the last answer's reasoning unfolds, or folds again. */
static void cmd_reasoning(ui_app *a, conv *c) {
    conv_msg *m = conv_last(c);
    if (!m || m->role != DB_ROLE_ASSISTANT || !m->r_len) {
        app_reject(a, "/reasoning: the last answer has no reasoning");
        return;
    }
    m->reasoning_shown = !m->reasoning_shown;
}

static void cmd_stats(ui_app *a) { app_set_panel(a, prov_stats(app_tab_prov(a, ui_app_tab(a)))); }

/* The tab's settings, on the notice line (max_tokens "default": not set, so
 * CONV_MAX_TOKENS locally and a server's own choice). */
static void show_settings(ui_app *a, const conv_settings *s) {
    char max[16];
    if (s->max_tokens > 0) snprintf(max, sizeof max, "%d", s->max_tokens);
    else snprintf(max, sizeof max, "default");
    ui_app_notice(a, false, "temp %.2f  top_p %.2f  top_k %d  min_p %.2f  max_tokens %s  seed %s", s->temperature,
                  s->top_p, s->top_k, s->min_p, max, s->seed == SAMPLER_SEED_RANDOM ? "random" : "fixed");
}

static void apply_set(ui_app *a, conv *c, const ui_cmd *cmd) {
    conv_settings *s = &c->set;
    switch (cmd->key) {
    case UI_SET_SHOW: show_settings(a, s); return;
    case UI_SET_TEMP: s->temperature = (float)cmd->value; break;
    case UI_SET_TOP_P:
        if (cmd->value <= 0) {
            app_reject(a, "/set top_p: must be above 0");
            return;
        }
        s->top_p = (float)cmd->value;
        break;
    case UI_SET_TOP_K: s->top_k = (int)cmd->ivalue; break;
    case UI_SET_MIN_P: s->min_p = (float)cmd->value; break;
    case UI_SET_MAX_TOKENS: s->max_tokens = (int)cmd->ivalue; break;
    case UI_SET_SEED: s->seed = (uint64_t)cmd->ivalue; break;
    }
    c->meta_dirty = true;
    app_save_conv(a, c, true, 0);
    show_settings(a, s);
}

/* /beam W the tab's provider cannot do (a remote server): refused at once. */
static bool cmd_beam_refused(ui_app *a, conv *c, long long width) {
    conv_settings s = c->set;
    s.beam = width > 1 ? (int)width : 0;
    llc_err err;
    if (!prov_check_settings(app_tab_prov(a, c), &s, &err)) return false;
    app_reject(a, "/beam: %s", err.msg);
    return true;
}

/* /system: shows the system prompt (no text), sets it, or (--clear) removes it. */
static void cmd_system(ui_app *a, conv *c, const ui_cmd *cmd) {
    if (!cmd->arg_len) {
        if (!c->system[0]) {
            ui_app_notice(a, false, "no system prompt in this session (/system TEXT sets one)");
            return;
        }
        sbuf text = {0};
        sb_printf(&text, "System prompt (/system TEXT replaces it, /system --clear removes it)\n%s\n", c->system);
        app_show_panel(a, &text);
        return;
    }
    if (!app_set_system(a, c, cmd->ivalue ? "" : cmd->arg, cmd->ivalue ? 0 : cmd->arg_len)) return;
    ui_app_notice(a, false, cmd->ivalue ? "system prompt cleared" : "system prompt set");
}

static void cmd_rename(ui_app *a, conv *c, const char *arg, size_t len) {
    char *t = strndup(arg, len);
    if (!t) {
        app_reject(a, "out of memory");
        return;
    }
    for (char *p = t; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t') *p = ' ';
    free(c->title);
    c->title = t;
    c->titled = true; /* the first message keeps it */
    c->meta_dirty = true;
    app_save_conv(a, c, true, 0);
    ui_app_notice(a, false, "renamed to '%s'", t);
}

bool ui_app_input(ui_app *a, const char *text, size_t len) {
    conv *c = ui_app_tab(a);
    ui_cmd cmd;
    char err[200];
    a->rejected = false;
    if (ui_cmd_parse(text, len, &cmd, err, sizeof err)) {
        app_reject(a, "%s", err);
        return false;
    }
    a->notice[0] = 0;
    a->close_confirm = NULL;
    free(c->draft); /* the input left the box (a refused one comes back to it) */
    c->draft = NULL;
    int64_t delete_pending = a->delete_confirm;
    a->delete_confirm = 0;
    unsigned panel_gen = a->panel_gen;
    bool busy = c->req_id != 0;
    switch (cmd.kind) {
    case UI_CMD_MESSAGE:
        if (cmd.arg_len) send_message(a, c, cmd.arg, cmd.arg_len);
        break;
    case UI_CMD_SYSTEM: cmd_system(a, c, &cmd); break;
    case UI_CMD_SET: apply_set(a, c, &cmd); break;
    case UI_CMD_N:
        c->set.n = (int)cmd.ivalue;
        c->meta_dirty = true;
        app_save_conv(a, c, true, 0);
        ui_app_notice(a, false, "%d answer%s per message", c->set.n, c->set.n == 1 ? "" : "s");
        break;
    case UI_CMD_BEAM:
        if (cmd_beam_refused(a, c, cmd.ivalue)) break;
        c->set.beam = cmd.ivalue > 1 ? (int)cmd.ivalue : 0;
        c->meta_dirty = true;
        app_save_conv(a, c, true, 0);
        ui_app_notice(a, false, c->set.beam ? "beam search, width %d" : "sampling (beam search off)", c->set.beam);
        break;
    case UI_CMD_ALT: app_cmd_alt(a, c, cmd.ivalue); break;
    case UI_CMD_REGEN:
        if (busy) app_reject(a, "an answer is still coming (Ctrl-C stops it)");
        else if (!c->n_msgs || c->msgs[c->n_msgs - 1]->role != DB_ROLE_USER)
            app_reject(a, "nothing to answer again yet");
        else start_answer(a, c);
        break;
    case UI_CMD_EDIT: app_cmd_edit(a, c); break;
    case UI_CMD_BRANCH:
        if (cmd.ivalue) app_cmd_versions(a, c, (int)cmd.ivalue);
        else app_cmd_branch(a, c);
        break;
    case UI_CMD_RENAME: cmd_rename(a, c, cmd.arg, cmd.arg_len); break;
    case UI_CMD_SESSIONS: app_cmd_sessions(a, cmd.ivalue != 0); break;
    case UI_CMD_OPEN: app_cmd_open(a, cmd.ivalue); break;
    case UI_CMD_ARCHIVE: app_cmd_archive(a, cmd.ivalue, true); break;
    case UI_CMD_UNARCHIVE: app_cmd_archive(a, cmd.ivalue, false); break;
    case UI_CMD_DELETE: app_cmd_delete(a, cmd.ivalue, delete_pending); break;
    case UI_CMD_TAB:
        if (cmd.ivalue > a->n_tabs) app_reject(a, "/tab %lld: there are %d tabs", cmd.ivalue, a->n_tabs);
        else ui_app_switch(a, (int)cmd.ivalue - 1);
        break;
    case UI_CMD_SEARCH: app_cmd_search(a, cmd.arg, cmd.arg_len); break;
    case UI_CMD_EXPORT: app_cmd_export(a, c, cmd.arg, cmd.arg_len); break;
    case UI_CMD_FILE: app_cmd_file(a, cmd.arg, cmd.arg_len); break;
    case UI_CMD_STATS: cmd_stats(a); break;
    case UI_CMD_MODEL: app_cmd_model(a, c, cmd.arg, cmd.arg_len, cmd.ivalue); break;
    case UI_CMD_COPY:
        app_cmd_copy(a, c, cmd.ivalue, cmd.block);
        break;
    case UI_CMD_ROLE: app_cmd_role(a, c, cmd.arg, cmd.arg_len); break;
    case UI_CMD_REASONING: cmd_reasoning(a, c); break;
    case UI_CMD_THINK:
        c->set.no_think = cmd.ivalue == 0;
        c->meta_dirty = true;
        app_save_conv(a, c, true, 0);
        ui_app_notice(a, false, c->set.no_think ? "thinking off: the model answers at once (templates that can)"
                                                : "thinking on");
        break;
    case UI_CMD_NEW: ui_app_new_tab(a); break;
    case UI_CMD_CLOSE: ui_app_close_tab(a); break;
    case UI_CMD_HELP: app_cmd_help(a); break;
    case UI_CMD_QUIT: ui_app_quit(a); break;
    }
    /* a panel stays only while the command that showed it is the last (a
     * refused command keeps it: the list is still there to fix the number) */
    if (a->panel && a->panel_gen == panel_gen && !a->rejected && cmd.kind != UI_CMD_MESSAGE)
        app_set_panel(a, NULL);
    a->changed = true;
    return !a->rejected;
}
