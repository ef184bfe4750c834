/* srv_notes.c — checks the server's notes for a UI (srv_next_note): runs an
 * engine and srv in this process with cfg.notify, chats with a stored session
 * over the socket, and compares the notes with what was streamed and stored.
 * Usage: srv_notes MODEL DIR; prints one line per check and "N passed, N failed".
 * Links the app objects (see the Makefile). */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "app/server/srv.h"

static int g_pass, g_fail;
static void check(bool ok, const char *what) {
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    ok ? g_pass++ : g_fail++;
}

/* Sends line, reads event lines until one with "event" in stop_events; returns
 * the concatenated token text; *last gets that final event (caller frees). */
static char *exchange(int fd, const char *line, cJSON **last) {
    send(fd, line, strlen(line), MSG_NOSIGNAL);
    static char buf[1 << 16];
    static size_t len;
    size_t tl = 0;
    char *text = calloc(1, 1);
    for (;;) {
        char *nl;
        while ((nl = memchr(buf, '\n', len))) {
            cJSON *j = cJSON_ParseWithLength(buf, (size_t)(nl - buf));
            size_t used = (size_t)(nl - buf) + 1;
            memmove(buf, buf + used, len - used);
            len -= used;
            const char *ev = cJSON_GetStringValue(cJSON_GetObjectItem(j, "event"));
            if (ev && !strcmp(ev, "token")) {
                const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(j, "text"));
                text = realloc(text, tl + strlen(t) + 1);
                strcpy(text + tl, t);
                tl += strlen(t);
                cJSON_Delete(j);
            } else {
                *last = j;
                return text;
            }
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 20000) <= 0) break;
        ssize_t r = recv(fd, buf + len, sizeof buf - len, 0);
        if (r <= 0) break;
        len += (size_t)r;
    }
    *last = NULL;
    return text;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: srv_notes MODEL DIR\n");
        return 2;
    }
    char sock[108], dbp[512];
    snprintf(sock, sizeof sock, "%s/notes.sock", argv[2]);
    snprintf(dbp, sizeof dbp, "%s/notes.db", argv[2]);
    cli_common common = {.model = argv[1], .device = "cpu", .kv_mem = 16 << 20};
    llm L;
    llc_err err;
    engine *e = NULL;
    srv *s = NULL;
    chat_tmpl t;
    if (llm_open(&common, &L, &err) || llm_chat_template(&L, NULL, &t, &err) ||
        llm_engine_create(&L, &common, &e, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    srv_config cfg = {.socket_path = sock, .db_path = dbp, .notify = true};
    check(srv_start(e, &L, t, &cfg, &s, &err) == 0, "srv_start with notify");
    check(s && srv_notify_fd(s) >= 0, "a notify fd");
    if (!s) goto out;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    check(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect");
    cJSON *last;
    free(exchange(fd, "{\"id\":1,\"method\":\"sessions.create\",\"title\":\"n\"}\n", &last));
    cJSON_Delete(last);
    char *text = exchange(fd, "{\"id\":2,\"method\":\"chat\",\"session\":1,\"content\":\"Hi\",\"max_tokens\":20,\"temperature\":0}\n", &last);
    double mid0 = cJSON_GetNumberValue(cJSON_GetObjectItem(last, "message_id"));
    cJSON_Delete(last);
    /* notes: SESSION (create), SESSION (user message), TEXT..., DONE */
    struct pollfd p = {.fd = srv_notify_fd(s), .events = POLLIN};
    check(poll(&p, 1, 1000) == 1, "the notify fd is readable");
    int n_session = 0, n_done = 0;
    size_t tl = 0;
    char *ntext = calloc(1, 1);
    bool ids_ok = true;
    srv_note *n;
    while ((n = srv_next_note(s))) {
        if (n->kind == SRV_NOTE_SESSION) n_session += n->session_id == 1;
        if (n->kind == SRV_NOTE_DONE) n_done++;
        if (n->kind == SRV_NOTE_TEXT && n->index == 0) {
            ids_ok &= n->message_id == (int64_t)mid0 && n->session_id == 1;
            ntext = realloc(ntext, tl + n->len + 1);
            memcpy(ntext + tl, n->text, n->len + 1);
            tl += n->len;
        }
        srv_note_free(n);
    }
    check(n_session == 2, "SESSION notes: created, then the user message");
    check(n_done == 1, "a DONE note for the answer");
    check(ids_ok, "TEXT notes name the session and the answer's message id");
    check(tl > 0 && !strcmp(text, ntext), "TEXT notes = the streamed text");
    check(srv_next_note(s) == NULL, "no more notes");
    free(ntext);
    free(text);
    close(fd);
out:
    srv_stop(s);
    engine_destroy(e);
    llm_close(&L);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail != 0;
}
