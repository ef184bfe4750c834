/* engine_util.h — what the engine tests share: the stories260K model loaded once,
 * greedy requests, running a set of requests to completion and collecting each
 * sample's tokens and text, and waiting for the engine to go idle. Included by
 * one test file each (static functions). The KV element type of every engine and
 * cache the tests make is LLC_TEST_KV_TYPE (f32, f16 or q8_0; default f32):
 * tests/run.sh runs the engine tests again with f16 and q8_0. */
#ifndef LLC_TEST_ENGINE_UTIL_H
#define LLC_TEST_ENGINE_UTIL_H

#include <time.h>

#include "engine/sched/engine.h"
#include "tests/test.h"
#ifdef LLC_CUDA
#include "kernels/cuda/backend_cuda.h"
#endif

typedef struct result {
    int32_t tokens[512];
    int n_tokens;
    char text[4096];
    engine_finish finish;
    int cached;
    bool done;
} result;

static gguf *g_file;
static backend *g_be;
static model *g_model;
static tokenizer *g_tok;

/* The CPU backend, or with LLC_TEST_DEVICE=cuda (make test-cuda) the GPU's. */
static int test_backend_create(backend **out, llc_err *err) {
#ifdef LLC_CUDA
    const char *dev = getenv("LLC_TEST_DEVICE");
    if (dev && !strcmp(dev, "cuda")) return backend_cuda_create(0, out, err);
#endif
    return backend_cpu_create(2, out, err);
}

/* LLC_TEST_KV_TYPE as a qtype id (f32 when unset; an unknown name fails the run) */
static uint32_t test_kv_type(void) {
    const char *s = getenv("LLC_TEST_KV_TYPE");
    if (!s || !*s) return 0;
    int t = model_kv_type_from_name(s);
    if (t < 0) {
        fprintf(stderr, "LLC_TEST_KV_TYPE=%s: not f32, f16 or q8_0\n", s);
        exit(1);
    }
    return (uint32_t)t;
}

static int setup(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", t_shared());
    llc_err err;
    if (gguf_open(path, &g_file, &err) || test_backend_create(&g_be, &err) ||
        model_load(g_file, g_be, &g_model, &err) || tok_load(g_file, &g_tok, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    if (test_kv_type()) printf("KV cache: %s\n", model_kv_type_name(test_kv_type()));
    return 0;
}

static gen_request greedy_req(const int32_t *prompt, int n, int max_tokens) {
    gen_request r = {.prompt = prompt, .n_prompt = n, .n = 1, .max_tokens = max_tokens};
    r.sampling = sampler_params_default();
    r.sampling.temperature = 0;
    return r;
}

/* Submits reqs[0..n) at once and collects every sample's tokens until all are done.
 * res is indexed [request][sample] with stride max_n. */
static void run_all(engine *e, const gen_request *reqs, int n, int max_n, result *res) {
    engine_client *c;
    CHECK(engine_client_create(e, &c) == 0);
    int64_t ids[64];
    llc_err err;
    for (int i = 0; i < n; i++) {
        ids[i] = engine_submit(e, c, &reqs[i], &err);
        CHECKF(ids[i] > 0, "submit: %s", err.msg);
    }
    memset(res, 0, sizeof *res * (size_t)n * max_n);
    int pending = 0;
    for (int i = 0; i < n; i++) pending += reqs[i].n;
    while (pending > 0) {
        engine_event *ev = engine_client_wait(c, 20000);
        CHECK(ev != NULL);
        if (!ev) break;
        int ri = -1;
        for (int i = 0; i < n; i++)
            if (ids[i] == ev->request_id) ri = i;
        CHECK(ri >= 0);
        result *r = &res[ri * max_n + ev->seq_index];
        if (ev->kind == EV_TOKEN) {
            if (r->n_tokens < 512) r->tokens[r->n_tokens++] = ev->token;
            strncat(r->text, ev->text, sizeof r->text - strlen(r->text) - 1);
        } else if (ev->kind == EV_DONE) {
            r->finish = ev->finish;
            r->cached = ev->cached_tokens;
            r->done = true;
            pending--;
        } else {
            fprintf(stderr, "  error event: %s\n", ev->message);
            CHECK(0);
            pending = 0;
        }
        engine_event_free(ev);
    }
    engine_client_free(c);
}

static engine *make_engine(int n_blocks, int step_tokens) {
    engine_params p = {.n_blocks = n_blocks, .block_size = 16, .max_step_tokens = step_tokens,
                       .kv_type = test_kv_type()};
    engine *e = NULL;
    llc_err err;
    CHECKF(engine_create(g_model, g_tok, &p, &e, &err) == 0, "%s", err.msg);
    return e;
}

static void wait_idle(engine *e, engine_metrics *m) {
    for (int i = 0; i < 2000; i++) {
        engine_get_metrics(e, m);
        if (m->running == 0 && m->waiting == 0 && m->kv_used == 0) return;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* Checks that results b[0..n) are done and have a's tokens and text. */
static inline void same_tokens(const result *a, const result *b, int n, const char *what) {
    for (int i = 0; i < n; i++)
        CHECKF(a[i].done && b[i].done && a[i].n_tokens == b[i].n_tokens &&
                   !memcmp(a[i].tokens, b[i].tokens, sizeof(int32_t) * a[i].n_tokens) &&
                   !strcmp(a[i].text, b[i].text),
               "%s: request %d differs (%d vs %d tokens)", what, i, a[i].n_tokens, b[i].n_tokens);
}

static void teardown(void) {
    tok_free(g_tok);
    model_free(g_model);
    backend_free(g_be);
    gguf_free(g_file);
}

#endif
