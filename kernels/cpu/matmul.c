/* matmul.c — cpu_matmul's dispatcher: argument checks, the run-time choice of SIMD
 * level (cpuid, capped by LLC_SIMD), activation quantization into pool scratch, and
 * the split of the work over the pool's threads, for one matrix or several against
 * the same activations (cpu_matmul_multi); plus the scalar reference
 * cpu_matmul_ref. The kernels themselves live in matmul_<level>*.c. */
#include "kernels/cpu/matmul.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernels/common.h"
#include "kernels/cpu/hugemem.h"
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

size_t mm_pf_dist = 4096;
int mm_avx512_bf16;

/* Bit `bit` of cpuid leaf 7 subleaf 1's eax, unless $env is "0" (to compare, and to
 * test the other path on CPUs that have the feature). */
static int cpuid_7_1_eax_bit(int bit, const char *env) {
#if defined(__x86_64__) && defined(__GNUC__)
    const char *v = getenv(env);
    if (v && !strcmp(v, "0")) return 0;
    unsigned a, b, c, d;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0), "c"(0));
    if (a < 7) return 0;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
    return a >> bit & 1;
#else
    (void)bit, (void)env;
    return 0;
#endif
}

/* AVX-VNNI (vpdpbusd on ymm, VEX): eax bit 4, with AVX2 (whose state the OS saves);
 * LLC_AVXVNNI=0 keeps the maddubs path */
static int detect_avx_vnni(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    return cpuid_7_1_eax_bit(4, "LLC_AVXVNNI") && __builtin_cpu_supports("avx2");
#else
    return 0;
#endif
}

/* AVX512_BF16 (vdpbf16ps, vcvtne2ps2bf16): eax bit 5; used by the AVX-512 level only
 * (so LLC_SIMD=avx2 never runs it); LLC_AVX512BF16=0 keeps the f32 row loop there */
static int detect_avx512_bf16(void) { return cpuid_7_1_eax_bit(5, "LLC_AVX512BF16"); }

/* The prefetch distance of the dot kernels (see mm_pf_dist). Measured, TinyLlama
 * Q8_0 decode at AVX2, 2 threads: on the Xeon it was tuned on, 4 KB ahead beat 1-2 KB
 * and none; on AMD Zen 4, 17.7 tok/s with 4 KB against 28.5 with none (other types
 * within noise), so AMD parts stream with their hardware prefetcher alone. */
static size_t detect_pf_dist(void) {
    const char *env = getenv("LLC_PREFETCH");
    if (env && *env) {
        char *end;
        long v = strtol(env, &end, 10);
        if (!*end && v >= 0 && v <= 65536) return (size_t)v;
    }
#if defined(__x86_64__) && defined(__GNUC__)
    unsigned a, b, c, d;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0), "c"(0));
    if (b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u) return 0; /* "AuthenticAMD" */
#endif
    return 4096;
}

static void level_init(void) {
    mm_pf_dist = detect_pf_dist();
    g_max_level = detect_level();
    g_level = g_max_level;
    mm_avx_vnni = g_max_level >= CPU_SIMD_AVX2 && detect_avx_vnni();
    mm_avx512_bf16 = g_max_level >= CPU_SIMD_AVX512 && detect_avx512_bf16();
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
 * the chunking), so results do not depend on the thread count.
 *
 * One call may multiply the same activations by several matrices (cpu_matmul_multi:
 * Q, K and V; gate and up): each matrix ("part") is planned exactly as it would be
 * alone, the activations are prepared once per distinct form they take, and the
 * chunks of all the parts are numbered one after the other and handed out from one
 * counter, in one dispatch of the pool. */

typedef struct mm_part {
    mm_args a;
    int use_gemm;
    int64_t chunk;        /* output rows per work unit */
    int64_t unit0;        /* its units are the call's unit0 .. unit0 + n_units - 1 */
    int64_t n_units;
    int own_slot;         /* >= 0: T == 1, each thread quantizes X into its own row of this slot */
} mm_part;

typedef struct mm_job {
    const mm_impl *impl;
    const mm_part *parts;
    int n_parts;
    int64_t n_units;      /* of all the parts */
    atomic_long next;     /* next unit to take */
    uint8_t *scratch;     /* gemm: per-thread scratch, scratch_per apart */
    size_t scratch_per;
    uint8_t *xq_own;      /* T == 1: per-thread xq rows of the own slots, own_per apart */
    size_t own_per;
} mm_job;

static const mm_part *part_of(const mm_job *j, long u) {
    int p = 0;
    while (p + 1 < j->n_parts && u >= j->parts[p + 1].unit0) p++;
    return &j->parts[p];
}

static void mm_work(void *ctx, int ith, int nth) {
    (void)nth;
    mm_job *j = ctx;
    void *scratch = j->scratch ? j->scratch + (size_t)ith * j->scratch_per : NULL;
    uint8_t *own_xq = j->xq_own ? j->xq_own + (size_t)ith * j->own_per : NULL;
    unsigned own_done = 0; /* own slots this thread has quantized */
    long u = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
    while (u < j->n_units) {
        const mm_part *p = part_of(j, u);
        const int64_t lu = u - p->unit0;
        const mm_args *a = &p->a;
        mm_args own;
        if (p->own_slot >= 0) {
            /* single-row call: every thread quantizes the activations itself (~1 µs)
             * instead of waiting for one thread to do it, its first weights already
             * on their way */
            own = *a;
            own.xq = own_xq + (size_t)p->own_slot * a->xq_stride;
            if (!(own_done & 1u << p->own_slot)) {
                const uint8_t *w = a->W + (size_t)(lu * p->chunk) * a->w_stride;
                for (int l = 0; l < 4096; l += 64) __builtin_prefetch(w + l);
                j->impl->quantize_x(a->type, a->X, a->n_in, (uint8_t *)own.xq);
                own_done |= 1u << p->own_slot;
            }
            a = &own;
        }
        const int64_t o0 = lu * p->chunk;
        const int64_t o1 = o0 + p->chunk < a->n_out ? o0 + p->chunk : a->n_out;
        if (p->use_gemm) {
            /* the GEMM claims its next unit one ahead, so it can prefetch that unit's
             * first weights (when of the same matrix) while finishing the current one */
            const long un = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
            int64_t n0 = 0, n1 = 0;
            if (un < p->unit0 + p->n_units) {
                n0 = (un - p->unit0) * p->chunk;
                n1 = n0 + p->chunk < a->n_out ? n0 + p->chunk : a->n_out;
            }
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

/* The level in use, if its GEMM reads panels packed ahead (AVX-512: 16-row VNNI
 * panels; AVX2: Q8_0's 8-row panels). Each level packs its own layout; panels are
 * tagged with it and ignored at any other level (cpu_packed_w.level). */
static const mm_impl *prepack_impl(void) {
    const mm_impl *impl = current_impl();
    return impl->gemm_prepack ? impl : NULL;
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
    uint8_t *wp = huge_alloc(bytes); /* streamed at every decode step: huge pages */
    if (!wp) return LLC_ERR_NOMEM;
    prepack_job j = {.impl = impl, .wp = wp, .n_panels = (n_out + 15) / 16};
    j.a = (mm_args){.type = type, .W = W, .w_stride = qtype_row_bytes(type, n_in), .n_in = n_in, .n_out = n_out};
    atomic_init(&j.next, 0);
    if (pool && cpu_pool_size(pool) > 1) cpu_pool_run(pool, prepack_work, &j);
    else prepack_work(&j, 0, 1);
    out->data = wp;
    out->bytes = bytes;
    out->level = (int)cpu_matmul_level();
    return 0;
}

void cpu_packed_w_free(cpu_packed_w *p) {
    huge_free(p->data, p->bytes);
    memset(p, 0, sizeof *p);
}

int cpu_matmul(cpu_pool *pool, uint32_t type, const void *W, int64_t n_in, int64_t n_out,
               const float *X, int64_t T, float *Y) {
    return cpu_matmul_packed(pool, type, W, NULL, n_in, n_out, X, T, Y);
}

int cpu_matmul_packed(cpu_pool *pool, uint32_t type, const void *W, const cpu_packed_w *packed,
                      int64_t n_in, int64_t n_out, const float *X, int64_t T, float *Y) {
    const cpu_matmul_w w = {.type = type, .W = W, .packed = packed, .n_in = n_in, .n_out = n_out};
    return cpu_matmul_multi(pool, &w, 1, X, T, &Y);
}

/* Checks one matrix as cpu_matmul does. */
static int check_w(const cpu_matmul_w *w) {
    const qtype_info *ti = qtype_get(w->type);
    if (!ti || !ti->supported ||
        !(mm_type_is_float(w->type) || mm_type_is_quant(w->type)))
        return LLC_ERR_UNSUPPORTED;
    if (w->n_in <= 0 || w->n_out < 0 || w->n_in % ti->block_elems) return LLC_ERR_RANGE;
    return 0;
}

/* Plans one matrix's part of a call: the path (dot kernels or GEMM) and the chunks,
 * as for the matrix alone. */
static void plan_part(const mm_impl *impl, const cpu_matmul_w *w, const float *X, int64_t T, float *Y, int nth,
                      mm_part *p) {
    memset(p, 0, sizeof *p);
    p->own_slot = -1;
    p->a = (mm_args){
        .type = w->type, .W = w->W, .w_stride = qtype_row_bytes(w->type, w->n_in),
        .n_in = w->n_in, .n_out = w->n_out, .T = T, .X = X, .Y = Y,
    };
    if (mm_type_is_quant(w->type)) p->a.xq_stride = mm_xq_row_bytes(w->n_in);
    const int64_t n_out = w->n_out;
    /* panels packed ahead serve the level that packed them (the level may have changed since) */
    const uint8_t *wp = w->packed && w->packed->data && w->packed->level == (int)cpu_matmul_level() &&
                                impl->gemm_rows_prepacked
                            ? w->packed->data
                            : NULL;
    const int gemm_rows = wp ? impl->gemm_rows_prepacked(w->type, T)
                             : T > 1 && impl->gemm ? impl->gemm_rows(w->type, T) : 0;
    p->use_gemm = gemm_rows > 0;
    if (p->use_gemm) {
        p->a.wp = wp;
        /* chunks of up to 128 rows, at least ~4 per thread when there are enough rows */
        int64_t c = round_up((n_out + 4 * nth - 1) / (4 * nth), gemm_rows);
        /* ... except when the panels are packed ahead and all rows fit one group: the
         * weights are then read once, in order, and long runs keep each thread's
         * stream going as in the GEMV (measured, 2048×5632 at T = 4: 495 → 480 µs) */
        const int one_pass = wp && impl->gemm_groups(w->type, T) == 1;
        if (c > 128 && !one_pass) c = round_up(128, gemm_rows);
        p->chunk = c;
    } else {
        /* about two long runs of rows per thread: each thread then streams a few
         * long stretches of memory (measured: 16-row chunks handed out in turn reach
         * ~70% of the bandwidth that long runs do), and a slowed thread still leaves
         * the other one work to take */
        p->chunk = round_up((n_out + 2 * nth - 1) / (2 * nth), 16);
    }
    p->n_units = (n_out + p->chunk - 1) / p->chunk;
}

/* Whether the quantized activations of weight types t and u are the same bytes:
 * quantize_x depends on the type only through the aux words, the span of a scale
 * and its rounding (mm_aux_of, mm_act_span, mm_act_scale; 1/3 is not a half, so the
 * probe tells). */
static int same_xq_format(uint32_t t, uint32_t u) {
    return mm_aux_of(t) == mm_aux_of(u) && mm_act_span(t) == mm_act_span(u) &&
           mm_act_scale(t, 1.0f / 3) == mm_act_scale(u, 1.0f / 3);
}

/* The activations in the forms the parts read, shared between parts that read the
 * same form: quantized rows (one slot per format) and packed GEMM groups (one slot
 * per weight type and packing). */
typedef struct mm_form {
    int n_xq, n_xp, n_own;
    uint32_t xq_type[CPU_MATMUL_MULTI_MAX]; /* a type of each xq format */
    int xq_gemm[CPU_MATMUL_MULTI_MAX];      /* a GEMM part reads it: quantized ahead, never per thread */
    int xq_slot[CPU_MATMUL_MULTI_MAX];      /* its slot in the shared rows, or in the own rows */
    int xp_part[CPU_MATMUL_MULTI_MAX];      /* the part each xp slot was made for */
    int part_xq[CPU_MATMUL_MULTI_MAX], part_xp[CPU_MATMUL_MULTI_MAX]; /* per part, or -1 */
} mm_form;

static void plan_forms(const mm_part *parts, int n, mm_form *f) {
    memset(f, 0, sizeof *f);
    for (int i = 0; i < n; i++) {
        const mm_args *a = &parts[i].a;
        f->part_xq[i] = f->part_xp[i] = -1;
        if (a->xq_stride) {
            int k = 0;
            while (k < f->n_xq && !same_xq_format(f->xq_type[k], a->type)) k++;
            if (k == f->n_xq) f->xq_type[f->n_xq++] = a->type;
            f->part_xq[i] = k;
            f->xq_gemm[k] |= parts[i].use_gemm;
        }
        if (parts[i].use_gemm) {
            int k = 0;
            while (k < f->n_xp && !(parts[f->xp_part[k]].a.type == a->type &&
                                    !parts[f->xp_part[k]].a.wp == !a->wp))
                k++;
            if (k == f->n_xp) f->xp_part[f->n_xp++] = i;
            f->part_xp[i] = k;
        }
    }
}

/* Quantizes (unless done) and, with xp, packs the T rows of a for its GEMM. */
static void prepare_x(cpu_pool *pool, int nth, const mm_impl *impl, mm_args *a, uint8_t *xp, int quantized) {
    mm_prep prep = {.impl = impl, .a = a, .n_units = a->T, .quantized = quantized};
    if (xp) {
        prep.xp = xp;
        prep.n_units = impl->gemm_groups(a->type, a->T);
    }
    const int parallel = pool && nth > 1 && a->T * a->n_in >= 4096;
    if (parallel && a->xq && !quantized && xp && prep.n_units < nth) {
        /* fewer groups than threads: quantize the rows on all threads first */
        mm_prep rows = {.impl = impl, .a = a, .n_units = a->T};
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

int cpu_matmul_multi(cpu_pool *pool, const cpu_matmul_w *w, int n, const float *X, int64_t T,
                     float *const *Y) {
    if (n < 0 || n > CPU_MATMUL_MULTI_MAX) return LLC_ERR_RANGE;
    for (int i = 0; i < n; i++) {
        const int rc = check_w(&w[i]);
        if (rc) return rc;
        if (w[i].n_in != w[0].n_in) return LLC_ERR_RANGE;
    }
    if (T < 0) return LLC_ERR_RANGE;
    if (T == 0) return 0;

    const mm_impl *impl = current_impl();
    const int nth = pool ? cpu_pool_size(pool) : 1;
    mm_part parts[CPU_MATMUL_MULTI_MAX];
    int np = 0;
    int64_t n_units = 0;
    for (int i = 0; i < n; i++) {
        if (w[i].n_out == 0) continue;
        LLC_ASSERT(w[i].W && X && Y && Y[i]);
        plan_part(impl, &w[i], X, T, Y[i], nth, &parts[np]);
        parts[np].unit0 = n_units;
        n_units += parts[np++].n_units;
    }
    if (!np) return 0;
    const int64_t n_in = parts[0].a.n_in;
    const size_t xq_stride = mm_xq_row_bytes(n_in);

    /* single-row call on several threads: quantized rows that no GEMM reads are
     * made by each thread for itself (mm_work) */
    mm_form f;
    plan_forms(parts, np, &f);
    const int own_xq = T == 1 && pool && nth > 1 && n_units > 1;
    int n_shared = 0;
    for (int k = 0; k < f.n_xq; k++) f.xq_slot[k] = own_xq && !f.xq_gemm[k] ? f.n_own++ : n_shared++;

    /* scratch: [shared xq rows][packed activations][own xq rows][per-thread gemm scratch] */
    size_t xp_off[CPU_MATMUL_MULTI_MAX], xp_total = 0, scratch_per = 0;
    for (int k = 0; k < f.n_xp; k++) {
        const mm_args *a = &parts[f.xp_part[k]].a;
        xp_off[k] = xp_total;
        xp_total += (impl->gemm_xp_bytes(a->type, n_in, T) + 63) & ~(size_t)63;
    }
    for (int i = 0; i < np; i++)
        if (parts[i].use_gemm) {
            const size_t s = (impl->gemm_scratch(&parts[i].a, parts[i].chunk) + 63) & ~(size_t)63;
            if (s > scratch_per) scratch_per = s;
        }
    const size_t xq_bytes = xq_stride * (size_t)T * (size_t)n_shared;
    const size_t own_per = xq_stride * (size_t)f.n_own;
    const size_t total = xq_bytes + xp_total + own_per * (size_t)nth + scratch_per * (size_t)nth;
    uint8_t *scratch = NULL, *owned = NULL;
    if (total) {
        if (pool) {
            scratch = cpu_pool_scratch(pool, total);
        } else {
            owned = scratch = aligned_alloc(64, (total + 63) & ~(size_t)63);
            if (!owned) return LLC_ERR_NOMEM;
        }
    }
    uint8_t *xp_base = scratch + xq_bytes;
    mm_job job = {.impl = impl, .parts = parts, .n_parts = np, .n_units = n_units, .own_per = own_per,
                  .scratch_per = scratch_per};
    if (f.n_own) job.xq_own = xp_base + xp_total;
    if (scratch_per) job.scratch = xp_base + xp_total + own_per * (size_t)nth;
    for (int i = 0; i < np; i++) {
        const int k = f.part_xq[i];
        if (k >= 0 && own_xq && !f.xq_gemm[k]) parts[i].own_slot = f.xq_slot[k];
        else if (k >= 0) parts[i].a.xq = scratch + (size_t)f.xq_slot[k] * xq_stride * (size_t)T;
        if (f.part_xp[i] >= 0) parts[i].a.xp = xp_base + xp_off[f.part_xp[i]];
    }

    /* the activations, once per form: the GEMM packings (quantizing their rows
     * first), then the quantized rows no GEMM reads */
    int quantized[CPU_MATMUL_MULTI_MAX] = {0};
    for (int k = 0; k < f.n_xp; k++) {
        mm_args a = parts[f.xp_part[k]].a;
        const int q = f.part_xq[f.xp_part[k]];
        prepare_x(pool, nth, impl, &a, (uint8_t *)a.xp, q < 0 || quantized[q]);
        if (q >= 0) quantized[q] = 1;
    }
    for (int i = 0; i < np; i++) {
        const int q = f.part_xq[i];
        if (q < 0 || quantized[q] || parts[i].own_slot >= 0) continue;
        mm_args a = parts[i].a;
        prepare_x(pool, nth, impl, &a, NULL, 0);
        quantized[q] = 1;
    }

    atomic_init(&job.next, 0);
    if (pool && nth > 1 && n_units > 1)
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
            /* BF16 weights multiply activations rounded to bf16 at every level (as ggml) */
            if (type == QT_BF16)
                for (int64_t i = 0; i < n_in; i++) s += (double)row[i] * (double)bf16_to_f32(f32_to_bf16(x[i]));
            else
                for (int64_t i = 0; i < n_in; i++) s += (double)row[i] * (double)x[i];
            Y[t * n_out + o] = (float)s;
        }
    }
    free(row);
    return 0;
}
