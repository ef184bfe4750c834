/* app_branch.c — the branches of a conversation from the chat (see
 * app_internal.h): /edit (a new version of your last message; Esc leaves it),
 * /branch next|prev (switching between the versions of your message, and with
 * them the answers below each), /alt (the answers to the last message), and
 * /branch (a copy of the conversation in a new tab). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ui/app_internal.h"

/* The user messages among the children of parent (0: the session's roots),
 * oldest first: *out malloc'd ids. */
static int user_versions(ui_app *a, int64_t session_id, int64_t parent, int64_t **out, int *n, llc_err *err) {
    db_message *sib = NULL;
    int n_sib = 0;
    int rc = db_message_children(a->db, session_id, parent, &sib, &n_sib, err);
    if (rc) return rc;
    int64_t *ids = malloc((size_t)(n_sib ? n_sib : 1) * sizeof *ids);
    int k = 0;
    for (int i = 0; ids && i < n_sib; i++)
        if (sib[i].role == DB_ROLE_USER) ids[k++] = sib[i].id;
    db_messages_free(sib, n_sib);
    if (!ids) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    *out = ids;
    *n = k;
    return 0;
}

/* The parent of stored message id. */
static int64_t parent_of(ui_app *a, int64_t id) {
    db_message m;
    if (db_message_get(a->db, id, &m, NULL)) return -1;
    int64_t p = m.parent_id;
    db_message_clear(&m);
    return p;
}

void app_count_versions(ui_app *a, conv *c) {
    if (!a->db || !c->session_id) return;
    for (int i = 0; i < c->n_msgs; i++) {
        conv_msg *m = c->msgs[i];
        if (m->role != DB_ROLE_USER || !m->id) continue;
        int64_t parent = parent_of(a, m->id), *ids;
        int n;
        if (parent < 0 || user_versions(a, c->session_id, parent, &ids, &n, NULL)) continue;
        m->n_versions = n;
        for (int k = 0; k < n; k++)
            if (ids[k] == m->id) m->version = k + 1;
        free(ids);
    }
}

bool ui_app_escape(ui_app *a) {
    app_set_panel(a, NULL);
    a->notice[0] = 0;
    free(a->warnings);
    a->warnings = NULL;
    a->close_confirm = NULL;
    a->delete_confirm = 0;
    conv *c = ui_app_tab(a);
    if (!c || !c->editing) return false;
    c->editing = false;
    ui_app_notice(a, false, "left /edit: your message is as it was");
    return true;
}

void app_cmd_edit(ui_app *a, conv *c) {
    if (c->req_id) app_reject(a, "an answer is still coming (Ctrl-C stops it)");
    else if (!c->n_msgs || c->msgs[c->n_msgs - 1]->role != DB_ROLE_USER) app_reject(a, "no message of yours to edit");
    else {
        free(a->edit_text);
        a->edit_text = strdup(c->msgs[c->n_msgs - 1]->text);
        c->editing = true;
        ui_app_notice(a, false, "editing your last message: Enter sends it as a new version, Esc leaves it as it was");
    }
}

void app_cmd_versions(ui_app *a, conv *c, int dir) {
    if (c->req_id) {
        app_reject(a, "an answer is still coming (Ctrl-C stops it)");
        return;
    }
    app_save_conv(a, c, true, 0);
    if (!a->db || !c->session_id || conv_unsaved(c)) {
        app_reject(a, "/branch %s: the other versions are in the database, and this tab is not saved yet",
                   dir > 0 ? "next" : "prev");
        return;
    }
    int at = -1; /* the latest of the user's messages that has other versions */
    for (int i = c->n_msgs - 1; i >= 0 && at < 0; i--)
        if (c->msgs[i]->role == DB_ROLE_USER && c->msgs[i]->n_versions > 1) at = i;
    if (at < 0) {
        app_reject(a, "your messages here have one version each (/edit makes another)");
        return;
    }
    llc_err err;
    int64_t *ids = NULL, parent = parent_of(a, c->msgs[at]->id), leaf = 0;
    int n = 0, cur = 0;
    if (parent < 0 || user_versions(a, c->session_id, parent, &ids, &n, &err) || n < 2) {
        free(ids);
        app_reject(a, "/branch: the versions of your message cannot be read");
        return;
    }
    for (int k = 0; k < n; k++)
        if (ids[k] == c->msgs[at]->id) cur = k;
    int next = ((cur + dir) % n + n) % n;
    int64_t target = ids[next];
    free(ids);
    conv *fresh;
    if (db_message_latest_leaf(a->db, target, &leaf, &err) ||
        db_session_set_active_leaf(a->db, c->session_id, leaf, &err) || conv_load(a->db, c->session_id, &fresh, &err)) {
        app_reject(a, "/branch: %s", err.msg);
        return;
    }
    app_loaded_conv(a, fresh);
    fresh->scroll = 0;
    if (a->close_confirm == c) a->close_confirm = NULL;
    conv_free(c);
    a->tabs[a->cur] = fresh;
    app_models_load_next(a);
    ui_app_notice(a, false, "your message, version %d of %d (/branch next|prev for the others)", next + 1, n);
}

void app_cmd_branch(ui_app *a, conv *c) {
    conv *b;
    char *title = NULL;
    if (asprintf(&title, "%s (branch)", c->title) < 0) title = NULL;
    if (!title || conv_create(title, &b)) {
        free(title);
        ui_app_notice(a, true, "out of memory");
        return;
    }
    free(title);
    free(b->system);
    b->system = strdup(c->system);
    free(b->model);
    b->model = strdup(c->model);
    b->prov = c->prov;
    b->set = c->set;
    b->titled = true;
    for (int i = 0; i < conv_n_shown(c); i++) { /* copies of the shown messages */
        conv_msg *m = conv_shown(c, i);
        if (m->state == DB_STATE_STREAMING) break;
        if (m->role == DB_ROLE_USER) conv_add_user(b, m->text, m->len);
        else if (conv_open_answers(b, 1) >= 0) {
            conv_append(b, b->n_alts - 1, m->text, m->len);
            conv_finish(b, b->n_alts - 1, m->state, m->finish, &m->usage);
        }
    }
    if (!b->system || !b->model || app_add_tab(a, b)) {
        conv_free(b);
        ui_app_notice(a, true, "out of memory");
        return;
    }
    app_save_conv(a, b, true, 0);
    ui_app_notice(a, false, "branched into a new tab");
}

void app_cmd_alt(ui_app *a, conv *c, long long k) {
    if (c->n_alts < 2) {
        app_reject(a, "there is only one answer here (/regen or /n K make more)");
        return;
    }
    if (k > c->n_alts) {
        app_reject(a, "/alt %lld: there are %d answers", k, c->n_alts);
        return;
    }
    c->alt_cur = k > 0 ? (int)k - 1 : (c->alt_cur + 1) % c->n_alts;
    ui_app_notice(a, false, "answer %d of %d", c->alt_cur + 1, c->n_alts);
    app_save_conv(a, c, true, 0); /* remembers the branch shown as the active path */
}

/* ---- a session loaded from the database ---- */

void app_loaded_conv(ui_app *a, conv *c) {
    /* no other models here, or the default model named by its path: the default */
    if (!a->cfg.open_model || (a->cfg.model_path && !strcmp(c->model, a->cfg.model_path))) c->model[0] = 0;
    app_models_attach(a, c);
    app_count_versions(a, c);
}
