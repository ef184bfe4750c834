/* test_elementwise.c — the CPU backend's SiLU and GELU gates and residual add at every SIMD
 * level this machine has: against double-precision references over a range that
 * includes the clamped tails, odd lengths (vector tails), and 1 vs 2 threads bit
 * for bit on a buffer large enough to be split; and rows of a width that is no
 * multiple of the vector length give the same bits batched as alone (the engine's
 * "a batched row equals the row alone" property rests on it). */
#include "kernels/common.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/matmul.h"
#include "tests/test.h"

static const cpu_simd_level g_levels[] = {CPU_SIMD_SCALAR, CPU_SIMD_AVX2, CPU_SIMD_AVX512};

static float gate_value(size_t i) {
    /* sweeps -120..120, denser near 0, with exact 0 and the clamp edges in it */
    double u = (double)(i % 2001) / 1000.0 - 1.0;
    return (float)(120.0 * u * u * u);
}

static void check_level(cpu_pool *pool, size_t n) {
    float *g = malloc(n * sizeof *g), *u = malloc(n * sizeof *u);
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    if (!g || !u || !x || !y) {
        CHECK(0);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        g[i] = gate_value(i);
        u[i] = (float)((double)(i % 7) - 3.0) * 0.5f;
        x[i] = (float)i * 0.25f;
        y[i] = -(float)(i % 13);
    }
    cpu_silu_mul_run(pool, g, u, n);
    int bad = 0;
    for (size_t i = 0; i < n && bad < 5; i++) {
        double gv = gate_value(i), want = gv / (1.0 + exp(-gv)) * (double)u[i];
        double tol = 4e-6 * fabs(want) + 1e-30;
        if (!(fabs((double)g[i] - want) <= tol)) {
            bad++;
            CHECKF(0, "%s n=%zu i=%zu: silu(%g)*%g = %.9g, want %.9g", cpu_simd_name(), n, i, gv,
                   (double)u[i], (double)g[i], want);
        }
    }
    for (size_t i = 0; i < n; i++) g[i] = gate_value(i) * 0.1f; /* GELU: the tanh form, over ±12 */
    cpu_gelu_mul_run(pool, g, u, n);
    for (size_t i = 0; i < n && bad < 5; i++) {
        double gv = gate_value(i) * 0.1f;
        /* 0.5·x·(1 + tanh(t)) written as x / (1 + e^(-2t)), which keeps the far
         * negative tail (where 1 + tanh(t) cancels to 0 in double) */
        double t = 0.7978845608028654 * (gv + 0.044715 * gv * gv * gv);
        double want = gv / (1.0 + exp(-2.0 * t)) * (double)u[i];
        double tol = 8e-6 * fabs(want) + 1e-30;
        if (!(fabs((double)g[i] - want) <= tol)) {
            bad++;
            CHECKF(0, "%s n=%zu i=%zu: gelu(%g)*%g = %.9g, want %.9g", cpu_simd_name(), n, i, gv,
                   (double)u[i], (double)g[i], want);
        }
    }
    cpu_add_run(pool, x, y, n);
    for (size_t i = 0; i < n && bad < 10; i++)
        if (x[i] != (float)i * 0.25f - (float)(i % 13)) {
            bad++;
            CHECKF(0, "%s n=%zu: add at %zu = %g", cpu_simd_name(), n, i, (double)x[i]);
        }
out:
    free(g), free(u), free(x), free(y);
}

static void test_against_reference(void) {
    cpu_pool *pool;
    CHECK(cpu_pool_create(2, &pool) == 0);
    const size_t ns[] = {1, 15, 17, 2001, 40000 + 13};
    for (size_t li = 0; li < LLC_ARRAY_LEN(g_levels); li++) {
        if (g_levels[li] > cpu_matmul_max_level()) continue;
        cpu_matmul_set_level(g_levels[li]);
        for (size_t k = 0; k < LLC_ARRAY_LEN(ns); k++) check_level(pool, ns[k]);
    }
    cpu_matmul_set_level(cpu_matmul_max_level());
    cpu_pool_free(pool);
}

static void test_threads_bitwise(void) {
    cpu_pool *p1, *p2;
    CHECK(cpu_pool_create(1, &p1) == 0);
    CHECK(cpu_pool_create(2, &p2) == 0);
    const size_t n = 50000 + 7;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *u = malloc(n * sizeof *u);
    if (a && b && u) {
        for (size_t i = 0; i < n; i++) a[i] = b[i] = gate_value(i * 3), u[i] = 1.0f + (float)(i % 5);
        cpu_silu_mul_run(p1, a, u, n);
        cpu_silu_mul_run(p2, b, u, n);
        CHECK(memcmp(a, b, n * sizeof *a) == 0);
        for (size_t i = 0; i < n; i++) a[i] = b[i] = gate_value(i * 3) * 0.1f;
        cpu_gelu_mul_run(p1, a, u, n);
        cpu_gelu_mul_run(p2, b, u, n);
        CHECK(memcmp(a, b, n * sizeof *a) == 0);
    }
    free(a), free(b), free(u);
    cpu_pool_free(p1);
    cpu_pool_free(p2);
}

/* stories260K's FFN width (172 = 21·8 + 4) and others whose rows start off the
 * vector grid when several are laid end to end */
static void test_rows_batched_equal_alone(void) {
    const size_t widths[] = {172, 13, 100};
    const int rows = 5;
    for (size_t li = 0; li < LLC_ARRAY_LEN(g_levels); li++) {
        if (g_levels[li] > cpu_matmul_max_level()) continue;
        cpu_matmul_set_level(g_levels[li]);
        for (size_t k = 0; k < LLC_ARRAY_LEN(widths); k++) {
            const size_t w = widths[k], n = w * (size_t)rows;
            float *all = malloc(n * sizeof *all), *one = malloc(w * sizeof *one), *u = malloc(n * sizeof *u);
            if (!all || !one || !u) {
                CHECK(0);
            } else {
                for (size_t i = 0; i < n; i++) all[i] = gate_value(i * 7 % 2001) * 0.05f, u[i] = 0.5f + (float)(i % 3);
                float *in = malloc(n * sizeof *in);
                if (in) memcpy(in, all, n * sizeof *in);
                for (int gelu = 0; in && gelu < 2; gelu++) {
                    void (*run)(cpu_pool *, float *, const float *, size_t) = gelu ? cpu_gelu_mul_run : cpu_silu_mul_run;
                    memcpy(all, in, n * sizeof *all);
                    run(NULL, all, u, n);
                    for (int r = 0; r < rows; r++) {
                        memcpy(one, in + (size_t)r * w, w * sizeof *one);
                        run(NULL, one, u + (size_t)r * w, w);
                        CHECKF(!memcmp(one, all + (size_t)r * w, w * sizeof *one),
                               "%s %s width %zu: row %d batched differs from the row alone", cpu_simd_name(),
                               gelu ? "gelu" : "silu", w, r);
                    }
                }
                free(in);
            }
            free(all), free(one), free(u);
        }
    }
    cpu_matmul_set_level(cpu_matmul_max_level());
}

int main(void) {
    RUN(test_against_reference);
    RUN(test_rows_batched_equal_alone);
    RUN(test_threads_bitwise);
    return t_summary();
}
