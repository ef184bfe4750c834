/* test_tokenizer.c — the tokenizer against llama.cpp's test vectors (every
 * ../shared/vocab/NAME.gguf.inp/.out there), loading of every vocabulary, exact ids
 * on stories260K, round trips (text and random bytes), the streaming decoder,
 * special-token parsing, and hostile vocabulary metadata. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"
#include "engine/tokenizer/tok_internal.h" /* tok_pretok_*: pinning the pre-tokenizer splits */
#include "engine/tokenizer/tokenizer.h"
#include "tests/test.h"

/* Every ggml-vocab-NAME.gguf in ../shared/vocab (test_load_all checks the list
 * against the directory). */
static const char *const k_vocabs[] = {
    "baichuan", "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4", "gpt-2",
    "gpt-neox", "llama-bpe", "llama-spm", "mpt", "phi-3", "qwen2", "qwen35", "refact",
    "starcoder",
};
#define N_VOCABS ((int)(sizeof k_vocabs / sizeof k_vocabs[0]))

static tokenizer *g_tok[N_VOCABS]; /* loaded once by test_load_all */

static tokenizer *load_path(const char *path) {
    gguf *g = NULL;
    tokenizer *t = NULL;
    llc_err err = {{0}};
    if (gguf_open(path, &g, &err) || tok_load(g, &t, &err)) {
        fprintf(stderr, "  %s: %s\n", path, err.msg);
        t = NULL;
    }
    gguf_free(g);
    return t;
}

static tokenizer *vocab(const char *name) {
    for (int i = 0; i < N_VOCABS; i++)
        if (!strcmp(k_vocabs[i], name)) return g_tok[i];
    return NULL;
}

/* Encodes into a malloc'd array (two-pass with the returned count). */
static int encode(const tokenizer *t, const char *s, size_t len, bool bos, bool special,
                  int32_t **out) {
    int32_t small[8];
    int n = tok_encode(t, s, len, bos, special, small, 8);
    *out = NULL;
    if (n < 0) return n;
    *out = malloc(((size_t)n + 1) * sizeof **out);
    if (!*out) return -1;
    int n2 = tok_encode(t, s, len, bos, special, *out, n);
    return n2 == n ? n : -1;
}

static void print_escaped(FILE *f, const char *s, size_t len) {
    fputc('"', f);
    for (size_t i = 0; i < len && i < 200; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c < 0x20 || c == 0x7F) fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void print_ids(FILE *f, const int32_t *ids, int n) {
    for (int i = 0; i < n && i < 60; i++) fprintf(f, " %d", ids[i]);
    if (n > 60) fprintf(f, " ...");
}

/* ---- llama.cpp's test vectors ---- */

/* Runs ggml-vocab-NAME.gguf.inp/.out: inputs separated by "\n__ggml_vocab_test__\n"
 * (the separator after the last input may be missing), one line of expected ids
 * per input, encoded without BOS and without parsing special tokens. Also
 * checks that the ids decode back to the input. Returns the number of inputs. */
static int run_vectors(const char *name) {
    char path[512];
    tokenizer *t = vocab(name);
    CHECKF(t != NULL, "%s did not load", name);
    if (!t) return 0;
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf.inp", t_shared(), name);
    size_t inp_len = 0, out_len = 0;
    char *inp = t_read_file(path, &inp_len);
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf.out", t_shared(), name);
    char *outs = t_read_file(path, &out_len);
    CHECKF(inp && outs, "cannot read the vectors of %s", name);
    if (!inp || !outs) {
        free(inp);
        free(outs);
        return 0;
    }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof sep - 1;
    size_t p = 0, q = 0;
    int n_cases = 0, n_bad = 0, n_bad_text = 0;
    while (p < inp_len) {
        const char *m = memmem(inp + p, inp_len - p, sep, sep_len);
        size_t in_len = m ? (size_t)(m - (inp + p)) : inp_len - p;
        /* the matching .out line */
        CHECKF(q < out_len, "%s: .out has fewer lines than .inp has inputs", name);
        if (q >= out_len) break;
        const char *nl = memchr(outs + q, '\n', out_len - q);
        size_t line_end = nl ? (size_t)(nl - outs) : out_len;
        int32_t want[1024];
        int n_want = 0;
        char *e = outs + q;
        while (e < outs + line_end && n_want < 1024) {
            char *end;
            long v = strtol(e, &end, 10);
            if (end == e) break;
            want[n_want++] = (int32_t)v;
            e = end;
        }
        int32_t *got = NULL;
        int n_got = encode(t, inp + p, in_len, false, false, &got);
        bool same = n_got == n_want && (n_got <= 0 || !memcmp(got, want, (size_t)n_got * 4));
        if (!same) {
            if (!n_bad) {
                fprintf(stderr, "  %s vector %d: input ", name, n_cases);
                print_escaped(stderr, inp + p, in_len);
                fprintf(stderr, "\n    want:");
                print_ids(stderr, want, n_want);
                fprintf(stderr, "\n    got: ");
                print_ids(stderr, got, n_got);
                fputc('\n', stderr);
            }
            n_bad++;
        }
        /* the expected ids decode to the input */
        char *text = NULL;
        size_t text_len = 0;
        bool text_ok = tok_decode(t, want, n_want, false, &text, &text_len) == 0 &&
                       text_len == in_len && !memcmp(text, inp + p, in_len);
        if (!text_ok) {
            if (!n_bad_text) {
                fprintf(stderr, "  %s vector %d does not decode back: ", name, n_cases);
                print_escaped(stderr, inp + p, in_len);
                fprintf(stderr, " -> ");
                print_escaped(stderr, text ? text : "", text_len);
                fputc('\n', stderr);
            }
            n_bad_text++;
        }
        free(text);
        free(got);
        n_cases++;
        p = m ? (size_t)(m - inp) + sep_len : inp_len;
        q = line_end + 1;
    }
    CHECKF(q >= out_len, "%s: .out has more lines than .inp has inputs", name);
    CHECKF(n_cases >= 40, "%s: only %d inputs", name, n_cases);
    CHECKF(n_bad == 0, "%s: %d of %d vectors differ", name, n_bad, n_cases);
    CHECKF(n_bad_text == 0, "%s: %d of %d vectors do not decode back", name, n_bad_text,
           n_cases);
    free(inp);
    free(outs);
    return n_cases;
}

/* Names NAME of every ggml-vocab-NAME.gguf<suffix> in ../shared/vocab, sorted;
 * returns the count (names are malloc'd). */
static int list_vocab_dir(const char *suffix, char ***names) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/vocab", t_shared());
    *names = NULL;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0, cap = 0;
    struct dirent *de;
    size_t sl = strlen(suffix);
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (strncmp(de->d_name, "ggml-vocab-", 11) || l < 11 + sl + 1 ||
            strcmp(de->d_name + l - sl, suffix))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            *names = realloc(*names, (size_t)cap * sizeof **names);
        }
        (*names)[n++] = strndup(de->d_name + 11, l - 11 - sl);
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* insertion sort: a handful of names */
        for (int j = i; j > 0 && strcmp((*names)[j - 1], (*names)[j]) > 0; j--) {
            char *x = (*names)[j];
            (*names)[j] = (*names)[j - 1];
            (*names)[j - 1] = x;
        }
    return n;
}

static void free_names(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* Every vector file in ../shared/vocab runs; none is skipped. */
static void test_vectors(void) {
    char **names;
    int n = list_vocab_dir(".gguf.inp", &names);
    CHECKF(n >= 10, "only %d vector files in %s/vocab", n, t_shared());
    for (int i = 0; i < n; i++) {
        int cases = run_vectors(names[i]);
        printf("     vectors %-14s %d inputs\n", names[i], cases);
    }
    free_names(names, n);
}

/* ---- loading ---- */

static void test_load_all(void) {
    static const struct {
        int n_vocab;
        int32_t bos, eos;
        bool add_bos;
    } want[N_VOCABS] = {
        {64000, 1, 2, true},           /* baichuan (SPM) */
        {256000, 5, 255001, true},     /* command-r */
        {32256, 32013, 32014, true},   /* deepseek-coder */
        {102400, 100000, 100001, true}, /* deepseek-llm */
        {65024, 11, 11, false},        /* falcon */
        {262144, 2, 1, true},          /* gemma-4 (SPM-style BPE) */
        {50257, 50256, 50256, false},  /* gpt-2 */
        {50432, 0, 0, false},          /* gpt-neox (no pre: llama.cpp's default regexes) */
        {128256, 128000, 128001, true}, /* llama-bpe (Llama 3) */
        {32000, 1, 2, true},           /* llama-spm */
        {50432, 0, 0, false},          /* mpt */
        {32064, 1, 32000, true},       /* phi-3 */
        {151936, 151643, 151643, false}, /* qwen2 */
        {151936, 151643, 151643, false}, /* qwen35 */
        {49216, 0, 0, false},          /* refact */
        {49152, 0, 0, false},          /* starcoder */
    };
    /* the list is the directory's */
    char **names;
    int n_names = list_vocab_dir(".gguf", &names);
    CHECKF(n_names == N_VOCABS, "%d vocabularies in %s/vocab, %d listed here", n_names,
           t_shared(), N_VOCABS);
    for (int i = 0; i < n_names && i < N_VOCABS; i++)
        CHECKF(!strcmp(names[i], k_vocabs[i]), "vocabulary %s is not listed here", names[i]);
    free_names(names, n_names);
    for (int i = 0; i < N_VOCABS; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", t_shared(), k_vocabs[i]);
        g_tok[i] = load_path(path);
        CHECKF(g_tok[i] != NULL, "%s failed to load", k_vocabs[i]);
        if (!g_tok[i]) continue;
        CHECKF(tok_n_vocab(g_tok[i]) == want[i].n_vocab, "%s: n_vocab %d", k_vocabs[i],
               tok_n_vocab(g_tok[i]));
        CHECKF(tok_bos(g_tok[i]) == want[i].bos, "%s: bos %d", k_vocabs[i], tok_bos(g_tok[i]));
        CHECKF(tok_eos(g_tok[i]) == want[i].eos, "%s: eos %d", k_vocabs[i], tok_eos(g_tok[i]));
        CHECKF(tok_add_bos(g_tok[i]) == want[i].add_bos, "%s: add_bos", k_vocabs[i]);
        CHECKF(tok_is_eog(g_tok[i], want[i].eos), "%s: eos is not EOG", k_vocabs[i]);
        CHECK(!tok_is_eog(g_tok[i], -1) && !tok_is_eog(g_tok[i], want[i].n_vocab));
        CHECK(tok_text(g_tok[i], -1) == NULL && tok_text(g_tok[i], want[i].n_vocab) == NULL);
        CHECK(tok_piece(g_tok[i], want[i].n_vocab, true, NULL, 0) < 0);
        CHECK(tok_special(g_tok[i], TOK_SPECIAL_COUNT) == -1);
        /* every token's text finds itself */
        for (int32_t id = 0; id < want[i].n_vocab; id += 97) {
            const char *s = tok_text(g_tok[i], id);
            CHECKF(s && tok_find(g_tok[i], s, strlen(s)) == id, "%s: tok_find(text(%d))",
                   k_vocabs[i], id);
        }
    }
    /* specifics */
    tokenizer *t;
    if ((t = vocab("gpt-2"))) {
        CHECK(tok_special(t, TOK_SPECIAL_NL) == 198);
        CHECK(tok_special(t, TOK_SPECIAL_EOT) == 50256); /* <|endoftext|> by text */
        CHECK(strcmp(tok_text(t, 50256), "<|endoftext|>") == 0);
        CHECK(tok_find(t, "Hello", 5) == 15496);
        CHECK(tok_find(t, "no such token at all", 20) == -1);
        CHECK(tok_attr(t, 50256) == TOK_ATTR_CONTROL);
        CHECK(tok_attr(t, 15496) == TOK_ATTR_NORMAL);
    }
    if ((t = vocab("llama-spm"))) {
        CHECK(tok_special(t, TOK_SPECIAL_NL) == 13); /* <0x0A> */
        CHECK(tok_special(t, TOK_SPECIAL_UNK) == 0);
        CHECK(tok_special(t, TOK_SPECIAL_EOT) == -1);
        CHECK(tok_attr(t, 3) == TOK_ATTR_BYTE);
    }
    if ((t = vocab("phi-3"))) {
        CHECK(tok_special(t, TOK_SPECIAL_EOT) == 32007); /* <|end|> */
        CHECK(tok_is_eog(t, 32007) && tok_is_eog(t, 32000) && tok_is_eog(t, 2));
        CHECK(!tok_is_eog(t, 32010)); /* <|user|> */
        CHECK((tok_attr(t, 32010) & (TOK_ATTR_CONTROL | TOK_ATTR_RSTRIP)) ==
              (TOK_ATTR_CONTROL | TOK_ATTR_RSTRIP));
        CHECK(!(tok_attr(t, 32000) & TOK_ATTR_RSTRIP));
    }
    if ((t = vocab("starcoder"))) {
        CHECK(tok_special(t, TOK_SPECIAL_FIM_PRE) == 1);
        CHECK(tok_special(t, TOK_SPECIAL_FIM_MID) == 2);
        CHECK(tok_special(t, TOK_SPECIAL_FIM_SUF) == 3);
        CHECK(tok_special(t, TOK_SPECIAL_FIM_PAD) == 4);
        /* <repo_name> / <file_sep> are not among llama.cpp's known texts */
        CHECK(tok_special(t, TOK_SPECIAL_FIM_REP) == -1);
        CHECK(tok_special(t, TOK_SPECIAL_FIM_SEP) == -1);
        CHECK(tok_is_eog(t, 4));
    }
    if ((t = vocab("deepseek-coder"))) {
        CHECK(tok_special(t, TOK_SPECIAL_FIM_PRE) == 32016); /* <｜fim▁begin｜> */
        CHECK(tok_special(t, TOK_SPECIAL_FIM_SUF) == 32015);
        CHECK(tok_special(t, TOK_SPECIAL_FIM_MID) == 32017);
        CHECK(tok_special(t, TOK_SPECIAL_EOT) == 32014);
    }
    if ((t = vocab("falcon"))) CHECK(tok_special(t, TOK_SPECIAL_NL) == 193);
    /* the one-line description info prints */
    char desc[320];
    if ((t = vocab("qwen35")))
        CHECK(tok_describe(t, desc, sizeof desc) > 0 &&
              !strcmp(desc, "'gpt2' byte-level BPE, 151936 tokens, pre-tokenizer 'qwen35'"));
    if ((t = vocab("gemma-4")))
        CHECK(tok_describe(t, desc, sizeof desc) > 0 &&
              !strcmp(desc, "'gemma4' SentencePiece-style BPE, 262144 tokens, pre-tokenizer 'gemma4'"));
    if ((t = vocab("llama-spm")))
        CHECK(tok_describe(t, desc, sizeof desc) > 0 &&
              !strcmp(desc, "'llama' SentencePiece, 32000 tokens"));
    if ((t = vocab("gpt-2"))) {
        CHECK(tok_describe(t, desc, 8) > 8 && strlen(desc) == 7); /* cut, NUL-terminated */
        CHECK(tok_describe(NULL, desc, sizeof desc) < 0 && tok_describe(t, NULL, 0) < 0);
    }
}

/* ---- stories260K ---- */

static void test_stories(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", t_shared());
    tokenizer *t = load_path(path);
    CHECK(t != NULL);
    if (!t) return;
    const char *s = "Once upon a time";
    int32_t ids[16];
    int n = tok_encode(t, s, strlen(s), tok_add_bos(t), false, ids, 16);
    static const int32_t want[] = {1, 403, 407, 261, 378};
    CHECKF(n == 5 && !memcmp(ids, want, sizeof want), "got %d ids", n);
    /* the count is returned even when it does not fit */
    int32_t two[2] = {-7, -7};
    CHECK(tok_encode(t, s, strlen(s), true, false, two, 2) == 5 && two[0] == 1 && two[1] == 403);
    CHECK(tok_encode(t, s, strlen(s), true, false, NULL, 0) == 5);
    CHECK(tok_encode(t, "", 0, true, false, ids, 16) == 1 && ids[0] == 1);
    CHECK(tok_encode(t, "", 0, false, false, ids, 16) == 0);
    char *out = NULL;
    size_t len = 0;
    CHECK(tok_decode(t, ids, 0, false, &out, &len) == 0 && out && len == 0 && out[0] == 0);
    free(out);
    n = tok_encode(t, s, strlen(s), true, false, ids, 16);
    CHECK(tok_decode(t, ids, n, false, &out, &len) == 0 && len == strlen(s) && !strcmp(out, s));
    free(out);
    CHECK(tok_decode(t, ids, n, true, &out, &len) == 0 && !strcmp(out, "<s>Once upon a time"));
    free(out);
    int32_t bad[2] = {1, 512};
    CHECK(tok_decode(t, bad, 2, false, &out, &len) < 0 && out == NULL);
    char piece[8];
    CHECK(tok_piece(t, 403, false, piece, 8) == 5 && !memcmp(piece, " Once", 5));
    CHECK(tok_piece(t, 1, false, piece, 8) == 0);           /* control: nothing */
    CHECK(tok_piece(t, 1, true, piece, 8) == 3 && !memcmp(piece, "<s>", 3));
    CHECK(tok_piece(t, 3 + 0x41, false, piece, 8) == 1 && piece[0] == 'A'); /* <0x41> */
    CHECK(tok_piece(t, 403, false, piece, 2) == 5 && piece[0] == ' ' && piece[1] == 'O');
    tok_free(t);
}

/* ---- round trips ---- */

static const char *const k_texts[] = {
    "Hello world",
    " Hello world",
    "  leading spaces and trailing   ",
    "\n\nnewlines\n at \r\n the start\n",
    "tabs\tand\t\tmixed \t \n whitespace",
    "The quick brown fox jumps over the lazy dog. 1234567890 3.14159 -42",
    "I've been 'told' he's there, 'RE you sure? 'M not sure I'll make it, 'D you like tea?",
    "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE6\x96\x87\xE7\xAB\xA0\xE3\x81\xA8\xE4\xB8\xAD\xE6\x96\x87\xE5\xAD\x97",
    "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4 \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xCE\xB1\xCE\xB2\xCE\xB3 \xD8\xA7\xD9\x84\xD8\xB9\xD8\xB1\xD8\xA8\xD9\x8A\xD8\xA9",
    "emoji \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 \xE2\x9C\x85!",
    "code: int main(void) { return x->y[0] >= 3 ? a : b; } // done",
    "    def f(x):\n        return x ** 2\n\n\n",
    "\xC3\x84pfel \xC3\xB6\xC3\xBC\xC3\x9F caf\xC3\xA9 na\xC3\xAFve",
    "a",
    " ",
    "\n",
    "!!!???...,,,",
    "\xE2\x80\x83\xC2\xA0 unicode spaces \xE3\x80\x80 here\xC2\x85",
};

static void test_round_trip_text(void) {
    for (int v = 0; v < N_VOCABS; v++) {
        tokenizer *t = g_tok[v];
        if (!t) continue;
        for (size_t i = 0; i < sizeof k_texts / sizeof k_texts[0]; i++) {
            const char *s = k_texts[i];
            for (int bos = 0; bos < 2; bos++) {
                int32_t *ids = NULL;
                int n = encode(t, s, strlen(s), bos, false, &ids);
                char *out = NULL;
                size_t len = 0;
                int rc = n >= 0 ? tok_decode(t, ids, n, false, &out, &len) : n;
                bool ok = rc == 0 && len == strlen(s) && !memcmp(out, s, len);
                CHECKF(ok, "%s: round trip of text %zu (bos %d)", k_vocabs[v], i, bos);
                if (!ok && out) {
                    fprintf(stderr, "    in:  ");
                    print_escaped(stderr, s, strlen(s));
                    fprintf(stderr, "\n    out: ");
                    print_escaped(stderr, out, len);
                    fputc('\n', stderr);
                }
                free(out);
                free(ids);
            }
        }
    }
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* A byte is "representable" when the one-byte string b round-trips on its own:
 * every byte for SPM vocabularies with <0xNN> tokens; for byte-level BPE the bytes
 * whose mapped character is a NORMAL token (llama.cpp drops bytes without a
 * token; deepseek's added USER_DEFINED tokens for bytes C0 C1 F5..FF render as
 * their UTF-8 text, and several vocabularies lack rare control bytes). */
static void representable(const tokenizer *t, bool ok[256]) {
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        int32_t ids[8];
        int n = tok_encode(t, &c, 1, false, false, ids, 8);
        char *out = NULL;
        size_t len = 0;
        ok[b] = n > 0 && n <= 8 && tok_decode(t, ids, n, false, &out, &len) == 0 && len == 1 &&
                out[0] == c;
        free(out);
    }
}

/* Random byte strings, invalid UTF-8 included, over each vocabulary's
 * representable bytes. Asserted:
 *  - encoding never fails and every id is in range (ASan/UBSan watch the rest);
 *  - decode(encode(x)) == x byte for byte, except for SPM inputs containing
 *    E2 96 81 (U+2581 itself decodes to a space);
 *  - which bytes are representable: all 256 for the SPM vocabularies and gpt-2. */
static void test_round_trip_bytes(void) {
    char buf[96];
    for (int v = 0; v < N_VOCABS; v++) {
        tokenizer *t = g_tok[v];
        if (!t) continue;
        bool spm = tok_find(t, "<0x41>", 6) >= 0;
        bool ok[256];
        representable(t, ok);
        unsigned char allowed[256];
        int n_allowed = 0;
        for (int b = 0; b < 256; b++)
            if (ok[b]) allowed[n_allowed++] = (unsigned char)b;
        if (spm || !strcmp(k_vocabs[v], "gpt-2"))
            CHECKF(n_allowed == 256, "%s: only %d bytes representable", k_vocabs[v], n_allowed);
        CHECKF(n_allowed >= 200, "%s: only %d bytes representable", k_vocabs[v], n_allowed);
        int fails = 0;
        for (int it = 0; it < 120 && n_allowed; it++) {
            size_t len = 1 + rnd() % (sizeof buf - 1);
            for (size_t i = 0; i < len; i++) {
                uint32_t r = rnd();
                unsigned char c = allowed[r % (uint32_t)n_allowed];
                if ((r >> 8) % 3 == 0) c = " \n\tab<>|.0"[(r >> 12) % 10]; /* some structure */
                buf[i] = (char)c;
            }
            if (spm && memmem(buf, len, "\xE2\x96\x81", 3)) continue;
            int32_t *ids = NULL;
            int n = encode(t, buf, len, false, false, &ids);
            CHECKF(n >= 0, "%s: encode failed on random bytes", k_vocabs[v]);
            bool in_range = true;
            for (int i = 0; i < n; i++) in_range &= ids[i] >= 0 && ids[i] < tok_n_vocab(t);
            CHECK(in_range);
            char *out = NULL;
            size_t olen = 0;
            if (n >= 0 && tok_decode(t, ids, n, false, &out, &olen) == 0) {
                if (olen != len || memcmp(out, buf, len)) {
                    if (!fails++) {
                        fprintf(stderr, "  %s: random bytes do not round-trip: ", k_vocabs[v]);
                        print_escaped(stderr, buf, len);
                        fputc('\n', stderr);
                    }
                }
            } else {
                fails++;
            }
            free(out);
            free(ids);
        }
        CHECKF(fails == 0, "%s: %d random strings failed", k_vocabs[v], fails);
    }
}

/* Known tokenizations that pin the pre-tokenizers without vectors and the
 * byte-fallback path. */
static void test_known_ids(void) {
    tokenizer *t;
    int32_t ids[64];
    int n;
    if ((t = vocab("llama-spm"))) {
        /* an emoji outside the vocabulary falls back to its 4 byte tokens */
        n = tok_encode(t, "\xF0\x9F\xA6\x99", 4, false, false, ids, 64);
        static const int32_t want[] = {29871, 3 + 0xF0, 3 + 0x9F, 3 + 0xA6, 3 + 0x99};
        CHECKF(n == 5 && !memcmp(ids, want, sizeof want), "got %d ids", n);
        /* a lone invalid byte */
        n = tok_encode(t, "\xFF", 1, false, false, ids, 64);
        CHECK(n == 2 && ids[0] == 29871 && ids[1] == 3 + 0xFF);
    }
    if ((t = vocab("gpt-2"))) {
        /* invalid UTF-8 keeps its bytes: byte 0xFF is the character U+00FF */
        n = tok_encode(t, "a\xFF", 2, false, false, ids, 64);
        CHECK(n >= 1 && n <= 2);
        char *out = NULL;
        size_t len;
        CHECK(tok_decode(t, ids, n, false, &out, &len) == 0 && len == 2 && !memcmp(out, "a\xFF", 2));
        free(out);
        /* words split by the GPT-2 regex: "Hello" " world" "!!" */
        n = tok_encode(t, "Hello world!!", 13, false, false, ids, 64);
        CHECK(n == 3 && ids[0] == 15496 && ids[1] == 995 && ids[2] == 3228);
    }
}

/* ---- pre-tokenizer splits (llama.cpp's regex semantics) ---- */

/* words: expected pieces separated by '|' (no piece contains '|'). */
static void check_split(const char *pre, const char *text, size_t len, const char *words) {
    tok_pretok *p = NULL;
    tok_pre_flags flags = {0};
    llc_err err;
    CHECKF(tok_pretok_create(pre, strlen(pre), &p, &flags, &err) == 0, "%s", pre);
    if (!p) return;
    tok_span *w = NULL;
    size_t n = 0;
    CHECK(tok_pretok_split(p, text, len, &w, &n) == 0);
    char got[512];
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < sizeof got; i++) {
        if (i) got[k++] = '|';
        for (size_t j = w[i].start; j < w[i].end && k + 1 < sizeof got; j++) got[k++] = text[j];
    }
    got[k] = 0;
    bool ok = !strcmp(got, words);
    CHECKF(ok, "%s split of text:", pre);
    if (!ok) {
        fprintf(stderr, "    want ");
        print_escaped(stderr, words, strlen(words));
        fprintf(stderr, "\n    got  ");
        print_escaped(stderr, got, k);
        fputc('\n', stderr);
    }
    free(w);
    tok_pretok_free(p);
}
#define SPLIT(pre, lit, words) check_split(pre, lit, sizeof(lit) - 1, words)

static void test_pretok_splits(void) {
    SPLIT("gpt-2", "a   b", "a|  | b");             /* \s+(?!\S) leaves one space */
    SPLIT("gpt-2", "a   ", "a|   ");                /* ... but takes all at the end */
    SPLIT("gpt-2", "I'm 12,345!!", "I|'m| 12|,|345|!!");
    SPLIT("gpt-2", "x\xC2\x85\xC2\x85y", "x|\xC2\x85|\xC2\x85|y"); /* U+0085 is whitespace */
    SPLIT("gpt-2", "x\xE3\x80\x80\xE3\x80\x80y", "x|\xE3\x80\x80|\xE3\x80\x80|y");
    SPLIT("gpt-2", "a\xFF\xFE!b", "a|\xFF\xFE!|b");   /* invalid bytes match as U+FFFD */
    SPLIT("gpt-2", "\xC3", "\xC3");
    SPLIT("llama3", "Hello\n\n  world123456", "Hello|\n\n| | world|123|456");
    SPLIT("llama3", "DON'T stop", "DON|'T| stop");
    SPLIT("llama3", "x \t\n y", "x| \t\n| y");
    SPLIT("qwen2", "ab123", "ab|1|2|3");
    SPLIT("starcoder", "x1234 y", "x|1|2|3|4| y");
    SPLIT("falcon", "a,b 12345", "a|,|b| |123|45"); /* [0-9]{3} splits every piece */
    SPLIT("deepseek-llm", "ab 12  \n", "ab| |12|  |\n");  /* \s+$ only at the very end */
    SPLIT("deepseek-coder", "if(x1)\n", "if|(|x|1|)|\n");
    SPLIT("superbpe", "1234567", "1|234|567");         /* empty lookahead matches split */
    SPLIT("default", "a+=12345", "a|+=|123|45");
    SPLIT("tiny_aya", "1234567 helloWorld", "1|234|567| helloWorld"); /* \p{Lu}/\p{Ll} = \p{L} */
    SPLIT("gpt-4o", "helloWorld HTTPServer", "hello|World| HTTPServer");
}

/* ---- streaming ---- */

static void stream_matches(const tokenizer *t, const char *name, const int32_t *ids, int n,
                           bool special, int cap) {
    char *want = NULL;
    size_t want_len = 0;
    CHECK(tok_decode(t, ids, n, special, &want, &want_len) == 0);
    tok_stream *s = NULL;
    CHECK(tok_stream_create(t, special, &s) == 0 && s);
    if (!s || !want) {
        free(want);
        tok_stream_free(s);
        return;
    }
    char *got = malloc(want_len * 2 + 64);
    size_t k = 0;
    char piece[256];
    bool valid = true;
    for (int i = 0; i < n; i++) {
        int m = tok_stream_push(s, ids[i], piece, cap);
        CHECK(m >= 0 && m < cap && piece[m] == 0);
        if (m < 0) break;
        memcpy(got + k, piece, (size_t)m);
        k += (size_t)m;
    }
    for (int guard = 0; guard < 10000; guard++) {
        int m = tok_stream_flush(s, piece, cap);
        CHECK(m >= 0);
        if (m <= 0) break;
        memcpy(got + k, piece, (size_t)m);
        k += (size_t)m;
    }
    CHECK(tok_stream_pending(s) == 0);
    valid = k == want_len && !memcmp(got, want, k);
    CHECKF(valid, "%s: stream (cap %d) differs from decode: %zu vs %zu bytes", name, cap, k,
           want_len);
    free(got);
    free(want);
    tok_stream_free(s);
}

static void test_stream(void) {
    for (int v = 0; v < N_VOCABS; v++) {
        tokenizer *t = g_tok[v];
        if (!t) continue;
        for (size_t i = 0; i < sizeof k_texts / sizeof k_texts[0]; i++) {
            int32_t *ids = NULL;
            int n = encode(t, k_texts[i], strlen(k_texts[i]), true, false, &ids);
            if (n < 0) continue;
            stream_matches(t, k_vocabs[v], ids, n, false, 256);
            stream_matches(t, k_vocabs[v], ids, n, true, 256);
            stream_matches(t, k_vocabs[v], ids, n, false, 5); /* tiny buffer: queued text */
            free(ids);
        }
    }
    /* an emoji split over byte tokens comes out whole, on its last byte */
    tokenizer *t = vocab("llama-spm");
    if (t) {
        int32_t ids[] = {1, 15043, 3 + 0xF0, 3 + 0x9F, 3 + 0xA6, 3 + 0x99, 29991};
        tok_stream *s = NULL;
        CHECK(tok_stream_create(t, false, &s) == 0);
        char out[64];
        static const char *const want[] = {"", "Hello", "", "", "", "\xF0\x9F\xA6\x99", "!"};
        for (int i = 0; i < 7; i++) {
            int m = tok_stream_push(s, ids[i], out, sizeof out);
            CHECKF(m == (int)strlen(want[i]) && !strcmp(out, want[i]), "push %d gave %d", i, m);
        }
        CHECK(tok_stream_flush(s, out, sizeof out) == 0);
        /* an unfinished sequence at the end becomes U+FFFD on flush */
        CHECK(tok_stream_push(s, 3 + 0xE6, out, sizeof out) == 0);
        CHECK(tok_stream_pending(s) == 1);
        CHECK(tok_stream_flush(s, out, sizeof out) == 3 && !strcmp(out, "\xEF\xBF\xBD"));
        /* a byte that can never start a sequence is replaced at once; the next
         * character is not held back by it */
        CHECK(tok_stream_push(s, 3 + 0xFF, out, sizeof out) == 3 && !strcmp(out, "\xEF\xBF\xBD"));
        CHECK(tok_stream_push(s, 3 + 0xC3, out, sizeof out) == 0);
        CHECK(tok_stream_push(s, 3 + 'A', out, sizeof out) == 4 && !strcmp(out, "\xEF\xBF\xBD" "A"));
        /* bad ids leave the stream alone */
        CHECK(tok_stream_push(s, -1, out, sizeof out) < 0);
        CHECK(tok_stream_push(s, 32000, out, sizeof out) < 0);
        CHECK(tok_stream_push(s, 1, out, 0) < 0);
        tok_stream_free(s);
        tok_stream_free(NULL);
    }
}

/* A stream that continues a prompt keeps the first token's leading space (the
 * reference continues "Once upon a time" with ", there was": token 432 is
 * ", " and 286 is " was"); after BOS alone it drops it, as at any text's start. */
static void test_stream_continue(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", t_shared());
    tokenizer *t = load_path(path);
    CHECK(t != NULL);
    if (!t) return;
    const char *p = "Once upon a time, there";
    int32_t ids[32];
    int n = tok_encode(t, p, strlen(p), true, false, ids, 32);
    CHECK(n > 1 && n < 32);
    int32_t was = tok_find(t, "\xE2\x96\x81was", strlen("\xE2\x96\x81was")); /* "▁was" */
    CHECK(was >= 0);
    char out[64];
    tok_stream *s = NULL;
    CHECK(tok_stream_create(t, false, &s) == 0);
    tok_stream_continue(s, ids, n);
    int m = tok_stream_push(s, was, out, sizeof out);
    CHECKF(m == 4 && !strcmp(out, " was"), "after the prompt: '%s'", out);
    /* the whole text decodes the same way */
    ids[n] = was;
    char *full = NULL;
    CHECK(tok_decode(t, ids, n + 1, false, &full, NULL) == 0 && full && !strcmp(full, "Once upon a time, there was"));
    free(full);
    tok_stream_free(s);
    /* BOS alone is no text yet; neither is no prompt */
    int32_t bos = ids[0];
    CHECK(tok_stream_create(t, false, &s) == 0);
    tok_stream_continue(s, &bos, 1);
    m = tok_stream_push(s, was, out, sizeof out);
    CHECKF(m == 3 && !strcmp(out, "was"), "after BOS only: '%s'", out);
    tok_stream_free(s);
    CHECK(tok_stream_create(t, false, &s) == 0);
    tok_stream_continue(s, ids, 0);
    m = tok_stream_push(s, was, out, sizeof out);
    CHECKF(m == 3 && !strcmp(out, "was"), "without a prompt: '%s'", out);
    tok_stream_free(s);
    tok_free(t);
}

/* ---- special tokens ---- */

static void test_parse_special(void) {
    tokenizer *t = vocab("phi-3");
    if (t) {
        const char *s = "<|user|>\nHi<|end|>";
        int32_t *a = NULL, *b = NULL;
        int na = encode(t, s, strlen(s), false, true, &a);
        int nb = encode(t, s, strlen(s), false, false, &b);
        /* parsed: <|user|>, the newline after it stripped (RSTRIP), " Hi", <|end|> */
        static const int32_t want[] = {32010, 6324, 32007};
        CHECKF(na == 3 && !memcmp(a, want, sizeof want), "parsed: %d ids", na);
        bool has_marker = false;
        for (int i = 0; i < nb; i++) has_marker |= b[i] == 32010 || b[i] == 32007;
        CHECKF(nb > 5 && !has_marker, "unparsed: %d ids", nb);
        char *out = NULL;
        size_t len;
        CHECK(tok_decode(t, b, nb, false, &out, &len) == 0 && !strcmp(out, s));
        free(out);
        CHECK(tok_decode(t, a, na, true, &out, &len) == 0 && !strcmp(out, "<|user|> Hi<|end|>"));
        free(out);
        CHECK(tok_decode(t, a, na, false, &out, &len) == 0 && !strcmp(out, " Hi"));
        free(out);
        free(a);
        free(b);
    }
    t = vocab("gpt-2");
    if (t) {
        const char *s = "a<|endoftext|>b";
        int32_t ids[32];
        int n = tok_encode(t, s, strlen(s), false, true, ids, 32);
        CHECK(n == 3 && ids[0] == 64 && ids[1] == 50256 && ids[2] == 65);
        n = tok_encode(t, s, strlen(s), false, false, ids, 32);
        CHECK(n > 3);
        for (int i = 0; i < n; i++) CHECK(ids[i] != 50256);
    }
    t = vocab("deepseek-llm");
    if (t) {
        /* USER_DEFINED added tokens match even without parse_special (llama.cpp, HF) */
        const char *s = "x\xC3\xB8y"; /* "xøy": ø is added token 100002 */
        int32_t ids[16];
        int n = tok_encode(t, s, strlen(s), false, false, ids, 16);
        CHECK(n == 3 && ids[1] == 100002);
        /* CONTROL begin-of-sentence only with parse_special */
        const char *bos = "<\xEF\xBD\x9C" "begin\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>";
        n = tok_encode(t, bos, strlen(bos), false, true, ids, 16);
        CHECK(n == 1 && ids[0] == 100000);
        n = tok_encode(t, bos, strlen(bos), false, false, ids, 16);
        CHECK(n > 1);
    }
}

/* ---- hostile metadata ---- */

static int load_mem(gguf_writer *w, tokenizer **out, llc_err *err) {
    uint8_t *buf = NULL;
    size_t size = 0;
    gguf *g = NULL;
    *out = NULL;
    int rc = gguf_writer_to_memory(w, &buf, &size, err);
    if (!rc) rc = gguf_open_memory(buf, size, &g, err);
    if (!rc) rc = tok_load(g, out, err);
    gguf_free(g);
    free(buf);
    gguf_writer_free(w);
    return rc;
}

static void test_hostile(void) {
    static const char *const toks[] = {"<unk>", "<s>", "</s>", "a", "b", "ab", "\xC4\xA0"};
    const int32_t types[] = {2, 3, 3, 1, 1, 1, 1};
    const float scores[] = {0, 0, 0, -1, -2, -0.5f, -3};
    gguf_writer *w;
    tokenizer *t;
    llc_err err;

    /* a small valid SPM vocabulary works, with an out-of-range eos ignored */
    gguf_writer_create(&w);
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 7);
    gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, 7);
    gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, 7);
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 99999);
    gguf_w_i32(w, "tokenizer.ggml.padding_token_id", -1);
    CHECK(load_mem(w, &t, &err) == 0 && t);
    if (t) {
        CHECK(tok_eos(t) == 2 && tok_special(t, TOK_SPECIAL_PAD) == -1);
        int32_t ids[16];
        /* no byte tokens: unknown characters fall back to <unk>; "ab" merges */
        int n = tok_encode(t, "ab", 2, false, false, ids, 16);
        CHECK(n >= 2 && ids[n - 1] == 5);
        n = tok_encode(t, "\xFF\x00 zz", 5, true, true, ids, 16);
        CHECK(n > 0);
        tok_free(t);
    }

    /* missing model, unsupported model, missing/mistyped tokens, empty vocab */
    gguf_writer_create(&w);
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 7);
    CHECK(load_mem(w, &t, &err) == LLC_ERR_NOTFOUND && !t);
    static const char *const unsupported[] = {"bert", "t5", "rwkv", "none", "no_vocab"};
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++) {
        gguf_writer_create(&w);
        gguf_w_str(w, "tokenizer.ggml.model", unsupported[i]);
        gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 7);
        CHECK(load_mem(w, &t, &err) == LLC_ERR_UNSUPPORTED && !t);
        CHECKF(strstr(err.msg, unsupported[i]) != NULL, "message: %s", err.msg);
    }
    gguf_writer_create(&w);
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    CHECK(load_mem(w, &t, &err) < 0 && !t);
    gguf_writer_create(&w);
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr(w, "tokenizer.ggml.tokens", GGUF_TYPE_INT32, types, 7);
    CHECK(load_mem(w, &t, &err) < 0 && !t);
    gguf_writer_create(&w);
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 0);
    CHECK(load_mem(w, &t, &err) == LLC_ERR_FORMAT && !t);
    gguf_writer_create(&w);
    gguf_w_u32(w, "tokenizer.ggml.model", 7);
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 7);
    CHECK(load_mem(w, &t, &err) == LLC_ERR_TYPE && !t);

    /* short or mistyped scores / types, mistyped ids and flags */
    gguf_writer_create(&w);
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 7);
    gguf_w_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, 3);
    CHECK(load_mem(w, &t, &err) == LLC_ERR_FORMAT && !t);
    gguf_writer_create(&w);
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 7);
    gguf_w_arr_str(w, "tokenizer.ggml.token_type", toks, 7);
    CHECK(load_mem(w, &t, &err) == LLC_ERR_TYPE && !t);
    gguf_writer_create(&w);
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 7);
    gguf_w_str(w, "tokenizer.ggml.bos_token_id", "1");
    CHECK(load_mem(w, &t, &err) == LLC_ERR_TYPE && !t);
    gguf_writer_create(&w);
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 7);
    gguf_w_u32(w, "tokenizer.ggml.add_bos_token", 1);
    CHECK(load_mem(w, &t, &err) == LLC_ERR_TYPE && !t);

    /* duplicate tokens */
    static const char *const dup[] = {"a", "b", "a"};
    gguf_writer_create(&w);
    gguf_w_str(w, "tokenizer.ggml.model", "llama");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", dup, 3);
    CHECK(load_mem(w, &t, &err) == LLC_ERR_FORMAT && !t);

    /* BPE: merges missing, mistyped, and odd but harmless */
    gguf_writer_create(&w);
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 7);
    CHECK(load_mem(w, &t, &err) == LLC_ERR_NOTFOUND && !t);
    gguf_writer_create(&w);
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 7);
    gguf_w_arr(w, "tokenizer.ggml.merges", GGUF_TYPE_INT32, types, 7);
    CHECK(load_mem(w, &t, &err) == LLC_ERR_TYPE && !t);
    static const char *const merges[] = {"a b", "", " ", "a", "ab  b", "no_space", "a b", "x y z"};
    gguf_writer_create(&w);
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "some-future-pre-tokenizer");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 7);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, 8);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 1);
    CHECK(load_mem(w, &t, &err) == 0 && t);
    if (t) {
        int32_t ids[16];
        int n = tok_encode(t, "ab ab", 5, false, false, ids, 16);
        /* "ab" merges; " ab" is Ġ a b -> Ġ ab (no Ġab token) */
        CHECK(n == 3 && ids[0] == 5 && ids[1] == 6 && ids[2] == 5);
        CHECK(tok_add_bos(t) == false);
        n = tok_encode(t, "\xFFzz\x80", 4, true, true, ids, 16); /* nothing maps: only BOS */
        CHECK(n == 1 && ids[0] == 1);
        tok_free(t);
    }
    /* SentencePiece-style BPE (gemma4): spaces are U+2581, merges run over
     * characters, newline runs that are tokens stay whole, <0xNN> byte fallback */
    {
        static const char *const gtoks[] = {
            "<pad>", "<eos>", "<bos>", "<unk>", "\xE2\x96\x81", "a", "b", "ab",
            "\xE2\x96\x81" "ab", "\n", "\n\n", "<0x63>", "\xC3\xA9"};
        const int32_t gtypes[] = {3, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 6, 1};
        static const char *const gmerges[] = {"a b", "\xE2\x96\x81 ab"};
        gguf_writer_create(&w);
        gguf_w_str(w, "tokenizer.ggml.model", "gemma4");
        gguf_w_str(w, "tokenizer.ggml.pre", "gpt-2"); /* ignored, as in llama.cpp */
        gguf_w_arr_str(w, "tokenizer.ggml.tokens", gtoks, 13);
        gguf_w_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, gtypes, 13);
        gguf_w_arr_str(w, "tokenizer.ggml.merges", gmerges, 2);
        gguf_w_u32(w, "tokenizer.ggml.bos_token_id", 2);
        gguf_w_bool(w, "tokenizer.ggml.add_bos_token", false); /* overridden */
        CHECK(load_mem(w, &t, &err) == 0 && t);
        if (t) {
            int32_t ids[16];
            CHECK(tok_add_bos(t) && tok_bos(t) == 2 && tok_eos(t) == -1);
            int n = tok_encode(t, "ab ab", 5, true, false, ids, 16);
            CHECKF(n == 3 && ids[0] == 2 && ids[1] == 7 && ids[2] == 8, "%d ids", n);
            /* a run of newlines that is a token is taken whole, though no merge
             * makes it; one that is not falls apart into single newlines */
            n = tok_encode(t, "a\n\nb", 4, false, false, ids, 16);
            CHECKF(n == 3 && ids[0] == 5 && ids[1] == 10 && ids[2] == 6, "%d ids", n);
            n = tok_encode(t, "\n\n\n", 3, false, false, ids, 16);
            CHECKF(n == 3 && ids[0] == 9 && ids[1] == 9 && ids[2] == 9, "%d ids", n);
            /* characters: \xC3\xA9 is one symbol; c falls back to <0x63>; d has no
             * token at all and vanishes */
            n = tok_encode(t, "\xC3\xA9" "cd", 4, false, false, ids, 16);
            CHECKF(n == 2 && ids[0] == 12 && ids[1] == 11, "%d ids", n);
            char *out = NULL;
            int32_t dec[] = {2, 7, 8, 4, 11, 9};
            CHECK(tok_decode(t, dec, 6, false, &out, NULL) == 0 && out &&
                  !strcmp(out, "ab ab c\n"));
            free(out);
            CHECK(tok_special(t, TOK_SPECIAL_NL) == 9);
            tok_free(t);
        }
    }
    /* an unknown pre-tokenizer: GPT-2's regex stands in, and the description says so */
    gguf_writer_create(&w);
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "brand-new");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 7);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, 1);
    CHECK(load_mem(w, &t, &err) == 0 && t);
    if (t) {
        char desc[320];
        CHECK(tok_describe(t, desc, sizeof desc) > 0 &&
              strstr(desc, "pre-tokenizer 'brand-new' is not known here: GPT-2's regex stands in"));
        tok_free(t);
    }
    /* a byte-level pre-tokenizer llama.cpp handles with custom code: refused */
    gguf_writer_create(&w);
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "kimi-k2");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 7);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, 1);
    CHECK(load_mem(w, &t, &err) == LLC_ERR_UNSUPPORTED && !t);

    /* a NULL error carrier is allowed */
    {
        gguf_writer_create(&w);
        gguf_w_str(w, "tokenizer.ggml.model", "bert");
        uint8_t *buf = NULL;
        size_t size = 0;
        gguf *g = NULL;
        CHECK(gguf_writer_to_memory(w, &buf, &size, NULL) == 0);
        gguf_writer_free(w);
        CHECK(buf && gguf_open_memory(buf, size, &g, NULL) == 0);
        t = (tokenizer *)1;
        CHECK(g && tok_load(g, &t, NULL) == LLC_ERR_UNSUPPORTED && t == NULL);
        gguf_free(g);
        free(buf);
    }
    tok_free(NULL);
    CHECK(tok_encode(NULL, "a", 1, false, false, NULL, 0) < 0);
}

/* Every known pre-tokenizer name compiles and splits text sensibly: the round
 * trip holds on the gpt-2 vocabulary with each of them. */
static void test_all_pretokenizers(void) {
    static const char *const pres[] = {
        "default", "llama3", "llama-bpe", "dbrx", "jais-2", "deepseek-llm", "deepseek-v3",
        "spark2_5", "youtu", "deepseek-coder", "falcon", "starcoder", "refact", "command-r",
        "smollm", "gpt-2", "mpt", "olmo", "qwen2", "stablelm2", "qwen35", "poro-chat", "bloom",
        "chatglm-bpe", "glm4", "viking", "tekken", "chameleon", "gpt-4o", "llama4",
        "granite-embed-multi-97m", "tiny_aya", "superbpe", "bailingmoe", "seed-coder",
        "ufakzeka", "grok-2", "laguna", "minicpm5", "exaone-moe", "jina-v2-code",
    };
    char path[512];
    snprintf(path, sizeof path, "%s/vocab/ggml-vocab-gpt-2.gguf", t_shared());
    gguf *src = NULL;
    llc_err err;
    CHECK(gguf_open(path, &src, &err) == 0);
    if (!src) return;
    for (size_t i = 0; i < sizeof pres / sizeof *pres; i++) {
        gguf_writer *w;
        gguf_writer_create(&w);
        gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
        gguf_w_str(w, "tokenizer.ggml.pre", pres[i]);
        gguf_w_copy(w, src, "tokenizer.ggml.tokens");
        gguf_w_copy(w, src, "tokenizer.ggml.merges");
        gguf_w_copy(w, src, "tokenizer.ggml.token_type");
        tokenizer *t;
        int rc = load_mem(w, &t, &err);
        CHECKF(rc == 0, "pre '%s': %s", pres[i], err.msg);
        if (rc) continue;
        for (size_t k = 0; k < sizeof k_texts / sizeof *k_texts; k++) {
            int32_t *ids = NULL;
            int n = encode(t, k_texts[k], strlen(k_texts[k]), false, false, &ids);
            char *out = NULL;
            size_t len = 0;
            bool ok = n > 0 && tok_decode(t, ids, n, false, &out, &len) == 0 &&
                      len == strlen(k_texts[k]) && !memcmp(out, k_texts[k], len);
            CHECKF(ok, "pre '%s': text %zu does not round-trip", pres[i], k);
            free(out);
            free(ids);
        }
        /* one pinned split per family: digits */
        int32_t ids[32];
        int n = tok_encode(t, "12345", 5, false, false, ids, 32);
        CHECKF(n > 0, "pre '%s'", pres[i]);
        tok_free(t);
    }
    gguf_free(src);
}

/* Not a test: frees what test_load_all loaded (LeakSanitizer checks the rest). */
static void free_all(void) {
    for (int i = 0; i < N_VOCABS; i++) {
        tok_free(g_tok[i]);
        g_tok[i] = NULL;
    }
}

int main(void) {
    RUN(test_load_all);
    RUN(test_vectors);
    RUN(test_stories);
    RUN(test_known_ids);
    RUN(test_pretok_splits);
    RUN(test_round_trip_text);
    RUN(test_round_trip_bytes);
    RUN(test_stream);
    RUN(test_stream_continue);
    RUN(test_parse_special);
    RUN(test_hostile);
    RUN(test_all_pretokenizers);
    free_all();
    return t_summary();
}
