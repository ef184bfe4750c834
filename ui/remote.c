/* remote.c — an OpenAI-compatible server as a provider (see remote.h).
 *
 * Threads: the UI thread calls the provider functions; one worker thread owns
 * the libcurl multi handle and every transfer. They talk through an inbox
 * (submits, cancels) the worker is woken for with curl_multi_wakeup, and an
 * outbox of events whose eventfd wakes the UI. One answer is one transfer:
 * n parallel answers are n requests (seed + i when the seed is fixed). */
#include "ui/remote.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "engine/sched/sampler.h"
#include "ui/sse.h"

#define MAX_EVENT (4u << 20)  /* one SSE event or a whole JSON answer */
#define MAX_ERROR_BODY 4096   /* what is kept of an error response */

typedef struct xfer {
    struct remote *r;
    CURL *h;
    struct curl_slist *hdrs;
    char *body;
    int64_t id;
    int seq;
    sse *parser;
    long status;           /* HTTP status, once the first byte came */
    bool json_mode;        /* the server answered with one JSON object, not a stream */
    char *raw;             /* error body or JSON answer */
    size_t raw_len, raw_cap;
    bool got_done;         /* data: [DONE] */
    char finish[16];       /* the server's finish_reason */
    char err[256];         /* an error object inside the stream */
    int chunks;            /* pieces of text */
    int r_chunks;          /* of them, pieces of reasoning (its tokens, unless the usage says) */
    double t_start, t_first;
    db_usage usage;
    struct xfer *next;
} xfer;

typedef struct inbox_msg {
    int64_t id;
    bool cancel;
    char *bodies_json;     /* submit: the request without "model"/"seed" (added per answer) */
    int n;
    uint64_t seed;         /* SAMPLER_SEED_RANDOM: none sent */
    struct inbox_msg *next;
} inbox_msg;

typedef struct ev_node {
    prov_event *ev;
    struct ev_node *next;
} ev_node;

typedef struct remote {
    provider base;
    char chat_url[1024], models_url[1024], url[1024];
    char *api_key;
    int connect_timeout_s;
    pthread_t thread;
    bool thread_started;
    CURLM *multi;
    int wake_fd;           /* eventfd: events wait for the UI */
    pthread_mutex_t mu;    /* guards everything below */
    inbox_msg *inbox, *inbox_tail;
    ev_node *out_head, *out_tail;
    bool stop;
    char model[256];       /* "" until known */
    bool model_tried;
    /* for the status line and /stats */
    int running;
    int64_t answers, failed, chunks_total;
    double last_tps, last_ttft;
    char last_error[256];
    /* worker-only */
    xfer *xfers;
    /* UI-only */
    int64_t next_id;
    char model_ui[256];
} remote;

static void push_event(remote *r, prov_event *ev) {
    if (!ev) return;
    ev_node *n = malloc(sizeof *n);
    if (!n) {
        prov_event_free(ev);
        return;
    }
    n->ev = ev;
    n->next = NULL;
    pthread_mutex_lock(&r->mu);
    if (r->out_tail) r->out_tail->next = n;
    else r->out_head = n;
    r->out_tail = n;
    pthread_mutex_unlock(&r->mu);
    uint64_t one = 1;
    if (write(r->wake_fd, &one, sizeof one) < 0) { /* the counter is full: the UI wakes anyway */
    }
}

/* ---- URLs ---- */

int remote_endpoints(const char *url, char *chat, size_t chat_n, char *models, size_t models_n,
                     llc_err *err) {
    if (!url || (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)))
        return llc_fail(err, LLC_ERR_FORMAT, "--remote %s: not an http:// or https:// URL", url ? url : "");
    char base[1024];
    size_t n = strlen(url);
    if (n >= sizeof base) return llc_fail(err, LLC_ERR_RANGE, "--remote: the URL is too long");
    memcpy(base, url, n + 1);
    while (n > 0 && base[n - 1] == '/') base[--n] = 0;
    static const char suffix[] = "/chat/completions";
    size_t sl = sizeof suffix - 1;
    int w1, w2;
    if (n >= sl && !strcmp(base + n - sl, suffix)) { /* the endpoint itself */
        w1 = snprintf(chat, chat_n, "%s", base);
        base[n - sl] = 0;
        w2 = snprintf(models, models_n, "%s/models", base);
    } else if (n >= 3 && !strcmp(base + n - 3, "/v1")) {
        w1 = snprintf(chat, chat_n, "%s%s", base, suffix);
        w2 = snprintf(models, models_n, "%s/models", base);
    } else {
        w1 = snprintf(chat, chat_n, "%s/v1%s", base, suffix);
        w2 = snprintf(models, models_n, "%s/v1/models", base);
    }
    if (w1 < 0 || (size_t)w1 >= chat_n || w2 < 0 || (size_t)w2 >= models_n)
        return llc_fail(err, LLC_ERR_RANGE, "--remote: the URL is too long");
    return 0;
}

/* ---- the server's replies ---- */

static int raw_add(xfer *x, const char *p, size_t n, size_t cap) {
    if (x->raw_len + n > cap) n = cap > x->raw_len ? cap - x->raw_len : 0;
    if (x->raw_len + n + 1 > x->raw_cap) {
        size_t c = x->raw_cap ? x->raw_cap : 1024;
        while (c < x->raw_len + n + 1) c *= 2;
        char *q = realloc(x->raw, c);
        if (!q) return LLC_ERR_NOMEM;
        x->raw = q;
        x->raw_cap = c;
    }
    memcpy(x->raw + x->raw_len, p, n);
    x->raw_len += n;
    x->raw[x->raw_len] = 0;
    return 0;
}

static void got_text(xfer *x, const char *text, size_t len, bool reasoning) {
    if (!len) return;
    if (x->chunks == 0) x->t_first = llc_now_ms();
    x->chunks++;
    if (reasoning) x->r_chunks++;
    push_event(x->r, reasoning ? prov_event_reasoning(x->id, x->seq, text, len) : prov_event_text(x->id, x->seq, text, len));
}

/* The message of an error object: {"error": {"message": ...}} or {"error": "..."}. */
static bool error_message(const cJSON *j, char *out, size_t n) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    if (!e) return false;
    const cJSON *m = cJSON_IsObject(e) ? cJSON_GetObjectItemCaseSensitive(e, "message") : e;
    snprintf(out, n, "%s", cJSON_IsString(m) ? m->valuestring : "the server reported an error");
    return true;
}

/* One chunk (or, without streaming, the whole answer): text, finish reason, usage, errors. */
static void read_chunk(xfer *x, const cJSON *j) {
    if (error_message(j, x->err, sizeof x->err)) return;
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(j, "choices");
    const cJSON *c0 = cJSON_IsArray(choices) ? cJSON_GetArrayItem(choices, 0) : NULL;
    if (c0) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(c0, "delta");
        if (!d) d = cJSON_GetObjectItemCaseSensitive(c0, "message");
        /* a thinking model's reasoning: llama-server's and vLLM's reasoning_content,
           OpenRouter's and Ollama's reasoning */
        const cJSON *r = d ? cJSON_GetObjectItemCaseSensitive(d, "reasoning_content") : NULL;
        if (!cJSON_IsString(r) && d) r = cJSON_GetObjectItemCaseSensitive(d, "reasoning");
        if (cJSON_IsString(r)) got_text(x, r->valuestring, strlen(r->valuestring), true);
        const cJSON *t = d ? cJSON_GetObjectItemCaseSensitive(d, "content") : NULL;
        if (cJSON_IsString(t)) got_text(x, t->valuestring, strlen(t->valuestring), false);
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(c0, "finish_reason");
        if (cJSON_IsString(f)) snprintf(x->finish, sizeof x->finish, "%s", f->valuestring);
    }
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
    if (cJSON_IsObject(u)) {
        const cJSON *pt = cJSON_GetObjectItemCaseSensitive(u, "prompt_tokens");
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(u, "completion_tokens");
        if (cJSON_IsNumber(pt)) x->usage.prompt_tokens = (int64_t)pt->valuedouble;
        if (cJSON_IsNumber(ct)) x->usage.completion_tokens = (int64_t)ct->valuedouble;
        const cJSON *rt = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(u, "completion_tokens_details"),
                                                           "reasoning_tokens"); /* OpenAI's, vLLM's */
        if (cJSON_IsNumber(rt)) x->usage.reasoning_tokens = (int64_t)rt->valuedouble;
    }
}

static int on_sse(void *ctx, const char *event, const char *data, size_t len) {
    xfer *x = ctx;
    if (!strcmp(data, "[DONE]")) {
        x->got_done = true;
        return 0;
    }
    cJSON *j = cJSON_ParseWithLength(data, len);
    if (!j) {
        snprintf(x->err, sizeof x->err, "the server sent a chunk that is not JSON");
        return 1;
    }
    if (!strcmp(event, "error") && !x->err[0]) snprintf(x->err, sizeof x->err, "%.200s", data);
    read_chunk(x, j);
    cJSON_Delete(j);
    return x->err[0] ? 1 : 0;
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *ctx) {
    xfer *x = ctx;
    size_t n = size * nmemb;
    if (!x->status) {
        curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->status);
        size_t i = 0;
        while (i < n && (p[i] == ' ' || p[i] == '\n' || p[i] == '\r')) i++;
        x->json_mode = x->status < 300 && i < n && p[i] == '{';
    }
    if (x->status >= 300) return raw_add(x, p, n, MAX_ERROR_BODY) ? 0 : n;
    if (x->json_mode) {
        if (x->raw_len + n > MAX_EVENT) return 0;
        return raw_add(x, p, n, MAX_EVENT) ? 0 : n;
    }
    if (x->err[0]) return 0;
    int rc = sse_feed(x->parser, p, n, on_sse, x);
    if (rc < 0 && !x->err[0]) snprintf(x->err, sizeof x->err, "the server's stream is malformed (an event too big)");
    return rc ? 0 : n; /* 0 stops the transfer */
}

/* ---- transfers (worker thread) ---- */

static void xfer_free(remote *r, xfer *x) {
    if (x->h) {
        curl_multi_remove_handle(r->multi, x->h); /* closes the stream */
        curl_easy_cleanup(x->h);
    }
    curl_slist_free_all(x->hdrs);
    free(x->body);
    free(x->raw);
    sse_free(x->parser);
    free(x);
}

static void unlink_xfer(remote *r, xfer *x) {
    for (xfer **pp = &r->xfers; *pp; pp = &(*pp)->next)
        if (*pp == x) {
            *pp = x->next;
            return;
        }
}

static void count_end(remote *r, xfer *x, bool failed, const char *why, double tps) {
    pthread_mutex_lock(&r->mu);
    r->running--;
    r->answers++;
    r->chunks_total += x->chunks;
    if (failed) {
        r->failed++;
        snprintf(r->last_error, sizeof r->last_error, "%s", why);
    }
    if (x->chunks > 0) r->last_ttft = x->t_first - x->t_start;
    if (tps > 0) r->last_tps = tps;
    pthread_mutex_unlock(&r->mu);
}

/* Ends an answer with an event and frees its transfer. Its speed: the tokens
 * after the first (the server's count, else the pieces of text) over the wall
 * time from the first to the end (pieces that arrive together in one read
 * would otherwise make it look thousands of times faster); none below 1 ms. */
static void end_xfer(remote *r, xfer *x, int state, const char *finish, const char *why) {
    db_usage u = x->usage;
    if (!u.completion_tokens) u.completion_tokens = x->chunks;
    if (!u.reasoning_tokens) u.reasoning_tokens = x->r_chunks; /* a server sends about a token a chunk */
    double tps = 0, ms = llc_now_ms() - x->t_first;
    if (x->chunks > 0) {
        u.ttft_ms = x->t_first - x->t_start;
        if (u.completion_tokens > 1) u.tpot_ms = ms / (double)(u.completion_tokens - 1);
        if (u.completion_tokens > 1 && ms >= 1) tps = (double)(u.completion_tokens - 1) * 1000.0 / ms;
    }
    count_end(r, x, state == DB_STATE_ERROR, why ? why : "", tps);
    push_event(r, prov_event_done(x->id, x->seq, state, finish, &u, why));
    unlink_xfer(r, x);
    xfer_free(r, x);
}

static const char *host_of(const char *url, char *buf, size_t n) {
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t k = strcspn(p, "/");
    snprintf(buf, n, "%.*s", (int)k, p);
    return buf;
}

/* A finished transfer: what it comes to for the answer. */
static void finish_xfer(remote *r, xfer *x, CURLcode res) {
    char why[256];
    if (!x->status) curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->status);
    if (x->status >= 300) {
        char msg[200] = "";
        cJSON *j = x->raw ? cJSON_Parse(x->raw) : NULL;
        if (!j || !error_message(j, msg, sizeof msg)) {
            size_t k = x->raw ? strcspn(x->raw, "\r\n") : 0;
            snprintf(msg, sizeof msg, "%.*s", (int)(k < 150 ? k : 150), x->raw ? x->raw : "");
        }
        cJSON_Delete(j);
        const char *hint = x->status == 401 || x->status == 403 ? " (check --remote-api-key)"
                           : x->status == 429                   ? " (rate limited: try again later)"
                           : x->status == 404                   ? " (check the URL and --remote-model)"
                                                                : "";
        snprintf(why, sizeof why, "HTTP %ld from the server: %.160s%s", x->status, msg[0] ? msg : "no message",
                 hint);
        end_xfer(r, x, DB_STATE_ERROR, "error", why);
        return;
    }
    if (x->json_mode && res == CURLE_OK) { /* an answer without streaming */
        cJSON *j = cJSON_ParseWithLength(x->raw ? x->raw : "", x->raw_len);
        if (j) read_chunk(x, j), x->got_done = true;
        else snprintf(x->err, sizeof x->err, "the server's answer is not JSON");
        cJSON_Delete(j);
    }
    if (x->err[0]) {
        snprintf(why, sizeof why, "the server: %.200s", x->err);
        end_xfer(r, x, DB_STATE_ERROR, "error", why);
        return;
    }
    if (res != CURLE_OK) {
        char host[256];
        host_of(r->chat_url, host, sizeof host);
        if (x->status == 0 && (res == CURLE_COULDNT_CONNECT || res == CURLE_COULDNT_RESOLVE_HOST ||
                               res == CURLE_OPERATION_TIMEDOUT))
            snprintf(why, sizeof why, "cannot reach %.100s: %s", host, curl_easy_strerror(res));
        else
            snprintf(why, sizeof why, "the connection to %.100s broke off mid-answer (%s)%s", host,
                     curl_easy_strerror(res), x->chunks ? ": the text so far is kept" : "");
        end_xfer(r, x, DB_STATE_ERROR, "error", why);
        return;
    }
    if (!x->got_done && !x->finish[0]) {
        snprintf(why, sizeof why, "the server ended the stream before the answer was complete%s",
                 x->chunks ? ": the text so far is kept" : "");
        end_xfer(r, x, DB_STATE_ERROR, "error", why);
        return;
    }
    end_xfer(r, x, DB_STATE_DONE, !strcmp(x->finish, "length") ? "length" : "stop", NULL);
}

static size_t collect(char *p, size_t size, size_t nmemb, void *ctx) {
    return raw_add(ctx, p, size * nmemb, 1u << 20) ? 0 : size * nmemb;
}

/* GET /models once, when no model was named: the first one listed. */
static void resolve_model(remote *r) {
    pthread_mutex_lock(&r->mu);
    bool need = !r->model[0] && !r->model_tried;
    r->model_tried = true;
    pthread_mutex_unlock(&r->mu);
    if (!need) return;
    CURL *h = curl_easy_init();
    if (!h) return;
    xfer x = {.r = r, .h = h};
    struct curl_slist *hd = NULL;
    char auth[600];
    if (r->api_key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", r->api_key);
        hd = curl_slist_append(hd, auth);
    }
    curl_easy_setopt(h, CURLOPT_URL, r->models_url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)r->connect_timeout_s);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK && x.raw &&
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK && status == 200) {
        cJSON *j = cJSON_Parse(x.raw);
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "data");
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(d, 0), "id");
        if (cJSON_IsString(id)) {
            pthread_mutex_lock(&r->mu);
            snprintf(r->model, sizeof r->model, "%s", id->valuestring);
            pthread_mutex_unlock(&r->mu);
        }
        cJSON_Delete(j);
    }
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    free(x.raw);
}

/* Starts answer seq of a submitted request. */
static void start_xfer(remote *r, const inbox_msg *m, int seq) {
    xfer *x = calloc(1, sizeof *x);
    cJSON *j = cJSON_Parse(m->bodies_json);
    if (!x || !j || sse_create(MAX_EVENT, &x->parser)) goto fail;
    x->r = r;
    x->id = m->id;
    x->seq = seq;
    pthread_mutex_lock(&r->mu);
    if (r->model[0]) cJSON_AddStringToObject(j, "model", r->model);
    r->running++;
    pthread_mutex_unlock(&r->mu);
    if (m->seed != SAMPLER_SEED_RANDOM) cJSON_AddNumberToObject(j, "seed", (double)(m->seed + (uint64_t)seq));
    if (!(x->body = cJSON_PrintUnformatted(j))) goto fail_counted;
    cJSON_Delete(j);
    j = NULL;
    if (!(x->h = curl_easy_init())) goto fail_counted;
    x->hdrs = curl_slist_append(x->hdrs, "Content-Type: application/json");
    x->hdrs = curl_slist_append(x->hdrs, "Accept: text/event-stream");
    if (r->api_key) {
        char auth[600];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", r->api_key);
        x->hdrs = curl_slist_append(x->hdrs, auth);
    }
    curl_easy_setopt(x->h, CURLOPT_URL, r->chat_url);
    curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->hdrs);
    curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, x->body);
    curl_easy_setopt(x->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(x->h, CURLOPT_CONNECTTIMEOUT, (long)r->connect_timeout_s);
    /* a server that sends nothing for 5 minutes is gone */
    curl_easy_setopt(x->h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(x->h, CURLOPT_LOW_SPEED_TIME, 300L);
    curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
    x->t_start = llc_now_ms();
    x->next = r->xfers;
    r->xfers = x;
    if (curl_multi_add_handle(r->multi, x->h) != CURLM_OK) {
        end_xfer(r, x, DB_STATE_ERROR, "error", "libcurl refused the request");
    }
    return;
fail_counted:
    pthread_mutex_lock(&r->mu);
    r->running--;
    pthread_mutex_unlock(&r->mu);
fail:
    cJSON_Delete(j);
    if (x) xfer_free(r, x);
    push_event(r, prov_event_done(m->id, seq, DB_STATE_ERROR, "error", NULL, "out of memory"));
}

static void handle_inbox(remote *r, inbox_msg *m) {
    while (m) {
        inbox_msg *next = m->next;
        if (m->cancel) {
            for (xfer *x = r->xfers, *nx; x; x = nx) {
                nx = x->next;
                if (x->id == m->id) end_xfer(r, x, DB_STATE_CANCELLED, "cancelled", NULL);
            }
        } else {
            resolve_model(r);
            for (int i = 0; i < m->n; i++) start_xfer(r, m, i);
        }
        free(m->bodies_json);
        free(m);
        m = next;
    }
}

static void *worker(void *arg) {
    remote *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        bool stop = r->stop;
        inbox_msg *m = r->inbox;
        r->inbox = r->inbox_tail = NULL;
        pthread_mutex_unlock(&r->mu);
        if (stop) { /* what was still asked for is dropped; the transfers close below */
            while (m) {
                inbox_msg *n = m->next;
                free(m->bodies_json);
                free(m);
                m = n;
            }
            break;
        }
        handle_inbox(r, m);
        int running = 0;
        curl_multi_perform(r->multi, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(r->multi, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            xfer *x = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
            if (x) finish_xfer(r, x, msg->data.result);
        }
        curl_multi_poll(r->multi, NULL, 0, 1000, NULL);
    }
    while (r->xfers) {
        xfer *x = r->xfers;
        r->xfers = x->next;
        xfer_free(r, x);
    }
    return NULL;
}

/* ---- the provider (UI thread) ---- */

static int remote_check_settings(provider *p, const conv_settings *s, llc_err *err) {
    if (s->beam > 0)
        return llc_fail(err, LLC_ERR_UNSUPPORTED, "beam search needs the local engine (/beam 0 turns it off)");
    return 0;
}

static int remote_check(provider *p, const chat_msg *msgs, int n, const conv_settings *s, llc_err *err) {
    return remote_check_settings(p, s, err); /* the server knows its context; it refuses what does not fit */
}

static void send_inbox(remote *r, inbox_msg *m) {
    pthread_mutex_lock(&r->mu);
    if (r->inbox_tail) r->inbox_tail->next = m;
    else r->inbox = m;
    r->inbox_tail = m;
    pthread_mutex_unlock(&r->mu);
    curl_multi_wakeup(r->multi);
}

static int64_t remote_submit(provider *p, const chat_msg *msgs, int n, const conv_settings *s,
                             prov_started *out, llc_err *err) {
    remote *r = (remote *)p;
    if (remote_check_settings(p, s, err)) return LLC_ERR_UNSUPPORTED;
    cJSON *j = cJSON_CreateObject();
    cJSON *arr = j ? cJSON_AddArrayToObject(j, "messages") : NULL;
    for (int i = 0; arr && i < n; i++) {
        static const char *roles[] = {"system", "user", "assistant"};
        cJSON *m = cJSON_CreateObject();
        if (!m) break;
        cJSON_AddStringToObject(m, "role", roles[msgs[i].role <= CHAT_ASSISTANT ? msgs[i].role : CHAT_USER]);
        cJSON_AddStringToObject(m, "content", msgs[i].content);
        cJSON_AddItemToArray(arr, m);
    }
    if (arr) {
        cJSON_AddBoolToObject(j, "stream", true);
        cJSON *so = cJSON_AddObjectToObject(j, "stream_options");
        if (so) cJSON_AddBoolToObject(so, "include_usage", true);
        if (s->max_tokens > 0) cJSON_AddNumberToObject(j, "max_tokens", s->max_tokens); /* else the server's own */
        cJSON_AddNumberToObject(j, "temperature", s->temperature);
        cJSON_AddNumberToObject(j, "top_p", s->top_p);
        if (s->no_think) { /* llama-server's, vLLM's and llmchat's way to switch thinking off */
            cJSON *kw = cJSON_AddObjectToObject(j, "chat_template_kwargs");
            if (kw) cJSON_AddFalseToObject(kw, "enable_thinking");
            if (kw) cJSON_AddStringToObject(kw, "thinking_mode", "disabled"); /* MiniMax-M3's */
            if (kw) cJSON_AddFalseToObject(kw, "thinking");                  /* Kimi K3's, DeepSeek V3.1's */
            if (kw) cJSON_AddFalseToObject(kw, "reasoning");                 /* Command-A's */
        }
    }
    char *body = arr ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    inbox_msg *m = body ? calloc(1, sizeof *m) : NULL;
    if (!m) {
        free(body);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    int64_t id = ++r->next_id;
    int k = s->n > 0 ? s->n : 1;
    m->id = id;
    m->bodies_json = body;
    m->n = k;
    m->seed = s->seed;
    send_inbox(r, m); /* the worker owns m from here */
    *out = (prov_started){.n_answers = k, .n_dropped = 0};
    return id;
}

static void remote_cancel(provider *p, int64_t id) {
    remote *r = (remote *)p;
    inbox_msg *m = calloc(1, sizeof *m);
    if (!m) return;
    m->id = id;
    m->cancel = true;
    send_inbox(r, m);
}

static prov_event *remote_next(provider *p) {
    remote *r = (remote *)p;
    pthread_mutex_lock(&r->mu);
    ev_node *n = r->out_head;
    if (n) {
        r->out_head = n->next;
        if (!r->out_head) r->out_tail = NULL;
    } else {
        uint64_t v;
        if (read(r->wake_fd, &v, sizeof v) < 0) { /* nothing to clear */
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (!n) return NULL;
    prov_event *ev = n->ev;
    free(n);
    return ev;
}

static int remote_fd(const provider *p) { return ((const remote *)p)->wake_fd; }

static const char *remote_model_name(const provider *p) {
    remote *r = (remote *)p;
    pthread_mutex_lock(&r->mu);
    snprintf(r->model_ui, sizeof r->model_ui, "%s", r->model[0] ? r->model : "remote");
    pthread_mutex_unlock(&r->mu);
    return r->model_ui;
}

static void remote_status(provider *p, char *buf, size_t n) {
    remote *r = (remote *)p;
    char host[256];
    host_of(r->chat_url, host, sizeof host);
    const char *name = remote_model_name(p);
    pthread_mutex_lock(&r->mu);
    snprintf(buf, n, " %s | remote %s | %.1f tok/s | TTFT %.0f ms | run %d ", name, host, r->last_tps,
             r->last_ttft, r->running);
    pthread_mutex_unlock(&r->mu);
}

static char *remote_stats(provider *p) {
    remote *r = (remote *)p;
    char *s = NULL;
    pthread_mutex_lock(&r->mu);
    if (asprintf(&s,
                 "Remote server\n"
                 "  %s\n"
                 "  answers: %lld finished, %lld failed, %d streaming now; %lld pieces of text\n"
                 "  last answer: TTFT %.0f ms, %.1f tokens/s\n"
                 "  last error: %s",
                 r->chat_url, (long long)r->answers, (long long)r->failed, r->running,
                 (long long)r->chunks_total, r->last_ttft, r->last_tps,
                 r->last_error[0] ? r->last_error : "none") < 0)
        s = NULL;
    pthread_mutex_unlock(&r->mu);
    return s;
}

static char *remote_about(provider *p) {
    remote *r = (remote *)p;
    const char *name = remote_model_name(p);
    char *s = NULL;
    if (asprintf(&s, "Model\n  %s\n  remote OpenAI-compatible server %s\n  API key: %s", name, r->chat_url,
                 r->api_key ? "given" : "none") < 0)
        s = NULL;
    return s;
}

static void remote_destroy(provider *p) {
    remote *r = (remote *)p;
    if (r->thread_started) {
        pthread_mutex_lock(&r->mu);
        r->stop = true;
        pthread_mutex_unlock(&r->mu);
        curl_multi_wakeup(r->multi);
        pthread_join(r->thread, NULL);
    }
    while (r->out_head) {
        ev_node *n = r->out_head;
        r->out_head = n->next;
        prov_event_free(n->ev);
        free(n);
    }
    if (r->multi) curl_multi_cleanup(r->multi);
    if (r->wake_fd >= 0) close(r->wake_fd);
    pthread_mutex_destroy(&r->mu);
    free(r->api_key);
    free(r);
}

static const provider_ops remote_ops = {
    .check = remote_check,
    .submit = remote_submit,
    .cancel = remote_cancel,
    .next = remote_next,
    .fd = remote_fd,
    .status = remote_status,
    .stats = remote_stats,
    .about = remote_about,
    .model_name = remote_model_name,
    .destroy = remote_destroy,
    .check_settings = remote_check_settings,
};

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init;
static void curl_init_once(void) { g_curl_init = curl_global_init(CURL_GLOBAL_DEFAULT); }

int remote_create(const remote_config *cfg, provider **out, llc_err *err) {
    remote *r = calloc(1, sizeof *r);
    if (!r) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    r->base.ops = &remote_ops;
    r->wake_fd = -1;
    pthread_mutex_init(&r->mu, NULL);
    int rc = remote_endpoints(cfg->url, r->chat_url, sizeof r->chat_url, r->models_url, sizeof r->models_url, err);
    if (rc) {
        remote_destroy(&r->base);
        return rc;
    }
    snprintf(r->url, sizeof r->url, "%s", cfg->url);
    if (cfg->model && cfg->model[0]) snprintf(r->model, sizeof r->model, "%s", cfg->model);
    r->connect_timeout_s = cfg->connect_timeout_s > 0 ? cfg->connect_timeout_s : 10;
    pthread_once(&g_curl_once, curl_init_once);
    if (g_curl_init != CURLE_OK) {
        remote_destroy(&r->base);
        return llc_fail(err, LLC_ERR_IO, "libcurl could not start: %s", curl_easy_strerror(g_curl_init));
    }
    if ((cfg->api_key && cfg->api_key[0] && !(r->api_key = strdup(cfg->api_key))) ||
        !(r->multi = curl_multi_init()) || (r->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        remote_destroy(&r->base);
        return llc_fail(err, LLC_ERR_NOMEM, "cannot set up the HTTP client");
    }
    if (pthread_create(&r->thread, NULL, worker, r)) {
        remote_destroy(&r->base);
        return llc_fail(err, LLC_ERR_NOMEM, "cannot start the HTTP thread");
    }
    r->thread_started = true;
    *out = &r->base;
    return 0;
}
