/* cmd_serve.c — `llmchat serve`: the engine and the local socket server
 * without a UI, until SIGINT or SIGTERM; then every stream ends with a
 * `cancelled` finish and the process exits 0. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/commands.h"
#include "app/fileio.h"
#include "app/llm.h"
#include "app/server/srv.h"

static const char *g_listen, *g_api_key, *g_api_key_file, *g_template, *g_template_file, *g_cors;
static bool g_no_metrics, g_no_slots;
static const char *g_reasoning_format;
static int g_max_clients = 256, g_request_timeout = 5, g_stall_timeout = 30;
static int64_t g_client_buffer, g_max_body;

static const cli_opt g_opts[] = {
    {"listen", 0, CLI_STR, &g_listen, "HOST:PORT",
     "also serve HTTP and NDJSON on TCP (e.g. 127.0.0.1:8080; port 0 picks one)", 0, 0, NULL},
    {"api-key", 0, CLI_STR, &g_api_key, "KEY",
     "key TCP clients must give (Bearer); needed for a non-loopback --listen. Other local users see a "
     "command line: --api-key-file or LLMCHAT_API_KEY keep it out of it", 0, 0, NULL},
    {"api-key-file", 0, CLI_STR, &g_api_key_file, "FILE", "read the key from the first line of FILE", 0, 0, NULL},
    {"chat-template", 0, CLI_STR, &g_template, "NAME", "override the model's chat template", 0, 0, NULL},
    {"chat-template-file", 0, CLI_STR, &g_template_file, "FILE", "a Jinja chat template to use instead of the model's", 0, 0, NULL},
    {"cors-origin", 0, CLI_STR, &g_cors, "ORIGINS",
     "browser origins allowed to read TCP answers, comma-separated (default *: any; none: no CORS headers)", 0, 0, NULL},
    {"reasoning-format", 0, CLI_STR, &g_reasoning_format, "FORMAT",
     "auto (default): a thinking model's reasoning comes apart from the answer (reasoning_content, "
     "Ollama's thinking); none: all of it is the answer", 0, 0, NULL},
    {"no-metrics", 0, CLI_FLAG, &g_no_metrics, NULL, "turn GET /metrics off", 0, 0, NULL},
    {"no-slots", 0, CLI_FLAG, &g_no_slots, NULL, "turn GET /slots off", 0, 0, NULL},
    {"max-clients", 0, CLI_INT, &g_max_clients, "N",
     "open connections per listener (Unix socket, TCP) at most (default 256)", 1, 100000, NULL},
    {"request-timeout", 0, CLI_INT, &g_request_timeout, "S",
     "a request (HTTP head, or first byte) must arrive within this (default 5)", 1, 3600, NULL},
    {"stall-timeout", 0, CLI_INT, &g_stall_timeout, "S",
     "an HTTP stream whose client reads nothing for this long is cancelled (default 30)", 1, 3600, NULL},
    {"max-body", 0, CLI_SIZE, &g_max_body, "SIZE", "largest HTTP request body (default 8M)", 0, 0, NULL},
    {"client-buffer", 0, CLI_SIZE, &g_client_buffer, "SIZE",
     "output queued for a client that does not read before it is dropped (default 4M)", 0, 0, NULL},
    {0},
};

const cli_cmd cli_serve = {
    .name = "serve",
    .usage = "[-m MODEL] [--socket PATH] [--listen HOST:PORT [--api-key KEY]] [--db PATH]",
    .summary = "run the engine for editors and scripts on a local socket, without the UI",
    .opts = g_opts,
};

int cmd_serve(int argc, char **argv) {
    cli_common common = {0};
    cli_parse(&cli_serve, &common, argc, argv, NULL, 0);
    char *key_from_file = NULL;
    if (g_api_key && g_api_key_file) cli_usage_error(&cli_serve, "--api-key or --api-key-file, not both");
    if (g_api_key_file) {
        llc_err kerr;
        if (!(key_from_file = file_read_secret(g_api_key_file, &kerr))) {
            fprintf(stderr, "llmchat: --api-key-file %s\n", kerr.msg);
            return 1;
        }
        g_api_key = key_from_file;
    }
    if (!g_api_key) g_api_key = getenv("LLMCHAT_API_KEY");
    if (g_reasoning_format && strcmp(g_reasoning_format, "auto") && strcmp(g_reasoning_format, "none"))
        cli_usage_error(&cli_serve, "--reasoning-format: '%s' is not auto or none", g_reasoning_format);
    if (g_template && chat_tmpl_from_name(g_template) < 0)
        cli_usage_error(&cli_serve, "--chat-template: '%s' is not one of %s", g_template, chat_tmpl_names());
    /* SIGINT/SIGTERM are taken by sigwait below; every thread started from here
       on inherits the blocked mask */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    llc_err err;
    llm L;
    if (llm_open(&common, &L, &err)) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        free(key_from_file);
        return 1;
    }
    chat_tmpl tmpl;
    engine *e = NULL;
    srv *s = NULL;
    char name[128];
    srv_display_name(common.model, name, sizeof name);
    srv_config cfg = {.socket_path = common.socket, .listen = g_listen, .api_key = g_api_key,
                      .db_path = common.db, .model_name = name, .max_clients = g_max_clients,
                      .max_outbuf = (size_t)g_client_buffer, .max_body = (size_t)g_max_body,
                      .request_timeout_ms = g_request_timeout * 1000, .model_path = common.model,
                      .cors_origins = g_cors, .no_metrics = g_no_metrics, .no_slots = g_no_slots,
                      .no_reasoning = g_reasoning_format && !strcmp(g_reasoning_format, "none"),
                      .stall_ms = g_stall_timeout * 1000};
    int status = 1;
    if ((g_template_file && llm_chat_template_file(&L, g_template_file, &err)) ||
        llm_chat_template(&L, g_template, &tmpl, &err) || llm_engine_create(&L, &common, &e, &err)) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        goto out;
    }
    if (srv_start(e, &L, tmpl, &cfg, &s, &err)) {
        fprintf(stderr, "llmchat serve: %s\n", err.msg);
        goto out;
    }
    fprintf(stderr, "llmchat serve: %s (%s template) on unix:%s", name, chat_tmpl_name(tmpl), srv_socket_path(s));
    if (srv_tcp_port(s)) fprintf(stderr, " and tcp port %d", srv_tcp_port(s));
    fprintf(stderr, "\n");
    if (*srv_db_error(s) && !(common.db && !*common.db))
        fprintf(stderr, "llmchat serve: sessions are unavailable: %s\n", srv_db_error(s));
    fflush(stderr);
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "llmchat serve: %s, stopping\n", strsignal(sig));
    srv_stop(s);
    s = NULL;
    status = 0;
out:
    srv_stop(s);
    engine_destroy(e);
    llm_close(&L);
    free(key_from_file);
    return status;
}
