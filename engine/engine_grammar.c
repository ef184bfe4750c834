/* engine_grammar.c — constrained decoding in the engine: the vocabulary's texts
 * for grammars (built at the first request with a grammar), each sequence's
 * grammar state, and masking a logits row to the tokens the grammar allows
 * before the sampler sees it. Advancing the state over chosen tokens and
 * ending a sample whose grammar is finished is eng_emit_token's part
 * (engine_request.c); speculative verification masks each drafted row in turn
 * (engine_spec.c), so a draft token the grammar refuses has probability 0 and
 * is rejected. Engine thread only. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_internal.h"

/* Whether the tokenizer prefixes a space on encoding that decoding drops
 * (SentencePiece): then the first token's leading space is not output text. */
static bool strips_leading_space(const tokenizer *tok) {
    int32_t ids[8];
    int n = tok_encode(tok, "a", 1, false, false, ids, 8);
    if (n < 1 || n > 8) return false;
    char piece[8];
    int len = tok_piece(tok, ids[0], false, piece, sizeof piece);
    char *text = NULL;
    size_t tlen = 0;
    if (len < 1 || piece[0] != ' ' || tok_decode(tok, ids, n, false, &text, &tlen) < 0) return false;
    bool strips = tlen == 0 || text[0] != ' ';
    free(text);
    return strips;
}

static int build_vocab(engine *e) {
    int V = e->n_vocab;
    const char **texts = calloc((size_t)V, sizeof *texts);
    int *lens = calloc((size_t)V, sizeof *lens);
    uint8_t *kinds = calloc((size_t)V, 1);
    char *buf = NULL;
    size_t used = 0, cap = (size_t)V * 8;
    int rc = texts && lens && kinds && (buf = malloc(cap)) ? 0 : LLC_ERR_NOMEM;
    size_t *off = rc ? NULL : calloc((size_t)V, sizeof *off); /* pointers once buf stops moving */
    if (!rc && !off) rc = LLC_ERR_NOMEM;
    for (int i = 0; !rc && i < V; i++) {
        int attr = tok_attr(e->tok, i);
        if (tok_is_eog(e->tok, i)) kinds[i] = GRAMMAR_TOKEN_END;
        else if (attr < 0 || (attr & (TOK_ATTR_CONTROL | TOK_ATTR_UNKNOWN | TOK_ATTR_UNUSED))) kinds[i] = GRAMMAR_TOKEN_NEVER;
        else kinds[i] = GRAMMAR_TOKEN_TEXT;
        if (kinds[i] != GRAMMAR_TOKEN_TEXT) continue;
        int n = tok_piece(e->tok, i, false, NULL, 0);
        if (n <= 0) {
            kinds[i] = GRAMMAR_TOKEN_NEVER;
            continue;
        }
        if (used + (size_t)n > cap) {
            while (used + (size_t)n > cap) cap *= 2;
            char *b = realloc(buf, cap);
            if (!b) {
                rc = LLC_ERR_NOMEM;
                break;
            }
            buf = b;
        }
        tok_piece(e->tok, i, false, buf + used, n);
        off[i] = used;
        lens[i] = n;
        used += (size_t)n;
    }
    if (!rc) {
        for (int i = 0; i < V; i++) texts[i] = kinds[i] == GRAMMAR_TOKEN_TEXT ? buf + off[i] : "";
        rc = grammar_vocab_create(V, texts, lens, kinds, &e->gvocab);
    }
    free(texts);
    free(off);
    free(lens);
    free(kinds);
    free(buf);
    if (rc) return rc;
    e->grow = malloc((size_t)V * sizeof *e->grow);
    e->gallowed = malloc((size_t)V);
    if (!e->grow || !e->gallowed) return LLC_ERR_NOMEM;
    e->gstrip = strips_leading_space(e->tok);
    return 0;
}

int eng_grammar_seq_init(engine *e, seq *s, const seq *from) {
    request *r = s->req;
    if (!r->grammar) return 0;
    if (!e->gvocab) {
        int rc = build_vocab(e);
        if (rc) return rc;
    }
    if (from && from->gst) return grammar_state_clone(from->gst, &s->gst);
    return grammar_state_create(r->grammar, e->gstrip && !r->continues_prompt, &s->gst);
}

const float *eng_grammar_row(engine *e, seq *s, const float *logits) {
    if (!s->gst) return logits;
    int n = grammar_state_allowed(s->gst, e->gvocab, e->gallowed);
    if (n <= 0) return NULL;
    for (int i = 0; i < e->n_vocab; i++) e->grow[i] = e->gallowed[i] ? logits[i] : -INFINITY;
    return e->grow;
}

int eng_sample(engine *e, seq *s, const float *logits, sample_result *res) {
    if (!s->gst) return sampler_sample(s->smp, logits, e->n_vocab, res);
    if (s->req->sp.n_logprobs == 0) {
        int tok = sampler_sample(s->smp, logits, e->n_vocab, res);
        if (tok >= 0 && grammar_state_allows(s->gst, e->gvocab, tok)) return tok;
    }
    const float *row = eng_grammar_row(e, s, logits);
    if (!row) return LLC_ERR_RANGE;
    return sampler_sample(s->smp, row, e->n_vocab, res);
}

void eng_grammar_free(engine *e) {
    grammar_vocab_free(e->gvocab);
    free(e->grow);
    free(e->gallowed);
}
