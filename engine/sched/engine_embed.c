/* engine_embed.c — embeddings requests inside continuous batching. Each input
 * is a sequence of its own that the scheduler admits, chunks and preempts like
 * any prompt; its rows ask the forward pass for their final-norm hidden state
 * instead of logits (BATCH_OUT_HIDDEN). The rows of each step are added to a
 * per-sequence sum; when the whole input is computed, the mean over its
 * positions, L2-normalised, goes out as EV_EMBEDDING and the sequence ends.
 *
 * Prefix cache: an input never takes cached blocks (the cache holds K/V, not
 * the hidden states its positions would need) and its blocks are released
 * uncached when it ends (kv_seq_free_uncached), so bulk embedding does not
 * evict the conversations' cached prefixes. While it runs its full blocks are
 * listed as usual, so a generation with the same prefix may still share them.
 * submit runs on the caller's thread; the rest on the engine thread. */
#include "engine/sched/engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sched/engine_internal.h"

int64_t engine_submit_embed(engine *e, engine_client *c, const embed_request *g, llc_err *err) {
    if (!g->inputs || !g->n_tokens || g->n_inputs < 1)
        return llc_fail(err, LLC_ERR_RANGE, "an embeddings request needs at least one input");
    if (g->n_inputs > ENGINE_MAX_EMBED_INPUTS)
        return llc_fail(err, LLC_ERR_RANGE, "%d inputs; at most %d per request", g->n_inputs,
                        ENGINE_MAX_EMBED_INPUTS);
    int64_t total = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        int n = g->n_tokens[i];
        if (n < 1 || !g->inputs[i]) return llc_fail(err, LLC_ERR_RANGE, "input %d is empty", i);
        if (n > e->n_ctx)
            return llc_fail(err, LLC_ERR_RANGE, "input %d is %d tokens; the context is %d", i, n, e->n_ctx);
        int need = (n + e->p.block_size - 1) / e->p.block_size;
        if (need > e->p.n_blocks)
            return llc_fail(err, LLC_ERR_RANGE, "input %d needs %d KV blocks; the cache has %d", i, need,
                            e->p.n_blocks);
        for (int k = 0; k < n; k++)
            if (g->inputs[i][k] < 0 || g->inputs[i][k] >= e->n_vocab)
                return llc_fail(err, LLC_ERR_RANGE, "input %d: token id %d is outside the vocabulary", i,
                                g->inputs[i][k]);
        total += n;
    }
    if (total > INT32_MAX / 2) return llc_fail(err, LLC_ERR_RANGE, "the inputs are too long together");
    request *r = calloc(1, sizeof *r);
    inbox_msg *msg = calloc(1, sizeof *msg);
    if (r) {
        r->prompt = malloc((size_t)total * sizeof *r->prompt);
        r->input_start = malloc((size_t)(g->n_inputs + 1) * sizeof *r->input_start);
        r->seqs = calloc((size_t)g->n_inputs, sizeof *r->seqs);
    }
    if (!r || !msg || !r->prompt || !r->input_start || !r->seqs || eng_request_reserve_done(r, g->n_inputs)) {
        eng_request_free(r);
        free(msg);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    int at = 0;
    for (int i = 0; i < g->n_inputs; i++) {
        r->input_start[i] = at;
        memcpy(r->prompt + at, g->inputs[i], (size_t)g->n_tokens[i] * sizeof *r->prompt);
        at += g->n_tokens[i];
    }
    r->input_start[g->n_inputs] = at;
    r->embed = true;
    r->n_prompt = at;
    r->n = r->n_slots = g->n_inputs;
    r->max_tokens = 1;
    r->priority = g->priority;
    r->sp = sampler_params_default();
    return eng_request_post(e, c, r, msg);
}

int eng_embed_seqs(engine *e, request *r) {
    const int dim = model_hparams_of(e->m)->dim;
    for (int i = 0; i < r->n; i++) {
        seq *s = calloc(1, sizeof *s);
        if (s) s->embd_sum = calloc((size_t)dim, sizeof *s->embd_sum);
        int rc = s && s->embd_sum ? 0 : LLC_ERR_NOMEM;
        if (s) {
            s->req = r;
            s->index = i;
            s->out_row = -1;
            s->state_slot = s->snap_from = s->spec_slot = s->dslot = s->dbak_len = -1;
            s->state = SEQ_WAITING;
        }
        for (int k = r->input_start[i]; !rc && k < r->input_start[i + 1]; k++)
            rc = eng_seq_push_token(s, r->prompt[k]);
        if (rc) {
            eng_seq_free(s);
            for (int j = 0; j < i; j++) eng_seq_free(r->seqs[j]), r->seqs[j] = NULL;
            return rc;
        }
        r->seqs[i] = s;
    }
    r->n_live = r->n;
    r->forked = true; /* every input exists from the start */
    return 0;
}

void eng_embed_take(engine *e, seq *s, int rows, const float *hidden) {
    const int dim = model_hparams_of(e->m)->dim;
    int computed = kv_seq_computed(s->kv); /* committed already, these rows included */
    if (computed - rows == 0) /* from the start (again, after a preemption) */
        memset(s->embd_sum, 0, (size_t)dim * sizeof *s->embd_sum);
    for (int r = 0; r < rows; r++) {
        const float *h = hidden + (size_t)(s->hid_row + r) * dim;
        for (int d = 0; d < dim; d++) s->embd_sum[d] += h[d];
    }
    if (computed < s->n_tokens) return; /* more chunks to come */
    engine_event ev = {.kind = EV_EMBEDDING, .request_id = s->req->id, .seq_index = s->index,
                       .prompt_tokens = s->n_tokens, .n_embd = dim};
    ev.embedding = malloc((size_t)dim * sizeof *ev.embedding);
    if (!ev.embedding) {
        eng_seq_finish(e, s, FINISH_ERROR);
        return;
    }
    double norm = 0;
    for (int d = 0; d < dim; d++) {
        double mean = s->embd_sum[d] / s->n_tokens;
        s->embd_sum[d] = mean;
        norm += mean * mean;
    }
    norm = sqrt(norm);
    for (int d = 0; d < dim; d++) ev.embedding[d] = (float)(norm > 0 ? s->embd_sum[d] / norm : 0);
    if (!s->req->client->closed) eng_client_push(s->req->client, &ev);
    else free(ev.embedding);
    eng_seq_finish(e, s, FINISH_STOP);
}
