/* bench_engine.c — `llmchat bench --concurrency C`: C requests through the shared
 * engine at once; aggregate generation tokens/s, TTFT and TPOT percentiles, and
 * how much of the prompts the prefix cache saved. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "app/bench_engine.h"
#include "app/clock.h"
#include "engine/sched/engine.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *sorted, int n, double p) {
    if (n == 0) return 0;
    int i = (int)(p / 100.0 * (n - 1) + 0.5);
    return sorted[i];
}

int bench_engine_run(llm *L, const bench_engine_opts *o, llc_err *err) {
    const model_hparams *hp = model_hparams_of(L->m);
    int per_seq = o->prompt_len + o->gen_len;
    int n_seqs = o->concurrency * (o->n > 0 ? o->n : 1);
    int live_per_request = o->beam > (o->n > 0 ? o->n : 1) ? o->beam : (o->n > 0 ? o->n : 1);
    engine_params p = {.block_size = 16, .max_step_tokens = o->step_tokens > 0 ? o->step_tokens : 512};
    if (o->common) {
        p.kv_type = llm_kv_type(o->common);
        p.draft = L->draft;
        p.ngram = o->common->ngram && !L->draft;
        p.draft_max = o->common->draft_max;
        p.draft_min = o->common->draft_min;
        p.draft_p_min = o->common->draft_p_min;
    }
    p.max_running = o->max_running;
    p.max_snapshots = o->max_snapshots;
    p.n_blocks = o->kv_blocks > 0 ? o->kv_blocks
                                   : o->concurrency * live_per_request * ((per_seq + 15) / 16 + 1) + 8;
    engine *e;
    int rc = engine_create(L->m, L->tok, &p, &e, err);
    if (rc) return rc;
    engine_client *c;
    if (engine_client_create(e, &c)) {
        engine_destroy(e);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    int32_t *prompts = malloc((size_t)o->concurrency * o->prompt_len * sizeof *prompts);
    char *seen = NULL; /* [request][sample]: had its first token */
    double *ttft = calloc((size_t)n_seqs, sizeof *ttft), *tpot = calloc((size_t)n_seqs, sizeof *tpot);
    if (!prompts || !ttft || !tpot) {
        rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
        goto out;
    }
    uint64_t rng = 7;
    for (int i = 0; i < o->concurrency; i++)
        for (int j = 0; j < o->prompt_len; j++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int32_t tok = (int32_t)(3 + (rng >> 33) % (uint64_t)(hp->n_vocab - 3));
            /* the shared prefix is the first request's */
            prompts[(size_t)i * o->prompt_len + j] = j == 0 ? 1 : j < o->shared_prefix && i > 0 ? prompts[j] : tok;
        }
    { /* warm-up: the first step pages the mmapped weights in; keep that out of the figures */
        int32_t bos = 1;
        gen_request w = {.prompt = &bos, .n_prompt = 1, .n = 1, .max_tokens = 1};
        w.sampling = sampler_params_default();
        if (engine_submit(e, c, &w, err) < 0) {
            rc = LLC_ERR_RANGE;
            goto out;
        }
        for (engine_event *ev; (ev = engine_client_wait(c, 600000));) {
            bool end = ev->kind != EV_TOKEN;
            engine_event_free(ev);
            if (end) break;
        }
    }
    engine_metrics m0; /* counters so far: the warm-up's, subtracted below */
    for (int i = 0; i < 1000; i++) {
        engine_get_metrics(e, &m0);
        if (m0.steps > 0 && m0.running == 0 && m0.waiting == 0) break; /* the warm-up is counted */
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    double t0 = clock_now_s();
    for (int i = 0; i < o->concurrency; i++) {
        gen_request r = {.prompt = prompts + (size_t)i * o->prompt_len, .n_prompt = o->prompt_len,
                         .n = o->n > 0 ? o->n : 1, .max_tokens = o->gen_len, .beam_width = o->beam};
        r.sampling = sampler_params_default();
        r.sampling.temperature = o->n > 1 ? 1.0f : 0.0f;
        if (engine_submit(e, c, &r, err) < 0) {
            rc = LLC_ERR_RANGE;
            goto out;
        }
    }
    int done = 0, n_tt = 0, started = 0;
    long generated = 0, gen_at_decode = 0;
    double t_decode = 0; /* when every sequence had its first token: decode only after */
    seen = calloc((size_t)o->concurrency * 64, 1);
    if (!seen) {
        rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
        goto out;
    }
    while (done < n_seqs) {
        engine_event *ev = engine_client_wait(c, 600000);
        if (!ev) {
            rc = llc_fail(err, LLC_ERR_IO, "the engine stopped answering");
            goto out;
        }
        if (ev->kind == EV_TOKEN) {
            generated++;
            size_t k = (size_t)(ev->request_id - 1) % (size_t)o->concurrency * 64 + (size_t)ev->seq_index;
            if (!seen[k] && (seen[k] = 1) && ++started == n_seqs) {
                t_decode = clock_now_s();
                gen_at_decode = generated;
            }
        }
        if (ev->kind == EV_DONE) {
            ttft[n_tt] = ev->ttft_ms;
            tpot[n_tt++] = ev->tpot_ms;
            done++;
        }
        if (ev->kind == EV_ERROR) {
            rc = llc_fail(err, LLC_ERR_IO, "%s", ev->message);
            engine_event_free(ev);
            goto out;
        }
        engine_event_free(ev);
    }
    double wall = clock_now_s() - t0;
    engine_metrics m;
    for (int i = 0; i < 1000; i++) { /* the last step's counters are published after its events */
        engine_get_metrics(e, &m);
        if (m.running == 0 && m.waiting == 0) break;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    qsort(ttft, (size_t)n_tt, sizeof *ttft, cmp_double);
    qsort(tpot, (size_t)n_tt, sizeof *tpot, cmp_double);
    double gen_tps = generated / wall, t_end = t0 + wall;
    /* beam results arrive whole at the end: no decode phase to time */
    double decode_tps = !o->beam && t_decode > 0 && t_end > t_decode
                            ? (generated - gen_at_decode) / (t_end - t_decode) : 0;
    m.prompt_tokens -= m0.prompt_tokens;
    m.cached_tokens -= m0.cached_tokens;
    m.steps -= m0.steps;
    m.preemptions -= m0.preemptions;
    m.spec_drafted -= m0.spec_drafted;
    m.spec_accepted -= m0.spec_accepted;
    m.spec_verifies -= m0.spec_verifies;
    m.draft_ms -= m0.draft_ms;
    m.step_ms -= m0.step_ms;
    bool spec = p.draft || p.ngram;
    double accept = m.spec_drafted ? (double)m.spec_accepted / (double)m.spec_drafted : 0;
    double per_verify = m.spec_verifies ? (double)(m.spec_accepted + m.spec_verifies) / (double)m.spec_verifies : 0;
    double draft_share = m.step_ms > 0 ? m.draft_ms / m.step_ms : 0;
    int64_t computed_prompt = m.prompt_tokens - m.cached_tokens;
    if (o->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "concurrency", o->concurrency);
        cJSON_AddNumberToObject(j, "n", o->n > 0 ? o->n : 1);
        cJSON_AddNumberToObject(j, "beam", o->beam);
        cJSON_AddNumberToObject(j, "prompt_len", o->prompt_len);
        cJSON_AddNumberToObject(j, "gen_len", o->gen_len);
        cJSON_AddNumberToObject(j, "shared_prefix", o->shared_prefix);
        cJSON_AddStringToObject(j, "kv_type", model_kv_type_name(p.kv_type));
        cJSON_AddNumberToObject(j, "kv_bytes_per_token", (double)model_kv_bytes_per_token(L->m, p.kv_type));
        cJSON_AddNumberToObject(j, "kv_blocks", p.n_blocks);
        cJSON_AddNumberToObject(j, "max_running", p.max_running > 0 ? p.max_running : LLM_MAX_RUNNING);
        cJSON_AddNumberToObject(j, "gen_tokens", (double)generated);
        cJSON_AddNumberToObject(j, "wall_s", wall);
        cJSON_AddNumberToObject(j, "gen_tokens_per_s", gen_tps);
        cJSON_AddNumberToObject(j, "decode_tokens_per_s", decode_tps);
        cJSON_AddNumberToObject(j, "ttft_ms_p50", pct(ttft, n_tt, 50));
        cJSON_AddNumberToObject(j, "ttft_ms_p90", pct(ttft, n_tt, 90));
        cJSON_AddNumberToObject(j, "ttft_ms_p99", pct(ttft, n_tt, 99));
        cJSON_AddNumberToObject(j, "tpot_ms_p50", pct(tpot, n_tt, 50));
        cJSON_AddNumberToObject(j, "tpot_ms_p90", pct(tpot, n_tt, 90));
        cJSON_AddNumberToObject(j, "tpot_ms_p99", pct(tpot, n_tt, 99));
        cJSON_AddNumberToObject(j, "prompt_tokens_computed", (double)computed_prompt);
        cJSON_AddNumberToObject(j, "prompt_tokens_cached", (double)m.cached_tokens);
        cJSON_AddNumberToObject(j, "peak_kv_blocks", m.peak_kv_used);
        cJSON_AddNumberToObject(j, "preemptions", (double)m.preemptions);
        cJSON_AddNumberToObject(j, "steps", (double)m.steps);
        if (spec) {
            cJSON_AddNumberToObject(j, "acceptance_rate", accept);
            cJSON_AddNumberToObject(j, "tokens_per_verify", per_verify);
            cJSON_AddNumberToObject(j, "draft_time_share", draft_share);
        }
        char *s = cJSON_PrintUnformatted(j);
        printf("%s\n", s);
        free(s);
        cJSON_Delete(j);
    } else {
        printf("concurrency %d x n %d%s, prompt %d (shared %d), %d generated each\n", o->concurrency,
               o->n > 0 ? o->n : 1, o->beam ? " (beam search)" : "", o->prompt_len,
               o->shared_prefix, o->gen_len);
        if (o->beam) printf("  beam width      %d\n", o->beam);
        printf("  KV cache        %s, %zu bytes per token, %d blocks of 16\n", model_kv_type_name(p.kv_type),
               model_kv_bytes_per_token(L->m, p.kv_type), p.n_blocks);
        printf("  generation      %10.2f tokens/s aggregate (%ld tokens in %.2f s)\n", gen_tps,
               generated, wall);
        if (!o->beam) printf("  decode only     %10.2f tokens/s once every prompt is in\n", decode_tps);
        printf("  TTFT ms         p50 %.1f  p90 %.1f  p99 %.1f\n", pct(ttft, n_tt, 50),
               pct(ttft, n_tt, 90), pct(ttft, n_tt, 99));
        printf("  TPOT ms         p50 %.1f  p90 %.1f  p99 %.1f\n", pct(tpot, n_tt, 50),
               pct(tpot, n_tt, 90), pct(tpot, n_tt, 99));
        printf("  prompt tokens   %lld computed, %lld from the prefix cache\n",
               (long long)computed_prompt, (long long)m.cached_tokens);
        printf("  peak KV blocks  %d of %d; %lld preemptions, %lld steps\n", m.peak_kv_used,
               p.n_blocks, (long long)m.preemptions, (long long)m.steps);
        if (spec)
            printf("  speculation     %.1f%% of %lld drafted tokens accepted, %.2f tokens per verify, "
                   "%.0f%% of the time drafting\n",
                   100 * accept, (long long)m.spec_drafted, per_verify, 100 * draft_share);
    }
out:
    free(seen);
    free(prompts);
    free(ttft);
    free(tpot);
    engine_client_free(c);
    engine_destroy(e);
    return rc;
}
