/* engine.c — the engine thread and its step runner: create (and warm up) and
 * destroy the engine, the thread's loop (drain the inbox, run a step, end what a
 * failed step is blamed on, free finished requests, publish metrics, sleep until
 * there is work), and one step (draft proposals, plan, copy-on-write copies, the
 * forward pass, then commit, sample or verify, and stream per sequence). The scheduler is engine_sched.c, request
 * and sequence lifecycles engine_request.c, client event queues
 * engine_client.c, beam search engine_beam.c, speculative decoding
 * engine_spec.c.
 *
 * Every sequence is a list of tokens (prompt + generated) of which a prefix is
 * computed; a step computes the next rows of each running sequence and, when the
 * last of them is the newest token, samples one more. Prefill and decode are the
 * same thing, and a preempted sequence just starts again from its cached prefix. */
#include "engine/sched/engine.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/sched/engine_internal.h"
#include "kernels/topk.h"
#include "kernels/fault.h"

void engine_get_metrics(engine *e, engine_metrics *out) {
    pthread_mutex_lock(&e->mu);
    *out = e->metrics;
    pthread_mutex_unlock(&e->mu);
}

const double engine_latency_bounds_ms[ENGINE_LAT_BUCKETS] = {1,   2,    5,    10,   20,    50,
                                                             100, 200,  500,  1000, 2000,  5000,
                                                             10000, INFINITY};

int engine_get_slots(engine *e, engine_slot **out) {
    *out = NULL;
    pthread_mutex_lock(&e->mu);
    int n = e->n_slots_pub;
    engine_slot *copy = n ? malloc((size_t)n * sizeof *copy) : NULL;
    if (copy) memcpy(copy, e->slots, (size_t)n * sizeof *copy);
    pthread_mutex_unlock(&e->mu);
    if (n && !copy) return LLC_ERR_NOMEM;
    *out = copy;
    return n;
}

/* How many best entries of each output row this step's sampling reads, when
 * every row of the step reads only those (greedy, top-k up to TOPK_MAX, no
 * penalty with tokens in its window, no log-probabilities, no grammar, beam,
 * draft or embedding); 0: the step needs whole rows of logits. */
static int top_entries_needed(const engine *e) {
    if (e->no_top || !model_can_forward_top(e->m)) return 0;
    int k = 0;
    for (int i = 0; i < e->n_running; i++) {
        const seq *s = e->running[i];
        if (!s->rows || s->state != SEQ_RUNNING) continue;
        if (s->req->embed) return 0; /* (its hidden rows: kept simple) */
        if (s->out_row < 0) continue;
        if (s->req->bs || s->n_draft || s->gst) return 0;
        const int need = sampler_top_need(s->smp);
        if (need < 1 || need > TOPK_MAX) return 0;
        if (need > k) k = need;
    }
    return k;
}

static int run_step(engine *e, llc_err *err) {
    eng_spec_propose(e);
    int rows = eng_plan_step(e);
    if (rows < 0)
        return llc_fail(err, rows, rows == LLC_ERR_NOMEM ? "out of memory scheduling the step" : "scheduling failed");
    if (rows == 0) {
        /* a lone sequence that cannot grow: the cache is full for it */
        if (e->n_running > 0 && e->running[0]->req->bs) eng_beam_end(e, e->running[0]->req, FINISH_NONE);
        else if (e->n_running > 0) eng_seq_finish(e, e->running[0], FINISH_LENGTH);
        return 0;
    }
    const int32_t *src, *dst;
    int n_copies = kv_pool_take_copies(e->pool, &src, &dst);
    int rc = model_kv_copy_blocks(e->kv_store, src, dst, n_copies, err);
    const bk_batch *b = batch_view(e->batch);
    const int k_top = top_entries_needed(e);
    if (k_top > 0) {
        if (!rc && b->n_out > e->cap_top) {
            int32_t *ids = realloc(e->top_ids, (size_t)b->n_out * TOPK_MAX * sizeof *ids);
            if (ids) e->top_ids = ids;
            float *vals = ids ? realloc(e->top_vals, (size_t)b->n_out * TOPK_MAX * sizeof *vals) : NULL;
            if (!ids || !vals) return llc_fail(err, LLC_ERR_NOMEM, "out of memory for the best logits");
            e->top_vals = vals;
            e->cap_top = b->n_out;
        }
    } else if (!rc && b->n_out > e->cap_logits) {
        float *l = realloc(e->logits, (size_t)b->n_out * e->n_vocab * sizeof *l);
        if (!l) return llc_fail(err, LLC_ERR_NOMEM, "out of memory for logits");
        e->logits = l;
        e->cap_logits = b->n_out;
    }
    if (!rc && b->n_hidden > e->cap_hidden) {
        float *h = realloc(e->hidden, (size_t)b->n_hidden * model_hparams_of(e->m)->dim * sizeof *h);
        if (!h) return llc_fail(err, LLC_ERR_NOMEM, "out of memory for hidden states");
        e->hidden = h;
        e->cap_hidden = b->n_hidden;
    }
    if (!rc && k_top > 0) rc = model_forward_top(e->m, e->kv_store, b, k_top, e->top_ids, e->top_vals, e->hidden, err);
    else if (!rc) rc = model_forward_hidden(e->m, e->kv_store, b, e->logits, e->hidden, err);
    if (rc) return rc;
    e->stats.steps++;
    e->stats.steps_top += k_top > 0;
    e->stats.computed_tokens += rows;
    /* commit and sample; iterate over a snapshot since finishing edits the list */
    int n = e->n_running;
    seq **snap = malloc((size_t)(n ? n : 1) * sizeof *snap);
    if (!snap) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    memcpy(snap, e->running, (size_t)n * sizeof *snap);
    for (int i = 0; i < n; i++) {
        seq *s = snap[i];
        if (!s->rows || s->state != SEQ_RUNNING) continue; /* or ended by an error above */
        kv_seq_commit(s->kv, s->rows);
        eng_state_snapshot(e, s);
        int rows_done = s->rows;
        s->rows = 0;
        if (s->req->embed) {
            eng_embed_take(e, s, rows_done, e->hidden);
            continue;
        }
        if (s->out_row < 0) continue;
        const float *lg = k_top ? NULL : e->logits + (size_t)s->out_row * e->n_vocab;
        request *r = s->req;
        if (r->bs) {
            if (eng_beam_take_logits(e, s, lg)) eng_request_error(e, r, "out of memory in beam search");
            continue;
        }
        if (s->n_draft) {
            if (eng_spec_verify(e, s, lg)) eng_seq_error(e, s, "out of memory checking draft tokens");
            continue;
        }
        bool first_of_request = s->index == 0 && r->n > 1 && !r->forked;
        if (first_of_request && eng_fork_samples(e, r)) {
            eng_request_error(e, r, "out of memory forking samples");
            continue;
        }
        int count = first_of_request ? r->n : 1;
        for (int k = 0; k < count; k++) {
            seq *t = first_of_request ? r->seqs[k] : s;
            sample_result res;
            int tok = k_top ? sampler_sample_top(t->smp, e->top_ids + (size_t)s->out_row * k_top,
                                                 e->top_vals + (size_t)s->out_row * k_top, k_top, e->n_vocab, &res)
                            : eng_sample(e, t, lg, &res);
            if (tok < 0) {
                eng_seq_error(e, t, t->gst ? "the grammar allows no token here" : "sampling failed");
                continue;
            }
            e->stats.generated_tokens++;
            if (!eng_emit_token(e, t, &res) && eng_seq_push_token(t, tok)) eng_seq_error(e, t, "out of memory for the sample's tokens");
        }
    }
    free(snap);
    eng_beam_advance_ready(e);
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* p50/p90/p99 of hist[0..n) into out[3]. */
static void percentiles(const double *hist, int n, double out[3]) {
    double v[256];
    memcpy(v, hist, (size_t)n * sizeof *v);
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    static const double q[3] = {0.50, 0.90, 0.99};
    for (int i = 0; i < 3; i++) out[i] = n ? v[(int)(q[i] * (n - 1) + 0.5)] : 0;
}

static engine_slot slot_of(const seq *s) {
    const request *r = s->req;
    return (engine_slot){.request_id = r->id, .index = s->index, .running = s->state == SEQ_RUNNING,
                         .n_prompt = r->n_prompt, .n_cached = s->cached, .n_decoded = s->n_gen,
                         .max_tokens = r->max_tokens, .n = r->n, .beam_width = r->bs ? r->n_slots : 0,
                         .priority = r->priority, .sampling = r->sp};
}

/* The live sequences into e->slots_work (running first, then waiting); the
 * count, or -1 when out of memory (the last snapshot then stays). */
static int snapshot_slots(engine *e) {
    int n = e->n_running;
    for (request *r = e->requests; r; r = r->next)
        for (int i = 0; i < r->n_slots; i++)
            if (r->seqs[i] && r->seqs[i]->state == SEQ_WAITING) n++;
    if (n > e->cap_slots_work) {
        engine_slot *p = realloc(e->slots_work, (size_t)n * sizeof *p);
        if (!p) return -1;
        e->slots_work = p;
        e->cap_slots_work = n;
    }
    int k = 0;
    for (int i = 0; i < e->n_running; i++) e->slots_work[k++] = slot_of(e->running[i]);
    for (request *r = e->requests; r; r = r->next)
        for (int i = 0; i < r->n_slots; i++)
            if (r->seqs[i] && r->seqs[i]->state == SEQ_WAITING) e->slots_work[k++] = slot_of(r->seqs[i]);
    return k;
}

static void publish_metrics(engine *e) {
    double ttft[3], tpot[3], t = llc_now_ms();
    percentiles(e->ttft_hist, e->hist_n, ttft);
    percentiles(e->tpot_hist, e->hist_n, tpot);
    kv_stats st;
    kv_pool_stats(e->pool, &st);
    int waiting = 0;
    for (request *r = e->requests; r; r = r->next)
        for (int i = 0; i < r->n_slots; i++)
            if (r->seqs[i] && r->seqs[i]->state == SEQ_WAITING) waiting++;
    engine_metrics *m = &e->stats;
    m->running = e->n_running;
    m->waiting = waiting;
    m->kv_used = st.used;
    m->kv_cached = st.cached;
    m->kv_free = st.free;
    m->kv_total = st.n_blocks;
    if (st.used > m->peak_kv_used) m->peak_kv_used = st.used;
    m->ttft_ms_p50 = ttft[0], m->ttft_ms_p90 = ttft[1], m->ttft_ms_p99 = ttft[2];
    m->tpot_ms_p50 = tpot[0], m->tpot_ms_p90 = tpot[1], m->tpot_ms_p99 = tpot[2];
    if (t - e->rate_t >= 1000.0 || e->n_running == 0) {
        double dt = (t - e->rate_t) / 1000.0;
        m->gen_tokens_per_s =
            dt > 0 && e->rate_t > 0 ? (double)(m->generated_tokens - e->rate_tokens) / dt : 0;
        e->rate_t = t;
        e->rate_tokens = m->generated_tokens;
    }
    m->max_running = e->p.max_running;
    m->block_size = e->p.block_size;
    int n_slots = snapshot_slots(e);
    pthread_mutex_lock(&e->mu);
    e->metrics = *m;
    if (n_slots >= 0) { /* the buffers trade places: no allocation under the lock */
        engine_slot *pub = e->slots;
        int cap = e->cap_slots_pub;
        e->slots = e->slots_work, e->cap_slots_pub = e->cap_slots_work, e->n_slots_pub = n_slots;
        e->slots_work = pub, e->cap_slots_work = cap;
    }
    pthread_mutex_unlock(&e->mu);
}

/* The request a failed step is blamed on: the one with the most rows in it (the
 * prompt whose activations did not fit), or, when the step failed before any
 * rows were given, the one being admitted. NULL when there is none. */
static request *step_culprit(engine *e) {
    seq *worst = NULL;
    for (int i = 0; i < e->n_running; i++)
        if (e->running[i]->rows > 0 && (!worst || e->running[i]->rows > worst->rows)) worst = e->running[i];
    if (worst) return worst->req;
    seq *next = eng_next_waiting(e);
    return next ? next->req : e->n_running > 0 ? e->running[0]->req : NULL;
}

/* A failed step changed nothing that was computed: its rows were reserved, not
 * committed, and the program goes on. Out of memory (activation buffers that
 * could not grow for a bigger batch, a buffer of the engine's): the request it
 * is blamed on ends with the error, and every other sequence of the step goes
 * back to waiting (a preemption: its blocks are released, full ones stay
 * cached) to run again without it, so one prompt too big for the memory left
 * does not end everyone's answers. Any other failure (a device fault) ends
 * every live request. Either way each sample gets its one done event. */
static void step_failed(engine *e, int rc, const char *msg) {
    for (int i = 0; i < e->n_running; i++) eng_spec_drop(e, e->running[i]);
    request *culprit = rc == LLC_ERR_NOMEM ? step_culprit(e) : NULL;
    if (!culprit) {
        for (request *r = e->requests; r; r = r->next)
            if (r->n_live > 0) eng_request_error(e, r, msg);
        return;
    }
    eng_request_error(e, culprit, msg);
    for (int i = e->n_running - 1; i >= 0; i--) {
        seq *s = e->running[i];
        if (!s->rows) continue; /* not in the step: its blocks were not touched */
        s->rows = 0;
        eng_seq_requeue(e, s);
    }
}

static void *engine_main(void *arg) {
    engine *e = arg;
    for (;;) {
        bool stop;
        eng_drain_inbox(e, &stop);
        if (stop) break;
        llc_err err;
        double t_step = llc_now_ms();
        int step_rc = run_step(e, &err);
        e->stats.step_ms += llc_now_ms() - t_step;
        if (step_rc) step_failed(e, step_rc, err.msg);
        eng_reap_requests(e);
        publish_metrics(e);
        pthread_mutex_lock(&e->mu);
        while (!e->inbox_head && !e->stop && e->n_running == 0 && !eng_next_waiting(e))
            pthread_cond_wait(&e->cv, &e->mu);
        pthread_mutex_unlock(&e->mu);
    }
    for (request *r = e->requests; r; r = r->next)
        if (!r->cancelled) eng_cancel_request(e, r);
    eng_reap_requests(e);
    return NULL;
}

/* One forward pass of ENGINE_WARMUP_TOKENS tokens through a KV sequence of its
 * own, freed uncached afterwards: pages the weights in and sizes the buffers.
 * Best effort: a failure here shows again, with its message, at the first step. */
static void warm_model(engine *e, model *m, model_kv *kv, kv_pool *pool, batch *b, float **logits,
                       int *cap_logits) {
    int32_t toks[ENGINE_WARMUP_TOKENS];
    int n = e->n_ctx - 1 < ENGINE_WARMUP_TOKENS ? e->n_ctx - 1 : ENGINE_WARMUP_TOKENS;
    if (n < 1) return;
    int32_t bos = tok_bos(e->tok);
    for (int i = 0; i < n; i++) toks[i] = i == 0 && bos >= 0 ? bos : (int32_t)((i * 37 + 1) % e->n_vocab);
    if (*cap_logits < 1) {
        float *l = realloc(*logits, (size_t)e->n_vocab * sizeof *l);
        if (!l) return;
        *logits = l;
        *cap_logits = 1;
    }
    kv_seq *s;
    if (kv_seq_create(pool, &s)) return;
    llc_err err;
    batch_clear(b);
    if (kv_seq_append(s, toks, n) == 0) {
        int n_blocks;
        const int32_t *blocks = kv_seq_blocks(s, &n_blocks);
        if (batch_add(b, toks, n, 0, blocks, n_blocks, BATCH_OUT_LAST) >= 0)
            model_forward(m, kv, batch_view(b), *logits, &err);
    }
    batch_clear(b);
    kv_seq_free_uncached(s); /* never committed: nothing was hashed, nothing stays cached */
}

int engine_create(model *m, const tokenizer *tok, const engine_params *p, engine **out,
                  llc_err *err) {
    *out = NULL;
    engine *e = calloc(1, sizeof *e);
    if (!e) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    e->m = m;
    e->tok = tok;
    e->p = *p;
    if (e->p.block_size <= 0) e->p.block_size = 16;
    if (e->p.max_step_tokens <= 0) e->p.max_step_tokens = 512;
    if (e->p.max_running <= 0) e->p.max_running = 256;
    e->max_snaps = e->p.max_snapshots < 0                     ? 0
                   : e->p.max_snapshots == 0                  ? ENGINE_MAX_SNAPSHOTS
                   : e->p.max_snapshots > ENGINE_MAX_SNAPSHOTS ? ENGINE_MAX_SNAPSHOTS
                                                               : e->p.max_snapshots;
    const model_hparams *hp = model_hparams_of(m);
    e->n_vocab = hp->n_vocab;
    const char *top_env = getenv("LLC_TOP_K");
    e->no_top = top_env && !strcmp(top_env, "0");
    e->n_ctx = hp->n_ctx_train;
    e->max_blocks_per_seq = (e->n_ctx + e->p.block_size - 1) / e->p.block_size + 1;
    e->recurrent = hp->n_recurrent > 0;
    if (e->recurrent) { /* state snapshots by block id */
        e->snap_slot = malloc((size_t)(e->p.n_blocks > 0 ? e->p.n_blocks : 1) * sizeof *e->snap_slot);
        e->snap_key = malloc((size_t)(e->p.n_blocks > 0 ? e->p.n_blocks : 1) * sizeof *e->snap_key);
        if (!e->snap_slot || !e->snap_key) {
            free(e->snap_slot), free(e->snap_key), free(e);
            return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
        }
        for (int i = 0; i < e->p.n_blocks; i++) e->snap_slot[i] = -1;
    }
    int rc = model_kv_create(m, e->p.n_blocks, e->p.block_size, e->p.kv_type, &e->kv_store, err);
    if (!rc && kv_pool_create(e->p.n_blocks, e->p.block_size, &e->pool))
        rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory for the KV pool");
    if (!rc && batch_create(e->max_blocks_per_seq, e->p.block_size, &e->batch))
        rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    if (!rc) rc = eng_spec_init(e, err);
    if (rc) {
        free(e->snap_slot), free(e->snap_key);
        eng_spec_free(e);
        eng_grammar_free(e);
        batch_free(e->batch);
        kv_pool_free(e->pool);
        model_kv_free(e->kv_store);
        free(e);
        return rc;
    }
    if (e->p.warmup) {
        warm_model(e, e->m, e->kv_store, e->pool, e->batch, &e->logits, &e->cap_logits);
        if (e->draft) warm_model(e, e->draft, e->dkv_store, e->dpool, e->dbatch, &e->dlogits, &e->cap_dlogits);
    }
    llc_fault_arm_from_env(); /* tests: LLC_FAULT_ALLOC (engine.h) */
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    if (pthread_create(&e->thread, NULL, engine_main, e)) {
        eng_spec_free(e);
        batch_free(e->batch);
        kv_pool_free(e->pool);
        model_kv_free(e->kv_store);
        free(e->snap_slot), free(e->snap_key);
        free(e);
        return llc_fail(err, LLC_ERR_NOMEM, "cannot start the engine thread");
    }
    *out = e;
    return 0;
}

void engine_destroy(engine *e) {
    if (!e) return;
    pthread_mutex_lock(&e->mu);
    e->stop = true;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    for (inbox_msg *m = e->inbox_head, *next; m; m = next) {
        next = m->next;
        eng_request_free(m->req);
        free(m);
    }
    free(e->running);
    free(e->free_states);
    free(e->snap_slot);
    free(e->snap_key);
    free(e->slots);
    free(e->slots_work);
    free(e->logits);
    free(e->top_ids);
    free(e->top_vals);
    free(e->hidden);
    eng_spec_free(e);
    eng_grammar_free(e);
    batch_free(e->batch);
    kv_pool_free(e->pool);
    model_kv_free(e->kv_store);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}
