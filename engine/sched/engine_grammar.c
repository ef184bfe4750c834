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

#include "engine/sched/engine_internal.h"

static int build_vocab(engine *e) {
    int rc = grammar_vocab_from_tokenizer(e->tok, &e->gvocab);
    if (rc) return rc;
    e->grow = malloc((size_t)e->n_vocab * sizeof *e->grow);
    e->gallowed = malloc((size_t)e->n_vocab);
    if (!e->grow || !e->gallowed) return LLC_ERR_NOMEM;
    e->gstrip = grammar_tokenizer_strips_space(e->tok);
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
