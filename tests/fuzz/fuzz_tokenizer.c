/* fuzz_tokenizer.c — libFuzzer target for the tokenizer on untrusted text: the
 * vocabularies of ../shared/vocab (SentencePiece, byte-level BPE with their
 * pre-tokenizers, gemma4's SentencePiece-style BPE) are loaded once; the first input byte picks one and the flags
 * (BOS, special-token parsing), the rest is the text (any bytes). Encoding must
 * give in-range ids and report the same count with a small and a big buffer;
 * decoding them must work; for valid UTF-8 without special parsing,
 * decode(encode(x)) == x where the tokenizer promises it (SentencePiece with
 * byte fallback, text without U+2581, which is its space). The same bytes read as token ids go through the streaming
 * detokenizer, which must emit only valid UTF-8. Built by `make fuzz`; LLC_SHARED
 * points at ../shared as in the tests. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"

static const char *const k_vocabs[] = {
    "llama-spm", "gpt-2", "phi-3", "deepseek-llm", "starcoder", "falcon", "baichuan",
    "gemma-4", "qwen35", "llama-bpe",
};
#define GEMMA4 7 /* SentencePiece-style BPE with byte fallback: round trips too */
#define N_VOCABS ((int)(sizeof k_vocabs / sizeof k_vocabs[0]))
static tokenizer *g_tok[N_VOCABS];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *shared = getenv("LLC_SHARED");
    if (!shared || !*shared) shared = "../shared";
    for (int i = 0; i < N_VOCABS; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", shared, k_vocabs[i]);
        gguf *g;
        llc_err err;
        if (gguf_open(path, &g, &err) || tok_load(g, &g_tok[i], &err)) {
            fprintf(stderr, "fuzz_tokenizer: %s: %s\n", path, err.msg);
            abort();
        }
        gguf_free(g); /* the tokenizer keeps its own copies */
    }
    return 0;
}

/* Length of the valid UTF-8 prefix of s (RFC 3629: no overlongs, surrogates,
 * or code points past U+10FFFF). */
static size_t utf8_valid_len(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t k;
        uint32_t cp;
        if (c < 0x80) { i++; continue; }
        else if (c >= 0xC2 && c <= 0xDF) k = 1, cp = c & 0x1F;
        else if (c >= 0xE0 && c <= 0xEF) k = 2, cp = c & 0x0F;
        else if (c >= 0xF0 && c <= 0xF4) k = 3, cp = c & 0x07;
        else return i;
        if (i + k >= n) return i; /* truncated */
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return i;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return i;
        i += k + 1;
    }
    return i;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const tokenizer *t = g_tok[data[0] % N_VOCABS];
    bool bos = data[0] & 0x10, special = data[0] & 0x20;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    int n_vocab = tok_n_vocab(t);

    int32_t small[4];
    int n = tok_encode(t, text, len, bos, special, small, 4);
    if (n < 0) abort();
    int32_t *ids = malloc(((size_t)n + 1) * sizeof *ids);
    if (tok_encode(t, text, len, bos, special, ids, n) != n) abort();
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab) abort();
    if (n > 0 && memcmp(small, ids, (size_t)(n < 4 ? n : 4) * sizeof *ids)) abort();
    char *out = NULL;
    size_t out_len = 0;
    if (tok_decode(t, ids, n, false, &out, &out_len)) abort();
    /* exact round trip: SentencePiece (and gemma4's SentencePiece-style BPE) with
     * byte fallback, valid UTF-8, no special parsing, no BOS, text without NULs
     * (NUL bytes are fine for BPE) */
    if ((t == g_tok[0] || t == g_tok[GEMMA4]) && !special && !bos && utf8_valid_len(data + 1, len) == len &&
        !memchr(text, 0, len) && !memmem(text, len, "\xE2\x96\x81", 3) /* U+2581 is SPM's space */ &&
        (out_len != len || memcmp(out, text, len))) {
        fprintf(stderr, "round trip: %zu bytes in, %zu out\n", len, out_len);
        abort();
    }
    free(out);
    free(ids);

    /* the bytes as token ids (some out of range) through the stream */
    tok_stream *ts;
    if (tok_stream_create(t, special, &ts)) abort();
    char piece[256];
    for (size_t i = 1; i + 2 <= size; i += 2) {
        int32_t id = (int32_t)(data[i] | data[i + 1] << 8) % (n_vocab + 8);
        int k = tok_stream_push(ts, id, piece, sizeof piece);
        if (k >= (int)sizeof piece) abort();
        if (k > 0 && utf8_valid_len((const uint8_t *)piece, (size_t)k) != (size_t)k) abort();
    }
    int k;
    while ((k = tok_stream_flush(ts, piece, sizeof piece)) > 0)
        if (utf8_valid_len((const uint8_t *)piece, (size_t)k) != (size_t)k) abort();
    tok_stream_free(ts);
    return 0;
}
