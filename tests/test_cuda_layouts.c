/* test_cuda_layouts.c — the CUDA backend's weight layouts, checked on the CPU:
 * every row re-laid for the GPU and decoded by the GPU's own decoders (compiled
 * for the host) equals kernels/quant.c's dequantize_row, for every type the GPU
 * takes, at widths of one block and of many. A wrong plane offset, nibble or
 * scale index shows here without a GPU. (Builds without nvcc have nothing to
 * check and say so.) */
#include "kernels/quant.h"
#include "tests/test.h"

#ifdef LLC_CUDA
#include "kernels/cuda/backend_cuda.h"

static uint64_t g_rng = 5;
static float frand(void) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 40) / (double)(1 << 24)) * 2 - 1;
}

static void test_every_layout(void) {
    const uint32_t types[] = {QT_F16, QT_BF16, QT_Q8_0, QT_Q4_0, QT_Q4_K, QT_Q5_K, QT_Q6_K};
    const int64_t widths[] = {256, 512, 4096, 11008};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
            const int64_t n = widths[wi];
            const size_t rb = qtype_row_bytes(types[ti], n);
            if (!rb) continue;
            float *x = malloc(n * sizeof *x), *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
            unsigned char *q = malloc(rb);
            for (int64_t i = 0; i < n; i++) x[i] = frand() * (1.0f + (float)(i % 7)); /* scales differ per block */
            CHECK(quantize_row(types[ti], x, q, n) == 0);
            CHECK(dequantize_row(types[ti], q, want, n) == 0);
            for (int64_t i = 0; i < n; i++) got[i] = NAN; /* every element must be written */
            CHECKF(backend_cuda_decode_row_host(types[ti], q, n, got) == 0, "%s", qtype_name(types[ti]));
            int64_t bad = 0, first = -1;
            for (int64_t i = 0; i < n; i++)
                if (!(fabsf(got[i] - want[i]) <= 1e-6f * fmaxf(1.0f, fabsf(want[i])))) {
                    if (first < 0) first = i;
                    bad++;
                }
            CHECKF(bad == 0, "%s, %lld wide: %lld elements differ, the first at %lld (%g, want %g)",
                   qtype_name(types[ti]), (long long)n, (long long)bad, (long long)first,
                   first >= 0 ? got[first] : 0.0, first >= 0 ? want[first] : 0.0);
            free(x), free(want), free(got), free(q);
        }
}

/* What the GPU refuses, it refuses by name. */
static void test_unsupported(void) {
    float out[256];
    unsigned char row[1024] = {0};
    CHECK(backend_cuda_decode_row_host(QT_Q2_K, row, 256, out) < 0);
    CHECK(backend_cuda_decode_row_host(QT_F32, row, 256, out) < 0);
    CHECK(backend_cuda_decode_row_host(QT_Q8_0, row, 48, out) < 0); /* not whole blocks */
}

int main(void) {
    RUN(test_every_layout);
    RUN(test_unsupported);
    return t_summary();
}
#else
int main(void) {
    printf("built without CUDA: no GPU layouts to check\n");
    return t_summary();
}
#endif
