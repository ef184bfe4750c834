/* sampler.c — the per-sequence sampler: params validation, the xoshiro256** RNG,
 * the token history behind the penalties, and the sampling chain described in
 * sampler.h. Scratch buffers are owned by the sampler and grow to n_vocab. */
#include "engine/sched/sampler.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "kernels/topk.h"

/* ---- RNG: splitmix64 for seeding, xoshiro256** for draws ---- */

static uint64_t splitmix64_next(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t mix64(uint64_t v) {
    uint64_t x = v;
    return splitmix64_next(&x);
}

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t rng_next(uint64_t st[4]) {
    const uint64_t result = rotl64(st[1] * 5, 7) * 9;
    const uint64_t t = st[1] << 17;
    st[2] ^= st[0];
    st[3] ^= st[1];
    st[1] ^= st[2];
    st[0] ^= st[3];
    st[2] ^= t;
    st[3] = rotl64(st[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t st[4]) { return (double)(rng_next(st) >> 11) * 0x1.0p-53; }

static void rng_seed_from(uint64_t st[4], uint64_t x) {
    for (int i = 0; i < 4; i++) st[i] = splitmix64_next(&x);
    if (!(st[0] | st[1] | st[2] | st[3])) st[0] = 1; /* all-zero is xoshiro's fixed point */
}

static uint64_t os_random_seed(void) {
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = mix64((uint64_t)ts.tv_sec * 1000000007ULL ^ (uint64_t)ts.tv_nsec ^
                  (uint64_t)(uintptr_t)&v);
    }
    /* 53 bits: the seed reported in JSON (a double) then reads back exactly, so a
       drawn seed can be given again to repeat the run */
    return v & ((1ull << 53) - 1);
}

/* ---- token history ---- */

/* A growing array that keeps at least `window + SAMPLER_MAX_ROLLBACK` latest
 * tokens (all of them when window < 0); older ones are dropped in batches. */
typedef struct hist {
    int32_t *v;
    int n, cap;
    int64_t dropped; /* tokens forgotten from the front */
} hist;

static int hist_push(hist *h, const int32_t *toks, int n, int window) {
    for (int i = 0; i < n; i++) {
        if (h->n == h->cap) {
            long keep = window < 0 ? -1 : (long)window + SAMPLER_MAX_ROLLBACK;
            if (keep >= 0 && h->n >= 2 * keep + 64) {
                memmove(h->v, h->v + (h->n - keep), (size_t)keep * sizeof *h->v);
                h->dropped += h->n - keep;
                h->n = (int)keep;
            } else {
                if (h->cap > (1 << 29)) return LLC_ERR_NOMEM;
                int ncap = h->cap ? h->cap * 2 : 256;
                int32_t *nv = realloc(h->v, (size_t)ncap * sizeof *nv);
                if (!nv) return LLC_ERR_NOMEM;
                h->v = nv;
                h->cap = ncap;
            }
        }
        h->v[h->n++] = toks[i];
    }
    return 0;
}

/* Can the last n entries be removed and the window still be seen whole? */
static bool hist_can_pop(const hist *h, int n, int window) {
    if (n > h->n) return false;
    if (h->dropped > 0 && window >= 0 && h->n - n < window) return false;
    return true;
}

static void hist_window(const hist *h, int window, const int32_t **ptr, int *len) {
    int l = window < 0 || window > h->n ? h->n : window;
    *ptr = l ? h->v + (h->n - l) : NULL;
    *len = l;
}

static int hist_copy(hist *dst, const hist *src) {
    *dst = *src;
    dst->v = NULL;
    dst->cap = 0;
    if (src->n == 0) {
        dst->n = 0;
        return 0;
    }
    dst->v = malloc((size_t)src->n * sizeof *dst->v);
    if (!dst->v) return LLC_ERR_NOMEM;
    memcpy(dst->v, src->v, (size_t)src->n * sizeof *dst->v);
    dst->cap = src->n;
    return 0;
}

/* ---- the sampler ---- */

typedef struct cand {
    int32_t id;
    float logit; /* penalised, before temperature */
    float w;     /* exp((logit - max) / temperature): unnormalised probability */
} cand;

#define REP_BIT 0x80000000u

struct sampler {
    sampler_params p;
    uint64_t seed; /* the seed in use (drawn when p.seed == SAMPLER_SEED_RANDOM) */
    uint64_t rng[4];
    hist all;      /* prompt + generated tokens: the repeat penalty's history */
    hist gen;      /* generated tokens only: frequency / presence */
    int gen_tail;  /* generated tokens accepted since the last prompt token */
    /* scratch, grown on demand */
    cand *cand;      /* [cand_cap] candidates of the current call: top_k of them when
                        top-k or greedy, else the whole vocabulary */
    float *wbuf;     /* [cand_cap] contiguous weights for the vectorised exp */
    int cand_cap;
    uint64_t *mask;  /* [mask_n / 64 + 1] bit per penalised id; all zero between calls */
    int mask_n;
    int32_t *pen_id; /* [pen_cap] penalised ids of the current call */
    float *pen_val;  /* [pen_cap] their penalised logits */
    int pen_cap;
    int32_t *hkey;   /* [hcap] hash table of the window tokens: id or -1 */
    uint32_t *hval;  /* [hcap] REP_BIT | count among the generated window */
    int hcap;
};

sampler_params sampler_params_default(void) {
    return (sampler_params){
        .temperature = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .repeat_last_n = 64,
        .frequency_penalty = 0.0f,
        .presence_penalty = 0.0f,
        .freq_last_n = -1,
        .seed = SAMPLER_SEED_DEFAULT,
        .n_logprobs = 0,
    };
}

int sampler_params_check(const sampler_params *p, llc_err *err) {
    if (!p) return llc_fail(err, LLC_ERR_RANGE, "sampler: no params");
    if (!isfinite(p->temperature))
        return llc_fail(err, LLC_ERR_RANGE, "sampler: temperature must be finite, got %g",
                        (double)p->temperature);
    if (p->top_k < 0)
        return llc_fail(err, LLC_ERR_RANGE, "sampler: top_k must be >= 0 (0 = off), got %d",
                        p->top_k);
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return llc_fail(err, LLC_ERR_RANGE, "sampler: top_p must be in (0, 1] (1 = off), got %g",
                        (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return llc_fail(err, LLC_ERR_RANGE, "sampler: min_p must be in [0, 1] (0 = off), got %g",
                        (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f && isfinite(p->repeat_penalty)))
        return llc_fail(err, LLC_ERR_RANGE,
                        "sampler: repeat_penalty must be finite and > 0 (1 = off), got %g",
                        (double)p->repeat_penalty);
    if (p->repeat_last_n < -1)
        return llc_fail(err, LLC_ERR_RANGE,
                        "sampler: repeat_last_n must be >= -1 (-1 = all), got %d",
                        p->repeat_last_n);
    if (!(p->frequency_penalty >= -2.0f && p->frequency_penalty <= 2.0f))
        return llc_fail(err, LLC_ERR_RANGE,
                        "sampler: frequency_penalty must be in [-2, 2] (0 = off), got %g",
                        (double)p->frequency_penalty);
    if (!(p->presence_penalty >= -2.0f && p->presence_penalty <= 2.0f))
        return llc_fail(err, LLC_ERR_RANGE,
                        "sampler: presence_penalty must be in [-2, 2] (0 = off), got %g",
                        (double)p->presence_penalty);
    if (p->freq_last_n < -1)
        return llc_fail(err, LLC_ERR_RANGE, "sampler: freq_last_n must be >= -1 (-1 = all), got %d",
                        p->freq_last_n);
    if (p->n_logprobs < 0 || p->n_logprobs > SAMPLER_MAX_LOGPROBS)
        return llc_fail(err, LLC_ERR_RANGE, "sampler: n_logprobs must be in [0, %d], got %d",
                        SAMPLER_MAX_LOGPROBS, p->n_logprobs);
    return 0;
}

static void reseed(sampler *s) {
    s->seed = s->p.seed == SAMPLER_SEED_RANDOM ? os_random_seed() : s->p.seed;
    rng_seed_from(s->rng, s->seed);
}

int sampler_create(const sampler_params *p, sampler **out, llc_err *err) {
    LLC_ASSERT(out);
    *out = NULL;
    int rc = sampler_params_check(p, err);
    if (rc) return rc;
    sampler *s = calloc(1, sizeof *s);
    if (!s) return llc_fail(err, LLC_ERR_NOMEM, "sampler: out of memory");
    s->p = *p;
    reseed(s);
    *out = s;
    return 0;
}

void sampler_free(sampler *s) {
    if (!s) return;
    free(s->all.v);
    free(s->gen.v);
    free(s->cand);
    free(s->wbuf);
    free(s->mask);
    free(s->pen_id);
    free(s->pen_val);
    free(s->hkey);
    free(s->hval);
    free(s);
}

int sampler_clone(const sampler *s, uint64_t stream, sampler **out) {
    LLC_ASSERT(s && out);
    *out = NULL;
    sampler *c = calloc(1, sizeof *c);
    if (!c) return LLC_ERR_NOMEM;
    c->p = s->p;
    c->seed = s->seed;
    memcpy(c->rng, s->rng, sizeof c->rng);
    c->gen_tail = s->gen_tail;
    if (hist_copy(&c->all, &s->all) || hist_copy(&c->gen, &s->gen)) {
        sampler_free(c);
        return LLC_ERR_NOMEM;
    }
    if (stream != 0) {
        /* A state derived from (parent state, stream): same inputs, same stream. */
        uint64_t h = mix64(stream ^ 0x632BE59BD9B4E019ULL);
        for (int i = 0; i < 4; i++) h = mix64(h ^ s->rng[i]);
        rng_seed_from(c->rng, h);
    }
    *out = c;
    return 0;
}

int sampler_set_params(sampler *s, const sampler_params *p, llc_err *err) {
    LLC_ASSERT(s);
    int rc = sampler_params_check(p, err);
    if (rc) return rc;
    bool new_seed = p->seed != s->p.seed;
    s->p = *p;
    if (new_seed) reseed(s);
    return 0;
}

const sampler_params *sampler_get_params(const sampler *s) { return &s->p; }
uint64_t sampler_seed(const sampler *s) { return s->seed; }

int sampler_accept_prompt(sampler *s, const int32_t *tokens, int n) {
    LLC_ASSERT(s && (n == 0 || tokens) && n >= 0);
    if (n == 0) return 0;
    s->gen_tail = 0;
    return hist_push(&s->all, tokens, n, s->p.repeat_last_n);
}

int sampler_accept(sampler *s, int32_t token) {
    LLC_ASSERT(s);
    int rc = hist_push(&s->all, &token, 1, s->p.repeat_last_n);
    if (rc) return rc;
    rc = hist_push(&s->gen, &token, 1, s->p.freq_last_n);
    if (rc) { /* keep the two histories in step */
        s->all.n--;
        return rc;
    }
    s->gen_tail++;
    return 0;
}

int sampler_rollback(sampler *s, int n) {
    LLC_ASSERT(s);
    if (n < 0 || n > s->gen_tail) return LLC_ERR_RANGE;
    if (!hist_can_pop(&s->all, n, s->p.repeat_last_n) || !hist_can_pop(&s->gen, n, s->p.freq_last_n))
        return LLC_ERR_RANGE;
    s->all.n -= n;
    s->gen.n -= n;
    s->gen_tail -= n;
    return 0;
}

void sampler_reset(sampler *s) {
    LLC_ASSERT(s);
    s->all.n = s->gen.n = 0;
    s->all.dropped = s->gen.dropped = 0;
    s->gen_tail = 0;
}

double sampler_uniform(sampler *s) {
    LLC_ASSERT(s);
    return rng_uniform(s->rng);
}

/* ---- selection and sorting of candidates ---- */

/* The total order of the chain: larger logit first, then lower id. */
static inline bool cand_better(const cand *a, const cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static inline void cand_swap(cand *a, cand *b) {
    cand t = *a;
    *a = *b;
    *b = t;
}

/* Rearranges c[lo, hi) so that its k best (by cand_better) come first, in no
 * particular order. Quickselect with pivots from a fixed-seed generator: expected
 * O(hi - lo), and the resulting set does not depend on the pivots (total order). */
static void select_top(cand *c, int lo, int hi, int k) {
    int target = lo + k;
    uint64_t r = 0x2545F4914F6CDD1DULL ^ (uint64_t)hi;
    while (hi - lo > 1 && target > lo && target < hi) {
        int pi = lo + (int)(splitmix64_next(&r) % (uint64_t)(hi - lo));
        cand_swap(&c[pi], &c[hi - 1]);
        const cand pivot = c[hi - 1];
        int store = lo;
        for (int i = lo; i < hi - 1; i++)
            if (cand_better(&c[i], &pivot)) cand_swap(&c[i], &c[store++]);
        cand_swap(&c[store], &c[hi - 1]);
        /* [lo, store) better than the pivot at store, (store, hi) worse */
        if (store == target || store + 1 == target) return;
        if (target < store)
            hi = store;
        else
            lo = store + 1;
    }
}

/* ---- top-N of log_softmax over raw logits ---- */

static inline float sanitize_logit(float l) {
    if (isnan(l)) return -INFINITY;
    if (l == INFINITY) return FLT_MAX;
    return l;
}

/* Writes the n best (id, raw logit) into ids/vals, best first; returns how many
 * and the log-sum-exp of all finite logits in *lse (-inf when none). */
static int topn_lse(const float *logits, int n_vocab, int n, int32_t *ids, float *vals,
                    double *lse) {
    const int cnt = n > 0 ? topk_row(logits, n_vocab, n, ids, vals) : 0;
    float mx = cnt > 0 ? vals[0] : -INFINITY; /* (the best first) */
    for (int i = 0; cnt == 0 && i < n_vocab; i++) {
        const float l = sanitize_logit(logits[i]);
        if (l > mx) mx = l;
    }
    if (mx == -INFINITY) {
        *lse = -INFINITY;
        return 0;
    }
    double sum = 0.0;
    for (int i = 0; i < n_vocab; i++) {
        float l = sanitize_logit(logits[i]);
        if (l != -INFINITY) sum += expf(l - mx);
    }
    *lse = (double)mx + log(sum);
    return cnt;
}

int sampler_log_softmax_topn(const float *logits, int n_vocab, int n, int32_t *ids_out,
                             float *lp_out) {
    if (!logits || n_vocab < 1 || n < 0 || (n > 0 && (!ids_out || !lp_out)))
        return LLC_ERR_RANGE;
    if (n > n_vocab) n = n_vocab;
    double lse;
    int cnt = topn_lse(logits, n_vocab, n, ids_out, lp_out, &lse);
    for (int i = 0; i < cnt; i++) lp_out[i] = (float)((double)lp_out[i] - lse);
    return cnt;
}

/* ---- the chain ---- */

/* Grows buf (elements of `size` bytes) to hold n; *cap tracks its capacity. */
static int grow(void **buf, size_t size, int n, int *cap) {
    if (n <= *cap) return 0;
    void *nb = realloc(*buf, (size_t)n * size);
    if (!nb) return LLC_ERR_NOMEM;
    *buf = nb;
    *cap = n;
    return 0;
}

/* n_cand candidates, a penalty mask over n_vocab ids, room for n_pen penalised
 * tokens and their hash table. */
static int ensure_scratch(sampler *s, int n_vocab, int n_cand, int n_pen) {
    int cap = s->cand_cap;
    if (grow((void **)&s->cand, sizeof *s->cand, n_cand, &cap)) return LLC_ERR_NOMEM;
    if (grow((void **)&s->wbuf, sizeof *s->wbuf, n_cand, &s->cand_cap)) return LLC_ERR_NOMEM;
    if (n_pen > 0 && n_vocab > s->mask_n) { /* the old mask is all zero: a fresh one replaces it */
        uint64_t *mask = calloc((size_t)n_vocab / 64 + 1, sizeof *mask);
        if (!mask) return LLC_ERR_NOMEM;
        free(s->mask);
        s->mask = mask;
        s->mask_n = n_vocab;
    }
    cap = s->pen_cap;
    if (grow((void **)&s->pen_id, sizeof *s->pen_id, n_pen, &cap)) return LLC_ERR_NOMEM;
    if (grow((void **)&s->pen_val, sizeof *s->pen_val, n_pen, &s->pen_cap)) return LLC_ERR_NOMEM;
    int hc = 16;
    while (hc < 2 * n_pen) hc *= 2;
    cap = s->hcap;
    if (grow((void **)&s->hkey, sizeof *s->hkey, hc, &cap)) return LLC_ERR_NOMEM;
    if (grow((void **)&s->hval, sizeof *s->hval, hc, &s->hcap)) return LLC_ERR_NOMEM;
    return 0;
}

static inline bool pen_marked(const uint64_t *mask, int i) {
    return (mask[i >> 6] >> (i & 63)) & 1;
}

/* The two penalty windows (empty when that penalty is off). */
static void penalty_windows(const sampler *s, const int32_t **wa, int *na, const int32_t **wg,
                            int *ng) {
    const sampler_params *p = &s->p;
    *wa = *wg = NULL;
    *na = *ng = 0;
    if (p->repeat_penalty != 1.0f && p->repeat_last_n != 0)
        hist_window(&s->all, p->repeat_last_n, wa, na);
    if ((p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f) && p->freq_last_n != 0)
        hist_window(&s->gen, p->freq_last_n, wg, ng);
}

/* The hash-table slot of token t (open addressing, linear probing). */
static inline int pen_slot(const int32_t *hkey, uint32_t hmask, int shift, int32_t t) {
    uint32_t h = ((uint32_t)t * 0x9E3779B1u) >> shift;
    while (hkey[h] != -1 && hkey[h] != t) h = (h + 1) & hmask;
    return (int)h;
}

/* Works out the penalised logit of every distinct token in the penalty windows:
 * s->pen_id/pen_val[0..n), their ids marked in s->mask. Returns n (0 = none).
 * Counting goes through a hash table sized to the windows, not to the vocabulary;
 * ensure_scratch(.., na + ng) must have run. */
static int build_penalties(sampler *s, const float *logits, int n_vocab) {
    const sampler_params *p = &s->p;
    const int32_t *wa, *wg;
    int na, ng;
    penalty_windows(s, &wa, &na, &wg, &ng);
    if (na == 0 && ng == 0) return 0;
    LLC_ASSERT(na + ng <= s->pen_cap);
    int hc = 16, shift = 28;
    while (hc < 2 * (na + ng)) hc *= 2, shift--;
    LLC_ASSERT(hc <= s->hcap);
    int32_t *hkey = s->hkey;
    uint32_t *hval = s->hval; /* REP_BIT | count among generated */
    memset(hkey, 0xff, (size_t)hc * sizeof *hkey);
    memset(hval, 0, (size_t)hc * sizeof *hval);
    const uint32_t hmask = (uint32_t)hc - 1;
    for (int i = 0; i < na; i++) {
        if (wa[i] < 0 || wa[i] >= n_vocab) continue;
        int j = pen_slot(hkey, hmask, shift, wa[i]);
        hkey[j] = wa[i];
        hval[j] |= REP_BIT;
    }
    for (int i = 0; i < ng; i++) {
        if (wg[i] < 0 || wg[i] >= n_vocab) continue;
        int j = pen_slot(hkey, hmask, shift, wg[i]);
        hkey[j] = wg[i];
        hval[j]++;
    }
    int np = 0;
    for (int j = 0; j < hc; j++) {
        int32_t t = hkey[j];
        if (t < 0) continue;
        float l = logits[t];
        if (hval[j] & REP_BIT) l = l <= 0.0f ? l * p->repeat_penalty : l / p->repeat_penalty;
        uint32_t k = hval[j] & ~REP_BIT;
        if (k) l -= (float)k * p->frequency_penalty + p->presence_penalty;
        s->pen_id[np] = t;
        s->pen_val[np] = l;
        np++;
        s->mask[t >> 6] |= 1ULL << (t & 63);
    }
    return np;
}

static void clear_penalties(sampler *s, int np) {
    for (int i = 0; i < np; i++) s->mask[s->pen_id[i] >> 6] = 0;
}

/* Min-heap of the k best candidates (root = worst kept). */
static void heap_sift_down(cand *h, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && cand_better(&h[m], &h[l])) m = l;
        if (r < n && cand_better(&h[m], &h[r])) m = r;
        if (m == i) return;
        cand_swap(&h[i], &h[m]);
        i = m;
    }
}

static void heap_offer(cand *h, int *n, int k, int32_t id, float l) {
    cand x = {.id = id, .logit = l, .w = 0.0f};
    if (*n < k) {
        int j = (*n)++;
        h[j] = x;
        while (j > 0) {
            int parent = (j - 1) / 2;
            if (!cand_better(&h[parent], &h[j])) break;
            cand_swap(&h[parent], &h[j]);
            j = parent;
        }
    } else if (cand_better(&x, &h[0])) {
        h[0] = x;
        heap_sift_down(h, *n, 0);
    }
}

/* Fills c with the candidates: the k best (k > 0) or every token that can be
 * chosen (k == 0), penalised logits in place of raw ones, NaN/-inf left out and
 * +inf as FLT_MAX. Order: unspecified but deterministic. Returns the count and
 * the largest logit in *mx_out (the best survives any later truncation). */
static int gather(sampler *s, const float *logits, int n_vocab, int np, int k, cand *c,
                  float *mx_out) {
    float mx = -INFINITY;
    const uint64_t *mask = s->mask;
    int nc = 0;
    if (k > 0) {
        /* Raw pass in id order: once the heap is full, anything not strictly
         * better than its root loses the tie (the root has a lower id). */
        int i = 0;
        for (; i < n_vocab && nc < k; i++) {
            float l = sanitize_logit(logits[i]);
            if (l == -INFINITY || (np && pen_marked(mask, i))) continue;
            heap_offer(c, &nc, k, i, l);
        }
        for (; i < n_vocab; i++) {
            float l = logits[i];
            if (!(l > c[0].logit) || (np && pen_marked(mask, i))) continue;
            heap_offer(c, &nc, k, i, sanitize_logit(l));
        }
        for (int j = 0; j < np; j++) {
            float l = sanitize_logit(s->pen_val[j]);
            if (l != -INFINITY) heap_offer(c, &nc, k, s->pen_id[j], l);
        }
        for (int j = 0; j < nc; j++)
            if (c[j].logit > mx) mx = c[j].logit;
        *mx_out = mx;
        return nc;
    }
    for (int i = 0; i < n_vocab; i++) {
        float l = logits[i];
        if (!(l > -INFINITY) || (np && pen_marked(mask, i))) continue; /* NaN fails too */
        l = l == INFINITY ? FLT_MAX : l;
        if (l > mx) mx = l;
        c[nc].id = i;
        c[nc].logit = l;
        nc++;
    }
    for (int j = 0; j < np; j++) {
        float l = sanitize_logit(s->pen_val[j]);
        if (l == -INFINITY) continue;
        if (l > mx) mx = l;
        c[nc].id = s->pen_id[j];
        c[nc].logit = l;
        nc++;
    }
    *mx_out = mx;
    return nc;
}

/* Rearranges c[0..nc) so that the smallest set of best candidates whose weights
 * sum to >= target comes first, and returns its size (top-p without sorting):
 * quickselect on probability mass, expected O(nc). */
static int select_mass(cand *c, int nc, double target) {
    int lo = 0, hi = nc;
    double acc = 0.0; /* mass of c[0, lo), all in the set; acc < target */
    uint64_t r = 0x9FB21C651E98DF25ULL ^ (uint64_t)nc;
    while (hi - lo > 1) {
        int pi = lo + (int)(splitmix64_next(&r) % (uint64_t)(hi - lo));
        cand_swap(&c[pi], &c[hi - 1]);
        const cand pivot = c[hi - 1];
        int store = lo;
        double m = 0.0;
        for (int i = lo; i < hi - 1; i++) {
            if (cand_better(&c[i], &pivot)) {
                m += c[i].w;
                cand_swap(&c[i], &c[store++]);
            }
        }
        cand_swap(&c[store], &c[hi - 1]);
        if (acc + m >= target)
            hi = store; /* the cut lies among the better ones */
        else if (acc + m + c[store].w >= target)
            return store + 1;
        else {
            acc += m + c[store].w;
            lo = store + 1;
        }
    }
    return hi > lo ? lo + 1 : lo; /* lo == hi: rounding; take all that is left */
}

/* select_mass for many candidates: a histogram of the weights over the top bits of
 * their float representation (exponent + 3 mantissa bits: monotone in w, and
 * w <= 1 keeps the key below 1024) finds the bucket where the cumulative mass
 * crosses target; only that bucket's members go through the quickselect. */
#define MASS_BUCKETS 1024
static inline uint32_t mass_key(float w) {
    uint32_t b;
    memcpy(&b, &w, sizeof b);
    return b >> 20;
}

static int select_mass_buckets(cand *c, int nc, double target) {
    double mass[MASS_BUCKETS] = {0};
    int count[MASS_BUCKETS] = {0};
    for (int i = 0; i < nc; i++) {
        uint32_t b = mass_key(c[i].w);
        mass[b] += c[i].w;
        count[b]++;
    }
    double acc = 0.0;
    int kb = -1;
    for (int b = MASS_BUCKETS - 1; b >= 0; b--) {
        if (acc + mass[b] >= target) {
            kb = b;
            break;
        }
        acc += mass[b];
    }
    if (kb < 0) return nc; /* rounding: keep all */
    int above = 0;
    for (int i = 0; i < nc; i++)
        if (mass_key(c[i].w) > (uint32_t)kb) cand_swap(&c[i], &c[above++]);
    int end = above;
    for (int i = above; i < nc; i++)
        if (mass_key(c[i].w) == (uint32_t)kb) cand_swap(&c[i], &c[end++]);
    return above + select_mass(c + above, end - above, target - acc);
}

/* exp((x - mx) / temp) over a row, in place (x <= mx; -inf allowed, NaN never
 * arrives). Cephes' expf polynomial with round-to-nearest by the 1.5*2^23 trick,
 * about 2 ulp, results under 2^-125 flushed to 0. Four lanes at a time through GCC
 * vector extensions: some 3x faster than calling expf (which does not vectorise at
 * -O2), and the same bits on every machine, where libm picks FMA or SSE2 variants
 * at run time (-std=c11 keeps the compiler from contracting into FMAs). */
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16)));

static inline v4f exp4_nonpos(v4f x) {
    const uint32_t lim = 0xC2AE0000u; /* -87.0f; negative floats order as their bits */
    v4u xb = (v4u)x;
    v4u under = (v4u)(xb > lim); /* x < -87 or -inf: all ones */
    v4f xc = (v4f)(xb ^ ((xb ^ lim) & under));
    v4f kf = xc * 1.44269504088896341f + 12582912.0f;
    kf -= 12582912.0f; /* round(x / ln 2) */
    v4f r = xc - kf * 0.693359375f;
    r = r - kf * -2.12194440e-4f;
    v4f z = r * r;
    v4f y = r * 1.9875691500e-4f + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * z + r + 1.0f;
    v4i k = __builtin_convertvector(kf, v4i); /* in [-126, 0] */
    v4f v = y * (v4f)((v4u)(k + 127) << 23);
    return (v4f)((v4u)v & ~under);
}

static void exp_row(float *x, int n, float mx, float temp) {
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        v4f v;
        memcpy(&v, x + i, sizeof v);
        v = exp4_nonpos((v - mx) / temp);
        memcpy(x + i, &v, sizeof v);
    }
    if (i < n) {
        v4f v = {0.0f, 0.0f, 0.0f, 0.0f};
        memcpy(&v, x + i, (size_t)(n - i) * sizeof(float));
        v = exp4_nonpos((v - mx) / temp);
        memcpy(x + i, &v, (size_t)(n - i) * sizeof(float));
    }
}

/* Top-k by a heap up to this size; above it, quickselect over all candidates. */
#define HEAP_TOP_K_MAX 1024

static int finish_chain(sampler *s, cand *c, int nc, float mx, int *nc_out, double *total_out);

static int cand_order(const void *a, const void *b) { /* best first */
    const cand *x = a, *y = b;
    return cand_better(x, y) ? -1 : cand_better(y, x) ? 1 : 0;
}

/* Runs the chain. On success s->cand[0..*nc) holds the kept candidates with
 * weights w (> 0 for at least one) summing to *total; greedy leaves one. */
static int run_chain(sampler *s, const float *logits, int n_vocab, int *nc_out, double *total_out) {
    if (!logits || n_vocab < 1) return LLC_ERR_RANGE;
    const sampler_params *p = &s->p;
    const int32_t *wa, *wg;
    int na, ng;
    penalty_windows(s, &wa, &na, &wg, &ng);
    const bool greedy = p->temperature <= 0.0f;
    int k = greedy ? 1 : p->top_k > 0 && p->top_k <= HEAP_TOP_K_MAX ? p->top_k : 0;
    if (k > n_vocab) k = n_vocab;
    int rc = ensure_scratch(s, n_vocab, k ? k : n_vocab, na + ng);
    if (rc) return rc;
    cand *c = s->cand;
    int np = build_penalties(s, logits, n_vocab);

    float mx;
    int nc = gather(s, logits, n_vocab, np, k, c, &mx);
    clear_penalties(s, np);
    /* the heap's k best in the canonical order, best first: the same array
     * whether they came from the whole row or from a backend's top list */
    if (k > 1) qsort(c, (size_t)nc, sizeof *c, cand_order);
    return finish_chain(s, c, nc, mx, nc_out, total_out);
}

/* The chain from the candidates on: greedy, top-k, temperature, softmax, top-p,
 * min-p. c[0..nc) are the gathered candidates, mx the largest logit among them. */
static int finish_chain(sampler *s, cand *c, int nc, float mx, int *nc_out, double *total_out) {
    const sampler_params *p = &s->p;
    const bool greedy = p->temperature <= 0.0f;
    if (nc == 0) return LLC_ERR_RANGE;
    if (greedy) {
        c[0].w = 1.0f;
        *nc_out = 1;
        *total_out = 1.0;
        return 0;
    }
    if (p->top_k > 0 && p->top_k < nc) { /* only when the heap was not used */
        select_top(c, 0, nc, p->top_k);
        nc = p->top_k;
    }

    /* temperature + softmax (unnormalised: the best has w = 1) */
    const float temp = p->temperature;
    float *wb = s->wbuf;
    for (int i = 0; i < nc; i++) wb[i] = c[i].logit;
    exp_row(wb, nc, mx, temp);
    double t4[4] = {0.0, 0.0, 0.0, 0.0}; /* four sums in a fixed order: fast, deterministic */
    int i4 = 0;
    for (; i4 + 4 <= nc; i4 += 4) {
        for (int j = 0; j < 4; j++) {
            c[i4 + j].w = wb[i4 + j];
            t4[j] += wb[i4 + j];
        }
    }
    for (; i4 < nc; i4++) {
        c[i4].w = wb[i4];
        t4[0] += wb[i4];
    }
    double total = (t4[0] + t4[1]) + (t4[2] + t4[3]);

    if (p->top_p < 1.0f && nc > 1) {
        double target = (double)p->top_p * total;
        nc = nc > 4096 ? select_mass_buckets(c, nc, target) : select_mass(c, nc, target);
        total = 0.0;
        for (int i = 0; i < nc; i++) total += c[i].w;
    }

    if (p->min_p > 0.0f) { /* p / p_max == w, since the best has w == 1 */
        int kept = 0;
        total = 0.0;
        for (int i = 0; i < nc; i++) {
            if (c[i].w >= p->min_p) {
                c[kept++] = c[i];
                total += c[i].w;
            }
        }
        nc = kept; /* the best (w == 1) always stays */
    }
    *nc_out = nc;
    *total_out = total;
    return 0;
}

/* Picks from cand[0..nc) with one uniform draw. */
static int draw(sampler *s, const cand *c, int nc, double total) {
    double u = rng_uniform(s->rng) * total, cum = 0.0;
    int last = -1;
    for (int i = 0; i < nc; i++) {
        if (c[i].w <= 0.0f) continue;
        cum += c[i].w;
        last = i;
        if (u < cum) return c[i].id;
    }
    return c[last < 0 ? 0 : last].id; /* rounding ran past the end */
}

int sampler_sample(sampler *s, const float *logits, int n_vocab, sample_result *out) {
    LLC_ASSERT(s);
    int nc;
    double total;
    int rc = run_chain(s, logits, n_vocab, &nc, &total);
    if (rc) return rc;
    int32_t tok = s->p.temperature <= 0.0f ? s->cand[0].id : draw(s, s->cand, nc, total);
    if (out) {
        out->token = tok;
        out->logprob = 0.0f;
        out->n_top = 0;
        int n = s->p.n_logprobs;
        if (n > 0) {
            int32_t ids[SAMPLER_MAX_LOGPROBS];
            float vals[SAMPLER_MAX_LOGPROBS];
            if (n > n_vocab) n = n_vocab;
            double lse;
            int cnt = topn_lse(logits, n_vocab, n, ids, vals, &lse);
            for (int i = 0; i < cnt; i++) {
                out->top[i].id = ids[i];
                out->top[i].logprob = (float)((double)vals[i] - lse);
            }
            out->n_top = cnt;
            float l = sanitize_logit(logits[tok]);
            out->logprob = l == -INFINITY ? -INFINITY : (float)((double)l - lse);
        }
    }
    return tok;
}

int sampler_top_need(const sampler *s) {
    const sampler_params *p = &s->p;
    const int32_t *wa, *wg;
    int na, ng;
    penalty_windows(s, &wa, &na, &wg, &ng);
    if (p->n_logprobs > 0 || na > 0 || ng > 0) return 0; /* these read the whole row */
    if (p->temperature <= 0.0f) return 1;
    return p->top_k > 0 && p->top_k <= HEAP_TOP_K_MAX ? p->top_k : 0;
}

int sampler_sample_top(sampler *s, const int32_t *ids, const float *vals, int n_top, int n_vocab, sample_result *out) {
    LLC_ASSERT(s);
    const int need = sampler_top_need(s);
    if (need < 1 || !ids || !vals || n_vocab < 1) return LLC_ERR_RANGE;
    int nc = 0;
    while (nc < n_top && nc < need && ids[nc] >= 0) nc++; /* (-1: the row had no more) */
    if (nc < need && nc == n_top && n_top < n_vocab) return LLC_ERR_RANGE; /* too short a list */
    int rc = ensure_scratch(s, n_vocab, need, 0);
    if (rc) return rc;
    cand *c = s->cand;
    for (int i = 0; i < nc; i++) c[i] = (cand){.id = ids[i], .logit = vals[i], .w = 0.0f};
    double total;
    int kept;
    rc = finish_chain(s, c, nc, nc ? c[0].logit : -INFINITY, &kept, &total);
    if (rc) return rc;
    int32_t tok = s->p.temperature <= 0.0f ? c[0].id : draw(s, c, kept, total);
    if (out) {
        out->token = tok;
        out->logprob = 0.0f;
        out->n_top = 0;
    }
    return tok;
}

int sampler_probs(sampler *s, const float *logits, int n_vocab, float *probs_out) {
    LLC_ASSERT(s);
    if (!probs_out) return LLC_ERR_RANGE;
    int nc;
    double total;
    int rc = run_chain(s, logits, n_vocab, &nc, &total);
    if (rc) return rc;
    memset(probs_out, 0, (size_t)n_vocab * sizeof *probs_out);
    for (int i = 0; i < nc; i++) probs_out[s->cand[i].id] = (float)(s->cand[i].w / total);
    return 0;
}

int sampler_sample_from_probs(sampler *s, const float *probs, int n) {
    LLC_ASSERT(s);
    if (!probs || n < 1) return LLC_ERR_RANGE;
    double total = 0.0;
    for (int i = 0; i < n; i++)
        if (probs[i] > 0.0f && isfinite(probs[i])) total += probs[i];
    if (!(total > 0.0)) return LLC_ERR_RANGE;
    double u = rng_uniform(s->rng) * total, cum = 0.0;
    int last = -1;
    for (int i = 0; i < n; i++) {
        if (!(probs[i] > 0.0f && isfinite(probs[i]))) continue;
        cum += probs[i];
        last = i;
        if (u < cum) return i;
    }
    return last;
}
