/* test_app.c — the chat application (ui/app) without a terminal, on a scripted
 * provider: nothing the user typed is lost (a message sent while an answer
 * streams waits and goes after it; a refused command or a message too long for
 * the context is not committed and stays in the input), the streaming answer
 * reaches the database at least every CONV_STREAM_SAVE_MS of its arrival, the
 * input history is kept per database, and a failed answer keeps its text with
 * the reason. The rough edges of issue 19: /edit can be left, versions of a
 * message can be switched, /system shows before it changes anything, cut-off
 * answers are marked, sessions are archived or deleted only when asked twice,
 * panels and notices do not outstay their command, two UIs on one database
 * are warned, and /model lists the models open, used by sessions and named in
 * the config file, each once, for /model N to pick. Issue 33: /copy code K
 * takes a code block by its number, the config's defaults make a new tab's
 * settings, and /role applies a named system prompt. */
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/test.h"

#include <sys/stat.h>
#include "ui/app.h"
#include "ui/app_internal.h" /* app_show_panel */
#include "ui/thinking.h"

/* ---- a provider the test drives by hand ---- */

typedef struct fake {
    provider base;
    int64_t next_id;
    int n_submits;
    char last_user[256];   /* the last message of the last submit */
    char first[256];       /* its first message (the system prompt, when there is one) */
    conv_settings set;     /* its settings */
    char last_reasoning[256]; /* the reasoning of the turn before it (an answer's) */
    int n_msgs;
    prov_event *q[256];
    int nq;
    int max_len;           /* check refuses a last message longer than this */
} fake;

static int f_check(provider *p, const chat_msg *m, int n, const conv_settings *s, llc_err *err) {
    fake *f = (fake *)p;
    if ((int)strlen(m[n - 1].content) > f->max_len)
        return llc_fail(err, LLC_ERR_RANGE, "the message is %zu tokens; the context holds %d",
                        strlen(m[n - 1].content), f->max_len);
    return 0;
}
static int64_t f_submit(provider *p, const chat_msg *m, int n, const conv_settings *s, prov_started *out,
                        llc_err *err) {
    fake *f = (fake *)p;
    f->n_submits++;
    f->n_msgs = n;
    snprintf(f->last_user, sizeof f->last_user, "%s", m[n - 1].content);
    snprintf(f->first, sizeof f->first, "%s", m[0].content);
    f->set = *s;
    snprintf(f->last_reasoning, sizeof f->last_reasoning, "%s", n > 1 && m[n - 2].reasoning ? m[n - 2].reasoning : "");
    *out = (prov_started){.n_answers = s->n, .n_dropped = 0};
    return ++f->next_id;
}
static void f_cancel(provider *p, int64_t id) {}
static prov_event *f_next(provider *p) {
    fake *f = (fake *)p;
    if (!f->nq) return NULL;
    prov_event *ev = f->q[0];
    memmove(f->q, f->q + 1, (size_t)--f->nq * sizeof *f->q);
    return ev;
}
static int f_fd(const provider *p) { return -1; }
static void f_status(provider *p, char *buf, size_t n) { snprintf(buf, n, " fake "); }
static char *f_text(provider *p) { return strdup("fake"); }
static const char *f_name(const provider *p) { return "fake-model"; }
static void f_destroy(provider *p) {}
static const provider_ops f_ops = {f_check, f_submit, f_cancel, f_next, f_fd, f_status,
                                   f_text, f_text, f_name, f_destroy, NULL};

static fake g_fake, g_other;
static int g_opens;

/* /model PATH: "opens" the second fake after a while, on the app's loading thread */
static int open_other(void *ctx, const char *path, provider **out, llc_err *err) {
    usleep(100 * 1000);
    __atomic_add_fetch(&g_opens, 1, __ATOMIC_SEQ_CST);
    if (strstr(path, "broken")) return llc_fail(err, LLC_ERR_FORMAT, "not a GGUF file");
    g_other = (fake){.base.ops = &f_ops, .max_len = 1000, .next_id = 100};
    *out = &g_other.base;
    return 0;
}
static char g_dir[64], g_db[128];

static void push(prov_event *ev) { g_fake.q[g_fake.nq++] = ev; }
static void text(int64_t id, const char *t) { push(prov_event_text(id, 0, t, strlen(t))); }
static void done(int64_t id, int state, const char *why) {
    push(prov_event_done(id, 0, state, state == DB_STATE_ERROR ? "error" : "stop", NULL, why));
}
/* Answers the tab's request with text, done. */
static void answer(ui_app *a, const char *t) {
    int64_t id = ui_app_tab(a)->req_id;
    text(id, t);
    done(id, DB_STATE_DONE, NULL);
    ui_app_poll_events(a, 0);
}

static ui_app *open_app(void) {
    g_fake = (fake){.base.ops = &f_ops, .max_len = 1000};
    ui_app_config cfg = {.prov = &g_fake.base, .db_path = g_db, .open_model = open_other};
    ui_app *a = NULL;
    llc_err err;
    CHECKF(ui_app_create(&cfg, &a, &err) == 0, "%s", err.msg);
    return a;
}

static bool input(ui_app *a, const char *s) { return ui_app_input(a, s, strlen(s)); }

/* The stored content of the newest message (the answer). */
static char *stored_answer(ui_app *a) {
    conv *c = ui_app_tab(a);
    db_message m;
    if (!c->n_alts || !c->alts[c->alt_cur]->id || db_message_get(a->db, c->alts[c->alt_cur]->id, &m, NULL))
        return strdup("");
    char *s = strdup(m.content);
    db_message_clear(&m);
    return s;
}

static void test_message_while_streaming_is_queued(void) {
    ui_app *a = open_app();
    conv *c = ui_app_tab(a);
    CHECK(input(a, "first"));
    CHECK(g_fake.n_submits == 1 && c->req_id == 1);
    text(1, "Hel");
    ui_app_poll_events(a, 0);
    CHECK(input(a, "second, typed while it streams")); /* taken: it waits */
    CHECK(c->queued && !strcmp(c->queued, "second, typed while it streams"));
    CHECK(g_fake.n_submits == 1);
    CHECK(!input(a, "third")); /* only one waits: this one stays in the input */
    CHECK(strstr(a->notice, "already waiting") != NULL);
    text(1, "lo");
    done(1, DB_STATE_DONE, NULL);
    ui_app_poll_events(a, 10);
    CHECK(g_fake.n_submits == 2 && !strcmp(g_fake.last_user, "second, typed while it streams"));
    CHECK(g_fake.n_msgs == 3); /* first, its answer "Hello", second */
    CHECK(!c->queued && c->req_id == 2);
    CHECK(c->n_msgs == 3 && !strcmp(c->msgs[1]->text, "Hello"));
    done(2, DB_STATE_DONE, NULL);
    ui_app_poll_events(a, 20);
    CHECK(c->req_id == 0);
    /* /n 2 set while an answer streams; the queued message then gets two answers */
    CHECK(input(a, "third"));
    CHECK(input(a, "/n 2"));
    CHECK(input(a, "fourth"));
    done(3, DB_STATE_DONE, NULL);
    ui_app_poll_events(a, 30);
    CHECK(c->req_id == 4 && c->n_alts == 2 && c->n_streaming == 2);
    push(prov_event_text(4, 1, "b", 1));
    push(prov_event_done(4, 1, DB_STATE_DONE, "stop", NULL, NULL));
    push(prov_event_text(4, 0, "a", 1));
    push(prov_event_done(4, 0, DB_STATE_DONE, "stop", NULL, NULL));
    ui_app_poll_events(a, 40);
    CHECK(c->req_id == 0 && c->n_streaming == 0);
    CHECK(!strcmp(c->alts[0]->text, "a") && !strcmp(c->alts[1]->text, "b"));
    ui_app_free(a);
}

static void test_refused_input_is_not_committed(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/new"));
    conv *c = ui_app_tab(a);
    CHECK(!input(a, "/frobnicate"));
    CHECK(!input(a, "/alt 3"));
    CHECK(!input(a, "/regen"));
    CHECK(input(a, "/set temp 0.5") && input(a, "/help"));
    char big[1200];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECK(!input(a, big)); /* too long for the context: refused before it is stored */
    CHECK(strstr(a->notice, "not sent") && strstr(a->notice, "context holds 1000"));
    CHECK(c->n_msgs == 0 && c->session_id == 0 && g_fake.n_submits == 0);
    ui_app_free(a);
}

static void test_streaming_saves_often(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/new")); /* the tabs of the test before come back: a fresh one */
    CHECK(input(a, "count"));
    int64_t id = ui_app_tab(a)->req_id;
    /* a piece every 20 ms of (simulated) time, the tick after each, as the view does */
    char want[4096] = "";
    double worst_lag = 0, last_saved_at = 0;
    size_t saved_len = 0;
    for (int i = 0; i < 100; i++) {
        double t = 1000 + 20.0 * i;
        char piece[16];
        snprintf(piece, sizeof piece, "w%d ", i);
        strcat(want, piece);
        text(id, piece);
        ui_app_poll_events(a, t);
        ui_app_tick(a, t);
        char *s = stored_answer(a);
        if (strlen(s) > saved_len) saved_len = strlen(s), last_saved_at = t;
        if (t - last_saved_at > worst_lag) worst_lag = t - last_saved_at;
        CHECK(!strncmp(s, want, strlen(s))); /* what is stored is a prefix of what came */
        free(s);
    }
    CHECKF(worst_lag <= CONV_STREAM_SAVE_MS, "the stored answer lagged %.0f ms", worst_lag);
    CHECK(CONV_STREAM_SAVE_MS <= 450); /* with one 33 ms tick, within 0.5 s */
    done(id, DB_STATE_DONE, NULL);
    ui_app_poll_events(a, 5000);
    char *s = stored_answer(a);
    CHECK(!strcmp(s, want));
    free(s);
    ui_app_free(a);
}

static void test_failed_answer_keeps_text_and_reason(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/new"));
    CHECK(input(a, "hi"));
    conv *c = ui_app_tab(a);
    text(c->req_id, "partial ");
    done(c->req_id, DB_STATE_ERROR, "the connection broke off mid-answer");
    ui_app_poll_events(a, 0);
    conv_msg *m = conv_last(c);
    CHECK(m->state == DB_STATE_ERROR && !strcmp(m->text, "partial "));
    CHECK(!strcmp(m->error, "the connection broke off mid-answer"));
    CHECK(c->req_id == 0 && strstr(a->notice, "broke off"));
    char *s = stored_answer(a);
    CHECK(!strcmp(s, "partial "));
    free(s);
    ui_app_free(a);
}

/* Polls until the model loading ends (or 5 s). */
static void wait_loaded(ui_app *a) {
    for (int i = 0; i < 500 && a->loader; i++) {
        usleep(10 * 1000);
        ui_app_poll_events(a, 0);
    }
    CHECK(a->loader == NULL);
}

static void test_model_switch_in_the_background(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/new"));
    conv *c = ui_app_tab(a);
    char other[200], broken[200];
    snprintf(other, sizeof other, "%s/other.gguf", g_dir);
    snprintf(broken, sizeof broken, "%s/broken.gguf", g_dir);
    fclose(fopen(other, "w"));
    fclose(fopen(broken, "w"));
    CHECK(!input(a, "/model /no/such/file.gguf")); /* refused at once, stays in the input */
    g_opens = 0;
    CHECK(input(a, "/model ") == true); /* shows the panel */
    char cmd[300];
    snprintf(cmd, sizeof cmd, "/model %s", other);
    CHECK(input(a, cmd));
    CHECK(a->loader != NULL && strstr(a->notice, "loading other.gguf"));
    CHECK(!input(a, "too early")); /* the tab's model is not there yet: kept in the input */
    CHECK(strstr(a->notice, "still loading") != NULL);
    wait_loaded(a);
    CHECK(strstr(a->notice, "other.gguf is ready") != NULL);
    CHECK(c->prov == &g_other.base);
    CHECK(input(a, "hello other"));
    CHECK(g_other.n_submits == 1 && g_fake.n_submits == 0 && c->req_id == 101);
    g_other.q[g_other.nq++] = prov_event_text(101, 0, "from other", 10);
    g_other.q[g_other.nq++] = prov_event_done(101, 0, DB_STATE_DONE, "stop", NULL, NULL);
    ui_app_poll_events(a, 0);
    CHECK(c->req_id == 0 && !strcmp(conv_last(c)->text, "from other"));
    int64_t sid = c->session_id;
    db_session s;
    CHECK(db_session_get(a->db, sid, &s, NULL) == 0);
    CHECK(strstr(s.model, "/other.gguf") != NULL); /* the session remembers its model */
    db_session_clear(&s);
    /* a model that cannot be opened: the tab stays on the model it had, in the database too */
    snprintf(cmd, sizeof cmd, "/model %s", broken);
    CHECK(input(a, cmd));
    CHECK(c->prov == NULL && c->model_prev != NULL); /* loading */
    wait_loaded(a);
    CHECKF(strstr(a->notice, "cannot open broken.gguf: not a GGUF file (the tab answers with other.gguf)"), "%s",
           a->notice);
    CHECK(c->prov == &g_other.base && strstr(c->model, "/other.gguf") && c->model_prev == NULL);
    CHECK(db_session_get(a->db, sid, &s, NULL) == 0);
    CHECK(strstr(s.model, "/other.gguf") != NULL);
    db_session_clear(&s);
    /* ... and a tab on the default stays on the default */
    CHECK(input(a, "/new") && input(a, cmd));
    wait_loaded(a);
    CHECKF(strstr(a->notice, "(the tab answers with fake-model)"), "%s", a->notice);
    CHECK(ui_app_tab(a)->prov == NULL && ui_app_tab(a)->model[0] == 0);
    ui_app_free(a);
    /* restarting: the tab of that session loads its model by itself */
    g_opens = 0;
    a = open_app();
    CHECK(a->loader != NULL);
    wait_loaded(a);
    CHECK(g_opens == 1);
    bool found = false;
    for (int i = 0; i < a->n_tabs; i++)
        if (a->tabs[i]->session_id == sid) found = a->tabs[i]->prov == &g_other.base;
    CHECK(found);
    ui_app_free(a);
}

/* The number /model's list gives the line that names file (0: none). */
static int listed_as(const char *panel, const char *file) {
    for (const char *l = panel; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        int n = 0, used = 0;
        if (sscanf(l, "%d  %n", &n, &used) == 1 && used && !strncmp(l + used, file, strlen(file))) return n;
    }
    return 0;
}

static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

static void test_model_picker_lists_recent_and_configured(void) {
    char dir[PATH_MAX], recent[PATH_MAX + 32], gone[PATH_MAX + 32], conf[PATH_MAX + 32], def[PATH_MAX + 32];
    CHECK(realpath(g_dir, dir) != NULL); /* sessions name models by their real path */
    snprintf(recent, sizeof recent, "%s/recent.gguf", dir);
    snprintf(gone, sizeof gone, "%s/gone.gguf", dir);
    snprintf(conf, sizeof conf, "%s/conf.gguf", dir);
    snprintf(def, sizeof def, "%s/default.gguf", dir);
    fclose(fopen(recent, "w"));
    fclose(fopen(conf, "w"));
    fclose(fopen(def, "w"));
    char *config_models[] = {conf, "/no/such/listed.gguf", recent, def}; /* recent and the default: once */
    g_fake = (fake){.base.ops = &f_ops, .max_len = 1000};
    ui_app_config cfg = {.prov = &g_fake.base, .model_path = def, .db_path = g_db, .open_model = open_other,
                         .config_models = config_models, .n_config_models = 4};
    ui_app *a = NULL;
    CHECK(ui_app_create(&cfg, &a, NULL) == 0);
    wait_loaded(a); /* (tabs of earlier tests load their models) */
    CHECK(!input(a, "/model 2")); /* no list shown yet */
    CHECK(strstr(a->notice, "no such entry in the last /model list") != NULL);
    /* sessions that used models: gone.gguf (its file is missing now), then recent.gguf */
    int64_t id;
    CHECK(db_session_create(a->db, "old", "", gone, "", &id, NULL) == 0);
    CHECK(db_session_create(a->db, "by name", "", "fake-model", "", &id, NULL) == 0);
    usleep(5 * 1000);
    CHECK(db_session_create(a->db, "newer", "", recent, "", &id, NULL) == 0);
    CHECK(input(a, "/new") && input(a, "/model"));
    const char *p = a->panel;
    CHECK(p && strstr(p, "  1  fake-model  (default)  (this tab)\n"));
    int n_recent = listed_as(p, "recent.gguf"), n_gone = listed_as(p, "gone.gguf");
    int n_conf = listed_as(p, "conf.gguf"), n_listed = listed_as(p, "listed.gguf");
    CHECKF(n_recent > 1 && n_gone > n_recent && n_conf > n_gone && n_listed == n_conf + 1, "%s", p);
    CHECK(strstr(p, "recent.gguf\n") && strstr(p, "gone.gguf  (missing)\n") && strstr(p, "listed.gguf  (missing)\n"));
    CHECK(count_of(p, "/recent.gguf\n") == 1 && count_of(p, "fake-model") == 1 && !strstr(p, "default.gguf"));
    CHECK(a->n_picks == n_listed);
    /* /model N switches the tab like /model PATH */
    char cmd[32];
    snprintf(cmd, sizeof cmd, "/model %d", n_recent);
    CHECK(input(a, cmd));
    wait_loaded(a);
    conv *c = ui_app_tab(a);
    CHECK(!strcmp(c->model, recent) && c->prov == &g_other.base);
    CHECK(input(a, "/model"));
    CHECK(strstr(a->panel, "recent.gguf  (this tab)  (open)\n") && strstr(a->panel, "  1  fake-model  (default)\n"));
    snprintf(cmd, sizeof cmd, "/model %d", listed_as(a->panel, "gone.gguf"));
    CHECK(!input(a, cmd) && strstr(a->notice, "cannot read"));
    snprintf(cmd, sizeof cmd, "/model %d", a->n_picks + 1);
    CHECK(!input(a, cmd) && strstr(a->notice, "no such entry"));
    CHECK(input(a, "/model 1") && c->model[0] == 0 && c->prov == NULL); /* back to the default */
    CHECK(strstr(a->notice, "answers with fake-model again") != NULL);
    ui_app_free(a);
}

static void test_history_is_kept_per_database(void) {
    ui_app *a = open_app();
    int before = ui_app_history_count(a);
    ui_app_history_add(a, "remember me");
    ui_app_history_add(a, "/set temp 0");
    ui_app_history_add(a, "/set temp 0"); /* a repeat is kept once */
    ui_app_free(a);
    a = open_app();
    CHECK(ui_app_history_count(a) == before + 2);
    CHECK(!strcmp(ui_app_history_get(a, ui_app_history_count(a) - 1), "/set temp 0"));
    CHECK(!strcmp(ui_app_history_get(a, ui_app_history_count(a) - 2), "remember me"));
    for (int i = 0; i < UI_HISTORY_MAX + 5; i++) {
        char s[32];
        snprintf(s, sizeof s, "line %d", i);
        ui_app_history_add(a, s);
    }
    CHECK(ui_app_history_count(a) == UI_HISTORY_MAX);
    ui_app_free(a);
    /* another database has its own */
    char other[160];
    snprintf(other, sizeof other, "%s/other.db", g_dir);
    g_fake = (fake){.base.ops = &f_ops, .max_len = 1000};
    ui_app_config cfg = {.prov = &g_fake.base, .db_path = other};
    CHECK(ui_app_create(&cfg, &a, NULL) == 0);
    CHECK(ui_app_history_count(a) == 0);
    ui_app_free(a);
}


/* How many user messages the session has at the root (the versions of its first message). */
static int root_versions(ui_app *a, int64_t sid) {
    db_message *m;
    int n, k = 0;
    CHECK(db_message_children(a->db, sid, 0, &m, &n, NULL) == 0);
    for (int i = 0; i < n; i++) k += m[i].role == DB_ROLE_USER;
    db_messages_free(m, n);
    return k;
}

static void test_edit_is_left_with_esc_and_versions_switch(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/new"));
    CHECK(input(a, "a red ball"));
    answer(a, "red answer");
    conv *c = ui_app_tab(a);
    int64_t sid = c->session_id;
    CHECK(!input(a, "/branch next")); /* one version so far */
    CHECK(strstr(a->notice, "one version each") != NULL);
    CHECK(input(a, "/edit"));
    CHECK(c->editing && a->edit_text && !strcmp(a->edit_text, "a red ball"));
    CHECK(ui_app_escape(a)); /* Esc: the view empties the input */
    CHECK(!c->editing && strstr(a->notice, "left /edit"));
    CHECK(!ui_app_escape(a)); /* nothing more to leave */
    CHECK(input(a, "a red ball, really")); /* after Esc, a message continues the conversation */
    answer(a, "continued");
    CHECK(c->n_msgs == 3 && root_versions(a, sid) == 1);
    CHECK(input(a, "/edit"));
    CHECK(input(a, "a blue ball")); /* a new version of the last message */
    answer(a, "blue answer");
    CHECK(c->n_msgs == 3 && c->msgs[2]->n_versions == 2 && c->msgs[2]->version == 2);
    CHECK(input(a, "/branch prev"));
    c = ui_app_tab(a);
    CHECK(c->session_id == sid && c->n_msgs == 3);
    CHECK(!strcmp(c->msgs[2]->text, "a red ball, really") && !strcmp(conv_last(c)->text, "continued"));
    CHECK(c->msgs[2]->version == 1 && strstr(a->notice, "version 1 of 2"));
    CHECK(input(a, "/branch next"));
    c = ui_app_tab(a);
    CHECK(!strcmp(c->msgs[2]->text, "a blue ball") && !strcmp(conv_last(c)->text, "blue answer"));
    CHECK(input(a, "/branch next")); /* wraps around */
    CHECK(!strcmp(ui_app_tab(a)->msgs[2]->text, "a red ball, really"));
    ui_app_free(a);
    a = open_app(); /* the version shown is the one that comes back */
    c = NULL;
    for (int i = 0; i < a->n_tabs; i++)
        if (a->tabs[i]->session_id == sid) c = a->tabs[i];
    CHECK(c && c->n_msgs == 3 && !strcmp(c->msgs[2]->text, "a red ball, really") && c->msgs[2]->n_versions == 2);
    ui_app_free(a);
}

static void test_system_shows_before_it_changes(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/new"));
    conv *c = ui_app_tab(a);
    CHECK(input(a, "/system"));
    CHECK(strstr(a->notice, "no system prompt") && !c->system[0]);
    CHECK(input(a, "/system Be brief."));
    CHECK(!strcmp(c->system, "Be brief."));
    CHECK(input(a, "/system"));
    CHECK(!strcmp(c->system, "Be brief.") && a->panel && strstr(a->panel, "Be brief."));
    CHECK(input(a, "/system --clear"));
    CHECK(!c->system[0] && strstr(a->notice, "cleared") && !a->panel);
    ui_app_free(a);
}

static void test_cut_off_answers_are_marked(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/new"));
    CHECK(input(a, "/set max_tokens 8"));
    conv *c = ui_app_tab(a);
    CHECK(input(a, "long story"));
    db_usage u = {.prompt_tokens = 3, .completion_tokens = 8};
    text(c->req_id, "one two");
    push(prov_event_done(c->req_id, 0, DB_STATE_DONE, "length", &u, NULL));
    ui_app_poll_events(a, 0);
    CHECK(!strcmp(conv_last(c)->finish, "length"));
    CHECK(input(a, "go on"));
    u.completion_tokens = 5; /* "length" before max_tokens: the context ran out */
    text(c->req_id, "three");
    push(prov_event_done(c->req_id, 0, DB_STATE_DONE, "length", &u, NULL));
    ui_app_poll_events(a, 0);
    CHECK(!strcmp(conv_last(c)->finish, "context"));
    db_message m;
    CHECK(db_message_get(a->db, conv_last(c)->id, &m, NULL) == 0);
    CHECKF(!strcmp(m.finish, "context"), "stored finish '%s' state %d", m.finish, m.state); /* stored with the message */
    db_message_clear(&m);
    char path[200], buf[4096];
    snprintf(path, sizeof path, "%s/cut.md", g_dir);
    char cmd[260];
    snprintf(cmd, sizeof cmd, "/export %s", path);
    CHECK(input(a, cmd));
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
    struct stat st; /* a conversation: its owner's only */
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECKF(strstr(buf, "one two\n\n*(cut off at max_tokens)*") != NULL, "%s", buf);
    CHECK(strstr(buf, "three\n\n*(cut off: the context was full)*") != NULL);
    ui_app_free(a);
}

static bool session_exists(ui_app *a, int64_t id) {
    db_session s;
    if (db_session_get(a->db, id, &s, NULL)) return false;
    db_session_clear(&s);
    return true;
}

static void test_sessions_archive_and_delete(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/new"));
    CHECK(input(a, "keep me around"));
    answer(a, "ok");
    int64_t keep = ui_app_tab(a)->session_id;
    CHECK(input(a, "/new"));
    CHECK(input(a, "throw me\naway")); /* (the title keeps to one line) */
    answer(a, "ok");
    int64_t doomed = ui_app_tab(a)->session_id;
    CHECK(input(a, "/sessions"));
    CHECK(a->panel && strstr(a->panel, "  1  today ") && strstr(a->panel, "throw me away  · fake-model"));
    CHECK(a->n_listed >= 2 && a->listed[0] == doomed && a->listed[1] == keep);
    CHECK(input(a, "/archive 2"));
    CHECK(strstr(a->notice, "archived 'keep me around'") && a->panel && !strstr(a->panel, "keep me around"));
    CHECK(session_exists(a, keep));
    CHECK(input(a, "/sessions --all"));
    CHECK(strstr(a->panel, "keep me around  · fake-model  [archived]") != NULL);
    int k = 0;
    for (int i = 0; i < a->n_listed; i++)
        if (a->listed[i] == keep) k = i + 1;
    char cmd[64];
    snprintf(cmd, sizeof cmd, "/unarchive %d", k);
    CHECK(input(a, cmd));
    CHECK(strstr(a->notice, "listed again") != NULL);
    CHECK(input(a, "/sessions"));
    CHECK(strstr(a->panel, "keep me around") != NULL);
    int tabs = a->n_tabs;
    CHECK(!input(a, "/delete 1")); /* asked first: the text stays in the input to confirm */
    CHECK(strstr(a->notice, "delete 'throw me") && session_exists(a, doomed));
    CHECK(input(a, "/set temp 0.5")); /* anything else in between: no longer asked */
    CHECK(!input(a, "/delete 1"));
    CHECK(session_exists(a, doomed));
    CHECK(input(a, "/delete 1")); /* Enter again: gone, and its tab with it */
    CHECK(!session_exists(a, doomed) && session_exists(a, keep));
    CHECK(a->n_tabs == tabs - 1 && strstr(a->notice, "deleted"));
    for (int i = 0; i < a->n_tabs; i++) CHECK(a->tabs[i]->session_id != doomed);
    ui_app_free(a);
}

static void test_notices_and_panels_do_not_outstay(void) {
    ui_app *a = open_app();
    wait_loaded(a); /* (a tab of an earlier test loads its model: its progress is a notice too) */
    CHECK(input(a, "/new"));
    conv *c = ui_app_tab(a);
    CHECK(input(a, "first line\nsecond line"));
    CHECK(!input(a, "/regen"));
    CHECK(strstr(a->notice, "still coming") != NULL);
    ui_app_cancel(a); /* Ctrl-C */
    CHECK(!strstr(a->notice, "still coming"));
    done(c->req_id, DB_STATE_CANCELLED, NULL);
    ui_app_poll_events(a, 0);
    CHECKF(strstr(a->notice, "stopped") != NULL, "notice: %s", a->notice);
    CHECK(input(a, "/search second"));
    CHECK(a->panel && strstr(a->panel, "first line second line")); /* the snippet on one line */
    CHECK(!input(a, "/open 99")); /* refused: the list stays to pick again */
    CHECK(a->panel != NULL);
    CHECK(input(a, "/set temp 0.3")); /* another command closes it */
    CHECK(a->panel == NULL);
    CHECK(input(a, "/help") && a->panel);
    CHECK(ui_app_escape(a) == false && a->panel == NULL);
    ui_app_free(a);
}

static void test_tabs_past_nine_and_rename(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/new"));
    CHECK(input(a, "/rename My title"));
    int renamed = a->cur;
    CHECK(input(a, "/new")); /* another tab opens, and back */
    CHECK(input(a, "/new"));
    char cmd[32];
    snprintf(cmd, sizeof cmd, "/tab %d", renamed + 1);
    CHECK(input(a, cmd) && a->cur == renamed);
    CHECK(input(a, "the first message does not rename it"));
    answer(a, "ok");
    CHECK(!strcmp(ui_app_tab(a)->title, "My title"));
    db_session s;
    CHECK(db_session_get(a->db, ui_app_tab(a)->session_id, &s, NULL) == 0);
    CHECK(!strcmp(s.title, "My title"));
    db_session_clear(&s);
    while (a->n_tabs < 12) CHECK(input(a, "/new"));
    CHECK(input(a, "/tab 11") && a->cur == 10);
    CHECK(!input(a, "/tab 13") && a->cur == 10 && strstr(a->notice, "there are 12 tabs"));
    ui_app_free(a);
}

/* A thinking model's answer: its reasoning is kept apart from the text (stored
 * beside it, apart in the next prompt's turns, back after a reopen), and /reasoning
 * unfolds it for the view. */
static void test_reasoning_is_kept_apart(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/new"));
    conv *c = ui_app_tab(a);
    CHECK(input(a, "think first"));
    int64_t id = c->req_id;
    push(prov_event_reasoning(id, 0, "I plan", 6));
    push(prov_event_reasoning(id, 0, " a greeting.", 12));
    text(id, "Hello.");
    done(id, DB_STATE_DONE, NULL);
    ui_app_poll_events(a, 0);
    conv_msg *m = conv_last(c);
    CHECK(m && !strcmp(m->text, "Hello.") && m->reasoning && !strcmp(m->reasoning, "I plan a greeting."));
    CHECK(!m->reasoning_shown);
    CHECK(input(a, "/reasoning") && m->reasoning_shown);
    CHECK(input(a, "/reasoning") && !m->reasoning_shown);
    CHECK(input(a, "/think off") && c->set.no_think); /* per tab, stored with its settings */
    db_message dm;
    CHECK(m->id && db_message_get(a->db, m->id, &dm, NULL) == 0);
    CHECK(!strcmp(dm.content, "Hello.") && !strcmp(dm.reasoning, "I plan a greeting."));
    db_message_clear(&dm);
    CHECK(input(a, "and then?")); /* the next prompt has the answer, not the reasoning */
    CHECK(g_fake.n_msgs == 3);
    CHECK(!strstr(c->msgs[1]->text, "plan"));
    CHECK(!strcmp(g_fake.last_reasoning, "I plan a greeting.")); /* apart, for the template to show or drop */
    done(c->req_id, DB_STATE_DONE, NULL);
    ui_app_poll_events(a, 0);
    int64_t sid = c->session_id;
    ui_app_free(a);
    a = open_app(); /* reopened: the tab comes back with it */
    c = ui_app_tab(a);
    CHECK(c->session_id == sid && c->n_msgs >= 2 && c->msgs[1]->reasoning &&
          !strcmp(c->msgs[1]->reasoning, "I plan a greeting."));
    CHECK(c->set.no_think);
    CHECK(input(a, "/new"));
    CHECK(!input(a, "/reasoning") && strstr(a->notice, "has no reasoning")); /* refused: nothing to show */
    ui_app_free(a);
}

/* The folded line says how long the reasoning streamed (from its first piece
 * to the answer's first) and how many tokens it was (the provider's count),
 * while it streams "thinking... N s"; both are stored, so a reopened chat
 * says the same. */
static void test_thought_for(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/new"));
    conv *c = ui_app_tab(a);
    CHECK(input(a, "think first"));
    int64_t id = c->req_id;
    push(prov_event_reasoning(id, 0, "I plan", 6));
    ui_app_poll_events(a, 1000);
    push(prov_event_reasoning(id, 0, " a greeting.", 12));
    ui_app_poll_events(a, 3000);
    conv_msg *m = conv_last(c);
    char line[160];
    think_line(m, 3500, line, sizeof line);
    CHECKF(!strcmp(line, "> thinking... 2.5 s (Alt-R or /reasoning shows it)"), "%s", line);
    text(id, "Hello.");
    ui_app_poll_events(a, 4200);
    text(id, " More.");
    db_usage u = {.completion_tokens = 320, .reasoning_tokens = 312};
    push(prov_event_done(id, 0, DB_STATE_DONE, "stop", &u, NULL));
    ui_app_poll_events(a, 9000); /* later text does not count */
    think_line(m, 9000, line, sizeof line);
    CHECKF(!strcmp(line, "> thought for 3.2 s, 312 tokens (Alt-R or /reasoning shows it)"), "%s", line);
    CHECK(input(a, "/reasoning"));
    think_line(m, 9000, line, sizeof line);
    CHECKF(!strcmp(line, "v thought for 3.2 s, 312 tokens (Alt-R folds it)"), "%s", line);
    int64_t sid = c->session_id;
    ui_app_free(a);
    a = open_app(); /* reopened: the same line */
    c = ui_app_tab(a);
    m = c->session_id == sid ? conv_last(c) : NULL;
    CHECK(m && m->r_len);
    if (m) {
        think_line(m, 0, line, sizeof line);
        CHECKF(!strcmp(line, "> thought for 3.2 s, 312 tokens (Alt-R or /reasoning shows it)"), "%s", line);
    }
    /* an answer stored before sizes were: its words */
    conv_msg old = {.role = DB_ROLE_ASSISTANT, .state = DB_STATE_DONE, .reasoning = "two words", .r_len = 9};
    think_line(&old, 0, line, sizeof line);
    CHECKF(!strcmp(line, "> reasoning (2 words, Alt-R or /reasoning shows it)"), "%s", line);
    ui_app_free(a);
}

/* Quitting with messages the database did not take (a full disk, a lost file):
 * the first Ctrl-Q asks, the second quits and writes them to a private Markdown
 * file, so nothing typed or answered is lost. */
static void test_quit_keeps_unsaved_messages(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/new"));
    conv *c = ui_app_tab(a);
    db_close(a->db); /* the database goes away */
    a->db = NULL;
    snprintf(a->db_error, sizeof a->db_error, "database or disk is full");
    CHECK(input(a, "remember this line"));
    answer(a, "an answer kept in memory");
    CHECK(conv_unsaved(c));
    CHECK(input(a, "/quit") && !a->quit);
    CHECKF(strstr(a->notice, "not saved: Ctrl-Q again") && strstr(a->notice, "(database or disk is full)"), "%s",
           a->notice);
    CHECK(input(a, "/quit") && a->quit);
    CHECKF(a->recovery[0], "no recovery file");
    FILE *f = a->recovery[0] ? fopen(a->recovery, "r") : NULL;
    char buf[4096] = "";
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
    CHECKF(strstr(buf, "remember this line") && strstr(buf, "an answer kept in memory"), "%s", buf);
    struct stat st;
    CHECK(a->recovery[0] && stat(a->recovery, &st) == 0 && (st.st_mode & 0777) == 0600);
    if (a->recovery[0]) unlink(a->recovery);
    ui_app_free(a);
    /* with everything saved, one Ctrl-Q quits */
    a = open_app();
    CHECK(input(a, "/quit") && a->quit && !a->recovery[0]);
    ui_app_free(a);
}

/* /open N after /search opens the session on the branch of the message that
 * matched (here a version the user edited away), scrolled to it. */
static void test_search_hit_opens_on_its_branch(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/new") && input(a, "apple pie recipe"));
    answer(a, "Bake it.");
    CHECK(input(a, "/edit") && input(a, "banana bread recipe"));
    answer(a, "Bake that.");
    conv *c = ui_app_tab(a);
    CHECK(c->n_msgs == 1 && !strcmp(c->msgs[0]->text, "banana bread recipe"));
    CHECK(input(a, "/close") && input(a, "/search apple") && a->n_listed == 1 && a->listed_msgs);
    CHECK(input(a, "/open 1"));
    c = ui_app_tab(a);
    CHECKF(c->n_msgs == 1 && !strcmp(c->msgs[0]->text, "apple pie recipe"), "%s", c->n_msgs ? c->msgs[0]->text : "");
    CHECK(c->n_alts == 1 && !strcmp(c->alts[0]->text, "Bake it."));
    CHECK(a->listed_msgs && c->focus_id == a->listed_msgs[0] && c->focus_id == c->msgs[0]->id);
    /* the same from a tab that shows the session on the other branch */
    CHECK(input(a, "/branch next"));
    c = ui_app_tab(a);
    CHECK(!strcmp(c->msgs[0]->text, "banana bread recipe"));
    CHECK(input(a, "/search apple") && input(a, "/open 1"));
    c = ui_app_tab(a);
    CHECK(!strcmp(c->msgs[0]->text, "apple pie recipe") && c->focus_id == c->msgs[0]->id);
    ui_app_free(a);
}

/* /export expands ~ and says where the file went (a full path) or why not. */
static void test_export_says_where_and_why(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/new") && input(a, "export me"));
    answer(a, "Exported.");
    const char *home = getenv("HOME");
    char *saved_home = home ? strdup(home) : NULL;
    setenv("HOME", g_dir, 1);
    char want[300];
    CHECK(input(a, "/export ~/chat.md"));
    snprintf(want, sizeof want, "exported to %s/chat.md", g_dir);
    CHECKF(!strcmp(a->notice, want), "%s", a->notice);
    snprintf(want, sizeof want, "%s/chat.md", g_dir);
    CHECK(access(want, R_OK) == 0);
    /* a bare /export: into the current directory, named in full */
    char cwd[PATH_MAX];
    CHECK(getcwd(cwd, sizeof cwd) && chdir(g_dir) == 0);
    CHECK(input(a, "/export"));
    snprintf(want, sizeof want, "exported to %s/llmchat-%lld.md", g_dir, (long long)ui_app_tab(a)->session_id);
    CHECKF(!strcmp(a->notice, want), "%s", a->notice);
    CHECK(chdir(cwd) == 0);
    /* a directory that is not there: the full path and the reason */
    CHECK(!input(a, "/export ~/no/such/dir/x.md"));
    snprintf(want, sizeof want, "/export: cannot write %s/no/such/dir/x.md: No such file or directory", g_dir);
    CHECKF(!strcmp(a->notice, want), "%s", a->notice);
    CHECK(!input(a, "/export ~nosuchuser_llc/x.md") && strstr(a->notice, "no home directory for nosuchuser_llc"));
    if (saved_home) setenv("HOME", saved_home, 1);
    else unsetenv("HOME");
    free(saved_home);
    ui_app_free(a);
}

/* Writes n bytes of s to g_dir/name; returns the path (static). */
static const char *put_file(const char *name, const char *s, size_t n) {
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(s, 1, n, f) == n && fclose(f) == 0);
    return path;
}

/* /file PATH puts a text file into the input as a fenced block; a missing,
 * binary, too big file or a directory is refused with a reason. */
static void test_file_goes_into_the_input(void) {
    ui_app *a = open_app();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "/file %s", put_file("notes.txt", "line one\nline two", 17));
    CHECK(input(a, cmd));
    CHECKF(a->edit_text && !strcmp(a->edit_text, "```notes.txt\nline one\nline two\n```\n"), "%s",
           a->edit_text ? a->edit_text : "none");
    CHECK(strstr(a->notice, "notes.txt (17 bytes) is in the input"));
    snprintf(cmd, sizeof cmd, "/file %s", put_file("fenced.md", "```c\nx\n```\n", 11));
    CHECK(input(a, cmd) && a->edit_text && !strncmp(a->edit_text, "~~~~fenced.md\n```c\n", 19));
    struct { const char *cmd, *why; } bad[] = {
        {"/file /no/such/file.txt", "/file: cannot read /no/such/file.txt: No such file or directory"},
        {"/file /tmp", "/file: /tmp is a directory"},
        {NULL, "is not a text file (a binary byte at offset 3)"},
        {NULL, "is 0.3 MB: a message takes at most 256 KB of a file"},
    };
    char *big = malloc(300 * 1024);
    memset(big, 'x', 300 * 1024);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (i == 2) snprintf(cmd, sizeof cmd, "/file %s", put_file("a.bin", "abc\0def", 7));
        if (i == 3) snprintf(cmd, sizeof cmd, "/file %s", put_file("big.txt", big, 300 * 1024));
        free(a->edit_text);
        a->edit_text = NULL;
        CHECK(!input(a, bad[i].cmd ? bad[i].cmd : cmd));
        CHECKF(strstr(a->notice, bad[i].why) && !a->edit_text, "%s", a->notice);
    }
    free(big);
    snprintf(cmd, sizeof cmd, "/file %s", put_file("latin1.txt", "caf\xe9", 4));
    CHECK(!input(a, cmd) && strstr(a->notice, "not a text file (a binary byte at offset 3)"));
    ui_app_free(a);
}

/* /copy N copies message N of those shown (1: the first), yours or an answer. */
static void test_copy_message_n(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/new") && input(a, "first question"));
    answer(a, "first answer");
    CHECK(input(a, "second question"));
    answer(a, "second answer");
    CHECK(input(a, "/copy 3") && a->clipboard && !strcmp(a->clipboard, "second question"));
    CHECK(strstr(a->notice, "copied message 3 (yours, 15 bytes)"));
    CHECK(input(a, "/copy 2") && !strcmp(a->clipboard, "first answer") && a->clipboard_len == 12);
    CHECK(!input(a, "/copy 5") && strstr(a->notice, "/copy 5: this conversation shows 4 messages"));
    CHECK(!strcmp(a->clipboard, "first answer")); /* (a refused copy leaves the clipboard) */
    ui_app_free(a);
}

/* /copy code [K] and /copy N code [K]: a code block by the number its border shows. */
static void test_copy_code_block_k(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/new") && input(a, "mine:\n```\nmy code\n```\nwhy?"));
    answer(a, "First:\n```sh\nls -l\n```\nthen:\n```c\nint x;\n```\n");
    CHECK(input(a, "/copy code 1") && a->clipboard && !strcmp(a->clipboard, "ls -l"));
    CHECKF(strstr(a->notice, "copied code block #1 (5 bytes)") && a->copied_block == 1, "%s", a->notice);
    CHECK(input(a, "/copy code") && !strcmp(a->clipboard, "int x;")); /* the last */
    CHECKF(strstr(a->notice, "code block #2") && a->copied_block == 2, "%s", a->notice); /* (Alt-K goes on from it) */
    CHECK(!input(a, "/copy code 3"));
    CHECKF(strstr(a->notice, "the last answer with code has 2 code blocks (#1 to #2)"), "%s", a->notice);
    CHECK(!strcmp(a->clipboard, "int x;")); /* (refused: the clipboard stays) */
    CHECK(input(a, "/copy 1 code") && !strcmp(a->clipboard, "my code")); /* your message's */
    CHECK(input(a, "/copy 2 code 1") && !strcmp(a->clipboard, "ls -l"));
    CHECKF(strstr(a->notice, "copied code block #1 of message 2"), "%s", a->notice);
    CHECK(!input(a, "/copy 1 code 2") && strstr(a->notice, "message 1 has 1 code block (#1 to #1)"));
    CHECK(input(a, "no code here"));
    answer(a, "plain words");
    CHECK(input(a, "/copy code 2") && !strcmp(a->clipboard, "int x;")); /* the last answer that has code */
    CHECK(!input(a, "/copy 4 code") && strstr(a->notice, "message 4 has no code block"));
    CHECK(input(a, "/copy") && !strcmp(a->clipboard, "plain words") && a->copied_block == 0);
    ui_app_free(a);
}

/* The config file's defaults make a new tab's settings and system prompt;
 * /role NAME applies a named system prompt; F1 lists the roles; a restored
 * session keeps its own. */
static void test_config_defaults_and_roles(void) {
    char dbp[160];
    snprintf(dbp, sizeof dbp, "%s/roles.db", g_dir);
    static const ui_role roles[] = {{"coder", "You review C.\nBe strict."}, {"poet", "Answer in verse."}};
    g_fake = (fake){.base.ops = &f_ops, .max_len = 1000};
    ui_app_config cfg = {.prov = &g_fake.base, .db_path = dbp, .has_temperature = true, .temperature = 0.25f,
                         .max_tokens = 99, .system = "Be brief.", .roles = roles, .n_roles = 2,
                         .config_path = "/x/config"};
    ui_app *a = NULL;
    CHECK(ui_app_create(&cfg, &a, NULL) == 0);
    conv *c = ui_app_tab(a);
    CHECK(c->set.temperature == 0.25f && c->set.max_tokens == 99 && !strcmp(c->system, "Be brief."));
    CHECK(input(a, "hello"));
    CHECK(!strcmp(g_fake.first, "Be brief.") && g_fake.set.temperature == 0.25f && g_fake.set.max_tokens == 99);
    answer(a, "hi");
    CHECK(input(a, "/role"));
    CHECKF(a->panel && strstr(a->panel, "coder") && strstr(a->panel, "You review C.") && strstr(a->panel, "poet"),
           "%s", a->panel ? a->panel : "none");
    CHECK(a->panel && !strstr(a->panel, "Be strict.")); /* one line each */
    CHECK(input(a, "/role coder") && !strcmp(c->system, "You review C.\nBe strict."));
    CHECKF(strstr(a->notice, "role coder"), "%s", a->notice);
    CHECK(!input(a, "/role nope") && strstr(a->notice, "/role nope: no such role"));
    CHECK(!strcmp(c->system, "You review C.\nBe strict."));
    CHECK(input(a, "again"));
    CHECK(!strcmp(g_fake.first, "You review C.\nBe strict.")); /* the next answer has the role */
    answer(a, "ok");
    CHECK(input(a, "/help") && a->panel && strstr(a->panel, "Roles (/role NAME)") && strstr(a->panel, "coder poet"));
    CHECK(input(a, "/new"));
    CHECK(ui_app_tab(a)->set.max_tokens == 99 && !strcmp(ui_app_tab(a)->system, "Be brief.")); /* a new tab too */
    ui_app_free(a);
    /* another start with other defaults: the restored session keeps its role and settings */
    ui_app_config plain = {.prov = &g_fake.base, .db_path = dbp};
    CHECK(ui_app_create(&plain, &a, NULL) == 0);
    ui_app_switch(a, 0);
    CHECK(!strcmp(ui_app_tab(a)->system, "You review C.\nBe strict.") && ui_app_tab(a)->set.max_tokens == 99);
    CHECK(!input(a, "/role coder") && strstr(a->notice, "the config file names none"));
    CHECK(input(a, "/role") && strstr(a->notice, "no roles: add 'role NAME = TEXT' lines"));
    CHECK(input(a, "/new") && ui_app_tab(a)->set.max_tokens == 0 && !ui_app_tab(a)->system[0]);
    ui_app_free(a);
}

/* /set alone shows the tab's values; max_tokens stays unset until /set sets it. */
static void test_set_alone_shows_the_values(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/new") && input(a, "/set"));
    CHECKF(strstr(a->notice, "temp ") && strstr(a->notice, "max_tokens default") && !a->notice_error, "%s",
           a->notice);
    CHECK(input(a, "/set max_tokens 64") && input(a, "/set"));
    CHECKF(strstr(a->notice, "max_tokens 64 ") && strlen(a->notice) < 80, "%s", a->notice); /* (fits a line) */
    ui_app_free(a);
}

/* The warning stays, a line of its own, through the notices that follow (a
 * model loading, a command) until Esc dismisses it. */
static void test_second_ui_on_a_database_is_warned(void) {
    ui_app *a = open_app();
    CHECK(!a->warnings);
    fake keep = g_fake;
    ui_app *b = NULL;
    ui_app_config cfg = {.prov = &keep.base, .db_path = g_db};
    CHECK(ui_app_create(&cfg, &b, NULL) == 0);
    char want[64];
    snprintf(want, sizeof want, "another llmchat chat (pid %ld)", (long)getpid());
    CHECKF(b->warnings && strstr(b->warnings, want), "warnings: %s", b->warnings ? b->warnings : "none");
    ui_app_warn(b, "no usable CUDA GPU:\nrunning on the CPU");
    ui_app_notice(b, false, "other.gguf is ready");
    CHECK(input(b, "/set"));
    CHECKF(b->warnings && strstr(b->warnings, want) && strstr(b->warnings, "\nno usable CUDA GPU: running on the CPU"),
           "%s", b->warnings ? b->warnings : "none");
    ui_app_escape(b);
    CHECK(b->warnings == NULL);
    ui_app_free(b);
    ui_app_free(a);
    a = open_app(); /* the first one is gone: no warning */
    CHECK(!a->warnings);
    ui_app_free(a);
}

/* A panel whose text ran out of memory while built is refused, saying so, and
 * the panel shown stays: no part of a list passes for the whole. */
static void test_panel_out_of_memory_is_said(void) {
    ui_app *a = open_app();
    CHECK(input(a, "/help") && a->panel && strstr(a->panel, "/help"));
    const char *shown = a->panel;
    sbuf t = {0};
    sb_str(&t, "Sessions (part of them)\n");
    t.oom = true;
    a->rejected = false;
    app_show_panel(a, &t);
    CHECK(a->rejected && a->notice_error && strstr(a->notice, "out of memory"));
    CHECK(a->panel == shown && t.p == NULL);
    sb_str(&t, "Sessions\n");
    app_show_panel(a, &t);
    CHECK(a->panel && !strcmp(a->panel, "Sessions\n") && t.p == NULL);
    ui_app_free(a);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/llc_test_app_XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    snprintf(g_db, sizeof g_db, "%s/chat.db", g_dir);
    RUN(test_message_while_streaming_is_queued);
    RUN(test_refused_input_is_not_committed);
    RUN(test_streaming_saves_often);
    RUN(test_failed_answer_keeps_text_and_reason);
    RUN(test_model_switch_in_the_background);
    RUN(test_model_picker_lists_recent_and_configured);
    RUN(test_history_is_kept_per_database);
    RUN(test_edit_is_left_with_esc_and_versions_switch);
    RUN(test_system_shows_before_it_changes);
    RUN(test_cut_off_answers_are_marked);
    RUN(test_sessions_archive_and_delete);
    RUN(test_notices_and_panels_do_not_outstay);
    RUN(test_panel_out_of_memory_is_said);
    RUN(test_tabs_past_nine_and_rename);
    RUN(test_second_ui_on_a_database_is_warned);
    RUN(test_set_alone_shows_the_values);
    RUN(test_search_hit_opens_on_its_branch);
    RUN(test_export_says_where_and_why);
    RUN(test_file_goes_into_the_input);
    RUN(test_copy_message_n);
    RUN(test_copy_code_block_k);
    RUN(test_config_defaults_and_roles);
    RUN(test_reasoning_is_kept_apart);
    RUN(test_thought_for);
    RUN(test_quit_keeps_unsaved_messages);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd)) {
    }
    return t_summary();
}
