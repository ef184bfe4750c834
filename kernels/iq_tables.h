/* iq_tables.h — the lookup tables of ggml's i-quant weight types (iq_tables.c).
 *
 * Each grid entry packs 8 (uint64) or 4 (uint32) values, one per byte, element j
 * of the group in byte j (bits 8j..8j+7):
 *   iq2xxs_grid (IQ2_XXS), iq2xs_grid (IQ2_XS), iq2s_grid (IQ2_S): bytes 8, 25, 43
 *   iq3xxs_grid (IQ3_XXS): bytes 4, 12, ..., 62;  iq3s_grid (IQ3_S): bytes 1, 3, ..., 15
 *   iq1s_grid (IQ1_S, IQ1_M): int8 bytes -1, 0, 1
 * ksigns_iq2xs[i]: the 7 sign bits i plus an eighth that makes the count of set bits
 * even (bit j set: element j negative), as IQ2_XXS, IQ2_XS and IQ3_XXS store signs.
 * iq_signs_pm1[i]: the same 8 signs as int8 bytes, -1 (0xff) or +1, element j in
 * byte j: multipliers for SIMD sign application. */
#ifndef LLC_IQ_TABLES_H
#define LLC_IQ_TABLES_H

#include <stdint.h>

extern const uint8_t ksigns_iq2xs[128];
extern const uint64_t iq2xxs_grid[256];
extern const uint64_t iq2xs_grid[512];
extern const uint64_t iq2s_grid[1024];
extern const uint32_t iq3xxs_grid[256];
extern const uint32_t iq3s_grid[512];
extern const uint64_t iq1s_grid[2048];
extern const uint64_t iq_signs_pm1[128];

#endif
