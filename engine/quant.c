/* quant.c — the tensor type table, half/bfloat conversion, and scalar reference
 * dequantization/quantization for the types llmchat computes with. */
#include "quant.h"

#include <math.h>
#include <string.h>
#include <strings.h>

#define T(id, nm, be, bb, sup) [id] = {nm, be, bb, sup}
static const qtype_info g_types[QT_COUNT] = {
    T(QT_F32, "F32", 1, 4, true),
    T(QT_F16, "F16", 1, 2, true),
    T(QT_Q4_0, "Q4_0", 32, 18, true),
    T(QT_Q4_1, "Q4_1", 32, 20, false),
    T(QT_Q5_0, "Q5_0", 32, 22, false),
    T(QT_Q5_1, "Q5_1", 32, 24, false),
    T(QT_Q8_0, "Q8_0", 32, 34, true),
    T(QT_Q8_1, "Q8_1", 32, 36, false),
    T(QT_Q2_K, "Q2_K", 256, 84, false),
    T(QT_Q3_K, "Q3_K", 256, 110, false),
    T(QT_Q4_K, "Q4_K", 256, 144, true),
    T(QT_Q5_K, "Q5_K", 256, 176, false),
    T(QT_Q6_K, "Q6_K", 256, 210, true),
    T(QT_Q8_K, "Q8_K", 256, 292, false),
    T(QT_IQ2_XXS, "IQ2_XXS", 256, 66, false),
    T(QT_IQ2_XS, "IQ2_XS", 256, 74, false),
    T(QT_IQ3_XXS, "IQ3_XXS", 256, 98, false),
    T(QT_IQ1_S, "IQ1_S", 256, 50, false),
    T(QT_IQ4_NL, "IQ4_NL", 32, 18, false),
    T(QT_IQ3_S, "IQ3_S", 256, 110, false),
    T(QT_IQ2_S, "IQ2_S", 256, 82, false),
    T(QT_IQ4_XS, "IQ4_XS", 256, 136, false),
    T(QT_I8, "I8", 1, 1, false),
    T(QT_I16, "I16", 1, 2, false),
    T(QT_I32, "I32", 1, 4, false),
    T(QT_I64, "I64", 1, 8, false),
    T(QT_F64, "F64", 1, 8, false),
    T(QT_IQ1_M, "IQ1_M", 256, 56, false),
    T(QT_BF16, "BF16", 1, 2, true),
    T(QT_TQ1_0, "TQ1_0", 256, 54, false),
    T(QT_TQ2_0, "TQ2_0", 256, 66, false),
    T(QT_MXFP4, "MXFP4", 32, 17, false),
};
#undef T

_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 layout");
_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 layout");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K layout");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K layout");

const qtype_info *qtype_get(uint32_t type) {
    if (type >= QT_COUNT || !g_types[type].name) return NULL;
    return &g_types[type];
}

const char *qtype_name(uint32_t type) {
    const qtype_info *t = qtype_get(type);
    return t ? t->name : "unknown";
}

int qtype_from_name(const char *name) {
    for (int i = 0; i < QT_COUNT; i++)
        if (g_types[i].name && strcasecmp(g_types[i].name, name) == 0) return i;
    return -1;
}

size_t qtype_row_bytes(uint32_t type, int64_t n) {
    const qtype_info *t = qtype_get(type);
    if (!t || n < 0 || n % t->block_elems) return 0;
    return (size_t)(n / t->block_elems) * t->block_bytes;
}
