/* app_tabs.c — the chat application's tabs and what every command shares (see
 * app_internal.h): the notice line, refusing a line of input, the panel, the
 * text a panel is built of, a tab's provider and model, saving a tab; the tab
 * list (a new tab with the config's defaults, switching, closing, dropping).
 * app.c and the command files (app_*.c) call these; they call none of them. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ui/app_internal.h"

static void notice_v(ui_app *a, bool error, const char *fmt, va_list ap) {
    vsnprintf(a->notice, sizeof a->notice, fmt, ap);
    a->notice_error = error;
    a->changed = true;
}

void ui_app_notice(ui_app *a, bool error, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    notice_v(a, error, fmt, ap);
    va_end(ap);
}

/* Refuses a line of input: the notice says why and the view keeps the text in
 * the input box (ui_app_input returns false). */
void app_reject(ui_app *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    notice_v(a, true, fmt, ap);
    va_end(ap);
    a->rejected = true;
}

void app_set_panel(ui_app *a, char *text) {
    free(a->panel);
    a->panel = text;
    a->panel_gen++;
    a->changed = true;
}

void app_show_panel(ui_app *a, sbuf *text) {
    char *t = sb_take(text);
    if (!t) {
        app_reject(a, "out of memory");
        return;
    }
    app_set_panel(a, t);
}

conv *ui_app_tab(const ui_app *a) { return a->n_tabs ? a->tabs[a->cur] : NULL; }

provider *app_tab_prov(const ui_app *a, const conv *c) { return c->prov ? c->prov : a->cfg.prov; }

const char *app_model_name(const ui_app *a, const conv *c) {
    return c->model[0] ? c->model : prov_model_name(a->cfg.prov);
}

void app_save_tabs(ui_app *a) {
    if (!a->db) return;
    int64_t ids[256];
    int n = 0, active = -1;
    for (int i = 0; i < a->n_tabs && n < 256; i++) {
        if (!a->tabs[i]->session_id) continue;
        if (i == a->cur) active = n;
        ids[n++] = a->tabs[i]->session_id;
    }
    db_tabs_save(a->db, ids, n, active, NULL);
}

void app_save_conv(ui_app *a, conv *c, bool force, double now) {
    bool had_session = c->session_id != 0;
    if (conv_save(c, a->db, app_model_name(a, c), force, now) == 0) {
        if (!had_session && c->session_id) app_save_tabs(a);
        return;
    }
    if (!a->notice_error || strcmp(a->notice, c->save_error))
        ui_app_notice(a, true, "not saved (kept in memory, retrying): %s",
                      a->db ? c->save_error : a->db_error);
}

bool app_set_system(ui_app *a, conv *c, const char *text, size_t len) {
    char *s = strndup(text, len);
    if (!s) {
        app_reject(a, "out of memory");
        return false;
    }
    free(c->system);
    c->system = s;
    c->meta_dirty = true;
    app_save_conv(a, c, true, 0);
    return true;
}

/* ---- the tab list ---- */

/* A new tab's settings from the config file's defaults. */
int app_tab_defaults(const ui_app *a, conv *c) {
    const ui_app_config *cf = &a->cfg;
    if (cf->has_temperature) c->set.temperature = cf->temperature;
    if (cf->max_tokens > 0) c->set.max_tokens = cf->max_tokens;
    if (cf->system && *cf->system) {
        char *s = strdup(cf->system);
        if (!s) return LLC_ERR_NOMEM;
        free(c->system);
        c->system = s;
    }
    if (cf->has_temperature || cf->max_tokens > 0 || (cf->system && *cf->system)) c->meta_dirty = true;
    return 0;
}

int app_add_tab(ui_app *a, conv *c) {
    conv **t = realloc(a->tabs, (size_t)(a->n_tabs + 1) * sizeof *t);
    if (!t) return LLC_ERR_NOMEM;
    a->tabs = t;
    a->tabs[a->n_tabs++] = c;
    a->tabs_gen++;
    a->cur = a->n_tabs - 1;
    a->changed = true;
    return 0;
}

void ui_app_new_tab(ui_app *a) {
    conv *c = NULL;
    if (conv_create(NULL, &c) || app_tab_defaults(a, c) || app_add_tab(a, c)) {
        conv_free(c);
        ui_app_notice(a, true, "out of memory");
        return;
    }
    app_set_panel(a, NULL);
}

void ui_app_switch(ui_app *a, int index) {
    if (a->n_tabs == 0) return;
    if (index < 0) index = a->n_tabs - 1;
    if (index >= a->n_tabs) index = 0;
    if (index != a->cur) app_set_panel(a, NULL);
    a->close_confirm = NULL;
    a->cur = index;
    a->changed = true;
    app_save_tabs(a);
}

void ui_app_close_tab(ui_app *a) {
    conv *c = ui_app_tab(a);
    if (!c) return;
    if (c->req_id) { /* closing keeps the session: let the answer end as cancelled */
        prov_cancel(app_tab_prov(a, c), c->req_id);
        c->req_id = 0;
        for (int k = 0; k < c->n_alts; k++)
            if (c->alts[k]->state == DB_STATE_STREAMING)
                conv_finish(c, k, DB_STATE_CANCELLED, "cancelled", NULL);
    }
    app_save_conv(a, c, true, 0);
    if (conv_unsaved(c) && a->close_confirm != c) { /* closing would lose it: ask once more */
        a->close_confirm = c;
        ui_app_notice(a, true, "this tab is not saved (%s): closing it again (Alt-W, /close) loses it",
                      a->db ? c->save_error : a->db_error);
        return;
    }
    a->close_confirm = NULL;
    memmove(&a->tabs[a->cur], &a->tabs[a->cur + 1], (size_t)(a->n_tabs - a->cur - 1) * sizeof *a->tabs);
    a->n_tabs--;
    a->tabs_gen++;
    conv_free(c);
    if (a->cur >= a->n_tabs) a->cur = a->n_tabs - 1;
    if (a->n_tabs == 0) ui_app_new_tab(a);
    app_save_tabs(a);
    app_set_panel(a, NULL);
    a->changed = true;
}

void app_drop_tab(ui_app *a, int i) {
    if (i < 0 || i >= a->n_tabs) return;
    conv *c = a->tabs[i];
    if (c->req_id) prov_cancel(app_tab_prov(a, c), c->req_id);
    if (a->close_confirm == c) a->close_confirm = NULL;
    conv_free(c);
    memmove(&a->tabs[i], &a->tabs[i + 1], (size_t)(a->n_tabs - i - 1) * sizeof *a->tabs);
    a->n_tabs--;
    a->tabs_gen++;
    if (a->cur > i || a->cur >= a->n_tabs) a->cur = a->cur > 0 ? a->cur - 1 : 0;
    if (a->n_tabs == 0) ui_app_new_tab(a);
    a->changed = true;
}
