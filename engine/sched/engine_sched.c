/* engine_sched.c — the scheduler: which sequences run in a step and with how
 * many rows. Decode rows of running sequences first, then prefill chunks, up to
 * the step's token budget; waiting sequences are admitted (highest priority,
 * then oldest) while budget and KV blocks last, taking what the prefix cache
 * holds; when blocks run out the newest running sequence is preempted back to
 * waiting. The result is the step's varlen batch. Engine thread only. */
#include "engine/sched/engine.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "engine/sched/engine_internal.h"

void eng_running_remove(engine *e, seq *s) {
    for (int i = 0; i < e->n_running; i++)
        if (e->running[i] == s) {
            memmove(&e->running[i], &e->running[i + 1], (size_t)(e->n_running - i - 1) * sizeof *e->running);
            e->n_running--;
            break;
        }
    if (e->recurrent && s->state_slot >= 0) {
        eng_state_give(e, s->state_slot);
        s->state_slot = -1;
    }
    eng_spec_release(e, s);
}

/* (free_states has room for every slot ever made) */
void eng_state_give(engine *e, int slot) { e->free_states[e->n_free_states++] = slot; }

/* A state slot for a sequence that starts running: one given back, or a new one. */
int eng_state_take(engine *e) {
    if (e->n_free_states > 0) return e->free_states[--e->n_free_states];
    int *f = realloc(e->free_states, (size_t)(e->n_states + 1) * sizeof *f);
    if (!f) return LLC_ERR_NOMEM;
    e->free_states = f;
    return e->n_states++;
}

int eng_state_fork(engine *e, const seq *parent, seq *child) {
    if (!e->recurrent) return 0;
    return model_kv_state_copy(e->kv_store, parent->state_slot, child->state_slot, NULL);
}

/* ---- state snapshots (hybrid models) ----
 * A KV block may own a snapshot: a state slot holding the state after the
 * block's last token, with the hash of the token prefix it ends (blocks are
 * evicted and reused, so a snapshot counts only where that hash matches). The
 * newest max_snaps (engine_params.max_snapshots) are kept. A prefix hit is cut back to its
 * deepest block with a snapshot, and the sequence starts from a copy of it. */

static uint64_t prefix_key(const int32_t *tokens, int n) { return XXH3_64bits(tokens, (size_t)n * sizeof *tokens); }

void eng_state_snapshot(engine *e, seq *s) {
    const int bs = e->p.block_size, done = kv_seq_computed(s->kv);
    if (!e->recurrent || !e->max_snaps || s->state_slot < 0 || s->req->embed || done == 0 || done % bs) return;
    int n_blocks;
    const int32_t blk = kv_seq_blocks(s->kv, &n_blocks)[done / bs - 1];
    const uint64_t key = prefix_key(s->tokens, done);
    if (e->snap_slot[blk] >= 0 && e->snap_key[blk] == key) return; /* (it is there already) */
    int slot = e->snap_slot[blk];
    if (slot < 0) {
        if (e->n_snaps == e->max_snaps) { /* the oldest gives its slot */
            const int32_t old = e->snap_ring[e->snap_head];
            slot = e->snap_slot[old];
            e->snap_slot[old] = -1;
            e->snap_head = (e->snap_head + 1) % e->max_snaps;
            e->n_snaps--;
        }
        if (slot < 0 && (slot = eng_state_take(e)) < 0) return; /* (out of memory: no snapshot) */
        e->snap_ring[(e->snap_head + e->n_snaps++) % e->max_snaps] = blk;
    }
    e->snap_slot[blk] = -1;
    if (model_kv_state_copy(e->kv_store, s->state_slot, slot, NULL)) {
        e->free_states[e->n_free_states++] = slot; /* (its ring entry names a block without one) */
        return;
    }
    e->snap_slot[blk] = slot;
    e->snap_key[blk] = key;
}

/* s's prefix hit of hit tokens (blocks adopted from the cache), cut back to its
 * deepest block with a matching snapshot; s->snap_from names it. */
static int state_prefix(engine *e, seq *s, int hit) {
    const int bs = e->p.block_size;
    int n_blocks, j = hit / bs;
    const int32_t *blocks = kv_seq_blocks(s->kv, &n_blocks);
    s->snap_from = -1;
    for (; j > 0; j--) {
        const int32_t blk = blocks[j - 1];
        if (e->snap_slot[blk] >= 0 && e->snap_key[blk] == prefix_key(s->tokens, j * bs)) break;
    }
    if (j > 0) s->snap_from = e->snap_slot[blocks[j - 1]];
    if (j * bs < hit) kv_seq_truncate(s->kv, j * bs);
    return j * bs;
}

int eng_running_add(engine *e, seq *s) {
    if (e->n_running == e->cap_running) {
        int cap = e->cap_running ? e->cap_running * 2 : 64;
        seq **r = realloc(e->running, (size_t)cap * sizeof *r);
        if (!r) return LLC_ERR_NOMEM;
        e->running = r;
        e->cap_running = cap;
    }
    if (e->recurrent && s->state_slot < 0) {
        int slot = eng_state_take(e);
        if (slot < 0) return slot;
        s->state_slot = slot;
    }
    e->running[e->n_running++] = s;
    s->state = SEQ_RUNNING;
    s->admit_order = ++e->admit_counter;
    return 0;
}


void eng_seq_requeue(engine *e, seq *s) {
    eng_running_remove(e, s);
    eng_spec_drop(e, s);
    eng_seq_drop_kv(s);
    s->state = SEQ_WAITING;
    e->stats.preemptions++;
}

/* Releases the newest running sequence's blocks and puts it back to waiting. */
static bool preempt_newest(engine *e, const seq *keep) {
    seq *victim = NULL;
    for (int i = 0; i < e->n_running; i++) {
        seq *s = e->running[i];
        if (s != keep && s->rows == 0 && (!victim || s->admit_order > victim->admit_order)) victim = s;
    }
    if (!victim) return false;
    eng_seq_requeue(e, victim);
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
    if (e->recurrent && computed + rows < s->n_tokens) { /* a hybrid's chunk ends at a block boundary where */
        const int bs = e->p.block_size, end = (computed + rows) / bs * bs; /* it can: a state snapshot there */
        if (end > computed) rows = end - computed;
    } else if (e->recurrent && rows > 1 && !s->n_draft) { /* the prompt's last chunk: its last full block first */
        const int bs = e->p.block_size, end = (s->n_tokens - 1) / bs * bs;
        if (end > computed) rows = end - computed;
    }
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
seq *eng_next_waiting(engine *e) {
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
int eng_plan_step(engine *e) {
    int budget = e->p.max_step_tokens;
    for (int i = 0; i < e->n_running; i++) e->running[i]->rows = 0, e->running[i]->out_row = -1;
    /* decode rows first (sequences with one pending token), then prefill chunks */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < e->n_running && budget > 0; i++) {
            seq *s = e->running[i];
            if (s->rows || (pass == 0) != eng_spec_decoding(e, s)) continue;
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
        seq *s = eng_next_waiting(e);
        bool embed = s && s->req->embed; /* computes every position: no prefix from the cache */
        if (!s || (!embed && shares_uncomputed_prefix(e, s))) break;
        if (kv_seq_create(e->pool, &s->kv)) return LLC_ERR_NOMEM;
        int hit = embed ? 0 : kv_seq_match_prefix(s->kv, s->tokens, s->n_tokens);
        s->snap_from = -1;
        if (e->recurrent && hit > 0) hit = state_prefix(e, s, hit); /* only as far as a state was kept */
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
            e->stats.prompt_tokens += embed ? s->n_tokens : s->req->n_prompt;
            e->stats.cached_tokens += hit;
        }
        if (eng_running_add(e, s) ||
            (s->snap_from >= 0 && model_kv_state_copy(e->kv_store, s->snap_from, s->state_slot, NULL))) {
            if (s->state == SEQ_RUNNING) eng_running_remove(e, s);
            kv_seq_free(s->kv);
            s->kv = NULL;
            s->state = SEQ_WAITING;
            return LLC_ERR_NOMEM;
        }
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
    if (e->recurrent) eng_spec_keep_states(e);
    /* lay out the batch */
    batch_clear(e->batch);
    int n_out = 0, total = 0;
    for (int i = 0; i < e->n_running; i++) {
        seq *s = e->running[i];
        if (!s->rows) continue;
        int computed = kv_seq_computed(s->kv), n_blocks;
        const int32_t *blocks = kv_seq_blocks(s->kv, &n_blocks);
        bool last = computed + s->rows == s->n_tokens;
        if (s->req->embed) { /* the hidden state of every row, no logits */
            int rc = batch_add(e->batch, s->tokens + computed, s->rows, computed, blocks, n_blocks,
                               BATCH_OUT_HIDDEN);
            if (rc < 0) return rc;
            if (e->recurrent) batch_set_state_slot(e->batch, s->state_slot);
            s->hid_row = rc;
            total += s->rows;
            continue;
        }
        int rc = batch_add(e->batch, s->tokens + computed, s->rows, computed, blocks, n_blocks,
                           s->n_draft ? BATCH_OUT_ALL : last ? BATCH_OUT_LAST : BATCH_OUT_NONE);
        if (rc < 0) return rc;
        if (e->recurrent) batch_set_state_slot(e->batch, s->state_slot);
        /* with proposals: logits for every row, the last 1 + n_draft checked (a hybrid's
         * rows may first compute again the tokens a rejection left, eng_spec_verify) */
        s->out_row = last ? n_out + (s->n_draft ? s->rows - 1 - s->n_draft : 0) : -1;
        n_out += s->n_draft ? s->rows : last;
        total += s->rows;
    }
    return total;
}
