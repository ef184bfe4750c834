/* test_sampler.c — the sampler: greedy, seeding and streams, the distribution
 * (chi-square against softmax at fixed seeds, so results are deterministic),
 * top-k / top-p / min-p sets, penalties, logprobs, probs helpers, validation;
 * topk_row's order and sampling from a top list == sampling from the row. */
#include "engine/sched/sampler.h"
#include "kernels/topk.h"
#include "tests/test.h"

#include <float.h>
#include <stdint.h>

/* A small local generator for test data (independent of the sampler's RNG). */
static uint64_t g_lcg = 88172645463325252ULL;
static double trand(void) {
    g_lcg ^= g_lcg << 13;
    g_lcg ^= g_lcg >> 7;
    g_lcg ^= g_lcg << 17;
    return (double)(g_lcg >> 11) * 0x1.0p-53;
}
static void rand_logits(float *l, int n, float scale) {
    for (int i = 0; i < n; i++) l[i] = (float)((trand() * 2.0 - 1.0) * scale);
}

/* Plain sampling: temperature t, no truncation, no penalties. */
static sampler_params plain(float t, uint64_t seed) {
    sampler_params p = sampler_params_default();
    p.temperature = t;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = seed;
    return p;
}

static sampler *mk(const sampler_params *p) {
    sampler *s = NULL;
    llc_err err = {{0}};
    int rc = sampler_create(p, &s, &err);
    CHECKF(rc == 0 && s, "sampler_create: %d %s", rc, err.msg);
    return s;
}

/* softmax(l / t) in double */
static void ref_softmax(const float *l, int n, double t, double *p) {
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++)
        if (l[i] / t > mx) mx = l[i] / t;
    for (int i = 0; i < n; i++) sum += (p[i] = exp(l[i] / t - mx));
    for (int i = 0; i < n; i++) p[i] /= sum;
}

static double chi2(const int *obs, const double *p, int n, int draws) {
    double c = 0;
    for (int i = 0; i < n; i++) {
        double e = p[i] * draws;
        c += (obs[i] - e) * (obs[i] - e) / e;
    }
    return c;
}

static int argmax_ref(const float *l, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

/* ---------------------------------------------------------------------- */

static void test_params(void) {
    sampler_params d = sampler_params_default();
    llc_err err = {{0}};
    CHECK(sampler_params_check(&d, &err) == 0);
    CHECK(d.top_k == 40 && d.top_p == 0.95f && d.repeat_penalty == 1.0f);
    CHECK(d.seed == SAMPLER_SEED_DEFAULT && d.n_logprobs == 0);

    struct {
        const char *name;
        sampler_params p;
    } bad[20];
    int nb = 0;
#define BAD(field, val)                         \
    do {                                        \
        bad[nb].name = #field;                  \
        bad[nb].p = d;                          \
        bad[nb].p.field = (val);                \
        nb++;                                   \
    } while (0)
    BAD(temperature, NAN);
    BAD(temperature, INFINITY);
    BAD(top_k, -1);
    BAD(top_p, 0.0f);
    BAD(top_p, 1.5f);
    BAD(top_p, NAN);
    BAD(min_p, -0.1f);
    BAD(min_p, 1.01f);
    BAD(min_p, NAN);
    BAD(repeat_penalty, 0.0f);
    BAD(repeat_penalty, -1.0f);
    BAD(repeat_penalty, NAN);
    BAD(repeat_last_n, -2);
    BAD(frequency_penalty, 2.5f);
    BAD(frequency_penalty, NAN);
    BAD(presence_penalty, -3.0f);
    BAD(freq_last_n, -5);
    BAD(n_logprobs, 21);
    BAD(n_logprobs, -1);
#undef BAD
    for (int i = 0; i < nb; i++) {
        err.msg[0] = 0;
        int rc = sampler_params_check(&bad[i].p, &err);
        CHECKF(rc == LLC_ERR_RANGE, "%s: rc %d", bad[i].name, rc);
        CHECKF(strstr(err.msg, bad[i].name) != NULL, "%s: message '%s'", bad[i].name, err.msg);
        CHECKF(strchr(err.msg, '\n') == NULL, "%s: not one line", bad[i].name);
        sampler *s = (sampler *)1;
        CHECK(sampler_create(&bad[i].p, &s, NULL) == LLC_ERR_RANGE && s == NULL);
    }
    CHECK(sampler_params_check(NULL, &err) == LLC_ERR_RANGE);

    /* edges that are valid */
    sampler_params ok = d;
    ok.temperature = -1.0f; /* greedy */
    ok.top_p = 1.0f;
    ok.min_p = 1.0f;
    ok.repeat_last_n = -1;
    ok.freq_last_n = 0;
    ok.frequency_penalty = -2.0f;
    ok.n_logprobs = 20;
    CHECKF(sampler_params_check(&ok, &err) == 0, "%s", err.msg);

    /* set_params validates and keeps the old params on failure */
    sampler *s = mk(&d);
    CHECK(sampler_set_params(s, &bad[0].p, &err) == LLC_ERR_RANGE);
    CHECK(sampler_get_params(s)->temperature == d.temperature);
    CHECK(sampler_set_params(s, &ok, &err) == 0 && sampler_get_params(s)->n_logprobs == 20);
    sampler_free(s);
    sampler_free(NULL);
}

static void test_greedy(void) {
    enum { N = 1000 };
    static float l[N], copy[N], probs[N];
    sampler_params p = plain(0.0f, 1);
    sampler *s = mk(&p);
    sampler *twin = mk(&p);
    for (int r = 0; r < 20; r++) {
        rand_logits(l, N, 10.0f);
        memcpy(copy, l, sizeof l);
        sample_result res;
        int t = sampler_sample(s, l, N, &res);
        CHECK(t == argmax_ref(l, N) && res.token == t);
        CHECK(memcmp(l, copy, sizeof l) == 0);
        CHECK(sampler_probs(s, l, N, probs) == 0);
        CHECK(memcmp(l, copy, sizeof l) == 0);
        for (int i = 0; i < N; i++) CHECK(probs[i] == (i == t ? 1.0f : 0.0f));
    }
    /* ties go to the lowest id; NaN / -inf never win */
    rand_logits(l, N, 1.0f);
    l[700] = 5.0f;
    l[300] = 5.0f;
    l[900] = 5.0f;
    l[10] = NAN;
    l[20] = INFINITY * -1.0f;
    CHECK(sampler_sample(s, l, N, NULL) == 300);
    /* a penalised token that ties an unpenalised one: the lower id still wins */
    sampler_params pen = plain(0.0f, 1);
    pen.presence_penalty = 1.0f;
    sampler *ps = mk(&pen);
    float tl[10] = {0, 0, 0, 0, 0, 3.0f, 0, 0, 0, 2.0f};
    CHECK(sampler_accept(ps, 5) == 0); /* 3 - 1 = 2: ties with id 9 */
    CHECK(sampler_sample(ps, tl, 10, NULL) == 5);
    tl[9] = 2.0f;
    tl[5] = 2.0f;
    tl[2] = 1.0f; /* 5 is now 1: ties with id 2, which wins */
    CHECK(sampler_sample(ps, tl, 10, NULL) == 9);
    tl[9] = 0.0f;
    CHECK(sampler_sample(ps, tl, 10, NULL) == 2);
    sampler_free(ps);
    /* temperature < 0 is greedy too */
    sampler_params neg = plain(-0.5f, 1);
    CHECK(sampler_set_params(s, &neg, NULL) == 0);
    CHECK(sampler_sample(s, l, N, NULL) == 300);
    /* greedy draws no random numbers */
    CHECK(sampler_uniform(s) == sampler_uniform(twin));
    /* no finite logit at all: an error, not a crash */
    for (int i = 0; i < N; i++) l[i] = (i & 1) ? NAN : -INFINITY;
    CHECK(sampler_sample(s, l, N, NULL) == LLC_ERR_RANGE);
    CHECK(sampler_sample(s, l, 0, NULL) == LLC_ERR_RANGE);
    /* +inf wins, sampled or greedy */
    l[123] = INFINITY;
    l[124] = 3.0f;
    CHECK(sampler_sample(s, l, N, NULL) == 123);
    sampler_params hot = plain(1.0f, 1);
    CHECK(sampler_set_params(s, &hot, NULL) == 0);
    for (int i = 0; i < 20; i++) CHECK(sampler_sample(s, l, N, NULL) == 123);
    sampler_free(s);
    sampler_free(twin);
}

static void test_rng_golden(void) {
    /* xoshiro256** seeded through splitmix64 (values from an independent Python
     * implementation): the stream is the same on every machine. */
    sampler_params p = plain(1.0f, 1234);
    sampler *s = mk(&p);
    CHECK(sampler_seed(s) == 1234);
    CHECK(sampler_uniform(s) == 0.045582166320754625);
    CHECK(sampler_uniform(s) == 0.8428688286913699);
    CHECK(sampler_uniform(s) == 0.6909004824270624);
    CHECK(sampler_uniform(s) == 0.8702690665021908);
    CHECK(sampler_uniform(s) == 0.1011451910424982);
    CHECK(sampler_uniform(s) == 0.8934953496766087);
    sampler_free(s);

    /* SAMPLER_SEED_RANDOM draws a seed and reports it; reusing it repeats the run */
    p.seed = SAMPLER_SEED_RANDOM;
    sampler *r = mk(&p);
    CHECK(sampler_seed(r) != SAMPLER_SEED_RANDOM);
    sampler_params again = plain(1.0f, sampler_seed(r));
    sampler *r2 = mk(&again);
    for (int i = 0; i < 10; i++) CHECK(sampler_uniform(r) == sampler_uniform(r2));
    sampler_free(r);
    sampler_free(r2);
}

#define NDRAW 1000
static void draw_seq(sampler *s, const float *l, int n, int *out) {
    for (int i = 0; i < NDRAW; i++) out[i] = sampler_sample(s, l, n, NULL);
}
static int n_diff(const int *a, const int *b) {
    int d = 0;
    for (int i = 0; i < NDRAW; i++) d += a[i] != b[i];
    return d;
}

static void test_seed_streams(void) {
    enum { N = 64 };
    float l[N];
    rand_logits(l, N, 1.0f); /* flat-ish: draws vary a lot */
    static int a[NDRAW], b[NDRAW], c[NDRAW], d[NDRAW], e[NDRAW];
    sampler_params p = plain(1.0f, 7);
    sampler *s1 = mk(&p), *s2 = mk(&p);
    draw_seq(s1, l, N, a);
    draw_seq(s2, l, N, b);
    CHECK(n_diff(a, b) == 0);
    p.seed = 8;
    sampler *s3 = mk(&p);
    draw_seq(s3, l, N, c);
    CHECKF(n_diff(a, c) > NDRAW / 2, "%d differ", n_diff(a, c));

    /* clones: stream 0 continues identically, other streams differ */
    sampler *k0 = NULL, *k1 = NULL, *k1b = NULL, *k2 = NULL;
    CHECK(sampler_clone(s1, 0, &k0) == 0);
    CHECK(sampler_clone(s1, 1, &k1) == 0);
    CHECK(sampler_clone(s1, 1, &k1b) == 0);
    CHECK(sampler_clone(s1, 2, &k2) == 0);
    draw_seq(s1, l, N, a);
    draw_seq(k0, l, N, b);
    CHECK(n_diff(a, b) == 0);
    draw_seq(k1, l, N, c);
    draw_seq(k1b, l, N, d);
    draw_seq(k2, l, N, e);
    CHECK(n_diff(c, d) == 0); /* same parent state + same stream: reproducible */
    CHECKF(n_diff(a, c) > NDRAW / 2, "%d differ", n_diff(a, c));
    CHECKF(n_diff(c, e) > NDRAW / 2, "%d differ", n_diff(c, e));
    CHECK(sampler_seed(k1) == sampler_seed(s1));

    /* a clone carries the history: same penalties */
    sampler_params pp = plain(1.0f, 3);
    pp.repeat_penalty = 1.7f;
    pp.frequency_penalty = 0.3f;
    sampler *h = mk(&pp), *hc = NULL;
    int32_t prompt[3] = {1, 2, 3};
    CHECK(sampler_accept_prompt(h, prompt, 3) == 0);
    CHECK(sampler_accept(h, 5) == 0);
    CHECK(sampler_clone(h, 9, &hc) == 0);
    float pa[N], pb[N];
    CHECK(sampler_probs(h, l, N, pa) == 0 && sampler_probs(hc, l, N, pb) == 0);
    CHECK(memcmp(pa, pb, sizeof pa) == 0);
    CHECK(sampler_accept(h, 6) == 0); /* the clone is independent afterwards */
    CHECK(sampler_probs(h, l, N, pa) == 0 && sampler_probs(hc, l, N, pb) == 0);
    CHECK(pa[6] != pb[6]);

    sampler *all[] = {s1, s2, s3, k0, k1, k1b, k2, h, hc};
    for (size_t i = 0; i < LLC_ARRAY_LEN(all); i++) sampler_free(all[i]);
}

static void test_distribution(void) {
    enum { N = 8, DRAWS = 200000 };
    const float l[N] = {1.0f, 0.5f, 0.0f, -0.5f, 2.0f, -1.0f, 0.3f, 1.5f};
    double p1[N], p05[N];
    ref_softmax(l, N, 1.0, p1);
    ref_softmax(l, N, 0.5, p05);
    /* chi-square, 7 degrees of freedom, significance 0.001: critical 24.32 */
    const double crit = 24.32;
    for (int ti = 0; ti < 2; ti++) {
        float t = ti ? 0.5f : 1.0f;
        sampler_params p = plain(t, 2024 + (uint64_t)ti);
        sampler *s = mk(&p);
        int obs[N] = {0};
        for (int i = 0; i < DRAWS; i++) {
            int tok = sampler_sample(s, l, N, NULL);
            CHECK(tok >= 0 && tok < N);
            if (tok >= 0 && tok < N) obs[tok]++;
        }
        double c_right = chi2(obs, ti ? p05 : p1, N, DRAWS);
        double c_wrong = chi2(obs, ti ? p1 : p05, N, DRAWS);
        CHECKF(c_right < crit, "T=%g: chi2 %.2f vs softmax(l/T)", (double)t, c_right);
        CHECKF(c_wrong > 100 * crit, "T=%g: chi2 %.2f vs the other temperature", (double)t,
               c_wrong);
        /* and the exact distribution */
        float pr[N];
        CHECK(sampler_probs(s, l, N, pr) == 0);
        for (int i = 0; i < N; i++) CHECK_NEAR(pr[i], ti ? p05[i] : p1[i], 2e-6);
        sampler_free(s);
    }
}

/* ids of the k largest logits (ties to lower id) in out[] */
static int in_topk(const float *l, int n, int k, int tok) {
    int better = 0;
    for (int i = 0; i < n; i++)
        if (l[i] > l[tok] || (l[i] == l[tok] && i < tok)) better++;
    return better < k;
}

static void test_top_k(void) {
    enum { N = 1000 };
    static float l[N], pr[N];
    /* top_k = 1 is greedy, ties included */
    sampler_params p = plain(1.0f, 5);
    p.top_k = 1;
    sampler *s = mk(&p);
    for (int r = 0; r < 50; r++) {
        rand_logits(l, N, 3.0f);
        if (r % 5 == 0) l[argmax_ref(l, N) / 2] = l[argmax_ref(l, N)]; /* a tie below */
        CHECK(sampler_sample(s, l, N, NULL) == argmax_ref(l, N));
    }
    sampler_free(s);

    /* top_k = 3: never outside the top 3; all three show up; probs only on them */
    p.top_k = 3;
    s = mk(&p);
    rand_logits(l, N, 0.5f);
    int seen[N] = {0};
    for (int i = 0; i < 5000; i++) {
        int t = sampler_sample(s, l, N, NULL);
        CHECK(t >= 0 && t < N);
        if (t < 0 || t >= N) continue;
        CHECKF(in_topk(l, N, 3, t), "token %d outside the top 3", t);
        seen[t]++;
    }
    int distinct = 0;
    for (int i = 0; i < N; i++) distinct += seen[i] > 0;
    CHECK(distinct == 3);
    CHECK(sampler_probs(s, l, N, pr) == 0);
    double sum = 0, ref[3], rs = 0;
    int k = 0;
    for (int i = 0; i < N; i++) {
        sum += pr[i];
        CHECK((pr[i] > 0) == in_topk(l, N, 3, i));
        if (in_topk(l, N, 3, i)) rs += (ref[k++] = exp(l[i]));
    }
    CHECK_NEAR(sum, 1.0, 1e-6);
    k = 0;
    for (int i = 0; i < N; i++)
        if (in_topk(l, N, 3, i)) CHECK_NEAR(pr[i], ref[k++] / rs, 1e-6);
    sampler_free(s);
}

static int cmp_desc_idx(const void *a, const void *b, void *ctx) {
    const float *l = ctx;
    int i = *(const int *)a, j = *(const int *)b;
    if (l[i] != l[j]) return l[i] > l[j] ? -1 : 1;
    return i - j;
}

/* expected top-p set over logits/t: mask[i] = 1 for members; returns its size */
static int ref_top_p(const float *l, int n, double t, double top_p, unsigned char *mask) {
    double *p = malloc(sizeof *p * (size_t)n);
    int *idx = malloc(sizeof *idx * (size_t)n);
    ref_softmax(l, n, t, p);
    for (int i = 0; i < n; i++) idx[i] = i;
    qsort_r(idx, (size_t)n, sizeof *idx, cmp_desc_idx, (void *)l);
    memset(mask, 0, (size_t)n);
    double cum = 0;
    int k = 0;
    while (k < n) {
        cum += p[idx[k]];
        mask[idx[k++]] = 1;
        if (cum >= top_p) break;
    }
    free(p);
    free(idx);
    return k;
}

static void test_top_p(void) {
    /* a small case where the set is known by hand:
     * p = .40 .25 .15 .10 .05 .05 — top_p .75 keeps {0,1,2} (cum .80) */
    enum { M = 6 };
    const double pm[M] = {0.40, 0.25, 0.15, 0.10, 0.05, 0.05};
    const int order[M] = {3, 0, 5, 1, 4, 2}; /* shuffle ids */
    float l[M];
    for (int i = 0; i < M; i++) l[order[i]] = (float)log(pm[i]);
    sampler_params p = plain(1.0f, 11);
    p.top_p = 0.75f;
    sampler *s = mk(&p);
    float pr[M];
    CHECK(sampler_probs(s, l, M, pr) == 0);
    for (int i = 0; i < M; i++) CHECK_NEAR(pr[order[i]], i < 3 ? pm[i] / 0.80 : 0.0, 1e-6);
    int cnt[M] = {0};
    for (int i = 0; i < 3000; i++) {
        int t = sampler_sample(s, l, M, NULL);
        if (t >= 0 && t < M) cnt[t]++;
    }
    for (int i = 0; i < M; i++) CHECK((cnt[order[i]] > 0) == (i < 3));
    /* ties at the cut go to the lower id: p = .4 .2 .2 .2, top_p .5 keeps the
     * best and the lowest id of the three tied ones */
    float tie[4] = {(float)log(0.2), (float)log(0.2), (float)log(0.4), (float)log(0.2)};
    p.top_p = 0.5f;
    CHECK(sampler_set_params(s, &p, NULL) == 0);
    CHECK(sampler_probs(s, tie, 4, pr) == 0);
    CHECK_NEAR(pr[2], 2.0 / 3.0, 1e-6);
    CHECK_NEAR(pr[0], 1.0 / 3.0, 1e-6);
    CHECK(pr[1] == 0.0f && pr[3] == 0.0f);
    sampler_free(s);

    /* a large vocabulary where the set needs hundreds of candidates (several
     * growing chunks), checked against a full sort; also with temperature. */
    enum { N = 100000 };
    static float big[N], bp[N];
    static unsigned char mask[N];
    for (int i = 0; i < N; i++) big[i] = -20.0f + (float)trand();
    for (int i = 0; i < 1000; i++) big[(int)(trand() * N)] = (float)(-0.004 * i * trand());
    const double tps[] = {0.3, 0.5, 0.9, 0.99};
    const float temps[] = {1.0f, 0.7f};
    for (size_t ti = 0; ti < LLC_ARRAY_LEN(temps); ti++) {
        for (size_t pi = 0; pi < LLC_ARRAY_LEN(tps); pi++) {
            sampler_params q = plain(temps[ti], 12);
            q.top_p = (float)tps[pi];
            int want = ref_top_p(big, N, temps[ti], q.top_p, mask);
            sampler *b = mk(&q);
            CHECK(sampler_probs(b, big, N, bp) == 0);
            int got = 0, wrong = 0;
            double sum = 0;
            for (int i = 0; i < N; i++) {
                got += bp[i] > 0;
                wrong += (bp[i] > 0) != (mask[i] != 0);
                sum += bp[i];
            }
            CHECKF(got == want && wrong == 0, "T %g top_p %g: %d kept, want %d, %d differ",
                   (double)temps[ti], tps[pi], got, want, wrong);
            CHECK_NEAR(sum, 1.0, 1e-5);
            if (pi == 1) CHECKF(want > 200, "set of %d is too small to test chunks", want);
            for (int i = 0; i < 20; i++) {
                int t = sampler_sample(b, big, N, NULL);
                CHECK(t >= 0 && t < N && mask[t]);
            }
            sampler_free(b);
        }
    }
}

static void test_min_p(void) {
    enum { N = 50 };
    float l[N], pr[N];
    double ref[N];
    rand_logits(l, N, 2.0f);
    const float temps[] = {1.0f, 0.6f};
    for (size_t ti = 0; ti < LLC_ARRAY_LEN(temps); ti++) {
        sampler_params p = plain(temps[ti], 13);
        p.min_p = 0.2f;
        sampler *s = mk(&p);
        ref_softmax(l, N, temps[ti], ref);
        double pmax = 0, kept_sum = 0;
        for (int i = 0; i < N; i++)
            if (ref[i] > pmax) pmax = ref[i];
        int kept = 0;
        for (int i = 0; i < N; i++)
            if (ref[i] >= 0.2 * pmax) kept++, kept_sum += ref[i];
        CHECK(kept > 1 && kept < N);
        CHECK(sampler_probs(s, l, N, pr) == 0);
        for (int i = 0; i < N; i++)
            CHECK_NEAR(pr[i], ref[i] >= 0.2 * pmax ? ref[i] / kept_sum : 0.0, 1e-6);
        for (int i = 0; i < 5000; i++) {
            int t = sampler_sample(s, l, N, NULL);
            CHECK(t >= 0 && t < N && ref[t] >= 0.2 * pmax);
        }
        sampler_free(s);
    }
}

static void test_penalties(void) {
    enum { N = 6 };
    const float l[N] = {2.0f, -1.0f, 0.5f, 1.0f, 0.0f, 3.0f};
    float pr[N], adj[N];
    double ref[N];

    /* repeat penalty over prompt + generated, llama.cpp semantics */
    sampler_params p = plain(1.0f, 1);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 3;
    sampler *s = mk(&p);
    int32_t prompt[2] = {5, 4};
    CHECK(sampler_accept_prompt(s, prompt, 2) == 0);
    CHECK(sampler_accept(s, 0) == 0);
    CHECK(sampler_accept(s, 1) == 0);
    CHECK(sampler_accept(s, 1) == 0); /* seen twice: penalised once */
    /* window of 3 = {0, 1, 1}: 5 and 4 fell out */
    memcpy(adj, l, sizeof adj);
    adj[0] = 2.0f / 2.0f;
    adj[1] = -1.0f * 2.0f;
    ref_softmax(adj, N, 1.0, ref);
    CHECK(sampler_probs(s, l, N, pr) == 0);
    for (int i = 0; i < N; i++) CHECK_NEAR(pr[i], ref[i], 1e-6);
    /* a wider window takes in the prompt: 5 (positive) and 4 (zero, unchanged) */
    p.repeat_last_n = 5;
    CHECK(sampler_set_params(s, &p, NULL) == 0);
    adj[5] = 3.0f / 2.0f;
    ref_softmax(adj, N, 1.0, ref);
    CHECK(sampler_probs(s, l, N, pr) == 0);
    for (int i = 0; i < N; i++) CHECK_NEAR(pr[i], ref[i], 1e-6);
    sampler_free(s);

    /* frequency / presence over generated tokens only (OpenAI) */
    p = plain(1.0f, 1);
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    s = mk(&p);
    int32_t pr2[3] = {0, 0, 2};
    CHECK(sampler_accept_prompt(s, pr2, 3) == 0); /* not counted */
    const int32_t gen[4] = {3, 3, 1, 3};
    for (int i = 0; i < 4; i++) CHECK(sampler_accept(s, gen[i]) == 0);
    CHECK(sampler_accept(s, 777) == 0); /* out of this vocab: ignored */
    memcpy(adj, l, sizeof adj);
    adj[3] -= 3 * 0.5f + 0.25f;
    adj[1] -= 1 * 0.5f + 0.25f;
    ref_softmax(adj, N, 1.0, ref);
    CHECK(sampler_probs(s, l, N, pr) == 0);
    for (int i = 0; i < N; i++) CHECK_NEAR(pr[i], ref[i], 1e-6);
    /* window: last 3 generated = {1, 3, 777} */
    p.freq_last_n = 3;
    CHECK(sampler_set_params(s, &p, NULL) == 0);
    memcpy(adj, l, sizeof adj);
    adj[3] -= 0.75f;
    adj[1] -= 0.75f;
    ref_softmax(adj, N, 1.0, ref);
    CHECK(sampler_probs(s, l, N, pr) == 0);
    for (int i = 0; i < N; i++) CHECK_NEAR(pr[i], ref[i], 1e-6);

    /* all three together: repeat first, then subtract (llama.cpp order) */
    p.repeat_penalty = 1.5f;
    p.repeat_last_n = -1; /* whole history, prompt included */
    p.freq_last_n = -1;
    CHECK(sampler_set_params(s, &p, NULL) == 0);
    memcpy(adj, l, sizeof adj);
    adj[0] = 2.0f / 1.5f;               /* prompt: repeat only */
    adj[2] = 0.5f / 1.5f;               /* prompt: repeat only */
    adj[3] = 1.0f / 1.5f - 1.75f;       /* generated 3x */
    adj[1] = -1.0f * 1.5f - 0.75f;      /* generated 1x, negative */
    ref_softmax(adj, N, 1.0, ref);
    CHECK(sampler_probs(s, l, N, pr) == 0);
    for (int i = 0; i < N; i++) CHECK_NEAR(pr[i], ref[i], 1e-6);
    sampler_free(s);

    /* penalties act before top-k and greedy: a penalised best drops out */
    const float l2[N] = {4.0f, 3.0f, 2.9f, 1.0f, 0.0f, -1.0f};
    p = plain(0.0f, 1);
    p.presence_penalty = 2.0f;
    s = mk(&p);
    CHECK(sampler_sample(s, l2, N, NULL) == 0);
    CHECK(sampler_accept(s, 0) == 0); /* 4 - 2 = 2 < 2.9 */
    CHECK(sampler_sample(s, l2, N, NULL) == 1);
    p.temperature = 1.0f;
    p.top_k = 2;
    CHECK(sampler_set_params(s, &p, NULL) == 0);
    CHECK(sampler_probs(s, l2, N, pr) == 0);
    CHECK(pr[0] == 0.0f && pr[1] > 0.0f && pr[2] > 0.0f && pr[3] == 0.0f);
    CHECK_NEAR(pr[1], 1.0 / (1.0 + exp(-0.1)), 1e-6);
    sampler_free(s);
}

/* many distinct tokens in long windows, against counts kept by hand */
static void test_penalties_many(void) {
    enum { V = 5000, NP = 700, NG = 3000 };
    static float l[V], adj[V], pr[V];
    static double ref[V];
    static int32_t toks[NP + NG];
    static int cnt_gen[V];
    static unsigned char rep_seen[V];
    rand_logits(l, V, 4.0f);
    for (int i = 0; i < NP + NG; i++) toks[i] = (int32_t)(trand() * (i % 3 ? 400 : V));
    sampler_params p = plain(1.0f, 4);
    p.repeat_penalty = 1.2f;
    p.repeat_last_n = 500;
    p.frequency_penalty = 0.1f;
    p.presence_penalty = 0.2f;
    p.freq_last_n = -1;
    sampler *s = mk(&p);
    CHECK(sampler_accept_prompt(s, toks, NP) == 0);
    for (int i = NP; i < NP + NG; i++) CHECK(sampler_accept(s, toks[i]) == 0);
    memset(cnt_gen, 0, sizeof cnt_gen);
    memset(rep_seen, 0, sizeof rep_seen);
    for (int i = NP; i < NP + NG; i++) cnt_gen[toks[i]]++;
    for (int i = NP + NG - 500; i < NP + NG; i++) rep_seen[toks[i]] = 1;
    for (int i = 0; i < V; i++) {
        float x = l[i];
        if (rep_seen[i]) x = x <= 0 ? x * 1.2f : x / 1.2f;
        if (cnt_gen[i]) x -= (float)cnt_gen[i] * 0.1f + 0.2f;
        adj[i] = x;
    }
    ref_softmax(adj, V, 1.0, ref);
    CHECK(sampler_probs(s, l, V, pr) == 0);
    int bad = 0;
    for (int i = 0; i < V; i++) bad += fabs(pr[i] - ref[i]) > 1e-6 + 1e-5 * ref[i];
    CHECKF(bad == 0, "%d probabilities differ", bad);
    /* the prompt alone (no generated tokens) moves nothing for frequency */
    sampler_reset(s);
    p.repeat_penalty = 1.0f;
    CHECK(sampler_set_params(s, &p, NULL) == 0);
    CHECK(sampler_accept_prompt(s, toks, NP + NG) == 0);
    ref_softmax(l, V, 1.0, ref);
    CHECK(sampler_probs(s, l, V, pr) == 0);
    bad = 0;
    for (int i = 0; i < V; i++) bad += fabs(pr[i] - ref[i]) > 1e-6 + 1e-5 * ref[i];
    CHECKF(bad == 0, "%d probabilities differ", bad);
    sampler_free(s);
}

static void test_rollback(void) {
    enum { N = 16 };
    float l[N], pa[N], pb[N];
    rand_logits(l, N, 2.0f);
    sampler_params p = plain(1.0f, 1);
    p.repeat_penalty = 1.3f;
    p.repeat_last_n = 4;
    p.frequency_penalty = 0.4f;
    p.freq_last_n = 6;
    sampler *s = mk(&p);
    /* a long history: only the window matters, and rollback restores it */
    int32_t hist[1000];
    for (int i = 0; i < 1000; i++) hist[i] = (int32_t)((i * 7 + i / 3) % N);
    for (int i = 0; i < 1000; i++) CHECK(sampler_accept(s, hist[i]) == 0);
    for (int back = 0; back <= SAMPLER_MAX_ROLLBACK; back += 16) {
        sampler *f = mk(&p);
        for (int i = 1000 - back - 10; i < 1000 - back; i++) CHECK(sampler_accept(f, hist[i]) == 0);
        CHECK(sampler_probs(s, l, N, pa) == 0 && sampler_probs(f, l, N, pb) == 0);
        for (int i = 0; i < N; i++) CHECK_NEAR(pa[i], pb[i], 1e-7);
        sampler_free(f);
        CHECK(sampler_rollback(s, 16) == 0);
    }
    CHECK(sampler_rollback(s, 900) == LLC_ERR_RANGE); /* forgotten by now */
    CHECK(sampler_rollback(s, -1) == LLC_ERR_RANGE);
    /* a prompt token after the generated ones: cannot roll back across it */
    int32_t u = 3;
    CHECK(sampler_accept_prompt(s, &u, 1) == 0);
    CHECK(sampler_accept(s, 5) == 0);
    CHECK(sampler_rollback(s, 2) == LLC_ERR_RANGE);
    CHECK(sampler_rollback(s, 1) == 0);
    sampler_reset(s);
    sampler *f = mk(&p);
    CHECK(sampler_probs(s, l, N, pa) == 0 && sampler_probs(f, l, N, pb) == 0);
    CHECK(memcmp(pa, pb, sizeof pa) == 0);
    sampler_free(f);
    sampler_free(s);
}

static void test_logprobs(void) {
    enum { N = 1000 };
    static float l[N], copy[N];
    static double lsm[N];
    rand_logits(l, N, 8.0f);
    l[17] = NAN;
    l[18] = -INFINITY;
    memcpy(copy, l, sizeof l);
    /* independent log_softmax in double, NaN as -inf */
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < N; i++)
        if (!isnan(l[i]) && l[i] > mx) mx = l[i];
    for (int i = 0; i < N; i++) sum += isnan(l[i]) ? 0.0 : exp(l[i] - mx);
    for (int i = 0; i < N; i++) lsm[i] = isnan(l[i]) ? -INFINITY : l[i] - mx - log(sum);

    sampler_params p = plain(1.0f, 77);
    p.n_logprobs = 5;
    p.repeat_penalty = 1.8f; /* logprobs are the model's: penalties do not show */
    sampler *s = mk(&p);
    int best = argmax_ref(l, N);
    CHECK(sampler_accept(s, best) == 0);
    for (int r = 0; r < 20; r++) {
        sample_result res;
        int t = sampler_sample(s, l, N, &res);
        CHECK(t >= 0 && t == res.token);
        CHECK(res.n_top == 5);
        CHECK(res.top[0].id == best);
        for (int i = 0; i < res.n_top; i++) {
            CHECK_NEAR(res.top[i].logprob, lsm[res.top[i].id], 1e-5);
            if (i) CHECK(res.top[i].logprob <= res.top[i - 1].logprob);
            /* nothing outside the list beats its last entry */
        }
        int better = 0;
        for (int i = 0; i < N; i++) better += lsm[i] > lsm[res.top[4].id];
        CHECK(better == 4);
        CHECK_NEAR(res.logprob, lsm[t], 1e-5);
    }
    CHECK(memcmp(l, copy, sizeof l) == 0);
    sampler_free(s);

    /* n_logprobs 0: nothing reported */
    p.n_logprobs = 0;
    s = mk(&p);
    sample_result res;
    CHECK(sampler_sample(s, l, N, &res) >= 0 && res.n_top == 0);
    sampler_free(s);

    /* N larger than the vocabulary; greedy path too; ties to lower id */
    float small[4] = {1.0f, 3.0f, 1.0f, -INFINITY};
    p = plain(0.0f, 1);
    p.n_logprobs = 20;
    s = mk(&p);
    CHECK(sampler_sample(s, small, 4, &res) == 1);
    CHECK(res.n_top == 3); /* -inf is not reported */
    CHECK(res.top[0].id == 1 && res.top[1].id == 0 && res.top[2].id == 2);
    double z = log(exp(1.0) * 2 + exp(3.0));
    CHECK_NEAR(res.top[0].logprob, 3.0 - z, 1e-6);
    CHECK_NEAR(res.top[1].logprob, 1.0 - z, 1e-6);
    CHECK_NEAR(res.logprob, 3.0 - z, 1e-6);
    sampler_free(s);

    /* the standalone helper */
    int32_t ids[64];
    float lp[64];
    CHECK(sampler_log_softmax_topn(l, N, 64, ids, lp) == 64);
    for (int i = 0; i < 64; i++) {
        CHECK_NEAR(lp[i], lsm[ids[i]], 1e-5);
        if (i) CHECK(lp[i] < lp[i - 1] || (lp[i] == lp[i - 1] && ids[i] > ids[i - 1]));
    }
    CHECK(sampler_log_softmax_topn(l, N, 0, NULL, NULL) == 0);
    CHECK(sampler_log_softmax_topn(l, N, -1, ids, lp) == LLC_ERR_RANGE);
    CHECK(sampler_log_softmax_topn(l, 0, 3, ids, lp) == LLC_ERR_RANGE);
    CHECK(sampler_log_softmax_topn(small, 4, 64, ids, lp) == 3);
}

static void test_probs_helpers(void) {
    enum { N = 300 };
    static float l[N], pr[N];
    rand_logits(l, N, 3.0f);
    sampler_params p = sampler_params_default(); /* the whole default chain */
    sampler *s = mk(&p);
    CHECK(sampler_probs(s, l, N, pr) == 0);
    double sum = 0;
    int nz = 0;
    for (int i = 0; i < N; i++) sum += pr[i], nz += pr[i] > 0;
    CHECK_NEAR(sum, 1.0, 1e-5);
    CHECK(nz >= 1 && nz <= 40);
    /* samples land only where probs > 0 */
    for (int i = 0; i < 2000; i++) {
        int t = sampler_sample(s, l, N, NULL);
        CHECK(t >= 0 && t < N && pr[t] > 0);
    }

    /* sample_from_probs: frequencies follow the weights (unnormalised is fine);
     * chi-square over the 5 positive entries, 4 dof, significance 0.001: 18.47 */
    const float w[7] = {0.1f, 0.0f, 0.4f, 0.2f, -1.0f, 0.6f, 0.7f};
    const double wp[5] = {0.1 / 2.0, 0.4 / 2.0, 0.2 / 2.0, 0.6 / 2.0, 0.7 / 2.0};
    const int wid[5] = {0, 2, 3, 5, 6};
    int cnt[7] = {0};
    enum { DRAWS = 100000 };
    for (int i = 0; i < DRAWS; i++) {
        int t = sampler_sample_from_probs(s, w, 7);
        CHECK(t >= 0 && t < 7);
        if (t >= 0 && t < 7) cnt[t]++;
    }
    CHECK(cnt[1] == 0 && cnt[4] == 0);
    int obs[5];
    for (int i = 0; i < 5; i++) obs[i] = cnt[wid[i]];
    double c = chi2(obs, wp, 5, DRAWS);
    CHECKF(c < 18.47, "chi2 %.2f", c);
    const float zero[3] = {0.0f, -1.0f, NAN};
    CHECK(sampler_sample_from_probs(s, zero, 3) == LLC_ERR_RANGE);
    CHECK(sampler_sample_from_probs(s, w, 0) == LLC_ERR_RANGE);

    /* speculative-decoding use: accept with min(1, p/q), else resample from the
     * residual max(0, p - q) — the result is distributed as p. */
    enum { V = 5, SD = 60000 };
    const float lp_[V] = {0.0f, 1.0f, -1.0f, 0.5f, 0.2f}; /* target */
    const float lq_[V] = {1.0f, 0.0f, 0.0f, -0.5f, 0.3f}; /* draft */
    sampler_params sp = plain(1.0f, 99);
    sampler *tgt = mk(&sp), *drf = mk(&sp);
    float P[V], Q[V], R[V];
    CHECK(sampler_probs(tgt, lp_, V, P) == 0 && sampler_probs(drf, lq_, V, Q) == 0);
    for (int i = 0; i < V; i++) R[i] = P[i] > Q[i] ? P[i] - Q[i] : 0.0f;
    int sc[V] = {0};
    for (int i = 0; i < SD; i++) {
        int x = sampler_sample(drf, lq_, V, NULL);
        if (!(x >= 0 && x < V)) continue;
        double a = P[x] / Q[x];
        if (!(sampler_uniform(tgt) < a)) x = sampler_sample_from_probs(tgt, R, V);
        if (x >= 0 && x < V) sc[x]++;
    }
    double pd[V];
    for (int i = 0; i < V; i++) pd[i] = P[i];
    c = chi2(sc, pd, V, SD);
    CHECKF(c < 18.47, "speculative chi2 %.2f", c); /* 4 dof, 0.001 */
    sampler_free(tgt);
    sampler_free(drf);
    sampler_free(s);
}

static void test_large_vocab(void) {
    /* 256k vocabulary through the default chain, plus top-k alone */
    enum { N = 256000 };
    float *l = malloc(sizeof *l * N), *pr = malloc(sizeof *pr * N);
    rand_logits(l, N, 10.0f);
    sampler_params p = sampler_params_default();
    p.n_logprobs = 3;
    sampler *s = mk(&p);
    for (int r = 0; r < 10; r++) {
        sample_result res;
        int t = sampler_sample(s, l, N, &res);
        CHECK(t >= 0 && t < N && in_topk(l, N, 40, t));
        CHECK(res.n_top == 3 && res.top[0].id == argmax_ref(l, N));
    }
    p.top_k = 2000; /* above the heap's limit: the quickselect path */
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.temperature = 100.0f; /* flat: every one of the 2000 is likely */
    CHECK(sampler_set_params(s, &p, NULL) == 0);
    CHECK(sampler_probs(s, l, N, pr) == 0);
    /* the 1000 best by a full sort */
    int *idx = malloc(sizeof *idx * N);
    unsigned char *mask = calloc(N, 1);
    for (int i = 0; i < N; i++) idx[i] = i;
    qsort_r(idx, N, sizeof *idx, cmp_desc_idx, l);
    for (int i = 0; i < 2000; i++) mask[idx[i]] = 1;
    int kept = 0, wrong = 0;
    for (int i = 0; i < N; i++) {
        kept += pr[i] > 0;
        wrong += (pr[i] > 0) != (mask[i] != 0);
    }
    CHECKF(kept == 2000 && wrong == 0, "%d kept, %d differ", kept, wrong);
    free(idx);
    free(mask);
    sampler_free(s);
    free(l);
    free(pr);
}

/* A row with what makes top lists hard: runs of equal values (ties across the
 * k-th place), NaN, +-inf, -0.0 beside +0.0. */
static void tricky_row(float *l, int n, int kind) {
    for (int i = 0; i < n; i++) {
        double u = trand();
        switch (kind % 4) {
        case 0: l[i] = (float)((trand() * 2.0 - 1.0) * 4.0); break;
        case 1: l[i] = (float)(int)(u * 6.0); break;               /* few distinct values: ties */
        case 2: l[i] = u < 0.3 ? NAN : u < 0.5 ? -INFINITY : (float)(u * 3.0); break;
        default: l[i] = u < 0.02 ? INFINITY : u < 0.5 ? -0.0f : u < 0.9 ? 0.0f : (float)u; break;
        }
    }
}

/* topk_row against a plain selection: the k best by (value, lower id), NaN
 * and -inf out, +inf as FLT_MAX, in order. */
static void test_topk_row(void) {
    enum { N = 700 };
    float l[N], vals[TOPK_MAX];
    int32_t ids[TOPK_MAX];
    char taken[N];
    for (int round = 0; round < 64; round++) {
        tricky_row(l, N, round);
        const int n = round % 5 == 4 ? 40 : N, k = 1 + (round * 7) % TOPK_MAX;
        int got = topk_row(l, n, k, ids, vals);
        memset(taken, 0, sizeof taken);
        int want = 0;
        for (int j = 0; j < k; j++) { /* the best not yet taken, by brute force */
            int best = -1;
            for (int i = 0; i < n; i++) {
                if (taken[i] || isnan(l[i]) || l[i] == -INFINITY) continue;
                float v = l[i] == INFINITY ? FLT_MAX : l[i];
                float bv = best < 0 ? 0 : l[best] == INFINITY ? FLT_MAX : l[best];
                if (best < 0 || v > bv) best = i;
            }
            if (best < 0) {
                CHECKF(ids[j] == -1 && vals[j] == -INFINITY, "round %d: entry %d past the end", round, j);
                continue;
            }
            taken[best] = 1;
            want++;
            const float bv = l[best] == INFINITY ? FLT_MAX : l[best];
            CHECKF(ids[j] == best && vals[j] == bv, "round %d k %d: entry %d is %d (%g), want %d (%g)", round, k,
                   j, ids[j], (double)vals[j], best, (double)bv);
        }
        CHECKF(got == want, "round %d: %d found, want %d", round, got, want);
    }
}

/* sampler_sample_top on topk_row's list draws what sampler_sample draws on the
 * whole row, call after call (the same RNG steps), for greedy and top-k chains,
 * with top-p and min-p on; and sampler_top_need says when it cannot. */
static void test_sample_from_top_list(void) {
    enum { N = 3000 };
    static float l[N];
    float vals[TOPK_MAX];
    int32_t ids[TOPK_MAX];
    static const struct { float t; int k; float p, mp; } chains[] = {
        {0.0f, 40, 0.95f, 0.05f}, {0.8f, 40, 0.95f, 0.05f}, {1.0f, 64, 1.0f, 0.0f},
        {1.5f, 5, 0.5f, 0.0f},   {0.7f, 1, 1.0f, 0.0f},     {2.0f, 50, 0.9f, 0.2f},
    };
    for (size_t ci = 0; ci < sizeof chains / sizeof chains[0]; ci++) {
        sampler_params p = sampler_params_default();
        p.temperature = chains[ci].t, p.top_k = chains[ci].k, p.top_p = chains[ci].p, p.min_p = chains[ci].mp;
        p.seed = 1234 + ci;
        sampler *a = mk(&p), *b = mk(&p);
        CHECK(sampler_top_need(a) == (p.temperature <= 0 ? 1 : p.top_k));
        int differ = 0;
        for (int round = 0; round < 200; round++) {
            tricky_row(l, N, round);
            const int n = round % 7 == 3 ? 30 : N; /* (fewer valid entries than k, at times) */
            topk_row(l, n, TOPK_MAX, ids, vals);
            sample_result ra, rb;
            int ta = sampler_sample(a, l, n, &ra), tb = sampler_sample_top(b, ids, vals, TOPK_MAX, n, &rb);
            differ += ta != tb;
            if (ta != tb && differ < 4) fprintf(stderr, "  chain %zu round %d: row %d, top list %d\n", ci, round, ta, tb);
        }
        CHECKF(differ == 0, "chain %zu: %d of 200 draws differ", ci, differ);
        sampler_free(a), sampler_free(b);
    }
    /* what needs the whole row */
    sampler_params p = sampler_params_default();
    p.top_k = 0;
    sampler *s = mk(&p);
    CHECK(sampler_top_need(s) == 0);
    p = sampler_params_default();
    p.n_logprobs = 2;
    CHECK(sampler_set_params(s, &p, NULL) == 0 && sampler_top_need(s) == 0);
    p = sampler_params_default();
    p.repeat_penalty = 1.3f;
    CHECK(sampler_set_params(s, &p, NULL) == 0 && sampler_top_need(s) == 40); /* (nothing in its window yet) */
    CHECK(sampler_accept(s, 7) == 0 && sampler_top_need(s) == 0);
    /* a list shorter than the chain reads is refused, not half used */
    p = sampler_params_default();
    CHECK(sampler_set_params(s, &p, NULL) == 0);
    tricky_row(l, N, 0);
    topk_row(l, N, 8, ids, vals);
    CHECK(sampler_sample_top(s, ids, vals, 8, N, NULL) == LLC_ERR_RANGE);
    sampler_free(s);
}

int main(void) {
    RUN(test_params);
    RUN(test_greedy);
    RUN(test_rng_golden);
    RUN(test_seed_streams);
    RUN(test_distribution);
    RUN(test_top_k);
    RUN(test_top_p);
    RUN(test_min_p);
    RUN(test_penalties);
    RUN(test_penalties_many);
    RUN(test_rollback);
    RUN(test_logprobs);
    RUN(test_probs_helpers);
    RUN(test_large_vocab);
    RUN(test_topk_row);
    RUN(test_sample_from_top_list);
    return t_summary();
}
