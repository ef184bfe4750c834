/* test_engine.c — the shared engine: continuous batching gives each sequence the
 * same greedy tokens as running alone, with prefix-cache hits and under
 * preemption; parallel samples equal separate runs with seeds s..s+n-1; stop
 * strings, cancel and bad requests behave; every block comes back. */
#include "engine/sched/engine.h"
#include "tests/test.h"


#include "tests/engine_util.h"

static void test_reference_through_engine(void) {
    int32_t prompt[] = {1, 403, 407, 261, 378};
    static const int32_t want[] = {432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337};
    engine *e = make_engine(64, 512);
    if (!e) return;
    gen_request r = greedy_req(prompt, 5, 16);
    result res;
    run_all(e, &r, 1, 1, &res);
    CHECK(res.done && res.n_tokens == 16 && res.finish == FINISH_LENGTH);
    CHECK(!memcmp(res.tokens, want, sizeof want));
    CHECK(!strncmp(res.text, ", there was a little girl", 25));
    engine_metrics m;
    wait_idle(e, &m);
    CHECK(m.generated_tokens == 16 && m.prompt_tokens == 5 && m.steps == 16);
    CHECK(m.ttft_ms_p50 > 0 && m.ttft_ms_p99 >= m.ttft_ms_p50 && m.tpot_ms_p50 > 0);
    CHECK(m.kv_total == 64 && m.kv_used == 0 && m.kv_cached + m.kv_free == 64);
    engine_destroy(e);
}

/* Prompts: a shared 40-token prefix plus a distinct tail, so batching and prefix
 * hits are both exercised. */
static void make_prompts(int32_t prompts[][64], int *lens, int n, bool shared) {
    /* (sequences past the 16th repeat the first 16 prompts' shapes with other tokens) */
    uint64_t rng = 99;
    for (int i = 0; i < n; i++) {
        lens[i] = 44 + i % 13;
        prompts[i][0] = 1;
        for (int j = 1; j < lens[i]; j++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int32_t tok = (int32_t)(3 + (rng >> 33) % 500);
            prompts[i][j] = shared && j < 40 ? prompts[0][j] : tok;
            if (shared && i == 0) prompts[i][j] = tok;
        }
    }
}

static void check_same_as_alone(int n_req, int n_blocks, bool shared, bool expect_preempt) {
    static int32_t prompts[64][64];
    int lens[64];
    make_prompts(prompts, lens, n_req, shared);
    gen_request reqs[64];
    for (int i = 0; i < n_req; i++) reqs[i] = greedy_req(prompts[i], lens[i], 24);
    static result alone[64], together[64];
    engine *e = make_engine(256, 512);
    if (!e) return;
    for (int i = 0; i < n_req; i++) run_all(e, &reqs[i], 1, 1, &alone[i]);
    engine_destroy(e);
    e = make_engine(n_blocks, 128);
    if (!e) return;
    run_all(e, reqs, n_req, 1, together);
    same_tokens(alone, together, n_req, "batched");
    int cached = 0;
    for (int i = 0; i < n_req; i++) cached += together[i].cached;
    engine_metrics m;
    wait_idle(e, &m);
    CHECKF(m.kv_used == 0, "%d blocks still used", m.kv_used);
    if (shared) CHECKF(cached >= 32 * (n_req - 1) / 2, "only %d prompt tokens came from the cache", cached);
    if (expect_preempt) CHECKF(m.preemptions > 0, "no preemption with %d blocks", n_blocks);
    engine_destroy(e);
}

static void test_batched_equals_alone(void) { check_same_as_alone(16, 256, false, false); }
static void test_prefix_cache_hits(void) { check_same_as_alone(16, 256, true, false); }
static void test_preemption(void) { check_same_as_alone(12, 12, false, true); }
/* 64 sequences of ~5 blocks each through a cache that holds 8 of them */
static void test_preemption_64_through_8(void) { check_same_as_alone(64, 40, false, true); }

static void test_parallel_samples_equal_seeds(void) {
    int32_t prompt[] = {1, 403, 407, 261, 378};
    engine *e = make_engine(64, 512);
    if (!e) return;
    gen_request r = greedy_req(prompt, 5, 20);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 1000;
    r.n = 4;
    static result par[4], sep[4];
    run_all(e, &r, 1, 4, par);
    for (int i = 0; i < 4; i++) {
        gen_request one = r;
        one.n = 1;
        one.sampling.seed = 1000 + (uint64_t)i;
        run_all(e, &one, 1, 1, &sep[i]);
        CHECKF(par[i].done && par[i].n_tokens == sep[i].n_tokens &&
                   !memcmp(par[i].tokens, sep[i].tokens, sizeof(int32_t) * sep[i].n_tokens),
               "sample %d differs from a separate run with seed %d", i, 1000 + i);
    }
    CHECK(memcmp(par[0].tokens, par[1].tokens, sizeof par[0].tokens) != 0);
    engine_destroy(e);
}

static void test_stop_string(void) {
    int32_t prompt[] = {1, 403, 407, 261, 378};
    engine *e = make_engine(64, 512);
    if (!e) return;
    gen_request r = greedy_req(prompt, 5, 60);
    result full, stopped;
    run_all(e, &r, 1, 1, &full);
    const char *stop = "red ball";
    const char *at = strstr(full.text, stop);
    CHECKF(at != NULL, "text: %s", full.text);
    const char *stops[] = {stop};
    r.stop = stops;
    r.n_stop = 1;
    run_all(e, &r, 1, 1, &stopped);
    CHECK(stopped.finish == FINISH_STOP);
    CHECK(at && strlen(stopped.text) == (size_t)(at - full.text) &&
          !strncmp(stopped.text, full.text, (size_t)(at - full.text)));
    engine_destroy(e);
}

static void test_cancel_and_bad_requests(void) {
    int32_t prompt[] = {1, 403, 407, 261, 378};
    engine *e = make_engine(64, 512);
    if (!e) return;
    engine_client *c;
    engine_client_create(e, &c);
    llc_err err;
    gen_request r = greedy_req(prompt, 5, 400);
    int64_t id = engine_submit(e, c, &r, &err);
    CHECK(id > 0);
    int tokens = 0;
    engine_finish finish = FINISH_NONE;
    for (;;) {
        engine_event *ev = engine_client_wait(c, 20000);
        if (!ev) break;
        if (ev->kind == EV_TOKEN && ++tokens == 3) engine_cancel(e, id);
        if (ev->kind == EV_DONE) finish = ev->finish;
        bool end = ev->kind != EV_TOKEN;
        engine_event_free(ev);
        if (end) break;
    }
    CHECK(finish == FINISH_CANCELLED && tokens < 400);
    engine_metrics m;
    wait_idle(e, &m);
    CHECK(m.kv_used == 0);
    /* n = 3 cancelled before its samples exist: still one done per sample */
    gen_request three = greedy_req(prompt, 5, 50);
    three.n = 3;
    three.sampling.temperature = 1.0f;
    id = engine_submit(e, c, &three, &err);
    engine_cancel(e, id);
    int dones = 0, mask = 0;
    for (engine_event *ev; dones < 3 && (ev = engine_client_wait(c, 20000));) {
        if (ev->kind == EV_DONE && ev->request_id == id) {
            dones++;
            mask |= 1 << ev->seq_index;
            CHECK(ev->finish == FINISH_CANCELLED);
        }
        engine_event_free(ev);
    }
    CHECKF(dones == 3 && mask == 7, "%d done events (samples %x)", dones, mask);
    /* requests that can never run are refused at submit */
    gen_request bad = greedy_req(prompt, 0, 5);
    CHECK(engine_submit(e, c, &bad, &err) < 0);
    bad = greedy_req(prompt, 5, 0);
    CHECK(engine_submit(e, c, &bad, &err) < 0 && strstr(err.msg, "max_tokens"));
    bad = greedy_req(prompt, 5, 5);
    bad.sampling.top_p = 2;
    CHECK(engine_submit(e, c, &bad, &err) < 0);
    static int32_t huge[600];
    for (int i = 0; i < 600; i++) huge[i] = 5;
    bad = greedy_req(huge, 600, 5);
    CHECK(engine_submit(e, c, &bad, &err) < 0 && strstr(err.msg, "context"));
    int32_t oov[] = {1, 9999};
    bad = greedy_req(oov, 2, 5);
    CHECK(engine_submit(e, c, &bad, &err) < 0 && strstr(err.msg, "vocabulary"));
    /* a client freed with a request in flight: the engine cleans up */
    r.max_tokens = 200;
    CHECK(engine_submit(e, c, &r, &err) > 0);
    engine_client_free(c);
    wait_idle(e, &m);
    CHECK(m.kv_used == 0 && m.running == 0);
    engine_destroy(e);
}

/* engine_get_slots: the live sequences of a running request with its
 * parameters; none once idle. The latency histograms count each finished
 * sample once, in one bucket. */
static void test_slots_and_latency_histograms(void) {
    int32_t prompt[] = {1, 403, 407, 261, 378};
    engine *e = make_engine(64, 512);
    if (!e) return;
    engine_client *c;
    engine_client_create(e, &c);
    llc_err err;
    gen_request r = greedy_req(prompt, 5, 300);
    r.n = 2;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 7;
    int64_t id = engine_submit(e, c, &r, &err);
    CHECK(id > 0);
    engine_slot *sl = NULL;
    int n = 0, dones = 0;
    bool cancelled = false;
    for (engine_event *ev; dones < 2 && (ev = engine_client_wait(c, 20000));) {
        if (ev->kind == EV_DONE) dones++;
        if (ev->kind == EV_TOKEN && !cancelled) {
            free(sl);
            n = engine_get_slots(e, &sl);
            if (n == 2) { /* both samples exist: the snapshot is complete */
                engine_cancel(e, id);
                cancelled = true;
            }
        }
        engine_event_free(ev);
    }
    CHECKF(cancelled && n == 2, "%d slots", n);
    for (int i = 0; cancelled && i < n; i++)
        CHECKF(sl[i].request_id == id && sl[i].running && sl[i].n_prompt == 5 && sl[i].max_tokens == 300 &&
                   sl[i].n == 2 && sl[i].sampling.temperature == 1.0f && sl[i].sampling.seed == 7 &&
                   sl[i].n_decoded >= 1 && sl[i].n_decoded <= 300,
               "slot %d: request %lld index %d running %d prompt %d decoded %d", i, (long long)sl[i].request_id,
               sl[i].index, sl[i].running, sl[i].n_prompt, sl[i].n_decoded);
    CHECK(n != 2 || sl[0].index + sl[1].index == 1);
    free(sl);
    engine_metrics m0, m1;
    wait_idle(e, &m0);
    CHECK(engine_get_slots(e, &sl) == 0 && sl == NULL);
    gen_request one = greedy_req(prompt, 5, 10);
    result res;
    run_all(e, &one, 1, 1, &res);
    wait_idle(e, &m1);
    CHECK(m1.ttft_count == m0.ttft_count + 1 && m1.tpot_count == m0.tpot_count + 1);
    CHECK(m1.ttft_sum_ms > m0.ttft_sum_ms && m1.tpot_sum_ms > m0.tpot_sum_ms);
    int64_t in_buckets = 0;
    for (int i = 0; i < ENGINE_LAT_BUCKETS; i++) in_buckets += m1.ttft_buckets[i];
    CHECKF(in_buckets == m1.ttft_count, "%lld in buckets, count %lld", (long long)in_buckets, (long long)m1.ttft_count);
    CHECK(m1.max_running > 0 && m1.block_size == 16);
    engine_client_free(c);
    engine_destroy(e);
}

/* Sampling from each row's best entries (the backend's top_k, when every row of
 * a step reads only those) gives the tokens that whole rows give: default
 * chains (temperature 0.8, top-k 40, top-p, min-p) and greedy rows, batched,
 * with seeds; and such steps were taken. */
static void test_top_lists_equal_whole_rows(void) {
    static int32_t prompts[24][64];
    int lens[24];
    make_prompts(prompts, lens, 24, false);
    gen_request reqs[24];
    for (int i = 0; i < 24; i++) {
        reqs[i] = greedy_req(prompts[i], lens[i], 20);
        if (i % 4) reqs[i].sampling = sampler_params_default(), reqs[i].sampling.seed = 500 + (uint64_t)i;
        if (i % 4 == 3) reqs[i].sampling.top_k = 64, reqs[i].sampling.temperature = 1.3f;
    }
    static result whole[24], top[24];
    setenv("LLC_TOP_K", "0", 1);
    engine *e = make_engine(256, 128);
    unsetenv("LLC_TOP_K");
    if (!e) return;
    run_all(e, reqs, 24, 1, whole);
    engine_metrics m;
    wait_idle(e, &m);
    CHECKF(m.steps_top == 0, "%lld steps took top lists with LLC_TOP_K=0", (long long)m.steps_top);
    engine_destroy(e);
    e = make_engine(256, 128);
    if (!e) return;
    run_all(e, reqs, 24, 1, top);
    wait_idle(e, &m);
    CHECKF(m.steps_top > 0 && m.steps_top == m.steps, "%lld of %lld steps took top lists", (long long)m.steps_top,
           (long long)m.steps);
    same_tokens(whole, top, 24, "top lists");
    int sampled_differ = 0; /* (the chains did sample: not every row greedy-alike) */
    for (int i = 1; i < 24; i++)
        if (i % 4 && memcmp(top[i].tokens, top[0].tokens, sizeof top[0].tokens)) sampled_differ++;
    CHECK(sampled_differ > 0);
    /* a penalty that reads the whole row: those steps copy whole rows */
    gen_request pen = reqs[1];
    pen.sampling.repeat_penalty = 1.3f;
    engine_metrics before = m;
    run_all(e, &pen, 1, 1, top);
    wait_idle(e, &m);
    CHECKF(m.steps > before.steps && m.steps_top == before.steps_top, "a penalty's steps took top lists");
    engine_destroy(e);
}

int main(void) {
    if (setup()) {
        printf("0 passed, 1 failed\n");
        return 1;
    }
    RUN(test_reference_through_engine);
    RUN(test_batched_equals_alone);
    RUN(test_prefix_cache_hits);
    RUN(test_preemption);
    RUN(test_preemption_64_through_8);
    RUN(test_parallel_samples_equal_seeds);
    RUN(test_top_lists_equal_whole_rows);
    RUN(test_stop_string);
    RUN(test_cancel_and_bad_requests);
    RUN(test_slots_and_latency_histograms);
    teardown();
    return t_summary();
}
