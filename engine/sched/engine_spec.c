/* engine_spec.c — speculative decoding inside continuous batching.
 *
 * At the start of a step, sequences in decode get proposals: from the draft
 * model (its own paged KV pool; all speculating sequences share each draft pass)
 * or from an n-gram lookup in their own text. The proposals are appended to the
 * sequence's tokens, so the main model's one forward pass of the step computes
 * them with everything else, logits for every row. Then each proposal is checked
 * in order: greedy requests accept it when it is the main model's own choice;
 * sampling requests accept x with probability min(1, p(x)/q(x)) and otherwise
 * draw from the residual max(0, p - q), which leaves the main model's
 * distribution unchanged. The first rejection ends the run with the main
 * model's token; if all pass, one more comes from the last row. Rejected
 * positions are cut off both KV caches with truncate.
 *
 * Hybrid models (docs/ARCHITECTURE.md, "Recurrent state"): a recurrent state
 * cannot be cut back, so each verify step first copies the sequence's state
 * (eng_spec_keep_states), and a rejection puts that copy back and cuts the KV
 * back to where it was: the accepted tokens are computed again at the front of
 * the sequence's next step, with its next proposals. A hybrid draft model
 * keeps its state after the real tokens in the same way, before its first
 * proposal of each round. So that speculation does not step over the block
 * boundaries where state snapshots are kept, a hybrid's proposals end at the
 * next boundary at the latest. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sched/engine_internal.h"
#include "kernels/quant.h"

#define SPEC_MAX 32 /* draft_max is clamped to this */

int eng_spec_init(engine *e, llc_err *err) {
    if (e->p.draft_max <= 0) e->p.draft_max = 8;
    if (e->p.draft_max > SPEC_MAX) e->p.draft_max = SPEC_MAX;
    if (e->p.draft_min <= 0) e->p.draft_min = 1;
    if (e->p.draft_min > e->p.draft_max) e->p.draft_min = e->p.draft_max;
    if (e->p.draft_p_min <= 0) e->p.draft_p_min = 0.5f;
    if (e->p.spec_max_seqs <= 0) e->p.spec_max_seqs = 4;
    e->draft = e->p.draft;
    if (!e->draft && !e->p.ngram) return 0;
    e->probs = malloc((size_t)e->n_vocab * sizeof *e->probs);
    e->resid = malloc((size_t)e->n_vocab * sizeof *e->resid);
    if (!e->probs || !e->resid) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    if (!e->draft) return 0;
    const model_hparams *dh = model_hparams_of(e->draft);
    e->drecurrent = dh->n_recurrent > 0;
    if (dh->n_vocab != e->n_vocab)
        return llc_fail(err, LLC_ERR_RANGE, "the draft model has %d tokens, the model %d: they must share one vocabulary",
                        dh->n_vocab, e->n_vocab);
    /* the model's KV type, or f16 where the draft's rows cannot take it (q8_0) */
    const uint32_t kv_type = model_kv_bytes_per_token(e->draft, e->p.kv_type) ? e->p.kv_type : QT_F16;
    int rc = model_kv_create(e->draft, e->p.n_blocks, e->p.block_size, kv_type, &e->dkv_store, err);
    if (rc) return rc;
    if (kv_pool_create(e->p.n_blocks, e->p.block_size, &e->dpool) ||
        batch_create(e->max_blocks_per_seq, e->p.block_size, &e->dbatch))
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory for the draft model's KV");
    return 0;
}

void eng_spec_free(engine *e) {
    free(e->probs);
    free(e->resid);
    free(e->dlogits);
    free(e->dfree_pairs);
    batch_free(e->dbatch);
    kv_pool_free(e->dpool);
    model_kv_free(e->dkv_store);
}

void eng_spec_seq_free(seq *s) {
    kv_seq_free(s->dkv);
    s->dkv = NULL;
    sampler_free(s->dsmp);
    s->dsmp = NULL;
    free(s->q);
    s->q = NULL;
}

/* The draft's KV (and a hybrid draft's state) cut back to the first keep
 * tokens: a hybrid draft goes back to the state it kept before its proposals
 * (or, without one, starts again from nothing). */
static void draft_rollback(engine *e, seq *s, int keep) {
    if (!s->dkv || kv_seq_len(s->dkv) <= keep) return;
    if (!e->drecurrent) {
        kv_seq_truncate(s->dkv, keep);
        return;
    }
    if (s->dbak_len >= 0 && s->dbak_len <= keep &&
        !model_kv_state_copy(e->dkv_store, 2 * s->dslot + 1, 2 * s->dslot, NULL)) {
        kv_seq_truncate(s->dkv, s->dbak_len);
        return;
    }
    kv_seq_free(s->dkv);
    s->dkv = NULL;
    s->dbak_len = -1;
}

void eng_spec_drop(engine *e, seq *s) {
    if (s->n_draft <= 0) return;
    s->n_tokens -= s->n_draft;
    if (s->dsmp) sampler_rollback(s->dsmp, s->n_draft);
    draft_rollback(e, s, s->n_tokens);
    s->n_draft = 0;
}

bool eng_spec_decoding(const engine *e, const seq *s) {
    if (!s->kv) return false;
    const int pending = s->n_tokens - s->n_draft - kv_seq_computed(s->kv);
    if (pending == 1) return true;
    /* (each rejection restores the state from before the step, so tokens computed
     * again pile up while proposals keep failing: past draft_max of them, one plain
     * step takes them all) */
    return e->recurrent && (e->draft || e->p.ngram) && s->n_gen > 0 && pending > 1 && pending <= e->p.draft_max + 1;
}

void eng_spec_keep_states(engine *e) {
    for (int i = 0; i < e->n_running; i++) {
        seq *s = e->running[i];
        if (!s->rows || !s->n_draft) continue;
        if (s->spec_slot < 0) s->spec_slot = eng_state_take(e);
        if (s->spec_slot >= 0 && !model_kv_state_copy(e->kv_store, s->state_slot, s->spec_slot, NULL)) {
            s->spec_c0 = kv_seq_computed(s->kv);
            continue;
        }
        if (s->spec_slot < 0) s->spec_slot = -1; /* (none to be had) */
        const int n_draft = s->n_draft; /* no copy: no proposals this step */
        eng_spec_drop(e, s);
        s->rows -= n_draft;
        kv_seq_truncate(s->kv, kv_seq_computed(s->kv) + s->rows);
    }
}

void eng_spec_release(engine *e, seq *s) {
    if (s->spec_slot >= 0) eng_state_give(e, s->spec_slot);
    s->spec_slot = -1;
    if (s->dslot < 0) return;
    kv_seq_free(s->dkv);
    s->dkv = NULL;
    e->dfree_pairs[e->n_dfree_pairs++] = s->dslot; /* (room for every pair ever made) */
    s->dslot = s->dbak_len = -1;
}

/* A pair of the draft's state slots for a sequence (hybrid drafts). */
static int draft_pair_take(engine *e) {
    if (e->n_dfree_pairs > 0) return e->dfree_pairs[--e->n_dfree_pairs];
    int *f = realloc(e->dfree_pairs, (size_t)(e->n_dpairs + 1) * sizeof *f);
    if (!f) return LLC_ERR_NOMEM;
    e->dfree_pairs = f;
    return e->n_dpairs++;
}

/* The latest earlier occurrence of the text's last g tokens (g = 3, 2, 1), and
 * what followed it: up to k tokens into out. */
static int ngram_propose(const int32_t *t, int n, int k, int32_t *out) {
    for (int g = 3; g >= 1; g--) {
        if (n < g + 1) continue;
        const int32_t *key = t + n - g;
        for (int i = n - g - 1; i >= 0; i--) {
            if (memcmp(t + i, key, (size_t)g * sizeof *t)) continue;
            int m = n - (i + g) < k ? n - (i + g) : k;
            memcpy(out, t + i + g, (size_t)m * sizeof *out);
            if (m > 0) return m;
        }
    }
    return 0;
}

/* How many tokens s may propose now (0: it does not speculate this step); counts
 * down a pause. Called once per sequence per step. */
static int spec_budget(const engine *e, seq *s) {
    const request *r = s->req;
    if (r->bs || r->embed || r->sp.n_logprobs > 0 || s->state != SEQ_RUNNING) return 0;
    if (!eng_spec_decoding(e, s)) return 0;
    int k = spec_policy_budget(&s->spec); /* 0: mostly wrong lately, decoding plainly a while */
    if (k <= 0) return 0;
    int n_ctx = e->n_ctx;
    if (e->draft && model_hparams_of(e->draft)->n_ctx_train < n_ctx) /* the draft's positions too */
        n_ctx = model_hparams_of(e->draft)->n_ctx_train;
    int room_ctx = n_ctx - 2 - s->n_tokens, room_gen = r->max_tokens - s->n_gen - 1;
    if (k > room_ctx) k = room_ctx;
    if (k > room_gen) k = room_gen;
    if (e->recurrent) { /* the step ends at the next block boundary at the latest (its state snapshot) */
        const int bs = e->p.block_size, room_block = (kv_seq_computed(s->kv) / bs + 1) * bs - s->n_tokens;
        if (k > room_block) k = room_block;
    }
    return k > 0 ? k : 0;
}

static int push_draft(seq *s, int32_t tok) {
    int rc = eng_seq_push_token(s, tok);
    if (!rc) s->n_draft++;
    return rc;
}

/* One draft pass over the sequences in act[0..n) (want[i]: how many act[i]
 * proposes in all): feeds each one's tokens the draft has not seen, gets logits
 * for its last. Drops sequences whose draft KV cannot grow (compacting both
 * arrays). Returns the number still in act. */
static int draft_pass(engine *e, seq **act, int *want, int n) {
    batch_clear(e->dbatch);
    int k = 0, n_out = 0;
    int rows_of[256];
    for (int i = 0; i < n; i++) {
        seq *s = act[i];
        int done = kv_seq_computed(s->dkv), rows = s->n_tokens - done;
        if (kv_seq_append(s->dkv, s->tokens + done, rows) != 0) continue; /* no room: stop drafting */
        int nb;
        const int32_t *blocks = kv_seq_blocks(s->dkv, &nb);
        if (batch_add(e->dbatch, s->tokens + done, rows, done, blocks, nb, BATCH_OUT_LAST) < 0) {
            kv_seq_truncate(s->dkv, done);
            continue;
        }
        if (e->drecurrent) batch_set_state_slot(e->dbatch, 2 * s->dslot);
        rows_of[k] = rows;
        s->out_row = n_out++;
        want[k] = want[i];
        act[k++] = s;
    }
    if (k == 0) return 0;
    if (n_out > e->cap_dlogits) {
        float *l = realloc(e->dlogits, (size_t)n_out * e->n_vocab * sizeof *l);
        if (!l) return 0;
        e->dlogits = l;
        e->cap_dlogits = n_out;
    }
    const int32_t *src, *dst;
    int n_copies = kv_pool_take_copies(e->dpool, &src, &dst);
    if (model_kv_copy_blocks(e->dkv_store, src, dst, n_copies, NULL) ||
        model_forward(e->draft, e->dkv_store, batch_view(e->dbatch), e->dlogits, NULL)) {
        for (int i = 0; i < k; i++) {
            seq *s = act[i];
            if (!e->drecurrent) kv_seq_truncate(s->dkv, kv_seq_computed(s->dkv));
            else { /* the pass may have moved its state: the draft starts again from nothing */
                kv_seq_free(s->dkv);
                s->dkv = NULL;
                s->dbak_len = -1;
            }
        }
        return 0;
    }
    for (int i = 0; i < k; i++) kv_seq_commit(act[i]->dkv, rows_of[i]);
    return k;
}

/* From the draft's logits for s: the next proposal, or -1 to stop here. */
static int32_t draft_choose(engine *e, seq *s, const float *lg) {
    int V = e->n_vocab;
    bool below_min = s->n_draft < e->p.draft_min;
    if (s->req->sp.temperature <= 0) { /* greedy: the draft's argmax, if it is sure enough */
        int32_t best;
        float lp;
        if (sampler_log_softmax_topn(lg, V, 1, &best, &lp) != 1) return -1;
        return expf(lp) >= e->p.draft_p_min || below_min ? best : -1;
    }
    if (!s->dsmp && sampler_clone(s->smp, 0x5bec, &s->dsmp)) return -1;
    if (!s->q && !(s->q = malloc((size_t)e->p.draft_max * V * sizeof *s->q))) return -1;
    float *q = s->q + (size_t)s->n_draft * V;
    if (sampler_probs(s->dsmp, lg, V, q)) return -1;
    float top = 0;
    for (int i = 0; i < V; i++) top = q[i] > top ? q[i] : top;
    if (top < e->p.draft_p_min && !below_min) return -1;
    int x = sampler_sample_from_probs(s->dsmp, q, V);
    if (x < 0) return -1;
    sampler_accept(s->dsmp, x);
    return x;
}

void eng_spec_propose(engine *e) {
    if (!e->draft && !e->p.ngram) return;
    int decoding = 0;
    for (int i = 0; i < e->n_running; i++) {
        if (eng_spec_decoding(e, e->running[i])) decoding++;
    }
    if (decoding == 0 || decoding > e->p.spec_max_seqs) return; /* compute-bound already: plain decode */
    seq *act[256];
    int want[256], n = 0;
    for (int i = 0; i < e->n_running && n < 256; i++) {
        seq *s = e->running[i];
        int k = spec_budget(e, s);
        if (k == 0) continue;
        if (!e->draft) { /* n-gram lookup */
            int32_t prop[SPEC_MAX];
            int m = ngram_propose(s->tokens, s->n_tokens, k, prop);
            for (int j = 0; j < m && !push_draft(s, prop[j]); j++) {}
            continue;
        }
        if (e->drecurrent && s->dslot < 0 && (s->dslot = draft_pair_take(e)) < 0) {
            s->dslot = -1;
            continue;
        }
        if (!s->dkv) {
            if (kv_seq_create(e->dpool, &s->dkv)) continue;
            /* a hybrid draft computes from the start: its cached blocks keep no state */
            if (!e->drecurrent) kv_seq_match_prefix(s->dkv, s->tokens, s->n_tokens);
        }
        act[n] = s;
        want[n++] = k;
    }
    if (!e->draft || n == 0) return;
    double t0 = llc_now_ms();
    while (n > 0) {
        n = draft_pass(e, act, want, n);
        int still = 0;
        for (int i = 0; i < n; i++) {
            seq *s = act[i];
            if (e->drecurrent && s->n_draft == 0) /* its state after the real tokens, for a rollback */
                s->dbak_len = model_kv_state_copy(e->dkv_store, 2 * s->dslot, 2 * s->dslot + 1, NULL)
                                  ? -1 : kv_seq_computed(s->dkv);
            int32_t x = draft_choose(e, s, e->dlogits + (size_t)s->out_row * e->n_vocab);
            if (x < 0 || push_draft(s, x)) continue;
            if (s->n_draft < want[i] && !tok_is_eog(e->tok, x)) {
                want[still] = want[i];
                act[still++] = s;
            }
        }
        n = still;
    }
    for (int i = 0; i < e->n_running; i++) e->running[i]->out_row = -1;
    e->stats.draft_ms += llc_now_ms() - t0;
}

int eng_spec_verify(engine *e, seq *s, const float *logits) {
    request *r = s->req;
    int V = e->n_vocab, k = s->n_draft;
    int base = s->n_tokens - k; /* tokens[base..] are the proposals */
    int32_t drafts[SPEC_MAX];
    memcpy(drafts, s->tokens + base, (size_t)k * sizeof *drafts);
    s->n_tokens = base;
    s->n_draft = 0;
    if (s->dsmp) sampler_rollback(s->dsmp, k);
    bool greedy = r->sp.temperature <= 0, finished = false;
    int accepted = 0, emitted = 0;
    for (int i = 0; i <= k && !finished; i++) {
        const float *row = logits + (size_t)i * V;
        sample_result res = {0};
        int tok;
        bool took_draft = false;
        if (greedy) {
            if ((tok = eng_sample(e, s, row, &res)) < 0) return tok;
            took_draft = i < k && tok == drafts[i];
        } else {
            /* a grammar masks the row: a draft token it refuses has p = 0 */
            if (!(row = eng_grammar_row(e, s, row))) return LLC_ERR_RANGE;
            if (sampler_probs(s->smp, row, V, e->probs)) return LLC_ERR_RANGE;
            if (i < k) {
                int x = drafts[i];
                const float *q = e->draft ? s->q + (size_t)i * V : NULL;
                double qx = q ? q[x] : 1.0, px = e->probs[x];
                if (qx > 0 && sampler_uniform(s->smp) * qx < px) {
                    took_draft = true;
                    tok = x;
                } else { /* the residual max(0, p - q) */
                    for (int j = 0; j < V; j++) {
                        float d = e->probs[j] - (q ? q[j] : (j == x ? 1.0f : 0.0f));
                        e->resid[j] = d > 0 ? d : 0;
                    }
                    tok = sampler_sample_from_probs(s->smp, e->resid, V);
                    if (tok < 0) tok = sampler_sample_from_probs(s->smp, e->probs, V);
                }
            } else {
                tok = sampler_sample_from_probs(s->smp, e->probs, V);
            }
            if (tok < 0) return tok;
            res.token = tok;
        }
        accepted += took_draft;
        emitted++;
        e->stats.generated_tokens++;
        finished = eng_emit_token(e, s, &res);
        if (!finished && eng_seq_push_token(s, tok)) return LLC_ERR_NOMEM;
        if (!took_draft) break;
    }
    e->stats.spec_drafted += k;
    e->stats.spec_accepted += accepted;
    e->stats.spec_verifies++;
    s->drafted += k;
    s->accepted += accepted;
    /* valid KV: up to the last accepted proposal; the token after it is pending.
     * A hybrid's state holds the rejected ones too: back to the state kept
     * before the step, the accepted tokens are computed again next step. */
    if (s->kv && kv_seq_len(s->kv) > base + accepted) {
        if (!e->recurrent) kv_seq_truncate(s->kv, base + accepted);
        else if (model_kv_state_copy(e->kv_store, s->spec_slot, s->state_slot, NULL)) return LLC_ERR_NOMEM;
        else kv_seq_truncate(s->kv, s->spec_c0);
    }
    draft_rollback(e, s, base + accepted);
    if (s->dsmp && !finished)
        for (int i = base; i < s->n_tokens; i++) sampler_accept(s->dsmp, s->tokens[i]);
    /* the next draft length; a sequence whose proposals keep failing pauses */
    spec_policy_update(&s->spec, k, accepted, e->p.draft_min, e->p.draft_max);
    (void)emitted;
    return 0;
}
