/* test_embed.c — embeddings through the engine: the vector equals the mean of
 * the final-norm hidden states of a one-sequence forward pass (hidden-state
 * output mode), L2-normalised; batching inputs together, chunking them and
 * running them beside generation changes nothing (and does not change the
 * generation); norm 1, same text same vector, different texts different
 * vectors; no prefix-cache use or residue; bad requests fail at submit. */
#include "engine/sched/engine.h"
#include "engine/model/batch.h"
#include "engine/sched/kvcache.h"
#include "tests/test.h"

#include "tests/engine_util.h"

#define DIM_MAX 512

/* The reference: one forward pass of the prompt alone asking for every row's
 * hidden state, averaged in double and normalised. */
static void reference_embedding(const int32_t *toks, int n, float *out, int dim) {
    model_kv *kv = NULL;
    batch *b = NULL;
    llc_err err;
    int n_blocks = (n + 15) / 16;
    CHECKF(model_kv_create(g_model, n_blocks, 16, 0 /* f32, as the engine here */, &kv, &err) == 0, "%s", err.msg);
    CHECK(batch_create(n_blocks, 16, &b) == 0);
    if (!kv || !b) goto out;
    int32_t blocks[64];
    for (int i = 0; i < n_blocks; i++) blocks[i] = i;
    CHECK(batch_add(b, toks, n, 0, blocks, n_blocks, BATCH_OUT_HIDDEN) == 0);
    float *hidden = malloc((size_t)n * dim * sizeof *hidden);
    CHECKF(model_forward_hidden(g_model, kv, batch_view(b), NULL, hidden, &err) == 0, "%s", err.msg);
    double sum[DIM_MAX] = {0}, norm = 0;
    for (int r = 0; r < n; r++)
        for (int d = 0; d < dim; d++) sum[d] += hidden[(size_t)r * dim + d];
    for (int d = 0; d < dim; d++) norm += (sum[d] / n) * (sum[d] / n);
    for (int d = 0; d < dim; d++) out[d] = (float)(sum[d] / n / sqrt(norm));
    free(hidden);
out:
    batch_free(b);
    model_kv_free(kv);
}

typedef struct vec {
    float v[DIM_MAX];
    int n, prompt_tokens;
    bool got, done;
} vec;

/* Runs one embeddings request (and optionally a greedy generation beside it);
 * collects each input's vector. */
static void run_embed(engine *e, const int32_t *const *inputs, const int *lens, int n, vec *out,
                      const gen_request *gen, result *gen_res) {
    engine_client *c;
    CHECK(engine_client_create(e, &c) == 0);
    llc_err err;
    int64_t gid = -1;
    if (gen) {
        memset(gen_res, 0, sizeof *gen_res);
        gid = engine_submit(e, c, gen, &err);
        CHECKF(gid > 0, "%s", err.msg);
    }
    embed_request r = {.inputs = inputs, .n_tokens = lens, .n_inputs = n};
    int64_t id = engine_submit_embed(e, c, &r, &err);
    CHECKF(id > 0, "submit: %s", err.msg);
    memset(out, 0, sizeof *out * (size_t)n);
    int pending = n + (gen ? 1 : 0);
    while (pending > 0 && id > 0) {
        engine_event *ev = engine_client_wait(c, 20000);
        CHECK(ev != NULL);
        if (!ev) break;
        if (ev->request_id == gid) {
            if (ev->kind == EV_TOKEN && gen_res->n_tokens < 512) gen_res->tokens[gen_res->n_tokens++] = ev->token;
            if (ev->kind == EV_DONE) gen_res->done = true, pending--;
        } else {
            CHECK(ev->request_id == id && ev->seq_index >= 0 && ev->seq_index < n);
            vec *o = &out[ev->seq_index];
            if (ev->kind == EV_EMBEDDING) {
                CHECK(!o->got && ev->n_embd <= DIM_MAX);
                o->got = true;
                o->n = ev->n_embd;
                o->prompt_tokens = ev->prompt_tokens;
                memcpy(o->v, ev->embedding, (size_t)ev->n_embd * sizeof(float));
            } else if (ev->kind == EV_DONE) {
                CHECK(o->got && ev->finish == FINISH_STOP && ev->cached_tokens == 0);
                o->done = true;
                pending--;
            } else {
                CHECKF(0, "unexpected event %d: %s", ev->kind, ev->message);
                pending = 0;
            }
        }
        engine_event_free(ev);
    }
    engine_client_free(c);
}

static double max_diff(const float *a, const float *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static double norm_of(const float *a, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * a[i];
    return sqrt(s);
}

static int encode(const char *text, int32_t *out, int cap) {
    return tok_encode(g_tok, text, strlen(text), true, false, out, cap);
}

static void test_equals_reference_and_batching(void) {
    const int dim = model_hparams_of(g_model)->dim;
    CHECK(dim <= DIM_MAX);
    static int32_t toks[4][400];
    int lens[4];
    lens[0] = encode("Once upon a time, there was a little girl named Lily.", toks[0], 400);
    lens[1] = encode("The dog ran to the park.", toks[1], 400);
    lens[2] = 300; /* long: several chunks at a 64-token step budget */
    for (int i = 0; i < lens[2]; i++) toks[2][i] = i == 0 ? 1 : 3 + (i * 37) % 500;
    lens[3] = lens[0]; /* the first text again */
    memcpy(toks[3], toks[0], sizeof toks[0]);
    const int32_t *inputs[4] = {toks[0], toks[1], toks[2], toks[3]};
    static float ref[4][DIM_MAX];
    for (int i = 0; i < 3; i++) reference_embedding(toks[i], lens[i], ref[i], dim);
    memcpy(ref[3], ref[0], sizeof ref[0]);

    /* each alone, on a roomy engine */
    engine *e = make_engine(64, 512);
    if (!e) return;
    static vec alone[4], together[4];
    for (int i = 0; i < 3; i++) run_embed(e, &inputs[i], &lens[i], 1, &alone[i], NULL, NULL);
    engine_metrics m;
    wait_idle(e, &m);
    CHECKF(m.kv_cached == 0 && m.kv_used == 0, "embeddings left %d blocks cached", m.kv_cached);
    engine_destroy(e);
    for (int i = 0; i < 3; i++) {
        CHECK(alone[i].done && alone[i].n == dim && alone[i].prompt_tokens == lens[i]);
        CHECKF(max_diff(alone[i].v, ref[i], dim) <= 1e-5, "input %d alone: %g from the reference", i,
               max_diff(alone[i].v, ref[i], dim));
        CHECK_NEAR(norm_of(alone[i].v, dim), 1.0, 1e-5);
    }

    /* together in one request, chunked by a small step budget, beside a generation */
    int32_t prompt[] = {1, 403, 407, 261, 378};
    static const int32_t want[] = {432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337};
    gen_request g = greedy_req(prompt, 5, 16);
    static result gres;
    e = make_engine(64, 64);
    if (!e) return;
    run_embed(e, inputs, lens, 4, together, &g, &gres);
    wait_idle(e, &m);
    CHECK(m.kv_used == 0);
    engine_destroy(e);
    CHECK(gres.done && gres.n_tokens == 16 && !memcmp(gres.tokens, want, sizeof want));
    for (int i = 0; i < 4; i++) {
        CHECK(together[i].done && together[i].n == dim);
        CHECKF(max_diff(together[i].v, ref[i], dim) <= 1e-5, "input %d together: %g from the reference", i,
               max_diff(together[i].v, ref[i], dim));
        CHECK_NEAR(norm_of(together[i].v, dim), 1.0, 1e-5);
    }
    /* same text, same vector; different texts, clearly different vectors */
    CHECK(max_diff(together[0].v, together[3].v, dim) <= 1e-6);
    CHECK(max_diff(together[0].v, together[1].v, dim) > 1e-2);
    CHECK(max_diff(together[1].v, together[2].v, dim) > 1e-2);
}

/* Many inputs beside a long generation on a small KV cache: inputs queue, get
 * preempted when the generation needs blocks, start over, and still each equal
 * their reference; the generation is what it is alone. */
static void test_many_inputs_small_cache(void) {
    const int dim = model_hparams_of(g_model)->dim;
    enum { N = 24, LEN = 40 };
    static int32_t toks[N][LEN];
    static float ref[N][DIM_MAX];
    const int32_t *inputs[N];
    int lens[N];
    for (int i = 0; i < N; i++) {
        toks[i][0] = 1;
        for (int k = 1; k < LEN; k++) toks[i][k] = 3 + (i * 131 + k * 17) % 500;
        inputs[i] = toks[i];
        lens[i] = LEN - i % 7;
        reference_embedding(toks[i], lens[i], ref[i], dim);
    }
    static int32_t prompt[150];
    for (int i = 0; i < 150; i++) prompt[i] = i == 0 ? 1 : 3 + (i * 29) % 500;
    gen_request g = greedy_req(prompt, 150, 58); /* up to 208 tokens: 13 blocks */
    static result alone, beside;
    engine *e = make_engine(64, 512);
    if (!e) return;
    run_all(e, &g, 1, 1, &alone);
    engine_destroy(e);
    e = make_engine(14, 16); /* the generation takes up to 13 blocks: inputs wait, and get preempted */
    if (!e) return;
    static vec out[N];
    run_embed(e, inputs, lens, N, out, &g, &beside);
    engine_metrics m;
    wait_idle(e, &m);
    CHECK(m.kv_used == 0);
    CHECKF(m.preemptions > 0, "no preemption: the test lost its point (%d generated)", alone.n_tokens);
    engine_destroy(e);
    CHECK(beside.done && beside.n_tokens == alone.n_tokens &&
          !memcmp(beside.tokens, alone.tokens, sizeof(int32_t) * (size_t)alone.n_tokens));
    for (int i = 0; i < N; i++)
        CHECKF(out[i].done && max_diff(out[i].v, ref[i], dim) <= 1e-5, "input %d: %g from the reference", i,
               max_diff(out[i].v, ref[i], dim));
}

/* An embedding does not take a cached prefix, and leaves the cache as it was. */
static void test_prefix_cache(void) {
    const int dim = model_hparams_of(g_model)->dim;
    static int32_t toks[80];
    for (int i = 0; i < 80; i++) toks[i] = i == 0 ? 1 : 3 + (i * 53) % 500;
    engine *e = make_engine(64, 512);
    if (!e) return;
    gen_request g = greedy_req(toks, 80, 2);
    result gres;
    run_all(e, &g, 1, 1, &gres); /* caches 4 full blocks of this prompt */
    engine_metrics before, after;
    wait_idle(e, &before);
    CHECK(before.kv_cached >= 4);
    const int32_t *in[1] = {toks};
    int len = 80;
    static vec v;
    run_embed(e, in, &len, 1, &v, NULL, NULL); /* (run_embed checks cached_tokens == 0) */
    wait_idle(e, &after);
    CHECK(after.kv_cached == before.kv_cached);
    static float ref[DIM_MAX];
    reference_embedding(toks, 80, ref, dim);
    CHECK(v.done && max_diff(v.v, ref, dim) <= 1e-5);
    run_all(e, &g, 1, 1, &gres); /* the generation's prefix is still cached */
    CHECK(gres.done && gres.cached == 64);
    engine_destroy(e);
}

static void test_bad_requests(void) {
    engine *e = make_engine(8, 512);
    if (!e) return;
    engine_client *c;
    CHECK(engine_client_create(e, &c) == 0);
    llc_err err;
    int32_t ok[] = {1, 5, 6}, bad_tok[] = {1, 100000};
    static int32_t longer[600];
    for (int i = 0; i < 600; i++) longer[i] = 5;
    const int32_t *in1[1] = {ok}, *in_bad[1] = {bad_tok}, *in_long[1] = {longer};
    int n0 = 0, n2 = 2, n600 = 600, n3 = 3;
    embed_request none = {.inputs = in1, .n_tokens = &n3, .n_inputs = 0};
    embed_request empty = {.inputs = in1, .n_tokens = &n0, .n_inputs = 1};
    embed_request badtok = {.inputs = in_bad, .n_tokens = &n2, .n_inputs = 1};
    embed_request toolong = {.inputs = in_long, .n_tokens = &n600, .n_inputs = 1};
    CHECK(engine_submit_embed(e, c, &none, &err) < 0);
    CHECK(engine_submit_embed(e, c, &empty, &err) < 0 && strstr(err.msg, "empty"));
    CHECK(engine_submit_embed(e, c, &badtok, &err) < 0 && strstr(err.msg, "vocabulary"));
    CHECK(engine_submit_embed(e, c, &toolong, &err) < 0 && strstr(err.msg, "context"));
    /* a cancelled request ends each input with a done event and frees its blocks */
    embed_request fine = {.inputs = in1, .n_tokens = &n3, .n_inputs = 1};
    int64_t id = engine_submit_embed(e, c, &fine, &err);
    CHECK(id > 0);
    engine_cancel(e, id);
    bool done = false;
    for (engine_event *ev; !done && (ev = engine_client_wait(c, 20000));) {
        done = ev->kind == EV_DONE;
        engine_event_free(ev);
    }
    CHECK(done);
    engine_client_free(c);
    engine_metrics m;
    wait_idle(e, &m);
    CHECK(m.kv_used == 0);
    engine_destroy(e);
}

/* kv_seq_free_uncached: the blocks only this sequence held come back plain
 * free; blocks another sequence shares keep their hash. */
static void test_kv_free_uncached(void) {
    kv_pool *p;
    CHECK(kv_pool_create(8, 4, &p) == 0);
    int32_t t[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    kv_seq *a, *b;
    CHECK(kv_seq_create(p, &a) == 0 && kv_seq_append(a, t, 12) == 0 && kv_seq_commit(a, 12) == 0);
    CHECK(kv_seq_create(p, &b) == 0 && kv_seq_match_prefix(b, t, 9) == 8); /* shares 2 blocks */
    kv_seq_free_uncached(a);
    kv_stats st;
    kv_pool_stats(p, &st);
    CHECK(st.used == 2 && st.cached == 0 && st.free == 6);
    llc_err err;
    CHECKF(kv_pool_validate(p, &err) == 0, "%s", err.msg);
    kv_seq_free(b); /* its blocks kept their hashes: they stay cached */
    kv_pool_stats(p, &st);
    CHECK(st.used == 0 && st.cached == 2);
    CHECKF(kv_pool_validate(p, &err) == 0, "%s", err.msg);
    kv_pool_free(p);
}

int main(void) {
    if (setup()) {
        printf("0 passed, 1 failed\n");
        return 1;
    }
    RUN(test_equals_reference_and_batching);
    RUN(test_many_inputs_small_cache);
    RUN(test_prefix_cache);
    RUN(test_bad_requests);
    RUN(test_kv_free_uncached);
    teardown();
    return t_summary();
}
