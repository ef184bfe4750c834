/* bench_grammar.c — what constrained decoding costs per step: the allowed-token
 * mask of a whole vocabulary (the trie walk), the one-token check of the lazy
 * path, and the state advance, measured while a JSON document is fed token by
 * token (as a model that follows the grammar would write it).
 *
 *   build/tools/bench_grammar [VOCAB.gguf] [SCHEMA.json]
 *
 * Defaults: ../shared/vocab/ggml-vocab-llama-spm.gguf (32000 tokens) and a
 * schema with strings, integers, an enum and an array; "-" as the schema uses
 * the generic json_object grammar. Prints the vocabulary build time and, per
 * step, the mean / p50 / p99 / max of each cost. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/gguf/gguf.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"
#include "engine/tokenizer/tokenizer.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, double *v, int n) {
    double sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    printf("%-28s mean %8.1f us   p50 %8.1f   p99 %8.1f   max %8.1f   (%d steps)\n", what, sum / n, v[n / 2],
           v[(int)(n * 0.99)], v[n - 1], n);
}

static const char *k_schema =
    "{\"type\":\"object\",\"properties\":{"
    "\"name\":{\"type\":\"string\",\"maxLength\":40},"
    "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":120},"
    "\"pet\":{\"enum\":[\"cat\",\"dog\",\"fish\"]},"
    "\"bio\":{\"type\":\"string\"},"
    "\"scores\":{\"type\":\"array\",\"items\":{\"type\":\"number\"}}},"
    "\"required\":[\"name\",\"age\",\"pet\",\"bio\",\"scores\"]}";

static const char *k_doc =
    "{\"name\": \"Lily Anne Smith\", \"age\": 42, \"pet\": \"dog\", \"bio\": \"Once upon a time there was a "
    "little girl who loved to play in the park with her dog. She was very happy — and curious about "
    "everything: trees, birds, \\\"rainbows\\\" and numbers like 3.14.\", \"scores\": [1.5, -2, 3e4, 10]}";

int main(int argc, char **argv) {
    const char *vocab_path = argc > 1 ? argv[1] : "../shared/vocab/ggml-vocab-llama-spm.gguf";
    llc_err err;
    gguf *f;
    tokenizer *tok;
    if (gguf_open(vocab_path, &f, &err) || tok_load(f, &tok, &err)) {
        fprintf(stderr, "%s: %s\n", vocab_path, err.msg);
        return 1;
    }
    char *gbnf = NULL;
    const char *doc = k_doc;
    if (argc > 2 && !strcmp(argv[2], "-")) {
        gbnf = strdup(json_object_gbnf());
    } else if (argc > 2) {
        FILE *sf = fopen(argv[2], "rb");
        char text[65536];
        size_t n = sf ? fread(text, 1, sizeof text - 1, sf) : 0;
        if (sf) fclose(sf);
        text[n] = 0;
        if (json_schema_text_to_gbnf(text, &gbnf, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    } else if (json_schema_text_to_gbnf(k_schema, &gbnf, &err)) {
        return fprintf(stderr, "%s\n", err.msg), 1;
    }
    grammar *g;
    if (grammar_parse(gbnf, strlen(gbnf), &g, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    double t0 = now_us();
    grammar_vocab *v;
    if (grammar_vocab_from_tokenizer(tok, &v)) return fprintf(stderr, "vocabulary: out of memory\n"), 1;
    int V = grammar_vocab_size(v);
    printf("vocabulary %s: %d tokens, built in %.1f ms; grammar: %d rules\n", vocab_path, V,
           (now_us() - t0) / 1000, grammar_n_rules(g));
    int32_t ids[4096];
    int n = tok_encode(tok, doc, strlen(doc), false, false, ids, 4096);
    bool strip = grammar_tokenizer_strips_space(tok);
    uint8_t *allowed = malloc((size_t)V);
    enum { ROUNDS = 5 };
    double *mask = malloc(sizeof(double) * (size_t)n * ROUNDS), *one = malloc(sizeof(double) * (size_t)n * ROUNDS),
           *adv = malloc(sizeof(double) * (size_t)n * ROUNDS);
    long long n_allowed = 0;
    int steps = 0;
    for (int round = 0; round < ROUNDS; round++) {
        grammar_state *st;
        grammar_state_create(g, strip, &st);
        for (int i = 0; i < n; i++, steps++) {
            double a = now_us();
            int k = grammar_state_allowed(st, v, allowed);
            double b = now_us();
            bool ok = grammar_state_allows(st, v, ids[i]);
            double c = now_us();
            int rc = grammar_state_accept(st, v, ids[i]);
            double d = now_us();
            if (k <= 0 || !ok || !allowed[ids[i]] || rc) {
                fprintf(stderr, "step %d: token %d '%s' refused (allowed %d)\n", i, ids[i], tok_text(tok, ids[i]), k);
                return 1;
            }
            n_allowed += k;
            mask[steps] = b - a, one[steps] = c - b, adv[steps] = d - c;
        }
        if (!grammar_state_complete(st)) return fprintf(stderr, "the document did not complete the grammar\n"), 1;
        grammar_state_free(st);
    }
    printf("document: %d tokens, on average %.0f of %d tokens allowed per step\n", n, (double)n_allowed / steps, V);
    report("full mask (trie walk)", mask, steps);
    report("one-token check", one, steps);
    report("advance over the token", adv, steps);
    free(mask), free(one), free(adv), free(allowed), free(gbnf);
    grammar_vocab_free(v);
    grammar_free(g);
    tok_free(tok);
    gguf_free(f);
    return 0;
}
