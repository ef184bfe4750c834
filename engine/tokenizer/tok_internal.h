/* tok_internal.h — what the tokenizer's files share and nobody else sees: the
 * tokenizer struct, the string pool with its hash index (tok_pool.c), the
 * pre-tokenizer (tok_pretok.c), the BPE merge tables (tok_bpe.c), the SPM
 * encoder (tok_spm.c) and a growable id vector. */
#ifndef LLC_TOK_INTERNAL_H
#define LLC_TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/common.h"
#include "engine/tokenizer/tokenizer.h"

/* Hard limits on untrusted vocabularies. */
#define TOK_MAX_VOCAB (1 << 22)   /* tokens */
#define TOK_MAX_MERGES (1 << 23)  /* merge rules */
#define TOK_MAX_TEXT ((size_t)1 << 28) /* bytes of text one tok_encode accepts */

/* ---- tok_pool.c: append-only byte strings + hash index (string -> index) ---- */
typedef struct tok_pool {
    char *buf;       /* strings, each followed by a NUL */
    size_t used, cap; /* bytes */
    size_t *off;     /* [n] start of string i in buf */
    uint32_t *len;   /* [n] length of string i (without the NUL) */
    uint32_t *hash;  /* [n] low 32 bits of its hash */
    int32_t n, ncap;
    int32_t *slots;  /* hash index: string index or -1; size mask+1 (power of 2) */
    uint32_t mask;
} tok_pool;

void tok_pool_free(tok_pool *p);
/* Reserves room for n strings of total size bytes (an optimisation only). */
int tok_pool_reserve(tok_pool *p, int32_t n, size_t bytes);
/* Appends a string (duplicates allowed: the index finds the first); returns its
 * index or a negative code. */
int32_t tok_pool_add(tok_pool *p, const char *s, size_t len);
/* Index of s, or -1. */
int32_t tok_pool_find(const tok_pool *p, const char *s, size_t len);
/* Index of s, adding it if absent; negative code on failure. */
int32_t tok_pool_intern(tok_pool *p, const char *s, size_t len);
static inline const char *tok_pool_str(const tok_pool *p, int32_t i) { return p->buf + p->off[i]; }

/* ---- growable id vector ---- */
typedef struct tok_ids {
    int32_t *v;
    size_t n, cap;
    bool oom;  /* a push failed; the content is incomplete */
} tok_ids;
void tok_ids_push(tok_ids *ids, int32_t id);

/* ---- tok_pretok.c: regex pre-tokenizer of BPE ---- */
typedef struct tok_pretok tok_pretok;
/* What a pre-tokenizer type implies for the rest of the BPE tokenizer (llama.cpp's
 * per-type settings). */
typedef struct tok_pre_flags {
    bool ignore_merges; /* a word that is a whole token is taken as is */
    bool add_bos;       /* add BOS by default (the GGUF's add_bos_token may override) */
    bool force_bos;     /* add BOS whatever the GGUF says (gemma4) */
    bool bos_none;      /* the vocabulary has no default BOS */
    bool raw_utf8;      /* merges run over UTF-8 characters, not GPT-2's byte
                         * characters; unknown symbols fall back to <0xXX> tokens */
    bool escape_ws;     /* spaces are written U+2581 in the vocabulary (SPM-style BPE) */
    bool newline_runs;  /* a word of newlines that is a token is taken whole (gemma4) */
    bool unknown;       /* the name is not known: GPT-2's regex stands in for it */
} tok_pre_flags;
/* Builds the pre-tokenizer named by tokenizer.ggml.pre (pre == NULL: missing) and
 * sets the flags its type implies (fields it has no opinion on are left alone).
 * LLC_ERR_UNSUPPORTED for pre-tokenizers llama.cpp implements with custom code. */
int tok_pretok_create(const char *pre, size_t pre_len, tok_pretok **out, tok_pre_flags *flags,
                      llc_err *err);
void tok_pretok_free(tok_pretok *p);
const char *tok_pretok_name(const tok_pretok *p);
/* A word of the split: bytes [start, end) of the input. */
typedef struct tok_span {
    size_t start, end;
} tok_span;
/* Splits text into words (every byte lands in exactly one word, in order).
 * *words is malloc'd. Invalid UTF-8 bytes are matched as U+FFFD would be but
 * keep their own bytes. */
int tok_pretok_split(const tok_pretok *p, const char *text, size_t len, tok_span **words,
                     size_t *n_words);

/* ---- tok_bpe.c ---- */
typedef struct tok_bpe tok_bpe;
struct tokenizer;
/* Builds the merge tables from tokenizer.ggml.merges ("left right" strings, rank =
 * index, first occurrence wins) against t's vocabulary; takes ownership of pre
 * (freed on failure too). Uses flags' ignore_merges, raw_utf8, escape_ws and
 * newline_runs. */
int tok_bpe_create(const struct tokenizer *t, const gguf_array *merges, tok_pretok *pre,
                   const tok_pre_flags *flags, tok_bpe **out, llc_err *err);
const tok_pretok *tok_bpe_pretok(const tok_bpe *b);
void tok_bpe_free(tok_bpe *b);
/* Encodes one raw-text fragment; appends ids. */
void tok_bpe_encode(const struct tokenizer *t, const char *text, size_t len, tok_ids *out);
/* GPT-2 bytes_to_unicode: the code point standing for byte b, and back (-1 if the
 * code point stands for no byte). */
uint32_t tok_bpe_byte_cp(uint8_t b);
int tok_bpe_cp_byte(uint32_t cp);

/* ---- tok_spm.c ---- */
/* Encodes one raw-text fragment, prefixing a space if asked; appends ids. */
void tok_spm_encode(const struct tokenizer *t, const char *text, size_t len, bool prefix_space,
                    tok_ids *out);

/* ---- UTF-8 helpers (tok_pool.c) ---- */
/* Length of the strictly valid UTF-8 sequence at s (1-4), or 0 if invalid or cut. */
int tok_utf8_valid_len(const unsigned char *s, size_t avail);
/* Classifies the bytes at p (avail >= 1): > 0 a valid character of that length; 0 a
 * valid but unfinished prefix running to the end; < 0 an invalid maximal subpart
 * of -r bytes. */
int tok_utf8_status(const unsigned char *p, size_t avail);
/* Decodes a strictly valid sequence of length n. */
uint32_t tok_utf8_decode(const unsigned char *s, int n);
/* Encodes cp (< 0x110000) into out (4 bytes room); returns its length. */
int tok_utf8_encode(uint32_t cp, char *out);

typedef enum tok_kind { TOK_KIND_SPM, TOK_KIND_BPE } tok_kind;

struct tokenizer {
    tok_kind kind;
    int32_t n_vocab;
    tok_pool vocab;       /* string i == token i */
    float *scores;        /* [n_vocab] SPM merge priority */
    uint16_t *attr;       /* [n_vocab] TOK_ATTR_* */
    uint8_t *eog;         /* [n_vocab] 1 if end of generation */

    char *piece_buf;      /* pieces as rendered with special = true */
    size_t *piece_off;    /* [n_vocab] */
    uint32_t *piece_len;  /* [n_vocab] */

    int32_t special[TOK_SPECIAL_COUNT];
    bool add_bos, add_eos, add_space_prefix;
    bool escape_ws; /* BPE with spaces written U+2581 (gemma4): pieces unescape them */
    char model_name[16]; /* tokenizer.ggml.model */
    char pre_name[64];   /* tokenizer.ggml.pre as the file has it ("" if absent) */
    bool pre_unknown;    /* pre_name is not known; GPT-2's regex stands in */

    /* special-token partition: ids with CONTROL | USER_DEFINED | UNKNOWN,
     * longest text first, and a byte trie over their texts for a presence scan */
    int32_t *special_ids;
    int32_t n_special;
    struct tok_trie_node *trie; /* [n_trie], node 0 is the root */
    int32_t n_trie;

    int32_t spm_byte_tok[256]; /* SPM byte fallback: <0xNN>, else the byte as text, else unk */
    tok_bpe *bpe;              /* BPE only */
};

typedef struct tok_trie_node {
    int32_t child;   /* first child or -1 */
    int32_t sibling; /* next sibling or -1 */
    int32_t order;   /* index into special_ids of the token ending here, or -1 */
    uint8_t byte;
} tok_trie_node;

#endif
