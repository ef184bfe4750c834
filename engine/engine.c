/* engine.c — the engine thread: inbox of submits and cancels, the scheduler that
 * builds one varlen batch per step (decode rows first, then prefill chunks up to
 * the token budget), preemption when KV blocks run out, sampling, streaming text
 * through the detokenizer and stop strings, and per-client event queues.
 *
 * Every sequence is a list of tokens (prompt + generated) of which a prefix is
 * computed; a step computes the next rows of each running sequence and, when the
 * last of them is the newest token, samples one more. Prefill and decode are the
 * same thing, and a preempted sequence just starts again from its cached prefix. */
#include "engine/engine.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine_internal.h"

void eng_client_push(engine_client *c, const engine_event *ev) {
    ev_node *n = malloc(sizeof *n);
    if (!n) return; /* out of memory: the event is lost, the engine goes on */
    n->ev = *ev;
    n->next = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->tail) c->tail->next = n;
    else c->head = n;
    c->tail = n;
    pthread_mutex_unlock(&c->mu);
    uint64_t one = 1;
    ssize_t w = write(c->efd, &one, sizeof one);
    (void)w;
}

int engine_client_create(engine *e, engine_client **out) {
    engine_client *c = calloc(1, sizeof *c);
    if (!c) return LLC_ERR_NOMEM;
    c->e = e;
    pthread_mutex_init(&c->mu, NULL);
    c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (c->efd < 0) {
        free(c);
        return LLC_ERR_IO;
    }
    *out = c;
    return 0;
}

static void client_destroy(engine_client *c) {
    for (ev_node *n = c->head, *next; n; n = next) {
        next = n->next;
        free(n->ev.text);
        free(n);
    }
    close(c->efd);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static void inbox_post(engine *e, inbox_msg *msg) {
    pthread_mutex_lock(&e->mu);
    if (e->inbox_tail) e->inbox_tail->next = msg;
    else e->inbox_head = msg;
    e->inbox_tail = msg;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

void engine_client_free(engine_client *c) {
    if (!c) return;
    engine *e = c->e;
    pthread_mutex_lock(&e->mu);
    c->closed = true;
    bool now = c->active == 0;
    pthread_mutex_unlock(&e->mu);
    if (now) {
        client_destroy(c);
        return;
    }
    /* the engine cancels its requests and frees it when the last one ends */
    inbox_msg *msg = calloc(1, sizeof *msg);
    if (msg) {
        msg->kind = MSG_CLIENT_GONE;
        msg->client = c;
        inbox_post(e, msg);
    }
}

int engine_client_fd(const engine_client *c) { return c->efd; }

engine_event *engine_client_next(engine_client *c) {
    pthread_mutex_lock(&c->mu);
    ev_node *n = c->head;
    if (n) {
        c->head = n->next;
        if (!c->head) c->tail = NULL;
    }
    if (!c->head) {
        uint64_t v;
        ssize_t r = read(c->efd, &v, sizeof v); /* drain the wake counter */
        (void)r;
    }
    pthread_mutex_unlock(&c->mu);
    return n ? &n->ev : NULL; /* ev is the first member: the node is freed through it */
}

engine_event *engine_client_wait(engine_client *c, int timeout_ms) {
    double deadline = llc_now_ms() + timeout_ms;
    for (;;) {
        engine_event *ev = engine_client_next(c);
        if (ev) return ev;
        int left = timeout_ms < 0 ? -1 : (int)(deadline - llc_now_ms());
        if (timeout_ms >= 0 && left <= 0) return NULL;
        struct pollfd pfd = {.fd = c->efd, .events = POLLIN};
        poll(&pfd, 1, left);
    }
}

void engine_event_free(engine_event *ev) {
    if (!ev) return;
    free(ev->text);
    free((ev_node *)ev);
}

/* ---- requests ---- */

static void request_free(request *r) {
    if (!r) return;
    free(r->prompt);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    free(r->seqs);
    beam_search_free(r->bs);
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
    request *r = calloc(1, sizeof *r);
    if (!r) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    r->prompt = malloc((size_t)g->n_prompt * sizeof *r->prompt);
    r->n_slots = g->beam_width > g->n ? g->beam_width : g->n;
    r->seqs = calloc((size_t)r->n_slots, sizeof *r->seqs);
    r->stop = calloc((size_t)(g->n_stop > 0 ? g->n_stop : 1), sizeof *r->stop);
    bool ok = r->prompt && r->seqs && r->stop;
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
        request_free(r);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    memcpy(r->prompt, g->prompt, (size_t)g->n_prompt * sizeof *r->prompt);
    r->n_prompt = g->n_prompt;
    r->continues_prompt = g->continues_prompt;
    r->sp = g->sampling;
    r->n = g->n;
    r->max_tokens = g->max_tokens;
    r->priority = g->priority;
    r->client = c;
    r->t_submit = llc_now_ms();
    inbox_msg *msg = calloc(1, sizeof *msg);
    if (!msg) {
        request_free(r);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    pthread_mutex_lock(&e->mu);
    r->id = ++e->next_id;
    c->active++;
    pthread_mutex_unlock(&e->mu);
    msg->kind = MSG_SUBMIT;
    msg->req = r;
    int64_t id = r->id;
    inbox_post(e, msg);
    return id;
}

void engine_cancel(engine *e, int64_t request_id) {
    inbox_msg *msg = calloc(1, sizeof *msg);
    if (!msg) return;
    msg->kind = MSG_CANCEL;
    msg->id = request_id;
    inbox_post(e, msg);
}

void engine_get_metrics(engine *e, engine_metrics *out) {
    pthread_mutex_lock(&e->mu);
    *out = e->metrics;
    pthread_mutex_unlock(&e->mu);
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
    sampler_free(s->smp);
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
    s->out_row = -1;
    spec_policy_init(&s->spec, e->p.draft_max);
    int rc = 0;
    if (!r->bs) {
        sampler_params sp = r->sp;
        if (sp.seed != SAMPLER_SEED_RANDOM) sp.seed += (uint64_t)index;
        rc = sampler_create(&sp, &s->smp, NULL);
        if (!rc) rc = tok_stream_create(e->tok, false, &s->ts);
        if (!rc && r->continues_prompt) tok_stream_continue(s->ts, r->prompt, r->n_prompt); /* " was" */
        if (!rc) rc = stopstr_create((const char *const *)r->stop, r->n_stop, &s->ss);
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

void eng_running_remove(engine *e, seq *s) {
    for (int i = 0; i < e->n_running; i++)
        if (e->running[i] == s) {
            memmove(&e->running[i], &e->running[i + 1], (size_t)(e->n_running - i - 1) * sizeof *e->running);
            e->n_running--;
            return;
        }
}

int eng_running_add(engine *e, seq *s) {
    if (e->n_running == e->cap_running) {
        int cap = e->cap_running ? e->cap_running * 2 : 64;
        seq **r = realloc(e->running, (size_t)cap * sizeof *r);
        if (!r) return LLC_ERR_NOMEM;
        e->running = r;
        e->cap_running = cap;
    }
    e->running[e->n_running++] = s;
    s->state = SEQ_RUNNING;
    s->admit_order = ++e->admit_counter;
    return 0;
}

static void emit_done(engine *e, seq *s, engine_finish finish) {
    request *r = s->req;
    engine_event ev = {.kind = EV_DONE, .request_id = r->id, .seq_index = s->index, .finish = finish};
    ev.prompt_tokens = r->n_prompt;
    ev.cached_tokens = s->cached;
    ev.completion_tokens = s->n_gen;
    ev.queue_ms = r->t_admit > 0 ? r->t_admit - r->t_submit : llc_now_ms() - r->t_submit;
    ev.ttft_ms = s->t_first > 0 ? s->t_first - r->t_submit : 0;
    ev.tpot_ms = s->n_gen > 1 ? (s->t_last - s->t_first) / (s->n_gen - 1) : 0;
    ev.drafted_tokens = (int)s->drafted;
    ev.accepted_tokens = (int)s->accepted;
    eng_client_push(r->client, &ev);
}

/* Ends one sample: event, blocks back to the pool (full ones stay cached). */
static void seq_finish(engine *e, seq *s, engine_finish finish) {
    if (s->state == SEQ_DONE) return;
    if (s->n_gen > 0) {
        e->ttft_hist[e->hist_pos] = s->t_first - s->req->t_submit;
        e->tpot_hist[e->hist_pos] = s->n_gen > 1 ? (s->t_last - s->t_first) / (s->n_gen - 1) : 0;
        e->hist_pos = (e->hist_pos + 1) % 256;
        if (e->hist_n < 256) e->hist_n++;
    }
    if (s->state == SEQ_RUNNING) eng_running_remove(e, s);
    s->state = SEQ_DONE;
    kv_seq_free(s->kv);
    s->kv = NULL;
    kv_seq_free(s->dkv);
    s->dkv = NULL;
    if (!s->req->client->closed && !s->req->bs) emit_done(e, s, finish);
    s->req->n_live--;
}

/* A request with n > 1 ended before its samples were forked from the first:
 * samples 1..n-1 never ran, but each still gets its done event. */
static void finish_unforked_samples(engine *e, request *r, engine_finish finish) {
    if (r->forked || r->n < 2) return;
    r->forked = true; /* settled: no fork will happen now */
    for (int i = 1; i < r->n && !r->client->closed; i++) {
        engine_event ev = {.kind = EV_DONE, .request_id = r->id, .seq_index = i, .finish = finish,
                           .prompt_tokens = r->n_prompt};
        ev.queue_ms = llc_now_ms() - r->t_submit;
        eng_client_push(r->client, &ev);
    }
}

static void request_error(engine *e, request *r, const char *msg) {
    engine_event ev = {.kind = EV_ERROR, .request_id = r->id};
    snprintf(ev.message, sizeof ev.message, "%s", msg);
    if (!r->client->closed) eng_client_push(r->client, &ev);
    if (r->bs) {
        eng_beam_end(e, r, FINISH_ERROR);
        return;
    }
    for (int i = 0; i < r->n; i++)
        if (r->seqs[i]) seq_finish(e, r->seqs[i], FINISH_ERROR);
    finish_unforked_samples(e, r, FINISH_ERROR);
}

/* One request of c has ended; frees c if its owner let it go. */
static void client_release(engine *e, engine_client *c) {
    pthread_mutex_lock(&e->mu);
    bool destroy = --c->active == 0 && c->closed;
    pthread_mutex_unlock(&e->mu);
    if (destroy) client_destroy(c);
}

/* Frees finished requests and clients that were let go. */
static void reap_requests(engine *e) {
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
        client_release(e, r->client);
        request_free(r);
    }
}

static void cancel_request(engine *e, request *r) {
    r->cancelled = true;
    if (r->bs) {
        eng_beam_end(e, r, FINISH_CANCELLED);
        return;
    }
    for (int i = 0; i < r->n; i++)
        if (r->seqs[i]) seq_finish(e, r->seqs[i], FINISH_CANCELLED);
    if (!r->forked && !r->seqs[0]) r->n_live = 0;
    finish_unforked_samples(e, r, FINISH_CANCELLED);
}

static void drain_inbox(engine *e, bool *stop) {
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
            if (eng_seq_create(e, r, 0, NULL, &s0)) {
                engine_event ev = {.kind = EV_ERROR, .request_id = r->id};
                snprintf(ev.message, sizeof ev.message, "out of memory");
                eng_client_push(r->client, &ev);
                client_release(e, r->client);
                request_free(r);
            } else {
                r->seqs[0] = s0;
                r->n_live = 1;
                s0->state = SEQ_WAITING;
                request **pp = &e->requests; /* keep submission order */
                while (*pp) pp = &(*pp)->next;
                *pp = r;
            }
        } else {
            for (request *r = e->requests; r; r = r->next)
                if ((m->kind == MSG_CANCEL && r->id == m->id) ||
                    (m->kind == MSG_CLIENT_GONE && r->client == m->client))
                    if (!r->cancelled) cancel_request(e, r);
        }
        free(m);
        m = next;
    }
}

/* ---- scheduling ---- */

/* Releases the newest running sequence's blocks and puts it back to waiting. */
static bool preempt_newest(engine *e, const seq *keep) {
    seq *victim = NULL;
    for (int i = 0; i < e->n_running; i++) {
        seq *s = e->running[i];
        if (s != keep && s->rows == 0 && (!victim || s->admit_order > victim->admit_order)) victim = s;
    }
    if (!victim) return false;
    eng_running_remove(e, victim);
    eng_spec_drop(e, victim);
    kv_seq_free(victim->kv);
    victim->kv = NULL;
    kv_seq_free(victim->dkv);
    victim->dkv = NULL;
    victim->state = SEQ_WAITING;
    e->stats.preemptions++;
    return true;
}

/* Gives s its rows for this step (at most `budget`), reserving KV; preempts newer
 * sequences when blocks run out. Returns the rows (0 and *no_space when even that
 * does not make room) or a negative code. */
static int plan_rows(engine *e, seq *s, int budget, bool *no_space) {
    *no_space = false;
    int computed = kv_seq_computed(s->kv);
    if (s->n_draft && s->n_tokens - computed > budget) eng_spec_drop(e, s); /* proposals need room */
    int rows = s->n_tokens - computed;
    if (rows > budget) rows = budget;
    if (rows <= 0) return 0;
    for (;;) {
        int rc = kv_seq_append(s->kv, s->tokens + computed, rows);
        if (rc == 0) break;
        if (rc < 0) return rc;
        if (s->n_draft) { /* drop the proposals before taking anyone's blocks */
            eng_spec_drop(e, s);
            rows = s->n_tokens - computed;
            continue;
        }
        if (!preempt_newest(e, s)) {
            *no_space = true;
            return 0;
        }
    }
    s->rows = rows;
    return rows;
}

/* Picks the next waiting sequence: highest priority, then oldest request. */
static seq *next_waiting(engine *e) {
    seq *best = NULL;
    for (request *r = e->requests; r; r = r->next) {
        if (r->cancelled) continue;
        for (int i = 0; i < r->n_slots; i++) {
            seq *s = r->seqs[i];
            if (s && s->state == SEQ_WAITING && (!best || r->priority > best->req->priority)) best = s;
        }
    }
    return best;
}

/* True if a running sequence is still computing full blocks that s could take
 * from the prefix cache once they are committed: admitting s now would compute
 * the shared prefix twice. */
static bool shares_uncomputed_prefix(const engine *e, const seq *s) {
    int bs = e->p.block_size;
    for (int i = 0; i < e->n_running; i++) {
        const seq *r = e->running[i];
        int n = r->n_tokens < s->n_tokens ? r->n_tokens : s->n_tokens, common = 0;
        while (common < n && r->tokens[common] == s->tokens[common]) common++;
        int shared_blocks_end = common / bs * bs;
        if (shared_blocks_end > 0 && kv_seq_computed(r->kv) < shared_blocks_end) return true;
    }
    return false;
}

/* Builds this step's batch; returns the number of rows. */
static int plan_step(engine *e) {
    int budget = e->p.max_step_tokens;
    for (int i = 0; i < e->n_running; i++) e->running[i]->rows = 0, e->running[i]->out_row = -1;
    /* decode rows first (sequences with one pending token), then prefill chunks */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < e->n_running && budget > 0; i++) {
            seq *s = e->running[i];
            int pending = s->n_tokens - kv_seq_computed(s->kv);
            if (s->rows || (pass == 0) != (pending == 1 + s->n_draft)) continue;
            bool full;
            int rows = plan_rows(e, s, budget, &full);
            if (rows < 0) return rows;
            if (full) break;
            budget -= rows;
            if (e->running[i] != s) i--; /* preemption shifted the list */
        }
    }
    /* admit waiting sequences while budget and blocks last */
    while (budget > 0 && e->n_running < e->p.max_running) {
        seq *s = next_waiting(e);
        if (!s || shares_uncomputed_prefix(e, s)) break;
        if (kv_seq_create(e->pool, &s->kv)) return LLC_ERR_NOMEM;
        int hit = kv_seq_match_prefix(s->kv, s->tokens, s->n_tokens);
        int need = kv_seq_blocks_needed(s->kv, s->n_tokens - hit < budget ? s->n_tokens - hit : budget);
        if (need > kv_pool_available(e->pool)) {
            kv_seq_free(s->kv);
            s->kv = NULL;
            break;
        }
        if (!s->admitted_once) {
            s->admitted_once = true;
            s->cached = hit;
            s->req->t_admit = llc_now_ms();
            e->stats.prompt_tokens += s->req->n_prompt;
            e->stats.cached_tokens += hit;
        }
        eng_running_add(e, s);
        bool full;
        int rows = plan_rows(e, s, budget, &full);
        if (rows < 0 || full) {
            eng_running_remove(e, s);
            kv_seq_free(s->kv);
            s->kv = NULL;
            s->state = SEQ_WAITING;
            break;
        }
        budget -= rows;
    }
    /* proposals of sequences that got no rows this step go back */
    for (int i = 0; i < e->n_running; i++)
        if (e->running[i]->n_draft && !e->running[i]->rows) eng_spec_drop(e, e->running[i]);
    /* lay out the batch */
    batch_clear(e->batch);
    int n_out = 0, total = 0;
    for (int i = 0; i < e->n_running; i++) {
        seq *s = e->running[i];
        if (!s->rows) continue;
        int computed = kv_seq_computed(s->kv), n_blocks;
        const int32_t *blocks = kv_seq_blocks(s->kv, &n_blocks);
        bool last = computed + s->rows == s->n_tokens;
        int rc = batch_add(e->batch, s->tokens + computed, s->rows, computed, blocks, n_blocks,
                           s->n_draft ? BATCH_OUT_ALL : last ? BATCH_OUT_LAST : BATCH_OUT_NONE);
        if (rc < 0) return rc;
        s->out_row = last ? n_out : -1; /* with proposals: 1 + n_draft rows of logits */
        n_out += s->n_draft ? s->rows : last;
        total += s->rows;
    }
    return total;
}

/* Appends n bytes to a growable heap string. */
void eng_text_add(char **buf, size_t *len, const char *src, size_t n) {
    char *p = realloc(*buf, *len + n + 1);
    if (!p) return;
    memcpy(p + *len, src, n);
    *len += n;
    p[*len] = 0;
    *buf = p;
}

bool eng_token_text(tok_stream *ts, stopstr *ss, int32_t tok, bool at_end, char **text, size_t *len) {
    char piece[512];
    const char *show;
    size_t show_len;
    int n = tok_stream_push(ts, tok, piece, sizeof piece);
    bool stopped = stopstr_push(ss, piece, (size_t)(n > 0 ? n : 0), &show, &show_len);
    eng_text_add(text, len, show, show_len);
    if (at_end && !stopped) { /* what the detokenizer and the stop matcher still hold */
        while (!stopped && (n = tok_stream_flush(ts, piece, sizeof piece)) > 0) {
            stopped = stopstr_push(ss, piece, (size_t)n, &show, &show_len);
            eng_text_add(text, len, show, show_len);
        }
        if (!stopped) {
            stopstr_flush(ss, &show, &show_len);
            eng_text_add(text, len, show, show_len);
        }
    }
    if (!*text) eng_text_add(text, len, "", 0);
    return stopped;
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
        seq_finish(e, s, FINISH_STOP);
        return true;
    }
    bool at_end = s->n_gen >= r->max_tokens || s->n_tokens + 1 >= e->n_ctx;
    size_t len = 0;
    char *text = NULL;
    bool stopped = eng_token_text(s->ts, s->ss, tok, at_end, &text, &len);
    engine_event ev = {.kind = EV_TOKEN, .request_id = r->id, .seq_index = s->index, .token = tok,
                       .text = text, .text_len = text ? len : 0, .lp = *res};
    if (!r->client->closed) eng_client_push(r->client, &ev);
    else free(text);
    if (stopped || at_end) {
        seq_finish(e, s, stopped ? FINISH_STOP : FINISH_LENGTH);
        return true;
    }
    return false;
}

/* After the prompt of a request with n > 1: fork the other samples off seq 0. */
static int fork_samples(engine *e, request *r) {
    seq *s0 = r->seqs[0];
    for (int i = 1; i < r->n; i++) {
        seq *s;
        int rc = eng_seq_create(e, r, i, s0, &s);
        if (!rc && (rc = kv_seq_fork(s0->kv, &s->kv))) eng_seq_free(s), s = NULL;
        if (rc) return rc;
        s->cached = s0->cached;
        r->seqs[i] = s;
        r->n_live++;
        eng_running_add(e, s);
    }
    r->forked = true;
    return 0;
}

static int run_step(engine *e, llc_err *err) {
    eng_spec_propose(e);
    int rows = plan_step(e);
    if (rows < 0) return llc_fail(err, rows, "scheduling failed");
    if (rows == 0) {
        /* a lone sequence that cannot grow: the cache is full for it */
        if (e->n_running > 0 && e->running[0]->req->bs) eng_beam_end(e, e->running[0]->req, FINISH_NONE);
        else if (e->n_running > 0) seq_finish(e, e->running[0], FINISH_LENGTH);
        return 0;
    }
    const int32_t *src, *dst;
    int n_copies = kv_pool_take_copies(e->pool, &src, &dst);
    int rc = model_kv_copy_blocks(e->kv_store, src, dst, n_copies, err);
    const bk_batch *b = batch_view(e->batch);
    if (!rc && b->n_out > e->cap_logits) {
        float *l = realloc(e->logits, (size_t)b->n_out * e->n_vocab * sizeof *l);
        if (!l) return llc_fail(err, LLC_ERR_NOMEM, "out of memory for logits");
        e->logits = l;
        e->cap_logits = b->n_out;
    }
    if (!rc) rc = model_forward(e->m, e->kv_store, b, e->logits, err);
    if (rc) return rc;
    e->stats.steps++;
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
        s->rows = 0;
        if (s->out_row < 0) continue;
        const float *lg = e->logits + (size_t)s->out_row * e->n_vocab;
        request *r = s->req;
        if (r->bs) {
            if (eng_beam_take_logits(e, s, lg)) request_error(e, r, "out of memory in beam search");
            continue;
        }
        if (s->n_draft) {
            if (eng_spec_verify(e, s, lg)) seq_finish(e, s, FINISH_ERROR);
            continue;
        }
        bool first_of_request = s->index == 0 && r->n > 1 && !r->forked;
        if (first_of_request && fork_samples(e, r)) {
            request_error(e, r, "out of memory forking samples");
            continue;
        }
        int count = first_of_request ? r->n : 1;
        for (int k = 0; k < count; k++) {
            seq *t = first_of_request ? r->seqs[k] : s;
            sample_result res;
            int tok = sampler_sample(t->smp, lg, e->n_vocab, &res);
            if (tok < 0) {
                seq_finish(e, t, FINISH_ERROR);
                continue;
            }
            e->stats.generated_tokens++;
            if (!eng_emit_token(e, t, &res) && eng_seq_push_token(t, tok)) seq_finish(e, t, FINISH_ERROR);
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
    pthread_mutex_lock(&e->mu);
    e->metrics = *m;
    pthread_mutex_unlock(&e->mu);
}

static void *engine_main(void *arg) {
    engine *e = arg;
    for (;;) {
        bool stop;
        drain_inbox(e, &stop);
        if (stop) break;
        llc_err err;
        double t_step = llc_now_ms();
        int step_rc = run_step(e, &err);
        e->stats.step_ms += llc_now_ms() - t_step;
        if (step_rc) {
            /* a failed step fails every running request, never the program */
            for (request *r = e->requests; r; r = r->next)
                if (r->n_live > 0) request_error(e, r, err.msg);
        }
        reap_requests(e);
        publish_metrics(e);
        pthread_mutex_lock(&e->mu);
        while (!e->inbox_head && !e->stop && e->n_running == 0 && !next_waiting(e))
            pthread_cond_wait(&e->cv, &e->mu);
        pthread_mutex_unlock(&e->mu);
    }
    for (request *r = e->requests; r; r = r->next)
        if (!r->cancelled) cancel_request(e, r);
    reap_requests(e);
    return NULL;
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
    const model_hparams *hp = model_hparams_of(m);
    e->n_vocab = hp->n_vocab;
    e->n_ctx = hp->n_ctx_train;
    e->max_blocks_per_seq = (e->n_ctx + e->p.block_size - 1) / e->p.block_size + 1;
    int rc = model_kv_create(m, e->p.n_blocks, e->p.block_size, &e->kv_store, err);
    if (!rc && kv_pool_create(e->p.n_blocks, e->p.block_size, &e->pool))
        rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory for the KV pool");
    if (!rc && batch_create(e->max_blocks_per_seq, e->p.block_size, &e->batch))
        rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    if (!rc) rc = eng_spec_init(e, err);
    if (rc) {
        eng_spec_free(e);
        batch_free(e->batch);
        kv_pool_free(e->pool);
        model_kv_free(e->kv_store);
        free(e);
        return rc;
    }
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    if (pthread_create(&e->thread, NULL, engine_main, e)) {
        eng_spec_free(e);
        batch_free(e->batch);
        kv_pool_free(e->pool);
        model_kv_free(e->kv_store);
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
        request_free(m->req);
        free(m);
    }
    free(e->running);
    free(e->logits);
    eng_spec_free(e);
    batch_free(e->batch);
    kv_pool_free(e->pool);
    model_kv_free(e->kv_store);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}
