/* tok_bpe.c — BPE over pre-tokenized words (llama.cpp's llm_tokenizer_bpe_session):
 * the merge-rank tables and encoding of one text fragment (pre-tokenize into
 * words, split words into symbols, merge pairs lowest rank first, leftmost on
 * ties). Two symbol alphabets:
 *   - byte-level (tokenizer.ggml.model "gpt2"): every byte is one symbol, written
 *     as GPT-2's bytes_to_unicode character; a symbol that is no token falls back
 *     to the tokens of its single characters;
 *   - UTF-8 characters (SentencePiece-style BPE: "gemma4"): spaces are first
 *     escaped to U+2581, every character is one symbol, and a symbol that is no
 *     token falls back to <0xXX> byte tokens.
 *
 * Symbols are interned: every string a merge rule names (left, right, left+right)
 * gets a small integer, so a merge lookup is a hash of two integers. Words keep
 * their original bytes, so invalid UTF-8 round-trips through the byte mapping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer/tok_internal.h"

typedef struct pair_entry {
    int32_t a, b;   /* interned left / right, a == -1: empty slot */
    int32_t rank;   /* merge index */
    int32_t res;    /* interned a+b */
} pair_entry;

struct tok_bpe {
    tok_pool syms;       /* interned byte-level strings */
    int32_t *sym_tok;    /* [syms.n] the token with that text, or -1 */
    pair_entry *pairs;   /* open addressing, size pair_mask + 1 */
    uint32_t pair_mask;
    int32_t byte_sym[256]; /* interned symbol of a byte's character, or -1 */
    int32_t byte_tok[256]; /* token of a byte's character, or -1 */
    int32_t hex_tok[256];  /* raw_utf8: the <0xXX> token of a byte, or -1 */
    bool ignore_merges;  /* a word that is a whole token is taken as is */
    bool raw_utf8;       /* symbols are UTF-8 characters, not byte characters */
    bool escape_ws;      /* ' ' is escaped to U+2581 before splitting */
    bool newline_runs;   /* a word of newlines that is a token is taken whole */
    tok_pretok *pre;
};

uint32_t tok_bpe_byte_cp(uint8_t b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    if (b <= 0x20) return 256u + b;
    if (b <= 0xA0) return 256u + 33 + (b - 0x7Fu);
    return 256u + 67; /* 0xAD */
}

int tok_bpe_cp_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp < 256 || cp >= 256 + 68) return -1;
    uint32_t k = cp - 256;
    if (k <= 0x20) return (int)k;
    if (k < 67) return (int)(0x7F + (k - 33));
    return 0xAD;
}

static int byte_str(uint8_t b, char out[4]) { return tok_utf8_encode(tok_bpe_byte_cp(b), out); }

static uint32_t pair_hash(int32_t a, int32_t b) {
    uint64_t x = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (uint32_t)x;
}

static const pair_entry *pair_find(const tok_bpe *b, int32_t l, int32_t r) {
    if (!b->pairs || l < 0 || r < 0) return NULL;
    uint32_t i = pair_hash(l, r) & b->pair_mask;
    while (b->pairs[i].a >= 0) {
        if (b->pairs[i].a == l && b->pairs[i].b == r) return &b->pairs[i];
        i = (i + 1) & b->pair_mask;
    }
    return NULL;
}

void tok_bpe_free(tok_bpe *b) {
    if (!b) return;
    tok_pool_free(&b->syms);
    free(b->sym_tok);
    free(b->pairs);
    tok_pretok_free(b->pre);
    free(b);
}

const tok_pretok *tok_bpe_pretok(const tok_bpe *b) { return b ? b->pre : NULL; }

int tok_bpe_create(const struct tokenizer *t, const gguf_array *merges, tok_pretok *pre,
                   const tok_pre_flags *flags, tok_bpe **out, llc_err *err) {
    *out = NULL;
    tok_bpe *b = calloc(1, sizeof *b);
    if (!b) {
        tok_pretok_free(pre);
        return llc_fail(err, LLC_ERR_NOMEM, "tokenizer: out of memory");
    }
    b->pre = pre;
    b->ignore_merges = flags->ignore_merges;
    b->raw_utf8 = flags->raw_utf8;
    b->escape_ws = flags->escape_ws;
    b->newline_runs = flags->newline_runs;
    int rc = 0;
    uint64_t n = merges ? merges->n : 0;
    if (n > TOK_MAX_MERGES) {
        rc = llc_fail(err, LLC_ERR_RANGE, "tokenizer: %llu merges (limit %d)",
                      (unsigned long long)n, TOK_MAX_MERGES);
        goto fail;
    }
    uint64_t size = 64;
    while (size < n * 2) size *= 2;
    b->pairs = malloc((size_t)size * sizeof *b->pairs);
    if (!b->pairs) goto oom;
    for (uint64_t i = 0; i < size; i++) b->pairs[i].a = -1;
    b->pair_mask = (uint32_t)(size - 1);

    char *cat = NULL; /* left+right */
    size_t cat_cap = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s = merges->strs[i].ptr;
        uint64_t len = merges->strs[i].len;
        uint64_t sp = 1;
        while (sp < len && s[sp] != ' ') sp++;
        if (sp >= len || sp + 1 >= len) continue; /* no "left right" shape: can never apply */
        if (len > UINT32_MAX - 1) continue;
        if (len > cat_cap) {
            char *c = realloc(cat, (size_t)len);
            if (!c) {
                free(cat);
                goto oom;
            }
            cat = c;
            cat_cap = (size_t)len;
        }
        memcpy(cat, s, (size_t)sp);
        memcpy(cat + sp, s + sp + 1, (size_t)(len - sp - 1));
        int32_t l = tok_pool_intern(&b->syms, s, (size_t)sp);
        int32_t r = l >= 0 ? tok_pool_intern(&b->syms, s + sp + 1, (size_t)(len - sp - 1)) : l;
        int32_t lr = r >= 0 ? tok_pool_intern(&b->syms, cat, (size_t)(len - 1)) : r;
        if (lr < 0) {
            free(cat);
            goto oom;
        }
        uint32_t h = pair_hash(l, r) & b->pair_mask;
        while (b->pairs[h].a >= 0 && !(b->pairs[h].a == l && b->pairs[h].b == r))
            h = (h + 1) & b->pair_mask;
        if (b->pairs[h].a < 0) b->pairs[h] = (pair_entry){l, r, (int32_t)i, lr};
    }
    free(cat);

    for (int c = 0; c < 256; c++) {
        char s[8];
        int l = byte_str((uint8_t)c, s);
        b->byte_sym[c] = tok_pool_find(&b->syms, s, (size_t)l);
        b->byte_tok[c] = tok_pool_find(&t->vocab, s, (size_t)l);
        snprintf(s, sizeof s, "<0x%02X>", c);
        b->hex_tok[c] = tok_pool_find(&t->vocab, s, 6);
    }
    b->sym_tok = malloc(((size_t)b->syms.n + 1) * sizeof *b->sym_tok);
    if (!b->sym_tok) goto oom;
    for (int32_t i = 0; i < b->syms.n; i++)
        b->sym_tok[i] = tok_pool_find(&t->vocab, tok_pool_str(&b->syms, i), b->syms.len[i]);
    *out = b;
    return 0;
oom:
    rc = llc_fail(err, LLC_ERR_NOMEM, "tokenizer: out of memory building merges");
fail:
    tok_bpe_free(b);
    return rc;
}

/* ---- encoding ---- */

typedef struct sym {
    int32_t id;    /* interned string, or -1 (a lone byte or character with no
                    * interned form) */
    int32_t prev, next;
    uint32_t off;  /* first byte in the word */
    uint32_t n;    /* bytes covered; 0 once merged away */
} sym;

typedef struct bigram {
    int32_t rank, left, right;
    uint32_t size; /* left.n + right.n when queued */
    int32_t res;
} bigram;

typedef struct scratch {
    sym *syms;
    size_t syms_cap;
    bigram *heap;
    size_t heap_n, heap_cap;
    char *enc;
    size_t enc_cap;
    char *esc; /* escape_ws: the fragment with spaces escaped */
    size_t esc_cap;
    bool oom;
} scratch;

static bool bg_less(const bigram *x, const bigram *y) {
    return x->rank < y->rank || (x->rank == y->rank && x->left < y->left);
}

static void heap_push(scratch *s, bigram g) {
    if (s->heap_n == s->heap_cap) {
        size_t nc = s->heap_cap ? s->heap_cap * 2 : 64;
        bigram *h = realloc(s->heap, nc * sizeof *h);
        if (!h) {
            s->oom = true;
            return;
        }
        s->heap = h;
        s->heap_cap = nc;
    }
    size_t i = s->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bg_less(&g, &s->heap[p])) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = g;
}

static bigram heap_pop(scratch *s) {
    bigram top = s->heap[0];
    bigram last = s->heap[--s->heap_n];
    size_t i = 0, n = s->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bg_less(&s->heap[c + 1], &s->heap[c])) c++;
        if (!bg_less(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n) s->heap[i] = last;
    return top;
}

static void add_bigram(const tok_bpe *b, scratch *s, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const pair_entry *pe = pair_find(b, s->syms[l].id, s->syms[r].id);
    if (!pe) return;
    heap_push(s, (bigram){pe->rank, l, r, s->syms[l].n + s->syms[r].n, pe->res});
}

/* The byte-level text of original bytes w[0, n) into s->enc; returns its length. */
static size_t encode_bytes(scratch *s, const uint8_t *w, size_t n) {
    if (s->enc_cap < n * 2 + 1) {
        char *e = realloc(s->enc, n * 2 + 1);
        if (!e) {
            s->oom = true;
            return 0;
        }
        s->enc = e;
        s->enc_cap = n * 2 + 1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += (size_t)byte_str(w[i], s->enc + k);
    return k;
}

static void emit_fallback(const struct tokenizer *t, const char *enc, size_t len, tok_ids *out) {
    /* llama.cpp: a symbol that is no token is looked up byte by byte */
    for (size_t i = 0; i < len; i++) {
        int32_t id = tok_pool_find(&t->vocab, enc + i, 1);
        if (id >= 0) tok_ids_push(out, id);
    }
}

static bool grow_syms(scratch *s, size_t n) {
    if (s->syms_cap >= n) return true;
    sym *v = realloc(s->syms, n * sizeof *v);
    if (!v) {
        s->oom = true;
        return false;
    }
    s->syms = v;
    s->syms_cap = n;
    return true;
}

/* Splits word w[0, n) into its initial symbols; returns their count. */
static size_t split_symbols(const tok_bpe *b, scratch *s, const uint8_t *w, size_t n) {
    if (!grow_syms(s, n)) return 0;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t l = 1;
        int32_t id = b->byte_sym[w[i]];
        if (b->raw_utf8) {
            /* a character; each byte of invalid UTF-8 is a symbol of its own (llama.cpp
             * would have made it U+FFFD; here its byte token keeps it) */
            int v = tok_utf8_valid_len(w + i, n - i);
            l = v > 0 ? (size_t)v : 1;
            id = tok_pool_find(&b->syms, (const char *)w + i, l);
        }
        s->syms[k] = (sym){id, (int32_t)k - 1, -1, (uint32_t)i, (uint32_t)l};
        if (k) s->syms[k - 1].next = (int32_t)k;
        k++;
        i += l;
    }
    return k;
}

/* Appends the ids of one final symbol. */
static void emit_symbol(const struct tokenizer *t, const uint8_t *w, const sym *y, tok_ids *out) {
    const tok_bpe *b = t->bpe;
    if (b->raw_utf8) {
        int32_t id = y->id >= 0 ? b->sym_tok[y->id]
                                : tok_pool_find(&t->vocab, (const char *)w + y->off, y->n);
        if (id >= 0) {
            tok_ids_push(out, id);
            return;
        }
        for (uint32_t j = 0; j < y->n; j++) /* byte fallback; bytes without one vanish */
            if (b->hex_tok[w[y->off + j]] >= 0) tok_ids_push(out, b->hex_tok[w[y->off + j]]);
        return;
    }
    uint8_t first = w[y->off];
    int32_t id = y->id >= 0 ? b->sym_tok[y->id] : b->byte_tok[first];
    if (id >= 0) {
        tok_ids_push(out, id);
    } else if (y->id >= 0) {
        emit_fallback(t, tok_pool_str(&b->syms, y->id), b->syms.len[y->id], out);
    } else {
        char c[4];
        int l = byte_str(first, c);
        emit_fallback(t, c, (size_t)l, out);
    }
}

static bool all_newlines(const uint8_t *w, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (w[i] != '\n') return false;
    return n > 0;
}

static void encode_word(const struct tokenizer *t, scratch *s, const uint8_t *w, size_t n,
                        tok_ids *out) {
    const tok_bpe *b = t->bpe;
    if (b->ignore_merges || (b->newline_runs && all_newlines(w, n))) {
        const char *text = (const char *)w;
        size_t el = n;
        if (!b->raw_utf8) {
            el = encode_bytes(s, w, n);
            text = s->enc;
        }
        if (s->oom) return;
        int32_t id = tok_pool_find(&t->vocab, text, el);
        if (id >= 0) {
            tok_ids_push(out, id);
            return;
        }
    }
    size_t n_syms = split_symbols(b, s, w, n);
    if (!n_syms) return;
    s->heap_n = 0;
    for (size_t i = 1; i < n_syms; i++) add_bigram(b, s, (int32_t)i - 1, (int32_t)i);
    while (s->heap_n && !s->oom) {
        bigram g = heap_pop(s);
        sym *l = &s->syms[g.left], *r = &s->syms[g.right];
        if (!l->n || !r->n || l->n + r->n != g.size) continue; /* outdated */
        l->n += r->n;
        l->id = g.res;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s->syms[r->next].prev = g.left;
        add_bigram(b, s, l->prev, g.left);
        add_bigram(b, s, g.left, l->next);
    }
    if (s->oom) return;
    for (int32_t i = 0; i >= 0; i = s->syms[i].next) emit_symbol(t, w, &s->syms[i], out);
}

/* Copies text with every ' ' written U+2581 into s->esc; returns its length. */
static size_t escape_spaces(scratch *s, const char *text, size_t len) {
    size_t n_sp = 0;
    for (size_t i = 0; i < len; i++) n_sp += text[i] == ' ';
    size_t need = len + 2 * n_sp;
    if (s->esc_cap < need + 1) {
        char *e = realloc(s->esc, need + 1);
        if (!e) {
            s->oom = true;
            return 0;
        }
        s->esc = e;
        s->esc_cap = need + 1;
    }
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(s->esc + k, "\xE2\x96\x81", 3);
            k += 3;
        } else {
            s->esc[k++] = text[i];
        }
    }
    return k;
}

void tok_bpe_encode(const struct tokenizer *t, const char *text, size_t len, tok_ids *out) {
    tok_span *words = NULL;
    size_t n_words = 0;
    scratch s = {0};
    if (t->bpe->escape_ws) {
        len = escape_spaces(&s, text, len);
        text = s.esc;
    }
    if (s.oom || tok_pretok_split(t->bpe->pre, text, len, &words, &n_words)) {
        out->oom = true;
        free(s.esc);
        return;
    }
    for (size_t i = 0; i < n_words && !s.oom && !out->oom; i++)
        encode_word(t, &s, (const uint8_t *)text + words[i].start, words[i].end - words[i].start,
                    out);
    if (s.oom) out->oom = true;
    free(s.syms);
    free(s.heap);
    free(s.enc);
    free(s.esc);
    free(words);
}
