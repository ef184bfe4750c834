/* fuzz_grammar.c — libFuzzer target for structured output: the input is a GBNF
 * grammar (or, when it starts with '{', a JSON schema converted to GBNF), then
 * after a NUL the bytes of a text. A grammar is accepted or refused with a
 * message; an accepted one is followed over the text a few bytes at a time, and
 * at every step the allowed set of a small vocabulary (ASCII, multi-byte
 * characters, lone UTF-8 bytes, an end token) from the trie walk must equal
 * the token-by-token check. Built by `make fuzz`. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"

static grammar_vocab *g_vocab;
static const char *const k_texts[] = {
    "{", "}", "[", "]", "\"", ":", ",", " ", "\n", "a", "ab", "abc", "0", "12", "-", ".", "e", "true", "null",
    "\\", "\\n", "\\u00", "é", "€", "😀", "\xC3", "\xA9", "\xE2\x82", "\xAC", "\xF0", "\x9F\x98\x80", "\xFF",
    " \"", "\":", "\",", "<end>", "",
};
enum { N_TOK = sizeof k_texts / sizeof *k_texts };

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    int lens[N_TOK];
    uint8_t kinds[N_TOK];
    for (int i = 0; i < N_TOK; i++) {
        lens[i] = (int)strlen(k_texts[i]);
        kinds[i] = !strcmp(k_texts[i], "<end>") ? GRAMMAR_TOKEN_END : GRAMMAR_TOKEN_TEXT;
    }
    if (grammar_vocab_create(N_TOK, k_texts, lens, kinds, &g_vocab)) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    size_t glen = strlen(buf); /* the grammar ends at the first NUL */
    const char *text = buf + (glen < size ? glen + 1 : size);
    size_t tlen = size - (size_t)(text - buf);
    llc_err err;
    char *gbnf = NULL;
    if (buf[0] == '{') {
        if (json_schema_text_to_gbnf(buf, &gbnf, &err)) {
            if (!err.msg[0]) abort(); /* refused without a message */
            free(buf);
            return 0;
        }
    }
    grammar *g = NULL;
    int rc = gbnf ? grammar_parse(gbnf, strlen(gbnf), &g, &err) : grammar_parse(buf, glen, &g, &err);
    if (rc && !err.msg[0]) abort();
    grammar_state *st = NULL;
    if (!rc && grammar_state_create(g, (tlen & 1) != 0, &st) == 0) {
        uint8_t allowed[N_TOK];
        size_t at = 0;
        for (int step = 0; step < 24; step++) {
            int n = grammar_state_allowed(st, g_vocab, allowed);
            if (n >= 0)
                for (int i = 0; i < N_TOK; i++)
                    if ((allowed[i] != 0) != grammar_state_allows(st, g_vocab, i)) abort();
            if (at >= tlen) break;
            size_t k = 1 + (uint8_t)text[at] % 3; /* 1..3 bytes, as tokens split text */
            if (k > tlen - at) k = tlen - at;
            bool ok = grammar_state_allows_bytes(st, text + at, k);
            if ((grammar_state_accept_bytes(st, text + at, k) == 0) != ok) abort();
            at += k;
        }
        (void)grammar_state_complete(st);
        grammar_state_free(st);
    }
    grammar_free(g);
    free(gbnf);
    free(buf);
    return 0;
}
