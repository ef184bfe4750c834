/* cmd_chat.c — `llmchat` / `llmchat chat`: the tabbed chat UI on one shared
 * engine. Opens the model (-m, else the config file's `model =`, else the
 * default), the database (--db, else the XDG data dir), serves the engine and
 * the sessions on the local socket (so `llmchat ask` and editors share them;
 * what they do to an open session shows live), and runs the UI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/commands.h"
#include "app/config.h"
#include "app/llm.h"
#include "app/server/srv.h"
#include "ui/app.h"
#include "ui/view.h"

static const char *g_template, *g_template_file, *g_listen, *g_api_key;
static bool g_no_socket;

static const cli_opt g_opts[] = {
    {"chat-template", 0, CLI_STR, &g_template, "NAME", "chat template (default: the model's own)", 0, 0, NULL},
    {"chat-template-file", 0, CLI_STR, &g_template_file, "FILE", "a Jinja chat template to use instead of the model's", 0, 0, NULL},
    {"listen", 0, CLI_STR, &g_listen, "HOST:PORT", "also serve editors on TCP (see llmchat serve)", 0, 0, NULL},
    {"api-key", 0, CLI_STR, &g_api_key, "KEY", "key TCP clients must give (Bearer)", 0, 0, NULL},
    {"no-socket", 0, CLI_FLAG, &g_no_socket, NULL, "do not serve the local socket", 0, 0, NULL},
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
    .usage = "[-m MODEL] [--db PATH] [--socket PATH | --no-socket] [--listen HOST:PORT] [--chat-template NAME | --chat-template-file FILE]",
    .summary = "the chat UI: tabs, sessions kept in SQLite (the default command)",
    .opts = g_opts,
};

int cmd_chat(int argc, char **argv) {
    cli_common common = {0};
    cli_parse(&cli_chat, &common, argc, argv, NULL, 0);
    config cfg;
    llc_err err;
    if (config_load(&cfg, &err)) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        return 1;
    }
    if (!common.model_given && cfg.model) common.model = cfg.model;
    if (!g_template && !g_template_file && cfg.chat_template) g_template = cfg.chat_template;
    llm L;
    if (llm_open(&common, &L, &err)) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        config_free(&cfg);
        return 1;
    }
    chat_tmpl tmpl;
    engine *e = NULL;
    if ((g_template_file && llm_chat_template_file(&L, g_template_file, &err)) ||
        llm_chat_template(&L, g_template, &tmpl, &err) || llm_engine_create(&L, &common, &e, &err)) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        llm_close(&L);
        config_free(&cfg);
        return 1;
    }
    char db_path[1024];
    const char *dbp = common.db;
    if (!dbp) {
        llc_err derr;
        dbp = db_default_path(db_path, sizeof db_path, &derr) == 0 ? db_path : NULL;
    }
    const char *slash = strrchr(common.model, '/');
    ui_app_config ac = {.e = e, .tok = L.tok, .tmpl = tmpl, .n_ctx = model_hparams_of(L.m)->n_ctx_train,
                        .model_name = slash ? slash + 1 : common.model, .device_name = L.be->name,
                        .db_path = dbp};
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
    ui_app *app;
    int status = 1;
    if (ui_app_create(&ac, &app, &err) == 0) {
        if (srv_error[0]) ui_app_notice(app, true, "%s", srv_error);
        if (L.draft_error[0]) ui_app_notice(app, true, "%s; going on without speculation", L.draft_error);
        if (ui_run(app, &err) == 0) status = 0;
        else fprintf(stderr, "llmchat: %s\n", err.msg);
        ui_app_free(app);
    } else {
        fprintf(stderr, "llmchat: %s\n", err.msg);
    }
    srv_stop(server); /* before the engine goes */
    engine_destroy(e);
    llm_close(&L);
    config_free(&cfg);
    return status;
}
