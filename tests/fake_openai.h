/* fake_openai.h — a small OpenAI-compatible HTTP server on loopback for the
 * tests of the remote provider (tests/test_remote.c in-process, and
 * tests/tools/fake_openai for the tmux tests). Header-only, one thread per
 * connection, one request per connection (Connection: close).
 *
 * What it does depends on the request's "model":
 *   ok (or none)  streams "You said: " + the last message's words, then [DONE]
 *   slow          streams "tick " every 20 ms, 1000 times (for cancelling)
 *   trickle       streams "wN " every 50 ms, 100 times, then [DONE]
 *   die           streams three pieces, then closes the connection mid-answer
 *   busy          429 with an OpenAI-style error object
 *   length        streams two pieces, then finish_reason "length"
 *   nostream      one chat.completion JSON object instead of a stream
 *   markdown      streams a Markdown answer (heading, list, code block)
 *   rich          streams a table (split inside its rows) and two code blocks
 *                 (python, sh), for syntax colours, tables and /copy code N
 *   burst         five pieces in one write, then 100 ms later the end (usage:
 *                 5 tokens), as a server that flushes tokens in bunches
 * A last message whose last paragraph starts with "mode:NAME " picks NAME the
 * same way (so one chat can try them all; the chat joins a message to the one
 * before when the answer between them failed).
 * With a key, a request without "Authorization: Bearer KEY" gets 401.
 * GET /v1/models lists "ok". */
#ifndef LLC_TESTS_FAKE_OPENAI_H
#define LLC_TESTS_FAKE_OPENAI_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

typedef struct fake_openai {
    int listen_fd;
    int port;
    char key[128];             /* "" none */
    pthread_t thread;
    pthread_mutex_t mu;
    char last_body[8192];      /* the last chat request's body */
    char last_auth[256];       /* its Authorization header */
    int n_requests;
} fake_openai;

static void fo_sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int fo_send(int fd, const char *s, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

static int fo_sends(int fd, const char *s) { return fo_send(fd, s, strlen(s)); }

static void fo_reply(int fd, int status, const char *reason, const char *json) {
    char head[256];
    snprintf(head, sizeof head,
             "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n",
             status, reason, strlen(json));
    fo_sends(fd, head);
    fo_sends(fd, json);
}

/* One streamed piece of text as an SSE chunk (field: "content", or a thinking
 * model's "reasoning_content" / "reasoning"); finish: NULL or a reason. */
static int fo_chunk_field(int fd, const char *field, const char *text, const char *finish) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "object", "chat.completion.chunk");
    cJSON *choices = cJSON_AddArrayToObject(j, "choices");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    cJSON *d = cJSON_AddObjectToObject(c, "delta");
    if (text) cJSON_AddStringToObject(d, field, text);
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(choices, c);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    int rc = fo_sends(fd, "data: ") || fo_sends(fd, s) || fo_sends(fd, "\n\n");
    free(s);
    return rc;
}

static int fo_chunk(int fd, const char *text, const char *finish) { return fo_chunk_field(fd, "content", text, finish); }

static void fo_stream_head(int fd) {
    fo_sends(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                 "Connection: close\r\n\r\n");
}

static void fo_stream_end(int fd, int completion_tokens) {
    char u[200];
    snprintf(u, sizeof u,
             "data: {\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":7,"
             "\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n",
             completion_tokens, 7 + completion_tokens);
    fo_sends(fd, u);
    fo_sends(fd, "data: [DONE]\n\n");
}

/* The last message's text (malloc'd). */
static char *fo_last_content(const cJSON *req) {
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(req, "messages");
    int n = cJSON_GetArraySize(msgs);
    const cJSON *last = n > 0 ? cJSON_GetArrayItem(msgs, n - 1) : NULL;
    const cJSON *c = last ? cJSON_GetObjectItemCaseSensitive(last, "content") : NULL;
    return strdup(cJSON_IsString(c) ? c->valuestring : "");
}

static void fo_chat(fake_openai *f, int fd, const char *body) {
    cJSON *req = cJSON_Parse(body);
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(req, "messages");
    if (!req || !cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0) {
        fo_reply(fd, 400, "Bad Request", "{\"error\":{\"message\":\"messages is required\"}}");
        cJSON_Delete(req);
        return;
    }
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(req, "model");
    const char *model = cJSON_IsString(m) ? m->valuestring : "ok";
    char mode[32];
    char *last0 = fo_last_content(req);
    const char *para = last0 && strstr(last0, "\n\n") ? strrchr(last0, '\n') + 1 : last0;
    if (para && !strncmp(para, "mode:", 5)) {
        size_t k = strcspn(para + 5, " ");
        snprintf(mode, sizeof mode, "%.*s", (int)(k < 31 ? k : 31), para + 5);
        model = mode;
    }
    free(last0);
    if (!strcmp(model, "busy")) {
        fo_reply(fd, 429, "Too Many Requests",
                 "{\"error\":{\"message\":\"Rate limit reached for requests\",\"type\":\"requests\"}}");
    } else if (!strcmp(model, "nostream")) {
        fo_reply(fd, 200, "OK",
                 "{\"object\":\"chat.completion\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
                 "\"content\":\"All at once.\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,"
                 "\"completion_tokens\":3}}");
    } else if (!strcmp(model, "slow")) {
        fo_stream_head(fd);
        for (int i = 0; i < 1000; i++) {
            if (fo_chunk(fd, "tick ", NULL)) break;
            fo_sleep_ms(20);
        }
    } else if (!strcmp(model, "trickle")) {
        fo_stream_head(fd);
        char w[32];
        int i;
        for (i = 0; i < 100; i++) {
            snprintf(w, sizeof w, "w%d ", i);
            if (fo_chunk(fd, w, NULL)) break;
            fo_sleep_ms(50);
        }
        if (i == 100 && !fo_chunk(fd, NULL, "stop")) fo_stream_end(fd, 100);
    } else if (!strcmp(model, "die")) {
        fo_stream_head(fd);
        fo_chunk(fd, "The answer ", NULL);
        fo_chunk(fd, "was going ", NULL);
        fo_chunk(fd, "well", NULL);
        fo_sleep_ms(50);
        /* the server dies: the connection closes with no finish and no [DONE] */
    } else if (!strcmp(model, "think")) { /* a thinking model: reasoning first, both field names */
        fo_stream_head(fd);
        fo_chunk_field(fd, "reasoning_content", "I plan", NULL);
        fo_chunk_field(fd, "reasoning", " a greeting.", NULL);
        fo_chunk(fd, "Hello.", NULL);
        fo_chunk(fd, NULL, "stop");
        fo_stream_end(fd, 3);
    } else if (!strcmp(model, "burst")) {
        fo_stream_head(fd);
        static const char five[] = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a \"}}]}\n\n";
        char all[5 * sizeof five];
        size_t n = 0;
        for (int i = 0; i < 5; i++, n += sizeof five - 1) memcpy(all + n, five, sizeof five - 1);
        fo_send(fd, all, n);
        fo_sleep_ms(100);
        fo_chunk(fd, NULL, "stop");
        fo_stream_end(fd, 5);
    } else if (!strcmp(model, "length")) {
        fo_stream_head(fd);
        fo_chunk(fd, "cut ", NULL);
        fo_chunk(fd, "short", NULL);
        fo_chunk(fd, NULL, "length");
        fo_stream_end(fd, 2);
    } else if (!strcmp(model, "rich")) {
        static const char *pieces[] = {"Sizes:\n\n| name | size |\n|:--", "-|--:|\n| alpha | 1 |\n| be",
                                       "ta | 22 |\n\n", "```python\ndef greet(name):\n",
                                       "    return \"hi \" + name  # say hi\n```\n\nThen:\n\n",
                                       "```sh\necho second block\n```\n", NULL};
        fo_stream_head(fd);
        int i = 0;
        for (; pieces[i]; i++) {
            fo_chunk(fd, pieces[i], NULL);
            fo_sleep_ms(5);
        }
        fo_chunk(fd, NULL, "stop");
        fo_stream_end(fd, i);
    } else if (!strcmp(model, "markdown")) {
        static const char *pieces[] = {"# Plan\n\n", "Some **bold** and `code`.\n\n", "- one\n- two\n\n",
                                       "```c\n", "int main(void) {\n", "    return 0;\n", "}\n```\n",
                                       "Done.", NULL};
        fo_stream_head(fd);
        int i = 0;
        for (; pieces[i]; i++) {
            fo_chunk(fd, pieces[i], NULL);
            fo_sleep_ms(5);
        }
        fo_chunk(fd, NULL, "stop");
        fo_stream_end(fd, i);
    } else {
        char *last = fo_last_content(req);
        fo_stream_head(fd);
        int n = 1;
        fo_chunk(fd, "You said:", NULL);
        for (char *save = NULL, *w = strtok_r(last, " ", &save); w; w = strtok_r(NULL, " ", &save), n++) {
            char piece[512];
            snprintf(piece, sizeof piece, " %.500s", w);
            fo_chunk(fd, piece, NULL);
            fo_sleep_ms(2);
        }
        fo_chunk(fd, NULL, "stop");
        fo_stream_end(fd, n);
        free(last);
    }
    cJSON_Delete(req);
}

typedef struct fo_conn {
    fake_openai *f;
    int fd;
} fo_conn;

static void *fo_serve_conn(void *arg) {
    fo_conn *c = arg;
    fake_openai *f = c->f;
    int fd = c->fd;
    free(c);
    char buf[65536];
    size_t len = 0;
    char *end = NULL;
    while (len < sizeof buf - 1 && !end) { /* the head */
        ssize_t r = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (r <= 0) goto out;
        len += (size_t)r;
        buf[len] = 0;
        end = strstr(buf, "\r\n\r\n");
    }
    if (!end) goto out;
    *end = 0;
    size_t head_len = (size_t)(end - buf) + 4;
    size_t content_len = 0;
    char auth[256] = "";
    bool expect = false;
    for (char *save = NULL, *l = strtok_r(buf, "\r\n", &save); l; l = strtok_r(NULL, "\r\n", &save)) {
        if (!strncasecmp(l, "Content-Length:", 15)) content_len = strtoul(l + 15, NULL, 10);
        if (!strncasecmp(l, "Authorization:", 14)) snprintf(auth, sizeof auth, "%s", l + 14 + (l[14] == ' '));
        if (!strncasecmp(l, "Expect:", 7)) expect = true;
    }
    if (content_len > sizeof buf - 1 - head_len) {
        fo_reply(fd, 413, "Too Large", "{\"error\":{\"message\":\"too large\"}}");
        goto out;
    }
    if (expect) fo_sends(fd, "HTTP/1.1 100 Continue\r\n\r\n");
    while (len < head_len + content_len) {
        ssize_t r = recv(fd, buf + len, head_len + content_len - len, 0);
        if (r <= 0) goto out;
        len += (size_t)r;
    }
    buf[head_len + content_len] = 0;
    const char *body = buf + head_len;
    bool models = !strncmp(buf, "GET ", 4) && strstr(buf, "/models");
    bool chat = !strncmp(buf, "POST ", 5) && strstr(buf, "/chat/completions");
    char want[200];
    snprintf(want, sizeof want, "Bearer %s", f->key);
    if (f->key[0] && strcmp(auth, want)) {
        fo_reply(fd, 401, "Unauthorized",
                 "{\"error\":{\"message\":\"Incorrect API key provided\",\"type\":\"invalid_request_error\"}}");
    } else if (models) {
        fo_reply(fd, 200, "OK", "{\"object\":\"list\",\"data\":[{\"id\":\"ok\",\"object\":\"model\"}]}");
    } else if (chat) {
        pthread_mutex_lock(&f->mu);
        snprintf(f->last_body, sizeof f->last_body, "%s", body);
        snprintf(f->last_auth, sizeof f->last_auth, "%s", auth);
        f->n_requests++;
        pthread_mutex_unlock(&f->mu);
        fo_chat(f, fd, body);
    } else {
        fo_reply(fd, 404, "Not Found", "{\"error\":{\"message\":\"no such endpoint\"}}");
    }
out:
    close(fd);
    return NULL;
}

static void *fo_accept_loop(void *arg) {
    fake_openai *f = arg;
    for (;;) {
        int fd = accept(f->listen_fd, NULL, NULL);
        if (fd < 0) return NULL; /* closed: the server stops */
        fo_conn *c = malloc(sizeof *c);
        pthread_t t;
        if (!c) {
            close(fd);
            continue;
        }
        c->f = f;
        c->fd = fd;
        if (pthread_create(&t, NULL, fo_serve_conn, c)) {
            close(fd);
            free(c);
            continue;
        }
        pthread_detach(t);
    }
}

/* Listens on 127.0.0.1 at a free port (f->port). key: NULL or "" for none. */
static int fake_openai_start(fake_openai *f, const char *key) {
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    snprintf(f->key, sizeof f->key, "%s", key ? key : "");
    f->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (f->listen_fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (bind(f->listen_fd, (struct sockaddr *)&a, sizeof a) || listen(f->listen_fd, 64) ||
        getsockname(f->listen_fd, (struct sockaddr *)&a, &al))
        return -1;
    f->port = ntohs(a.sin_port);
    return pthread_create(&f->thread, NULL, fo_accept_loop, f) ? -1 : 0;
}

/* Stops accepting (connections being served finish on their own threads). */
static inline void fake_openai_stop(fake_openai *f) {
    shutdown(f->listen_fd, SHUT_RDWR);
    close(f->listen_fd);
    pthread_join(f->thread, NULL);
}

#endif
