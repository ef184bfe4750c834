/* test_engine_robust.c — the engine under memory trouble and at start-up: an
 * allocation that fails inside a step (kernels/fault.h) ends only the request
 * the step is blamed on, with an error event and one done per sample, while
 * the request decoding beside it finishes with the tokens it has alone and a
 * later request runs; when the event queue cannot allocate, every sample still
 * gets its done event; the warm-up pass of engine_create leaves no KV blocks,
 * cached prefix or metric behind and changes no result. */
#include "engine/sched/engine.h"
#include "kernels/fault.h"
#include "tests/test.h"

#include "tests/engine_util.h"

/* A long prompt: more rows in one step than anything the model ran before. */
static void long_prompt(int32_t *p, int n) {
    p[0] = 1;
    for (int i = 1; i < n; i++) p[i] = (int32_t)(3 + (i * 131) % 500);
}

static void test_oom_in_step_ends_only_its_request(void) {
    int32_t a_prompt[] = {1, 403, 407, 261, 378}, c_prompt[] = {1, 365, 372, 261, 270, 284};
    static int32_t b_prompt[300];
    long_prompt(b_prompt, 300);
    gen_request a = greedy_req(a_prompt, 5, 60), c_req = greedy_req(c_prompt, 6, 20);
    gen_request b = greedy_req(b_prompt, 300, 10);
    b.n = 2; /* two samples: each still gets its one done */
    b.sampling.temperature = 1.0f;
    result a_alone, c_alone;
    engine *e = make_engine(128, 512);
    if (!e) return;
    run_all(e, &a, 1, 1, &a_alone);
    run_all(e, &c_req, 1, 1, &c_alone);

    engine_client *cl;
    CHECK(engine_client_create(e, &cl) == 0);
    llc_err err;
    int64_t ida = engine_submit(e, cl, &a, &err), idb = 0;
    CHECK(ida > 0);
    result ra = {0};
    int b_errors = 0, b_dones = 0, a_errors = 0, a_dones = 0;
    char b_msg[256] = "";
    while (a_dones == 0 || b_dones < 2) {
        engine_event *ev = engine_client_wait(cl, 20000);
        CHECK(ev != NULL);
        if (!ev) break;
        if (ev->request_id == ida) {
            if (ev->kind == EV_TOKEN && ra.n_tokens < 512) ra.tokens[ra.n_tokens++] = ev->token;
            if (ev->kind == EV_TOKEN && ra.n_tokens == 3) {
                /* a decodes (its steps allocate nothing): the next backend allocation,
                   for b's 300-row step, fails */
                llc_fault_fail_alloc(1);
                idb = engine_submit(e, cl, &b, &err);
                CHECK(idb > 0);
            }
            if (ev->kind == EV_ERROR) a_errors++;
            if (ev->kind == EV_DONE) a_dones++, ra.finish = ev->finish, ra.done = true;
        } else if (ev->request_id == idb) {
            CHECK(b_dones == 0 || ev->kind == EV_DONE); /* nothing after the error but the dones */
            if (ev->kind == EV_ERROR) b_errors++, snprintf(b_msg, sizeof b_msg, "%s", ev->message);
            if (ev->kind == EV_DONE) {
                b_dones++;
                CHECKF(b_errors == 1, "done before the error event (%d errors)", b_errors);
                CHECK(ev->finish == FINISH_ERROR && ev->completion_tokens == 0);
            }
        }
        engine_event_free(ev);
    }
    CHECKF(b_errors == 1 && b_dones == 2, "b: %d error events, %d done events", b_errors, b_dones);
    CHECKF(strstr(b_msg, "out of memory") != NULL, "b's error says '%s'", b_msg);
    CHECKF(a_errors == 0 && a_dones == 1 && ra.finish == FINISH_LENGTH, "a: %d errors, %d dones, finish %d",
           a_errors, a_dones, ra.finish);
    CHECKF(ra.n_tokens == a_alone.n_tokens && !memcmp(ra.tokens, a_alone.tokens, sizeof(int32_t) * ra.n_tokens),
           "a's tokens differ from its run alone (%d vs %d tokens)", ra.n_tokens, a_alone.n_tokens);
    /* nothing more arrives for either, and a later request runs */
    engine_event *extra = engine_client_wait(cl, 50);
    CHECKF(extra == NULL, "an extra event (kind %d) after the done events", extra ? (int)extra->kind : -1);
    engine_event_free(extra);
    engine_client_free(cl);
    result rc;
    run_all(e, &c_req, 1, 1, &rc);
    same_tokens(&c_alone, &rc, 1, "after the failed step");
    engine_metrics m;
    wait_idle(e, &m);
    CHECKF(m.kv_used == 0 && m.running == 0 && m.waiting == 0, "%d blocks used, %d running, %d waiting",
           m.kv_used, m.running, m.waiting);
    CHECKF(m.preemptions >= 1, "a was not put back to waiting (%lld preemptions)", (long long)m.preemptions);
    /* the same long prompt runs once memory is there */
    b.n = 1;
    result rb;
    run_all(e, &b, 1, 1, &rb);
    CHECK(rb.done && rb.finish == FINISH_LENGTH && rb.n_tokens == 10);
    llc_fault_fail_alloc(0);
    engine_destroy(e);
}

/* A step that fails with a lone request in it ends that request; the engine
 * then takes the next one. */
static void test_oom_with_one_request(void) {
    static int32_t p[400];
    long_prompt(p, 400);
    engine *e = make_engine(128, 512);
    if (!e) return;
    engine_client *cl;
    CHECK(engine_client_create(e, &cl) == 0);
    llc_err err;
    gen_request r = greedy_req(p, 400, 5);
    llc_fault_fail_alloc(1);
    int64_t id = engine_submit(e, cl, &r, &err);
    int errors = 0, dones = 0;
    engine_finish finish = FINISH_NONE;
    for (engine_event *ev; dones == 0 && (ev = engine_client_wait(cl, 20000));) {
        CHECK(ev->request_id == id);
        errors += ev->kind == EV_ERROR;
        if (ev->kind == EV_DONE) dones++, finish = ev->finish;
        engine_event_free(ev);
    }
    CHECK(errors == 1 && dones == 1 && finish == FINISH_ERROR);
    engine_client_free(cl);
    result res;
    run_all(e, &r, 1, 1, &res);
    CHECK(res.done && res.finish == FINISH_LENGTH && res.n_tokens == 5);
    llc_fault_fail_alloc(0);
    engine_destroy(e);
}

/* After a fault: the engine answers the next request in full (8 greedy tokens, text). */
static bool serves_next_request(engine *e, const int32_t *prompt) {
    result res;
    gen_request one = greedy_req(prompt, 5, 8);
    run_all(e, &one, 1, 1, &res);
    return res.done && res.n_tokens == 8 && res.text[0];
}

/* Memory runs out for the event queue while an answer streams (fault.h's event
 * failures: every node the engine allocates fails): the tokens are lost, so each
 * sample ends there, failed (not streamed on with holes in it), and still gets its
 * one EV_DONE, from the node reserved at submit, so a client waiting for it is not
 * left hanging; then the engine serves the next request. */
static void test_done_survives_lost_events(void) {
    int32_t prompt[] = {1, 403, 407, 261, 378};
    engine *e = make_engine(64, 512);
    if (!e) return;
    engine_client *c;
    CHECK(engine_client_create(e, &c) == 0);
    llc_err err;
    gen_request r = greedy_req(prompt, 5, 12);
    r.n = 3;
    r.sampling.temperature = 1.0f;
    llc_fault_fail_events(true);
    int64_t id = engine_submit(e, c, &r, &err);
    CHECK(id > 0);
    int dones = 0, mask = 0, others = 0;
    for (engine_event *ev; dones < 3 && (ev = engine_client_wait(c, 20000));) {
        if (ev->kind == EV_DONE && ev->request_id == id) {
            dones++;
            mask |= 1 << ev->seq_index;
            CHECKF(ev->finish == FINISH_ERROR && ev->completion_tokens < 12, "finish %d after %d tokens",
                   (int)ev->finish, ev->completion_tokens);
        } else {
            others++;
        }
        engine_event_free(ev);
    }
    llc_fault_fail_events(false);
    CHECKF(dones == 3 && mask == 7, "%d done events (samples %x)", dones, mask);
    CHECKF(others == 0, "%d events got through while every allocation failed", others);
    engine_client_free(c);
    CHECK(serves_next_request(e, prompt));
    engine_destroy(e);
}

/* Memory runs out for an answer's text (fault.h's text failures): the sample ends
 * with an error that says so, not with text silently missing from the answer it
 * streams and the client saves; then the engine serves the next request. */
static void test_lost_text_ends_with_an_error(void) {
    int32_t prompt[] = {1, 403, 407, 261, 378};
    engine *e = make_engine(64, 512);
    if (!e) return;
    engine_client *c;
    CHECK(engine_client_create(e, &c) == 0);
    llc_err err;
    gen_request r = greedy_req(prompt, 5, 12);
    llc_fault_fail_text(true);
    int64_t id = engine_submit(e, c, &r, &err);
    CHECK(id > 0);
    int tokens = 0, errors = 0;
    engine_finish finish = FINISH_NONE;
    char msg[256] = "";
    for (engine_event *ev; finish == FINISH_NONE && (ev = engine_client_wait(c, 20000));) {
        if (ev->kind == EV_TOKEN) tokens++;
        if (ev->kind == EV_ERROR) errors++, snprintf(msg, sizeof msg, "%s", ev->message);
        if (ev->kind == EV_DONE && ev->request_id == id) finish = ev->finish;
        engine_event_free(ev);
    }
    llc_fault_fail_text(false);
    CHECKF(finish == FINISH_ERROR, "finish %d", (int)finish);
    CHECKF(tokens == 0 && errors == 1 && strstr(msg, "out of memory"), "%d tokens, %d errors: %s", tokens, errors, msg);
    engine_client_free(c);
    CHECK(serves_next_request(e, prompt));
    engine_destroy(e);
}

/* engine_params.warmup: after engine_create, no block is used or cached and no
 * metric has moved; a prompt made of the warm-up's own tokens finds nothing in
 * the prefix cache; answers are those of an engine without it. */
static void test_warmup_leaves_nothing(void) {
    int32_t prompt[] = {1, 403, 407, 261, 378};
    engine_params p = {.n_blocks = 64, .block_size = 4, .kv_type = test_kv_type(), .warmup = true};
    engine *e = NULL, *plain = make_engine(64, 512);
    llc_err err;
    CHECKF(engine_create(g_model, g_tok, &p, &e, &err) == 0, "%s", err.msg);
    if (!e || !plain) return;
    engine_metrics m = {0};
    for (int i = 0; i < 2000 && m.kv_total == 0; i++) { /* published once the thread has looked */
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        engine_get_metrics(e, &m);
    }
    CHECKF(m.steps == 0 && m.computed_tokens == 0 && m.prompt_tokens == 0 && m.kv_used == 0 &&
               m.kv_cached == 0 && m.kv_free == 64 && m.ttft_count == 0,
           "after the warm-up: %lld steps, %d used, %d cached, %d free", (long long)m.steps, m.kv_used,
           m.kv_cached, m.kv_free);
    int32_t same[12]; /* the warm-up's tokens (engine.c warm_model), then more */
    for (int i = 0; i < 12; i++) same[i] = i == 0 ? 1 : (int32_t)((i * 37 + 1) % 512);
    gen_request reqs[2] = {greedy_req(prompt, 5, 16), greedy_req(same, 12, 8)};
    result warm[2], cold[2];
    run_all(e, reqs, 2, 1, warm);
    run_all(plain, reqs, 2, 1, cold);
    same_tokens(cold, warm, 2, "with a warm-up");
    CHECKF(warm[1].cached == 0, "%d prompt tokens came from the warm-up's blocks", warm[1].cached);
    wait_idle(e, &m);
    CHECK(m.generated_tokens == 24 && m.prompt_tokens == 17 && m.kv_used == 0);
    engine_destroy(e);
    engine_destroy(plain);
}

int main(void) {
    if (setup()) {
        printf("0 passed, 1 failed\n");
        return 1;
    }
    RUN(test_warmup_leaves_nothing);
    RUN(test_oom_in_step_ends_only_its_request);
    RUN(test_oom_with_one_request);
    RUN(test_done_survives_lost_events);
    RUN(test_lost_text_ends_with_an_error);
    teardown();
    return t_summary();
}
