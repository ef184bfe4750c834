/* test_engine_grammar.c — constrained decoding through the engine with
 * stories260K (which writes children's stories, never JSON, on its own): with a
 * JSON schema's grammar every sample is JSON valid against the schema, over 20
 * seeds, with n > 1 parallel samples, and with speculative decoding (llama2xs
 * as the draft; greedy output is the same as without it). max_tokens still cuts
 * a sample short (finish length); a grammar that must end stops the sample;
 * bad grammars and beam search are refused at submit. */
#include <cjson/cJSON.h>

#include "engine/grammar/json_schema.h"
#include "tests/engine_util.h"

static gguf *g_dfile;
static model *g_draft;

static const char *k_schema =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":12},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},"
    "\"pet\":{\"enum\":[\"cat\",\"dog\",\"fish\"]},"
    "\"happy\":{\"type\":\"boolean\"},"
    "\"scores\":{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":-5,\"maximum\":5},\"maxItems\":3}},"
    "\"required\":[\"name\",\"age\",\"pet\",\"happy\"],\"additionalProperties\":false}";

static char *g_gbnf;

/* Whether text is JSON valid against k_schema; why not in *why. */
static bool valid_doc(const char *text, const char **why) {
    cJSON *j = cJSON_Parse(text);
    *why = "not JSON";
    if (!j) return false;
    bool ok = false;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    const cJSON *age = cJSON_GetObjectItemCaseSensitive(j, "age");
    const cJSON *pet = cJSON_GetObjectItemCaseSensitive(j, "pet");
    const cJSON *happy = cJSON_GetObjectItemCaseSensitive(j, "happy");
    const cJSON *scores = cJSON_GetObjectItemCaseSensitive(j, "scores");
    int n_keys = cJSON_GetArraySize(j);
    if (!cJSON_IsObject(j)) *why = "not an object";
    else if (!cJSON_IsString(name)) *why = "name";
    else if (!cJSON_IsNumber(age) || age->valuedouble != (int)age->valuedouble || age->valueint < 0 || age->valueint > 120)
        *why = "age";
    else if (!cJSON_IsString(pet) || (strcmp(pet->valuestring, "cat") && strcmp(pet->valuestring, "dog") &&
                                      strcmp(pet->valuestring, "fish")))
        *why = "pet";
    else if (!cJSON_IsBool(happy)) *why = "happy";
    else if (scores && (!cJSON_IsArray(scores) || cJSON_GetArraySize(scores) > 3)) *why = "scores";
    else if (n_keys != 4 + (scores != NULL)) *why = "extra keys";
    else {
        ok = true;
        for (const cJSON *s = scores ? scores->child : NULL; s; s = s->next)
            if (!cJSON_IsNumber(s) || s->valueint < -5 || s->valueint > 5) ok = false, *why = "a score";
        /* the string's length in characters */
        int chars = 0;
        for (const char *p = name->valuestring; *p; p++) chars += ((unsigned char)*p & 0xC0) != 0x80;
        if (chars < 1 || chars > 12) ok = false, *why = "name length";
    }
    cJSON_Delete(j);
    return ok;
}

static int32_t g_prompt[64];
static int g_n_prompt;

static gen_request json_req(uint64_t seed, int n, int max_tokens) {
    gen_request r = {.prompt = g_prompt, .n_prompt = g_n_prompt, .n = n, .max_tokens = max_tokens};
    r.sampling = sampler_params_default();
    r.sampling.seed = seed;
    r.sampling.temperature = 1.0f;
    r.grammar = g_gbnf;
    return r;
}

static void check_valid(const result *r, const char *what, int i) {
    const char *why = "";
    CHECKF(r->done && r->finish == FINISH_STOP, "%s %d: finish %d", what, i, r->finish);
    CHECKF(valid_doc(r->text, &why), "%s %d: %s: %s", what, i, why, r->text);
}

static void test_schema_over_seeds(void) {
    engine *e = make_engine(128, 256);
    if (!e) return;
    gen_request reqs[20];
    static result res[20];
    for (int i = 0; i < 20; i++) reqs[i] = json_req(1000 + (uint64_t)i * 7, 1, 300);
    run_all(e, reqs, 20, 1, res); /* all at once: per-sequence states in one batch */
    int distinct = 0;
    for (int i = 0; i < 20; i++) {
        check_valid(&res[i], "seed", i);
        distinct += i > 0 && strcmp(res[i].text, res[0].text) != 0;
    }
    CHECKF(distinct > 10, "only %d outputs differ from the first", distinct);
    /* the samples above follow the chat convention (the first token's
       SentencePiece space is not text); greedy continuing the prompt keeps it */
    gen_request g = greedy_req(g_prompt, g_n_prompt, 300);
    g.grammar = g_gbnf;
    g.continues_prompt = true;
    result one;
    run_all(e, &g, 1, 1, &one);
    check_valid(&one, "greedy continuing the prompt", 0);
    engine_destroy(e);
}

static void test_parallel_samples(void) {
    engine *e = make_engine(128, 256);
    if (!e) return;
    gen_request r = json_req(77, 6, 300);
    static result res[6];
    run_all(e, &r, 1, 6, res);
    int distinct = 0;
    for (int i = 0; i < 6; i++) {
        check_valid(&res[i], "sample", i);
        distinct += i > 0 && strcmp(res[i].text, res[0].text) != 0;
    }
    CHECKF(distinct >= 3, "the samples are too alike (%d differ)", distinct);
    engine_destroy(e);
}

static void test_speculative(void) {
    engine_params p = {.n_blocks = 128, .block_size = 16, .max_step_tokens = 256, .draft = g_draft,
                       .draft_max = 6, .spec_max_seqs = 16};
    engine *spec = NULL, *plain = make_engine(128, 256);
    llc_err err;
    CHECKF(engine_create(g_model, g_tok, &p, &spec, &err) == 0, "%s", err.msg);
    if (!spec || !plain) {
        engine_destroy(spec), engine_destroy(plain);
        return;
    }
    /* greedy: the draft changes nothing */
    gen_request g = json_req(1, 1, 300);
    g.sampling.temperature = 0;
    result a, b;
    run_all(plain, &g, 1, 1, &a);
    run_all(spec, &g, 1, 1, &b);
    check_valid(&b, "greedy with a draft", 0);
    CHECKF(!strcmp(a.text, b.text), "greedy differs with a draft:\n%s\n%s", a.text, b.text);
    /* sampling: still valid */
    gen_request reqs[8];
    static result res[8];
    for (int i = 0; i < 8; i++) reqs[i] = json_req(500 + (uint64_t)i, 1, 300);
    run_all(spec, reqs, 8, 1, res);
    for (int i = 0; i < 8; i++) check_valid(&res[i], "sampled with a draft", i);
    engine_metrics m;
    wait_idle(spec, &m);
    CHECKF(m.spec_verifies > 0, "no speculation happened");
    engine_destroy(spec);
    engine_destroy(plain);
}

static void test_limits_and_refusals(void) {
    engine *e = make_engine(64, 256);
    if (!e) return;
    /* max_tokens still ends the sample: the JSON is cut short */
    gen_request r = json_req(3, 1, 4);
    result res;
    run_all(e, &r, 1, 1, &res);
    CHECK(res.done && res.finish == FINISH_LENGTH && res.n_tokens == 4);
    CHECK(res.text[0] == '{');
    /* a grammar with nothing after its end stops the sample there */
    r = json_req(5, 1, 50);
    r.grammar = "root ::= (\"yes\" | \"no\") \"!\"\n";
    run_all(e, &r, 1, 1, &res);
    CHECKF(res.finish == FINISH_STOP && (!strcmp(res.text, "yes!") || !strcmp(res.text, "no!")), "'%s'", res.text);
    /* refused at submit */
    engine_client *c;
    CHECK(engine_client_create(e, &c) == 0);
    llc_err err = {{0}};
    r.grammar = "root ::= \"a\" | [b-\n";
    CHECK(engine_submit(e, c, &r, &err) < 0);
    CHECKF(strstr(err.msg, "line 1, column"), "%s", err.msg);
    r.grammar = "root ::= \"a\"";
    r.beam_width = 2;
    CHECK(engine_submit(e, c, &r, &err) < 0);
    CHECKF(strstr(err.msg, "beam search"), "%s", err.msg);
    engine_client_free(c);
    engine_destroy(e);
}

int main(void) {
    if (setup()) {
        printf("0 passed, 1 failed\n");
        return 1;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/models/llama2xs.gguf", t_shared());
    llc_err err;
    if (gguf_open(path, &g_dfile, &err) || model_load(g_dfile, g_be, &g_draft, &err) ||
        json_schema_text_to_gbnf(k_schema, &g_gbnf, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    const char *text = "Once upon a time, there was a little girl. Here is her card:";
    g_n_prompt = tok_encode(g_tok, text, strlen(text), true, false, g_prompt, 64);
    RUN(test_schema_over_seeds);
    RUN(test_parallel_samples);
    RUN(test_speculative);
    RUN(test_limits_and_refusals);
    free(g_gbnf);
    model_free(g_draft);
    gguf_free(g_dfile);
    teardown();
    return t_summary();
}
