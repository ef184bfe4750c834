/* cmd_perplexity.c — `llmchat perplexity`: the llama.cpp convention, so numbers
 * compare: the text is tokenized once (with BOS), cut into non-overlapping chunks
 * of --ctx tokens whose first token is set to BOS, and only the second half of each
 * chunk is scored (each position predicting the next token). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/commands.h"
#include "app/llm.h"
#include "engine/model/batch.h"
#include "app/fileio.h"

static const char *g_file;
static int g_ctx = 512;

static const cli_opt g_opts[] = {
    {"file", 'f', CLI_STR, &g_file, "PATH", "text to score (required)", 0, 0, NULL},
    {"ctx", 'c', CLI_INT, &g_ctx, "N", "tokens per chunk (default 512)", 8, 1 << 20, NULL},
    {0},
};

const cli_cmd cli_perplexity = {
    .name = "perplexity",
    .usage = "-m MODEL -f FILE [--ctx N]",
    .summary = "measure a model's perplexity on a text file",
    .opts = g_opts,
};

/* -log softmax(logits)[target], computed stably in double. */
static double nll_of(const float *logits, int n_vocab, int target) {
    float max = logits[0];
    for (int i = 1; i < n_vocab; i++) if (logits[i] > max) max = logits[i];
    double sum = 0;
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - max);
    return -((double)logits[target] - max - log(sum));
}

int cmd_perplexity(int argc, char **argv) {
    cli_common common = {0};
    cli_parse(&cli_perplexity, &common, argc, argv, NULL, 0);
    if (!g_file) cli_usage_error(&cli_perplexity, "--file is required");
    llc_err err;
    size_t len;
    char *text = file_read_all(g_file, &len, &err);
    if (!text) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        return 1;
    }
    llm L;
    if (llm_open(&common, &L, &err)) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        free(text);
        return 1;
    }
    int status = 1;
    int n_vocab = model_hparams_of(L.m)->n_vocab, n_ctx = g_ctx;
    int32_t *tokens = NULL;
    int n_tok = llm_tokenize(L.tok, text, len, tok_add_bos(L.tok), false, &tokens);
    int n_chunks = n_tok > 0 ? n_tok / n_ctx : 0;
    int block = 16, n_blocks = (n_ctx + block - 1) / block;
    model_kv *kv = NULL;
    batch *b = NULL;
    float *logits = malloc((size_t)n_ctx * n_vocab * sizeof *logits);
    int32_t *blocks = malloc((size_t)n_blocks * sizeof *blocks);
    if (n_tok < 0 || !logits || !blocks) {
        fprintf(stderr, "llmchat: out of memory\n");
        goto out;
    }
    if (n_chunks < 1) {
        fprintf(stderr, "llmchat: %s has %d tokens, fewer than one chunk of %d\n", g_file, n_tok, n_ctx);
        goto out;
    }
    if (model_kv_create(L.m, n_blocks, block, llm_kv_type(&common), &kv, &err) || batch_create(n_blocks, block, &b)) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        goto out;
    }
    for (int i = 0; i < n_blocks; i++) blocks[i] = i;
    fprintf(stderr, "perplexity: %d tokens, %d chunks of %d, scoring the second half of each\n",
            n_tok, n_chunks, n_ctx);
    double nll = 0;
    long count = 0;
    int first = n_ctx / 2;
    for (int c = 0; c < n_chunks; c++) {
        int32_t *chunk = tokens + (size_t)c * n_ctx;
        int32_t saved = chunk[0];
        if (tok_add_bos(L.tok) && tok_bos(L.tok) >= 0) chunk[0] = tok_bos(L.tok);
        batch_clear(b);
        batch_add(b, chunk, n_ctx, 0, blocks, n_blocks, BATCH_OUT_ALL);
        int rc = model_forward(L.m, kv, batch_view(b), logits, &err);
        chunk[0] = saved;
        if (rc) {
            fprintf(stderr, "llmchat: %s\n", err.msg);
            goto out;
        }
        for (int j = first; j < n_ctx - 1; j++) {
            nll += nll_of(logits + (size_t)j * n_vocab, n_vocab, chunk[j + 1]);
            count++;
        }
        fprintf(stderr, "[%d]%.4f ", c + 1, exp(nll / count));
    }
    fprintf(stderr, "\n");
    printf("PPL = %.4f\n", exp(nll / count));
    status = 0;
out:
    batch_free(b);
    model_kv_free(kv);
    free(blocks);
    free(logits);
    free(tokens);
    free(text);
    llm_close(&L);
    return status;
}
