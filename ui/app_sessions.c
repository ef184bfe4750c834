/* app_sessions.c — the stored sessions from the chat (see app_internal.h):
 * /sessions [--all] with each one's last activity and model, /open N, /search,
 * /archive and /unarchive (hidden from the list, never lost), /delete (asked
 * twice), /export. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ui/app_internal.h"

/* The sessions a list numbered (and, for /search, the message each matched in; msgs NULL: none). */
static void remember_listed(ui_app *a, const int64_t *ids, const int64_t *msgs, int n) {
    free(a->listed);
    free(a->listed_msgs);
    a->listed = n ? malloc((size_t)n * sizeof *ids) : NULL;
    a->listed_msgs = n && msgs ? malloc((size_t)n * sizeof *msgs) : NULL;
    a->n_listed = a->listed ? n : 0;
    if (a->listed) memcpy(a->listed, ids, (size_t)n * sizeof *ids);
    if (a->listed_msgs) memcpy(a->listed_msgs, msgs, (size_t)n * sizeof *msgs);
}

/* "2026-11-26 14:05" in local time (today: only the time). */
static void format_when(int64_t ms, char *buf, size_t n) {
    time_t t = (time_t)(ms / 1000), now = time(NULL);
    struct tm tm, today;
    localtime_r(&t, &tm);
    localtime_r(&now, &today);
    if (tm.tm_year == today.tm_year && tm.tm_yday == today.tm_yday) strftime(buf, n, "today %H:%M", &tm);
    else strftime(buf, n, "%Y-%m-%d %H:%M", &tm);
}

void app_cmd_sessions(ui_app *a, bool all) {
    db_session *s = NULL;
    int n = 0;
    llc_err err;
    if (!a->db || db_session_list(a->db, all, &s, &n, &err)) {
        app_reject(a, "%s", a->db ? err.msg : a->db_error);
        return;
    }
    sbuf text = {0};
    int64_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
    if (!ids) text.oom = true; /* the list would be cut short: say so */
    sb_printf(&text, "Sessions%s (/open N reopens one, /archive N hides one%s)\n", all ? ", archived too" : "",
            all ? ", /unarchive N lists it again" : "; /sessions --all shows those");
    for (int i = 0; i < n && ids; i++) {
        ids[i] = s[i].id;
        char when[32], title[96];
        format_when(s[i].updated, when, sizeof when);
        size_t tl = 0;
        for (const char *p = s[i].title; *p && tl + 1 < sizeof title; p++) /* one line each */
            title[tl++] = *p == '\n' || *p == '\r' || *p == '\t' ? ' ' : *p;
        title[tl] = 0;
        sb_printf(&text, "%3d  %-16s  %s%s%s%s\n", i + 1, when, title, s[i].model[0] ? "  · " : "",
                app_base_name(s[i].model), s[i].archived ? "  [archived]" : "");
    }
    if (n == 0) sb_str(&text, "  (none yet)\n");
    if (ids) remember_listed(a, ids, NULL, n);
    a->listed_all = all;
    free(ids);
    db_sessions_free(s, n);
    app_show_panel(a, &text);
}

/* Copies a search snippet onto one line: line breaks and tabs become spaces,
 * runs of them one space. */
static char *one_line(const char *s) {
    char *out = malloc(strlen(s) + 1);
    if (!out) return NULL;
    size_t n = 0;
    for (; *s; s++) {
        bool space = *s == '\n' || *s == '\r' || *s == '\t' || *s == ' ';
        if (space && (n == 0 || out[n - 1] == ' ')) continue;
        out[n++] = space ? ' ' : *s;
    }
    while (n && out[n - 1] == ' ') n--;
    out[n] = 0;
    return out;
}

void app_cmd_search(ui_app *a, const char *q, size_t qlen) {
    char *query = strndup(q, qlen);
    db_hit *h = NULL;
    int n = 0;
    llc_err err;
    if (!query || !a->db || db_search(a->db, query, 20, &h, &n, &err)) {
        app_reject(a, "%s", !query ? "out of memory" : a->db ? err.msg : a->db_error);
        free(query);
        return;
    }
    sbuf text = {0};
    int64_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids), *msgs = malloc((size_t)(n ? n : 1) * sizeof *msgs);
    if (!ids || !msgs) text.oom = true; /* the list would be cut short: say so */
    sb_printf(&text, "Search: %s (/open N opens the session at the message)\n", query);
    for (int i = 0; i < n && ids && msgs; i++) {
        ids[i] = h[i].session_id;
        msgs[i] = h[i].message_id;
        char *title = one_line(h[i].title), *snippet = one_line(h[i].snippet);
        if (!title || !snippet) text.oom = true;
        sb_printf(&text, "%3d  %s: %s%s\n", i + 1, title ? title : "", h[i].in_reasoning ? "(in the thinking) " : "",
                snippet ? snippet : "");
        free(title);
        free(snippet);
    }
    if (n == 0) sb_str(&text, "  no message contains that\n");
    if (ids && msgs) remember_listed(a, ids, msgs, n);
    free(ids);
    free(msgs);
    db_hits_free(h, n);
    free(query);
    app_show_panel(a, &text);
}

/* The session numbered k in the last list, or 0 (rejected, saying so). */
static int64_t listed_session(ui_app *a, const char *cmd, long long k) {
    int64_t id = k >= 1 && k <= a->n_listed ? a->listed[k - 1] : 0;
    if (!id) app_reject(a, "/%s %lld: no such entry in the last /sessions or /search list", cmd, k);
    return id;
}

/* A search hit: the session's active branch becomes the one through the
 * message (its newest answers under it), an open tab showing the session is
 * reloaded on it (unless it is answering or not saved), and the view scrolls
 * to the message. */
static void open_at_message(ui_app *a, int64_t id, int64_t msg) {
    int64_t leaf;
    if (db_message_latest_leaf(a->db, msg, &leaf, NULL) == 0) db_session_set_active_leaf(a->db, id, leaf, NULL);
    ui_app_session_changed(a, id);
    for (int i = 0; i < a->n_tabs; i++)
        if (a->tabs[i]->session_id == id) a->tabs[i]->focus_id = msg;
}

void app_cmd_open(ui_app *a, long long k) {
    int64_t id = listed_session(a, "open", k);
    if (!id) return;
    int64_t msg = a->listed_msgs ? a->listed_msgs[k - 1] : 0;
    if (msg && a->db) open_at_message(a, id, msg);
    for (int i = 0; i < a->n_tabs; i++)
        if (a->tabs[i]->session_id == id) {
            ui_app_switch(a, i);
            return;
        }
    conv *c;
    llc_err err;
    if (!a->db || conv_load(a->db, id, &c, &err)) {
        ui_app_notice(a, true, "%s", a->db ? err.msg : a->db_error);
        return;
    }
    app_loaded_conv(a, c);
    c->focus_id = msg;
    if (app_add_tab(a, c)) {
        conv_free(c);
        return;
    }
    app_set_panel(a, NULL);
    app_save_tabs(a);
    app_models_load_next(a);
}

void app_cmd_archive(ui_app *a, long long k, bool archive) {
    const char *cmd = archive ? "archive" : "unarchive";
    int64_t id = listed_session(a, cmd, k);
    if (!id) return;
    llc_err err;
    db_session s;
    if (!a->db || db_session_get(a->db, id, &s, &err)) {
        app_reject(a, "/%s: %s", cmd, a->db ? err.msg : a->db_error);
        return;
    }
    bool was = s.archived;
    char title[64];
    snprintf(title, sizeof title, "%s", s.title);
    db_session_clear(&s);
    if (was == archive) {
        app_reject(a, "/%s %lld: '%s' is %s archived", cmd, k, title, archive ? "already" : "not");
        return;
    }
    if (db_session_set_archived(a->db, id, archive, &err)) {
        app_reject(a, "/%s: %s", cmd, err.msg);
        return;
    }
    app_cmd_sessions(a, a->listed_all); /* the numbers change: the list again */
    if (archive)
        ui_app_notice(a, false, "archived '%s': hidden from /sessions (/sessions --all shows it, /unarchive N brings it back)",
                      title);
    else ui_app_notice(a, false, "'%s' is listed again", title);
}

void app_cmd_delete(ui_app *a, long long k, int64_t pending) {
    int64_t id = listed_session(a, "delete", k);
    if (!id) return;
    llc_err err;
    db_session s;
    if (!a->db || db_session_get(a->db, id, &s, &err)) {
        app_reject(a, "/delete: %s", a->db ? err.msg : a->db_error);
        return;
    }
    char title[64];
    snprintf(title, sizeof title, "%s", s.title);
    db_session_clear(&s);
    for (int i = 0; i < a->n_tabs; i++)
        if (a->tabs[i]->session_id == id && a->tabs[i]->req_id) {
            app_reject(a, "/delete: '%s' is answering in tab %d (Ctrl-C stops it)", title, i + 1);
            return;
        }
    if (pending != id) { /* never lose a conversation by one slip: ask once more */
        a->delete_confirm = id;
        app_reject(a, "delete '%s' and all its messages for good? Enter again deletes it (/archive %lld only hides it)",
                   title, k);
        return;
    }
    if (db_session_delete(a->db, id, &err)) {
        app_reject(a, "/delete: %s", err.msg);
        return;
    }
    for (int i = a->n_tabs - 1; i >= 0; i--)
        if (a->tabs[i]->session_id == id) app_drop_tab(a, i);
    app_save_tabs(a);
    app_cmd_sessions(a, a->listed_all);
    ui_app_notice(a, false, "deleted '%s'", title);
}

void app_cmd_export(ui_app *a, conv *c, const char *arg, size_t len) {
    app_save_conv(a, c, true, 0);
    if (!a->db || !c->session_id) {
        app_reject(a, "nothing to export yet%s", a->db ? "" : " (no database)");
        return;
    }
    char name[64], path[2048];
    snprintf(name, sizeof name, "llmchat-%lld.md", (long long)c->session_id);
    if (app_full_path(len ? arg : name, len ? len : strlen(name), path, sizeof path)) {
        app_reject(a, "/export: %s", path);
        return;
    }
    /* (a conversation: readable by its owner only, as the database is) */
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    llc_err err;
    if (!f) {
        if (fd >= 0) close(fd);
        app_reject(a, "/export: cannot write %s: %s", path, strerror(errno));
        return;
    }
    int rc = db_export_markdown(a->db, c->session_id, 0, f, &err);
    if (fclose(f) && !rc) rc = LLC_ERR_IO, snprintf(err.msg, sizeof err.msg, "write failed");
    if (rc) app_reject(a, "/export: %s", err.msg);
    else ui_app_notice(a, false, "exported to %s", path);
}

/* ---- another program's work on stored sessions (see app.h) ---- */

void ui_app_session_changed(ui_app *a, int64_t session_id) {
    if (!a->db) return;
    for (int i = 0; i < a->n_tabs; i++) {
        conv *c = a->tabs[i];
        if (c->session_id != session_id || c->req_id || conv_unsaved(c)) continue;
        conv *fresh;
        if (conv_load(a->db, session_id, &fresh, NULL)) continue;
        app_loaded_conv(a, fresh);
        fresh->scroll = c->scroll;
        fresh->scroll_rows = c->scroll_rows;
        fresh->draft = c->draft, c->draft = NULL;
        a->tabs_gen++;
        if (a->close_confirm == c) a->close_confirm = NULL;
        conv_free(c);
        a->tabs[i] = fresh;
        a->changed = true;
    }
}

void ui_app_session_text(ui_app *a, int64_t session_id, int64_t message_id, const char *text,
                         size_t len) {
    for (int i = 0; i < a->n_tabs; i++) {
        conv *c = a->tabs[i];
        if (c->session_id != session_id) continue;
        for (int k = 0; k < c->n_alts; k++) {
            conv_msg *m = c->alts[k];
            if (m->id != message_id) continue;
            bool was_dirty = m->dirty;
            conv_append(c, k, text, len);
            m->dirty = was_dirty; /* the other program stores it, not this tab */
            a->changed = true;
        }
    }
}
