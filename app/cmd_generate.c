/* cmd_generate.c — `llmchat generate`: one prompt, one continuation streamed to
 * stdout as it is made, through the shared engine like every other request.
 * Greedy unless --temp is given, so the same command prints the same text; --json
 * adds one object on the last line with the ids (the end token included), the
 * text, the seed, timings and (with --logprobs) the top-N log-probabilities of
 * each position. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "app/clock.h"
#include "app/commands.h"
#include "app/fileio.h"
#include "app/llm.h"
#include "kernels/sbuf.h"
#include "engine/template/chat.h"
#include "engine/sched/engine.h"
#include "engine/sched/sampler.h"

static const char *g_prompt, *g_template, *g_template_file, *g_system, *g_grammar_file, *g_json_schema;
static char *g_grammar; /* GBNF from --grammar-file / --json-schema */
static bool g_chat;
static int g_n = 128, g_logprobs;
static bool g_json, g_special;
static sampler_params g_sp;
static int64_t g_seed = (int64_t)SAMPLER_SEED_DEFAULT;

static const cli_opt g_opts[] = {
    {"prompt", 'p', CLI_STR, &g_prompt, "TEXT", "the prompt (required)", 0, 0, NULL},
    {"n-predict", 'n', CLI_INT, &g_n, "N", "tokens to generate at most (default 128)", 0, 1 << 24, NULL},
    {"temp", 0, CLI_FLOAT, &g_sp.temperature, "T", "temperature; 0 = greedy (default 0)", 0, 100, NULL},
    {"top-k", 0, CLI_INT, &g_sp.top_k, "K", "keep the K most likely tokens (default 40, 0 = off)", 0, 1 << 24, NULL},
    {"top-p", 0, CLI_FLOAT, &g_sp.top_p, "P", "nucleus sampling (default 0.95, 1 = off)", 1e-6, 1, NULL},
    {"min-p", 0, CLI_FLOAT, &g_sp.min_p, "P", "drop tokens below P x the best (default 0.05)", 0, 1, NULL},
    {"repeat-penalty", 0, CLI_FLOAT, &g_sp.repeat_penalty, "X", "penalise recent tokens (default 1 = off)", 0.01, 100, NULL},
    {"frequency-penalty", 0, CLI_FLOAT, &g_sp.frequency_penalty, "X", "OpenAI frequency penalty", -2, 2, NULL},
    {"presence-penalty", 0, CLI_FLOAT, &g_sp.presence_penalty, "X", "OpenAI presence penalty", -2, 2, NULL},
    {"seed", 's', CLI_I64, &g_seed, "N", "random seed (-1 = random; default fixed)", -1, 9.2e18, NULL},
    {"logprobs", 0, CLI_INT, &g_logprobs, "N", "report the top-N log-probabilities (with --json)", 0, SAMPLER_MAX_LOGPROBS, NULL},
    {"chat", 0, CLI_FLAG, &g_chat, NULL, "send the prompt as a user turn through the chat template", 0, 0, NULL},
    {"chat-template", 0, CLI_STR, &g_template, "NAME", "override the model's chat template (implies --chat)", 0, 0, NULL},
    {"chat-template-file", 0, CLI_STR, &g_template_file, "FILE", "a Jinja chat template to use instead of the model's", 0, 0, NULL},
    {"system", 0, CLI_STR, &g_system, "TEXT", "system message (implies --chat)", 0, 0, NULL},
    {"special", 0, CLI_FLAG, &g_special, NULL, "parse special-token text in the prompt, print special tokens", 0, 0, NULL},
    {"json", 0, CLI_FLAG, &g_json, NULL, "print a JSON summary on the last line", 0, 0, NULL},
    {"grammar-file", 0, CLI_STR, &g_grammar_file, "FILE", "constrain the output to a GBNF grammar", 0, 0, NULL},
    {"json-schema", 0, CLI_STR, &g_json_schema, "FILE|JSON", "constrain the output to JSON valid against a schema", 0, 0, NULL},
    {0},
};

const cli_cmd cli_generate = {
    .name = "generate",
    .usage = "[-m MODEL] -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--seed S] [--json]",
    .summary = "continue a prompt, streaming the text as it is made",
    .opts = g_opts,
};

static cJSON *int_array(const int32_t *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

/* Prints o as one line of JSON on stdout, and frees it. */
static void print_json_line(cJSON *o) {
    char *js = o ? cJSON_PrintUnformatted(o) : NULL;
    if (js) printf("%s\n", js);
    else fprintf(stderr, "llmchat: out of memory writing the JSON result\n");
    free(js);
    cJSON_Delete(o);
}

static cJSON *logprob_entry(const sample_result *r) {
    cJSON *o = cJSON_CreateObject(), *top = cJSON_CreateArray();
    cJSON_AddNumberToObject(o, "id", r->token);
    cJSON_AddNumberToObject(o, "logprob", r->logprob);
    for (int k = 0; k < r->n_top; k++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "id", r->top[k].id);
        cJSON_AddNumberToObject(e, "logprob", r->top[k].logprob);
        cJSON_AddItemToArray(top, e);
    }
    cJSON_AddItemToObject(o, "top", top);
    return o;
}

/* The JSON summary's "logprobs" entry of one token. */
static void add_logprob(cJSON *lp_json, const sample_result *r) {
    if (lp_json) cJSON_AddItemToArray(lp_json, logprob_entry(r));
}

/* One request through the shared engine (as the chat and the server run them):
 * the engine prefills, samples, speculates with --draft/--ngram, follows a
 * grammar, and streams the text; this prints it and, with --json, the summary. */
static int generate(llm *L, const cli_common *common, const int32_t *prompt, int n_prompt, int n_max) {
    llc_err err;
    engine *e = NULL;
    engine_client *c = NULL;
    if (llm_engine_create(L, common, &e, &err) || engine_client_create(e, &c)) {
        fprintf(stderr, "llmchat: %s\n", e ? "out of memory" : err.msg);
        engine_destroy(e);
        return 1;
    }
    const bool speculating = L->draft || common->ngram;
    gen_request r = {.prompt = prompt, .n_prompt = n_prompt, .n = 1, .max_tokens = n_max, .sampling = g_sp,
                     .continues_prompt = !g_chat, .grammar = g_grammar, .special_text = g_special};
    double t0 = clock_now_s(), t_first = 0;
    int status = 1;
    int32_t *ids = malloc((size_t)(n_max + 1) * sizeof *ids);
    cJSON *lp_json = g_logprobs ? cJSON_CreateArray() : NULL;
    sbuf text = {0};
    if (!ids) {
        fprintf(stderr, "llmchat: out of memory\n");
        goto out;
    }
    if (engine_submit(e, c, &r, &err) < 0) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        goto out;
    }
    int n_ids = 0;
    engine_event *ev;
    while ((ev = engine_client_wait(c, -1))) {
        engine_event_kind kind = ev->kind;
        if (kind == EV_TOKEN) {
            if (!t_first) t_first = clock_now_s();
            if (n_ids <= n_max) ids[n_ids++] = ev->token;
            add_logprob(lp_json, &ev->lp);
            fwrite(ev->text, 1, ev->text_len, stdout);
            fflush(stdout);
            sb_add(&text, ev->text, ev->text_len);
        } else if (kind == EV_DONE) {
            double t_end = clock_now_s();
            if (ev->end_token >= 0 && n_ids <= n_max) { /* the end token: an id, no text */
                ids[n_ids++] = ev->end_token;
                add_logprob(lp_json, &ev->end_lp);
            }
            printf("\n");
            if (g_json) {
                engine_metrics m;
                engine_get_metrics(e, &m);
                cJSON *o = cJSON_CreateObject(), *tm = cJSON_CreateObject();
                cJSON_AddItemToObject(o, "prompt_tokens", int_array(prompt, n_prompt));
                cJSON_AddItemToObject(o, "tokens", int_array(ids, n_ids));
                cJSON_AddStringToObject(o, "text", sb_cstr(&text));
                if (text.oom) cJSON_AddStringToObject(o, "error", "out of memory: text is incomplete");
                cJSON_AddStringToObject(o, "finish_reason", ev->finish == FINISH_STOP ? "stop" : "length");
                char seed[24]; /* digits, not a double: cJSON prints 15 significant digits when */
                snprintf(seed, sizeof seed, "%" PRIu64, ev->seed); /* they read back "close enough" */
                cJSON_AddRawToObject(o, "seed", seed);
                if (speculating) {
                    cJSON_AddNumberToObject(o, "drafted_tokens", ev->drafted_tokens);
                    cJSON_AddNumberToObject(o, "accepted_tokens", ev->accepted_tokens);
                    cJSON_AddNumberToObject(o, "acceptance_rate",
                                            ev->drafted_tokens ? (double)ev->accepted_tokens / ev->drafted_tokens : 0);
                    cJSON_AddNumberToObject(o, "tokens_per_verify",
                                            m.spec_verifies ? (double)(m.spec_accepted + m.spec_verifies) / m.spec_verifies : 0);
                }
                /* the first token comes with the prompt's pass; the rest are generation */
                const double prompt_s = ev->ttft_ms / 1e3, gen_s = t_first ? t_end - t_first : 0;
                cJSON_AddNumberToObject(tm, "prompt_ms", ev->ttft_ms);
                cJSON_AddNumberToObject(tm, "prompt_tokens_per_s", prompt_s > 0 ? n_prompt / prompt_s : 0);
                cJSON_AddNumberToObject(tm, "gen_ms", (t_end - (t_first ? t_first : t0)) * 1e3);
                cJSON_AddNumberToObject(tm, "gen_tokens_per_s", n_ids > 1 && gen_s > 0 ? (n_ids - 1) / gen_s : 0);
                if (speculating) cJSON_AddNumberToObject(tm, "draft_ms", m.draft_ms);
                cJSON_AddItemToObject(o, "timings", tm);
                if (lp_json) {
                    cJSON_AddItemToObject(o, "logprobs", lp_json);
                    lp_json = NULL;
                }
                print_json_line(o);
            }
            status = 0;
        } else {
            fprintf(stderr, "\nllmchat: %s\n", ev->message);
        }
        engine_event_free(ev);
        if (kind != EV_TOKEN) break;
    }
out:
    free(ids);
    cJSON_Delete(lp_json);
    sb_free(&text);
    engine_client_free(c);
    engine_destroy(e);
    return status;
}

int cmd_generate(int argc, char **argv) {
    cli_common common = {0};
    g_sp = sampler_params_default();
    g_sp.temperature = 0; /* greedy unless asked */
    cli_parse(&cli_generate, &common, argc, argv, NULL, 0);
    if (!g_prompt) cli_usage_error(&cli_generate, "--prompt is required");
    if (g_template && chat_tmpl_from_name(g_template) < 0)
        cli_usage_error(&cli_generate, "--chat-template: '%s' is not one of %s", g_template,
                        chat_tmpl_names());
    if (g_template || g_template_file || g_system) g_chat = true;
    g_sp.seed = g_seed < 0 ? SAMPLER_SEED_RANDOM : (uint64_t)g_seed;
    g_sp.n_logprobs = g_logprobs;
    llc_err err;
    if (sampler_params_check(&g_sp, &err)) cli_usage_error(&cli_generate, "%s", err.msg);
    if (file_read_grammar(g_grammar_file, g_json_schema, &g_grammar, &err)) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        return 1;
    }

    /* one sequence decodes a row at a time: packing the weights for few-row GEMMs
       would cost start-up time and memory for nothing (speculation checks several);
       the prompt's own pass pages the weights in, as the engine's warm-up would */
    if (!common.draft && !common.ngram) common.no_prepack = true;
    common.no_warmup = true;
    llm L;
    if (llm_open(&common, &L, &err)) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        return 1;
    }
    const model_hparams *hp = model_hparams_of(L.m);
    int status = 1;
    int32_t *prompt = NULL;

    char *rendered = NULL;
    const char *prompt_text = g_prompt;
    if (g_chat) {
        if ((g_template_file && llm_chat_template_file(&L, g_template_file, &err)) ||
            llm_render_chat(&L, g_template, g_system, g_prompt, &rendered, &err)) {
            fprintf(stderr, "llmchat: %s\n", err.msg);
            goto out;
        }
        prompt_text = rendered;
    }
    /* template markers are special tokens; the user's own text is not parsed for them
       unless --special says so */
    int n_prompt = llm_tokenize(L.tok, prompt_text, strlen(prompt_text), tok_add_bos(L.tok),
                                g_special || g_chat, &prompt);
    free(rendered);
    if (n_prompt < 1) {
        fprintf(stderr, "llmchat: the prompt gives no tokens\n");
        goto out;
    }
    if (n_prompt >= hp->n_ctx_train) {
        fprintf(stderr, "llmchat: the prompt is %d tokens; the model's context is %d\n", n_prompt,
                hp->n_ctx_train);
        goto out;
    }
    int n_max = g_n < hp->n_ctx_train - n_prompt ? g_n : hp->n_ctx_train - n_prompt;
    if (L.draft_error[0]) fprintf(stderr, "llmchat: %s; going on without speculation\n", L.draft_error);
    if (g_logprobs && !g_grammar && (L.draft || common.ngram))
        fprintf(stderr, "llmchat: --logprobs turns speculation off\n");
    if (n_max == 0) { /* nothing to generate (-n 0): the summary alone */
        printf("\n");
        if (g_json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddItemToObject(o, "prompt_tokens", int_array(prompt, n_prompt));
            cJSON_AddItemToObject(o, "tokens", cJSON_CreateArray());
            cJSON_AddStringToObject(o, "text", "");
            cJSON_AddStringToObject(o, "finish_reason", "length");
            print_json_line(o);
        }
        status = 0;
    } else {
        status = generate(&L, &common, prompt, n_prompt, n_max);
    }
out:
    free(prompt);
    llm_close(&L);
    free(g_grammar);
    return status;
}
