/* test_remote.c — the remote provider (ui/remote.c) against a fake
 * OpenAI-compatible server on loopback (tests/fake_openai.h): streamed text,
 * the request it sends, parallel answers, cancelling, and every failure a
 * user can meet (401, 429, connection refused, a server dying mid-answer, a
 * cut at max_tokens, a server that does not stream). Also the SSE reader and
 * the URL rules. */
#include <poll.h>

#include "tests/fake_openai.h"
#include "tests/test.h"
#include "ui/remote.h"
#include "ui/sse.h"

/* ---- SSE reader ---- */

typedef struct got {
    char text[1024];
    int n;
    char last_event[32];
} got;

static int collect_sse(void *ctx, const char *event, const char *data, size_t len) {
    got *g = ctx;
    size_t used = strlen(g->text);
    snprintf(g->text + used, sizeof g->text - used, "[%s]", data);
    snprintf(g->last_event, sizeof g->last_event, "%s", event);
    g->n++;
    CHECK(strlen(data) == len);
    return 0;
}

static void test_sse_split_anywhere(void) {
    const char *stream = ": keep-alive\r\ndata: {\"a\":1}\r\n\r\ndata:two\ndata: lines\n\nevent: error\ndata: x\r\r"
                         "data: [DONE]\n\n";
    size_t n = strlen(stream);
    for (size_t step = 1; step <= n; step++) { /* every way of cutting it into pieces */
        sse *s;
        CHECK(sse_create(1024, &s) == 0);
        got g = {0};
        for (size_t i = 0; i < n; i += step)
            CHECK(sse_feed(s, stream + i, i + step <= n ? step : n - i, collect_sse, &g) == 0);
        CHECKF(!strcmp(g.text, "[{\"a\":1}][two\nlines][x][[DONE]]"), "step %zu: %s", step, g.text);
        CHECK(g.n == 4);
        sse_free(s);
    }
}

static void test_sse_event_type_and_limits(void) {
    sse *s;
    CHECK(sse_create(16, &s) == 0);
    got g = {0};
    CHECK(sse_feed(s, "event: error\ndata: x\n\n", 22, collect_sse, &g) == 0);
    CHECK(!strcmp(g.last_event, "error"));
    CHECK(sse_feed(s, "data: 1\n\n", 9, collect_sse, &g) == 0);
    CHECK(!strcmp(g.last_event, "message")); /* the type does not carry over */
    CHECK(sse_feed(s, "data: 0123456789abcdefghij\n\n", 28, collect_sse, &g) == LLC_ERR_RANGE);
    CHECK(sse_feed(s, "data: 1\n\n", 9, collect_sse, &g) == LLC_ERR_RANGE); /* stays broken */
    sse_free(s);
}

static void test_endpoints(void) {
    char chat[256], models[256];
    llc_err err;
    CHECK(remote_endpoints("http://h:8000/v1", chat, sizeof chat, models, sizeof models, &err) == 0);
    CHECK(!strcmp(chat, "http://h:8000/v1/chat/completions") && !strcmp(models, "http://h:8000/v1/models"));
    CHECK(remote_endpoints("http://localhost:11434/", chat, sizeof chat, models, sizeof models, &err) == 0);
    CHECK(!strcmp(chat, "http://localhost:11434/v1/chat/completions"));
    CHECK(remote_endpoints("https://api.x.com/v1/chat/completions", chat, sizeof chat, models, sizeof models,
                           &err) == 0);
    CHECK(!strcmp(chat, "https://api.x.com/v1/chat/completions") && !strcmp(models, "https://api.x.com/v1/models"));
    CHECK(remote_endpoints("ftp://x", chat, sizeof chat, models, sizeof models, &err) == LLC_ERR_FORMAT);
    CHECK(remote_endpoints("localhost:8080", chat, sizeof chat, models, sizeof models, &err) == LLC_ERR_FORMAT);
}

/* ---- against the fake server ---- */

static fake_openai g_srv;

typedef struct answer {
    char text[4096];
    size_t len;
    char reasoning[1024];
    size_t r_len;
    bool done;
    int state;
    char finish[16];
    char message[256];
    db_usage usage;
} answer;

/* Collects the events of request id into ans[0..n) until all are done (or 10 s). */
static void wait_answers(provider *p, int64_t id, answer *ans, int n, int cancel_after_bytes) {
    memset(ans, 0, sizeof *ans * (size_t)n);
    bool cancelled = false;
    for (int spins = 0; spins < 1000; spins++) {
        int done = 0;
        for (int i = 0; i < n; i++) done += ans[i].done;
        if (done == n) return;
        struct pollfd pf = {.fd = prov_fd(p), .events = POLLIN};
        poll(&pf, 1, 10);
        prov_event *ev;
        while ((ev = prov_next(p))) {
            CHECK(ev->request_id == id);
            CHECK(ev->seq_index >= 0 && ev->seq_index < n);
            if (ev->seq_index < 0 || ev->seq_index >= n) {
                prov_event_free(ev);
                continue;
            }
            answer *a = &ans[ev->seq_index];
            CHECK(!a->done); /* nothing after the end */
            if (ev->kind == PROV_TEXT) {
                if (a->len + ev->text_len < sizeof a->text) {
                    memcpy(a->text + a->len, ev->text, ev->text_len);
                    a->len += ev->text_len;
                }
            } else if (ev->kind == PROV_REASONING) {
                CHECK(a->len == 0); /* (the fake thinks before it answers) */
                if (a->r_len + ev->text_len < sizeof a->reasoning) {
                    memcpy(a->reasoning + a->r_len, ev->text, ev->text_len);
                    a->r_len += ev->text_len;
                }
            } else {
                a->done = true;
                a->state = ev->state;
                snprintf(a->finish, sizeof a->finish, "%s", ev->finish);
                snprintf(a->message, sizeof a->message, "%s", ev->message);
                a->usage = ev->usage;
            }
            prov_event_free(ev);
        }
        if (cancel_after_bytes >= 0 && !cancelled && ans[0].len >= (size_t)cancel_after_bytes) {
            prov_cancel(p, id);
            cancelled = true;
        }
    }
    CHECKF(0, "the answers did not end in 10 s");
}

static provider *open_remote(const char *name, const char *key) {
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", g_srv.port);
    remote_config rc = {.url = url, .model = name, .api_key = key};
    provider *p = NULL;
    llc_err err;
    CHECKF(remote_create(&rc, &p, &err) == 0, "%s", err.msg);
    return p;
}

static int64_t ask(provider *p, const char *system, const char *user, conv_settings *s) {
    chat_msg msgs[4];
    int n = 0;
    if (system) msgs[n++] = (chat_msg){CHAT_SYSTEM, system, NULL};
    msgs[n++] = (chat_msg){CHAT_USER, "first question", NULL};
    msgs[n++] = (chat_msg){CHAT_ASSISTANT, "first answer", NULL};
    msgs[n++] = (chat_msg){CHAT_USER, user, NULL};
    prov_started st = {0};
    llc_err err;
    CHECK(prov_check(p, msgs, n, s, &err) == 0);
    int64_t id = prov_submit(p, msgs, n, s, &st, &err);
    CHECKF(id > 0, "%s", err.msg);
    CHECK(st.n_answers == (s->n > 0 ? s->n : 1));
    return id;
}

static void test_streams_an_answer(void) {
    provider *p = open_remote(NULL, "sekrit"); /* no model named: the first /v1/models lists */
    conv_settings s = conv_default_settings();
    s.max_tokens = 33;
    s.temperature = 0.25f;
    answer a[1];
    int64_t id = ask(p, "Be brief.", "how are you today", &s);
    wait_answers(p, id, a, 1, -1);
    CHECKF(!strcmp(a[0].text, "You said: how are you today"), "%s", a[0].text);
    CHECK(a[0].state == DB_STATE_DONE && !strcmp(a[0].finish, "stop"));
    CHECK(a[0].usage.prompt_tokens == 7 && a[0].usage.completion_tokens == 5);
    CHECK(!strcmp(prov_model_name(p), "ok"));
    /* what went over the wire */
    pthread_mutex_lock(&g_srv.mu);
    cJSON *j = cJSON_Parse(g_srv.last_body);
    CHECK(!strcmp(g_srv.last_auth, "Bearer sekrit"));
    pthread_mutex_unlock(&g_srv.mu);
    CHECK(j != NULL);
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(j, "messages");
    CHECK(cJSON_GetArraySize(msgs) == 4);
    const cJSON *m0 = cJSON_GetArrayItem(msgs, 0), *m2 = cJSON_GetArrayItem(msgs, 2);
    CHECK(!strcmp(cJSON_GetObjectItem(m0, "role")->valuestring, "system"));
    CHECK(!strcmp(cJSON_GetObjectItem(m0, "content")->valuestring, "Be brief."));
    CHECK(!strcmp(cJSON_GetObjectItem(m2, "role")->valuestring, "assistant"));
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(j, "stream")));
    CHECK(cJSON_GetObjectItem(j, "max_tokens")->valueint == 33);
    CHECK_NEAR(cJSON_GetObjectItem(j, "temperature")->valuedouble, 0.25, 1e-6);
    CHECK(!strcmp(cJSON_GetObjectItem(j, "model")->valuestring, "ok"));
    cJSON_Delete(j);
    char status[320];
    prov_status(p, status, sizeof status);
    CHECKF(strstr(status, "remote 127.0.0.1:") != NULL, "%s", status);
    prov_free(p);
}

/* A thinking model behind the server: reasoning_content (llama-server, vLLM) and
 * reasoning (OpenRouter, Ollama's OpenAI API) arrive as reasoning, apart from
 * the answer. */
static void test_reasoning_comes_apart(void) {
    provider *p = open_remote("think", "sekrit");
    conv_settings s = conv_default_settings();
    answer a[1];
    int64_t id = ask(p, NULL, "hello", &s);
    wait_answers(p, id, a, 1, -1);
    CHECKF(!strcmp(a[0].reasoning, "I plan a greeting.") && !strcmp(a[0].text, "Hello."),
           "reasoning '%s', text '%s'", a[0].reasoning, a[0].text);
    CHECK(a[0].state == DB_STATE_DONE);
    /* /think off asks the server's template for no thinking */
    s.no_think = true;
    id = ask(p, NULL, "hello", &s);
    wait_answers(p, id, a, 1, -1);
    pthread_mutex_lock(&g_srv.mu);
    cJSON *j = cJSON_Parse(g_srv.last_body);
    pthread_mutex_unlock(&g_srv.mu);
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(j, "chat_template_kwargs");
    CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(kw, "enable_thinking")));
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(kw, "thinking_mode")), "disabled")); /* MiniMax-M3 */
    CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(kw, "thinking")));  /* Kimi K3 */
    CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(kw, "reasoning"))); /* Command-A */
    cJSON_Delete(j);
    prov_free(p);
}

static void test_parallel_answers_with_seeds(void) {
    provider *p = open_remote("ok", "sekrit");
    conv_settings s = conv_default_settings();
    s.n = 3;
    s.seed = 100;
    answer a[3];
    int before = g_srv.n_requests;
    int64_t id = ask(p, NULL, "one two", &s);
    wait_answers(p, id, a, 3, -1);
    for (int i = 0; i < 3; i++) {
        CHECKF(!strcmp(a[i].text, "You said: one two"), "%d: %s", i, a[i].text);
        CHECK(a[i].state == DB_STATE_DONE);
    }
    CHECK(g_srv.n_requests - before == 3); /* one request per answer */
    /* beam search is the local engine's */
    s.beam = 2;
    prov_started st;
    llc_err err;
    chat_msg m = {CHAT_USER, "x", NULL};
    CHECK(prov_submit(p, &m, 1, &s, &st, &err) == LLC_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "beam") != NULL);
    prov_free(p);
}

static void test_cancel_closes_the_stream(void) {
    provider *p = open_remote("slow", "sekrit");
    conv_settings s = conv_default_settings();
    answer a[1];
    int64_t id = ask(p, NULL, "go", &s);
    wait_answers(p, id, a, 1, 15); /* cancel after three ticks */
    CHECK(a[0].state == DB_STATE_CANCELLED && !strcmp(a[0].finish, "cancelled"));
    CHECK(a[0].len >= 15 && a[0].len < 1000 * 5); /* what came before stays */
    CHECK(strncmp(a[0].text, "tick tick tick ", 15) == 0);
    prov_free(p);
}

static void test_http_errors_are_explained(void) {
    conv_settings s = conv_default_settings();
    answer a[1];
    provider *p = open_remote("ok", "wrong-key");
    int64_t id = ask(p, NULL, "hi", &s);
    wait_answers(p, id, a, 1, -1);
    CHECK(a[0].state == DB_STATE_ERROR && a[0].len == 0);
    CHECKF(strstr(a[0].message, "HTTP 401") && strstr(a[0].message, "Incorrect API key provided") &&
               strstr(a[0].message, "--remote-api-key"),
           "%s", a[0].message);
    prov_free(p);

    p = open_remote("busy", "sekrit");
    id = ask(p, NULL, "hi", &s);
    wait_answers(p, id, a, 1, -1);
    CHECK(a[0].state == DB_STATE_ERROR);
    CHECKF(strstr(a[0].message, "HTTP 429") && strstr(a[0].message, "Rate limit reached"), "%s", a[0].message);
    prov_free(p);
}

static void test_connection_refused(void) {
    /* a port nobody listens on: bind one, note it, close it */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 && getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
    close(fd);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(sa.sin_port));
    remote_config rc = {.url = url};
    provider *p;
    llc_err err;
    CHECK(remote_create(&rc, &p, &err) == 0);
    conv_settings s = conv_default_settings();
    answer a[1];
    int64_t id = ask(p, NULL, "hi", &s);
    wait_answers(p, id, a, 1, -1);
    CHECK(a[0].state == DB_STATE_ERROR);
    CHECKF(strstr(a[0].message, "cannot reach 127.0.0.1:") != NULL, "%s", a[0].message);
    CHECK(!strcmp(prov_model_name(p), "remote")); /* the models list could not be read either */
    prov_free(p);
}

static void test_server_dies_mid_answer(void) {
    provider *p = open_remote("die", "sekrit");
    conv_settings s = conv_default_settings();
    answer a[1];
    int64_t id = ask(p, NULL, "hi", &s);
    wait_answers(p, id, a, 1, -1);
    CHECK(a[0].state == DB_STATE_ERROR && !strcmp(a[0].finish, "error"));
    CHECKF(!strcmp(a[0].text, "The answer was going well"), "%s", a[0].text); /* kept */
    CHECKF(strstr(a[0].message, "the text so far is kept") != NULL, "%s", a[0].message);
    prov_free(p);
}

static void test_length_and_non_streaming(void) {
    conv_settings s = conv_default_settings();
    answer a[1];
    provider *p = open_remote("length", "sekrit");
    int64_t id = ask(p, NULL, "hi", &s);
    wait_answers(p, id, a, 1, -1);
    CHECK(a[0].state == DB_STATE_DONE && !strcmp(a[0].finish, "length") && !strcmp(a[0].text, "cut short"));
    prov_free(p);
    p = open_remote("nostream", "sekrit");
    id = ask(p, NULL, "hi", &s);
    wait_answers(p, id, a, 1, -1);
    CHECK(a[0].state == DB_STATE_DONE && !strcmp(a[0].text, "All at once."));
    CHECK(a[0].usage.completion_tokens == 3);
    prov_free(p);
}

/* The status line's speed is tokens over the time from the first to the end,
 * not pieces over the microseconds between two that came in one read; a
 * length the user did not set is the server's to choose; beam search is
 * refused as a setting, before anything is sent. */
static void test_speed_length_and_beam(void) {
    provider *p = open_remote("burst", "sekrit");
    conv_settings s = conv_default_settings();
    answer a[1];
    int64_t id = ask(p, NULL, "hello", &s);
    wait_answers(p, id, a, 1, -1);
    CHECK(!strcmp(a[0].text, "a a a a a ") && a[0].state == DB_STATE_DONE);
    char status[320];
    prov_status(p, status, sizeof status);
    double tps = -1;
    const char *bar = strstr(status, "| ");
    while (bar && sscanf(bar, "| %lf tok/s", &tps) != 1) bar = strstr(bar + 1, "| ");
    CHECKF(tps > 5 && tps < 100, "4 tokens after the first in ~100 ms: %s", status); /* (was ~1e5) */
    pthread_mutex_lock(&g_srv.mu);
    cJSON *j = cJSON_Parse(g_srv.last_body);
    pthread_mutex_unlock(&g_srv.mu);
    CHECK(j && !cJSON_GetObjectItemCaseSensitive(j, "max_tokens"));
    cJSON_Delete(j);
    llc_err err;
    CHECK(prov_check_settings(p, &s, &err) == 0);
    s.beam = 2;
    CHECK(prov_check_settings(p, &s, &err) == LLC_ERR_UNSUPPORTED && strstr(err.msg, "beam search needs"));
    prov_free(p);
}

static void test_bad_url(void) {
    remote_config rc = {.url = "not a url"};
    provider *p = NULL;
    llc_err err;
    CHECK(remote_create(&rc, &p, &err) == LLC_ERR_FORMAT && p == NULL);
    CHECK(strstr(err.msg, "http://") != NULL);
}

int main(void) {
    RUN(test_sse_split_anywhere);
    RUN(test_sse_event_type_and_limits);
    RUN(test_endpoints);
    RUN(test_bad_url);
    if (fake_openai_start(&g_srv, "sekrit")) {
        printf("FAIL cannot start the fake server\n");
        return 1;
    }
    RUN(test_streams_an_answer);
    RUN(test_reasoning_comes_apart);
    RUN(test_parallel_answers_with_seeds);
    RUN(test_cancel_closes_the_stream);
    RUN(test_http_errors_are_explained);
    RUN(test_connection_refused);
    RUN(test_server_dies_mid_answer);
    RUN(test_length_and_non_streaming);
    RUN(test_speed_length_and_beam);
    fake_openai_stop(&g_srv);
    fo_sleep_ms(100); /* connection threads finish */
    return t_summary();
}
