/* cmd_tokenize.c — `llmchat tokenize`: text to token ids with a model's tokenizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/commands.h"
#include "app/fileio.h"
#include "app/llm.h"
#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"

static bool g_no_bos, g_special, g_pieces;
static const char *g_file;

static const cli_opt g_opts[] = {
    {"no-bos", 0, CLI_FLAG, &g_no_bos, NULL, "do not add the BOS token", 0, 0, NULL},
    {"special", 0, CLI_FLAG, &g_special, NULL, "parse special-token text like <|im_start|>", 0,
     0, NULL},
    {"pieces", 0, CLI_FLAG, &g_pieces, NULL, "also print each token's text", 0, 0, NULL},
    {"file", 'f', CLI_STR, &g_file, "PATH", "read the text from a file", 0, 0, NULL},
    {0},
};

const cli_cmd cli_tokenize = {
    .name = "tokenize",
    .usage = "[-m MODEL] [--no-bos] [--special] [--pieces] (TEXT | --file PATH)",
    .summary = "print the token ids of a text",
    .opts = g_opts,
};

/* Prints a piece with control characters escaped, so each token stays on one line. */
static void print_escaped(const char *s, int n) {
    for (int i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c == '\\') fputs("\\\\", stdout);
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
}

int cmd_tokenize(int argc, char **argv) {
    cli_common common = {0};
    const char *text = NULL;
    int npos = cli_parse(&cli_tokenize, &common, argc, argv, &text, 1);
    if (npos == 0 && !g_file) cli_usage_error(&cli_tokenize, "give a TEXT or --file PATH");
    if (npos == 1 && g_file) cli_usage_error(&cli_tokenize, "give either TEXT or --file, not both");

    size_t len = 0;
    char *owned = NULL;
    llc_err err;
    if (g_file) {
        if (!(owned = file_read_all(g_file, &len, &err))) {
            fprintf(stderr, "llmchat: %s\n", err.msg);
            return 1;
        }
        text = owned;
    } else {
        len = strlen(text);
    }
    gguf *g = NULL;
    tokenizer *tok = NULL;
    int status = 1;
    if (gguf_open(common.model, &g, &err) || tok_load(g, &tok, &err)) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        goto out;
    }
    gguf_free(g);
    g = NULL;

    int32_t *ids = NULL;
    int n = llm_tokenize(tok, text, len, !g_no_bos && tok_add_bos(tok), g_special, &ids);
    if (n < 0) {
        fprintf(stderr, "llmchat: tokenization failed\n");
        goto out;
    }
    for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    if (g_pieces) {
        char piece[256];
        for (int i = 0; i < n; i++) {
            int pn = tok_piece(tok, ids[i], true, piece, sizeof piece);
            printf("%6d  '", ids[i]);
            print_escaped(piece, pn < 0 ? 0 : pn < (int)sizeof piece ? pn : (int)sizeof piece);
            printf("'\n");
        }
    }
    free(ids);
    status = 0;
out:
    tok_free(tok);
    gguf_free(g);
    free(owned);
    return status;
}
