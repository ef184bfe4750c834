/* bench_matmul.c — micro-benchmark of cpu_matmul at TinyLlama-1.1B shapes: for each
 * weight type, shape and batch size T it prints the time per call, the weight
 * bandwidth (GB/s, and % of a nominal memory bandwidth) and GFLOP/s, then the
 * tokens/s those times imply for the whole model's matmuls (22 layers of q, k, v, o,
 * gate, up, down, plus the 32000-row output).
 *
 *   build/tools/bench_matmul [-t threads] [-r rounds] [-T 1,64,256] [-y q8_0,q4_k,f16]
 *                            [-l scalar|avx2|avx512] [-b GB/s] [-m arena_MiB] [-C 0|1]
 *
 * Weights are random but valid (sane block scales) and cycle through an arena larger
 * than the last-level cache, so every call streams its weights from memory, as in a
 * real forward pass. Each measurement is the best of `rounds` rounds (the machine
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

static const shape g_shapes[] = {
    {"q,o", 2048, 2048, 2},  {"k,v", 2048, 256, 2},      {"gate,up", 2048, 5632, 2},
    {"down", 5632, 2048, 1}, {"output", 2048, 32000, 0},
};
#define N_SHAPES (sizeof g_shapes / sizeof g_shapes[0])
#define N_LAYERS 22

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
    const char *level = NULL;
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
        else if (!strcmp(a, "-C")) g_clock = atoi(v) ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC;
        else goto usage;
        i++;
    }
    if (level) {
        cpu_simd_level l = !strcmp(level, "scalar") ? CPU_SIMD_SCALAR
                           : !strcmp(level, "avx2") ? CPU_SIMD_AVX2 : CPU_SIMD_AVX512;
        cpu_matmul_set_level(l);
    }
    cpu_pool *pool;
    if (cpu_pool_create(threads, &pool)) return 1;
    printf("bench_matmul: %d threads, SIMD %s, best of %d rounds, %% of %.1f GB/s\n", threads,
           cpu_simd_name(), rounds, bw_ref);

    const size_t arena_bytes = arena_mib << 20;
    uint8_t *arena = aligned_alloc(64, arena_bytes);
    int64_t maxT = 1;
    for (int k = 0; k < n_ts; k++)
        if (atol(ts_s[k]) > maxT) maxT = atol(ts_s[k]);
    float *X = malloc(sizeof(float) * (size_t)(maxT * 5632));
    float *Y = malloc(sizeof(float) * (size_t)(maxT * 32000));
    if (!arena || !X || !Y) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (int64_t i = 0; i < maxT * 5632; i++) X[i] = (float)((int64_t)(rnd() % 2001) - 1000) * 1e-3f;

    printf("%-5s %-8s %5s %6s %4s %10s %8s %6s %9s\n", "type", "matrix", "n_in", "n_out", "T",
           "us/call", "GB/s", "%bw", "GFLOP/s");
    for (int ti = 0; ti < n_types; ti++) {
        const int type = qtype_from_name(types_s[ti]);
        if (type < 0) {
            fprintf(stderr, "unknown type %s\n", types_s[ti]);
            continue;
        }
        /* fill the arena once per type with rows of the widest n_in (5632); narrower
         * rows just reinterpret the bytes, which stay valid except for scale fields
         * (only the timing matters, and random scales are still finite values) */
        fill_weights((uint32_t)type, arena, arena_bytes, 5632);
        double out_t1 = 0;
        for (int k = 0; k < n_ts; k++) {
            const int64_t T = atol(ts_s[k]);
            /* the output matrix only at T = 1: a prompt batch needs the logits of its
             * last position only */
            const size_t n_shapes = T == 1 ? N_SHAPES : N_SHAPES - 1;
            size_t slot[N_SHAPES], n_slots[N_SHAPES], cur[N_SHAPES] = {0};
            int calls[N_SHAPES];
            double best[N_SHAPES];
            static cpu_packed_w packs[N_SHAPES][512];
            for (size_t si = 0; si < n_shapes; si++) {
                const shape *sh = &g_shapes[si];
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
                    const shape *sh = &g_shapes[si];
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
            double layer_s = 0;
            for (size_t si = 0; si < n_shapes; si++) {
                const shape *sh = &g_shapes[si];
                const size_t wbytes = qtype_row_bytes((uint32_t)type, sh->n_in) * (size_t)sh->n_out;
                const double flops = 2.0 * (double)sh->n_in * (double)sh->n_out * (double)T;
                const double gbs = (double)wbytes / best[si] / 1e9;
                printf("%-5s %-8s %5lld %6lld %4lld %10.1f %8.2f %5.0f%% %9.1f\n",
                       qtype_name((uint32_t)type), sh->name, (long long)sh->n_in,
                       (long long)sh->n_out, (long long)T, best[si] * 1e6, gbs, 100 * gbs / bw_ref,
                       flops / best[si] / 1e9);
                if (sh->per_layer) layer_s += sh->per_layer * best[si];
                else out_t1 = best[si];
            }
            /* per batch of T tokens: all layers, plus the output matrix for one row
             * (its T = 1 time, if T = 1 was measured) */
            const double batch_s = N_LAYERS * layer_s + out_t1;
            printf("  => %s T=%lld: %.1f tokens/s from matmuls (%.2f ms per batch: layers %.2f, "
                   "output %.2f)\n",
                   qtype_name((uint32_t)type), (long long)T, (double)T / batch_s, batch_s * 1e3,
                   N_LAYERS * layer_s * 1e3, out_t1 * 1e3);
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
                    "[-l scalar|avx2|avx512] [-b GB/s] [-m arena_MiB] [-C 0|1]\n", argv[0]);
    return 2;
}
