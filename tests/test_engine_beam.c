/* test_engine_beam.c — beam search through the engine on stories260K: width 1
 * equals greedy; width 4 over two tokens returns the best of every possible
 * two-token continuation (exhaustive search); longer searches equal a driver
 * that recomputes every beam from scratch (no shared KV, no forks), also when
 * run beside other requests under a KV budget that forces preemption; cancel
 * returns every block. */
#include "tests/engine_beam_ref.h"

static void log_softmax(const float *x, int n, double *out) {
    double mx = x[0], sum = 0;
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++) sum += exp(x[i] - mx);
    for (int i = 0; i < n; i++) out[i] = x[i] - mx - log(sum);
}

static gen_request beam_req(const int32_t *prompt, int n_prompt, int width, int n, int max_tokens) {
    gen_request r = greedy_req(prompt, n_prompt, max_tokens);
    r.beam_width = width;
    r.n = n;
    return r;
}

static void test_width_one_is_greedy(void) {
    int32_t prompt[] = {1, 403, 407, 261, 378};
    engine *e = make_engine(64, 512);
    if (!e) return;
    gen_request g = greedy_req(prompt, 5, 40), b = beam_req(prompt, 5, 1, 1, 40);
    result greedy, beam;
    run_all(e, &g, 1, 1, &greedy);
    run_all(e, &b, 1, 1, &beam);
    CHECK(beam.done && beam.n_tokens == greedy.n_tokens && greedy.n_tokens > 0);
    CHECK(!memcmp(beam.tokens, greedy.tokens, sizeof(int32_t) * greedy.n_tokens));
    CHECK(!strcmp(beam.text, greedy.text) && beam.finish == greedy.finish);
    engine_destroy(e);
}

/* Width 4, two tokens: the answer must be the best length-normalized
 * continuation among all of them: [end], [t1, end], [t1, t2]. */
static void test_exhaustive_two_tokens(void) {
    const model_hparams *hp = model_hparams_of(g_model);
    int V = hp->n_vocab;
    static const int32_t prompts[3][6] = {{1, 403, 407, 261, 378, 432},
                                          {1, 365, 330, 289, 261, 308},
                                          {1, 450, 261, 500, 278, 301}};
    engine *e = make_engine(64, 512);
    float *lg = malloc((size_t)V * V * sizeof *lg);
    double *lp1 = malloc((size_t)V * sizeof *lp1), *lp2 = malloc((size_t)V * sizeof *lp2);
    int32_t(*seqs)[7] = malloc((size_t)V * sizeof *seqs);
    const int32_t **ptrs = malloc((size_t)V * sizeof *ptrs);
    int *lens = malloc((size_t)V * sizeof *lens);
    for (int p = 0; e && p < 3; p++) {
        const int32_t *pr = prompts[p];
        int len0 = 6;
        ptrs[0] = pr;
        lens[0] = len0;
        CHECK(logits_from_scratch(ptrs, lens, 1, lg) == 0);
        log_softmax(lg, V, lp1);
        for (int t = 0; t < V; t++) {
            memcpy(seqs[t], pr, sizeof(int32_t) * len0);
            seqs[t][len0] = t;
            ptrs[t] = seqs[t];
            lens[t] = len0 + 1;
        }
        CHECK(logits_from_scratch(ptrs, lens, V, lg) == 0);
        double best = -INFINITY;
        int best1 = -1, best2 = -1;
        for (int t1 = 0; t1 < V; t1++) {
            if (tok_is_eog(g_tok, t1)) {
                if (lp1[t1] > best) best = lp1[t1], best1 = t1, best2 = -1;
                continue;
            }
            log_softmax(lg + (size_t)t1 * V, V, lp2);
            for (int t2 = 0; t2 < V; t2++) {
                double s = (lp1[t1] + lp2[t2]) / 2;
                if (s > best) best = s, best1 = t1, best2 = t2;
            }
        }
        gen_request r = beam_req(pr, len0, 4, 1, 2);
        result res;
        run_all(e, &r, 1, 1, &res);
        /* the engine's answer, scored with the exhaustive tables */
        int32_t want[2];
        int n_want = 0;
        if (!tok_is_eog(g_tok, best1)) want[n_want++] = best1;
        if (best2 >= 0 && !tok_is_eog(g_tok, best2)) want[n_want++] = best2;
        CHECKF(res.n_tokens == n_want && !memcmp(res.tokens, want, sizeof(int32_t) * n_want),
               "prompt %d: beam gave %d tokens (%d %d), exhaustive best is %d %d (score %.5f)", p,
               res.n_tokens, res.tokens[0], res.tokens[1], best1, best2, best);
    }
    free(lg), free(lp1), free(lp2), free(seqs), free(ptrs), free(lens);
    engine_destroy(e);
}

/* Width 4, two results, longer horizon: equal to the from-scratch driver, alone
 * and among greedy requests with a KV budget that forces preemption. */
static void test_equals_unshared_driver(void) {
    static const int32_t prompts[3][8] = {{1, 403, 407, 261, 378, 432, 383, 286},
                                          {1, 365, 330, 289, 261, 308, 400, 290},
                                          {1, 450, 261, 500, 278, 301, 333, 270}};
    int32_t want[3][2][64];
    int n_want[3][2];
    for (int p = 0; p < 3; p++)
        for (int k = 0; k < 2; k++) n_want[p][k] = reference_beam(prompts[p], 8, 4, 12, k, want[p][k]);
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: each alone with room; pass 1: all at once beside greedy requests
         * with blocks for only part of them */
        engine *e = make_engine(pass == 0 ? 64 : 14, pass == 0 ? 512 : 32);
        if (!e) return;
        gen_request reqs[6];
        for (int p = 0; p < 3; p++) reqs[p] = beam_req(prompts[p], 8, 4, 2, 12);
        for (int p = 0; p < 3; p++) reqs[3 + p] = greedy_req(prompts[p], 8, 30);
        static result res[6][2];
        if (pass == 0)
            for (int p = 0; p < 3; p++) run_all(e, &reqs[p], 1, 2, &res[p][0]);
        else
            run_all(e, reqs, 6, 2, &res[0][0]);
        for (int p = 0; p < 3; p++)
            for (int k = 0; k < 2; k++) {
                result *r = &res[p][k];
                CHECKF(r->done && r->n_tokens == n_want[p][k] &&
                           !memcmp(r->tokens, want[p][k], sizeof(int32_t) * n_want[p][k]),
                       "pass %d prompt %d result %d: %d tokens vs %d from the reference", pass, p,
                       k, r->n_tokens, n_want[p][k]);
            }
        engine_metrics m;
        wait_idle(e, &m);
        CHECKF(m.kv_used == 0, "%d blocks still used", m.kv_used);
        if (pass == 1) CHECKF(m.preemptions > 0, "the small cache did not preempt");
        engine_destroy(e);
    }
}

static void test_cancel_and_bad_width(void) {
    int32_t prompt[] = {1, 403, 407, 261, 378};
    engine *e = make_engine(64, 512);
    if (!e) return;
    engine_client *c;
    engine_client_create(e, &c);
    llc_err err;
    gen_request r = beam_req(prompt, 5, 8, 2, 200);
    int64_t id = engine_submit(e, c, &r, &err);
    CHECK(id > 0);
    for (int i = 0; i < 1000; i++) { /* let the search get going */
        engine_metrics m;
        engine_get_metrics(e, &m);
        if (m.running >= 4) break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    engine_cancel(e, id);
    int done = 0, tokens = 0;
    while (done < 2) {
        engine_event *ev = engine_client_wait(c, 20000);
        if (!ev) break;
        if (ev->kind == EV_DONE) {
            done++;
            CHECK(ev->finish == FINISH_CANCELLED);
        }
        if (ev->kind == EV_TOKEN) tokens++;
        engine_event_free(ev);
    }
    CHECK(done == 2 && tokens == 0);
    engine_metrics m;
    wait_idle(e, &m);
    CHECK(m.kv_used == 0 && m.running == 0);
    r = beam_req(prompt, 5, 2, 3, 10);
    CHECK(engine_submit(e, c, &r, &err) < 0 && strstr(err.msg, "beam width"));
    r = beam_req(prompt, 5, BEAM_MAX_WIDTH + 1, 1, 10);
    CHECK(engine_submit(e, c, &r, &err) < 0 && strstr(err.msg, "beam width"));
    engine_client_free(c);
    engine_destroy(e);
}

int main(void) {
    if (setup()) {
        printf("0 passed, 1 failed\n");
        return 1;
    }
    RUN(test_width_one_is_greedy);
    RUN(test_exhaustive_two_tokens);
    RUN(test_equals_unshared_driver);
    RUN(test_cancel_and_bad_width);
    teardown();
    return t_summary();
}
