/* engine_beam.c — beam search inside continuous batching. Each live beam is a
 * sequence in the running set, decoded in the same steps as everything else.
 * When all live beams of a request have their logits, beam.c picks the next
 * beams; a parent's first child continues in the parent's sequence, the others
 * fork it (sharing its KV blocks, copy-on-write), and parents with no child are
 * freed. The winners stream out once the search ends. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sched/engine_internal.h"

int eng_beam_take_logits(engine *e, seq *s, const float *logits) {
    request *r = s->req;
    int n = beam_n_candidates(r->bs);
    int32_t ids[2 * BEAM_MAX_WIDTH];
    float lp[2 * BEAM_MAX_WIDTH];
    beam_cand c[2 * BEAM_MAX_WIDTH];
    int got = sampler_log_softmax_topn(logits, e->n_vocab, n, ids, lp);
    if (got < 0) return got;
    for (int i = 0; i < got; i++) c[i] = (beam_cand){ids[i], lp[i], tok_is_eog(e->tok, ids[i])};
    return beam_set_candidates(r->bs, s->index, c, got);
}

/* Releases a beam's sequence: out of the running set, blocks back to the pool. */
static void beam_seq_drop(engine *e, seq *s) {
    if (s->state == SEQ_RUNNING) eng_running_remove(e, s);
    s->state = SEQ_DONE;
    kv_seq_free(s->kv);
    s->kv = NULL;
}

/* A new beam forked off parent p (same tokens, shared blocks). */
static int beam_fork(engine *e, request *r, seq *p, seq **out) {
    seq *s;
    int rc = eng_seq_create(e, r, 0, p, &s);
    if (rc) return rc;
    s->admitted_once = true;
    s->cached = p->cached;
    if (p->kv) {
        if ((rc = kv_seq_fork(p->kv, &s->kv)) || (rc = eng_running_add(e, s)) || (rc = eng_state_fork(e, p, s))) {
            if (s->state == SEQ_RUNNING) eng_running_remove(e, s);
            eng_seq_free(s);
            return rc;
        }
    } else {
        s->state = SEQ_WAITING; /* the parent was preempted: recompute from the cache */
    }
    *out = s;
    return 0;
}

static int beam_step(engine *e, request *r) {
    int parent[BEAM_MAX_WIDTH];
    int32_t token[BEAM_MAX_WIDTH];
    int n_new = beam_advance(r->bs, parent, token);
    if (n_new < 0) return n_new;
    double t = llc_now_ms();
    if (r->t_first_beam == 0) r->t_first_beam = t;
    if (n_new == 0) {
        eng_beam_end(e, r, FINISH_NONE);
        return 0;
    }
    seq *old[BEAM_MAX_WIDTH], *next[BEAM_MAX_WIDTH] = {0};
    bool claimed[BEAM_MAX_WIDTH] = {0};
    memcpy(old, r->seqs, (size_t)r->n_slots * sizeof *old);
    int rc = 0;
    /* forks first, while every parent still holds its old tokens */
    for (int k = 0; k < n_new && !rc; k++) {
        int p = parent[k];
        if (!claimed[p]) {
            claimed[p] = true;
            next[k] = old[p];
        } else {
            rc = beam_fork(e, r, old[p], &next[k]);
        }
    }
    for (int k = 0; k < n_new && !rc; k++) rc = eng_seq_push_token(next[k], token[k]);
    for (int i = 0; i < r->n_slots; i++)
        if (old[i] && !(i < BEAM_MAX_WIDTH && claimed[i])) {
            beam_seq_drop(e, old[i]);
            eng_seq_free(old[i]);
        }
    memset(r->seqs, 0, (size_t)r->n_slots * sizeof *r->seqs);
    for (int k = 0; k < n_new; k++) {
        if (!next[k]) continue;
        next[k]->index = k;
        r->seqs[k] = next[k];
    }
    r->n_live = n_new;
    return rc;
}

void eng_beam_advance_ready(engine *e) {
    for (request *r = e->requests; r; r = r->next) {
        if (!r->bs || r->n_live == 0 || !beam_ready(r->bs)) continue;
        if (beam_step(e, r)) {
            engine_event ev = {.kind = EV_ERROR, .request_id = r->id};
            snprintf(ev.message, sizeof ev.message, "out of memory in beam search");
            if (!r->client->closed) eng_client_push(r->client, &ev);
            eng_beam_end(e, r, FINISH_ERROR);
        }
    }
}

/* Streams hypothesis `rank` as sample `rank`: detokenized, cut at a stop string. */
static void beam_emit(engine *e, request *r, int rank, double t_end) {
    engine_event done = {.kind = EV_DONE, .request_id = r->id, .end_token = -1, .seq_index = rank,
                         .finish = FINISH_LENGTH, .prompt_tokens = r->n_prompt};
    const int32_t *toks = NULL;
    int n = 0;
    bool eog = false;
    tok_stream *ts = NULL;
    stopstr *ss = NULL;
    bool have = beam_result(r->bs, rank, &toks, &n, NULL, &eog) == 0;
    if (have && (tok_stream_create(e->tok, r->special_text, &ts) ||
                 stopstr_create((const char *const *)r->stop, r->n_stop, &ss)))
        have = false, done.finish = FINISH_ERROR;
    if (have && r->continues_prompt) tok_stream_continue(ts, r->prompt, r->n_prompt);
    bool stopped = false;
    for (int i = 0; have && i < n && !stopped; i++) {
        char *text = NULL;
        size_t len = 0;
        int rc = eng_token_text(ts, ss, toks[i], i == n - 1, &text, &len);
        if (rc < 0) { /* out of memory: this hypothesis ends in an error */
            have = false, done.finish = FINISH_ERROR;
            break;
        }
        stopped = rc == 1;
        engine_event ev = {.kind = EV_TOKEN, .request_id = r->id, .seq_index = rank,
                           .token = toks[i], .text = text, .text_len = text ? len : 0};
        ev.lp.token = toks[i];
        eng_client_push(r->client, &ev);
        done.completion_tokens++;
    }
    if (have) done.finish = stopped || eog ? FINISH_STOP : FINISH_LENGTH;
    e->stats.generated_tokens += done.completion_tokens;
    done.cached_tokens = r->seqs[0] ? r->seqs[0]->cached : 0;
    done.queue_ms = r->t_admit > 0 ? r->t_admit - r->t_submit : t_end - r->t_submit;
    done.ttft_ms = t_end - r->t_submit; /* the first token shows when the search ends */
    done.tpot_ms = done.completion_tokens > 1 && r->t_first_beam > 0
                       ? (t_end - r->t_first_beam) / (done.completion_tokens - 1)
                       : 0;
    eng_client_push_done(r, &done);
    tok_stream_free(ts);
    stopstr_free(ss);
}

void eng_beam_end(engine *e, request *r, engine_finish finish) {
    if (r->beam_ended) return;
    double t = llc_now_ms();
    if (finish == FINISH_NONE) beam_finish_now(r->bs);
    for (int rank = 0; rank < r->n && !r->client->closed; rank++) {
        if (finish == FINISH_NONE) {
            beam_emit(e, r, rank, t);
        } else {
            engine_event ev = {.kind = EV_DONE, .request_id = r->id, .end_token = -1, .seq_index = rank,
                               .finish = finish, .prompt_tokens = r->n_prompt};
            eng_client_push_done(r, &ev);
        }
    }
    for (int i = 0; i < r->n_slots; i++)
        if (r->seqs[i]) beam_seq_drop(e, r->seqs[i]);
    r->n_live = 0;
    r->beam_ended = true;
}
