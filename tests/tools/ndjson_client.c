/* ndjson_client.c — a test client for llmchat's socket (tests/cli_server*.sh).
 *
 *   ndjson_client [opts] ADDR          ADDR: a socket path, or tcp:HOST:PORT
 *     reads request lines from stdin, sends them, prints every event line it
 *     gets, and exits 0 once every request is answered (a result, an error, or
 *     one done event per sample); 3 on timeout, 4 when the server hangs up.
 *   --text              print only the concatenated token text (then a newline)
 *   --concurrent N      N connections send the same requests at once; prints
 *                       each connection's token text on its own line (escaped)
 *   --disconnect-after K  hang up after K token events
 *   --stall SECONDS     send, then read nothing for SECONDS; then print
 *                       "dropped" if the server closed the connection, else "alive"
 *   --raw               send stdin as it is and print what comes back until the
 *                       server closes (prints "closed"); for oversized input
 *   --timeout SECONDS   default 30
 *   ndjson_client --stale PATH       leave a socket file nobody listens on
 *   ndjson_client --sse PATH         stdin: an SSE stream; prints the
 *                                    concatenated string at PATH (a.b.0.c) of its chunks
 *   ndjson_client --extract PATH     stdin: one JSON document; prints the value at PATH
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char *read_all(FILE *f, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    size_t r;
    while (b && (r = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 == cap) b = realloc(b, cap *= 2);
    }
    if (!b) exit(1);
    b[n] = 0;
    *len = n;
    return b;
}

static int dial(const char *addr) {
    if (!strncmp(addr, "tcp:", 4)) {
        char host[256];
        const char *colon = strrchr(addr + 4, ':');
        if (!colon) return -1;
        snprintf(host, sizeof host, "%.*s", (int)(colon - addr - 4), addr + 4);
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
        if (getaddrinfo(host, colon + 1, &hints, &res)) return -1;
        int fd = socket(res->ai_family, SOCK_STREAM, 0);
        if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen)) close(fd), fd = -1;
        freeaddrinfo(res);
        return fd;
    }
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", addr);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a)) close(fd), fd = -1;
    return fd;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* ---- one connection's bookkeeping ---- */

typedef struct pending {
    char *id;      /* JSON of the id */
    int left;      /* terminal events still expected */
} pending;

typedef struct conn {
    int fd;
    char *in;
    size_t len, cap;
    pending *p;
    int np;
    int null_left; /* errors with id null expected */
    int tokens;
    char *text;
    size_t tlen;
    bool eof;
} conn;

static void expect_requests(conn *c, const char *reqs) {
    const char *line = reqs;
    while (*line) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        bool blank = true;
        for (size_t i = 0; i < n; i++) blank &= line[i] == ' ' || line[i] == '\t' || line[i] == '\r';
        if (!blank) {
            cJSON *j = cJSON_ParseWithLength(line, n);
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
            if (cJSON_IsObject(j) && (cJSON_IsNumber(id) || cJSON_IsString(id))) {
                const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "n");
                c->p = realloc(c->p, (size_t)(c->np + 1) * sizeof *c->p);
                c->p[c->np].id = cJSON_PrintUnformatted(id);
                c->p[c->np].left = cJSON_IsNumber(k) && k->valueint > 1 ? k->valueint : 1;
                c->np++;
            } else {
                c->null_left++;
            }
            cJSON_Delete(j);
        }
        if (!nl) break;
        line = nl + 1;
    }
}

static bool all_answered(const conn *c) {
    if (c->null_left > 0) return false;
    for (int i = 0; i < c->np; i++)
        if (c->p[i].left > 0) return false;
    return true;
}

/* Handles one event line; prints it unless quiet. */
static void on_line(conn *c, const char *line, size_t n, bool quiet) {
    if (!quiet) printf("%.*s\n", (int)n, line);
    cJSON *j = cJSON_ParseWithLength(line, n);
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(j, "event");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    const char *e = cJSON_IsString(ev) ? ev->valuestring : "";
    if (!strcmp(e, "token")) {
        c->tokens++;
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "text");
        if (cJSON_IsString(t)) {
            size_t l = strlen(t->valuestring);
            c->text = realloc(c->text, c->tlen + l + 1);
            memcpy(c->text + c->tlen, t->valuestring, l + 1);
            c->tlen += l;
        }
    } else if (!strcmp(e, "done") || !strcmp(e, "error") || !strcmp(e, "result")) {
        if (cJSON_IsNull(id) || !id) {
            c->null_left--;
        } else {
            char *ij = cJSON_PrintUnformatted(id);
            /* a done belongs to the oldest request with that id still open; an
               error or result to the newest (a duplicate id is refused at once) */
            bool done = !strcmp(e, "done");
            for (int k = 0; k < c->np; k++) {
                int i = done ? k : c->np - 1 - k;
                if (c->p[i].left > 0 && !strcmp(c->p[i].id, ij)) {
                    if (done) c->p[i].left--;
                    else c->p[i].left = 0;
                    break;
                }
            }
            free(ij);
        }
    }
    cJSON_Delete(j);
}

/* Reads what is there; handles complete lines. Returns false at end of stream. */
static bool conn_read(conn *c, bool quiet) {
    if (c->len + 65536 > c->cap) c->in = realloc(c->in, c->cap = c->cap * 2 + 65536);
    ssize_t r = recv(c->fd, c->in + c->len, c->cap - c->len, 0);
    if (r <= 0) {
        c->eof = true;
        return false;
    }
    c->len += (size_t)r;
    size_t start = 0;
    char *nl;
    while ((nl = memchr(c->in + start, '\n', c->len - start))) {
        on_line(c, c->in + start, (size_t)(nl - c->in - start), quiet);
        start = (size_t)(nl - c->in) + 1;
    }
    memmove(c->in, c->in + start, c->len - start);
    c->len -= start;
    return true;
}

static void print_escaped(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n') fputs("\\n", stdout);
        else if (s[i] == '\\') fputs("\\\\", stdout);
        else putchar(s[i]);
    }
    putchar('\n');
}

/* ---- SSE and JSON helpers ---- */

static const cJSON *at_path(const cJSON *j, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *part = strtok_r(buf, ".", &save); j && part; part = strtok_r(NULL, ".", &save)) {
        if (cJSON_IsArray(j)) j = cJSON_GetArrayItem(j, atoi(part));
        else j = cJSON_GetObjectItemCaseSensitive(j, part);
    }
    return j;
}

static int sse(const char *path) {
    size_t n;
    char *all = read_all(stdin, &n);
    int chunks = 0, done = 0;
    for (char *save = NULL, *line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "data: ", 6)) continue;
        if (!strcmp(line + 6, "[DONE]")) {
            done = 1;
            continue;
        }
        cJSON *j = cJSON_Parse(line + 6);
        if (!j) {
            fprintf(stderr, "bad SSE chunk: %s\n", line);
            return 1;
        }
        chunks++;
        const cJSON *v = at_path(j, path);
        if (cJSON_IsString(v)) fputs(v->valuestring, stdout);
        cJSON_Delete(j);
    }
    printf("\n");
    fprintf(stderr, "%d chunks%s\n", chunks, done ? ", [DONE]" : "");
    free(all);
    return 0;
}

static int extract(const char *path) {
    size_t n;
    char *all = read_all(stdin, &n);
    cJSON *j = cJSON_Parse(all);
    const cJSON *v = at_path(j, path);
    int rc = 0;
    if (cJSON_IsString(v)) printf("%s\n", v->valuestring);
    else if (v) {
        char *s = cJSON_PrintUnformatted(v);
        printf("%s\n", s);
        free(s);
    } else rc = 1;
    cJSON_Delete(j);
    free(all);
    return rc;
}

static int stale(const char *path) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 1)) return 1;
    return 0; /* exits without unlinking: the file stays, nobody listens */
}

int main(int argc, char **argv) {
    int n_conc = 0, disconnect_after = -1;
    double timeout = 30, stall = -1;
    bool text = false, raw = false;
    const char *addr = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--stale") && i + 1 < argc) return stale(argv[i + 1]);
        if (!strcmp(a, "--sse") && i + 1 < argc) return sse(argv[i + 1]);
        if (!strcmp(a, "--extract") && i + 1 < argc) return extract(argv[i + 1]);
        if (!strcmp(a, "--text")) text = true;
        else if (!strcmp(a, "--raw")) raw = true;
        else if (!strcmp(a, "--concurrent") && i + 1 < argc) n_conc = atoi(argv[++i]);
        else if (!strcmp(a, "--disconnect-after") && i + 1 < argc) disconnect_after = atoi(argv[++i]);
        else if (!strcmp(a, "--stall") && i + 1 < argc) stall = atof(argv[++i]);
        else if (!strcmp(a, "--timeout") && i + 1 < argc) timeout = atof(argv[++i]);
        else addr = a;
    }
    if (!addr) {
        fprintf(stderr, "usage: ndjson_client [options] SOCKET|tcp:HOST:PORT < requests\n");
        return 2;
    }
    size_t req_len;
    char *reqs = read_all(stdin, &req_len);
    int nc = n_conc > 0 ? n_conc : 1;
    conn *cs = calloc((size_t)nc, sizeof *cs);
    for (int i = 0; i < nc; i++) {
        cs[i].fd = dial(addr);
        if (cs[i].fd < 0) {
            fprintf(stderr, "ndjson_client: cannot connect to %s: %s\n", addr, strerror(errno));
            return 1;
        }
        if (!raw) expect_requests(&cs[i], reqs);
    }
    for (int i = 0; i < nc; i++)
        if (send_all(cs[i].fd, reqs, req_len)) {
            fprintf(stderr, "ndjson_client: send failed: %s\n", strerror(errno));
            if (!raw) return 1;
        }
    if (stall >= 0) {
        struct timespec ts = {(time_t)stall, (long)((stall - (time_t)stall) * 1e9)};
        nanosleep(&ts, NULL);
        double end = now_s() + 5; /* read what the socket still holds, then see whether it ends */
        char buf[65536];
        size_t total = 0;
        for (;;) {
            struct pollfd p = {.fd = cs[0].fd, .events = POLLIN};
            if (poll(&p, 1, (int)((end - now_s()) * 1000)) <= 0) break;
            ssize_t r = recv(cs[0].fd, buf, sizeof buf, 0);
            if (r <= 0) {
                printf("dropped after %zu bytes\n", total);
                return 0;
            }
            total += (size_t)r;
        }
        printf("alive after %zu bytes\n", total);
        return 0;
    }
    if (raw) {
        shutdown(cs[0].fd, SHUT_WR); /* the server sees the end of input */
        double end = now_s() + timeout;
        char buf[65536];
        for (;;) {
            struct pollfd p = {.fd = cs[0].fd, .events = POLLIN};
            if (poll(&p, 1, (int)((end - now_s()) * 1000)) <= 0) {
                printf("timeout\n");
                return 3;
            }
            ssize_t r = recv(cs[0].fd, buf, sizeof buf, 0);
            if (r <= 0) break;
            fwrite(buf, 1, (size_t)r, stdout);
        }
        printf("closed\n");
        return 0;
    }
    double end = now_s() + timeout;
    struct pollfd *pf = calloc((size_t)nc, sizeof *pf);
    for (;;) {
        int open = 0;
        for (int i = 0; i < nc; i++) {
            bool active = !cs[i].eof && !all_answered(&cs[i]);
            pf[i] = (struct pollfd){.fd = active ? cs[i].fd : -1, .events = POLLIN};
            open += active;
        }
        if (!open) break;
        double left = end - now_s();
        if (left <= 0) {
            fprintf(stderr, "ndjson_client: timeout\n");
            return 3;
        }
        if (poll(pf, (nfds_t)nc, (int)(left * 1000) + 1) < 0) return 1;
        for (int i = 0; i < nc; i++) {
            if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            conn_read(&cs[i], text || n_conc > 0);
            if (disconnect_after >= 0 && cs[i].tokens >= disconnect_after) {
                close(cs[i].fd);
                printf("disconnected after %d tokens\n", cs[i].tokens);
                return 0;
            }
        }
    }
    int rc = 0;
    for (int i = 0; i < nc; i++) {
        if (!all_answered(&cs[i])) {
            fprintf(stderr, "ndjson_client: the server closed the connection before answering\n");
            rc = 4;
        }
        if (text || n_conc > 0) print_escaped(cs[i].text ? cs[i].text : "", cs[i].tlen);
    }
    return rc;
}
