/* test_engine_hybrid.c — the engine on hybrid models (recurrent layers beside
 * attention: ../shared/models/arch/{lfm2,qwen35,qwen35moe,granitehybrid}.gguf), whose sequences each carry a
 * recurrent state in a slot beside the KV cache. Continuous batching with
 * chunked prompts gives each sequence the tokens it gets alone, also under
 * preemption (a preempted sequence computes again from position 0); forked
 * samples (n = 3) equal separate runs with their seeds; beam search equals a
 * driver that recomputes every beam from scratch, alone and among greedy
 * requests under preemption (which resumes from kept states); a second chat
 * turn starts from the state kept at the first turn's last block boundary and
 * equals a fresh run of the whole text; a cancelled request gives its slots
 * and blocks back; greedy speculative decoding (n-grams, a draft model
 * hybrid or plain, the model as its own draft) equals plain decoding, with
 * rejected proposals and 4 requests batched. */
#include "tests/engine_beam_ref.h"

static const char *const g_hybrids[] = {"lfm2", "qwen35", "qwen35moe", "granitehybrid"};

static int load_hybrid(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/arch/%s.gguf", t_shared(), name);
    llc_err err;
    if (gguf_open(path, &g_file, &err) || test_backend_create(&g_be, &err) ||
        model_load(g_file, g_be, &g_model, &err) || tok_load(g_file, &g_tok, &err)) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        return -1;
    }
    CHECK(model_hparams_of(g_model)->n_recurrent > 0);
    return 0;
}

static void make_prompts(int32_t prompts[][64], int *lens, int n, uint64_t seed) {
    uint64_t rng = seed;
    for (int i = 0; i < n; i++) {
        lens[i] = 30 + (i * 7) % 27;
        for (int j = 0; j < lens[i]; j++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            prompts[i][j] = (int32_t)(3 + (rng >> 33) % 1500);
        }
    }
}

/* n_req greedy requests each alone in a roomy engine, then all at once through
 * n_blocks blocks and steps of step_tokens rows (prompts in chunks). */
static void check_same_as_alone(const char *name, int n_req, int n_blocks, int step_tokens, bool expect_preempt) {
    static int32_t prompts[16][64];
    int lens[16];
    make_prompts(prompts, lens, n_req, 7);
    gen_request reqs[16];
    for (int i = 0; i < n_req; i++) reqs[i] = greedy_req(prompts[i], lens[i], 24);
    static result alone[16], together[16];
    engine *e = make_engine(256, 512);
    if (!e) return;
    for (int i = 0; i < n_req; i++) run_all(e, &reqs[i], 1, 1, &alone[i]);
    engine_destroy(e);
    if (!(e = make_engine(n_blocks, step_tokens))) return;
    run_all(e, reqs, n_req, 1, together);
    char what[64];
    snprintf(what, sizeof what, "%s, %d blocks, steps of %d", name, n_blocks, step_tokens);
    same_tokens(alone, together, n_req, what);
    engine_metrics m;
    wait_idle(e, &m);
    CHECKF(m.kv_used == 0, "%s: %d blocks still used", name, m.kv_used);
    if (expect_preempt) CHECKF(m.preemptions > 0, "%s: no preemption with %d blocks", name, n_blocks);
    for (int i = 0; i < n_req; i++) CHECK(together[i].n_tokens > 0 && together[i].cached == 0);
    engine_destroy(e);
}

/* n = 3 samples forked off one prompt (each takes a copy of its state) equal
 * three separate requests with seeds s, s+1, s+2. */
static void check_forked_samples(const char *name) {
    int32_t prompt[40];
    for (int j = 0; j < 40; j++) prompt[j] = (int32_t)(5 + (j * 37) % 1400);
    engine *e = make_engine(64, 16); /* the prompt over three steps */
    if (!e) return;
    gen_request r = greedy_req(prompt, 40, 20);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 77;
    r.n = 3;
    static result par[3], sep[3];
    run_all(e, &r, 1, 3, par);
    for (int i = 0; i < 3; i++) {
        gen_request one = r;
        one.n = 1;
        one.sampling.seed = 77 + (uint64_t)i;
        run_all(e, &one, 1, 1, &sep[i]);
        CHECKF(par[i].done && par[i].n_tokens == sep[i].n_tokens && par[i].n_tokens > 0 &&
                   !memcmp(par[i].tokens, sep[i].tokens, sizeof(int32_t) * sep[i].n_tokens),
               "%s: sample %d differs from a separate run with seed %d", name, i, 77 + i);
    }
    engine_destroy(e);
}

/* Beam search (width 3, 2 results): the from-scratch driver's answer, alone and
 * beside greedy requests with blocks for only part of them. */
static void check_beam(const char *name) {
    static int32_t prompts[3][64];
    int lens[3];
    make_prompts(prompts, lens, 3, 11);
    int32_t want[3][2][64];
    int n_want[3][2];
    for (int p = 0; p < 3; p++)
        for (int k = 0; k < 2; k++) n_want[p][k] = reference_beam(prompts[p], lens[p], 3, 10, k, want[p][k]);
    for (int pass = 0; pass < 2; pass++) {
        engine *e = make_engine(pass == 0 ? 64 : 16, pass == 0 ? 512 : 24);
        if (!e) return;
        gen_request reqs[6];
        for (int p = 0; p < 3; p++) {
            reqs[p] = greedy_req(prompts[p], lens[p], 10);
            reqs[p].beam_width = 3;
            reqs[p].n = 2;
            reqs[3 + p] = greedy_req(prompts[p], lens[p], 30);
        }
        static result res[6][2];
        if (pass == 0)
            for (int p = 0; p < 3; p++) run_all(e, &reqs[p], 1, 2, &res[p][0]);
        else
            run_all(e, reqs, 6, 2, &res[0][0]);
        for (int p = 0; p < 3; p++)
            for (int k = 0; k < 2; k++) {
                const result *r = &res[p][k];
                CHECKF(n_want[p][k] > 0 && r->done && r->n_tokens == n_want[p][k] &&
                           !memcmp(r->tokens, want[p][k], sizeof(int32_t) * n_want[p][k]),
                       "%s: pass %d prompt %d result %d: %d tokens vs %d from the reference", name, pass, p, k,
                       r->n_tokens, n_want[p][k]);
            }
        engine_metrics m;
        wait_idle(e, &m);
        CHECKF(m.kv_used == 0, "%s: %d blocks still used after beams", name, m.kv_used);
        engine_destroy(e);
    }
}

/* A second turn (the first turn's prompt and answer, then new text) gives the
 * tokens a fresh engine gives for the whole text. */
static void check_second_turn(const char *name) {
    static int32_t prompts[2][64];
    int lens[2];
    make_prompts(prompts, lens, 2, 23);
    engine *e = make_engine(64, 512);
    if (!e) return;
    gen_request r1 = greedy_req(prompts[0], lens[0], 12);
    static result first, second, fresh;
    run_all(e, &r1, 1, 1, &first);
    int32_t turn2[128];
    int n = 0;
    for (int i = 0; i < lens[0]; i++) turn2[n++] = prompts[0][i];
    for (int i = 0; i < first.n_tokens; i++) turn2[n++] = first.tokens[i];
    for (int i = 0; i < 20; i++) turn2[n++] = prompts[1][i];
    gen_request r2 = greedy_req(turn2, n, 12);
    run_all(e, &r2, 1, 1, &second);
    engine_destroy(e);
    if (!(e = make_engine(64, 512))) return;
    run_all(e, &r2, 1, 1, &fresh);
    same_tokens(&fresh, &second, 1, name);
    /* the second turn starts from the state kept at the deepest block boundary
     * of the first turn's text (its prompt ends at a boundary, then its answer
     * crosses one): only the rest is computed */
    const int bs = 16, first_len = lens[0] + first.n_tokens - 1; /* (the last answer token was not computed) */
    CHECKF(second.cached == first_len / bs * bs && second.cached > 0, "%s: second turn took %d tokens from the cache "
           "(first turn: %d computed)", name, second.cached, first_len);
    CHECK(fresh.cached == 0);
    printf("  %s: second turn of %d tokens: %d from the cache, %d computed\n", name, n, second.cached, n - second.cached);
    engine_destroy(e);
}

/* A request cancelled mid-answer (n = 2, so two slots) gives its slots and
 * blocks back; a request after it gets the tokens it gets alone. */
static void check_abort(const char *name) {
    static int32_t prompts[2][64];
    int lens[2];
    make_prompts(prompts, lens, 2, 31);
    engine *e = make_engine(64, 512);
    if (!e) return;
    static result alone, after;
    gen_request r2 = greedy_req(prompts[1], lens[1], 16);
    run_all(e, &r2, 1, 1, &alone);
    engine_destroy(e);
    if (!(e = make_engine(64, 512))) return;
    engine_client *c;
    CHECK(engine_client_create(e, &c) == 0);
    llc_err err;
    gen_request r = greedy_req(prompts[0], lens[0], 200);
    r.n = 2;
    r.sampling.temperature = 1.0f;
    int64_t id = engine_submit(e, c, &r, &err);
    CHECK(id > 0);
    int tokens = 0, done = 0;
    while (done < 2) {
        engine_event *ev = engine_client_wait(c, 20000);
        if (!ev) break;
        if (ev->kind == EV_TOKEN && ++tokens == 5) engine_cancel(e, id);
        if (ev->kind == EV_DONE) {
            done++;
            CHECK(ev->finish == FINISH_CANCELLED);
        }
        engine_event_free(ev);
    }
    engine_client_free(c);
    engine_metrics m;
    wait_idle(e, &m);
    CHECKF(m.kv_used == 0 && m.running == 0, "%s: %d blocks still used after a cancel", name, m.kv_used);
    run_all(e, &r2, 1, 1, &after);
    same_tokens(&alone, &after, 1, name);
    engine_destroy(e);
}

/* Speculative decoding: greedy answers of 4 requests batched, with proposals
 * from n-grams, from another model (hybrid or plain; it rarely agrees) and
 * from the model itself (it always agrees: its state must come back exactly
 * after the proposals that steps of 10 rows drop), equal plain decoding token
 * for token. A rejection puts back the state kept before the verify step, so
 * a rejected token leaking into the recurrent state changes the answer. */
static void check_spec(const char *name, const char *draft_name) {
    static int32_t prompts[4][64];
    int lens[4];
    make_prompts(prompts, lens, 4, 41);
    for (int i = 0; i < 4; i++) { /* short, ending in a repeated stretch (n-grams propose from it) */
        lens[i] = 18 + 2 * i;
        for (int j = 0; j < 12; j++) prompts[i][lens[i] - 12 + j] = prompts[i][j % 6];
    }
    gen_request reqs[4];
    for (int i = 0; i < 4; i++) reqs[i] = greedy_req(prompts[i], lens[i], 28);
    gen_request greqs[4]; /* under a grammar that refuses some of the model's own choices */
    for (int i = 0; i < 4; i++) greqs[i] = reqs[i], greqs[i].grammar = "root ::= [^eE]*\n";
    static result plain[4], gplain[4], spec[4];
    engine *e = make_engine(256, 512);
    if (!e) return;
    run_all(e, reqs, 4, 1, plain);
    run_all(e, greqs, 4, 1, gplain);
    engine_destroy(e);
    char path[512];
    snprintf(path, sizeof path, "%s/models/arch/%s.gguf", t_shared(), draft_name);
    gguf *df = NULL;
    model *other = NULL;
    llc_err err;
    CHECKF(gguf_open(path, &df, &err) == 0 && model_load(df, g_be, &other, &err) == 0, "%s", err.msg);
    if (!other) {
        gguf_free(df);
        return;
    }
    for (int pass = 0; pass < 4; pass++) {
        engine_params p = {.n_blocks = 256, .block_size = 16, .max_step_tokens = pass == 2 ? 16 : 512,
                           .kv_type = test_kv_type(), .ngram = pass == 0, .draft_max = 6, .draft_min = 3,
                           .draft_p_min = 1e-6f, .spec_max_seqs = 4};
        p.draft = pass == 1 ? other : pass >= 2 ? g_model : NULL;
        e = NULL;
        CHECKF(engine_create(g_model, g_tok, &p, &e, &err) == 0, "%s", err.msg);
        if (!e) break;
        run_all(e, pass == 3 ? greqs : reqs, 4, 1, spec);
        static const char *const what[4] = {"n-grams", "another model", "itself", "itself, under a grammar"};
        char msg[128];
        snprintf(msg, sizeof msg, "%s, speculating with %s", name, what[pass]);
        same_tokens(pass == 3 ? gplain : plain, spec, 4, msg);
        engine_metrics m;
        wait_idle(e, &m);
        printf("  %s: %lld drafted, %lld accepted in %lld checks\n", msg, (long long)m.spec_drafted,
               (long long)m.spec_accepted, (long long)m.spec_verifies);
        CHECKF(m.kv_used == 0, "%s: %d blocks still used", msg, m.kv_used);
        if (pass < 2) CHECKF(m.spec_drafted > m.spec_accepted, "%s: no proposal was rejected", msg);
        else if (pass == 3) /* some accepted before a rejection (computed again after it); the draft
                               proposes the model's own choice wherever the grammar allows it, which
                               here is about 40% of them: a draft whose state kept the rejected
                               tokens got 12 of 75 and 15 of 66 accepted when tried */
            CHECKF(m.spec_accepted < m.spec_drafted && m.spec_accepted * 4 > m.spec_drafted,
                   "%s: %lld of %lld accepted", msg, (long long)m.spec_accepted, (long long)m.spec_drafted);
        else CHECKF(m.spec_drafted > 0 && m.spec_accepted == m.spec_drafted, "%s: %lld of %lld accepted", msg,
                    (long long)m.spec_accepted, (long long)m.spec_drafted);
        engine_destroy(e);
    }
    model_free(other);
    gguf_free(df);
}

static void test_hybrids(void) {
    for (size_t i = 0; i < LLC_ARRAY_LEN(g_hybrids); i++) {
        const char *name = g_hybrids[i];
        if (load_hybrid(name)) {
            CHECKF(0, "cannot load %s", name);
            teardown();
            continue;
        }
        check_same_as_alone(name, 8, 256, 32, false);
        check_same_as_alone(name, 8, 14, 48, true);
        check_forked_samples(name);
        check_beam(name);
        check_second_turn(name);
        check_abort(name);
        if (!strcmp(name, "qwen35")) check_spec(name, "qwen35moe");  /* a hybrid draft */
        if (!strcmp(name, "lfm2")) check_spec(name, "smollm3");      /* a plain draft */
        teardown();
        g_tok = NULL, g_model = NULL, g_be = NULL, g_file = NULL;
    }
}

int main(void) {
    (void)setup; /* (engine_util.h's: stories260K, not used here) */
    RUN(test_hybrids);
    return t_summary();
}
