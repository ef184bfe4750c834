/* test_engine_spec.c — speculative decoding through the engine: stories260K as
 * the model, llama2xs (same 512-token vocabulary) as the draft. Greedy output is
 * token for token the output without a draft, alone and 16 at once, with prefix
 * cache hits and under preemption; n-gram drafting too. With sampling, the
 * distribution of the first tokens over many seeds agrees with plain sampling
 * (chi-square; not in the reruns with f16 / q8_0 KV caches). A draft with another
 * vocabulary is refused. */
#include <unistd.h>

#include "engine/model/modelgen.h"
#include "tests/engine_util.h"

static gguf *g_dfile;
static model *g_draft;

static engine *make_spec_engine(int n_blocks, int step_tokens, model *draft, bool ngram) {
    engine_params p = {.n_blocks = n_blocks, .block_size = 16, .max_step_tokens = step_tokens,
                       .draft = draft, .ngram = ngram, .draft_max = 6, .spec_max_seqs = 16,
                       .kv_type = test_kv_type()};
    engine *e = NULL;
    llc_err err;
    CHECKF(engine_create(g_model, g_tok, &p, &e, &err) == 0, "%s", err.msg);
    return e;
}

static void make_prompt_set(int32_t prompts[16][48], int *lens, bool shared) {
    uint64_t rng = 4242;
    for (int i = 0; i < 16; i++) {
        lens[i] = 20 + i % 9;
        prompts[i][0] = 1;
        for (int j = 1; j < lens[i]; j++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int32_t tok = (int32_t)(3 + (rng >> 33) % 500);
            prompts[i][j] = shared && i > 0 && j < 18 ? prompts[0][j] : tok;
        }
    }
}

/* Greedy: 16 prompts alone without a draft == with the draft alone == with the
 * draft 16 at once (shared prefixes) == with the draft under preemption. */
static void test_greedy_identical(void) {
    static int32_t prompts[16][48];
    int lens[16];
    make_prompt_set(prompts, lens, true);
    gen_request reqs[16];
    for (int i = 0; i < 16; i++) reqs[i] = greedy_req(prompts[i], lens[i], 40);
    static result plain[16], alone[16], together[16], tight[16], ngram[16];
    engine *e = make_engine(256, 512);
    if (!e) return;
    for (int i = 0; i < 16; i++) run_all(e, &reqs[i], 1, 1, &plain[i]);
    engine_destroy(e);

    e = make_spec_engine(256, 512, g_draft, false);
    if (!e) return;
    for (int i = 0; i < 16; i++) run_all(e, &reqs[i], 1, 1, &alone[i]);
    same_tokens(plain, alone, 16, "draft, alone");
    engine_metrics m;
    wait_idle(e, &m);
    CHECKF(m.spec_verifies > 0 && m.spec_drafted > 0, "no speculation happened");
    CHECKF(m.spec_accepted > 0 && m.spec_accepted <= m.spec_drafted, "accepted %lld of %lld",
           (long long)m.spec_accepted, (long long)m.spec_drafted);
    run_all(e, reqs, 16, 1, together);
    same_tokens(plain, together, 16, "draft, 16 at once");
    wait_idle(e, &m);
    CHECK(m.kv_used == 0 && m.cached_tokens > 0);
    engine_destroy(e);

    e = make_spec_engine(14, 64, g_draft, false); /* room for ~3 sequences */
    if (!e) return;
    run_all(e, reqs, 16, 1, tight);
    same_tokens(plain, tight, 16, "draft, preempted");
    wait_idle(e, &m);
    CHECK(m.preemptions > 0 && m.kv_used == 0);
    engine_destroy(e);

    e = make_spec_engine(256, 512, NULL, true);
    if (!e) return;
    run_all(e, reqs, 16, 1, ngram);
    same_tokens(plain, ngram, 16, "n-gram drafts");
    wait_idle(e, &m);
    CHECKF(m.spec_drafted > 0, "the n-gram lookup proposed nothing");
    engine_destroy(e);
}

/* Sampling: the second token's distribution over many seeds, with and without
 * the draft, compared by a chi-square two-sample test. */
static void test_sampling_distribution(void) {
    enum { RUNS = 1500 };
    int32_t prompt[] = {1, 403, 407, 261, 378, 432, 383};
    const model_hparams *hp = model_hparams_of(g_model);
    int V = hp->n_vocab;
    int *count[2];
    for (int pass = 0; pass < 2; pass++) {
        count[pass] = calloc((size_t)V, sizeof(int));
        engine *e = pass ? make_spec_engine(64, 512, g_draft, false) : make_engine(64, 512);
        if (!e) return;
        engine_client *c;
        engine_client_create(e, &c);
        llc_err err;
        for (int base = 0; base < RUNS; base += 16) {
            int64_t ids[16];
            int got[16] = {0};
            int n = RUNS - base < 16 ? RUNS - base : 16;
            for (int i = 0; i < n; i++) {
                gen_request r = greedy_req(prompt, 7, 3);
                r.sampling.temperature = 1.6f;
                r.sampling.top_k = 0;
                r.sampling.top_p = 1.0f;
                r.sampling.min_p = 0;
                r.sampling.seed = 100000u * (unsigned)pass + (unsigned)(base + i);
                ids[i] = engine_submit(e, c, &r, &err);
            }
            for (int done = 0; done < n;) {
                engine_event *ev = engine_client_wait(c, 20000);
                if (!ev) break;
                for (int i = 0; i < n; i++)
                    if (ids[i] == ev->request_id) {
                        if (ev->kind == EV_TOKEN && ++got[i] == 2) count[pass][ev->token]++;
                        if (ev->kind != EV_TOKEN) done++;
                    }
                engine_event_free(ev);
            }
        }
        engine_metrics m;
        wait_idle(e, &m);
        if (pass) CHECKF(m.spec_verifies > 0, "sampling never speculated");
        engine_client_free(c);
        engine_destroy(e);
    }
    /* pool rare tokens; chi-square with (bins - 1) degrees of freedom */
    double chi = 0;
    int bins = 0, rare0 = 0, rare1 = 0, n0 = 0, n1 = 0;
    for (int t = 0; t < V; t++) n0 += count[0][t], n1 += count[1][t];
    for (int t = 0; t < V; t++) {
        if (count[0][t] + count[1][t] < 10) {
            rare0 += count[0][t], rare1 += count[1][t];
            continue;
        }
        double a = count[0][t], b = count[1][t], tot = a + b;
        double ea = tot * n0 / (n0 + n1), eb = tot * n1 / (n0 + n1);
        chi += (a - ea) * (a - ea) / ea + (b - eb) * (b - eb) / eb;
        bins++;
    }
    if (rare0 + rare1 > 0) {
        double tot = rare0 + rare1, ea = tot * n0 / (n0 + n1), eb = tot * n1 / (n0 + n1);
        chi += (rare0 - ea) * (rare0 - ea) / ea + (rare1 - eb) * (rare1 - eb) / eb;
        bins++;
    }
    int df = bins - 1;
    /* the 0.1% critical value, by the Wilson–Hilferty approximation */
    double z = 3.09, crit = df * pow(1 - 2.0 / (9 * df) + z * sqrt(2.0 / (9 * df)), 3);
    CHECKF(n0 == RUNS && n1 == RUNS, "%d and %d second tokens", n0, n1);
    CHECKF(bins >= 5, "only %d bins: the test says nothing", bins);
    CHECKF(chi < crit, "chi-square %.1f with %d degrees of freedom (0.1%% critical value %.1f)", chi, df, crit);
    fprintf(stderr, "  second-token distribution: chi-square %.1f, %d dof, critical %.1f\n", chi, df, crit);
    free(count[0]);
    free(count[1]);
}

static void test_vocab_mismatch_refused(void) {
    char vocab[512], path[] = "/tmp/llc_spec_draft_XXXXXX";
    snprintf(vocab, sizeof vocab, "%s/vocab/ggml-vocab-gpt-2.gguf", t_shared());
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    modelgen_params mp = {0};
    modelgen_preset("tiny-llama", &mp);
    mp.wtype = "f32";
    mp.vocab_path = vocab;
    mp.seed = 3;
    llc_err err;
    gguf *f = NULL;
    model *other = NULL;
    CHECKF(modelgen_write(&mp, path, &err) == 0 && gguf_open(path, &f, &err) == 0 &&
               model_load(f, g_be, &other, &err) == 0, "%s", err.msg);
    engine_params p = {.n_blocks = 64, .block_size = 16, .draft = other};
    engine *e = NULL;
    CHECK(other && engine_create(g_model, g_tok, &p, &e, &err) < 0 && e == NULL);
    CHECKF(strstr(err.msg, "vocabulary") != NULL, "%s", err.msg);
    /* the model alone still works */
    e = make_engine(64, 512);
    int32_t prompt[] = {1, 403, 407};
    gen_request r = greedy_req(prompt, 3, 5);
    result res;
    if (e) run_all(e, &r, 1, 1, &res);
    CHECK(e && res.done && res.n_tokens == 5);
    engine_destroy(e);
    model_free(other);
    gguf_free(f);
    unlink(path);
}

int main(void) {
    if (setup()) {
        printf("0 passed, 1 failed\n");
        return 1;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/models/llama2xs.gguf", t_shared());
    llc_err err;
    if (gguf_open(path, &g_dfile, &err) || model_load(g_dfile, g_be, &g_draft, &err)) {
        fprintf(stderr, "draft: %s\n", err.msg);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    RUN(test_greedy_identical);
    /* (the rerun with another KV type checks the cache paths; the distribution
     * test is about the sampling math and the slowest here) */
    if (!test_kv_type()) RUN(test_sampling_distribution);
    RUN(test_vocab_mismatch_refused);
    model_free(g_draft);
    gguf_free(g_dfile);
    teardown();
    return t_summary();
}
