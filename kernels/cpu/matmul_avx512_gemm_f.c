/* matmul_avx512_gemm_f.c — the AVX-512 blocked GEMM for float weights (F32, F16,
 * BF16) at T > 1.
 *
 * Vectors run along the activation rows: the activations are transposed once per
 * call into groups of 32 rows ([k][32] f32), and the weights are only converted to
 * f32, row-major, 12 (or 24) rows × one K-slice at a time into an L1-sized buffer (no
 * transpose: converting F16 costs one instruction per 16 weights; transposing them,
 * as a first version did, cost ~30% at T = 32). The microkernel keeps 2 × 12
 * accumulators (32 activation rows × 12 outputs; 1 × 24 for groups of at most 16
 * rows): per k, 2 vector loads and 12 weight broadcasts for 24 FMAs. The finished
 * tile is transposed (16×16 at a time) into Y, accumulated over the K-slices.
 * While the kernels work on one buffer of weights they prefetch the next one into L2,
 * so the weight stream from memory overlaps the arithmetic. Every output's arithmetic
 * depends on the shapes alone, never on the chunking or the thread count. */
#if defined(__x86_64__)

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")

#include <immintrin.h>

#include "kernels/cpu/matmul_avx512_gemm.h"
#include "kernels/cpu/matmul_avx512_util.h"

enum {
    GT = 32,     /* activation rows per group */
    KCF = 512,   /* K-slice; also the row stride (floats) of the converted weights */
    RO2 = 12,    /* outputs per kernel call, 2-vector groups */
    RO1 = 24,    /* outputs per kernel call, 1-vector groups (<= 16 rows) */
};

int64_t mm_avx512_gemmf_groups(int64_t T) { return (T + GT - 1) / GT; }

void mm_avx512_gemmf_group(int64_t T, int64_t g, int64_t *t0, int64_t *t1) {
    *t0 = g * GT;
    *t1 = *t0 + GT < T ? *t0 + GT : T;
}

static size_t group_bytes(int64_t n_in) { return (size_t)((n_in + 15) / 16 * 16) * GT * 4; }

size_t mm_avx512_gemmf_xp_bytes(int64_t n_in, int64_t T) {
    return (size_t)mm_avx512_gemmf_groups(T) * group_bytes(n_in);
}

size_t mm_avx512_gemmf_scratch(int64_t n_in, int64_t rows) {
    (void)n_in;
    (void)rows;
    return (size_t)RO1 * KCF * 4 + 64;
}

/* Group g's rows into [k][32] (rows beyond the group: not written when the group
 * has at most 16 rows, zero otherwise). */
void mm_avx512_gemmf_pack_x(const mm_args *a, int64_t g, uint8_t *xp) {
    int64_t t0, t1;
    mm_avx512_gemmf_group(a->T, g, &t0, &t1);
    const int nt = (int)(t1 - t0);
    float *dst = (float *)(void *)(xp + (size_t)g * group_bytes(a->n_in));
    for (int v = 0; v < (nt > 16 ? 2 : 1); v++) {
        for (int64_t k = 0; k < a->n_in; k += 16) {
            const __mmask16 km = row_mask((int)(a->n_in - k < 16 ? a->n_in - k : 16));
            __m512 r[16];
            for (int i = 0; i < 16; i++)
                r[i] = 16 * v + i < nt ? _mm512_maskz_loadu_ps(km, a->X + (t0 + 16 * v + i) * a->n_in + k)
                                       : _mm512_setzero_ps();
            tr16(r);
            for (int j = 0; j < 16; j++) _mm512_store_ps(dst + (k + j) * GT + 16 * v, r[j]);
        }
    }
}

/* ---- weights: rows → f32, row stride KCF ------------------------------------------ */

MM_AI void convert_rows_t(const uint32_t type, const mm_args *a, int64_t o0, int64_t rows, int64_t k0,
                          int64_t kn, float *dst, int prefetch) {
    const size_t esz = type == QT_F32 ? 4 : 2;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *src = a->W + (size_t)(o0 + r) * a->w_stride + (size_t)k0 * esz;
        float *d = dst + r * KCF;
        for (int64_t k = 0; k < kn; k += 16) {
            if (prefetch && ((k * esz) & 63) == 0) _mm_prefetch((const char *)src + k * esz + 1024, _MM_HINT_T0);
            const __mmask16 km = row_mask((int)(kn - k < 16 ? kn - k : 16));
            __m512 v;
            if (type == QT_F16) v = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(km, src + 2 * k));
            else if (type == QT_BF16)
                v = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(km, src + 2 * k)), 16));
            else v = _mm512_maskz_loadu_ps(km, src + 4 * k);
            _mm512_store_ps(d + k, v);
        }
    }
}

static void convert_rows(const mm_args *a, int64_t o0, int64_t rows, int64_t k0, int64_t kn, float *dst,
                         int prefetch) {
    switch (a->type) {
    case QT_F16: convert_rows_t(QT_F16, a, o0, rows, k0, kn, dst, prefetch); break;
    case QT_BF16: convert_rows_t(QT_BF16, a, o0, rows, k0, kn, dst, prefetch); break;
    default: convert_rows_t(QT_F32, a, o0, rows, k0, kn, dst, prefetch); break;
    }
}

/* ---- prefetching the next K-slice, spread over a kernel's loop ------------------------ */

typedef struct pf_cursor {
    const uint8_t *row; /* current row */
    size_t stride;      /* bytes between rows */
    int64_t col, lpr;   /* current line, lines per row */
    int64_t n, kn, acc; /* n lines spread evenly over kn steps */
} pf_cursor;

MM_AI void pf_step(pf_cursor *c) {
    c->acc += c->n;
    while (c->acc >= c->kn) { /* taken n times over the kn steps */
        c->acc -= c->kn;
        _mm_prefetch((const char *)c->row + c->col * 64, _MM_HINT_T1);
        if (++c->col == c->lpr) {
            c->col = 0;
            c->row += c->stride;
        }
    }
}

/* ---- microkernel ------------------------------------------------------------------- */

/* Y[t][o] for the group's nt rows (nv = 1 or 2 vectors of 16) × ro outputs, over kn
 * elements: px = activations [k][32], pw = weights [o][KCF]. */
MM_AI void kern(const float *px, const float *pw, int64_t kn, const int nv, const int ro, float *y,
                int64_t ys, int nt, int accum, pf_cursor pc) {
    __m512 acc[2][RO1];
    _Pragma("GCC unroll 32")
    for (int o = 0; o < ro; o++) {
        acc[0][o] = _mm512_setzero_ps();
        if (nv == 2) acc[1][o] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < kn; k++, px += GT, pw++) {
        pf_step(&pc);
        const __m512 x0 = _mm512_load_ps(px);
        const __m512 x1 = nv == 2 ? _mm512_load_ps(px + 16) : x0;
        _Pragma("GCC unroll 32")
        for (int o = 0; o < ro; o++) {
            const __m512 wb = _mm512_set1_ps(pw[o * KCF]);
            acc[0][o] = _mm512_fmadd_ps(x0, wb, acc[0][o]);
            if (nv == 2) acc[1][o] = _mm512_fmadd_ps(x1, wb, acc[1][o]);
        }
    }
    /* transpose 16 × 16 blocks: lane i of acc[v][o] is Y[16v + i][o] */
    _Pragma("GCC unroll 2")
    for (int v = 0; v < nv; v++) {
        const int rows = nt - 16 * v < 16 ? nt - 16 * v : 16;
        _Pragma("GCC unroll 2")
        for (int ob = 0; ob < ro; ob += 16) {
            __m512 r[16];
            _Pragma("GCC unroll 16")
            for (int i = 0; i < 16; i++) r[i] = ob + i < ro ? acc[v][ob + i] : _mm512_setzero_ps();
            tr16(r);
            const __mmask16 cm = row_mask(ro - ob);
            for (int i = 0; i < rows; i++) {
                float *yp = y + (16 * v + i) * ys + ob;
                __m512 val = r[i];
                if (accum) val = _mm512_add_ps(val, _mm512_maskz_loadu_ps(cm, yp));
                _mm512_mask_storeu_ps(yp, cm, val);
            }
        }
    }
}

#define RO_CASE(N, NV) case N: kern(px, pw, kn, NV, N, y, ys, nt, accum, pc); break;

static void kern2(const float *px, const float *pw, int64_t kn, int ro, float *y, int64_t ys, int nt,
                  int accum, pf_cursor pc) {
    switch (ro) {
        RO_CASE(1, 2) RO_CASE(2, 2) RO_CASE(3, 2) RO_CASE(4, 2) RO_CASE(5, 2) RO_CASE(6, 2)
        RO_CASE(7, 2) RO_CASE(8, 2) RO_CASE(9, 2) RO_CASE(10, 2) RO_CASE(11, 2)
        default: kern(px, pw, kn, 2, 12, y, ys, nt, accum, pc); break;
    }
}

static void kern1(const float *px, const float *pw, int64_t kn, int ro, float *y, int64_t ys, int nt,
                  int accum, pf_cursor pc) {
    switch (ro) {
        RO_CASE(1, 1) RO_CASE(2, 1) RO_CASE(3, 1) RO_CASE(4, 1) RO_CASE(5, 1) RO_CASE(6, 1)
        RO_CASE(7, 1) RO_CASE(8, 1) RO_CASE(9, 1) RO_CASE(10, 1) RO_CASE(11, 1) RO_CASE(12, 1)
        RO_CASE(13, 1) RO_CASE(14, 1) RO_CASE(15, 1) RO_CASE(16, 1) RO_CASE(17, 1) RO_CASE(18, 1)
        RO_CASE(19, 1) RO_CASE(20, 1) RO_CASE(21, 1) RO_CASE(22, 1) RO_CASE(23, 1)
        default: kern(px, pw, kn, 1, 24, y, ys, nt, accum, pc); break;
    }
}

/* ---- driver -------------------------------------------------------------------------- */

/* Walk order of one chunk: K-slices, within each the output groups (og) of ro_max
 * rows; each (slice, og) converts its rows into an L1-sized buffer, runs the kernel
 * for every activation group, and meanwhile prefetches the rows of the step after
 * (the next og, the next slice's first, or the next chunk's first). */
typedef struct fstep {
    int64_t r0, rows, k0, kn; /* absolute rows [r0, r0 + rows), elements [k0, k0 + kn) */
} fstep;

static fstep step_at(int64_t o0, int64_t nrows, int64_t n_in, int64_t ro_max, int64_t k0, int64_t og) {
    const int64_t nog = (nrows + ro_max - 1) / ro_max;
    fstep st;
    st.r0 = o0 + og * nrows / nog;
    st.rows = o0 + (og + 1) * nrows / nog - st.r0;
    st.k0 = k0;
    st.kn = n_in - k0 < KCF ? n_in - k0 : KCF;
    return st;
}

void mm_avx512_gemmf(const mm_args *a, int64_t o0, int64_t o1, int64_t n0, int64_t n1, void *scratch) {
    float *wbuf = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    const int64_t rows = o1 - o0, T = a->T, ng = mm_avx512_gemmf_groups(T);
    const size_t esz = a->type == QT_F32 ? 4 : 2, gbytes = group_bytes(a->n_in);
    /* 24 outputs per call when the only group has <= 16 rows, else 12 */
    const int64_t ro_max = T <= 16 ? RO1 : RO2, nog = (rows + ro_max - 1) / ro_max;
    for (int64_t k0 = 0; k0 < a->n_in; k0 += KCF) {
        for (int64_t og = 0; og < nog; og++) {
            const fstep st = step_at(o0, rows, a->n_in, ro_max, k0, og);
            convert_rows(a, st.r0, st.rows, st.k0, st.kn, wbuf, 0);
            /* the step after this one, to prefetch */
            fstep nx = {0};
            if (og + 1 < nog) nx = step_at(o0, rows, a->n_in, ro_max, k0, og + 1);
            else if (k0 + KCF < a->n_in) nx = step_at(o0, rows, a->n_in, ro_max, k0 + KCF, 0);
            else if (n1 > n0) nx = step_at(n0, n1 - n0, a->n_in, ro_max, 0, 0);
            const int64_t lpr = ((int64_t)esz * nx.kn + 63) / 64, total = nx.rows * lpr;
            for (int64_t g = 0; g < ng; g++) {
                int64_t t0, t1;
                mm_avx512_gemmf_group(T, g, &t0, &t1);
                const int nt = (int)(t1 - t0);
                const float *px = (const float *)(const void *)(a->xp + (size_t)g * gbytes) + k0 * GT;
                /* this call's share of the prefetches */
                pf_cursor pc = {.kn = st.kn, .lpr = 1};
                const int64_t i0 = total * g / ng, i1 = total * (g + 1) / ng;
                if (i1 > i0) {
                    pc.row = a->W + (size_t)(nx.r0 + i0 / lpr) * a->w_stride + (size_t)nx.k0 * esz;
                    pc.stride = a->w_stride;
                    pc.col = i0 % lpr;
                    pc.lpr = lpr;
                    pc.n = i1 - i0 < st.kn ? i1 - i0 : st.kn;
                }
                float *y = a->Y + t0 * a->n_out + st.r0;
                if (nt > 16) kern2(px, wbuf, st.kn, (int)st.rows, y, a->n_out, nt, k0 > 0, pc);
                else kern1(px, wbuf, st.kn, (int)st.rows, y, a->n_out, nt, k0 > 0, pc);
            }
        }
    }
}

#pragma GCC pop_options

#endif
