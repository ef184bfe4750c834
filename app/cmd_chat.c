/* cmd_chat.c — `llmchat` / `llmchat chat`: the tabbed chat UI on one shared
 * engine. Opens the model (-m, else the config file's `model =`, else the
 * default), the database (--db, else the XDG data dir), serves the engine and
 * the sessions on the local socket (so `llmchat ask` and editors share them;
 * what they do to an open session shows live), and runs the UI.
 * With --remote URL (or LLMCHAT_REMOTE) the answers come from an
 * OpenAI-compatible server instead: no model is loaded and nothing is served.
 * Both take the config file's chat defaults (temperature, max-tokens, system,
 * roles, mouse). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "app/commands.h"
#include "app/fileio.h"
#include "app/config.h"
#include "app/llm.h"
#include "app/server/srv.h"
#include "ui/app.h"
#include "ui/remote.h"
#include "ui/view.h"

static const char *g_template, *g_template_file, *g_listen, *g_api_key;
static const char *g_remote, *g_remote_model, *g_remote_key, *g_remote_key_file;
static bool g_no_socket;

static const cli_opt g_opts[] = {
    {"chat-template", 0, CLI_STR, &g_template, "NAME", "chat template (default: the model's own)", 0, 0, NULL},
    {"chat-template-file", 0, CLI_STR, &g_template_file, "FILE", "a Jinja chat template to use instead of the model's", 0, 0, NULL},
    {"listen", 0, CLI_STR, &g_listen, "HOST:PORT", "also serve editors on TCP (see llmchat serve)", 0, 0, NULL},
    {"api-key", 0, CLI_STR, &g_api_key, "KEY", "key TCP clients must give (Bearer)", 0, 0, NULL},
    {"no-socket", 0, CLI_FLAG, &g_no_socket, NULL, "do not serve the local socket", 0, 0, NULL},
    {"remote", 0, CLI_STR, &g_remote, "URL",
     "answer with an OpenAI-compatible server (or LLMCHAT_REMOTE), e.g. http://host:8000/v1", 0, 0, NULL},
    {"remote-model", 0, CLI_STR, &g_remote_model, "NAME",
     "the server's model (or LLMCHAT_REMOTE_MODEL; default: the first it lists)", 0, 0, NULL},
    {"remote-api-key", 0, CLI_STR, &g_remote_key, "KEY",
     "Bearer key for --remote (seen by other local users on the command line: --remote-api-key-file or "
     "LLMCHAT_REMOTE_API_KEY keep it out of it)", 0, 0, NULL},
    {"remote-api-key-file", 0, CLI_STR, &g_remote_key_file, "FILE", "read the --remote key from the first line of FILE", 0, 0,
     NULL},
    {0},
};

/* The server's notes: what editors and `llmchat ask` do to stored sessions. */
static void on_server_notes(void *ctx, ui_app *a) {
    srv_note *n;
    while ((n = srv_next_note(ctx))) {
        if (n->kind == SRV_NOTE_TEXT) ui_app_session_text(a, n->session_id, n->message_id, n->text, n->len);
        else ui_app_session_changed(a, n->session_id);
        srv_note_free(n);
    }
}

const cli_cmd cli_chat = {
    .name = "chat",
    .usage = "[-m MODEL | --remote URL [--remote-model NAME]] [--db PATH] [--socket PATH | --no-socket] "
             "[--listen HOST:PORT] [--chat-template NAME | --chat-template-file FILE]",
    .summary = "the chat UI: tabs, sessions kept in SQLite (the default command)",
    .opts = g_opts,
};

/* The database path: --db, else the XDG data dir (NULL when there is none). */
static const char *database_path(const cli_common *common, char *buf, size_t n) {
    if (common->db) return common->db;
    llc_err derr;
    return db_default_path(buf, n, &derr) == 0 ? buf : NULL;
}

/* The line on the terminal while the default model, its engine and the server
 * start (curses is not up yet: no blank screen meanwhile); cleared before an
 * error or the UI, so that it is not left behind after quitting.
 * Meanwhile the terminal takes keys as they are (no echo, no line editing, Enter
 * kept as CR): what is typed during loading reaches the chat's input as typed,
 * and Enter sends it, instead of being echoed under the loading line and turned
 * into newlines. The settings found are put back before curses starts (it keeps
 * them for after quitting), on every error, and on Ctrl-C. */
static bool g_loading_shown, g_tty_held;
static struct termios g_tty_found;

static void tty_release(void) {
    if (g_tty_held) tcsetattr(STDIN_FILENO, TCSANOW, &g_tty_found); /* TCSANOW: the keys typed stay */
    g_tty_held = false;
}

static void tty_release_and_die(int sig) {
    tty_release(); /* (tcsetattr is async-signal-safe) */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void tty_hold(void) {
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &g_tty_found)) return;
    struct termios t = g_tty_found;
    t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    t.c_iflag &= ~(tcflag_t)(ICRNL | INLCR | IGNCR);
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    if (tcsetattr(STDIN_FILENO, TCSANOW, &t)) return;
    g_tty_held = true;
    signal(SIGINT, tty_release_and_die);
    signal(SIGTERM, tty_release_and_die);
    signal(SIGQUIT, tty_release_and_die);
}

static void loading_line(const char *path) {
    if (!isatty(STDERR_FILENO)) return;
    fprintf(stderr, "llmchat: loading %s ...", path);
    fflush(stderr);
    g_loading_shown = true;
    tty_hold();
    const char *delay = getenv("LLC_TEST_LOAD_DELAY_MS"); /* tests: a load slow enough to type during */
    if (delay) usleep((useconds_t)atoi(delay) * 1000);
}

static void loading_clear(void) {
    if (g_tty_held) {
        tty_release();
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGQUIT, SIG_DFL);
    }
    if (g_loading_shown) fprintf(stderr, "\r\033[K");
    g_loading_shown = false;
}

/* Runs the UI on a provider, with the start-up notes (no GPU, the draft
 * model, the template, the socket; NULL or "" for none) among its warnings,
 * after what the app found itself (the database, a second chat); 0 when it
 * ended normally. */
static int run_ui(ui_app_config *ac, const char *const *notes, int n_notes) {
    ui_app *app;
    llc_err err;
    int status = 1;
    if (ui_app_create(ac, &app, &err) == 0) {
        for (int i = 0; i < n_notes; i++)
            if (notes[i] && notes[i][0]) ui_app_warn(app, "%s", notes[i]);
        if (ui_run(app, &err) == 0) status = 0;
        else fprintf(stderr, "llmchat: %s\n", err.msg);
        ui_app_free(app);
    } else {
        fprintf(stderr, "llmchat: %s\n", err.msg);
    }
    return status;
}

/* /model PATH: another model for a tab, with an engine of its own (the same
 * options as the default model; its own chat template). Runs on the app's
 * loading thread. */
typedef struct other_model {
    llm L;
    engine *e;
    char name[256];
} other_model;

static cli_common g_common; /* the options other models open with */

static void other_model_free(void *p) {
    other_model *m = p;
    engine_destroy(m->e);
    llm_close(&m->L);
    free(m);
}

static int open_model(void *ctx, const char *path, provider **out, llc_err *err) {
    cli_common common = g_common;
    common.model = path;
    common.draft = NULL; /* the draft belongs to the default model */
    common.quiet = true; /* curses owns the terminal: notices would land on the screen */
    common.ngram = false;
    other_model *m = calloc(1, sizeof *m);
    if (!m) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    chat_tmpl tmpl;
    int rc = llm_open(&common, &m->L, err);
    if (rc) {
        free(m);
        return rc;
    }
    m->L.chat_error[0] = 0; /* (llm_chat_template would print it onto the curses screen) */
    if ((rc = llm_chat_template(&m->L, NULL, &tmpl, err)) || (rc = llm_engine_create(&m->L, &common, &m->e, err))) {
        llm_close(&m->L);
        free(m);
        return rc;
    }
    snprintf(m->name, sizeof m->name, "%s", strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
    prov_local_config lc = {.e = m->e, .tok = m->L.tok, .tmpl = tmpl, .n_ctx = model_hparams_of(m->L.m)->n_ctx_train,
                            .model_name = m->name, .device_name = m->L.be->name,
                            .on_destroy = other_model_free, .destroy_ctx = m};
    if ((rc = prov_local_create(&lc, out, err))) other_model_free(m);
    return rc;
}

/* --remote: the same chat, answered by an OpenAI-compatible server. */
/* The config file's chat defaults into the app's config; *roles (malloc'd,
 * pointing into cfg) must outlive the UI. */
static void config_defaults(const config *cfg, ui_app_config *ac, ui_role **roles) {
    ac->no_mouse = cfg->no_mouse;
    ac->has_temperature = cfg->has_temperature;
    ac->temperature = cfg->temperature;
    ac->max_tokens = cfg->max_tokens;
    ac->system = cfg->system;
    ac->config_path = cfg->path;
    ac->config_models = cfg->other_models;
    ac->n_config_models = cfg->n_other_models;
    *roles = cfg->n_roles ? malloc((size_t)cfg->n_roles * sizeof **roles) : NULL;
    for (int i = 0; *roles && i < cfg->n_roles; i++) (*roles)[i] = (ui_role){cfg->roles[i].name, cfg->roles[i].prompt};
    ac->roles = *roles;
    ac->n_roles = *roles ? cfg->n_roles : 0;
}

static int chat_remote(const cli_common *common, const char *url, const config *cfg) {
    llc_err err;
    char *key_from_file = NULL;
    if (g_remote_key_file && !(key_from_file = file_read_secret(g_remote_key_file, &err))) {
        fprintf(stderr, "llmchat: --remote-api-key-file %s\n", err.msg);
        return 1;
    }
    remote_config rc = {.url = url,
                        .model = g_remote_model ? g_remote_model : getenv("LLMCHAT_REMOTE_MODEL"),
                        .api_key = key_from_file     ? key_from_file
                                   : g_remote_key ? g_remote_key
                                                  : getenv("LLMCHAT_REMOTE_API_KEY")};
    provider *p;
    const int rcode = remote_create(&rc, &p, &err); /* (it keeps a copy of the key) */
    free(key_from_file);
    if (rcode) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        return 1;
    }
    char db_buf[1024];
    g_common = *common;
    ui_app_config ac = {.prov = p, .model_path = "", .open_model = open_model,
                        .db_path = database_path(common, db_buf, sizeof db_buf)};
    ui_role *roles;
    config_defaults(cfg, &ac, &roles);
    const char *notes[] = {g_listen ? "--listen is not served with --remote" : NULL};
    int status = run_ui(&ac, notes, 1);
    prov_free(p);
    free(roles);
    return status;
}

int cmd_chat(int argc, char **argv) {
    cli_common common = {0};
    cli_parse(&cli_chat, &common, argc, argv, NULL, 0);
    const char *remote = g_remote ? g_remote : getenv("LLMCHAT_REMOTE");
    config cfg;
    llc_err err;
    if (config_load(&cfg, &err)) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        return 1;
    }
    if (remote && remote[0]) {
        int status = chat_remote(&common, remote, &cfg);
        config_free(&cfg);
        return status;
    }
    if (!common.model_given && cfg.model) common.model = cfg.model;
    if (!g_template && !g_template_file && cfg.chat_template) g_template = cfg.chat_template;
    llm L;
    common.quiet = true; /* notices go to the chat's status area: stderr before curses would stay on the
                            screen under it, and show again after quitting */
    loading_line(common.model);
    if (llm_open(&common, &L, &err)) {
        loading_clear();
        fprintf(stderr, "llmchat: %s\n", err.msg);
        config_free(&cfg);
        return 1;
    }
    chat_tmpl tmpl;
    engine *e = NULL;
    char template_note[400] = ""; /* a template that cannot be used: said in the chat, not on stderr */
    int trc = g_template_file ? llm_chat_template_file(&L, g_template_file, &err) : 0;
    if (!trc && !g_template && !L.chat && L.chat_error[0]) {
        snprintf(template_note, sizeof template_note, "%s", L.chat_error);
        L.chat_error[0] = 0;
    }
    if (trc || llm_chat_template(&L, g_template, &tmpl, &err) || llm_engine_create(&L, &common, &e, &err)) {
        loading_clear();
        fprintf(stderr, "llmchat: %s\n", err.msg);
        llm_close(&L);
        config_free(&cfg);
        return 1;
    }
    char db_buf[1024];
    const char *dbp = database_path(&common, db_buf, sizeof db_buf);
    const char *slash = strrchr(common.model, '/');
    prov_local_config lc = {.e = e, .tok = L.tok, .tmpl = tmpl, .n_ctx = model_hparams_of(L.m)->n_ctx_train,
                            .model_name = slash ? slash + 1 : common.model, .device_name = L.be->name};
    provider *p = NULL;
    if (prov_local_create(&lc, &p, &err)) {
        loading_clear();
        fprintf(stderr, "llmchat: %s\n", err.msg);
        engine_destroy(e);
        llm_close(&L);
        config_free(&cfg);
        return 1;
    }
    g_common = common;
    char *model_abs = realpath(common.model, NULL); /* how sessions name a model file */
    ui_app_config ac = {.prov = p, .model_path = model_abs ? model_abs : common.model, .open_model = open_model,
                        .db_path = dbp};
    ui_role *roles;
    config_defaults(&cfg, &ac, &roles);
    srv *server = NULL;
    char srv_error[400] = "";
    if (!g_no_socket) {
        srv_config sc = {.socket_path = common.socket, .listen = g_listen, .api_key = g_api_key,
                         .db_path = dbp ? dbp : "", .notify = true};
        llc_err serr;
        if (srv_start(e, &L, tmpl, &sc, &server, &serr) == 0) {
            ac.extra_fd = srv_notify_fd(server);
            ac.on_extra = on_server_notes;
            ac.extra_ctx = server;
        } else {
            snprintf(srv_error, sizeof srv_error, "not serving editors: %.300s", serr.msg);
        }
    }
    char draft_note[400] = "";
    if (L.draft_error[0]) snprintf(draft_note, sizeof draft_note, "%.300s; going on without speculation", L.draft_error);
    loading_clear(); /* the model, its engine and the server are ready: the UI takes the screen */
    const char *notes[] = {L.device_note, draft_note, template_note, srv_error};
    int status = run_ui(&ac, notes, 4);
    srv_stop(server); /* before the engine goes */
    prov_free(p);
    free(model_abs);
    engine_destroy(e);
    llm_close(&L);
    free(roles);
    config_free(&cfg);
    return status;
}
