/* beam.c — beam search bookkeeping: live beams, candidate ranking, finished
 * hypotheses. No model here; see beam.h for the selection rule. */
#include "engine/sched/beam.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/common.h"

typedef struct beam {
    int32_t *tokens; /* generated so far */
    int len;
    double cum;      /* sum of log-probs */
    beam_cand *cands;
    int n_cands;
    bool has_cands;
} beam;

typedef struct hypothesis {
    int32_t *tokens; /* without the end token */
    int n_tokens;
    double score;    /* cum / (n_tokens + eog) */
    bool eog;
} hypothesis;

struct beam_search {
    int width, max_tokens, n_cand;
    beam live[BEAM_MAX_WIDTH];
    int n_live;
    hypothesis hyp[BEAM_MAX_WIDTH + 1];
    int n_hyp;
    bool done;
};

typedef struct ranked {
    double total;
    int parent, cand;
} ranked;

static void beam_clear(beam *b) {
    free(b->tokens);
    free(b->cands);
    memset(b, 0, sizeof *b);
}

int beam_search_create(int width, int max_tokens, beam_search **out) {
    *out = NULL;
    if (width < 1 || width > BEAM_MAX_WIDTH || max_tokens < 1) return LLC_ERR_RANGE;
    beam_search *b = calloc(1, sizeof *b);
    if (!b) return LLC_ERR_NOMEM;
    b->width = width;
    b->max_tokens = max_tokens;
    b->n_cand = 2 * width;
    b->n_live = 1; /* the prompt: no tokens, score 0 */
    *out = b;
    return 0;
}

void beam_search_free(beam_search *b) {
    if (!b) return;
    for (int i = 0; i < b->n_live; i++) beam_clear(&b->live[i]);
    for (int i = 0; i < b->n_hyp; i++) free(b->hyp[i].tokens);
    free(b);
}

int beam_n_candidates(const beam_search *b) { return b->n_cand; }
int beam_live(const beam_search *b) { return b->done ? 0 : b->n_live; }
bool beam_done(const beam_search *b) { return b->done; }
int beam_n_results(const beam_search *b) { return b->n_hyp; }

int beam_live_len(const beam_search *b, int i) {
    return i >= 0 && i < b->n_live ? b->live[i].len : LLC_ERR_RANGE;
}

int beam_set_candidates(beam_search *b, int i, const beam_cand *c, int n) {
    if (b->done || i < 0 || i >= b->n_live || n < 0 || n > b->n_cand) return LLC_ERR_RANGE;
    beam *bm = &b->live[i];
    if (!bm->cands && !(bm->cands = malloc((size_t)b->n_cand * sizeof *bm->cands)))
        return LLC_ERR_NOMEM;
    memcpy(bm->cands, c, (size_t)n * sizeof *c);
    bm->n_cands = n;
    bm->has_cands = true;
    return 0;
}

bool beam_ready(const beam_search *b) {
    if (b->done) return false;
    for (int i = 0; i < b->n_live; i++)
        if (!b->live[i].has_cands) return false;
    return true;
}

static int cmp_hyp(const void *pa, const void *pb) {
    const hypothesis *a = pa, *c = pb;
    return a->score > c->score ? -1 : a->score < c->score;
}

/* Adds a finished hypothesis: parent's tokens (+ token unless it is the end). */
static int add_hypothesis(beam_search *b, const beam *parent, int32_t token, double cum, bool eog) {
    int n = parent->len + (eog ? 0 : 1);
    int32_t *t = malloc((size_t)(n > 0 ? n : 1) * sizeof *t);
    if (!t) return LLC_ERR_NOMEM;
    if (parent->len) memcpy(t, parent->tokens, (size_t)parent->len * sizeof *t);
    if (!eog) t[n - 1] = token;
    hypothesis h = {.tokens = t, .n_tokens = n, .score = cum / (parent->len + 1), .eog = eog};
    b->hyp[b->n_hyp++] = h;
    qsort(b->hyp, (size_t)b->n_hyp, sizeof *b->hyp, cmp_hyp);
    if (b->n_hyp > b->width) free(b->hyp[--b->n_hyp].tokens); /* keep the best `width` */
    return 0;
}

static int cmp_ranked(const void *pa, const void *pb) {
    const ranked *a = pa, *c = pb;
    if (a->total != c->total) return a->total > c->total ? -1 : 1;
    if (a->parent != c->parent) return a->parent - c->parent;
    return a->cand - c->cand;
}

int beam_advance(beam_search *b, int *parent, int32_t *token) {
    if (!beam_ready(b)) return LLC_ERR_RANGE;
    ranked all[BEAM_MAX_WIDTH * 2 * BEAM_MAX_WIDTH];
    int n_all = 0;
    for (int i = 0; i < b->n_live; i++)
        for (int j = 0; j < b->live[i].n_cands; j++)
            all[n_all++] = (ranked){b->live[i].cum + b->live[i].cands[j].logp, i, j};
    qsort(all, (size_t)n_all, sizeof *all, cmp_ranked);

    beam next[BEAM_MAX_WIDTH];
    int n_next = 0, rc = 0;
    for (int r = 0; r < n_all && n_next < b->width && !rc; r++) {
        const beam *p = &b->live[all[r].parent];
        const beam_cand *c = &p->cands[all[r].cand];
        if (c->eog) {
            if (r < b->width) rc = add_hypothesis(b, p, c->token, all[r].total, true);
            continue;
        }
        if (p->len + 1 >= b->max_tokens) { /* reaches the length limit: finished */
            rc = add_hypothesis(b, p, c->token, all[r].total, false);
            n_next++; /* it took a slot */
            parent[n_next - 1] = -1;
            continue;
        }
        beam *nb = &next[n_next];
        memset(nb, 0, sizeof *nb);
        nb->tokens = malloc((size_t)(p->len + 1) * sizeof *nb->tokens);
        if (!nb->tokens) {
            rc = LLC_ERR_NOMEM;
            break;
        }
        if (p->len) memcpy(nb->tokens, p->tokens, (size_t)p->len * sizeof *nb->tokens);
        nb->tokens[p->len] = c->token;
        nb->len = p->len + 1;
        nb->cum = all[r].total;
        parent[n_next] = all[r].parent;
        token[n_next] = c->token;
        n_next++;
    }
    /* drop the slots taken by beams that finished at the length limit */
    int k = 0;
    for (int i = 0; i < n_next; i++) {
        if (parent[i] < 0) continue;
        next[k] = next[i];
        parent[k] = parent[i];
        token[k] = token[i];
        k++;
    }
    n_next = k;
    if (rc) {
        for (int i = 0; i < n_next; i++) beam_clear(&next[i]);
        return rc;
    }
    /* order by parent (stable), so the engine sees each parent's children together */
    for (int i = 1; i < n_next; i++)
        for (int j = i; j > 0 && parent[j - 1] > parent[j]; j--) {
            beam tb = next[j]; next[j] = next[j - 1]; next[j - 1] = tb;
            int tp = parent[j]; parent[j] = parent[j - 1]; parent[j - 1] = tp;
            int32_t tt = token[j]; token[j] = token[j - 1]; token[j - 1] = tt;
        }
    for (int i = 0; i < b->n_live; i++) beam_clear(&b->live[i]);
    memcpy(b->live, next, (size_t)n_next * sizeof *next);
    b->n_live = n_next;
    if (b->n_hyp >= b->width || n_next == 0) {
        for (int i = 0; i < b->n_live; i++) beam_clear(&b->live[i]);
        b->n_live = 0;
        b->done = true;
        return 0;
    }
    return n_next;
}

void beam_finish_now(beam_search *b) {
    if (b->done) return;
    for (int i = 0; i < b->n_live; i++) {
        beam *p = &b->live[i];
        if (p->len > 0) {
            beam stem = *p;
            stem.len--; /* add_hypothesis appends the last token back */
            add_hypothesis(b, &stem, p->tokens[p->len - 1], p->cum, false);
        }
        beam_clear(p);
    }
    b->n_live = 0;
    b->done = true;
}

int beam_result(const beam_search *b, int rank, const int32_t **tokens, int *n_tokens,
                double *score, bool *ended_by_eog) {
    if (rank < 0 || rank >= b->n_hyp) return LLC_ERR_RANGE;
    const hypothesis *h = &b->hyp[rank];
    if (tokens) *tokens = h->tokens;
    if (n_tokens) *n_tokens = h->n_tokens;
    if (score) *score = h->score;
    if (ended_by_eog) *ended_by_eog = h->eog;
    return 0;
}
