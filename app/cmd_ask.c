/* cmd_ask.c — `llmchat ask [--session NAME | --new] [PROMPT | -]`: sends one
 * message to the running llmchat (UI or `serve`) over its socket and streams
 * the answer to stdout, for shells and editor commands. --session continues a
 * stored session (by id or title; a new title makes a new session), --new
 * starts one; otherwise the question is asked without being stored. With
 * --local the engine runs in this process (a private socket server), so the
 * same code path answers. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "app/commands.h"
#include "app/fileio.h"
#include "app/llm.h"
#include "app/server/srv.h"
#include "kernels/sbuf.h"

static const char *g_session, *g_system, *g_template, *g_template_file, *g_grammar_file, *g_json_schema;
static char *g_grammar; /* GBNF from --grammar-file / --json-schema */
static bool g_new, g_local;
static float g_temp = -1;
static int g_max_tokens, g_seed = -2;

static const cli_opt g_opts[] = {
    {"session", 's', CLI_STR, &g_session, "NAME", "continue a stored session (id or title; a new title starts one)", 0, 0, NULL},
    {"new", 0, CLI_FLAG, &g_new, NULL, "start a new stored session", 0, 0, NULL},
    {"local", 0, CLI_FLAG, &g_local, NULL, "run the engine in this process instead of asking a running llmchat", 0, 0, NULL},
    {"system", 0, CLI_STR, &g_system, "TEXT", "system prompt (one-off questions and new sessions)", 0, 0, NULL},
    {"temp", 0, CLI_FLOAT, &g_temp, "T", "temperature (default: the session's, else 0.8)", 0, 100, NULL},
    {"max-tokens", 'n', CLI_INT, &g_max_tokens, "N", "tokens to generate at most", 1, 1 << 24, NULL},
    {"seed", 0, CLI_INT, &g_seed, "N", "random seed (default: the session's, else random)", -1, 2147483647, NULL},
    {"chat-template", 0, CLI_STR, &g_template, "NAME", "with --local: override the model's chat template", 0, 0, NULL},
    {"chat-template-file", 0, CLI_STR, &g_template_file, "FILE", "a Jinja chat template to use instead of the model's", 0, 0, NULL},
    {"grammar-file", 0, CLI_STR, &g_grammar_file, "FILE", "constrain the answer to a GBNF grammar", 0, 0, NULL},
    {"json-schema", 0, CLI_STR, &g_json_schema, "FILE|JSON", "constrain the answer to JSON valid against a schema", 0, 0, NULL},
    {0},
};

const cli_cmd cli_ask = {
    .name = "ask",
    .usage = "[--session NAME | --new] [--local] (PROMPT | -)",
    .summary = "ask the running llmchat (or, with --local, this process) and stream the answer",
    .opts = g_opts,
};

/* ---- a minimal NDJSON client ---- */

typedef struct client {
    int fd;
    sbuf in; /* what was read and not yet parsed */
} client;

static int cl_connect(const char *path, client *c) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(a.sun_path, path, strlen(path) + 1);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) return -1;
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a)) {
        int e = errno;
        close(c->fd);
        c->fd = -1;
        errno = e;
        return -1;
    }
    return 0;
}

static int cl_send(client *c, cJSON *req) {
    char *s = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    if (!s) return -1;
    size_t n = strlen(s), off = 0;
    s[n++] = '\n'; /* replaces the NUL: the length is n */
    while (off < n) {
        ssize_t w = send(c->fd, s + off, n - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            free(s);
            return -1;
        }
        off += (size_t)w;
    }
    free(s);
    return 0;
}

/* The next event line, parsed; NULL at end of stream. */
static cJSON *cl_next(client *c) {
    for (;;) {
        char *nl = c->in.len ? memchr(c->in.p, '\n', c->in.len) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - c->in.p);
            cJSON *j = cJSON_ParseWithLength(c->in.p, n);
            sb_drop(&c->in, n + 1);
            if (j) return j;
            continue;
        }
        if (!sb_reserve(&c->in, 65536)) return NULL;
        ssize_t r = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len - 1, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return NULL;
        sb_wrote(&c->in, (size_t)r);
    }
}

/* Sends req and returns the "result" of its answer, or NULL with the error on stderr. */
static cJSON *cl_call(client *c, cJSON *req) {
    if (cl_send(c, req)) {
        fprintf(stderr, "llmchat ask: the connection to llmchat was lost\n");
        return NULL;
    }
    cJSON *ev = cl_next(c);
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(ev, "event");
    if (cJSON_IsString(kind) && !strcmp(kind->valuestring, "result")) {
        cJSON *res = cJSON_DetachItemFromObjectCaseSensitive(ev, "result");
        cJSON_Delete(ev);
        return res;
    }
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(ev, "message");
    fprintf(stderr, "llmchat ask: %s\n", cJSON_IsString(msg) ? msg->valuestring : "the connection to llmchat was lost");
    cJSON_Delete(ev);
    return NULL;
}

/* The id of session NAME (an id or a title), creating it when there is none. */
static int64_t find_session(client *c, const char *name, bool create_new) {
    if (!create_new) {
        cJSON *req = cJSON_CreateObject();
        cJSON_AddStringToObject(req, "id", "list");
        cJSON_AddStringToObject(req, "method", "sessions.list");
        cJSON *res = cl_call(c, req);
        if (!res) return -1;
        char *end;
        long long as_id = strtoll(name, &end, 10);
        bool numeric = *name && !*end;
        int64_t found = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(res, "sessions")) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
            const cJSON *title = cJSON_GetObjectItemCaseSensitive(e, "title");
            if (!cJSON_IsNumber(id)) continue;
            if (numeric && (long long)id->valuedouble == as_id) {
                found = as_id; /* an id wins over a title */
                break;
            }
            if (!found && cJSON_IsString(title) && !strcmp(title->valuestring, name)) found = (int64_t)id->valuedouble;
        }
        cJSON_Delete(res);
        if (found > 0) return found;
    }
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "id", "create");
    cJSON_AddStringToObject(req, "method", "sessions.create");
    if (name) cJSON_AddStringToObject(req, "title", name);
    if (g_system) cJSON_AddStringToObject(req, "system_prompt", g_system);
    cJSON *res = cl_call(c, req);
    if (!res) return -1;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(res, "session"), "id");
    int64_t sid = cJSON_IsNumber(id) ? (int64_t)id->valuedouble : -1;
    cJSON_Delete(res);
    return sid;
}

/* Asks and streams the answer; the exit status. */
static int ask(client *c, const char *prompt) {
    int64_t sid = 0;
    if (g_session || g_new) {
        sid = find_session(c, g_session, g_new);
        if (sid < 0) return 1;
    }
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "id", "ask");
    cJSON_AddStringToObject(req, "method", "chat");
    if (sid > 0) {
        cJSON_AddNumberToObject(req, "session", (double)sid);
        cJSON_AddStringToObject(req, "content", prompt);
    } else {
        cJSON *msgs = cJSON_AddArrayToObject(req, "messages"), *m;
        if (g_system) {
            cJSON_AddItemToArray(msgs, m = cJSON_CreateObject());
            cJSON_AddStringToObject(m, "role", "system");
            cJSON_AddStringToObject(m, "content", g_system);
        }
        cJSON_AddItemToArray(msgs, m = cJSON_CreateObject());
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", prompt);
    }
    if (g_temp >= 0) cJSON_AddNumberToObject(req, "temperature", g_temp);
    if (g_max_tokens > 0) cJSON_AddNumberToObject(req, "max_tokens", g_max_tokens);
    if (g_seed >= -1) cJSON_AddNumberToObject(req, "seed", g_seed);
    else if (sid == 0) cJSON_AddNumberToObject(req, "seed", -1); /* a new answer each time, as in the UI */
    if (g_grammar) cJSON_AddStringToObject(req, "grammar", g_grammar);
    if (cl_send(c, req)) {
        fprintf(stderr, "llmchat ask: the connection to llmchat was lost\n");
        return 1;
    }
    for (;;) {
        cJSON *ev = cl_next(c);
        if (!ev) {
            fprintf(stderr, "\nllmchat ask: the connection to llmchat was lost\n");
            return 1;
        }
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(ev, "event");
        const char *k = cJSON_IsString(kind) ? kind->valuestring : "";
        int status = -1;
        if (!strcmp(k, "token")) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(ev, "text");
            if (cJSON_IsString(t)) {
                fputs(t->valuestring, stdout);
                fflush(stdout);
            }
        } else if (!strcmp(k, "done")) {
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(ev, "finish_reason");
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(ev, "error");
            const char *finish = cJSON_IsString(f) ? f->valuestring : "";
            printf("\n");
            fflush(stdout);
            status = 0;
            if (!strcmp(finish, "error") || !strcmp(finish, "cancelled")) {
                fprintf(stderr, "llmchat ask: the answer was %s%s%s\n", !strcmp(finish, "error") ? "cut by an error" : "cancelled",
                        cJSON_IsString(e) ? ": " : "", cJSON_IsString(e) ? e->valuestring : "");
                status = 1;
            }
        } else if (!strcmp(k, "error")) {
            const cJSON *m = cJSON_GetObjectItemCaseSensitive(ev, "message");
            fprintf(stderr, "llmchat ask: %s\n", cJSON_IsString(m) ? m->valuestring : "error");
            status = 1;
        }
        cJSON_Delete(ev);
        if (status >= 0) return status;
    }
}

/* All of stdin; NULL when out of memory. */
static char *read_stdin(void) {
    sbuf b = {0};
    size_t n;
    while (sb_reserve(&b, 4096) && (n = fread(b.p + b.len, 1, b.cap - b.len - 1, stdin)) > 0) sb_wrote(&b, n);
    return sb_take(&b);
}

int cmd_ask(int argc, char **argv) {
    cli_common common = {0};
    const char *pos[1] = {NULL};
    int npos = cli_parse(&cli_ask, &common, argc, argv, pos, 1);
    if (g_session && g_new) cli_usage_error(&cli_ask, "give --session NAME or --new, not both");
    if (npos < 1) cli_usage_error(&cli_ask, "give a PROMPT, or - to read it from stdin");
    llc_err gerr;
    if (file_read_grammar(g_grammar_file, g_json_schema, &g_grammar, &gerr)) {
        fprintf(stderr, "llmchat ask: %s\n", gerr.msg);
        return 1;
    }
    char *text = !strcmp(pos[0], "-") ? read_stdin() : strdup(pos[0]);
    if (!text) {
        fprintf(stderr, "llmchat ask: cannot read the prompt\n");
        return 1;
    }
    size_t tl = strlen(text);
    while (tl > 0 && (text[tl - 1] == '\n' || text[tl - 1] == '\r')) text[--tl] = 0;
    if (!*text) {
        free(text);
        cli_usage_error(&cli_ask, "the prompt is empty");
    }
    signal(SIGPIPE, SIG_IGN);
    client c = {.fd = -1};
    llm L = {0};
    engine *e = NULL;
    srv *s = NULL;
    char sock[108], dir[64] = "";
    llc_err err;
    int status = 1;
    if (g_local) { /* a private server in this process */
        snprintf(dir, sizeof dir, "/tmp/llmchat-ask-XXXXXX");
        chat_tmpl t;
        char name[128];
        srv_display_name(common.model, name, sizeof name);
        if (!mkdtemp(dir)) {
            fprintf(stderr, "llmchat ask: %s\n", strerror(errno));
            dir[0] = 0;
            goto out;
        }
        snprintf(sock, sizeof sock, "%s/s.sock", dir);
        srv_config cfg = {.socket_path = sock, .db_path = g_session || g_new ? common.db : "", .model_name = name};
        if (llm_open(&common, &L, &err) ||
            (g_template_file && llm_chat_template_file(&L, g_template_file, &err)) ||
            llm_chat_template(&L, g_template, &t, &err) ||
            llm_engine_create(&L, &common, &e, &err) || srv_start(e, &L, t, &cfg, &s, &err)) {
            fprintf(stderr, "llmchat: %s\n", err.msg);
            goto out;
        }
    } else if (common.socket) {
        snprintf(sock, sizeof sock, "%s", common.socket);
    } else if (srv_default_socket_path(sock, sizeof sock, &err)) {
        fprintf(stderr, "llmchat ask: %s\n", err.msg);
        goto out;
    }
    if (cl_connect(sock, &c)) {
        if (errno == ENOENT || errno == ECONNREFUSED)
            fprintf(stderr, "llmchat ask: no llmchat is running on %s (start the chat UI or 'llmchat serve', or use --local)\n", sock);
        else
            fprintf(stderr, "llmchat ask: %s: %s\n", sock, strerror(errno));
        goto out;
    }
    status = ask(&c, text);
out:
    if (c.fd >= 0) close(c.fd);
    sb_free(&c.in);
    free(text);
    srv_stop(s);
    engine_destroy(e);
    if (L.m) llm_close(&L);
    if (dir[0]) rmdir(dir);
    free(g_grammar);
    return status;
}
