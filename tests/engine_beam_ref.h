/* engine_beam_ref.h — beam search without the engine, for the engine tests:
 * logits from scratch (every sequence recomputed in a fresh cache, one batch)
 * and a driver that runs beam.c's selection rule on them, so no KV block, fork
 * or recurrent state is shared between beams. Uses engine_util.h's model. */
#ifndef LLC_TEST_ENGINE_BEAM_REF_H
#define LLC_TEST_ENGINE_BEAM_REF_H

#include "engine/model/batch.h"
#include "engine/sched/beam.h"
#include "tests/engine_util.h"

/* Logits of the last token of each of n token sequences, computed from scratch
 * in one batch over a fresh KV cache. out: n rows of n_vocab. */
static int logits_from_scratch(const int32_t *const *seqs, const int *lens, int n, float *out) {
    const model_hparams *hp = model_hparams_of(g_model);
    int bs = 16, per_seq = (hp->n_ctx_train + bs - 1) / bs;
    int max_len = 0;
    for (int i = 0; i < n; i++) max_len = lens[i] > max_len ? lens[i] : max_len;
    int blocks_each = (max_len + bs - 1) / bs;
    model_kv *kv;
    batch *b;
    llc_err err;
    if (model_kv_create(g_model, n * blocks_each, bs, test_kv_type(), &kv, &err)) return -1;
    if (batch_create(per_seq, bs, &b)) return -1;
    int32_t *table = malloc((size_t)n * blocks_each * sizeof *table);
    for (int i = 0; i < n * blocks_each; i++) table[i] = i;
    for (int i = 0; i < n; i++)
        batch_add(b, seqs[i], lens[i], 0, table + i * blocks_each, blocks_each, BATCH_OUT_LAST);
    int rc = model_forward(g_model, kv, batch_view(b), out, &err);
    if (rc) fprintf(stderr, "forward: %s\n", err.msg);
    free(table);
    batch_free(b);
    model_kv_free(kv);
    return rc;
}

/* The reference: the same selection rule (beam.c), but every live beam's logits
 * come from a fresh forward pass over prompt + its tokens. */
static int reference_beam(const int32_t *prompt, int n_prompt, int width, int max_tokens,
                          int rank, int32_t *out) {
    const model_hparams *hp = model_hparams_of(g_model);
    int V = hp->n_vocab;
    beam_search *b;
    if (beam_search_create(width, max_tokens, &b)) return -1;
    int32_t seqs[BEAM_MAX_WIDTH][256];
    int lens[BEAM_MAX_WIDTH];
    memcpy(seqs[0], prompt, sizeof(int32_t) * n_prompt);
    lens[0] = n_prompt;
    float *lg = malloc((size_t)BEAM_MAX_WIDTH * V * sizeof *lg);
    while (!beam_done(b)) {
        int live = beam_live(b);
        const int32_t *ptrs[BEAM_MAX_WIDTH];
        for (int i = 0; i < live; i++) ptrs[i] = seqs[i];
        if (logits_from_scratch(ptrs, lens, live, lg)) break;
        for (int i = 0; i < live; i++) {
            int32_t ids[2 * BEAM_MAX_WIDTH];
            float lp[2 * BEAM_MAX_WIDTH];
            beam_cand c[2 * BEAM_MAX_WIDTH];
            int got = sampler_log_softmax_topn(lg + (size_t)i * V, V, beam_n_candidates(b), ids, lp);
            for (int k = 0; k < got; k++) c[k] = (beam_cand){ids[k], lp[k], tok_is_eog(g_tok, ids[k])};
            beam_set_candidates(b, i, c, got);
        }
        int parent[BEAM_MAX_WIDTH];
        int32_t tok[BEAM_MAX_WIDTH];
        int n_new = beam_advance(b, parent, tok);
        if (n_new <= 0) break;
        int32_t next[BEAM_MAX_WIDTH][256];
        int next_lens[BEAM_MAX_WIDTH];
        for (int k = 0; k < n_new; k++) {
            memcpy(next[k], seqs[parent[k]], sizeof(int32_t) * lens[parent[k]]);
            next[k][lens[parent[k]]] = tok[k];
            next_lens[k] = lens[parent[k]] + 1;
        }
        memcpy(seqs, next, sizeof next);
        memcpy(lens, next_lens, sizeof next_lens);
    }
    free(lg);
    const int32_t *t;
    int n = -1;
    if (beam_result(b, rank, &t, &n, NULL, NULL) == 0) memcpy(out, t, sizeof(int32_t) * n);
    beam_search_free(b);
    return n;
}

#endif
