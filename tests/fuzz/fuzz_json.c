/* fuzz_json.c — libFuzzer target for the server's JSON requests: the input is a
 * request body as a client would send it (NDJSON line, OpenAI or llama-server
 * body). The first byte picks the dialect, the vocabulary (stories260K's
 * SentencePiece, or deepseek-coder's BPE, which has fill-in-the-middle tokens)
 * and the chat template; the rest is parsed with cJSON and goes through the
 * same calls the server makes (srv_gen_params, then srv_gen_chat, srv_gen_text
 * or srv_gen_infill). Each must accept or refuse with a negative code and a
 * message; an accepted request must have a prompt of in-vocabulary ids. It
 * calls the server's parsing functions through app/server/srv_internal.h and links the
 * app objects (not main). Built by `make fuzz`. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/server/srv_internal.h"

static srv_model g_models[2];

static void load_model(srv_model *m, const char *path, int n_ctx) {
    gguf *g;
    tokenizer *tok;
    llc_err err;
    if (gguf_open(path, &g, &err) || tok_load(g, &tok, &err)) {
        fprintf(stderr, "fuzz_json: %s: %s\n", path, err.msg);
        abort();
    }
    gguf_free(g);
    memset(m, 0, sizeof *m);
    m->tok = tok;
    m->n_ctx = n_ctx;
    m->n_vocab = tok_n_vocab(tok);
    snprintf(m->name, sizeof m->name, "fuzz");
    m->has_fim = tok_special(tok, TOK_SPECIAL_FIM_PRE) >= 0 && tok_special(tok, TOK_SPECIAL_FIM_SUF) >= 0 &&
                 tok_special(tok, TOK_SPECIAL_FIM_MID) >= 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *shared = getenv("LLC_SHARED");
    if (!shared || !*shared) shared = "../shared";
    char path[512];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", shared);
    load_model(&g_models[0], path, 512);
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-deepseek-coder.gguf", shared);
    load_model(&g_models[1], path, 2048);
    return 0;
}

static const char *str_or(const cJSON *j, const char *name, const char *dflt) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, name);
    return cJSON_IsString(f) ? f->valuestring : dflt;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    srv_dialect d = (srv_dialect)(data[0] & 3);
    if ((data[0] & 0xC0) == 0xC0) d = SRV_OLLAMA; /* Ollama's "options" */
    srv_model m = g_models[(data[0] >> 2) & 1];
    m.tmpl = chat_builtin((data[0] >> 3) % CHAT_FMT_COUNT);
    cJSON *j = cJSON_ParseWithLength((const char *)data + 1, size - 1);
    if (!j) return 0;
    srv_gen g;
    srv_gen_init(&g);
    llc_err err = {{0}};
    int rc = srv_gen_params(&m, d, j, &g, &err);
    bool prompted = false;
    if (!rc) {
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(j, "messages");
        const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(j, "prompt");
        const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(j, "input_prefix");
        if (!prefix) prefix = cJSON_GetObjectItemCaseSensitive(j, "prefix");
        if (prefix) {
            const cJSON *extra = cJSON_GetObjectItemCaseSensitive(j, "input_extra");
            if (!extra) extra = cJSON_GetObjectItemCaseSensitive(j, "extra");
            rc = srv_gen_infill(&m, cJSON_IsString(prefix) ? prefix->valuestring : "",
                                str_or(j, "input_suffix", str_or(j, "suffix", "")),
                                cJSON_IsNull(extra) ? NULL : extra, str_or(j, "prompt", ""), &g, &err);
            prompted = true;
        } else if (msgs) {
            rc = srv_gen_chat(&m, msgs, &g, &err);
            prompted = true;
        } else if (prompt) {
            rc = srv_gen_text(&m, prompt, &g, &err);
            prompted = true;
        }
    }
    if (rc && (rc > 0 || !err.msg[0])) abort(); /* an error is negative and explained */
    if (!rc && prompted) {
        if (g.req.n_prompt < 1 || g.req.prompt != g.ids) abort();
        for (int i = 0; i < g.req.n_prompt; i++)
            if (g.ids[i] < 0 || g.ids[i] >= m.n_vocab) abort();
        for (int i = 0; i < g.n_stops; i++)
            if (!g.stops[i]) abort();
    }
    srv_gen_free(&g);
    cJSON_Delete(j);
    return 0;
}
