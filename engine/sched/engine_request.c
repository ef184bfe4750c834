/* engine_request.c — the life of a request and its sequences: submit and cancel
 * (validated on the caller's thread, handed to the engine thread through the
 * inbox), draining the inbox, creating, forking and freeing sequences, streaming
 * a sampled token's text through the detokenizer and stop strings, ending a
 * sample (done event, blocks back to the pool), errors, and freeing finished
 * requests. Everything but engine_submit/engine_cancel runs on the engine
 * thread. */
#include "engine/sched/engine.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sched/engine_internal.h"
#include "kernels/fault.h"
#include "kernels/sbuf.h"

void eng_inbox_post(engine *e, inbox_msg *msg) {
    pthread_mutex_lock(&e->mu);
    if (e->inbox_tail) e->inbox_tail->next = msg;
    else e->inbox_head = msg;
    e->inbox_tail = msg;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

/* ---- requests ---- */

void eng_request_free(request *r) {
    if (!r) return;
    free(r->prompt);
    free(r->input_start);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->seqs);
    for (int i = 0; i < r->n_done_nodes; i++) free(r->done_nodes[i]);
    free(r->done_nodes);
    beam_search_free(r->bs);
    grammar_free(r->grammar);
    free(r);
}

int64_t engine_submit(engine *e, engine_client *c, const gen_request *g, llc_err *err) {
    if (!g->prompt || g->n_prompt < 1) return llc_fail(err, LLC_ERR_RANGE, "the prompt is empty");
    if (g->n < 1 || g->n > 64) return llc_fail(err, LLC_ERR_RANGE, "n must be 1..64");
    if (g->max_tokens < 1) return llc_fail(err, LLC_ERR_RANGE, "max_tokens must be at least 1");
    if (g->beam_width < 0 || g->beam_width > BEAM_MAX_WIDTH)
        return llc_fail(err, LLC_ERR_RANGE, "beam width must be 0..%d", BEAM_MAX_WIDTH);
    if (g->beam_width > 0 && g->n > g->beam_width)
        return llc_fail(err, LLC_ERR_RANGE, "n (%d) cannot exceed the beam width (%d)", g->n,
                        g->beam_width);
    if (g->n_prompt >= e->n_ctx)
        return llc_fail(err, LLC_ERR_RANGE, "the prompt is %d tokens; the context is %d",
                        g->n_prompt, e->n_ctx);
    int need = (g->n_prompt + 1 + e->p.block_size - 1) / e->p.block_size;
    if (need > e->p.n_blocks)
        return llc_fail(err, LLC_ERR_RANGE, "the prompt needs %d KV blocks; the cache has %d", need,
                        e->p.n_blocks);
    for (int i = 0; i < g->n_prompt; i++)
        if (g->prompt[i] < 0 || g->prompt[i] >= e->n_vocab)
            return llc_fail(err, LLC_ERR_RANGE, "token id %d is outside the vocabulary", g->prompt[i]);
    int rc = sampler_params_check(&g->sampling, err);
    if (rc) return rc;
    if ((g->grammar || g->parsed_grammar) && g->beam_width > 0)
        return llc_fail(err, LLC_ERR_UNSUPPORTED, "a grammar (structured output) cannot be used with beam search");
    grammar *gr = grammar_ref(g->parsed_grammar);
    if (!gr && g->grammar && (rc = grammar_parse(g->grammar, strlen(g->grammar), &gr, err))) return rc;
    request *r = calloc(1, sizeof *r);
    if (!r) return grammar_free(gr), llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    r->grammar = gr;
    r->prompt = malloc((size_t)g->n_prompt * sizeof *r->prompt);
    r->n_slots = g->beam_width > g->n ? g->beam_width : g->n;
    r->seqs = calloc((size_t)r->n_slots, sizeof *r->seqs);
    r->stop = calloc((size_t)(g->n_stop > 0 ? g->n_stop : 1), sizeof *r->stop);
    bool ok = r->prompt && r->seqs && r->stop && eng_request_reserve_done(r, g->n) == 0;
    if (ok && g->beam_width > 0) /* a beam's positions stay inside the context */
        ok = beam_search_create(g->beam_width, g->max_tokens < e->n_ctx - g->n_prompt
                                                   ? g->max_tokens : e->n_ctx - g->n_prompt,
                                &r->bs) == 0;
    for (int i = 0; ok && i < g->n_stop; i++) {
        r->stop[i] = strdup(g->stop[i] ? g->stop[i] : "");
        ok = r->stop[i] != NULL;
        r->n_stop = i + 1;
    }
    if (!ok) {
        eng_request_free(r);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    memcpy(r->prompt, g->prompt, (size_t)g->n_prompt * sizeof *r->prompt);
    r->n_prompt = g->n_prompt;
    r->continues_prompt = g->continues_prompt;
    r->special_text = g->special_text;
    r->sp = g->sampling;
    r->n = g->n;
    r->max_tokens = g->max_tokens;
    r->priority = g->priority;
    inbox_msg *msg = calloc(1, sizeof *msg);
    if (!msg) {
        eng_request_free(r);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    return eng_request_post(e, c, r, msg);
}

int64_t eng_request_post(engine *e, engine_client *c, request *r, inbox_msg *msg) {
    r->client = c;
    r->t_submit = llc_now_ms();
    pthread_mutex_lock(&e->mu);
    r->id = ++e->next_id;
    c->active++;
    pthread_mutex_unlock(&e->mu);
    msg->kind = MSG_SUBMIT;
    msg->req = r;
    int64_t id = r->id;
    eng_inbox_post(e, msg);
    return id;
}

void engine_cancel(engine *e, int64_t request_id) {
    inbox_msg *msg = calloc(1, sizeof *msg);
    if (!msg) return;
    msg->kind = MSG_CANCEL;
    msg->id = request_id;
    eng_inbox_post(e, msg);
}

/* ---- sequences (engine thread only) ---- */

int eng_seq_push_token(seq *s, int32_t tok) {
    if (s->n_tokens == s->cap_tokens) {
        int cap = s->cap_tokens ? s->cap_tokens * 2 : 64;
        int32_t *t = realloc(s->tokens, (size_t)cap * sizeof *t);
        if (!t) return LLC_ERR_NOMEM;
        s->tokens = t;
        s->cap_tokens = cap;
    }
    s->tokens[s->n_tokens++] = tok;
    return 0;
}

void eng_seq_free(seq *s) {
    if (!s) return;
    kv_seq_free(s->kv);
    eng_spec_seq_free(s);
    free(s->embd_sum);
    sampler_free(s->smp);
    grammar_state_free(s->gst);
    tok_stream_free(s->ts);
    stopstr_free(s->ss);
    free(s->tokens);
    free(s);
}

/* A sample's streaming state: sampler (seed + index), detokenizer, stop strings. */
int eng_seq_create(engine *e, request *r, int index, const seq *from, seq **out) {
    seq *s = calloc(1, sizeof *s);
    if (!s) return LLC_ERR_NOMEM;
    s->req = r;
    s->index = index;
    s->state_slot = -1;
    s->snap_from = -1;
    s->spec_slot = s->dslot = s->dbak_len = -1;
    s->out_row = -1;
    s->end_token = -1;
    spec_policy_init(&s->spec, e->p.draft_max);
    int rc = 0;
    if (!r->bs) {
        sampler_params sp = r->sp;
        if (sp.seed != SAMPLER_SEED_RANDOM) sp.seed += (uint64_t)index;
        rc = sampler_create(&sp, &s->smp, NULL);
        if (!rc) rc = tok_stream_create(e->tok, r->special_text, &s->ts);
        if (!rc && r->continues_prompt) tok_stream_continue(s->ts, r->prompt, r->n_prompt); /* " was" */
        if (!rc) rc = stopstr_create((const char *const *)r->stop, r->n_stop, &s->ss);
        if (!rc) rc = eng_grammar_seq_init(e, s, from);
    }
    const int32_t *src = from ? from->tokens : r->prompt;
    int n = from ? from->n_tokens : r->n_prompt;
    for (int i = 0; !rc && i < n; i++) rc = eng_seq_push_token(s, src[i]);
    if (!rc && s->smp) sampler_accept_prompt(s->smp, r->prompt, r->n_prompt);
    if (rc) {
        eng_seq_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static void emit_done(engine *e, seq *s, engine_finish finish) {
    request *r = s->req;
    engine_event ev = {.kind = EV_DONE, .request_id = r->id, .end_token = -1, .seq_index = s->index, .finish = finish};
    ev.prompt_tokens = r->embed ? s->n_tokens : r->n_prompt;
    ev.cached_tokens = s->cached;
    ev.completion_tokens = s->n_gen;
    ev.queue_ms = r->t_admit > 0 ? r->t_admit - r->t_submit : llc_now_ms() - r->t_submit;
    ev.ttft_ms = s->t_first > 0 ? s->t_first - r->t_submit : 0;
    ev.tpot_ms = s->n_gen > 1 ? (s->t_last - s->t_first) / (s->n_gen - 1) : 0;
    ev.drafted_tokens = (int)s->drafted;
    ev.accepted_tokens = (int)s->accepted;
    ev.end_token = s->end_token;
    ev.end_lp = s->end_lp;
    ev.seed = s->smp ? sampler_seed(s->smp) : 0;
    eng_client_push_done(r, &ev);
}

void eng_seq_drop_kv(seq *s) {
    if (s->req->embed) kv_seq_free_uncached(s->kv);
    else kv_seq_free(s->kv);
    s->kv = NULL;
    kv_seq_free(s->dkv);
    s->dkv = NULL;
}

/* One latency into a histogram of engine_latency_bounds_ms (metrics). */
static void latency_add(int64_t *buckets, int64_t *count, double *sum, double ms) {
    int b = 0;
    while (b < ENGINE_LAT_BUCKETS - 1 && !(ms <= engine_latency_bounds_ms[b])) b++;
    buckets[b]++;
    (*count)++;
    *sum += ms;
}

/* Ends one sample: event, blocks back to the pool (full ones stay cached). */
void eng_seq_finish(engine *e, seq *s, engine_finish finish) {
    if (s->state == SEQ_DONE) return;
    if (s->n_gen > 0) {
        e->ttft_hist[e->hist_pos] = s->t_first - s->req->t_submit;
        e->tpot_hist[e->hist_pos] = s->n_gen > 1 ? (s->t_last - s->t_first) / (s->n_gen - 1) : 0;
        e->hist_pos = (e->hist_pos + 1) % 256;
        if (e->hist_n < 256) e->hist_n++;
        latency_add(e->stats.ttft_buckets, &e->stats.ttft_count, &e->stats.ttft_sum_ms,
                    s->t_first - s->req->t_submit);
        if (s->n_gen > 1)
            latency_add(e->stats.tpot_buckets, &e->stats.tpot_count, &e->stats.tpot_sum_ms,
                        (s->t_last - s->t_first) / (s->n_gen - 1));
    }
    if (s->state == SEQ_RUNNING) eng_running_remove(e, s);
    s->state = SEQ_DONE;
    eng_seq_drop_kv(s);
    if (!s->req->client->closed && !s->req->bs) emit_done(e, s, finish);
    s->req->n_live--;
}

/* A request with n > 1 ended before its samples were forked from the first:
 * samples 1..n-1 never ran, but each still gets its done event. */
static void finish_unforked_samples(engine *e, request *r, engine_finish finish) {
    if (r->forked || r->n < 2) return;
    r->forked = true; /* settled: no fork will happen now */
    for (int i = 1; i < r->n && !r->client->closed; i++) {
        engine_event ev = {.kind = EV_DONE, .request_id = r->id, .end_token = -1, .seq_index = i, .finish = finish,
                           .prompt_tokens = r->n_prompt};
        ev.queue_ms = llc_now_ms() - r->t_submit;
        eng_client_push_done(r, &ev);
    }
}

void eng_seq_error(engine *e, seq *s, const char *msg) {
    if (s->state == SEQ_DONE) return;
    engine_event ev = {.kind = EV_ERROR, .request_id = s->req->id, .seq_index = s->index};
    snprintf(ev.message, sizeof ev.message, "%s", msg);
    if (!s->req->client->closed) eng_client_push(s->req->client, &ev);
    eng_seq_finish(e, s, FINISH_ERROR);
}

void eng_request_error(engine *e, request *r, const char *msg) {
    engine_event ev = {.kind = EV_ERROR, .request_id = r->id};
    snprintf(ev.message, sizeof ev.message, "%s", msg);
    if (!r->client->closed) eng_client_push(r->client, &ev);
    if (r->bs) {
        eng_beam_end(e, r, FINISH_ERROR);
        return;
    }
    for (int i = 0; i < r->n; i++)
        if (r->seqs[i]) eng_seq_finish(e, r->seqs[i], FINISH_ERROR);
    finish_unforked_samples(e, r, FINISH_ERROR);
}

/* Frees finished requests and clients that were let go. */
void eng_reap_requests(engine *e) {
    for (request **pp = &e->requests; *pp;) {
        request *r = *pp;
        bool done = r->n_live == 0 && (r->forked || r->beam_ended ||
                                       (r->seqs[0] && r->seqs[0]->state == SEQ_DONE));
        if (!done) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        for (int i = 0; i < r->n_slots; i++) eng_seq_free(r->seqs[i]);
        eng_client_release(e, r->client);
        eng_request_free(r);
    }
}

void eng_cancel_request(engine *e, request *r) {
    r->cancelled = true;
    if (r->bs) {
        eng_beam_end(e, r, FINISH_CANCELLED);
        return;
    }
    for (int i = 0; i < r->n; i++)
        if (r->seqs[i]) eng_seq_finish(e, r->seqs[i], FINISH_CANCELLED);
    if (!r->forked && !r->seqs[0]) r->n_live = 0;
    finish_unforked_samples(e, r, FINISH_CANCELLED);
}

void eng_drain_inbox(engine *e, bool *stop) {
    pthread_mutex_lock(&e->mu);
    inbox_msg *m = e->inbox_head;
    e->inbox_head = e->inbox_tail = NULL;
    *stop = e->stop;
    pthread_mutex_unlock(&e->mu);
    while (m) {
        inbox_msg *next = m->next;
        if (m->kind == MSG_SUBMIT) {
            request *r = m->req;
            seq *s0 = NULL;
            if (r->embed ? eng_embed_seqs(e, r) : eng_seq_create(e, r, 0, NULL, &s0)) {
                engine_event ev = {.kind = EV_ERROR, .request_id = r->id};
                snprintf(ev.message, sizeof ev.message, "out of memory for a new request");
                eng_client_push(r->client, &ev);
                for (int i = 0; i < r->n; i++) { /* and each sample (or input) its done event */
                    engine_event done = {.kind = EV_DONE, .request_id = r->id, .end_token = -1, .seq_index = i,
                                         .finish = FINISH_ERROR, .prompt_tokens = r->n_prompt};
                    done.queue_ms = llc_now_ms() - r->t_submit;
                    eng_client_push_done(r, &done);
                }
                eng_client_release(e, r->client);
                eng_request_free(r);
            } else {
                if (!r->embed) {
                    r->seqs[0] = s0;
                    r->n_live = 1;
                    s0->state = SEQ_WAITING;
                }
                request **pp = &e->requests; /* keep submission order */
                while (*pp) pp = &(*pp)->next;
                *pp = r;
            }
        } else {
            for (request *r = e->requests; r; r = r->next)
                if ((m->kind == MSG_CANCEL && r->id == m->id) ||
                    (m->kind == MSG_CLIENT_GONE && r->client == m->client))
                    if (!r->cancelled) eng_cancel_request(e, r);
        }
        free(m);
        m = next;
    }
}

int eng_token_text(tok_stream *ts, stopstr *ss, int32_t tok, bool at_end, char **text, size_t *len) {
    char piece[512];
    const char *show;
    size_t show_len;
    sbuf out = {0};
    int n = tok_stream_push(ts, tok, piece, sizeof piece);
    int rc = llc_fault_text_fails() ? LLC_ERR_NOMEM : stopstr_push(ss, piece, (size_t)(n > 0 ? n : 0), &show, &show_len);
    if (rc >= 0) sb_add(&out, show, show_len);
    if (at_end && rc == 0) { /* what the detokenizer and the stop matcher still hold */
        while (rc == 0 && (n = tok_stream_flush(ts, piece, sizeof piece)) > 0) {
            rc = stopstr_push(ss, piece, (size_t)n, &show, &show_len);
            if (rc >= 0) sb_add(&out, show, show_len);
        }
        if (rc == 0 && (rc = stopstr_flush(ss, &show, &show_len)) == 0) sb_add(&out, show, show_len);
    }
    *len = out.len;
    *text = sb_take(&out);
    if (rc < 0 || !*text) {
        free(*text);
        *text = NULL;
        *len = 0;
        return LLC_ERR_NOMEM;
    }
    return rc;
}

/* Streams a sampled token: detokenize, stop strings, events. Returns true when the
 * sample is finished. */
bool eng_emit_token(engine *e, seq *s, const sample_result *res) {
    request *r = s->req;
    int32_t tok = res->token;
    double t = llc_now_ms();
    if (!s->t_first) s->t_first = t;
    s->t_last = t;
    s->n_gen++;
    sampler_accept(s->smp, tok);
    if (tok_is_eog(e->tok, tok)) {
        s->end_token = tok;
        s->end_lp = *res;
        eng_seq_finish(e, s, FINISH_STOP);
        return true;
    }
    /* the grammar follows the token (sampled from its mask); when nothing more
       may follow, the sample ends here */
    bool grammar_done = false;
    if (s->gst) {
        if (grammar_state_accept(s->gst, e->gvocab, tok)) {
            eng_seq_finish(e, s, FINISH_ERROR);
            return true;
        }
        grammar_done = grammar_state_must_end(s->gst);
    }
    bool at_end = grammar_done || s->n_gen >= r->max_tokens || s->n_tokens + 1 >= e->n_ctx;
    size_t len = 0;
    char *text = NULL;
    int rc = eng_token_text(s->ts, s->ss, tok, at_end, &text, &len);
    bool lost = rc < 0; /* the text, or the event carrying it, could not be kept */
    if (!lost) {
        engine_event ev = {.kind = EV_TOKEN, .request_id = r->id, .seq_index = s->index, .token = tok,
                           .text = text, .text_len = len, .lp = *res};
        if (r->client->closed) free(text);
        else lost = !eng_client_push(r->client, &ev);
    }
    if (lost) { /* end here, saying so, not with a hole in the answer */
        eng_seq_error(e, s, "out of memory: the answer's text could not be kept");
        return true;
    }
    const bool stopped = rc == 1;
    if (stopped || at_end) {
        eng_seq_finish(e, s, stopped || grammar_done ? FINISH_STOP : FINISH_LENGTH);
        return true;
    }
    return false;
}

/* After the prompt of a request with n > 1: fork the other samples off seq 0. */
int eng_fork_samples(engine *e, request *r) {
    seq *s0 = r->seqs[0];
    for (int i = 1; i < r->n; i++) {
        seq *s;
        int rc = eng_seq_create(e, r, i, s0, &s);
        if (!rc && (rc = kv_seq_fork(s0->kv, &s->kv))) eng_seq_free(s), s = NULL;
        if (rc) return rc;
        s->cached = s0->cached;
        r->seqs[i] = s;
        r->n_live++;
        /* (a sample that could not run is preempted-like: it waits and recomputes) */
        if (eng_running_add(e, s) || eng_state_fork(e, s0, s)) {
            if (s->state == SEQ_RUNNING) eng_running_remove(e, s);
            kv_seq_free(s->kv);
            s->kv = NULL;
            s->state = SEQ_WAITING;
        }
    }
    r->forked = true;
    return 0;
}
