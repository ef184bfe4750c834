/* textwrap.c — cell widths (range tables, binary search), UTF-8 decoding, clusters,
 * truncation, and the greedy line wrapper with its incremental (append) form. */
#include "ui/textwrap.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/common.h"

typedef struct cp_range {
    uint32_t lo, hi;
} cp_range;

/* Both tables: sorted, disjoint, inclusive ranges, from glibc 2.36 wcwidth()
 * (Unicode 15) with the unassigned code points between neighbouring ranges merged
 * in, so they stay short. Code points below U+0300 are decided in tw_char_width. */

/* Zero width: nonspacing and enclosing marks, format characters (ZWSP, ZWJ, LRM,
 * word joiner, BOM, ...), Hangul medial/final jamo, variation selectors, tags. */
static const cp_range zero_width[] = {
    {0x0300, 0x036F}, {0x0483, 0x0489}, {0x0591, 0x05BD}, {0x05BF, 0x05BF}, {0x05C1, 0x05C2},
    {0x05C4, 0x05C5}, {0x05C7, 0x05C7}, {0x0610, 0x061A}, {0x061C, 0x061C}, {0x064B, 0x065F},
    {0x0670, 0x0670}, {0x06D6, 0x06DC}, {0x06DF, 0x06E4}, {0x06E7, 0x06E8}, {0x06EA, 0x06ED},
    {0x0711, 0x0711}, {0x0730, 0x074A}, {0x07A6, 0x07B0}, {0x07EB, 0x07F3}, {0x07FD, 0x07FD},
    {0x0816, 0x0819}, {0x081B, 0x0823}, {0x0825, 0x0827}, {0x0829, 0x082D}, {0x0859, 0x085B},
    {0x0898, 0x089F}, {0x08CA, 0x08E1}, {0x08E3, 0x0902}, {0x093A, 0x093A}, {0x093C, 0x093C},
    {0x0941, 0x0948}, {0x094D, 0x094D}, {0x0951, 0x0957}, {0x0962, 0x0963}, {0x0981, 0x0981},
    {0x09BC, 0x09BC}, {0x09C1, 0x09C4}, {0x09CD, 0x09CD}, {0x09E2, 0x09E3}, {0x09FE, 0x0A02},
    {0x0A3C, 0x0A3C}, {0x0A41, 0x0A51}, {0x0A70, 0x0A71}, {0x0A75, 0x0A75}, {0x0A81, 0x0A82},
    {0x0ABC, 0x0ABC}, {0x0AC1, 0x0AC8}, {0x0ACD, 0x0ACD}, {0x0AE2, 0x0AE3}, {0x0AFA, 0x0B01},
    {0x0B3C, 0x0B3C}, {0x0B3F, 0x0B3F}, {0x0B41, 0x0B44}, {0x0B4D, 0x0B56}, {0x0B62, 0x0B63},
    {0x0B82, 0x0B82}, {0x0BC0, 0x0BC0}, {0x0BCD, 0x0BCD}, {0x0C00, 0x0C00}, {0x0C04, 0x0C04},
    {0x0C3C, 0x0C3C}, {0x0C3E, 0x0C40}, {0x0C46, 0x0C56}, {0x0C62, 0x0C63}, {0x0C81, 0x0C81},
    {0x0CBC, 0x0CBC}, {0x0CBF, 0x0CBF}, {0x0CC6, 0x0CC6}, {0x0CCC, 0x0CCD}, {0x0CE2, 0x0CE3},
    {0x0D00, 0x0D01}, {0x0D3B, 0x0D3C}, {0x0D41, 0x0D44}, {0x0D4D, 0x0D4D}, {0x0D62, 0x0D63},
    {0x0D81, 0x0D81}, {0x0DCA, 0x0DCA}, {0x0DD2, 0x0DD6}, {0x0E31, 0x0E31}, {0x0E34, 0x0E3A},
    {0x0E47, 0x0E4E}, {0x0EB1, 0x0EB1}, {0x0EB4, 0x0EBC}, {0x0EC8, 0x0ECD}, {0x0F18, 0x0F19},
    {0x0F35, 0x0F35}, {0x0F37, 0x0F37}, {0x0F39, 0x0F39}, {0x0F71, 0x0F7E}, {0x0F80, 0x0F84},
    {0x0F86, 0x0F87}, {0x0F8D, 0x0FBC}, {0x0FC6, 0x0FC6}, {0x102D, 0x1030}, {0x1032, 0x1037},
    {0x1039, 0x103A}, {0x103D, 0x103E}, {0x1058, 0x1059}, {0x105E, 0x1060}, {0x1071, 0x1074},
    {0x1082, 0x1082}, {0x1085, 0x1086}, {0x108D, 0x108D}, {0x109D, 0x109D}, {0x1160, 0x11FF},
    {0x135D, 0x135F}, {0x1712, 0x1714}, {0x1732, 0x1733}, {0x1752, 0x1753}, {0x1772, 0x1773},
    {0x17B4, 0x17B5}, {0x17B7, 0x17BD}, {0x17C6, 0x17C6}, {0x17C9, 0x17D3}, {0x17DD, 0x17DD},
    {0x180B, 0x180F}, {0x1885, 0x1886}, {0x18A9, 0x18A9}, {0x1920, 0x1922}, {0x1927, 0x1928},
    {0x1932, 0x1932}, {0x1939, 0x193B}, {0x1A17, 0x1A18}, {0x1A1B, 0x1A1B}, {0x1A56, 0x1A56},
    {0x1A58, 0x1A60}, {0x1A62, 0x1A62}, {0x1A65, 0x1A6C}, {0x1A73, 0x1A7F}, {0x1AB0, 0x1B03},
    {0x1B34, 0x1B34}, {0x1B36, 0x1B3A}, {0x1B3C, 0x1B3C}, {0x1B42, 0x1B42}, {0x1B6B, 0x1B73},
    {0x1B80, 0x1B81}, {0x1BA2, 0x1BA5}, {0x1BA8, 0x1BA9}, {0x1BAB, 0x1BAD}, {0x1BE6, 0x1BE6},
    {0x1BE8, 0x1BE9}, {0x1BED, 0x1BED}, {0x1BEF, 0x1BF1}, {0x1C2C, 0x1C33}, {0x1C36, 0x1C37},
    {0x1CD0, 0x1CD2}, {0x1CD4, 0x1CE0}, {0x1CE2, 0x1CE8}, {0x1CED, 0x1CED}, {0x1CF4, 0x1CF4},
    {0x1CF8, 0x1CF9}, {0x1DC0, 0x1DFF}, {0x200B, 0x200F}, {0x202A, 0x202E}, {0x2060, 0x206F},
    {0x20D0, 0x20F0}, {0x2CEF, 0x2CF1}, {0x2D7F, 0x2D7F}, {0x2DE0, 0x2DFF}, {0x302A, 0x302D},
    {0x3099, 0x309A}, {0xA66F, 0xA672}, {0xA674, 0xA67D}, {0xA69E, 0xA69F}, {0xA6F0, 0xA6F1},
    {0xA802, 0xA802}, {0xA806, 0xA806}, {0xA80B, 0xA80B}, {0xA825, 0xA826}, {0xA82C, 0xA82C},
    {0xA8C4, 0xA8C5}, {0xA8E0, 0xA8F1}, {0xA8FF, 0xA8FF}, {0xA926, 0xA92D}, {0xA947, 0xA951},
    {0xA980, 0xA982}, {0xA9B3, 0xA9B3}, {0xA9B6, 0xA9B9}, {0xA9BC, 0xA9BD}, {0xA9E5, 0xA9E5},
    {0xAA29, 0xAA2E}, {0xAA31, 0xAA32}, {0xAA35, 0xAA36}, {0xAA43, 0xAA43}, {0xAA4C, 0xAA4C},
    {0xAA7C, 0xAA7C}, {0xAAB0, 0xAAB0}, {0xAAB2, 0xAAB4}, {0xAAB7, 0xAAB8}, {0xAABE, 0xAABF},
    {0xAAC1, 0xAAC1}, {0xAAEC, 0xAAED}, {0xAAF6, 0xAAF6}, {0xABE5, 0xABE5}, {0xABE8, 0xABE8},
    {0xABED, 0xABED}, {0xD7B0, 0xD7FB}, {0xFB1E, 0xFB1E}, {0xFE00, 0xFE0F}, {0xFE20, 0xFE2F},
    {0xFEFF, 0xFEFF}, {0xFFF9, 0xFFFB}, {0x101FD, 0x101FD}, {0x102E0, 0x102E0}, {0x10376, 0x1037A},
    {0x10A01, 0x10A0F}, {0x10A38, 0x10A3F}, {0x10AE5, 0x10AE6}, {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC},
    {0x10F46, 0x10F50}, {0x10F82, 0x10F85}, {0x11001, 0x11001}, {0x11038, 0x11046}, {0x11070, 0x11070},
    {0x11073, 0x11074}, {0x1107F, 0x11081}, {0x110B3, 0x110B6}, {0x110B9, 0x110BA}, {0x110C2, 0x110C2},
    {0x11100, 0x11102}, {0x11127, 0x1112B}, {0x1112D, 0x11134}, {0x11173, 0x11173}, {0x11180, 0x11181},
    {0x111B6, 0x111BE}, {0x111C9, 0x111CC}, {0x111CF, 0x111CF}, {0x1122F, 0x11231}, {0x11234, 0x11234},
    {0x11236, 0x11237}, {0x1123E, 0x1123E}, {0x112DF, 0x112DF}, {0x112E3, 0x112EA}, {0x11300, 0x11301},
    {0x1133B, 0x1133C}, {0x11340, 0x11340}, {0x11366, 0x11374}, {0x11438, 0x1143F}, {0x11442, 0x11444},
    {0x11446, 0x11446}, {0x1145E, 0x1145E}, {0x114B3, 0x114B8}, {0x114BA, 0x114BA}, {0x114BF, 0x114C0},
    {0x114C2, 0x114C3}, {0x115B2, 0x115B5}, {0x115BC, 0x115BD}, {0x115BF, 0x115C0}, {0x115DC, 0x115DD},
    {0x11633, 0x1163A}, {0x1163D, 0x1163D}, {0x1163F, 0x11640}, {0x116AB, 0x116AB}, {0x116AD, 0x116AD},
    {0x116B0, 0x116B5}, {0x116B7, 0x116B7}, {0x1171D, 0x1171F}, {0x11722, 0x11725}, {0x11727, 0x1172B},
    {0x1182F, 0x11837}, {0x11839, 0x1183A}, {0x1193B, 0x1193C}, {0x1193E, 0x1193E}, {0x11943, 0x11943},
    {0x119D4, 0x119DB}, {0x119E0, 0x119E0}, {0x11A01, 0x11A0A}, {0x11A33, 0x11A38}, {0x11A3B, 0x11A3E},
    {0x11A47, 0x11A47}, {0x11A51, 0x11A56}, {0x11A59, 0x11A5B}, {0x11A8A, 0x11A96}, {0x11A98, 0x11A99},
    {0x11C30, 0x11C3D}, {0x11C3F, 0x11C3F}, {0x11C92, 0x11CA7}, {0x11CAA, 0x11CB0}, {0x11CB2, 0x11CB3},
    {0x11CB5, 0x11CB6}, {0x11D31, 0x11D45}, {0x11D47, 0x11D47}, {0x11D90, 0x11D91}, {0x11D95, 0x11D95},
    {0x11D97, 0x11D97}, {0x11EF3, 0x11EF4}, {0x13430, 0x13438}, {0x16AF0, 0x16AF4}, {0x16B30, 0x16B36},
    {0x16F4F, 0x16F4F}, {0x16F8F, 0x16F92}, {0x16FE4, 0x16FE4}, {0x1BC9D, 0x1BC9E}, {0x1BCA0, 0x1CF46},
    {0x1D167, 0x1D169}, {0x1D173, 0x1D182}, {0x1D185, 0x1D18B}, {0x1D1AA, 0x1D1AD}, {0x1D242, 0x1D244},
    {0x1DA00, 0x1DA36}, {0x1DA3B, 0x1DA6C}, {0x1DA75, 0x1DA75}, {0x1DA84, 0x1DA84}, {0x1DA9B, 0x1DAAF},
    {0x1E000, 0x1E02A}, {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF}, {0x1E8D0, 0x1E8D6},
    {0x1E944, 0x1E94A}, {0xE0001, 0xE01EF},
};

/* Two cells: East Asian Wide and Fullwidth (Hangul jamo initials, CJK, kana,
 * Hangul syllables, fullwidth forms, CJK extension planes) and emoji shown wide. */
static const cp_range wide[] = {
    {0x1100, 0x115F}, {0x231A, 0x231B}, {0x2329, 0x232A}, {0x23E9, 0x23EC}, {0x23F0, 0x23F0},
    {0x23F3, 0x23F3}, {0x25FD, 0x25FE}, {0x2614, 0x2615}, {0x2648, 0x2653}, {0x267F, 0x267F},
    {0x2693, 0x2693}, {0x26A1, 0x26A1}, {0x26AA, 0x26AB}, {0x26BD, 0x26BE}, {0x26C4, 0x26C5},
    {0x26CE, 0x26CE}, {0x26D4, 0x26D4}, {0x26EA, 0x26EA}, {0x26F2, 0x26F3}, {0x26F5, 0x26F5},
    {0x26FA, 0x26FA}, {0x26FD, 0x26FD}, {0x2705, 0x2705}, {0x270A, 0x270B}, {0x2728, 0x2728},
    {0x274C, 0x274C}, {0x274E, 0x274E}, {0x2753, 0x2755}, {0x2757, 0x2757}, {0x2795, 0x2797},
    {0x27B0, 0x27B0}, {0x27BF, 0x27BF}, {0x2B1B, 0x2B1C}, {0x2B50, 0x2B50}, {0x2B55, 0x2B55},
    {0x2E80, 0x3029}, {0x302E, 0x303E}, {0x3041, 0x3096}, {0x309B, 0xA4C6}, {0xA960, 0xA97C},
    {0xAC00, 0xD7A3}, {0xF900, 0xFAD9}, {0xFE10, 0xFE19}, {0xFE30, 0xFE6B}, {0xFF01, 0xFF60},
    {0xFFE0, 0xFFE6}, {0x16FE0, 0x16FE3}, {0x16FF0, 0x1B2FB}, {0x1F004, 0x1F004}, {0x1F0CF, 0x1F0CF},
    {0x1F18E, 0x1F18E}, {0x1F191, 0x1F19A}, {0x1F200, 0x1F320}, {0x1F32D, 0x1F335}, {0x1F337, 0x1F37C},
    {0x1F37E, 0x1F393}, {0x1F3A0, 0x1F3CA}, {0x1F3CF, 0x1F3D3}, {0x1F3E0, 0x1F3F0}, {0x1F3F4, 0x1F3F4},
    {0x1F3F8, 0x1F43E}, {0x1F440, 0x1F440}, {0x1F442, 0x1F4FC}, {0x1F4FF, 0x1F53D}, {0x1F54B, 0x1F54E},
    {0x1F550, 0x1F567}, {0x1F57A, 0x1F57A}, {0x1F595, 0x1F596}, {0x1F5A4, 0x1F5A4}, {0x1F5FB, 0x1F64F},
    {0x1F680, 0x1F6C5}, {0x1F6CC, 0x1F6CC}, {0x1F6D0, 0x1F6D2}, {0x1F6D5, 0x1F6DF}, {0x1F6EB, 0x1F6EC},
    {0x1F6F4, 0x1F6FC}, {0x1F7E0, 0x1F7F0}, {0x1F90C, 0x1F93A}, {0x1F93C, 0x1F945}, {0x1F947, 0x1F9FF},
    {0x1FA70, 0x1FAFF}, {0x20000, 0x3FFFD},
};

static bool in_table(uint32_t cp, const cp_range *t, size_t n) {
    if (cp < t[0].lo || cp > t[n - 1].hi) return false;
    size_t lo = 0, hi = n; /* the range containing cp, if any, is in [lo, hi) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp > t[mid].hi) lo = mid + 1;
        else if (cp < t[mid].lo) hi = mid;
        else return true;
    }
    return false;
}

bool tw_is_mark(uint32_t cp) {
    return cp >= 0x300 && in_table(cp, zero_width, LLC_ARRAY_LEN(zero_width));
}

int tw_char_width(uint32_t cp) {
    if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0)) return 0; /* C0, DEL, C1 */
    if (cp < 0x300) return 1;
    if (in_table(cp, zero_width, LLC_ARRAY_LEN(zero_width))) return 0;
    if (cp >= 0x1100 && in_table(cp, wide, LLC_ARRAY_LEN(wide))) return 2;
    return 1;
}

size_t tw_decode(const char *s, size_t len, uint32_t *cp) {
    const unsigned char *u = (const unsigned char *)s;
    *cp = 0xFFFD;
    if (len == 0) return 0;
    unsigned c = u[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t n;
    uint32_t v;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;      /* overlong */
        else if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        v = c & 0x07;
        if (c == 0xF0) lo = 0x90;      /* overlong */
        else if (c == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else {
        return 1; /* continuation byte, C0/C1 overlong lead, F5..FF */
    }
    if (len < n) return 1;
    if (u[1] < lo || u[1] > hi) return 1;
    v = (v << 6) | (u[1] & 0x3F);
    for (size_t i = 2; i < n; i++) {
        if ((u[i] & 0xC0) != 0x80) return 1;
        v = (v << 6) | (u[i] & 0x3F);
    }
    *cp = v;
    return n;
}

/* Start of the code point that ends at pos (pos > 0), consistent with decoding
 * forward from the start of the text: a lead byte at most 3 bytes back whose
 * sequence ends exactly at pos, else the single byte before pos. */
static size_t prev_cp(const char *s, size_t pos) {
    const unsigned char *u = (const unsigned char *)s;
    size_t q = pos - 1;
    size_t stop = pos >= 4 ? pos - 4 : 0;
    while (q > stop && (u[q] & 0xC0) == 0x80) q--;
    if ((u[q] & 0xC0) != 0x80) {
        uint32_t cp;
        if (q + tw_decode(s + q, pos - q, &cp) == pos) return q;
    }
    return pos - 1;
}

/* The cluster at pos: returns its end, *base gets its first code point. */
static size_t cluster_at(const char *s, size_t len, size_t pos, uint32_t *base) {
    const unsigned char *u = (const unsigned char *)s;
    if (u[pos] < 0x80 && (pos + 1 >= len || u[pos + 1] < 0xCC)) {
        *base = u[pos]; /* fast path: ASCII not followed by a mark */
        return pos + 1;
    }
    size_t p = pos + tw_decode(s + pos, len - pos, base);
    if (*base == '\n') return p;
    while (p < len && u[p] >= 0xCC) { /* every mark is U+0300 or above */
        uint32_t m;
        size_t n = tw_decode(s + p, len - p, &m);
        if (!tw_is_mark(m)) break;
        p += n;
    }
    return p;
}

size_t tw_cluster_end(const char *s, size_t len, size_t pos) {
    uint32_t base;
    return cluster_at(s, len, pos, &base);
}

size_t tw_cluster_start(const char *s, size_t pos) {
    size_t p = pos, q;
    uint32_t cp;
    for (;;) { /* back over marks */
        q = prev_cp(s, p);
        tw_decode(s + q, p - q, &cp);
        if (!tw_is_mark(cp)) break;
        p = q;
        if (p == 0) return 0; /* marks with no base at the start of the text */
    }
    /* cp (at q) stopped the loop: the base of the marks from p on, unless it is a
     * '\n' (marks after one have no base). With no marks, q starts the cluster. */
    return p < pos && cp == '\n' ? p : q;
}

/* Cells of a cluster with first code point base drawn at col on a line of width. */
static inline int advance(uint32_t base, int col, int width) {
    if (base == '\t') {
        int w = TW_TAB - col % TW_TAB;
        if (col < width && w > width - col) w = width - col;
        return w;
    }
    return base < 0x80 ? (base >= 0x20 && base != 0x7F) : tw_char_width(base);
}

int tw_str_width(const char *s, size_t len) {
    int64_t col = 0;
    for (size_t p = 0; p < len;) {
        uint32_t base;
        size_t e = cluster_at(s, len, p, &base);
        col += advance(base, (int)(col % TW_TAB), TW_NO_WRAP);
        if (col > INT32_MAX) return INT32_MAX;
        p = e;
    }
    return (int)col;
}

size_t tw_truncate(const char *s, size_t len, int width) {
    if (width < 1) return 0;
    int col = 0;
    size_t p = 0;
    while (p < len) {
        uint32_t base;
        size_t e = cluster_at(s, len, p, &base);
        int w = advance(base, col, TW_NO_WRAP);
        if (w > width - col) break;
        col += w;
        p = e;
    }
    return p;
}

size_t tw_ellipsize(const char *s, size_t len, int width, char *out, size_t out_size) {
    static const char ellipsis[] = "\xE2\x80\xA6";
    if (out_size == 0) return 0;
    size_t room = out_size - 1, n = tw_truncate(s, len, width), e = 0;
    if (width >= 1 && (n < len || len > room)) { /* cut: leave room for the ellipsis */
        if (room >= 3) {
            n = tw_truncate(s, len, width - 1);
            room -= 3;
            e = 3;
        }
    }
    while (n > room) n = tw_cluster_start(s, n);
    memcpy(out, s, n);
    memcpy(out + n, ellipsis, e);
    out[n + e] = 0;
    return n + e;
}

void tw_lines_free(tw_lines *lines) {
    free(lines->v);
    lines->v = NULL;
    lines->n = lines->cap = 0;
}

static int push_line(tw_lines *lines, size_t off, size_t len, int width) {
    if (lines->n == lines->cap) {
        size_t cap = lines->cap ? lines->cap * 2 : 16;
        if (cap > SIZE_MAX / sizeof *lines->v) return LLC_ERR_NOMEM;
        tw_line *v = realloc(lines->v, cap * sizeof *v);
        if (!v) return LLC_ERR_NOMEM;
        lines->v = v;
        lines->cap = cap;
    }
    lines->v[lines->n++] = (tw_line){off, len, width};
    return 0;
}

static bool is_space_cluster(uint32_t base, size_t pos, size_t end) {
    return (base == ' ' || base == '\t') && end == pos + 1;
}

/* Appends the lines of text from line start p to the end of the text. */
static int wrap_from(const char *text, size_t len, size_t p, int width, tw_lines *lines) {
    for (;;) {
        size_t start = p, pos = p;
        int col = 0;
        bool content = false;    /* a non-space cluster is on the line */
        bool prev_space = false; /* the previous cluster was a space */
        size_t brk = 0;          /* start of the last word that follows spaces after content */
        int brk_col = 0;
        int rc;
        for (;;) {
            if (pos >= len) return push_line(lines, start, pos - start, col);
            if (text[pos] == '\n') {
                if ((rc = push_line(lines, start, pos - start, col))) return rc;
                p = pos + 1;
                break;
            }
            uint32_t base;
            size_t end = cluster_at(text, len, pos, &base);
            bool space = is_space_cluster(base, pos, end);
            int w = advance(base, col, width);
            if (!space && prev_space && content) { /* a word after spaces: may move down */
                brk = pos;
                brk_col = col;
            }
            if (w > width - col && col > 0) { /* does not fit */
                if (space) { /* end the line here, swallow the run of spaces */
                    if ((rc = push_line(lines, start, pos - start, col))) return rc;
                    p = pos;
                    while (p < len && (text[p] == ' ' || text[p] == '\t')) {
                        uint32_t b;
                        size_t e = cluster_at(text, len, p, &b);
                        if (!is_space_cluster(b, p, e)) break;
                        p = e;
                    }
                    if (p >= len) return 0;
                    if (text[p] == '\n') p++;
                } else if (brk > start) { /* move the word to the next line */
                    if ((rc = push_line(lines, start, brk - start, brk_col))) return rc;
                    p = brk;
                } else { /* break the word */
                    if ((rc = push_line(lines, start, pos - start, col))) return rc;
                    p = pos;
                }
                break;
            }
            if (!space) content = true;
            prev_space = space;
            col += w;
            pos = end;
        }
    }
}

int tw_wrap(const char *text, size_t len, int width, tw_lines *lines) {
    lines->n = 0;
    return wrap_from(text, len, 0, width < 1 ? 1 : width, lines);
}

/* Bytes at the end of s[0, len) that are a proper prefix of a valid sequence. */
static size_t incomplete_tail(const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t k = 1; k <= 3 && k <= len; k++) {
        unsigned c = u[len - k];
        if ((c & 0xC0) == 0x80) continue;
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        if (need <= k) return 0;
        /* complete it with the smallest continuation bytes the lead allows and see
         * whether that decodes */
        char buf[4];
        memcpy(buf, s + len - k, k);
        for (size_t j = k; j < 4; j++) buf[j] = (char)0x80;
        if (k == 1) buf[1] = (char)(c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80);
        uint32_t cp;
        return tw_decode(buf, need, &cp) == need ? k : 0;
    }
    return 0;
}

int tw_wrap_append(const char *text, size_t old_len, size_t len, int width, tw_lines *lines) {
    if (width < 1) width = 1;
    if (lines->n == 0 || old_len == 0) return tw_wrap(text, len, width, lines);
    /* What appending can change starts at u: an unfinished sequence at the end,
     * the trailing spaces (their run may go on, or a mark may join the last one),
     * and the last character before them (it may gain marks). A line's break is
     * decided by looking no further than into the next line, so every line before
     * the one that precedes the line holding u is final. */
    size_t u = old_len - incomplete_tail(text, old_len);
    while (u > 0 && (text[u - 1] == ' ' || text[u - 1] == '\t')) u--;
    if (u > 0) u = prev_cp(text, u);
    size_t i = lines->n - 1;
    while (i > 0 && lines->v[i].off > u) i--;
    if (i > 0) i--;
    size_t from = lines->v[i].off;
    lines->n = i;
    return wrap_from(text, len, from, width, lines);
}

int tw_col_of(const char *text, const tw_line *line, size_t pos, int width) {
    if (width < 1) width = 1;
    int col = 0;
    for (size_t p = line->off; p < pos;) {
        uint32_t base;
        size_t e = cluster_at(text, pos, p, &base);
        if (base == '\n') break;
        col += advance(base, col, width);
        p = e;
    }
    return col;
}

size_t tw_pos_at_col(const char *text, const tw_line *line, int col, int width) {
    if (width < 1) width = 1;
    size_t end = line->off + line->len, p = line->off;
    int c = 0;
    while (p < end) {
        uint32_t base;
        size_t e = cluster_at(text, end, p, &base);
        int w = advance(base, c, width);
        if (w > col - c) break;
        c += w;
        p = e;
    }
    return p;
}

size_t tw_line_of(const tw_lines *lines, size_t pos) {
    size_t lo = 0, hi = lines->n; /* answer: last i with v[i].off <= pos */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (lines->v[mid].off <= pos) lo = mid;
        else hi = mid;
    }
    return lo;
}
