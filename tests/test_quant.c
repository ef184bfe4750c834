/* test_quant.c — tensor types: the type table, half/bfloat conversion, hand-built
 * blocks of every quantized type with exactly known values (these pin the ggml
 * layouts), and quantize -> dequantize round trips on random data with stated error
 * bounds. */
#include "kernels/common.h"
#include "kernels/quant.h"
#include "kernels/iq_tables.h"
#include "tests/test.h"

#include <float.h>
#include <stdint.h>

/* ---- helpers ------------------------------------------------------------------- */

static uint64_t g_rng = 0x5eed5eed12345678ULL;

static uint64_t rng_next(void) { /* splitmix64 */
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double rng_unit(void) { return (double)(rng_next() >> 11) * 0x1p-53; } /* [0,1) */
static double rng_gauss(void) {
    double u = rng_unit(), v = rng_unit();
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

static float f_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static void put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

/* Independent half decoder (ldexp on the fields). */
static double half_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Checks that `code` is the round-to-nearest-even encoding of finite f in a 16-bit
 * sign-magnitude float format: no neighbouring code is nearer, and a tie picks the
 * even code. `next_after_max` is the value one ulp above the largest finite code
 * (IEEE rounds as if that value existed). Returns true when fine. */
static bool is_rne(float f, uint16_t code, double (*value)(uint16_t), uint16_t max_code,
                   double next_after_max) {
    if (((code & 0x8000) != 0) != (signbit(f) != 0)) return false;
    uint16_t mag = code & 0x7fff;
    if (mag > max_code) return false;
    double a = fabs((double)f), v = fabs(value(code));
    double err = fabs(a - v);
    double up = mag == max_code ? next_after_max : fabs(value((uint16_t)(mag + 1)));
    if (fabs(a - up) < err) return false;
    if (fabs(a - up) == err && (mag & 1)) return false;
    if (mag > 0) {
        double dn = fabs(value((uint16_t)(mag - 1)));
        if (fabs(a - dn) < err) return false;
        if (fabs(a - dn) == err && (mag & 1)) return false;
    }
    return true;
}

static double bf16_value(uint16_t h) { return (double)bf16_to_f32(h); }

/* ---- fp16 ------------------------------------------------------------------------ */

static void test_fp16_exhaustive(void) {
    int bad_decode = 0, bad_round = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = fp16_to_f32((uint16_t)h);
        double want = half_value((uint16_t)h);
        bool is_nan = ((h >> 10) & 31) == 31 && (h & 1023);
        if (is_nan) {
            uint16_t back = f32_to_fp16(f);
            if (!isnan(f) || ((back >> 10) & 31) != 31 || !(back & 1023) ||
                (back & 0x8000) != (h & 0x8000)) {
                if (bad_round++ < 5) fprintf(stderr, "  NaN %04x -> %04x\n", h, back);
            }
            continue;
        }
        if ((double)f != want || !signbit(f) != !signbit(want)) {
            if (bad_decode++ < 5) fprintf(stderr, "  decode %04x: %.9g want %.9g\n", h, f, want);
        }
        uint16_t back = f32_to_fp16(f);
        if (back != h && bad_round++ < 5) fprintf(stderr, "  round trip %04x -> %04x\n", h, back);
    }
    CHECKF(bad_decode == 0, "%d halves decoded wrong", bad_decode);
    CHECKF(bad_round == 0, "%d halves did not round-trip", bad_round);
}

static void test_fp16_known(void) {
    CHECK(f32_to_fp16(1.0f) == 0x3c00);
    CHECK(fp16_to_f32(0x3c00) == 1.0f);
    CHECK(f32_to_fp16(-2.0f) == 0xc000);
    CHECK(f32_to_fp16(0.5f) == 0x3800);
    CHECK(f32_to_fp16(65504.0f) == 0x7bff);
    CHECK(fp16_to_f32(0x7bff) == 65504.0f);
    CHECK(f32_to_fp16(0x1p-24f) == 0x0001); /* smallest subnormal */
    CHECK(fp16_to_f32(0x0001) == 0x1p-24f);
    CHECK(fp16_to_f32(0x03ff) == 0x1.ff8p-15f); /* largest subnormal */
    CHECK(f32_to_fp16(0x1p-14f) == 0x0400);     /* smallest normal */
    CHECK(f32_to_fp16(0.0f) == 0x0000);
    CHECK(f32_to_fp16(-0.0f) == 0x8000);
    float nz = fp16_to_f32(0x8000);
    CHECK(nz == 0.0f && signbit(nz));
    CHECK(f32_to_fp16(INFINITY) == 0x7c00);
    CHECK(f32_to_fp16(-INFINITY) == 0xfc00);
    CHECK(isinf(fp16_to_f32(0x7c00)) && fp16_to_f32(0x7c00) > 0);
    CHECK(f32_to_fp16(1e6f) == 0x7c00);   /* overflow */
    CHECK(f32_to_fp16(-1e6f) == 0xfc00);
    CHECK(f32_to_fp16(1e-10f) == 0x0000); /* underflow */
    CHECK(f32_to_fp16(-1e-10f) == 0x8000);
    CHECK(f32_to_fp16(FLT_TRUE_MIN) == 0x0000);
    CHECK(f32_to_fp16(FLT_MAX) == 0x7c00);
    /* NaN stays NaN, including payloads that only live in the low float bits */
    uint16_t n1 = f32_to_fp16(f_of(0x7f800001u));
    uint16_t n2 = f32_to_fp16(f_of(0xffc00000u));
    CHECK((n1 & 0x7c00) == 0x7c00 && (n1 & 0x3ff) && !(n1 & 0x8000));
    CHECK((n2 & 0x7c00) == 0x7c00 && (n2 & 0x3ff) && (n2 & 0x8000));
    CHECK(isnan(fp16_to_f32(0x7e00)) && isnan(fp16_to_f32(0x7c01)));
}

static void test_fp16_ties(void) {
    /* 1 + 2^-11 lies halfway between 0x3c00 and 0x3c01: to even */
    CHECK(f32_to_fp16(1.0f + 0x1p-11f) == 0x3c00);
    CHECK(f32_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3c02); /* 0x3c01|0x3c02 -> even */
    CHECK(f32_to_fp16(1.0f + 0x1p-11f + 0x1p-23f) == 0x3c01);
    CHECK(f32_to_fp16(1.0f + 0x1p-11f - 0x1p-23f) == 0x3c00);
    CHECK(f32_to_fp16(-(1.0f + 3 * 0x1p-11f)) == 0xbc02);
    /* 2047.5 = tie between 2047 (0x67ff, odd) and 2048 (0x6800) */
    CHECK(f32_to_fp16(2047.5f) == 0x6800);
    CHECK(f32_to_fp16(2046.5f) == 0x67fe);
    /* overflow edge: 65519 -> max, 65520 (tie with "65536") -> inf */
    CHECK(f32_to_fp16(65519.0f) == 0x7bff);
    CHECK(f32_to_fp16(65520.0f) == 0x7c00);
    CHECK(f32_to_fp16(nextafterf(65520.0f, 0)) == 0x7bff);
    /* subnormals: 2^-25 is a tie between 0 and 0x0001 -> 0; 3*2^-25 -> 0x0002 */
    CHECK(f32_to_fp16(0x1p-25f) == 0x0000);
    CHECK(f32_to_fp16(-0x1p-25f) == 0x8000);
    CHECK(f32_to_fp16(nextafterf(0x1p-25f, 1)) == 0x0001);
    CHECK(f32_to_fp16(3 * 0x1p-25f) == 0x0002);
    CHECK(f32_to_fp16(5 * 0x1p-25f) == 0x0002);
    /* subnormal/normal boundary: halfway between 0x03ff and 0x0400 -> 0x0400 */
    CHECK(f32_to_fp16(0x1p-14f - 0x1p-25f) == 0x0400);
    CHECK(f32_to_fp16(0x1p-14f - 3 * 0x1p-25f) == 0x03fe);
}

static void test_fp16_random_rne(void) {
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        float f;
        if (i & 1) { /* exact midpoints between neighbouring halves, and next to them */
            uint16_t h = (uint16_t)(rng_next() % 0x7bff);
            float mid = (float)((half_value(h) + half_value((uint16_t)(h + 1))) / 2);
            int k = (int)(rng_next() % 3);
            f = k == 0 ? mid : nextafterf(mid, k == 1 ? 0.0f : INFINITY);
            if (rng_next() & 1) f = -f;
        } else { /* random bits in the half range and just below it */
            uint32_t e = 127 - 28 + (uint32_t)(rng_next() % 44); /* 2^-28 .. 2^15 */
            f = f_of((uint32_t)(rng_next() & 0x807fffffu) | (e << 23));
        }
        if (fabsf(f) >= 65520.0f) continue;
        uint16_t h = f32_to_fp16(f);
        if (!is_rne(f, h, half_value, 0x7bff, 65536.0) && bad++ < 5)
            fprintf(stderr, "  %a -> %04x is not round-to-nearest-even\n", (double)f, h);
#ifdef __FLT16_MAX__
        /* the compiler's own conversion as a second opinion */
        _Float16 c = (_Float16)f;
        uint16_t hc;
        memcpy(&hc, &c, 2);
        if (hc != h && bad++ < 5) fprintf(stderr, "  %a -> %04x, compiler %04x\n", (double)f, h, hc);
#endif
    }
    CHECKF(bad == 0, "%d conversions wrong", bad);
}

/* ---- bf16 -------------------------------------------------------------------------- */

static void test_bf16(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = bf16_to_f32((uint16_t)h);
        if (bits_of(f) != h << 16 && bad++ < 5) fprintf(stderr, "  decode %04x\n", h);
        uint16_t back = f32_to_bf16(f);
        if (isnan(f)) {
            if ((!((back & 0x7f80) == 0x7f80 && (back & 0x7f)) || (back & 0x8000) != (h & 0x8000)) &&
                bad++ < 5)
                fprintf(stderr, "  NaN %04x -> %04x\n", h, back);
        } else if (back != h && bad++ < 5) {
            fprintf(stderr, "  round trip %04x -> %04x\n", h, back);
        }
    }
    CHECKF(bad == 0, "%d bf16 values wrong", bad);

    CHECK(f32_to_bf16(1.0f) == 0x3f80);
    CHECK(f32_to_bf16(-2.0f) == 0xc000);
    CHECK(f32_to_bf16(3.14159265f) == 0x4049);
    CHECK(f32_to_bf16(-0.0f) == 0x8000);
    CHECK(f32_to_bf16(INFINITY) == 0x7f80);
    CHECK(f32_to_bf16(FLT_MAX) == 0x7f80); /* rounds up past the largest finite */
    CHECK(f32_to_bf16(f_of(0x7f7f7fffu)) == 0x7f7f);
    CHECK(f32_to_bf16(1e-40f) == 0x0001); /* float subnormals are kept, not flushed */
    /* ties to even */
    CHECK(f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);
    CHECK(f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);
    CHECK(f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81);
    CHECK(f32_to_bf16(-(1.0f + 3 * 0x1p-8f)) == 0xbf82);
    /* NaN with payload only in the low bits must not become inf */
    uint16_t n1 = f32_to_bf16(f_of(0x7f800001u));
    uint16_t n2 = f32_to_bf16(f_of(0xff800001u));
    CHECK((n1 & 0x7f80) == 0x7f80 && (n1 & 0x7f) && !(n1 & 0x8000));
    CHECK((n2 & 0x7f80) == 0x7f80 && (n2 & 0x7f) && (n2 & 0x8000));
    CHECK(isnan(bf16_to_f32(n1)));

    bad = 0;
    for (int i = 0; i < 200000; i++) {
        float f = f_of((uint32_t)rng_next());
        if (isnan(f) || fabsf(f) >= f_of(0x7f7f8000u)) continue; /* NaN / rounds to inf */
        uint16_t h = f32_to_bf16(f);
        if (!is_rne(f, h, bf16_value, 0x7f7f, 0x1p128) && bad++ < 5)
            fprintf(stderr, "  %a -> %04x is not round-to-nearest-even\n", (double)f, h);
    }
    CHECKF(bad == 0, "%d random bf16 conversions wrong", bad);
}

/* ---- type table -------------------------------------------------------------------- */

static void test_type_table(void) {
    /* block sizes from ggml-common.h's static_asserts (IQ3_S: d, qs[64], qh[8],
     * signs[32], scales[4] = 110 bytes; 114 made every IQ3_S file in
     * ../shared/models/quant look truncated) */
    static const struct { uint32_t id; const char *name; uint32_t elems, bytes; bool sup; } want[] = {
        {QT_F32, "F32", 1, 4, true},         {QT_F16, "F16", 1, 2, true},
        {QT_Q4_0, "Q4_0", 32, 18, true},     {QT_Q4_1, "Q4_1", 32, 20, true},
        {QT_Q5_0, "Q5_0", 32, 22, true},    {QT_Q5_1, "Q5_1", 32, 24, true},
        {QT_Q8_0, "Q8_0", 32, 34, true},     {QT_Q8_1, "Q8_1", 32, 36, false},
        {QT_Q2_K, "Q2_K", 256, 84, true},   {QT_Q3_K, "Q3_K", 256, 110, true},
        {QT_Q4_K, "Q4_K", 256, 144, true},   {QT_Q5_K, "Q5_K", 256, 176, true},
        {QT_Q6_K, "Q6_K", 256, 210, true},   {QT_Q8_K, "Q8_K", 256, 292, false},
        {QT_IQ2_XXS, "IQ2_XXS", 256, 66, true}, {QT_IQ2_XS, "IQ2_XS", 256, 74, true},
        {QT_IQ3_XXS, "IQ3_XXS", 256, 98, true}, {QT_IQ1_S, "IQ1_S", 256, 50, true},
        {QT_IQ4_NL, "IQ4_NL", 32, 18, true},    {QT_IQ3_S, "IQ3_S", 256, 110, true},
        {QT_IQ2_S, "IQ2_S", 256, 82, true},     {QT_IQ4_XS, "IQ4_XS", 256, 136, true},
        {QT_I8, "I8", 1, 1, false},          {QT_I16, "I16", 1, 2, false},
        {QT_I32, "I32", 1, 4, false},        {QT_I64, "I64", 1, 8, false},
        {QT_F64, "F64", 1, 8, false},        {QT_IQ1_M, "IQ1_M", 256, 56, true},
        {QT_BF16, "BF16", 1, 2, true},       {QT_TQ1_0, "TQ1_0", 256, 54, false},
        {QT_TQ2_0, "TQ2_0", 256, 66, false}, {QT_MXFP4, "MXFP4", 32, 17, true},
    };
    int known = 0;
    for (size_t i = 0; i < LLC_ARRAY_LEN(want); i++) {
        const qtype_info *t = qtype_get(want[i].id);
        CHECKF(t != NULL, "type %u missing", want[i].id);
        if (!t) continue;
        CHECKF(strcmp(t->name, want[i].name) == 0, "type %u named %s", want[i].id, t->name);
        CHECKF(t->block_elems == want[i].elems && t->block_bytes == want[i].bytes,
               "%s: %u elems / %u bytes, want %u / %u", t->name, t->block_elems, t->block_bytes,
               want[i].elems, want[i].bytes);
        CHECKF(t->supported == want[i].sup, "%s supported=%d", t->name, t->supported);
        /* every supported type but the i-quants has a quantizer */
        const bool iq = qtype_is_iq(want[i].id);
        CHECKF(t->quantizable == (want[i].sup && !iq), "%s quantizable=%d", t->name, t->quantizable);
        CHECK(strcmp(qtype_name(want[i].id), want[i].name) == 0);
        CHECK(qtype_from_name(want[i].name) == (int)want[i].id);
    }
    for (uint32_t id = 0; id < QT_COUNT + 10; id++) known += qtype_get(id) != NULL;
    CHECK(known == (int)LLC_ARRAY_LEN(want)); /* 4, 5, 31-33, 36-38 were never assigned */
    CHECK(qtype_get(4) == NULL && qtype_get(31) == NULL && qtype_get(38) == NULL);
    CHECK(qtype_get(QT_COUNT) == NULL && qtype_get(0xffffffffu) == NULL);
    CHECK(strcmp(qtype_name(5), "unknown") == 0);
    CHECK(strcmp(qtype_name(1000), "unknown") == 0);

    CHECK(qtype_from_name("q4_k") == QT_Q4_K);
    CHECK(qtype_from_name("Q6_k") == QT_Q6_K);
    CHECK(qtype_from_name("bf16") == QT_BF16);
    CHECK(qtype_from_name("iq2_xxs") == QT_IQ2_XXS);
    CHECK(qtype_from_name("Q4") == -1);
    CHECK(qtype_from_name("") == -1);
    CHECK(qtype_from_name("Q4_K_M") == -1);
    CHECK(strcmp(qtype_name(QT_IQ2_XXS), "IQ2_XXS") == 0);
    CHECK(strcmp(qtype_name(QT_Q5_K), "Q5_K") == 0);

    CHECK(qtype_row_bytes(QT_F32, 7) == 28);
    CHECK(qtype_row_bytes(QT_F16, 3) == 6);
    CHECK(qtype_row_bytes(QT_BF16, 5) == 10);
    CHECK(qtype_row_bytes(QT_F32, 0) == 0);
    CHECK(qtype_row_bytes(QT_Q8_0, 64) == 68);
    CHECK(qtype_row_bytes(QT_Q8_0, 48) == 0);
    CHECK(qtype_row_bytes(QT_Q4_0, 4096) == 128 * 18);
    CHECK(qtype_row_bytes(QT_Q4_0, 31) == 0);
    CHECK(qtype_row_bytes(QT_Q4_K, 512) == 288);
    CHECK(qtype_row_bytes(QT_Q4_K, 32) == 0);
    CHECK(qtype_row_bytes(QT_Q4_K, 257) == 0);
    CHECK(qtype_row_bytes(QT_Q6_K, 256) == 210);
    CHECK(qtype_row_bytes(QT_Q6_K, 5632) == 22 * 210);
    CHECK(qtype_row_bytes(QT_Q6_K, 100) == 0);
    CHECK(qtype_row_bytes(QT_IQ3_S, 256) == 110);
    CHECK(qtype_row_bytes(QT_MXFP4, 64) == 34);
    CHECK(qtype_row_bytes(QT_Q8_0, -32) == 0);
    CHECK(qtype_row_bytes(4, 32) == 0);
    CHECK(qtype_row_bytes(QT_COUNT, 32) == 0);
}

static void test_unsupported(void) {
    float out[256], in[256];
    uint8_t blk[256 * 4] = {0};
    for (int i = 0; i < 256; i++) in[i] = (float)i;
    static const uint32_t unsup[] = {QT_Q8_1, QT_Q8_K, QT_I8, QT_I32, QT_F64, QT_TQ1_0, QT_TQ2_0};
    for (size_t i = 0; i < LLC_ARRAY_LEN(unsup); i++) {
        CHECKF(dequantize_row(unsup[i], blk, out, 256) == LLC_ERR_UNSUPPORTED, "%s",
               qtype_name(unsup[i]));
        CHECKF(quantize_row(unsup[i], in, blk, 256) == LLC_ERR_UNSUPPORTED, "%s",
               qtype_name(unsup[i]));
        CHECK(strcmp(qtype_name(unsup[i]), "unknown") != 0);
    }
    /* the i-quants are read, never written (their quantizers need an importance matrix) */
    static const uint32_t iq[] = {QT_IQ2_XXS, QT_IQ2_XS, QT_IQ2_S, QT_IQ3_XXS, QT_IQ3_S, QT_IQ1_S, QT_IQ1_M};
    for (size_t i = 0; i < LLC_ARRAY_LEN(iq); i++) {
        CHECKF(qtype_is_iq(iq[i]), "%s", qtype_name(iq[i]));
        CHECKF(dequantize_row(iq[i], blk, out, 256) == 0, "%s", qtype_name(iq[i]));
        CHECKF(quantize_row(iq[i], in, blk, 256) == LLC_ERR_UNSUPPORTED, "%s", qtype_name(iq[i]));
    }
    CHECK(!qtype_is_iq(QT_IQ4_XS) && !qtype_is_iq(QT_Q2_K) && !qtype_is_iq(QT_TQ1_0));
    CHECK(dequantize_row(4, blk, out, 32) < 0);
    CHECK(dequantize_row(QT_COUNT, blk, out, 32) < 0);
    CHECK(quantize_row(77, in, blk, 32) < 0);
    /* n not a multiple of the block: an error, not a partial row */
    CHECK(dequantize_row(QT_Q4_K, blk, out, 128) < 0);
    CHECK(dequantize_row(QT_Q8_0, blk, out, 33) < 0);
    CHECK(quantize_row(QT_Q6_K, in, blk, 255) < 0);
    CHECK(dequantize_row(QT_F32, blk, out, -1) < 0);
    CHECK(dequantize_row(QT_Q8_0, blk, out, 0) == 0);
}

/* ---- hand-built blocks ------------------------------------------------------------------ */

static void test_q8_0_blocks(void) {
    /* two blocks at an odd address */
    uint8_t *buf = malloc(1 + 2 * 34), *b = buf + 1;
    put16(b, 0x3800); /* 0.5 */
    for (int j = 0; j < 32; j++) b[2 + j] = (uint8_t)(int8_t)(j * 8 - 128);
    put16(b + 34, 0xc000); /* -2 */
    for (int j = 0; j < 32; j++) b[34 + 2 + j] = (uint8_t)(int8_t)(127 - j * 5);
    float y[64];
    CHECK(dequantize_row(QT_Q8_0, b, y, 64) == 0);
    for (int j = 0; j < 32; j++) {
        CHECKF(y[j] == (float)(j * 8 - 128) * 0.5f, "elem %d: %g", j, y[j]);
        CHECKF(y[32 + j] == (float)(127 - j * 5) * -2.0f, "elem %d: %g", 32 + j, y[32 + j]);
    }
    CHECK(y[0] == -64.0f && y[31] == 60.0f && y[32] == -254.0f && y[63] == -(127 - 155) * 2.0f);
    free(buf);
}

static void test_q4_0_blocks(void) {
    uint8_t *buf = malloc(3 + 2 * 18), *b = buf + 3;
    put16(b, 0x4000); /* 2 */
    for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)((j & 15) | (((j * 5 + 3) & 15) << 4));
    put16(b + 18, 0xb400); /* -0.25 */
    for (int j = 0; j < 16; j++) b[18 + 2 + j] = (uint8_t)(0xf0 ^ (j * 17));
    b[18 + 2 + 0] = 0x1f; /* literal: elem 32 -> nibble 15, elem 48 -> nibble 1 */
    float y[64];
    CHECK(dequantize_row(QT_Q4_0, b, y, 64) == 0);
    for (int j = 0; j < 16; j++) {
        /* low nibble of byte j is element j, high nibble element j+16 */
        CHECKF(y[j] == (float)((j & 15) - 8) * 2.0f, "elem %d: %g", j, y[j]);
        CHECKF(y[16 + j] == (float)(((j * 5 + 3) & 15) - 8) * 2.0f, "elem %d: %g", 16 + j, y[16 + j]);
        if (j == 0) continue;
        uint8_t v = (uint8_t)(0xf0 ^ (j * 17));
        CHECKF(y[32 + j] == (float)((v & 15) - 8) * -0.25f, "elem %d", 32 + j);
        CHECKF(y[48 + j] == (float)((v >> 4) - 8) * -0.25f, "elem %d", 48 + j);
    }
    CHECK(y[0] == -16.0f && y[16] == -10.0f && y[15] == 14.0f);
    CHECK(y[32] == -1.75f && y[48] == 1.75f);
    free(buf);
}

/* Q4_K: d = 0.25, dmin = 0.5; the 12 scale bytes spell out
 *   scales = {1, 22, 45, 63, 7, 18, 37, 60}, mins = {3, 16, 33, 50, 52, 9, 27, 44}
 * (sub-blocks 4..7 take their high two bits from bits 6-7 of bytes 0..7, covering
 * every combination 0..3 of high bits for both scales and mins). */
static const uint8_t q4k_scale_bytes[12] = {0x01, 0x56, 0xad, 0xff, 0xc3, 0x10,
                                            0x61, 0xb2, 0x47, 0x92, 0xb5, 0xcc};
static const int q4k_sc[8] = {1, 22, 45, 63, 7, 18, 37, 60};
static const int q4k_mn[8] = {3, 16, 33, 50, 52, 9, 27, 44};

static int q4k_L(int e, int blk) { return blk == 0 ? ((e * 5 + (e >> 5)) & 15) : (15 - (e % 13)); }

static void test_q4_K_blocks(void) {
    uint8_t *buf = malloc(1 + 2 * 144), *b = buf + 1;
    for (int blk = 0; blk < 2; blk++) {
        uint8_t *p = b + 144 * blk;
        put16(p, blk == 0 ? 0x3400 : 0x3c00);     /* d = 0.25 | 1 */
        put16(p + 2, blk == 0 ? 0x3800 : 0x4000); /* dmin = 0.5 | 2 */
        memcpy(p + 4, q4k_scale_bytes, 12);
        /* 4 runs of 32 bytes: low nibbles = sub-block 2r, high nibbles = 2r+1 */
        for (int r = 0; r < 4; r++)
            for (int l = 0; l < 32; l++)
                p[16 + 32 * r + l] =
                    (uint8_t)(q4k_L(64 * r + l, blk) | (q4k_L(64 * r + 32 + l, blk) << 4));
    }
    float y[512];
    CHECK(dequantize_row(QT_Q4_K, b, y, 512) == 0);
    int bad = 0;
    for (int blk = 0; blk < 2; blk++) {
        float d = blk == 0 ? 0.25f : 1.0f, dmin = blk == 0 ? 0.5f : 2.0f;
        for (int e = 0; e < 256; e++) {
            int j = e / 32;
            float want = d * (float)q4k_sc[j] * (float)q4k_L(e, blk) - dmin * (float)q4k_mn[j];
            if (y[256 * blk + e] != want && bad++ < 8)
                fprintf(stderr, "  block %d elem %d: %g want %g\n", blk, e, y[256 * blk + e], want);
        }
    }
    CHECKF(bad == 0, "%d Q4_K values wrong", bad);
    /* a few worked by hand */
    CHECK(y[0] == -1.5f);    /* sub 0: q 0, min 3 */
    CHECK(y[33] == 25.0f);   /* sub 1: 0.25*22*6 - 0.5*16 */
    CHECK(y[141] == -17.25f); /* sub 4: 0.25*7*5 - 0.5*52 */
    CHECK(y[170] == 27.0f);  /* sub 5: 0.25*18*7 - 0.5*9 */
    CHECK(y[200] == 116.0f); /* sub 6: 0.25*37*14 - 0.5*27 */
    CHECK(y[255] == 8.0f);   /* sub 7: 0.25*60*2 - 0.5*44 */
    free(buf);
}

/* Q6_K packing of 256 six-bit quants L (0..63), written from ggml's layout. */
static void q6k_pack(const uint8_t *L, uint8_t *ql, uint8_t *qh) {
    for (int h = 0; h < 2; h++) {
        const uint8_t *Lh = L + 128 * h;
        for (int l = 0; l < 32; l++) {
            ql[64 * h + l] = (uint8_t)((Lh[l] & 15) | ((Lh[l + 64] & 15) << 4));
            ql[64 * h + l + 32] = (uint8_t)((Lh[l + 32] & 15) | ((Lh[l + 96] & 15) << 4));
            qh[32 * h + l] = (uint8_t)((Lh[l] >> 4) | (Lh[l + 32] >> 4) << 2 |
                                       (Lh[l + 64] >> 4) << 4 | (Lh[l + 96] >> 4) << 6);
        }
    }
}

static void test_q6_K_blocks(void) {
    static const int8_t sc[16] = {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12, 13, 100, 127, -128};
    uint8_t *buf = malloc(1 + 2 * 210), *b = buf + 1;
    uint8_t L[2][256];
    for (int e = 0; e < 256; e++) {
        L[0][e] = (uint8_t)((e * 11 + 3) & 63);
        L[1][e] = (uint8_t)(63 - ((e * 7) % 64));
    }
    for (int blk = 0; blk < 2; blk++) {
        uint8_t *p = b + 210 * blk;
        q6k_pack(L[blk], p, p + 128);
        memcpy(p + 192, sc, 16);
        put16(p + 208, blk == 0 ? 0x3800 : 0xbc00); /* 0.5 | -1 */
    }
    float y[512];
    CHECK(dequantize_row(QT_Q6_K, b, y, 512) == 0);
    int bad = 0;
    for (int blk = 0; blk < 2; blk++) {
        float d = blk == 0 ? 0.5f : -1.0f;
        for (int e = 0; e < 256; e++) {
            float want = d * (float)sc[e / 16] * (float)(L[blk][e] - 32);
            if (y[256 * blk + e] != want && bad++ < 8)
                fprintf(stderr, "  block %d elem %d: %g want %g\n", blk, e, y[256 * blk + e], want);
        }
    }
    CHECKF(bad == 0, "%d Q6_K values wrong", bad);

    /* Literal bytes, independent of q6k_pack: d = 1, scale of group g = +-(g+1). */
    uint8_t p[210] = {0};
    for (int g = 0; g < 16; g++) p[192 + g] = (uint8_t)(int8_t)((g & 1) ? -(g + 1) : g + 1);
    put16(p + 208, 0x3c00);
    p[0] = 0x21;        /* elem 0 low = 1, elem 64 low = 2 */
    p[32] = 0x43;       /* elem 32 low = 3, elem 96 low = 4 */
    p[128] = 0xe4;      /* high bits: elem 0: 0, elem 32: 1, elem 64: 2, elem 96: 3 */
    p[64 + 5] = 0x9a;   /* second half: elem 133 low = 10, elem 197 low = 9 */
    p[128 + 32 + 5] = 0x1b; /* elem 133: 3, elem 165: 2, elem 197: 1, elem 229: 0 */
    float z[256];
    CHECK(dequantize_row(QT_Q6_K, p, z, 256) == 0);
    CHECK(z[0] == -31.0f);   /* (1 | 0<<4) - 32, group 0 scale 1 */
    CHECK(z[32] == -39.0f);  /* (3 | 1<<4) - 32 = -13, group 2 scale 3 */
    CHECK(z[64] == 10.0f);   /* (2 | 2<<4) - 32 = 2, group 4 scale 5 */
    CHECK(z[96] == 140.0f);  /* (4 | 3<<4) - 32 = 20, group 6 scale 7 */
    CHECK(z[133] == 234.0f); /* (10 | 3<<4) - 32 = 26, group 8 scale 9 */
    CHECK(z[165] == 0.0f);   /* (0 | 2<<4) - 32 = 0, group 10 */
    CHECK(z[197] == -91.0f); /* (9 | 1<<4) - 32 = -7, group 12 scale 13 */
    CHECK(z[229] == -480.0f); /* 0 - 32, group 14 scale 15 */
    CHECK(z[1] == -32.0f && z[16] == 64.0f && z[255] == 512.0f); /* all-zero quants */
    free(buf);
}

/* ---- the other common types: blocks of random bytes with fixed scales, decoded by
 * the test's own transcription of ggml's dequantization loops ----------------------- */

static void t_q4k_scale_min(const uint8_t *q, int j, int *sc, int *mn);

static const int t_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* An E2M1 code (OCP microscaling spec): sign bit 3, exponent bits 1-2 (bias 1),
 * mantissa bit 0; exponent 0 is subnormal (0 or 0.5). */
static double t_e2m1(int u) {
    const int sign = u >> 3, e = (u >> 1) & 3, m = u & 1;
    const double v = e ? ldexp(1.0 + 0.5 * m, e - 1) : 0.5 * m;
    return sign ? -v : v;
}

static uint32_t get32(const uint8_t *p) { return (uint32_t)get16(p) | (uint32_t)get16(p + 2) << 16; }

/* 8 values db · grid byte j · (bit j of signs ? -1 : 1) */
static void t_grid8(double *y, uint64_t grid, int signs, double db) {
    for (int j = 0; j < 8; j++) y[j] = db * (double)((grid >> 8 * j) & 0xff) * (signs >> j & 1 ? -1 : 1);
}
/* 8 values dl · (int8 grid byte j + delta) */
static void t_iq1_8(double *y, uint64_t grid, double dl, double delta) {
    for (int j = 0; j < 8; j++) y[j] = dl * ((double)(int8_t)(uint8_t)(grid >> 8 * j) + delta);
}

/* Expected values of nb blocks of `type` at b, following ggml-quants.c's loops. */
static void t_decode(uint32_t type, const uint8_t *b, int nb, double *y) {
    for (int i = 0; i < nb; i++) {
        switch (type) {
        case QT_Q4_1: { /* d, m, qs[16] */
            const uint8_t *p = b + 20 * i;
            double d = half_value(get16(p)), m = half_value(get16(p + 2));
            for (int j = 0; j < 16; j++) {
                *(y + 32 * i + j) = (p[4 + j] & 0x0F) * d + m;
                *(y + 32 * i + j + 16) = (p[4 + j] >> 4) * d + m;
            }
            break;
        }
        case QT_Q5_0:
        case QT_Q5_1: { /* d, [m], qh[4], qs[16] */
            const int one = type == QT_Q5_1, bs = one ? 24 : 22;
            const uint8_t *p = b + bs * i, *qhp = p + (one ? 4 : 2), *qs = qhp + 4;
            double d = half_value(get16(p)), m = one ? half_value(get16(p + 2)) : 0;
            uint32_t qh = (uint32_t)qhp[0] | (uint32_t)qhp[1] << 8 | (uint32_t)qhp[2] << 16 | (uint32_t)qhp[3] << 24;
            for (int j = 0; j < 16; j++) {
                int xh0 = ((qh >> (j + 0)) << 4) & 0x10;
                int xh1 = ((qh >> (j + 12))) & 0x10;
                int x0 = (qs[j] & 0x0F) | xh0, x1 = (qs[j] >> 4) | xh1;
                if (!one) x0 -= 16, x1 -= 16;
                y[32 * i + j] = x0 * d + m;
                y[32 * i + j + 16] = x1 * d + m;
            }
            break;
        }
        case QT_Q2_K: { /* scales[16], qs[64], d, dmin */
            const uint8_t *p = b + 84 * i, *q = p + 16;
            double d = half_value(get16(p + 80)), mn = half_value(get16(p + 82));
            double *yy = y + 256 * i;
            int is = 0;
            for (int n = 0; n < 256; n += 128, q += 32)
                for (int shift = 0; shift < 8; shift += 2) {
                    int sc = p[is++];
                    for (int l = 0; l < 16; ++l) *yy++ = d * (sc & 0xF) * ((q[l] >> shift) & 3) - mn * (sc >> 4);
                    sc = p[is++];
                    for (int l = 0; l < 16; ++l) *yy++ = d * (sc & 0xF) * ((q[l + 16] >> shift) & 3) - mn * (sc >> 4);
                }
            break;
        }
        case QT_Q3_K: { /* hmask[32], qs[64], scales[12], d */
            const uint8_t *p = b + 110 * i, *hm = p, *q = p + 32, *s = p + 96;
            double d = half_value(get16(p + 108));
            int sc[16];
            for (int k = 0; k < 16; k++) {
                int lo = k < 8 ? s[k] & 0xF : s[k - 8] >> 4;
                int hi = k < 4 ? s[k + 8] & 3 : k < 8 ? (s[k + 4] >> 2) & 3 : k < 12 ? (s[k] >> 4) & 3 : (s[k - 4] >> 6) & 3;
                sc[k] = (lo | hi << 4) - 32;
            }
            double *yy = y + 256 * i;
            int is = 0, m = 1;
            for (int n = 0; n < 256; n += 128, q += 32)
                for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
                    double dl = d * sc[is++];
                    for (int l = 0; l < 16; ++l) *yy++ = dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                    dl = d * sc[is++];
                    for (int l = 0; l < 16; ++l) *yy++ = dl * (((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
                }
            break;
        }
        case QT_Q5_K: { /* d, dmin, scales[12], qh[32], qs[128] */
            const uint8_t *p = b + 176 * i, *ql = p + 48, *qh = p + 16;
            double d = half_value(get16(p)), mn = half_value(get16(p + 2));
            double *yy = y + 256 * i;
            int is = 0, u1 = 1, u2 = 2;
            for (int j = 0; j < 256; j += 64, ql += 32, is += 2, u1 <<= 2, u2 <<= 2) {
                int sc, m;
                t_q4k_scale_min(p + 4, is, &sc, &m);
                double d1 = d * sc, m1 = mn * m;
                t_q4k_scale_min(p + 4, is + 1, &sc, &m);
                double d2 = d * sc, m2 = mn * m;
                for (int l = 0; l < 32; ++l) *yy++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
                for (int l = 0; l < 32; ++l) *yy++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            }
            break;
        }
        case QT_IQ4_NL: { /* d, qs[16] */
            const uint8_t *p = b + 18 * i;
            double d = half_value(get16(p));
            for (int j = 0; j < 16; ++j) {
                y[32 * i + j] = d * t_iq4nl[p[2 + j] & 0xf];
                y[32 * i + j + 16] = d * t_iq4nl[p[2 + j] >> 4];
            }
            break;
        }
        case QT_IQ4_XS: { /* d, scales_h, scales_l[4], qs[128] */
            const uint8_t *p = b + 136 * i, *qs = p + 8;
            double d = half_value(get16(p));
            int sh = get16(p + 2);
            double *yy = y + 256 * i;
            for (int ib = 0; ib < 8; ++ib, qs += 16, yy += 32) {
                int ls = ((p[4 + ib / 2] >> 4 * (ib % 2)) & 0xf) | (((sh >> 2 * ib) & 3) << 4);
                double dl = d * (ls - 32);
                for (int j = 0; j < 16; ++j) {
                    yy[j] = dl * t_iq4nl[qs[j] & 0xf];
                    yy[j + 16] = dl * t_iq4nl[qs[j] >> 4];
                }
            }
            break;
        }
        case QT_IQ2_XXS: { /* d, qs as uint32 pairs: 4 grid bytes | 4 x 7 sign bits + 4-bit scale */
            const uint8_t *p = b + 66 * i;
            double d = half_value(get16(p));
            double *yy = y + 256 * i;
            for (int ib = 0; ib < 8; ib++) {
                uint32_t a0 = get32(p + 2 + 8 * ib), a1 = get32(p + 6 + 8 * ib);
                double db = d * (0.5 + (a1 >> 28)) * 0.25;
                for (int l = 0; l < 4; l++, yy += 8)
                    t_grid8(yy, iq2xxs_grid[(a0 >> 8 * l) & 255], ksigns_iq2xs[(a1 >> 7 * l) & 127], db);
            }
            break;
        }
        case QT_IQ2_XS: { /* d, qs uint16[32] (9-bit index | 7-bit signs), scales[8] */
            const uint8_t *p = b + 74 * i;
            double d = half_value(get16(p));
            double *yy = y + 256 * i;
            for (int ib = 0; ib < 8; ib++)
                for (int l = 0; l < 4; l++, yy += 8) {
                    int q = get16(p + 2 + 2 * (4 * ib + l)), sc = p[66 + ib];
                    double db = d * (0.5 + (l < 2 ? sc & 0xf : sc >> 4)) * 0.25;
                    t_grid8(yy, iq2xs_grid[q & 511], ksigns_iq2xs[q >> 9], db);
                }
            break;
        }
        case QT_IQ2_S: { /* d, qs[32], signs[32], qh[8], scales[8] */
            const uint8_t *p = b + 82 * i, *qs = p + 2, *sg = p + 34, *qh = p + 66, *sc = p + 74;
            double d = half_value(get16(p));
            double *yy = y + 256 * i;
            for (int ib = 0; ib < 8; ib++)
                for (int l = 0; l < 4; l++, yy += 8) {
                    double db = d * (0.5 + (l < 2 ? sc[ib] & 0xf : sc[ib] >> 4)) * 0.25;
                    t_grid8(yy, iq2s_grid[qs[4 * ib + l] | (qh[ib] << (8 - 2 * l) & 0x300)], sg[4 * ib + l], db);
                }
            break;
        }
        case QT_IQ3_XXS: { /* d, qs[64] (grid bytes), 8 x uint32 (4 x 7 sign bits + scale) */
            const uint8_t *p = b + 98 * i, *qs = p + 2;
            double d = half_value(get16(p));
            double *yy = y + 256 * i;
            for (int ib = 0; ib < 8; ib++) {
                uint32_t a = get32(p + 66 + 4 * ib);
                double db = d * (0.5 + (a >> 28)) * 0.5;
                for (int l = 0; l < 4; l++, yy += 8) {
                    uint64_t g = iq3xxs_grid[qs[8 * ib + 2 * l]] | (uint64_t)iq3xxs_grid[qs[8 * ib + 2 * l + 1]] << 32;
                    t_grid8(yy, g, ksigns_iq2xs[(a >> 7 * l) & 127], db);
                }
            }
            break;
        }
        case QT_IQ3_S: { /* d, qs[64], qh[8], signs[32], scales[4] */
            const uint8_t *p = b + 110 * i, *qs = p + 2, *qh = p + 66, *sg = p + 74, *sc = p + 106;
            double d = half_value(get16(p));
            double *yy = y + 256 * i;
            for (int ib = 0; ib < 8; ib++) {
                double db = d * (1 + 2 * ((sc[ib / 2] >> 4 * (ib % 2)) & 0xf));
                for (int l = 0; l < 4; l++, yy += 8) {
                    uint32_t g1 = iq3s_grid[qs[8 * ib + 2 * l] | ((qh[ib] << (8 - 2 * l)) & 256)];
                    uint32_t g2 = iq3s_grid[qs[8 * ib + 2 * l + 1] | ((qh[ib] << (7 - 2 * l)) & 256)];
                    t_grid8(yy, g1 | (uint64_t)g2 << 32, sg[4 * ib + l], db);
                }
            }
            break;
        }
        case QT_IQ1_S: { /* d, qs[32], qh uint16[8] */
            const uint8_t *p = b + 50 * i, *qs = p + 2;
            double d = half_value(get16(p));
            double *yy = y + 256 * i;
            for (int ib = 0; ib < 8; ib++) {
                int h = get16(p + 34 + 2 * ib);
                double dl = d * (2 * ((h >> 12) & 7) + 1), delta = h & 0x8000 ? -0.125 : 0.125;
                for (int l = 0; l < 4; l++, yy += 8)
                    t_iq1_8(yy, iq1s_grid[qs[4 * ib + l] | (((h >> 3 * l) & 7) << 8)], dl, delta);
            }
            break;
        }
        case QT_IQ1_M: { /* qs[32], qh[16], scales uint16[4] (d in their top nibbles) */
            const uint8_t *p = b + 56 * i, *qs = p, *qh = p + 32, *s8 = p + 48;
            int sc[4];
            for (int k = 0; k < 4; k++) sc[k] = get16(s8 + 2 * k);
            double d = half_value((uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0xf0) | ((sc[2] >> 4) & 0xf00) | (sc[3] & 0xf000)));
            double *yy = y + 256 * i;
            for (int ib = 0; ib < 8; ib++, qs += 4, qh += 2) {
                double dl1 = d * (2 * ((sc[ib / 2] >> (6 * (ib % 2))) & 7) + 1);
                double dl2 = d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1);
                int idx[4] = {qs[0] | ((qh[0] << 8) & 0x700), qs[1] | ((qh[0] << 4) & 0x700),
                              qs[2] | ((qh[1] << 8) & 0x700), qs[3] | ((qh[1] << 4) & 0x700)};
                double dt[4] = {qh[0] & 8 ? -0.125 : 0.125, qh[0] & 0x80 ? -0.125 : 0.125,
                                qh[1] & 8 ? -0.125 : 0.125, qh[1] & 0x80 ? -0.125 : 0.125};
                for (int l = 0; l < 4; l++, yy += 8) t_iq1_8(yy, iq1s_grid[idx[l]], l < 2 ? dl1 : dl2, dt[l]);
            }
            break;
        }
        case QT_MXFP4: { /* e (E8M0), qs[16]: 2^(e-127) * E2M1(u), E2M1 from its bits */
            const uint8_t *p = b + 17 * i;
            const double scale = ldexp(1.0, p[0] - 127);
            for (int j = 0; j < 32; ++j) {
                const int u = j < 16 ? p[1 + j] & 0xf : p[1 + j - 16] >> 4;
                y[32 * i + j] = scale * t_e2m1(u);
            }
            break;
        }
        default: break;
        }
    }
}

/* Each type: three blocks of random bytes at an odd address, their fp16 scale
 * fields set to small powers of two (so every product is exact and a wrong element
 * cannot hide in rounding), must decode exactly as ggml's loops do; and literal
 * spot values pin what a shared misreading of the layout could not. */
static void test_more_blocks(void) {
    static const uint32_t types[] = {QT_Q4_1, QT_Q5_0, QT_Q5_1, QT_Q2_K, QT_Q3_K, QT_Q5_K, QT_IQ4_NL, QT_IQ4_XS,
                                     QT_MXFP4, QT_IQ2_XXS, QT_IQ2_XS, QT_IQ2_S, QT_IQ3_XXS, QT_IQ3_S, QT_IQ1_S,
                                     QT_IQ1_M};
    enum { NB = 3 };
    for (size_t t = 0; t < LLC_ARRAY_LEN(types); t++) {
        const uint32_t type = types[t];
        const qtype_info *qi = qtype_get(type);
        const int bb = (int)qi->block_bytes, be = (int)qi->block_elems;
        uint8_t *buf = malloc((size_t)(bb * NB + 1)), *b = buf + 1;
        float *y = malloc(sizeof(float) * (size_t)(be * NB));
        double *want = malloc(sizeof(double) * (size_t)(be * NB));
        for (int rep = 0; rep < 4; rep++) {
            for (int i = 0; i < bb * NB; i++) b[i] = (uint8_t)rng_next();
            for (int k = 0; k < NB; k++) {
                uint8_t *p = b + bb * k;
                const uint16_t h1 = (uint16_t)(0x3000 + 0x400 * (rng_next() % 8)), h2 = (uint16_t)(0x2c00 + 0x400 * (rng_next() % 4));
                switch (type) { /* (sign bits random too) */
                case QT_Q2_K: put16(p + 80, h1 | (rep & 1) << 15), put16(p + 82, h2); break;
                case QT_Q3_K: put16(p + 108, h1 | (rep & 1) << 15); break;
                case QT_Q4_1: case QT_Q5_1: case QT_Q5_K: put16(p, h1), put16(p + 2, h2 | (rep & 2) << 14); break;
                case QT_IQ1_M: /* d's 16 bits in the top nibbles of the four scale words */
                    for (int w = 0; w < 4; w++) p[48 + 2 * w + 1] = (uint8_t)((p[48 + 2 * w + 1] & 0x0f) | ((h1 | (rep & 1) << 15) >> (4 * w) & 0xf) << 4);
                    break;
                case QT_MXFP4: /* exponents from 0 (2^-127: subnormal halves) to 250 (above,
                                * 12 * 2^(e-128) overflows a float: see the spot checks) */
                    p[0] = (uint8_t)(rep == 0 ? k : rep == 1 ? 250 - k : (int)(rng_next() % 251)); break;
                default: put16(p, h1 | (rep & 1) << 15); break;
                }
            }
            CHECK(dequantize_row(type, b, y, be * NB) == 0);
            t_decode(type, b, NB, want);
            int bad = 0;
            for (int e = 0; e < be * NB; e++)
                if ((double)y[e] != want[e] && bad++ < 3)
                    CHECKF(0, "%s elem %d: %g, want %g", qi->name, e, y[e], want[e]);
            CHECKF(bad == 0, "%s: %d elements wrong", qi->name, bad);
        }
        free(buf);
        free(y);
        free(want);
    }

    /* literal spot checks, one block each */
    uint8_t blk[256] = {0};
    float y[256];
    /* Q5_0: d = 0.5, qh bit 3 and bit 20 set; qs[3] = 0x21, qs[4] = 0x0f */
    memset(blk, 0, sizeof blk);
    put16(blk, 0x3800);
    blk[2] = 0x08, blk[2 + 2] = 0x10;
    blk[6 + 3] = 0x21, blk[6 + 4] = 0x0f;
    CHECK(dequantize_row(QT_Q5_0, blk, y, 32) == 0);
    CHECK(y[3] == (17 - 16) * 0.5f && y[19] == (2 - 16) * 0.5f && y[4] == (15 - 16) * 0.5f &&
          y[20] == (16 - 16) * 0.5f && y[0] == -8.0f);
    /* Q2_K: d = 1, dmin = 0.5; group 5 (elements 80-95: half 0, shift 4, bytes 16-31)
     * has scale 3, min 2; qs[16] = 0x30 → element 80 is u = 3 */
    memset(blk, 0, sizeof blk);
    put16(blk + 80, 0x3c00), put16(blk + 82, 0x3800);
    blk[5] = 0x23;
    blk[16 + 16] = 0x30;
    CHECK(dequantize_row(QT_Q2_K, blk, y, 256) == 0);
    CHECK(y[80] == 3 * 3 - 1.0f && y[81] == -1.0f && y[79] == 0.0f && y[96] == 0.0f);
    /* Q3_K: d = 1; scale 9 (elements 144-159: half 1, shift 0, bytes 16-31 of the
     * half's qs, hmask bit 4) = 0x25 - 32 = 5: low nibble 5 in the high nibble of
     * byte 1, high bits 2 in bits 4-5 of byte 9; element 144 has u = 2 | hbit 1 → 6 */
    memset(blk, 0, sizeof blk);
    put16(blk + 108, 0x3c00);
    blk[96 + 1] = 0x50, blk[96 + 9] = 0x20;
    blk[32 + 32 + 16] = 0x02;
    blk[16] = 0x10;
    CHECK(dequantize_row(QT_Q3_K, blk, y, 256) == 0);
    CHECK(y[144] == 5 * (6 - 4) && y[145] == 5 * -4 && y[0] == -32 * -4);
    /* IQ4_XS: d = 0.25; sub-block 5 scale = 0x2a - 32 = 10 (low nibble a in the high
     * nibble of scales_l[2], high bits 2 at bits 10-11 of scales_h); qs[80] = 0xf0 */
    memset(blk, 0, sizeof blk);
    put16(blk, 0x3400);
    put16(blk + 2, 2 << 10);
    blk[4 + 2] = 0xa0;
    blk[8 + 80] = 0xf0;
    CHECK(dequantize_row(QT_IQ4_XS, blk, y, 256) == 0);
    CHECK(y[160] == 0.25f * 10 * -127 && y[176] == 0.25f * 10 * 113 && y[0] == 0.25f * -32 * -127);
    /* MXFP4: e = 127 is a scale of 1, so the codes decode to the E2M1 values
     * themselves: qs[0] = 0x71 → element 0 is 0.5, element 16 is 6; qs[1] = 0xf9 →
     * -0.5 and -6; qs[2] = 0x0c → -2 and +0 (code 8 is -0) */
    memset(blk, 0, sizeof blk);
    blk[0] = 127;
    blk[1] = 0x71, blk[2] = 0xf9, blk[3] = 0x8c;
    CHECK(dequantize_row(QT_MXFP4, blk, y, 32) == 0);
    CHECK(y[0] == 0.5f && y[16] == 6.0f && y[1] == -0.5f && y[17] == -6.0f && y[2] == -2.0f && y[18] == 0.0f);
    CHECK(y[3] == 0.0f && y[31] == 0.0f);
    /* the extreme exponents: e = 0 is 2^-127 (a subnormal float), e = 255 is 2^128 */
    blk[0] = 0;
    CHECK(dequantize_row(QT_MXFP4, blk, y, 32) == 0);
    CHECK(y[0] == 0x1p-128f && y[16] == 6 * 0x1p-127f);
    blk[0] = 255;
    CHECK(dequantize_row(QT_MXFP4, blk, y, 32) == 0);
    CHECK(y[0] == 0x1p127f && y[17] == -INFINITY);
    CHECK(e8m0_half_to_f32(1) == 0x1p-127f && e8m0_half_to_f32(2) == 0x1p-126f && e8m0_half_to_f32(200) == 0x1p72f);
}

/* The i-quant tables are file-format data (iq_tables.c, from ggml-common.h): each
 * grid's entries are distinct and made only of its levels; their sums
 * mod 2^64 (taken from ggml's source when extracted) and a few literal entries pin
 * the values; the sign tables follow their rule. */
static void test_iq_tables(void) {
    static const struct {
        const char *name; const void *t; int n, bytes; uint64_t sum; uint8_t lv[8]; int n_lv;
    } g[] = {
        {"iq2xxs", iq2xxs_grid, 256, 8, 10026840302681211747ull, {8, 25, 43}, 3},
        {"iq2xs", iq2xs_grid, 512, 8, 3032300602630837921ull, {8, 25, 43}, 3},
        {"iq2s", iq2s_grid, 1024, 8, 8502338067238609906ull, {8, 25, 43}, 3},
        {"iq3xxs", iq3xxs_grid, 256, 4, 108356387642ull, {4, 12, 20, 28, 36, 44, 52, 62}, 8},
        {"iq3s", iq3s_grid, 512, 4, 53294177878ull, {1, 3, 5, 7, 9, 11, 13, 15}, 8},
        {"iq1s", iq1s_grid, 2048, 8, 7590341501443526924ull, {0xff, 0, 1}, 3},
    };
    for (size_t k = 0; k < LLC_ARRAY_LEN(g); k++) {
        uint64_t sum = 0;
        int bad_lv = 0, dup = 0;
#define GRID_AT(i) (g[k].bytes == 8 ? ((const uint64_t *)g[k].t)[i] : ((const uint32_t *)g[k].t)[i])
        for (int i = 0; i < g[k].n; i++) {
            const uint64_t v = GRID_AT(i);
            sum += v;
            for (int i2 = 0; i2 < i; i2++) dup += GRID_AT(i2) == v;
            for (int j = 0; j < g[k].bytes; j++) {
                const uint8_t byte = (uint8_t)(v >> 8 * j);
                bad_lv += memchr(g[k].lv, byte, (size_t)g[k].n_lv) == NULL;
            }
        }
        CHECKF(sum == g[k].sum, "%s_grid: sum %llu", g[k].name, (unsigned long long)sum);
        CHECKF(dup == 0 && bad_lv == 0, "%s_grid: %d repeated entries, %d bytes off its levels", g[k].name,
               dup, bad_lv);
    }
#undef GRID_AT
    CHECK(iq2xxs_grid[1] == 0x080808080808082bull && iq2xs_grid[511] == 0x2b2b2b2b2b2b2b2bull);
    CHECK(iq2s_grid[100] == 0x080819081919192bull && iq3xxs_grid[255] == 0x3e341c04u);
    CHECK(iq3s_grid[100] == 0x010f0101u && iq1s_grid[100] == 0xffff000000000000ull);
    for (int i = 0; i < 128; i++) {
        CHECK((ksigns_iq2xs[i] & 127) == i && __builtin_parity(ksigns_iq2xs[i]) == 0);
        for (int j = 0; j < 8; j++)
            CHECK((int8_t)(iq_signs_pm1[i] >> 8 * j) == (ksigns_iq2xs[i] >> j & 1 ? -1 : 1));
    }
}

/* Literal i-quant blocks, decoded by hand from ggml-common.h's layouts. */
static void test_iq_blocks(void) {
    uint8_t blk[128];
    float y[256];
    /* IQ2_XXS, d = 1: sub-block 1 has grid bytes 0, 1, 2, 3 and w1 = sign index 1 for
     * group 1 (ksigns 129: elements 0 and 7 negative), scale 3 → 7/8 */
    memset(blk, 0, sizeof blk);
    put16(blk, 0x3c00);
    blk[2 + 8 + 1] = 1, blk[2 + 8 + 2] = 2, blk[2 + 8 + 3] = 3;
    const uint32_t w1 = 1u << 7 | 3u << 28;
    for (int k = 0; k < 4; k++) blk[2 + 8 + 4 + k] = (uint8_t)(w1 >> 8 * k);
    CHECK(dequantize_row(QT_IQ2_XXS, blk, y, 256) == 0);
    CHECK(y[32] == 7.0f && y[40] == -43 * 0.875f && y[41] == 7.0f && y[47] == -7.0f && y[0] == 1.0f);
    /* IQ3_S, d = 0.5: sub-block 1 (scale nibble 2 → 5, the high nibble of scales[0]),
     * half-group 1 index 1 | qh bit 1 → 257; its sign byte has bit 5 (element 4+1) */
    memset(blk, 0, sizeof blk);
    put16(blk, 0x3800);
    blk[106] = 0x20;
    blk[2 + 8 + 1] = 1, blk[66 + 1] = 0x02, blk[74 + 4] = 0x20;
    CHECK(dequantize_row(QT_IQ3_S, blk, y, 256) == 0);
    const uint32_t g257 = iq3s_grid[257];
    CHECK(y[36] == 2.5f * (float)(g257 & 0xff) && y[37] == -2.5f * (float)(g257 >> 8 & 0xff));
    CHECK(y[32] == 2.5f && y[0] == 0.5f);
    /* IQ1_S, d = 1: sub-block 0 qh = delta negative | scale 1 (→ 3) | group 1 index bits
     * 8-10 = 5: group 1 is iq1s_grid[0x500] * 3 - 3/8 */
    memset(blk, 0, sizeof blk);
    put16(blk, 0x3c00);
    put16(blk + 34, (uint16_t)(0x8000 | 1 << 12 | 5 << 3));
    CHECK(dequantize_row(QT_IQ1_S, blk, y, 256) == 0);
    for (int j = 0; j < 8; j++) CHECK(y[8 + j] == 3 * ((float)(int8_t)(iq1s_grid[0x500] >> 8 * j) - 0.125f));
    CHECK(y[0] == 3 * (-1 - 0.125f) && y[32] == -1 + 0.125f);
    /* IQ1_M: d = 2 (0x4000: only word 3's top nibble), 16-group 5 (word 1, bits 3-5)
     * scale 2 → 5; 8-group 11 (qh[5] high nibble) index bits 3, delta negative */
    memset(blk, 0, sizeof blk);
    put16(blk + 48 + 6, 0x4000);
    put16(blk + 48 + 2, 2 << 3);
    blk[32 + 5] = 0xb0, blk[11] = 7;
    CHECK(dequantize_row(QT_IQ1_M, blk, y, 256) == 0);
    for (int j = 0; j < 8; j++) CHECK(y[88 + j] == 10 * ((float)(int8_t)(iq1s_grid[0x307] >> 8 * j) - 0.125f));
    CHECK(y[80] == 10 * (-1 + 0.125f) && y[0] == 2 * (-1 + 0.125f));
}

/* ---- round trips --------------------------------------------------------------------------- */

enum { RT_N = 256 * 8, RT_DISTS = 9 };
static const char *const dist_name[RT_DISTS] = {
    "uniform", "gauss", "gauss+outliers", "positive", "shifted-negative",
    "tiny (1e-3)", "large (300)", "sparse", "+-1"};

static void fill(float *x, int n, int dist) {
    for (int i = 0; i < n; i++) {
        double g = rng_gauss();
        switch (dist) {
        case 0: x[i] = (float)(2 * rng_unit() - 1); break;
        case 1: x[i] = (float)g; break;
        case 2: x[i] = (float)(rng_unit() < 0.02 ? 20 * g : g); break;
        case 3: x[i] = (float)(0.5 + 1.5 * rng_unit()); break;
        case 4: x[i] = (float)(g - 3); break;
        case 5: x[i] = (float)(1e-3 * g); break;
        case 6: x[i] = (float)(300 * g); break;
        case 7: x[i] = rng_unit() < 0.1 ? (float)g : 0.0f; break;
        default: x[i] = rng_unit() < 0.5 ? 1.0f : -1.0f; break;
        }
    }
}

/* Largest rounding error of an fp16 value near v when rounded away from zero. */
static double f16_ulp(double v) { return fmax(fabs(v) * 0x1p-10, 0x1p-24); }

/* Quantizes x (RT_N values) into a buffer of exactly qtype_row_bytes at an odd
 * address (so ASan sees overruns and reads are unaligned) and dequantizes it. */
static uint8_t *round_trip(uint32_t type, const float *x, float *y, uint8_t **base) {
    size_t nb = qtype_row_bytes(type, RT_N);
    *base = malloc(nb + 1);
    uint8_t *q = *base + 1;
    CHECK(quantize_row(type, x, q, RT_N) == 0);
    CHECK(dequantize_row(type, q, y, RT_N) == 0);
    return q;
}

static double block_absmax(const float *x, int n) {
    double a = 0;
    for (int i = 0; i < n; i++) a = fmax(a, fabs(x[i]));
    return a;
}

static void test_round_trip_float(void) {
    float x[RT_N], y[RT_N];
    for (int dist = 0; dist < RT_DISTS; dist++) {
        fill(x, RT_N, dist);
        uint8_t *base;
        round_trip(QT_F32, x, y, &base);
        CHECKF(memcmp(x, y, sizeof x) == 0, "F32 not exact (%s)", dist_name[dist]);
        free(base);
        int bad = 0;
        round_trip(QT_F16, x, y, &base);
        for (int i = 0; i < RT_N; i++) /* half an ulp: 2^-11 relative, 2^-25 subnormal */
            if (fabs(x[i] - y[i]) > fmax(fabs(x[i]) * 0x1p-11, 0x1p-25)) bad++;
        free(base);
        CHECKF(bad == 0, "F16: %d values beyond half an ulp (%s)", bad, dist_name[dist]);
        bad = 0;
        round_trip(QT_BF16, x, y, &base);
        for (int i = 0; i < RT_N; i++)
            if (fabs(x[i] - y[i]) > fabs(x[i]) * 0x1p-8) bad++;
        free(base);
        CHECKF(bad == 0, "BF16: %d values beyond half an ulp (%s)", bad, dist_name[dist]);
    }
}

/* Q8_0 and Q4_0: symmetric blocks of 32, y = d * q.
 *
 * Q8_0: d = absmax/127 stored as fp16 rounded away from zero, so d <= A/127 + ulp and
 * no element needs a level beyond +-127: every error is at most d/2.
 * Bound: |x - y| <= (A/127 + ulp(A/127)) / 2.
 *
 * Q4_0 (ggml's scheme): the largest-magnitude element maps to -8 exactly; elements of
 * the opposite sign beyond 7.5 steps clamp to level 7, so an error can reach one step.
 * Bound: |x - y| <= A/8 + ulp(A/8) (and d/2 for elements not clamped).
 *
 * RMS (distributions 0-7): no worse than uniform rounding error on the ideal step
 * S (RMS S/sqrt(12)), with 10% (Q8_0) / 20% (Q4_0, which clamps) allowance. */
static void check_q_0(uint32_t type) {
    const int levels = type == QT_Q8_0 ? 127 : 8;
    float x[RT_N], y[RT_N];
    for (int dist = 0; dist < RT_DISTS; dist++) {
        fill(x, RT_N, dist);
        uint8_t *base, *q = round_trip(type, x, y, &base);
        const size_t bb = qtype_get(type)->block_bytes;
        double worst = 0, se = 0, sref = 0;
        int bad_grid = 0;
        for (int b = 0; b < RT_N / 32; b++) {
            const float *xb = x + 32 * b, *yb = y + 32 * b;
            const double A = block_absmax(xb, 32);
            const double d = fp16_to_f32(get16(q + bb * (size_t)b));
            const double step = A / levels;
            const double bound = type == QT_Q8_0 ? (step + f16_ulp(step)) / 2 * (1 + 1e-6)
                                                 : (step + f16_ulp(step)) * (1 + 1e-6);
            CHECKF(fabs(d) >= step * (1 - 1e-7), "%s block %d: d %g < A/%d", qtype_name(type), b,
                   d, levels);
            for (int j = 0; j < 32; j++) {
                const double e = fabs((double)xb[j] - yb[j]);
                worst = fmax(worst, A > 0 ? e / A : e);
                CHECKF(e <= bound, "%s %s block %d elem %d: x %g y %g err %g > %g",
                       qtype_name(type), dist_name[dist], b, j, xb[j], yb[j], e, bound);
                /* y is a grid point d*k with k in range, and the nearest one in range */
                const double k = d != 0 ? yb[j] / d : 0;
                const int lo = type == QT_Q8_0 ? -127 : -8, hi = type == QT_Q8_0 ? 127 : 7;
                /* (slack for float rounding of x/d near a tie: a few ulps of x and y) */
                const double tol = 0x1p-20 * (fabs(xb[j]) + fabs(d) * 128);
                if (k != floor(k) || k < lo || k > hi) bad_grid++;
                else if (d != 0)
                    for (int dk = -1; dk <= 1; dk += 2) {
                        double kk = k + dk;
                        if (kk >= lo && kk <= hi && fabs(xb[j] - kk * d) < e - tol) bad_grid++;
                    }
                se += e * e;
            }
            sref += 32 * (step * step / 12);
        }
        free(base);
        CHECKF(bad_grid == 0, "%s %s: %d values not the nearest grid point", qtype_name(type),
               dist_name[dist], bad_grid);
        if (dist < 8) {
            const double allow = type == QT_Q8_0 ? 1.1 : 1.2;
            CHECKF(sqrt(se) <= allow * sqrt(sref), "%s %s: rms %g > %g x uniform %g",
                   qtype_name(type), dist_name[dist], sqrt(se / RT_N), allow, sqrt(sref / RT_N));
        }
        if (getenv("QUANT_VERBOSE"))
            printf("   %s %-17s max err %.5f A, rms/ideal %.3f\n", qtype_name(type),
                   dist_name[dist], worst, sqrt(se / sref));
    }
}

static void test_round_trip_q8_0(void) { check_q_0(QT_Q8_0); }
static void test_round_trip_q4_0(void) { check_q_0(QT_Q4_0); }

/* Decodes Q4_K's scale and min of sub-block j (test's own copy of the layout). */
static void t_q4k_scale_min(const uint8_t *q, int j, int *sc, int *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
        *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* K-quants, super-blocks of 256 with A the super-block's absmax.
 *
 * Every value must be a point of its sub-block's stored grid, and the nearest one to x
 * (quantization re-rounds each element against the scales as stored).
 *
 * Q4_K (8 sub-blocks of 32, y = d*sc*q - dmin*m, q 0..15): a sub-block spans a range
 * R <= 2A; the fitter tries grids of step up to R/14 and may clip an end by up to one
 * step (least squares, weights rms + |x|), and the 6-bit scale and min move the grid's
 * ends by up to 15*d/2 + dmin/2 <= 15*(2A/14)/126 + A/126, plus fp16 rounding of d.
 * Bound: |x - y| <= 0.17 A + 16*2^-24.
 *
 * Q6_K (16 groups of 16, y = d*sc*(q-32), q 0..63): group step <= ~A/31 (the fitter's
 * widest grid maps the largest-magnitude element to -31); elements of the other sign
 * may clamp at +31, one step off; the int8 scale moves the grid's end by up to
 * 32*d/2 with d = max|scale|/128 <= A/(31*128). Bound: |x - y| <= A/31 + A/248 + fp16
 * slack <= A/27.5 + 128*2^-24.
 *
 * RMS (distributions 0-7): no worse than plain min/max rounding, i.e. the uniform
 * rounding error S/sqrt(12) of each sub-block's own naive grid, S = (max - min(min,0))/15
 * for Q4_K, S = absmax/32 for Q6_K; Q4_K's search wins by ~10%. Q6_K gets 10% slack:
 * its fit weights errors by x^2, favouring large values, and the int8 scale of a group
 * much smaller than the largest is coarse (sc ~ 6 for a 20x smaller group: up to 8%
 * off), so with outliers it lands near the naive figure (measured 0.96-1.00). */
static void check_k(uint32_t type) {
    float x[RT_N], y[RT_N];
    const bool q4 = type == QT_Q4_K;
    for (int dist = 0; dist < RT_DISTS; dist++) {
        fill(x, RT_N, dist);
        uint8_t *base, *q = round_trip(type, x, y, &base);
        double worst = 0, se = 0, sref = 0;
        int bad_grid = 0;
        for (int b = 0; b < RT_N / 256; b++) {
            const float *xb = x + 256 * b, *yb = y + 256 * b;
            const uint8_t *blk = q + (size_t)b * (q4 ? 144 : 210);
            const double A = block_absmax(xb, 256);
            const double bound = q4 ? 0.17 * A + 16 * 0x1p-24 : A / 27.5 + 128 * 0x1p-24;
            for (int e = 0; e < 256; e++) {
                /* the element's grid: y(k) = a*k - c for k in [lo, hi] */
                float a, c;
                int lo, hi;
                if (q4) {
                    int sc, mn;
                    t_q4k_scale_min(blk + 4, e / 32, &sc, &mn);
                    a = fp16_to_f32(get16(blk)) * (float)sc;
                    c = fp16_to_f32(get16(blk + 2)) * (float)mn;
                    lo = 0, hi = 15;
                } else {
                    a = fp16_to_f32(get16(blk + 208)) * (float)(int8_t)blk[192 + e / 16];
                    c = 0;
                    lo = -32, hi = 31;
                }
                const double err = fabs((double)xb[e] - yb[e]);
                worst = fmax(worst, A > 0 ? err / A : err);
                CHECKF(err <= bound, "%s %s block %d elem %d: x %g y %g err %g > %g",
                       qtype_name(type), dist_name[dist], b, e, xb[e], yb[e], err, bound);
                se += err * err;
                int k = lo;
                while (k <= hi && a * (float)k - c != yb[e]) k++;
                if (k > hi) {
                    if (a != 0 || yb[e] != -c) bad_grid++;
                    continue;
                }
                /* (slack for float rounding of (x + c)/a near a tie) */
                const double tol = 0x1p-20 * (fabs(xb[e]) + fabs(c) + fabs(a) * 64);
                for (int dk = -1; dk <= 1; dk += 2) {
                    int kk = k + dk;
                    if (kk >= lo && kk <= hi && fabs(xb[e] - (a * (float)kk - c)) < err - tol)
                        bad_grid++;
                }
            }
            const int gs = q4 ? 32 : 16;
            for (int g = 0; g < 256 / gs; g++) {
                double mn = 0, mx = -HUGE_VAL, am = 0;
                for (int j = 0; j < gs; j++) {
                    double v = xb[gs * g + j];
                    mn = fmin(mn, v), mx = fmax(mx, v), am = fmax(am, fabs(v));
                }
                const double step = q4 ? (mx - mn) / 15 : am / 32;
                sref += gs * (step * step / 12);
            }
        }
        free(base);
        CHECKF(bad_grid == 0, "%s %s: %d values not the nearest grid point", qtype_name(type),
               dist_name[dist], bad_grid);
        if (dist < 8)
            CHECKF(se <= (q4 ? 1.0 : 1.1 * 1.1) * sref, "%s %s: rms %g > naive grid's %g",
                   qtype_name(type), dist_name[dist], sqrt(se / RT_N), sqrt(sref / RT_N));
        if (getenv("QUANT_VERBOSE"))
            printf("   %s %-17s max err %.5f A, rms/naive %.3f\n", qtype_name(type),
                   dist_name[dist], worst, sqrt(se / sref));
    }
}

static void test_round_trip_q4_K(void) { check_k(QT_Q4_K); }
static void test_round_trip_q6_K(void) { check_k(QT_Q6_K); }

/* The other quantizers (Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q5_K, IQ4_NL, IQ4_XS, MXFP4), on the
 * first eight distributions: the squared error stays within a factor of what plain
 * rounding on each group's own naive grid would give, (step²/12 per element) with
 *   Q4_1 / Q5_1: step = (max - min) / 15 or 31 over each 32-block;
 *   Q5_0:        step = absmax / 16 (levels -16..15);
 *   Q2_K / Q5_K: step = (max - min(min, 0)) / 3 or 31 over each 16- / 32-group;
 *   Q3_K:        step = absmax / 4 over each 16-group (levels -4..3);
 *   IQ4_NL / XS: step = absmax / 8 over each 32-block (16 levels spread over
 *                ±127, mean gap ~16);
 *   MXFP4:       step = 2^(k-1) for absmax in [2^k, 2^(k+1)): the widest gap of
 *                its grid (levels 0, ±0.5, ..., ±4, ±6 times 2^(k-2)), beyond
 *                whose top (1.5·2^k) values clip, as in ggml.
 * The factor allows for the coarse block scales (4 bits for Q2_K, 6 for Q3_K, Q5_K
 * and IQ4_XS, fp16 elsewhere) and fits that clip (measured rms ratios 0.26-1.09;
 * the factor 1.3 leaves ~20% on the worst distribution). A quantizer that loses a bit
 * or takes a scale from the wrong group is off by a factor of 2 or more. */
static void test_round_trip_more(void) {
    static const struct { uint32_t type; int gs; double factor; } cases[] = {
        {QT_Q4_1, 32, 1.3}, {QT_Q5_0, 32, 1.3}, {QT_Q5_1, 32, 1.3}, {QT_Q2_K, 16, 1.3},
        {QT_Q3_K, 16, 1.3}, {QT_Q5_K, 32, 1.3}, {QT_IQ4_NL, 32, 1.3}, {QT_IQ4_XS, 32, 1.3},
        {QT_MXFP4, 32, 1.6}, /* (its clipping: 1.32 measured on "positive", ~1.2 on "uniform") */
    };
    float x[RT_N], y[RT_N];
    for (size_t c = 0; c < LLC_ARRAY_LEN(cases); c++) {
        const uint32_t type = cases[c].type;
        const int gs = cases[c].gs;
        for (int dist = 0; dist < 8; dist++) {
            fill(x, RT_N, dist);
            uint8_t *base;
            round_trip(type, x, y, &base);
            free(base);
            double se = 0, sref = 0;
            for (int i = 0; i < RT_N; i++) se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
            for (int g = 0; g < RT_N / gs; g++) {
                double mn = HUGE_VAL, mx = -HUGE_VAL, am = 0;
                for (int j = 0; j < gs; j++) {
                    const double v = x[gs * g + j];
                    mn = fmin(mn, v), mx = fmax(mx, v), am = fmax(am, fabs(v));
                }
                double step;
                switch (type) {
                case QT_Q4_1: step = (mx - mn) / 15; break;
                case QT_Q5_1: step = (mx - mn) / 31; break;
                case QT_Q5_0: step = am / 16; break;
                case QT_Q2_K: step = (mx - fmin(mn, 0)) / 3; break;
                case QT_Q5_K: step = (mx - fmin(mn, 0)) / 31; break;
                case QT_Q3_K: step = am / 4; break;
                case QT_MXFP4: step = am > 0 ? ldexp(1.0, ilogb(am) - 1) : 0; break;
                default: step = am / 8; break;
                }
                sref += gs * step * step / 12;
            }
            const double ratio = sqrt(se / sref), f = cases[c].factor;
            CHECKF(ratio <= f, "%s %s: rms %g is %.3f x the naive grid's (allowed %.2f)", qtype_name(type),
                   dist_name[dist], sqrt(se / RT_N), ratio, f);
            if (getenv("QUANT_VERBOSE"))
                printf("   %s %-17s rms/naive %.3f\n", qtype_name(type), dist_name[dist], ratio);
        }
    }
}

/* Zero and constant blocks, and values exactly on a grid, come back exactly. */
static void test_round_trip_special(void) {
    static const uint32_t types[] = {QT_F32,  QT_F16,  QT_BF16, QT_Q8_0, QT_Q4_0, QT_Q4_1,   QT_Q5_0,  QT_Q5_1,
                                     QT_Q2_K, QT_Q3_K, QT_Q4_K, QT_Q5_K, QT_Q6_K, QT_IQ4_NL, QT_IQ4_XS,
                                     QT_MXFP4};
    float x[512], y[512];
    uint8_t q[512 * 4];
    for (size_t t = 0; t < LLC_ARRAY_LEN(types); t++) {
        const char *nm = qtype_name(types[t]);
        memset(x, 0, sizeof x);
        for (int i = 0; i < 512; i++) y[i] = 1.0f;
        CHECK(quantize_row(types[t], x, q, 512) == 0);
        CHECK(dequantize_row(types[t], q, y, 512) == 0);
        int nz = 0;
        for (int i = 0; i < 512; i++) nz += y[i] != 0;
        CHECKF(nz == 0, "%s: zeros came back as %d non-zeros", nm, nz);

        /* a constant block: every quantizer can represent it to within fp16 rounding */
        for (int i = 0; i < 512; i++) x[i] = i < 256 ? 0.75f : -1.5f;
        CHECK(quantize_row(types[t], x, q, 512) == 0);
        CHECK(dequantize_row(types[t], q, y, 512) == 0);
        double worst = 0;
        for (int i = 0; i < 512; i++) worst = fmax(worst, fabs(x[i] - y[i]));
        CHECKF(worst <= 1.5 * 0x1p-9, "%s: constant block off by %g", nm, worst);
    }
    /* Q8_0: integers -127..127 times a power of two are exact */
    for (int i = 0; i < 512; i++) x[i] = (float)((i * 37) % 255 - 127) * 0.125f;
    for (int b = 0; b < 16; b++) x[32 * b] = 127 * 0.125f; /* each block's absmax */
    CHECK(quantize_row(QT_Q8_0, x, q, 512) == 0);
    CHECK(dequantize_row(QT_Q8_0, q, y, 512) == 0);
    CHECK(memcmp(x, y, sizeof x) == 0);
    /* Q4_0: -8..7 times a power of two, with -8 the block's extreme, are exact */
    for (int i = 0; i < 512; i++) x[i] = (float)((i * 7) % 16 - 8) * 0.5f;
    for (int b = 0; b < 16; b++) x[32 * b + 5] = -4.0f;
    CHECK(quantize_row(QT_Q4_0, x, q, 512) == 0);
    CHECK(dequantize_row(QT_Q4_0, q, y, 512) == 0);
    CHECK(memcmp(x, y, sizeof x) == 0);
}

/* Arbitrary bytes (a hostile GGUF) dequantize without faults, and arbitrary floats
 * (NaN, inf, huge, subnormal) quantize without undefined behaviour (run under UBSan). */
static void test_garbage(void) {
    static const uint32_t types[] = {QT_F32,  QT_F16,  QT_BF16, QT_Q8_0, QT_Q4_0, QT_Q4_1,   QT_Q5_0,  QT_Q5_1,
                                     QT_Q2_K, QT_Q3_K, QT_Q4_K, QT_Q5_K, QT_Q6_K, QT_IQ4_NL, QT_IQ4_XS,
                                     QT_MXFP4};
    enum { N = 1024 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    for (size_t t = 0; t < LLC_ARRAY_LEN(types); t++) {
        size_t nb = qtype_row_bytes(types[t], N);
        uint8_t *q = malloc(nb);
        for (int rep = 0; rep < 20; rep++) {
            for (size_t i = 0; i < nb; i++) q[i] = (uint8_t)rng_next();
            CHECK(dequantize_row(types[t], q, y, N) == 0);
            for (int i = 0; i < N; i++) {
                uint32_t u = (uint32_t)rng_next();
                x[i] = rep & 1 ? f_of(u) : (float)(rng_gauss() * (rep < 10 ? 1e30 : 1e-30));
            }
            CHECK(quantize_row(types[t], x, q, N) == 0);
            CHECK(dequantize_row(types[t], q, y, N) == 0);
        }
        free(q);
    }
    free(x);
    free(y);
}

int main(void) {
    /* QUANT_SEED=n reruns the random parts with other data (for stress runs) */
    const char *seed = getenv("QUANT_SEED");
    if (seed && *seed) g_rng = strtoull(seed, NULL, 0);
    RUN(test_fp16_exhaustive);
    RUN(test_fp16_known);
    RUN(test_fp16_ties);
    RUN(test_fp16_random_rne);
    RUN(test_bf16);
    RUN(test_type_table);
    RUN(test_unsupported);
    RUN(test_q8_0_blocks);
    RUN(test_q4_0_blocks);
    RUN(test_q4_K_blocks);
    RUN(test_q6_K_blocks);
    RUN(test_more_blocks);
    RUN(test_iq_tables);
    RUN(test_iq_blocks);
    RUN(test_round_trip_float);
    RUN(test_round_trip_q8_0);
    RUN(test_round_trip_q4_0);
    RUN(test_round_trip_q4_K);
    RUN(test_round_trip_q6_K);
    RUN(test_round_trip_more);
    RUN(test_round_trip_special);
    RUN(test_garbage);
    return t_summary();
}
