/* cmd_embed.c — `llmchat embed`: the embedding of each text (mean-pooled final
 * hidden state, L2-normalised; see engine_submit_embed), one JSON array of
 * numbers per line. The texts go through the shared engine as one request, so
 * they are batched as the server batches them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/commands.h"
#include "app/fileio.h"
#include "app/llm.h"

#define EMBED_MAX_TEXTS 64

static const char *g_file;
static bool g_special;

static const cli_opt g_opts[] = {
    {"file", 'f', CLI_STR, &g_file, "PATH", "embed the text of a file (after any TEXT)", 0, 0, NULL},
    {"special", 0, CLI_FLAG, &g_special, NULL, "parse special-token text like <|im_start|>", 0, 0, NULL},
    {0},
};

const cli_cmd cli_embed = {
    .name = "embed",
    .usage = "[-m MODEL] [--special] (TEXT... | --file PATH)",
    .summary = "print the embedding vector of each text as JSON",
    .opts = g_opts,
};

int cmd_embed(int argc, char **argv) {
    cli_common common = {0};
    const char *texts[EMBED_MAX_TEXTS + 1];
    int n = cli_parse(&cli_embed, &common, argc, argv, texts, EMBED_MAX_TEXTS);
    llc_err err;
    char *owned = NULL;
    if (g_file) {
        size_t len;
        if (n == EMBED_MAX_TEXTS) cli_usage_error(&cli_embed, "at most %d texts", EMBED_MAX_TEXTS);
        if (!(owned = file_read_all(g_file, &len, &err))) {
            fprintf(stderr, "llmchat: %s\n", err.msg);
            return 1;
        }
        texts[n++] = owned;
    }
    if (n == 0) cli_usage_error(&cli_embed, "give a TEXT or --file PATH");
    common.no_prepack = true; /* one short pass: packing the weights would cost more than it saves */
    llm L;
    if (llm_open(&common, &L, &err)) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        free(owned);
        return 1;
    }
    int status = 1, dim = model_hparams_of(L.m)->dim, n_ctx = model_hparams_of(L.m)->n_ctx_train;
    int32_t *ids[EMBED_MAX_TEXTS] = {0};
    int lens[EMBED_MAX_TEXTS] = {0};
    float *vecs = malloc((size_t)n * dim * sizeof *vecs);
    engine *e = NULL;
    engine_client *c = NULL;
    if (!vecs) goto out;
    for (int i = 0; i < n; i++) {
        if (!texts[i][0]) {
            fprintf(stderr, "llmchat: text %d is empty\n", i + 1);
            goto out;
        }
        lens[i] = llm_tokenize(L.tok, texts[i], strlen(texts[i]), tok_add_bos(L.tok), g_special, &ids[i]);
        if (lens[i] < 1) {
            fprintf(stderr, "llmchat: text %d gives no tokens\n", i + 1);
            goto out;
        }
        if (lens[i] > n_ctx) {
            fprintf(stderr, "llmchat: text %d is %d tokens; the model's context is %d\n", i + 1, lens[i], n_ctx);
            goto out;
        }
    }
    if (llm_engine_create(&L, &common, &e, &err) || engine_client_create(e, &c)) {
        fprintf(stderr, "llmchat: %s\n", e ? "out of memory" : err.msg);
        goto out;
    }
    embed_request r = {.inputs = (const int32_t *const *)ids, .n_tokens = lens, .n_inputs = n};
    if (engine_submit_embed(e, c, &r, &err) < 0) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        goto out;
    }
    int done = 0, got = 0;
    while (done < n) {
        engine_event *ev = engine_client_wait(c, -1);
        if (ev->kind == EV_EMBEDDING && ev->seq_index >= 0 && ev->seq_index < n && ev->n_embd == dim) {
            memcpy(vecs + (size_t)ev->seq_index * dim, ev->embedding, (size_t)dim * sizeof *vecs);
            got++;
        } else if (ev->kind == EV_ERROR) {
            fprintf(stderr, "llmchat: %s\n", ev->message);
        } else if (ev->kind == EV_DONE) {
            done++;
        }
        engine_event_free(ev);
    }
    if (got < n) goto out;
    for (int i = 0; i < n; i++) {
        for (int d = 0; d < dim; d++) printf(d ? ",%.9g" : "[%.9g", (double)vecs[(size_t)i * dim + d]);
        printf("]\n");
    }
    status = 0;
out:
    engine_client_free(c);
    engine_destroy(e);
    for (int i = 0; i < n; i++) free(ids[i]);
    free(vecs);
    free(owned);
    llm_close(&L);
    return status;
}
