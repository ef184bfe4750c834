/* matmul.c — cpu_matmul's dispatcher: argument checks, the run-time choice of SIMD
 * level (cpuid, capped by LLC_SIMD), activation quantization into pool scratch, and
 * the split of the work over the pool's threads; plus the scalar reference
 * cpu_matmul_ref. The kernels themselves live in matmul_<level>*.c. */
#include "kernels/cpu/matmul.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernels/common.h"
#include "kernels/cpu/matmul_internal.h"

/* ---- SIMD level ------------------------------------------------------------------ */

static cpu_simd_level g_max_level, g_level;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static cpu_simd_level detect_level(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    /* F16C: cpuid leaf 1, ecx bit 29 (both x86 levels convert halves with it) */
    unsigned a, b, c, d;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
    const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && (c >> 29 & 1);
    /* (__builtin_cpu_supports also checks that the OS saves the AVX / AVX-512 state) */
    if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni"))
        return CPU_SIMD_AVX512;
    if (avx2) return CPU_SIMD_AVX2;
#elif defined(__aarch64__)
    return CPU_SIMD_NEON; /* Advanced SIMD is part of every AArch64 CPU */
#endif
    return CPU_SIMD_SCALAR;
}

static void level_init(void) {
    g_max_level = detect_level();
    g_level = g_max_level;
    const char *env = getenv("LLC_SIMD");
    if (env && *env) {
        cpu_simd_level want = g_max_level;
        if (!strcasecmp(env, "scalar")) want = CPU_SIMD_SCALAR;
        else if (!strcasecmp(env, "avx2") || !strcasecmp(env, "neon")) want = CPU_SIMD_AVX2;
        else if (!strncasecmp(env, "avx512", 6)) want = CPU_SIMD_AVX512;
        if (want < g_level) g_level = want;
    }
}

cpu_simd_level cpu_matmul_max_level(void) {
    pthread_once(&g_once, level_init);
    return g_max_level;
}

cpu_simd_level cpu_matmul_level(void) {
    pthread_once(&g_once, level_init);
    return g_level;
}

cpu_simd_level cpu_matmul_set_level(cpu_simd_level level) {
    pthread_once(&g_once, level_init);
    if (level < CPU_SIMD_SCALAR) level = CPU_SIMD_SCALAR;
    g_level = level > g_max_level ? g_max_level : level;
    return g_level;
}

static const mm_impl *impl_of(cpu_simd_level level) {
    switch (level) {
#if defined(__x86_64__)
    case CPU_SIMD_AVX512: return &mm_impl_avx512;
    case CPU_SIMD_AVX2: return &mm_impl_avx2;
#elif defined(__aarch64__)
    case CPU_SIMD_NEON: return &mm_impl_neon;
#endif
    default: return &mm_impl_scalar;
    }
}

static const mm_impl *current_impl(void) { return impl_of(cpu_matmul_level()); }

const char *cpu_simd_name(void) { return current_impl()->name; }

/* ---- work split ---------------------------------------------------------------------
 * The output rows are cut into chunks that threads take from a shared counter, so a
 * busy core slows the call down but never leaves the other idle. Every output is
 * computed by one thread, with arithmetic that depends on the shapes alone (not on
 * the chunking), so results do not depend on the thread count. */

typedef struct mm_job {
    const mm_impl *impl;
    mm_args a;
    int64_t chunk;        /* output rows per work unit */
    int64_t n_units;
    atomic_long next;     /* next unit to take */
    int use_gemm;
    uint8_t *scratch;     /* gemm: per-thread scratch, scratch_per apart */
    size_t scratch_per;
    uint8_t *xq_own;      /* T == 1, quantized types: per-thread xq rows, xq_stride apart */
} mm_job;

static void mm_work(void *ctx, int ith, int nth) {
    (void)nth;
    mm_job *j = ctx;
    void *scratch = j->scratch ? j->scratch + (size_t)ith * j->scratch_per : NULL;
    long u = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
    const mm_args *a = &j->a;
    mm_args own;
    if (j->xq_own) {
        /* single-row call: every thread quantizes the activations itself (~1 µs)
         * instead of waiting for one thread to do it, its first weights already on
         * their way */
        if (u < j->n_units) {
            const uint8_t *w = a->W + (size_t)(u * j->chunk) * a->w_stride;
            for (int l = 0; l < 4096; l += 64) __builtin_prefetch(w + l);
        }
        own = *a;
        own.xq = j->xq_own + (size_t)ith * a->xq_stride;
        j->impl->quantize_x(a->type, a->X, a->n_in, (uint8_t *)own.xq);
        a = &own;
    }
    /* the GEMM claims its next unit one ahead, so it can prefetch that unit's first
     * weights while finishing the current one */
    while (u < j->n_units) {
        const long un = j->use_gemm ? atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed) : 0;
        const int64_t o0 = u * j->chunk;
        const int64_t o1 = o0 + j->chunk < a->n_out ? o0 + j->chunk : a->n_out;
        if (j->use_gemm) {
            const int64_t n0 = un < j->n_units ? un * j->chunk : 0;
            const int64_t n1 = un < j->n_units ? (n0 + j->chunk < a->n_out ? n0 + j->chunk : a->n_out) : 0;
            j->impl->gemm(a, o0, o1, n0, n1, scratch);
            u = un;
        } else {
            j->impl->dot_rows(a, o0, o1, 0, a->T);
            u = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        }
    }
}

/* Activation preparation: quantize rows (quantized types) and, for the GEMM, pack
 * them group by group; a group's rows are quantized by the thread that packs it. */
typedef struct mm_prep {
    const mm_impl *impl;
    mm_args *a;
    uint8_t *xp;       /* GEMM: packed activations, else NULL */
    int64_t n_units;   /* groups (GEMM) or rows */
    int quantized;     /* the rows are quantized already: only pack */
    atomic_long next;
} mm_prep;

static void mm_prep_work(void *ctx, int ith, int nth) {
    (void)ith;
    (void)nth;
    mm_prep *q = ctx;
    const mm_args *a = q->a;
    for (;;) {
        long u = atomic_fetch_add_explicit(&q->next, 1, memory_order_relaxed);
        if (u >= q->n_units) break;
        int64_t t0 = u, t1 = u + 1;
        if (q->xp) q->impl->gemm_group(a->type, a->T, u, &t0, &t1);
        if (a->xq && !q->quantized)
            for (int64_t t = t0; t < t1; t++)
                q->impl->quantize_x(a->type, a->X + t * a->n_in, a->n_in,
                                    (uint8_t *)a->xq + (size_t)t * a->xq_stride);
        if (q->xp) q->impl->gemm_pack_x(a, u, q->xp);
    }
}

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* ---- weights packed ahead ------------------------------------------------------------ */

typedef struct prepack_job {
    const mm_impl *impl;
    mm_args a;
    uint8_t *wp;
    int64_t n_panels;
    atomic_long next;
} prepack_job;

static void prepack_work(void *ctx, int ith, int nth) {
    (void)ith, (void)nth;
    prepack_job *j = ctx;
    for (;;) {
        long p = atomic_fetch_add_explicit(&j->next, 16, memory_order_relaxed);
        if (p >= j->n_panels) break;
        j->impl->gemm_prepack(&j->a, p, p + 16 < j->n_panels ? p + 16 : j->n_panels, j->wp);
    }
}

/* The level whose GEMM reads packed panels, if this CPU has it. */
static const mm_impl *prepack_impl(void) {
    const mm_impl *impl = cpu_matmul_max_level() == CPU_SIMD_AVX512 ? impl_of(CPU_SIMD_AVX512) : NULL;
    return impl && impl->gemm_prepack ? impl : NULL;
}

size_t cpu_matmul_prepack_bytes(uint32_t type, int64_t n_in, int64_t n_out) {
    const mm_impl *impl = prepack_impl();
    const qtype_info *ti = qtype_get(type);
    if (!impl || !ti || !mm_type_has_gemmq(type) || n_in <= 0 || n_out <= 0 || n_in % ti->block_elems)
        return 0; /* nothing to gain: plain calls */
    return impl->gemm_prepack_bytes(type, n_in, n_out);
}

bool cpu_matmul_packed_suffices(uint32_t type) {
    const mm_impl *impl = prepack_impl();
    return impl && impl->gemm_rows_prepacked && impl->gemm_rows_prepacked(type, 1) > 0;
}

int cpu_matmul_prepack(cpu_pool *pool, uint32_t type, const void *W, int64_t n_in, int64_t n_out,
                       cpu_packed_w *out) {
    memset(out, 0, sizeof *out);
    size_t bytes = cpu_matmul_prepack_bytes(type, n_in, n_out);
    if (!bytes) return 0;
    const mm_impl *impl = prepack_impl();
    uint8_t *wp = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!wp) return LLC_ERR_NOMEM;
    prepack_job j = {.impl = impl, .wp = wp, .n_panels = (n_out + 15) / 16};
    j.a = (mm_args){.type = type, .W = W, .w_stride = qtype_row_bytes(type, n_in), .n_in = n_in, .n_out = n_out};
    atomic_init(&j.next, 0);
    if (pool && cpu_pool_size(pool) > 1) cpu_pool_run(pool, prepack_work, &j);
    else prepack_work(&j, 0, 1);
    out->data = wp;
    out->bytes = bytes;
    return 0;
}

void cpu_packed_w_free(cpu_packed_w *p) {
    free(p->data);
    memset(p, 0, sizeof *p);
}

int cpu_matmul(cpu_pool *pool, uint32_t type, const void *W, int64_t n_in, int64_t n_out,
               const float *X, int64_t T, float *Y) {
    return cpu_matmul_packed(pool, type, W, NULL, n_in, n_out, X, T, Y);
}

int cpu_matmul_packed(cpu_pool *pool, uint32_t type, const void *W, const cpu_packed_w *packed,
                      int64_t n_in, int64_t n_out, const float *X, int64_t T, float *Y) {
    const qtype_info *ti = qtype_get(type);
    if (!ti || !ti->supported ||
        !(type == QT_F32 || type == QT_F16 || type == QT_BF16 || mm_type_is_quant(type)))
        return LLC_ERR_UNSUPPORTED;
    if (n_in <= 0 || n_out < 0 || T < 0 || n_in % ti->block_elems) return LLC_ERR_RANGE;
    if (n_out == 0 || T == 0) return 0;
    LLC_ASSERT(W && X && Y);

    const mm_impl *impl = current_impl();
    mm_job job;
    memset(&job, 0, sizeof job);
    job.impl = impl;
    job.a = (mm_args){
        .type = type, .W = W, .w_stride = qtype_row_bytes(type, n_in),
        .n_in = n_in, .n_out = n_out, .T = T, .X = X, .Y = Y,
    };
    const int nth = pool ? cpu_pool_size(pool) : 1;

    /* panels packed ahead serve the AVX-512 GEMM only (the level may have been lowered) */
    const uint8_t *wp = packed && packed->data && impl->gemm_rows_prepacked ? packed->data : NULL;
    const int gemm_rows = wp ? impl->gemm_rows_prepacked(type, T)
                             : T > 1 && impl->gemm ? impl->gemm_rows(type, T) : 0;
    job.use_gemm = gemm_rows > 0;
    if (job.use_gemm) job.a.wp = wp;
    if (job.use_gemm) {
        /* chunks of up to 128 rows, at least ~4 per thread when there are enough rows */
        int64_t c = round_up((n_out + 4 * nth - 1) / (4 * nth), gemm_rows);
        /* ... except when the panels are packed ahead and all rows fit one group: the
         * weights are then read once, in order, and long runs keep each thread's
         * stream going as in the GEMV (measured, 2048×5632 at T = 4: 495 → 480 µs) */
        const int one_pass = wp && impl->gemm_groups(type, T) == 1;
        if (c > 128 && !one_pass) c = round_up(128, gemm_rows);
        job.chunk = c;
    } else {
        /* about two long runs of rows per thread: each thread then streams a few
         * long stretches of memory (measured: 16-row chunks handed out in turn reach
         * ~70% of the bandwidth that long runs do), and a slowed thread still leaves
         * the other one work to take */
        job.chunk = round_up((n_out + 2 * nth - 1) / (2 * nth), 16);
    }
    job.n_units = (n_out + job.chunk - 1) / job.chunk;
    atomic_init(&job.next, 0);

    /* scratch: [xq rows][packed activations][per-thread gemm scratch] */
    const int quant = mm_type_is_quant(type);
    size_t xq_bytes = 0, xp_bytes = 0;
    if (quant) {
        job.a.xq_stride = mm_xq_row_bytes(n_in);
        xq_bytes = job.a.xq_stride * (size_t)T;
    }
    if (job.use_gemm) {
        xp_bytes = (impl->gemm_xp_bytes(type, n_in, T) + 63) & ~(size_t)63;
        /* (packed-ahead quantized weights need no panel buffers) */
        if (!job.a.wp) job.scratch_per = (impl->gemm_scratch(type, n_in, job.chunk) + 63) & ~(size_t)63;
    }
    const int own_xq = quant && !job.use_gemm && T == 1 && pool && nth > 1 && job.n_units > 1;
    if (own_xq) xq_bytes = job.a.xq_stride * (size_t)nth;
    size_t total = xq_bytes + xp_bytes + job.scratch_per * (size_t)nth;
    uint8_t *scratch = NULL, *owned = NULL;
    if (total) {
        if (pool) {
            scratch = cpu_pool_scratch(pool, total);
        } else {
            owned = scratch = aligned_alloc(64, (total + 63) & ~(size_t)63);
            if (!owned) return LLC_ERR_NOMEM;
        }
    }
    if (quant) job.a.xq = scratch;
    if (own_xq) job.xq_own = scratch;
    else if (quant || job.use_gemm) {
        mm_prep prep = {.impl = impl, .a = &job.a, .n_units = T};
        if (job.use_gemm) {
            prep.xp = scratch + xq_bytes;
            prep.n_units = impl->gemm_groups(type, T);
            job.a.xp = prep.xp;
            job.scratch = scratch + xq_bytes + xp_bytes;
        }
        const int parallel = pool && nth > 1 && T * n_in >= 4096;
        if (parallel && quant && prep.xp && prep.n_units < nth) {
            /* fewer groups than threads: quantize the rows on all threads first */
            mm_prep rows = {.impl = impl, .a = &job.a, .n_units = T};
            atomic_init(&rows.next, 0);
            cpu_pool_run(pool, mm_prep_work, &rows);
            prep.quantized = 1;
        }
        atomic_init(&prep.next, 0);
        if (parallel && prep.n_units > 1)
            cpu_pool_run(pool, mm_prep_work, &prep);
        else
            mm_prep_work(&prep, 0, 1);
    }

    if (pool && nth > 1 && job.n_units > 1)
        cpu_pool_run(pool, mm_work, &job);
    else
        mm_work(&job, 0, 1);
    free(owned);
    return 0;
}

/* ---- reference ---------------------------------------------------------------------- */

int cpu_matmul_ref(uint32_t type, const void *W, int64_t n_in, int64_t n_out, const float *X,
                   int64_t T, float *Y) {
    const qtype_info *ti = qtype_get(type);
    if (!ti || !ti->supported) return LLC_ERR_UNSUPPORTED;
    if (n_in <= 0 || n_out < 0 || T < 0 || n_in % ti->block_elems) return LLC_ERR_RANGE;
    const size_t stride = qtype_row_bytes(type, n_in);
    float *row = malloc((size_t)n_in * sizeof *row);
    if (!row) return LLC_ERR_NOMEM;
    for (int64_t o = 0; o < n_out; o++) {
        int rc = dequantize_row(type, (const uint8_t *)W + (size_t)o * stride, row, n_in);
        if (rc) {
            free(row);
            return rc;
        }
        for (int64_t t = 0; t < T; t++) {
            const float *x = X + t * n_in;
            double s = 0;
            for (int64_t i = 0; i < n_in; i++) s += (double)row[i] * (double)x[i];
            Y[t * n_out + o] = (float)s;
        }
    }
    free(row);
    return 0;
}
