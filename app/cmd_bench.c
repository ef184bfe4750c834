/* cmd_bench.c — `llmchat bench`: prompt processing and generation speed at batch 1,
 * side by side with the measured read bandwidth of the memory the weights are in
 * (the CPU's, or the GPU's on the CUDA backend), so generation is reported as a
 * fraction of its bandwidth limit (weight bytes per token). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "app/bench_engine.h"
#include "app/clock.h"
#include "app/commands.h"
#include "app/llm.h"
#include "engine/model/batch.h"
#include "kernels/cpu/pool.h"
#ifdef LLC_CUDA
#include "kernels/cuda/backend_cuda.h"
#endif

static int g_prompt = 128, g_gen = 32, g_reps = 3;
static int g_concurrency, g_shared_prefix, g_n = 1, g_kv_blocks, g_beam;
static bool g_json;

static const cli_opt g_opts[] = {
    {"prompt-len", 'p', CLI_INT, &g_prompt, "N", "prompt tokens (default 128)", 1, 1 << 16, NULL},
    {"gen-len", 'n', CLI_INT, &g_gen, "N", "tokens to generate (default 32)", 1, 1 << 16, NULL},
    {"concurrency", 'c', CLI_INT, &g_concurrency, "C", "C requests at once through the shared engine", 1, 4096, NULL},
    {"shared-prefix", 0, CLI_INT, &g_shared_prefix, "S", "with -c: the first S prompt tokens are common", 0, 1 << 16, NULL},
    {"samples", 0, CLI_INT, &g_n, "N", "with -c: N parallel samples per request", 1, 64, NULL},
    {"n", 0, CLI_INT, &g_n, "N", "same as --samples (with --beam: the N best beams)", 1, 64, NULL},
    {"beam", 0, CLI_INT, &g_beam, "W", "with -c: beam search of width W per request", 1, 16, NULL},
    {"kv-blocks", 0, CLI_INT, &g_kv_blocks, "N", "with -c: KV blocks of 16 tokens (default: enough)", 1, 1 << 24, NULL},
    {"reps", 'r', CLI_INT, &g_reps, "N", "repetitions; the best is reported (default 3)", 1, 100, NULL},
    {"json", 0, CLI_FLAG, &g_json, NULL, "print the results as JSON", 0, 0, NULL},
    {0},
};

const cli_cmd cli_bench = {
    .name = "bench",
    .usage = "[-m MODEL] [-p N] [-n N] [-r N] [-c C [--shared-prefix S] [--n N] [--beam W]] [--json]",
    .summary = "measure prompt and generation tokens/s against memory bandwidth",
    .opts = g_opts,
};

/* ---- memory read bandwidth, with the same thread count as the backend ---- */

typedef struct bw_job {
    const uint64_t *buf;
    size_t n;
    uint64_t sums[64];
} bw_job;

static void bw_read(void *arg, int ith, int nth) {
    bw_job *j = arg;
    long lo, hi;
    cpu_split((long)j->n, ith, nth, &lo, &hi);
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (long i = lo; i + 3 < hi; i += 4) {
        s0 += j->buf[i];
        s1 += j->buf[i + 1];
        s2 += j->buf[i + 2];
        s3 += j->buf[i + 3];
    }
    j->sums[ith % 64] = s0 + s1 + s2 + s3;
}

/* Best-of-5 GB/s reading a 512 MiB buffer. */
static double measure_bandwidth(int threads) {
    cpu_pool *pool;
    if (cpu_pool_create(threads, &pool)) return 0;
    size_t n = (512u << 20) / sizeof(uint64_t);
    uint64_t *buf = malloc(n * sizeof *buf);
    double best = 0;
    if (buf) {
        for (size_t i = 0; i < n; i++) buf[i] = i;
        bw_job j = {.buf = buf, .n = n};
        for (int r = 0; r < 5; r++) {
            double t0 = clock_now_s();
            cpu_pool_run(pool, bw_read, &j);
            double gbs = (double)(n * sizeof *buf) / (clock_now_s() - t0) / 1e9;
            if (gbs > best) best = gbs;
        }
    }
    free(buf);
    cpu_pool_free(pool);
    return best;
}

int cmd_bench(int argc, char **argv) {
    cli_common common = {0};
    cli_parse(&cli_bench, &common, argc, argv, NULL, 0);
    llc_err err;
    llm L;
    if (llm_open(&common, &L, &err)) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        return 1;
    }
    if (L.draft_error[0]) fprintf(stderr, "llmchat: %s; going on without speculation\n", L.draft_error);
    if ((L.draft || common.ngram) && g_concurrency == 0) g_concurrency = 1; /* speculation runs in the engine */
    if (g_concurrency > 0) {
        if (g_shared_prefix > g_prompt)
            cli_usage_error(&cli_bench, "--shared-prefix is longer than --prompt-len");
        if (g_beam > 0 && g_n > g_beam)
            cli_usage_error(&cli_bench, "--n cannot exceed --beam");
        bench_engine_opts o = {.concurrency = g_concurrency, .prompt_len = g_prompt,
                               .gen_len = g_gen, .shared_prefix = g_shared_prefix, .n = g_n, .beam = g_beam,
                               .kv_blocks = g_kv_blocks, .json = g_json, .common = &common};
        if (!o.kv_blocks && common.kv_mem > 0) { /* --kv-mem: the budget as the server plans it */
            int64_t per_block = (int64_t)model_kv_bytes_per_token(L.m, llm_kv_type(&common)) * 16;
            if (common.kv_mem < per_block)
                cli_usage_error(&cli_bench, "--kv-mem: %lld bytes hold no 16-token block (%lld needed)",
                                (long long)common.kv_mem, (long long)per_block);
            llm_kv_plan plan;
            if (llm_kv_plan_make(&L, &common, 16, &plan, &err)) {
                fprintf(stderr, "llmchat: %s\n", err.msg);
                llm_close(&L);
                return 1;
            }
            o.kv_blocks = plan.n_blocks;
            o.max_running = plan.max_running;
            o.max_snapshots = plan.max_snapshots;
        }
        int rc = bench_engine_run(&L, &o, &err);
        if (rc) fprintf(stderr, "llmchat: %s\n", err.msg);
        llm_close(&L);
        return rc ? 1 : 0;
    }
    const model_hparams *hp = model_hparams_of(L.m);
    const uint32_t kv_type = llm_kv_type(&common);
    int block = 16, total = g_prompt + g_gen, n_blocks = (total + block - 1) / block;
    model_kv *kv = NULL;
    batch *b = NULL;
    int32_t *blocks = malloc((size_t)n_blocks * sizeof *blocks);
    int32_t *toks = malloc((size_t)total * sizeof *toks);
    float *logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    int status = 1;
    if (!blocks || !toks || !logits || model_kv_create(L.m, n_blocks, block, kv_type, &kv, &err) ||
        batch_create(n_blocks, block, &b)) {
        fprintf(stderr, "llmchat: %s\n", kv ? "out of memory" : err.msg);
        goto out;
    }
    for (int i = 0; i < n_blocks; i++) blocks[i] = i;
    uint64_t rng = 42;
    for (int i = 0; i < total; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        toks[i] = (int32_t)((rng >> 33) % (uint64_t)hp->n_vocab);
    }
    double best_pp = 0, best_tg = 0;
    for (int r = 0; r < g_reps; r++) {
        batch_clear(b);
        batch_add(b, toks, g_prompt, 0, blocks, n_blocks, BATCH_OUT_LAST);
        double t0 = clock_now_s();
        if (model_forward(L.m, kv, batch_view(b), logits, &err)) goto fail;
        double pp = g_prompt / (clock_now_s() - t0);
        t0 = clock_now_s();
        for (int i = 0; i < g_gen; i++) {
            batch_clear(b);
            batch_add(b, &toks[g_prompt + i], 1, g_prompt + i, blocks, n_blocks, BATCH_OUT_LAST);
            if (model_forward(L.m, kv, batch_view(b), logits, &err)) goto fail;
        }
        double tg = g_gen / (clock_now_s() - t0);
        if (pp > best_pp) best_pp = pp;
        if (tg > best_tg) best_tg = tg;
    }
    struct rusage ru; /* before the bandwidth probe's buffer */
    getrusage(RUSAGE_SELF, &ru);
    double rss_mib = (double)ru.ru_maxrss / 1024.0;
    int threads = common.threads > 0 ? common.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    const bool on_gpu = !strcmp(L.be->name, "cuda");
    double bw = 0;
    unsigned long graphs_recorded = 0, graphs_replayed = 0;
#ifdef LLC_CUDA
    if (on_gpu) { /* 4 GiB (or half of what is free), read by the GPU */
        bw = backend_cuda_read_bandwidth(L.be, (size_t)4 << 30);
        backend_cuda_graph_stats(L.be, &graphs_recorded, &graphs_replayed);
    }
#endif
    if (!on_gpu) bw = measure_bandwidth(threads);
    double weight_gb = (double)model_weight_bytes(L.m) / 1e9;
    double limit = weight_gb > 0 ? bw / weight_gb : 0;
    if (g_json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "model", common.model);
        cJSON_AddStringToObject(o, "backend", L.be->name);
        cJSON_AddNumberToObject(o, "threads", threads);
        cJSON_AddStringToObject(o, "kv_type", model_kv_type_name(kv_type));
        cJSON_AddNumberToObject(o, "kv_bytes_per_token", (double)model_kv_bytes_per_token(L.m, kv_type));
        cJSON_AddNumberToObject(o, "weight_bytes", (double)model_weight_bytes(L.m));
        cJSON_AddNumberToObject(o, "prompt_tokens", g_prompt);
        cJSON_AddNumberToObject(o, "prompt_tok_s", best_pp);
        cJSON_AddNumberToObject(o, "gen_tokens", g_gen);
        cJSON_AddNumberToObject(o, "gen_tok_s", best_tg);
        cJSON_AddNumberToObject(o, "read_bandwidth_gb_s", bw);
        cJSON_AddStringToObject(o, "bandwidth_of", on_gpu ? "gpu" : "cpu");
        if (on_gpu) {
            cJSON_AddNumberToObject(o, "graphs_recorded", (double)graphs_recorded);
            cJSON_AddNumberToObject(o, "graphs_replayed", (double)graphs_replayed);
        }
        cJSON_AddNumberToObject(o, "gen_bandwidth_limit_tok_s", limit);
        cJSON_AddNumberToObject(o, "gen_fraction_of_limit", limit > 0 ? best_tg / limit : 0);
        cJSON_AddNumberToObject(o, "peak_rss_mib", rss_mib);
        char *s = cJSON_PrintUnformatted(o);
        printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
    } else {
        printf("model        %s (%s, %d layers, dim %d, %.1f MiB of weights)\n", common.model,
               hp->arch_name, hp->n_layers, hp->dim, weight_gb * 1e9 / (1024.0 * 1024.0));
        printf("backend      %s, %d threads\n", L.be->name, threads);
        printf("KV cache     %s, %zu bytes per token\n", model_kv_type_name(kv_type),
               model_kv_bytes_per_token(L.m, kv_type));
        printf("%-24s %12s\n", "test", "tokens/s");
        printf("%-24s %12.2f\n", "prompt (pp)", best_pp);
        printf("%-24s %12.2f\n", "generation (tg)", best_tg);
        printf("%s read bandwidth %.1f GB/s -> generation limit %.2f tokens/s; reached %.0f%%\n",
               on_gpu ? "GPU memory" : "memory", bw, limit, limit > 0 ? 100.0 * best_tg / limit : 0);
        if (on_gpu) printf("CUDA graphs  %lu steps recorded, %lu replayed\n", graphs_recorded, graphs_replayed);
        printf("peak RSS     %.1f MiB\n", rss_mib);
    }
    status = 0;
    goto out;
fail:
    fprintf(stderr, "llmchat: %s\n", err.msg);
out:
    batch_free(b);
    model_kv_free(kv);
    free(blocks);
    free(toks);
    free(logits);
    llm_close(&L);
    return status;
}
