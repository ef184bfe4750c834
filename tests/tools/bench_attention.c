/* bench_attention.c — micro-benchmark of cpu_attention_run at the TinyLlama-1.1B
 * attention shape (32 heads, 4 KV heads of 64) over a paged f16 (or -y f32, q8_0)
 * cache: a prefill chunk of -T rows (default 512, the engine's step budget) ending
 * at depth -d (default 4096), and one decode row at that depth. Prints the best of
 * -r rounds in ms per call and the prompt tokens/s that one layer's attention alone
 * would allow over 22 layers.
 *
 *   build/tools/bench_attention [-t threads] [-r rounds] [-d depth] [-T rows]
 *                               [-y f32|f16|q8_0] [-l scalar|avx2|avx512] [-C 0|1]
 *
 * -C 1 times the process's CPU time instead of the wall clock (a shared machine). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/quant.h"

static clockid_t g_clock = CLOCK_MONOTONIC;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(g_clock, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double best_ms(cpu_pool *p, const bk_batch *b, const bk_attn *a, const float *q, const void *kc,
                      const void *vc, float *out, int max_kv, int rounds) {
    double best = 1e30;
    for (int r = 0; r < rounds; r++) {
        double t0 = now_s();
        cpu_attention_run(p, b, a, q, kc, vc, out, max_kv);
        double t = (now_s() - t0) * 1e3;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    int threads = 2, rounds = 5, depth = 4096, T = 512;
    uint32_t type = QT_F16;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *o = argv[i], *v = argv[i + 1];
        if (!strcmp(o, "-t")) threads = atoi(v);
        else if (!strcmp(o, "-r")) rounds = atoi(v);
        else if (!strcmp(o, "-d")) depth = atoi(v);
        else if (!strcmp(o, "-T")) T = atoi(v);
        else if (!strcmp(o, "-C")) g_clock = atoi(v) ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC;
        else if (!strcmp(o, "-y")) type = !strcmp(v, "f32") ? QT_F32 : !strcmp(v, "q8_0") ? QT_Q8_0 : QT_F16;
        else if (!strcmp(o, "-l"))
            cpu_matmul_set_level(!strcmp(v, "scalar") ? CPU_SIMD_SCALAR
                                 : !strcmp(v, "avx2") ? CPU_SIMD_AVX2
                                                      : CPU_SIMD_AVX512);
        else {
            fprintf(stderr, "unknown option %s\n", o);
            return 2;
        }
    }
    if (T > depth) T = depth;
    enum { NH = 32, NKV = 4, HD = 64, BS = 16 };
    const int kv_dim = NKV * HD, n_blocks = (depth + BS - 1) / BS;
    const size_t rb = qtype_row_bytes(type, kv_dim);
    uint8_t *kc = malloc((size_t)n_blocks * BS * rb), *vc = malloc((size_t)n_blocks * BS * rb);
    float *row = malloc(kv_dim * sizeof *row), *q = malloc((size_t)T * NH * HD * sizeof *q);
    float *out = malloc((size_t)T * NH * HD * sizeof *out);
    int32_t *table = malloc(n_blocks * sizeof *table), *pos = malloc(T * sizeof *pos);
    uint64_t rng = 1;
    for (int i = 0; i < n_blocks; i++) table[i] = (i * 7919) % n_blocks; /* scattered blocks */
    for (size_t r = 0; r < (size_t)n_blocks * BS; r++) {
        for (int i = 0; i < kv_dim; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            row[i] = (float)((rng >> 40) / (double)(1 << 24)) * 2 - 1;
        }
        cpu_kv_write_row(type, kc + r * rb, row, kv_dim);
        cpu_kv_write_row(type, vc + r * rb, row, kv_dim);
    }
    for (size_t i = 0; i < (size_t)T * NH * HD; i++) q[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1;
    for (int r = 0; r < T; r++) pos[r] = depth - T + r;
    cpu_pool *pool;
    cpu_pool_create(threads, &pool);
    bk_attn a = {.n_heads = NH, .n_kv_heads = NKV, .head_dim = HD, .block_size = BS, .scale = 0.125f, .kv_type = type};
    int32_t seq_start[2] = {0, T}, kv_len = depth;
    bk_batch b = {.n_tokens = T, .positions = pos, .n_seqs = 1, .seq_start = seq_start, .kv_len = &kv_len,
                  .block_table = table, .max_blocks = n_blocks};
    const double pre = best_ms(pool, &b, &a, q, kc, vc, out, depth, rounds);
    int32_t seq1[2] = {0, 1}, last = depth - 1;
    bk_batch d = b;
    d.n_tokens = 1, d.positions = &last, d.seq_start = seq1;
    const double dec = best_ms(pool, &d, &a, q, kc, vc, out, depth, rounds * 20);
    printf("%s depth %d threads %d: prefill %d rows %.2f ms (%.0f tok/s over 22 layers), decode %.3f ms (%.1f tok/s)\n",
           qtype_name(type), depth, threads, T, pre, T / (pre * 22e-3), dec, 1 / (dec * 22e-3));
    cpu_pool_free(pool);
    free(kc), free(vc), free(row), free(q), free(out), free(table), free(pos);
    return 0;
}
