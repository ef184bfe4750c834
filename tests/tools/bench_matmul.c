/* bench_matmul.c — micro-benchmark of cpu_matmul at a model's shapes (TinyLlama-1.1B
 * by default; -S llama3-8b for an 8B model's longer rows): for each weight type, shape
 * and batch size T it prints the time per call, the weight bandwidth (GB/s, and % of a
 * nominal memory bandwidth) and GFLOP/s, then the tokens/s those times imply for the
 * whole model's matmuls (every layer's q, k, v, o, gate, up, down, plus the output
 * matrix) and their GFLOP/s.
 *
 *   build/tools/bench_matmul [-t threads] [-r rounds] [-T 1,64,256] [-y q8_0,q4_k,f16]
 *                            [-l scalar|avx2|avx512] [-b GB/s] [-m arena_MiB] [-C 0|1]
 *                            [-S tinyllama|llama3-8b] [-F 0|1]
 *
 * -F 1 first measures the f32 FMA peak of the level on the same threads (independent
 * fmas in registers, nothing else) and prints each type's matmul GFLOP/s as a share
 * of it: the ceiling of the float types (F32, F16, BF16 without a bf16 dot product).
 *
 * Weights are random but valid (sane block scales) and cycle through an arena larger
 * than the last-level cache, so every call streams its weights from memory, as in a
 * real forward pass; a small arena (-m 12) keeps them in the cache instead, to
 * measure a kernel's own speed (the output matrix is then left out where it does
 * not fit). Each measurement is the best of `rounds` rounds (the machine
 * may be shared), a round being enough calls to last ~50 ms, the rounds of all shapes
 * interleaved. The output matrix is measured at T = 1 only. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/quant.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/pool.h"

/* -C 1: the process's CPU time instead of the wall clock, for a shared machine
 * (time spent descheduled is not counted; with -t 1 it is the kernel's own time) */
static clockid_t g_clock = CLOCK_MONOTONIC;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(g_clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t g_rng = 88172645463325252ull;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* Fills `bytes` of weights of `type` (whole rows of n_in) with random valid data. */
static void fill_weights(uint32_t type, uint8_t *w, size_t bytes, int64_t n_in) {
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        uint64_t r = rnd();
        memcpy(w + i, &r, 8);
    }
    const size_t bb = qtype_get(type)->block_bytes;
    const size_t nblk = bytes / bb;
    (void)n_in;
    switch (type) {
    case QT_F32:
        for (size_t i = 0; i < nblk; i++) {
            float v = (float)((int64_t)(rnd() % 2001) - 1000) * 1e-4f;
            memcpy(w + 4 * i, &v, 4);
        }
        break;
    case QT_F16:
    case QT_BF16:
        for (size_t i = 0; i < nblk; i++) {
            uint16_t h = type == QT_F16 ? (uint16_t)(0x2000 | (rnd() & 0x83ff))
                                        : (uint16_t)(0x3c00 | (rnd() & 0x807f));
            memcpy(w + 2 * i, &h, 2);
        }
        break;
    case QT_Q8_0:
    case QT_Q4_0:
        for (size_t i = 0; i < nblk; i++) {
            uint16_t d = (uint16_t)(0x2000 | (rnd() & 0x3ff));
            memcpy(w + i * bb, &d, 2);
        }
        break;
    case QT_Q4_K:
        for (size_t i = 0; i < nblk; i++) {
            uint16_t d[2] = {(uint16_t)(0x1c00 | (rnd() & 0x3ff)), (uint16_t)(0x1c00 | (rnd() & 0x3ff))};
            memcpy(w + i * bb, d, 4);
        }
        break;
    case QT_Q6_K:
        for (size_t i = 0; i < nblk; i++) {
            uint16_t d = (uint16_t)(0x1c00 | (rnd() & 0x3ff));
            memcpy(w + i * bb + 208, &d, 2);
        }
        break;
    default: { /* the other types: every fp16 field a small value */
        size_t off[2] = {0, 0}, n_off = 1;
        switch (type) {
        case QT_Q4_1: case QT_Q5_1: case QT_Q5_K: n_off = 2, off[1] = 2; break;
        case QT_Q2_K: off[0] = 80, off[1] = 82, n_off = 2; break;
        case QT_Q3_K: off[0] = 108; break;
        default: break; /* Q5_0, IQ4_NL, IQ4_XS: d first */
        }
        for (size_t i = 0; i < nblk; i++)
            for (size_t k = 0; k < n_off; k++) {
                uint16_t d = (uint16_t)(0x1c00 | (rnd() & 0x3ff));
                memcpy(w + i * bb + off[k], &d, 2);
            }
        break;
    }
    }
}

typedef struct shape {
    const char *name;
    int64_t n_in, n_out;
    int per_layer; /* how many of these per layer (0: the output matrix) */
} shape;

/* A model's matrices: the output matrix last (measured at T = 1 only) */
#define N_SHAPES 5
typedef struct model_shapes {
    const char *name;
    int n_layers;
    shape m[N_SHAPES];
} model_shapes;

static const model_shapes g_models[] = {
    {"tinyllama", 22,
     {{"q,o", 2048, 2048, 2}, {"k,v", 2048, 256, 2}, {"gate,up", 2048, 5632, 2}, {"down", 5632, 2048, 1},
      {"output", 2048, 32000, 0}}},
    {"llama3-8b", 32,
     {{"q,o", 4096, 4096, 2}, {"k,v", 4096, 1024, 2}, {"gate,up", 4096, 14336, 2}, {"down", 14336, 4096, 1},
      {"output", 4096, 128256, 0}}},
};
#define N_MODELS (sizeof g_models / sizeof g_models[0])

#if defined(__x86_64__)
#include <immintrin.h>

/* The f32 FMA peak of one share: 12 independent accumulators (more than the fma
 * latency × ports needs), so the loop runs at the fma ports' throughput. */
typedef struct fma_job {
    int wide; /* 512-bit vectors */
    long iters;
    float sink[64];
} fma_job;

/* 12 named accumulators (an array, not unrolled, would live on the stack) */
#define FMA_12(F, m, c)                                                                                   \
    a0 = F(a0, m, c), a1 = F(a1, m, c), a2 = F(a2, m, c), a3 = F(a3, m, c), a4 = F(a4, m, c), a5 = F(a5, m, c), \
    a6 = F(a6, m, c), a7 = F(a7, m, c), a8 = F(a8, m, c), a9 = F(a9, m, c), a10 = F(a10, m, c), a11 = F(a11, m, c)
#define FMA_LOOP(V, SET1, FMADD, ADD)                                                                     \
    V m = SET1(0.999999f), c = SET1(1e-7f), a0 = SET1(0), a1 = SET1(1), a2 = SET1(2), a3 = SET1(3),          \
      a4 = SET1(4), a5 = SET1(5), a6 = SET1(6), a7 = SET1(7), a8 = SET1(8), a9 = SET1(9), a10 = SET1(10),    \
      a11 = SET1(11);                                                                                      \
    for (long n = 0; n < iters; n++) FMA_12(FMADD, m, c);                                                  \
    a0 = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7)));                               \
    a0 = ADD(a0, ADD(ADD(a8, a9), ADD(a10, a11)))

__attribute__((target("avx2,fma"))) static float fma_loop_256(long iters) {
    FMA_LOOP(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps);
    return _mm256_cvtss_f32(a0);
}

__attribute__((target("avx512f"))) static float fma_loop_512(long iters) {
    FMA_LOOP(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps);
    return _mm512_reduce_add_ps(a0);
}

static void fma_share(void *ctx, int ith, int nth) {
    fma_job *j = ctx;
    (void)nth;
    j->sink[ith % 64] = j->wide ? fma_loop_512(j->iters) : fma_loop_256(j->iters);
}

/* GFLOP/s of all the pool's threads at once (the best of 8 runs, the first ones sizing
 * the loop to at least 50 ms), or 0 where the level has no fma */
static double fma_peak_gflops(cpu_pool *pool, cpu_simd_level level) {
    if (level == CPU_SIMD_SCALAR) return 0;
    fma_job j = {.wide = level == CPU_SIMD_AVX512, .iters = 1 << 16};
    const double lanes = j.wide ? 16 : 8;
    double best = 0;
    for (int r = 0; r < 8; r++) {
        const double t0 = now_s();
        cpu_pool_run(pool, fma_share, &j);
        const double dt = now_s() - t0;
        const double gf = (double)cpu_pool_size(pool) * (double)j.iters * 12 * lanes * 2 / dt / 1e9;
        if (gf > best) best = gf;
        if (dt < 0.05) j.iters *= 2; /* (the first runs size the loop) */
    }
    return best;
}
#else
static double fma_peak_gflops(cpu_pool *pool, cpu_simd_level level) {
    (void)pool, (void)level;
    return 0;
}
#endif

static int parse_list(const char *s, char out[][16], int max) {
    int n = 0;
    while (*s && n < max) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        if (len >= 16) len = 15;
        memcpy(out[n], s, len);
        out[n][len] = 0;
        n++;
        if (!e) break;
        s = e + 1;
    }
    return n;
}

int main(int argc, char **argv) {
    int threads = 2, rounds = 5;
    double bw_ref = 22.0;
    size_t arena_mib = 4096;
    int prepack = 0; /* -P 1: weights packed ahead (cpu_matmul_prepack), as the CPU backend does */
    char types_s[16][16], ts_s[16][16];
    int n_types = parse_list("q8_0,q4_k,f16", types_s, 16);
    int n_ts = parse_list("1,64,256", ts_s, 16);
    const char *level = NULL, *model = "tinyllama";
    int fma_peak = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) goto usage;
        if (!strcmp(a, "-t")) threads = atoi(v);
        else if (!strcmp(a, "-r")) rounds = atoi(v);
        else if (!strcmp(a, "-T")) n_ts = parse_list(v, ts_s, 16);
        else if (!strcmp(a, "-y")) n_types = parse_list(v, types_s, 16);
        else if (!strcmp(a, "-l")) level = v;
        else if (!strcmp(a, "-b")) bw_ref = atof(v);
        else if (!strcmp(a, "-m")) arena_mib = (size_t)atol(v);
        else if (!strcmp(a, "-P")) prepack = atoi(v);
        else if (!strcmp(a, "-S")) model = v;
        else if (!strcmp(a, "-F")) fma_peak = atoi(v);
        else if (!strcmp(a, "-C")) g_clock = atoi(v) ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC;
        else goto usage;
        i++;
    }
    if (level) {
        cpu_simd_level l = !strcmp(level, "scalar") ? CPU_SIMD_SCALAR
                           : !strcmp(level, "avx2") ? CPU_SIMD_AVX2 : CPU_SIMD_AVX512;
        cpu_matmul_set_level(l);
    }
    const model_shapes *ms = NULL;
    for (size_t i = 0; i < N_MODELS; i++)
        if (!strcmp(model, g_models[i].name)) ms = &g_models[i];
    if (!ms) {
        fprintf(stderr, "unknown shapes %s (tinyllama, llama3-8b)\n", model);
        goto usage;
    }
    const shape *const shapes = ms->m;
    int64_t max_in = 0, max_out = 0; /* (the output matrix's rows at T = 1 only) */
    for (int i = 0; i < N_SHAPES; i++) {
        if (ms->m[i].n_in > max_in) max_in = ms->m[i].n_in;
        if (ms->m[i].per_layer && ms->m[i].n_out > max_out) max_out = ms->m[i].n_out;
    }
    cpu_pool *pool;
    if (cpu_pool_create(threads, &pool)) return 1;
    printf("bench_matmul: %s shapes, %d threads, SIMD %s, best of %d rounds, %% of %.1f GB/s\n", ms->name,
           threads, cpu_simd_name(), rounds, bw_ref);
    const double peak = fma_peak ? fma_peak_gflops(pool, cpu_matmul_level()) : 0;
    if (fma_peak) printf("f32 FMA peak of %d threads at %s: %.1f GFLOP/s\n", threads, cpu_simd_name(), peak);

    const size_t arena_bytes = arena_mib << 20;
    uint8_t *arena = aligned_alloc(64, arena_bytes);
    int64_t maxT = 1;
    for (int k = 0; k < n_ts; k++)
        if (atol(ts_s[k]) > maxT) maxT = atol(ts_s[k]);
    float *X = malloc(sizeof(float) * (size_t)(maxT * max_in));
    const int64_t y_rows = maxT * max_out > ms->m[N_SHAPES - 1].n_out ? maxT * max_out : ms->m[N_SHAPES - 1].n_out;
    float *Y = malloc(sizeof(float) * (size_t)y_rows);
    if (!arena || !X || !Y) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (int64_t i = 0; i < maxT * max_in; i++) X[i] = (float)((int64_t)(rnd() % 2001) - 1000) * 1e-3f;

    printf("%-5s %-8s %5s %6s %4s %10s %8s %6s %9s\n", "type", "matrix", "n_in", "n_out", "T",
           "us/call", "GB/s", "%bw", "GFLOP/s");
    for (int ti = 0; ti < n_types; ti++) {
        const int type = qtype_from_name(types_s[ti]);
        if (type < 0) {
            fprintf(stderr, "unknown type %s\n", types_s[ti]);
            continue;
        }
        /* fill the arena once per type; each shape's rows just reinterpret the bytes,
         * which stay valid except for scale fields (only the timing matters, and
         * random scales are still finite values) */
        fill_weights((uint32_t)type, arena, arena_bytes, max_in);
        double out_t1 = 0;
        for (int k = 0; k < n_ts; k++) {
            const int64_t T = atol(ts_s[k]);
            /* the output matrix only at T = 1: a prompt batch needs the logits of its
             * last position only */
            size_t n_shapes = T == 1 ? N_SHAPES : N_SHAPES - 1;
            /* ... and only where it fits the arena: a small arena (-m) measures the
             * layers' matrices from the cache, the kernels' own speed */
            const size_t out_bytes = qtype_row_bytes((uint32_t)type, shapes[N_SHAPES - 1].n_in) *
                                     (size_t)shapes[N_SHAPES - 1].n_out;
            if (n_shapes == N_SHAPES && out_bytes > arena_bytes) {
                printf("(the output matrix, %.1f MB, is larger than the arena: left out)\n", (double)out_bytes / 1e6);
                n_shapes--;
            }
            size_t slot[N_SHAPES], n_slots[N_SHAPES], cur[N_SHAPES] = {0};
            int calls[N_SHAPES];
            double best[N_SHAPES];
            static cpu_packed_w packs[N_SHAPES][512];
            for (size_t si = 0; si < n_shapes; si++) {
                const shape *sh = &shapes[si];
                const size_t wbytes = qtype_row_bytes((uint32_t)type, sh->n_in) * (size_t)sh->n_out;
                slot[si] = (wbytes + 4095) & ~(size_t)4095;
                n_slots[si] = arena_bytes / slot[si];
                if (n_slots[si] < 1) {
                    fprintf(stderr, "arena too small\n");
                    return 1;
                }
                if (n_slots[si] > 512) n_slots[si] = 512;
                for (size_t j = 0; prepack && j < n_slots[si]; j++)
                    cpu_matmul_prepack(pool, (uint32_t)type, arena + j * slot[si], sh->n_in, sh->n_out, &packs[si][j]);
                /* calls per round: ~50 ms worth, at least 2 */
                double t0 = now_s();
                int rc = cpu_matmul(pool, (uint32_t)type, arena, sh->n_in, sh->n_out, X, T, Y);
                double one = now_s() - t0;
                if (rc) {
                    fprintf(stderr, "cpu_matmul failed: %d\n", rc);
                    return 1;
                }
                calls[si] = (int)(0.05 / (one > 1e-7 ? one : 1e-7));
                if (calls[si] < 2) calls[si] = 2;
                if (calls[si] > 20000) calls[si] = 20000;
                best[si] = 1e30;
            }
            /* rounds go over all shapes in turn, so a burst of load from elsewhere
             * spoils one round of each shape rather than every round of one */
            for (int r = 0; r < rounds; r++)
                for (size_t si = 0; si < n_shapes; si++) {
                    const shape *sh = &shapes[si];
                    const double t0 = now_s();
                    for (int c = 0; c < calls[si]; c++) {
                        cpu_matmul_packed(pool, (uint32_t)type, arena + cur[si] * slot[si],
                                          prepack ? &packs[si][cur[si]] : NULL, sh->n_in, sh->n_out, X, T, Y);
                        cur[si] = (cur[si] + 1) % n_slots[si];
                    }
                    const double dt = (now_s() - t0) / calls[si];
                    if (dt < best[si]) best[si] = dt;
                }
            for (size_t si = 0; prepack && si < n_shapes; si++)
                for (size_t j = 0; j < n_slots[si]; j++) cpu_packed_w_free(&packs[si][j]);
            double layer_s = 0, layer_flops = 0;
            for (size_t si = 0; si < n_shapes; si++) {
                const shape *sh = &shapes[si];
                const size_t wbytes = qtype_row_bytes((uint32_t)type, sh->n_in) * (size_t)sh->n_out;
                const double flops = 2.0 * (double)sh->n_in * (double)sh->n_out * (double)T;
                const double gbs = (double)wbytes / best[si] / 1e9;
                printf("%-5s %-8s %5lld %6lld %4lld %10.1f %8.2f %5.0f%% %9.1f\n",
                       qtype_name((uint32_t)type), sh->name, (long long)sh->n_in,
                       (long long)sh->n_out, (long long)T, best[si] * 1e6, gbs, 100 * gbs / bw_ref,
                       flops / best[si] / 1e9);
                if (sh->per_layer) layer_s += sh->per_layer * best[si], layer_flops += sh->per_layer * flops;
                else out_t1 = best[si];
            }
            /* per batch of T tokens: all layers, plus the output matrix for one row
             * (its T = 1 time, if T = 1 was measured) */
            const double batch_s = ms->n_layers * layer_s + out_t1, layer_gf = layer_flops / layer_s / 1e9;
            printf("  => %s T=%lld: %.1f tokens/s from matmuls (%.2f ms per batch: layers %.2f, "
                   "output %.2f); layers %.1f GFLOP/s",
                   qtype_name((uint32_t)type), (long long)T, (double)T / batch_s, batch_s * 1e3,
                   ms->n_layers * layer_s * 1e3, out_t1 * 1e3, layer_gf);
            if (peak > 0) printf(", %.0f%% of the FMA peak", 100 * layer_gf / peak);
            printf("\n");
            fflush(stdout);
        }
    }
    cpu_pool_free(pool);
    free(arena);
    free(X);
    free(Y);
    return 0;
usage:
    fprintf(stderr, "usage: %s [-P 0|1] [-t threads] [-r rounds] [-T 1,64,256] [-y q8_0,q4_k,f16] "
                    "[-l scalar|avx2|avx512] [-b GB/s] [-m arena_MiB] [-C 0|1] [-S tinyllama|llama3-8b] "
                    "[-F 0|1]\n", argv[0]);
    return 2;
}
