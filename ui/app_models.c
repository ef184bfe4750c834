/* app_models.c — models other than the default (see app_internal.h): /model
 * PATH, /model's numbered list (open, recently used by sessions, named in the
 * config file, found where other tools keep their downloads) and /model N, opening a model on a thread of its own with the
 * time so far shown, and the tabs that wait for one (also sessions that
 * remember a model at start). */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "ui/app_internal.h"
#include "ui/model_find.h"

struct ui_loader {
    pthread_t thread;
    char *path;
    int fd;             /* eventfd, written when the thread is done */
    double start_ms;
    int shown_tenths;   /* the progress last shown */
    /* set by the thread before it writes fd */
    int rc;
    provider *result;
    llc_err err;
    int (*open_model)(void *ctx, const char *path, provider **out, llc_err *err);
    void *open_ctx;
};

int app_models_fd(const ui_app *a) { return a->loader ? a->loader->fd : -1; }

static void *loader_main(void *arg) {
    struct ui_loader *l = arg;
    l->rc = l->open_model(l->open_ctx, l->path, &l->result, &l->err);
    uint64_t one = 1;
    if (write(l->fd, &one, sizeof one) < 0) { /* the UI polls the thread on its tick too */
    }
    return NULL;
}

const char *app_base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static provider *find_model(const ui_app *a, const char *path) {
    for (int i = 0; i < a->n_models; i++)
        if (!strcmp(a->models[i].path, path)) return a->models[i].prov;
    return NULL;
}

void app_models_attach(ui_app *a, conv *c) {
    c->prov = c->model[0] ? find_model(a, c->model) : NULL;
}

void app_models_load_next(ui_app *a) {
    if (a->loader || !a->cfg.open_model) return;
    const char *want = NULL;
    for (int i = 0; i < a->n_tabs && !want; i++)
        if (a->tabs[i]->model[0] && !a->tabs[i]->prov) want = a->tabs[i]->model;
    if (!want) return;
    struct ui_loader *l = calloc(1, sizeof *l);
    if (!l || !(l->path = strdup(want)) || (l->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        if (l) free(l->path);
        free(l);
        ui_app_notice(a, true, "cannot open %s: out of resources", app_base_name(want));
        return;
    }
    l->open_model = a->cfg.open_model;
    l->open_ctx = a->cfg.open_ctx;
    l->start_ms = llc_now_ms();
    l->shown_tenths = -1;
    if (pthread_create(&l->thread, NULL, loader_main, l)) {
        close(l->fd);
        free(l->path);
        free(l);
        ui_app_notice(a, true, "cannot open %s: no thread", app_base_name(want));
        return;
    }
    a->loader = l;
    ui_app_notice(a, false, "loading %s ...", app_base_name(l->path));
}

/* Waits for the loading thread and frees it; the provider it made (if any) is returned. */
static provider *loader_join(struct ui_loader *l, int *rc, llc_err *err) {
    pthread_join(l->thread, NULL);
    provider *p = l->result;
    *rc = l->rc;
    *err = l->err;
    close(l->fd);
    free(l->path);
    free(l);
    return p;
}

/* A tab whose model could not be opened goes back to the one it had before
 * /model (a session restored with it: to the default), in the database too. */
static void tab_back(ui_app *a, conv *c) {
    char *prev = c->model_prev ? c->model_prev : strdup("");
    if (!prev) {
        c->model[0] = 0;
    } else {
        free(c->model);
        c->model = prev;
        c->model_prev = NULL;
    }
    app_models_attach(a, c);
    if (c->session_id && a->db) db_session_set_model(a->db, c->session_id, app_model_name(a, c), NULL);
}

void app_models_poll(ui_app *a, double now_ms) {
    struct ui_loader *l = a->loader;
    if (!l) return;
    uint64_t v;
    if (read(l->fd, &v, sizeof v) != (ssize_t)sizeof v) { /* still loading: the time so far */
        int tenths = (int)((now_ms - l->start_ms) / 100);
        if (tenths != l->shown_tenths) {
            l->shown_tenths = tenths;
            ui_app_notice(a, false, "loading %s ... %.1f s", app_base_name(l->path), tenths / 10.0);
        }
        return;
    }
    char *path = strdup(l->path);
    double secs = (now_ms - l->start_ms) / 1000;
    int rc;
    llc_err err;
    a->loader = NULL;
    provider *p = loader_join(l, &rc, &err);
    ui_model *m = rc == 0 && path ? realloc(a->models, (size_t)(a->n_models + 1) * sizeof *m) : NULL;
    if (m) {
        a->models = m;
        a->models[a->n_models++] = (ui_model){path, p};
        for (int i = 0; i < a->n_tabs; i++)
            if (!strcmp(a->tabs[i]->model, path)) app_models_attach(a, a->tabs[i]);
        ui_app_notice(a, false, "%s is ready (%.1f s); its tabs answer with it", app_base_name(path), secs);
    } else {
        prov_free(p);
        char stays[300] = "";
        for (int i = 0; i < a->n_tabs; i++) {
            conv *c = a->tabs[i];
            if (!path || strcmp(c->model, path)) continue;
            tab_back(a, c);
            if (!stays[0] || i == a->cur) snprintf(stays, sizeof stays, "%s", app_base_name(app_model_name(a, c)));
        }
        ui_app_notice(a, true, "cannot open %s: %s (%s%s)", path ? app_base_name(path) : "the model",
                      rc ? err.msg : "out of memory", stays[0] ? "the tab answers with " : "no tab waits for it", stays);
        free(path);
    }
    for (int i = 0; i < a->n_tabs; i++) /* (a tab whose model is open has nothing to go back to) */
        if (a->tabs[i]->prov || !a->tabs[i]->model[0]) free(a->tabs[i]->model_prev), a->tabs[i]->model_prev = NULL;
    a->changed = true;
    app_models_load_next(a);
}

/* The numbered list of the last /model (see picks_build). */
static void picks_clear(ui_app *a) {
    for (int i = 0; i < a->n_picks; i++) free(a->picks[i]), free(a->pick_names[i]);
    free(a->picks);
    free(a->pick_names);
    a->picks = NULL;
    a->pick_names = NULL;
    a->n_picks = 0;
}

void app_models_free(ui_app *a) {
    if (a->loader) { /* a model still loading: wait for it, then let it go */
        int rc;
        llc_err e;
        prov_free(loader_join(a->loader, &rc, &e));
        a->loader = NULL;
    }
    for (int i = 0; i < a->n_models; i++) {
        prov_free(a->models[i].prov);
        free(a->models[i].path);
    }
    free(a->models);
    a->models = NULL;
    a->n_models = 0;
    picks_clear(a);
}

/* ---- /model: the numbered list, and switching ---- */

/* Adds a model file to the list unless it is there already ("" is the default;
 * the default's own file is the default too); name: how to show it (NULL: by
 * its file name). */
static void pick_add(ui_app *a, const char *path, const char *name) {
    if (a->cfg.model_path && a->cfg.model_path[0] && !strcmp(path, a->cfg.model_path)) path = "";
    for (int i = 0; i < a->n_picks; i++)
        if (!strcmp(a->picks[i], path)) return;
    char **p = realloc(a->picks, (size_t)(a->n_picks + 1) * sizeof *p);
    if (p) a->picks = p;
    char **nm = p ? realloc(a->pick_names, (size_t)(a->n_picks + 1) * sizeof *nm) : NULL;
    if (!nm) return;
    a->pick_names = nm;
    nm[a->n_picks] = name ? strdup(name) : NULL;
    if ((p[a->n_picks] = strdup(path))) a->n_picks++;
    else free(nm[a->n_picks]);
}

enum { RECENT_MAX = 10 }; /* models of stored sessions listed at most */

/* The models /model numbers: the default, those open or loading, those stored
 * sessions used (most recently active first), those the config file names,
 * then those other tools downloaded (Hugging Face, Ollama, llama.cpp, LM Studio). */
static void picks_build(ui_app *a) {
    picks_clear(a);
    pick_add(a, "", NULL);
    for (int i = 0; i < a->n_models; i++) pick_add(a, a->models[i].path, NULL);
    if (a->loader) pick_add(a, a->loader->path, NULL);
    db_session *s = NULL;
    int n = 0;
    if (a->db && db_session_list(a->db, true, &s, &n, NULL) == 0) {
        int base = a->n_picks;
        for (int i = 0; i < n && a->n_picks - base < RECENT_MAX; i++)
            if (s[i].model[0] == '/') pick_add(a, s[i].model, NULL); /* (other names are the default's, or a server's) */
        db_sessions_free(s, n);
    }
    for (int i = 0; i < a->cfg.n_config_models; i++) {
        char abs[PATH_MAX];
        pick_add(a, realpath(a->cfg.config_models[i], abs) ? abs : a->cfg.config_models[i], NULL);
    }
    found_model *found = NULL;
    int n_found = 0;
    model_find(&found, &n_found); /* (out of memory: what was found) */
    for (int i = 0; i < n_found; i++) pick_add(a, found[i].path, found[i].name);
    model_find_free(found, n_found);
}

static void show_picks(ui_app *a, conv *c, sbuf *text) {
    picks_build(a);
    sb_printf(text, "Models (/model N switches this tab to model N, /model PATH to any file; /model 1 goes back)\n");
    for (int i = 0; i < a->n_picks; i++) {
        const char *p = a->picks[i];
        bool is_default = !p[0], here = !strcmp(c->model, p);
        bool open = is_default || find_model(a, p), loading = a->loader && !strcmp(a->loader->path, p);
        const char *name = is_default ? prov_model_name(a->cfg.prov) : a->pick_names[i] ? a->pick_names[i] : app_base_name(p);
        sb_printf(text, "%3d  %s%s%s%s%s%s\n", i + 1, name,
                is_default ? "  (default)" : "", here ? "  (this tab)" : "", open && !is_default ? "  (open)" : "",
                loading ? "  (loading)" : "", !is_default && access(p, R_OK) ? "  (missing)" : "");
        if (!is_default) sb_printf(text, "       %s\n", p);
    }
}

void app_cmd_model(ui_app *a, conv *c, const char *arg, size_t len, long long pick) {
    if (!len && !pick) {
        char *about = prov_about(app_tab_prov(a, c));
        sbuf text = {0};
        sb_printf(&text, "%s\n  database %s\n", about ? about : "", a->db ? db_path(a->db) : a->db_error);
        free(about);
        if (a->cfg.open_model) show_picks(a, c, &text);
        app_show_panel(a, &text);
        return;
    }
    if (!a->cfg.open_model) {
        app_reject(a, "/model PATH: this chat cannot open other models");
        return;
    }
    if (pick) {
        if (pick > a->n_picks) {
            app_reject(a, "/model %lld: no such entry in the last /model list (/model shows it)", pick);
            return;
        }
        arg = a->picks[pick - 1][0] ? a->picks[pick - 1] : "default";
        len = strlen(arg);
    }
    if (c->req_id) {
        app_reject(a, "an answer is still coming (Ctrl-C stops it)");
        return;
    }
    char path[PATH_MAX];
    if (len >= sizeof path) {
        app_reject(a, "/model: the path is too long");
        return;
    }
    memcpy(path, arg, len);
    path[len] = 0;
    bool to_default = !strcmp(path, "default") || (a->cfg.model_path && !strcmp(path, a->cfg.model_path));
    char abs[PATH_MAX];
    if (!to_default && (access(path, R_OK) || !realpath(path, abs))) {
        app_reject(a, "/model: cannot read %s", path);
        return;
    }
    if (!to_default) { /* sessions remember the model by its absolute path */
        snprintf(path, sizeof path, "%s", abs);
        to_default = a->cfg.model_path && !strcmp(path, a->cfg.model_path);
    }
    if (!to_default && a->loader && strcmp(a->loader->path, path)) {
        app_reject(a, "%s is still loading: one model at a time", app_base_name(a->loader->path));
        return;
    }
    char *m = strdup(to_default ? "" : path);
    if (!m) {
        app_reject(a, "out of memory");
        return;
    }
    if (!c->model_prev) c->model_prev = c->model; /* (a switch while one loads goes back to the first) */
    else free(c->model);
    c->model = m;
    app_models_attach(a, c);
    if (c->prov || !c->model[0]) free(c->model_prev), c->model_prev = NULL; /* open at once: nothing to go back to */
    if (c->session_id && a->db) db_session_set_model(a->db, c->session_id, app_model_name(a, c), NULL);
    app_set_panel(a, NULL);
    if (to_default) ui_app_notice(a, false, "this tab answers with %s again", prov_model_name(a->cfg.prov));
    else if (c->prov) ui_app_notice(a, false, "this tab answers with %s", app_base_name(path));
    else app_models_load_next(a);
}
