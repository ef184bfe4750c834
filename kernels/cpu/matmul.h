/* matmul.h — CPU matrix multiplication against GGUF weight matrices, the hot path
 * of inference: Y = X · Wᵀ for a batch of T activation rows.
 *
 * Quantized weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
 * IQ4_NL, IQ4_XS, MXFP4) are multiplied with integer dot products: the activations are
 * first quantized to int8 in blocks of 32 (one f32 scale per block), once per call.
 * Float weights (F32, F16, BF16) use f32 FMA.
 * At T == 1 each weight row is streamed once (GEMV, memory bound, prefetched); for
 * small T the same dot kernels reuse each 16-row block of weights from cache for
 * every activation row; above (T >= 3..8 depending on the type and level),
 * weights are repacked tile by tile into a cache-resident layout that every
 * activation row then passes over (blocked GEMM, compute bound). Several matrices
 * that read the same activations can go in one call (cpu_matmul_multi).
 *
 * The SIMD level is chosen at run time: AVX-512 (F/BW/VL/DQ + VNNI), AVX2 (+FMA,
 * F16C), or plain C. AMX is never used. The environment variable
 * LLC_SIMD=scalar|avx2|avx512 caps the level (for tests and comparisons). */
#ifndef LLC_CPU_MATMUL_H
#define LLC_CPU_MATMUL_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "kernels/cpu/pool.h"

/* Y[t*n_out + o] = sum_i W_o[i] * X[t*n_in + i], for t < T, o < n_out.
 * W: n_out rows of n_in elements of qtype `type`, row stride qtype_row_bytes(type,
 * n_in), as stored in GGUF (mmapped; any alignment). X: T rows of n_in floats.
 * Supported types: the float ones and the quantized ones above; others give
 * LLC_ERR_UNSUPPORTED. n_in must be a multiple of the type's block size
 * (LLC_ERR_RANGE otherwise). Every Y element is written; Y must not overlap W or X.
 * `pool` may be NULL (runs on the calling thread; otherwise its scratch buffer is
 * used, so only the pool's owner thread may call). Each output is computed by one
 * thread in a fixed order, so the result does not depend on the number of threads.
 * Returns 0 or negative. */
int cpu_matmul(cpu_pool *pool, uint32_t type, const void *W, int64_t n_in, int64_t n_out,
               const float *X, int64_t T, float *Y);

/* A quantized weight matrix packed once ahead into the AVX-512 GEMM's panel
 * layout, so calls with a few rows (batched decode, speculative checks) skip the
 * packing that otherwise dominates them. About the size of the weights. */
typedef struct cpu_packed_w {
    uint8_t *data; /* NULL: not packed (a level or type that packs nothing ahead) */
    size_t bytes;
    int level;     /* the cpu_simd_level whose layout data holds; read at that level only */
} cpu_packed_w;

/* Bytes cpu_matmul_prepack would allocate for W; 0 where it would not pack. */
size_t cpu_matmul_prepack_bytes(uint32_t type, int64_t n_in, int64_t n_out);
/* Packs W (as cpu_matmul takes it) on pool's threads. Leaves out->data NULL,
 * returning 0, where packing brings nothing; LLC_ERR_NOMEM when it does not fit. */
int cpu_matmul_prepack(cpu_pool *pool, uint32_t type, const void *W, int64_t n_in, int64_t n_out,
                       cpu_packed_w *out);
void cpu_packed_w_free(cpu_packed_w *p);
/* True when, at the SIMD level in use, cpu_matmul_packed reads only the packed
 * copy of a `type` matrix at every row count, W itself only if the level changes:
 * the caller may then let W's memory go (for a file mapping, its pages are read
 * back on demand). */
bool cpu_matmul_packed_suffices(uint32_t type);
/* cpu_matmul with W's packed panels (or NULL); the same results as without for
 * a given path, which now also serves small T. */
int cpu_matmul_packed(cpu_pool *pool, uint32_t type, const void *W, const cpu_packed_w *packed,
                      int64_t n_in, int64_t n_out, const float *X, int64_t T, float *Y);

/* One matrix of a cpu_matmul_multi call: W as cpu_matmul takes it, with its
 * packed panels (or NULL) as cpu_matmul_packed does. */
typedef struct cpu_matmul_w {
    uint32_t type;
    const void *W;
    const cpu_packed_w *packed;
    int64_t n_in, n_out;
} cpu_matmul_w;

#define CPU_MATMUL_MULTI_MAX 8

/* Y[i] = X · w[i]ᵀ for i < n (n <= CPU_MATMUL_MULTI_MAX, every n_in the same):
 * the same activations against several matrices (Q, K and V; gate and up) in one
 * call. X is quantized once per activation format the types need (not once per
 * matrix), and the chunks of all the matrices go to the pool in one dispatch.
 * Each Y[i] is bit for bit what cpu_matmul_packed(w[i]) would give. The checks
 * are cpu_matmul's, for every matrix before any work (LLC_ERR_RANGE also for
 * differing n_in or a bad n); the Y[i] must not overlap one another. */
int cpu_matmul_multi(cpu_pool *pool, const cpu_matmul_w *w, int n, const float *X, int64_t T,
                     float *const *Y);

/* Scalar reference: dequantizes each row with dequantize_row and takes the dot product
 * with exact X in double precision (for BF16 weights, X rounded to bf16, as every
 * level and ggml multiply them). Slow; used by the tests. */
int cpu_matmul_ref(uint32_t type, const void *W, int64_t n_in, int64_t n_out, const float *X,
                   int64_t T, float *Y);

/* SIMD levels, lowest first. Level 1 is AVX2 on x86-64 and NEON on aarch64 (where
 * LLC_SIMD=neon or avx2 selects it); aarch64 has no level 2. */
typedef enum cpu_simd_level {
    CPU_SIMD_SCALAR = 0,
    CPU_SIMD_AVX2 = 1,   /* AVX2 + FMA + F16C */
    CPU_SIMD_NEON = 1,   /* aarch64 Advanced SIMD */
    CPU_SIMD_AVX512 = 2, /* AVX-512 F/BW/VL/DQ + VNNI */
} cpu_simd_level;

/* Name of the level in use: "avx512-vnni", "avx2", "neon" or "scalar". */
const char *cpu_simd_name(void);
/* The level in use, and the highest one this CPU supports. */
cpu_simd_level cpu_matmul_level(void);
cpu_simd_level cpu_matmul_max_level(void);
/* Selects a level (clamped to cpu_matmul_max_level()); returns the level now in use.
 * Not thread-safe against concurrent cpu_matmul calls: for tests and benchmarks. */
cpu_simd_level cpu_matmul_set_level(cpu_simd_level level);

#endif
