/* tok_spm.c — SentencePiece encoding (tokenizer.ggml.model = "llama") of one text
 * fragment, as llama.cpp's llm_tokenizer_spm_session: spaces become U+2581, the
 * text is cut into UTF-8 characters (invalid bytes one by one), adjacent symbols
 * whose concatenation is a vocabulary token are merged highest score first
 * (leftmost on ties), and symbols that are no token fall back to <0xNN> byte
 * tokens. */
#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer/tok_internal.h"

typedef struct sym {
    const char *text;
    uint32_t n; /* bytes; 0 once merged away */
    int32_t prev, next;
} sym;

typedef struct bigram {
    float score;
    int32_t left, right;
    uint32_t size;
} bigram;

typedef struct heap {
    bigram *v;
    size_t n, cap;
    bool oom;
} heap;

static bool bg_before(const bigram *x, const bigram *y) {
    return x->score > y->score || (x->score == y->score && x->left < y->left);
}

static void heap_push(heap *h, bigram g) {
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        bigram *v = realloc(h->v, nc * sizeof *v);
        if (!v) {
            h->oom = true;
            return;
        }
        h->v = v;
        h->cap = nc;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bg_before(&g, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = g;
}

static bigram heap_pop(heap *h) {
    bigram top = h->v[0];
    bigram last = h->v[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bg_before(&h->v[c + 1], &h->v[c])) c++;
        if (!bg_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (n) h->v[i] = last;
    return top;
}

static void try_bigram(const struct tokenizer *t, const sym *syms, heap *h, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    /* adjacent live symbols are contiguous in the text */
    uint32_t size = syms[l].n + syms[r].n;
    int32_t id = tok_pool_find(&t->vocab, syms[l].text, size);
    if (id < 0) return;
    heap_push(h, (bigram){t->scores[id], l, r, size});
}

void tok_spm_encode(const struct tokenizer *t, const char *text, size_t len, bool prefix_space,
                    tok_ids *out) {
    /* escape: ' ' -> U+2581 (3 bytes) */
    size_t n_sp = 0;
    for (size_t i = 0; i < len; i++) n_sp += text[i] == ' ';
    size_t elen = len + 2 * n_sp + (prefix_space ? 3 : 0);
    if (!elen) return;
    char *e = malloc(elen);
    sym *syms = malloc(elen * sizeof *syms);
    heap h = {0};
    if (!e || !syms) goto oom;
    size_t k = 0;
    if (prefix_space) memcpy(e + k, "\xE2\x96\x81", 3), k += 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') memcpy(e + k, "\xE2\x96\x81", 3), k += 3;
        else e[k++] = text[i];
    }

    int32_t n = 0;
    for (size_t off = 0; off < elen;) {
        /* llama.cpp takes the length from the lead byte alone, so an invalid byte
         * can swallow the next characters (an escaped space included) into one
         * symbol that then falls back to bytes; here an invalid byte is a symbol of
         * its own. Identical for valid UTF-8; keeps invalid input round-tripping. */
        size_t l = (size_t)tok_utf8_valid_len((const unsigned char *)e + off, elen - off);
        if (!l) l = 1;
        syms[n] = (sym){e + off, (uint32_t)l, n - 1, off + l < elen ? n + 1 : -1};
        off += l;
        n++;
    }
    for (int32_t i = 1; i < n; i++) try_bigram(t, syms, &h, i - 1, i);
    while (h.n && !h.oom) {
        bigram g = heap_pop(&h);
        sym *l = &syms[g.left], *r = &syms[g.right];
        if (!l->n || !r->n || l->n + r->n != g.size) continue; /* outdated */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) syms[r->next].prev = g.left;
        try_bigram(t, syms, &h, l->prev, g.left);
        try_bigram(t, syms, &h, g.left, l->next);
    }
    if (h.oom) goto oom;
    for (int32_t i = 0; i >= 0; i = syms[i].next) {
        int32_t id = tok_pool_find(&t->vocab, syms[i].text, syms[i].n);
        if (id >= 0) {
            tok_ids_push(out, id);
            continue;
        }
        for (uint32_t j = 0; j < syms[i].n; j++) {
            int32_t b = t->spm_byte_tok[(unsigned char)syms[i].text[j]];
            if (b >= 0) tok_ids_push(out, b);
        }
    }
    free(e);
    free(syms);
    free(h.v);
    return;
oom:
    out->oom = true;
    free(e);
    free(syms);
    free(h.v);
}
