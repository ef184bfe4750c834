/* json_regex.c — a JSON Schema `pattern` (an ECMAScript regular expression) as
 * a GBNF expression over the JSON text of a string's contents.
 *
 * PCRE2 checks the syntax first (and finds backreferences); then a recursive
 * descent turns it into GBNF as llama.cpp's json-schema-to-grammar does:
 * alternation, groups and quantifiers map onto GBNF's own; every character —
 * a literal, a class, `.`, \d … — is a set of code points, written as the JSON
 * text that decodes to one of them: the members a JSON string may hold as they
 * are in a class, `"` `\` and the named control characters (\b \f \n \r \t) as
 * their escapes. Other control characters (which JSON can only write as \u00XX)
 * are left out: the grammar then admits a subset of the matching strings,
 * never a string that does not match. */
#include "engine/grammar/json_schema_internal.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common.h"

#define CSET_MAX 256   /* ranges in one character set */
#define RX_MAX_DEPTH 64
#define RX_MAX_REPEAT 10000
#define UNICODE_MAX 0x10FFFF

typedef struct rx {
    const char *p;
    size_t i;
    int depth;
    int rc;
    char *msg;
    size_t cap;
} rx;

__attribute__((format(printf, 3, 4))) static void rx_fail(rx *r, int code, const char *fmt, ...) {
    if (r->rc) return;
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(r->msg, r->cap, "'pattern' %s (at offset %zu of /%.80s/)", what, r->i, r->p);
    r->rc = code;
}

/* ---- character sets ---- */

typedef struct cset {
    int n;
    bool overflow;
    uint32_t lo[CSET_MAX], hi[CSET_MAX];
} cset;

static void cs_add(cset *s, uint32_t lo, uint32_t hi) {
    if (s->n == CSET_MAX) return (void)(s->overflow = true);
    s->lo[s->n] = lo, s->hi[s->n] = hi, s->n++;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorted, merged ranges. */
static void cs_norm(cset *s) {
    uint64_t pairs[CSET_MAX];
    for (int i = 0; i < s->n; i++) pairs[i] = (uint64_t)s->lo[i] << 32 | s->hi[i];
    qsort(pairs, (size_t)s->n, sizeof *pairs, cmp_u64);
    int m = 0;
    for (int i = 0; i < s->n; i++) {
        uint32_t lo = (uint32_t)(pairs[i] >> 32), hi = (uint32_t)pairs[i];
        if (m > 0 && lo <= s->hi[m - 1] + 1) {
            if (hi > s->hi[m - 1]) s->hi[m - 1] = hi;
        } else {
            s->lo[m] = lo, s->hi[m] = hi, m++;
        }
    }
    s->n = m;
}

/* Every code point not in s. */
static void cs_negate(cset *s) {
    cs_norm(s);
    cset t = {0};
    uint32_t next = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->lo[i] > next) cs_add(&t, next, s->lo[i] - 1);
        next = s->hi[i] + 1;
    }
    if (next <= UNICODE_MAX) cs_add(&t, next, UNICODE_MAX);
    t.overflow |= s->overflow;
    *s = t;
}

static void cs_union(cset *s, const cset *t) {
    for (int i = 0; i < t->n; i++) cs_add(s, t->lo[i], t->hi[i]);
    s->overflow |= t->overflow;
}

static bool cs_has(const cset *s, uint32_t c) {
    for (int i = 0; i < s->n; i++)
        if (c >= s->lo[i] && c <= s->hi[i]) return true;
    return false;
}

/* \d \w \s (negated when upper case) */
static void cs_class_escape(cset *s, char e) {
    cset t = {0};
    switch (e | 0x20) {
    case 'd': cs_add(&t, '0', '9'); break;
    case 'w': cs_add(&t, '0', '9'), cs_add(&t, 'A', 'Z'), cs_add(&t, 'a', 'z'), cs_add(&t, '_', '_'); break;
    default: /* s: ECMAScript's WhiteSpace and LineTerminator */
        cs_add(&t, '\t', '\r'), cs_add(&t, ' ', ' '), cs_add(&t, 0xA0, 0xA0), cs_add(&t, 0x1680, 0x1680);
        cs_add(&t, 0x2000, 0x200A), cs_add(&t, 0x2028, 0x2029), cs_add(&t, 0x202F, 0x202F);
        cs_add(&t, 0x205F, 0x205F), cs_add(&t, 0x3000, 0x3000), cs_add(&t, 0xFEFF, 0xFEFF);
    }
    if (e >= 'A' && e <= 'Z') cs_negate(&t);
    cs_union(s, &t);
}

static void put_cp(sbuf *b, uint32_t c) {
    if ((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) sb_putc(b, (char)c);
    else if (c < 0x100) sb_printf(b, "\\x%02X", c);
    else if (c < 0x10000) sb_printf(b, "\\u%04X", c);
    else sb_printf(b, "\\U%08X", c);
}

/* The JSON text of one member of s: a class of the members written as they
 * are, and the escapes of the others. */
static void emit_set(rx *r, sbuf *b, cset *s) {
    static const uint32_t plain[][2] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x7E}, {0x80, UNICODE_MAX}};
    static const struct { uint32_t c; const char *text; } escaped[] = {
        {'"', "\"\\\\\\\"\""}, {'\\', "\"\\\\\\\\\""}, {'\n', "\"\\\\n\""}, {'\r', "\"\\\\r\""},
        {'\t', "\"\\\\t\""}, {'\b', "\"\\\\b\""}, {'\f', "\"\\\\f\""},
    };
    if (s->overflow) return rx_fail(r, LLC_ERR_UNSUPPORTED, "has a character class of too many ranges");
    cs_norm(s);
    sbuf cls = {0};
    int n_alts = 0;
    for (int i = 0; i < s->n; i++)
        for (size_t k = 0; k < sizeof plain / sizeof *plain; k++) {
            uint32_t lo = s->lo[i] > plain[k][0] ? s->lo[i] : plain[k][0];
            uint32_t hi = s->hi[i] < plain[k][1] ? s->hi[i] : plain[k][1];
            if (lo > hi) continue;
            put_cp(&cls, lo);
            if (hi > lo) sb_putc(&cls, '-'), put_cp(&cls, hi);
        }
    sbuf alts = {0};
    if (cls.len) sb_printf(&alts, "[%s]", sb_cstr(&cls)), n_alts++;
    for (size_t k = 0; k < sizeof escaped / sizeof *escaped; k++)
        if (cs_has(s, escaped[k].c)) sb_printf(&alts, "%s%s", n_alts++ ? " | " : "", escaped[k].text);
    if (!n_alts) rx_fail(r, LLC_ERR_UNSUPPORTED, "has a character class that JSON text cannot match");
    else sb_printf(b, n_alts > 1 ? "(%s)" : "%s", sb_cstr(&alts));
    if (cls.oom || alts.oom) b->oom = true;
    sb_free(&cls), sb_free(&alts);
}

/* ---- the parser ---- */

static char peek(const rx *r) { return r->p[r->i]; }

/* One UTF-8 encoded code point (PCRE2 checked the encoding). */
static uint32_t utf8_next(rx *r) {
    const unsigned char *s = (const unsigned char *)r->p + r->i;
    int n = s[0] < 0x80 ? 1 : s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : 4;
    uint32_t c = n == 1 ? s[0] : s[0] & (0x3F >> (n - 1));
    for (int k = 1; k < n && s[k]; k++) c = c << 6 | (s[k] & 0x3F);
    r->i += (size_t)n;
    return c;
}

static int hex_value(rx *r, int digits) {
    int v = 0;
    for (int k = 0; k < digits; k++) {
        char h = r->p[r->i + (size_t)k];
        int d = h >= '0' && h <= '9' ? h - '0' : (h | 0x20) >= 'a' && (h | 0x20) <= 'f' ? (h | 0x20) - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    r->i += (size_t)digits;
    return v;
}

/* After a backslash: adds what the escape stands for to s. in_class: \b is a
 * backspace there, not a word boundary. */
static void escape_into(rx *r, cset *s, bool in_class) {
    char e = peek(r);
    if (!e) return rx_fail(r, LLC_ERR_FORMAT, "ends with a backslash");
    if (strchr("dDwWsS", e)) return r->i++, cs_class_escape(s, e);
    if (e == 'b' && in_class) return r->i++, cs_add(s, '\b', '\b');
    if (e == 'b' || e == 'B') return rx_fail(r, LLC_ERR_UNSUPPORTED, "uses a word boundary (\\%c), which cannot be enforced", e);
    if ((e >= '1' && e <= '9') || e == 'k')
        return rx_fail(r, LLC_ERR_UNSUPPORTED, "uses a backreference (\\%c), which cannot be enforced", e);
    if (e == 'p' || e == 'P') return rx_fail(r, LLC_ERR_UNSUPPORTED, "uses a Unicode property (\\%c{...}), which is not supported", e);
    static const char named[] = "tnrfv0", value[] = "\t\n\r\f\v";
    const char *k = strchr(named, e);
    if (k) return r->i++, cs_add(s, (uint32_t)value[k - named], (uint32_t)value[k - named]);
    if (e == 'x' || e == 'u') {
        r->i++;
        int v = hex_value(r, e == 'x' ? 2 : 4);
        if (v < 0) return rx_fail(r, LLC_ERR_FORMAT, "has a bad \\%c escape", e);
        return cs_add(s, (uint32_t)v, (uint32_t)v);
    }
    if (e == 'c' && ((r->p[r->i + 1] | 0x20) >= 'a' && (r->p[r->i + 1] | 0x20) <= 'z')) {
        uint32_t c = (uint32_t)(r->p[r->i + 1] & 0x1F);
        r->i += 2;
        return cs_add(s, c, c);
    }
    uint32_t c = utf8_next(r); /* an identity escape: \. \\ \/ \- \( ... */
    cs_add(s, c, c);
}

/* [...] (the '[' taken): its set. */
static void class_into(rx *r, cset *s) {
    bool neg = peek(r) == '^';
    if (neg) r->i++;
    while (!r->rc && peek(r) && peek(r) != ']') {
        cset one = {0};
        if (peek(r) == '\\') r->i++, escape_into(r, &one, true);
        else {
            uint32_t c = utf8_next(r);
            cs_add(&one, c, c);
        }
        bool single = one.n == 1 && one.lo[0] == one.hi[0];
        if (single && peek(r) == '-' && r->p[r->i + 1] && r->p[r->i + 1] != ']') { /* a range */
            r->i++;
            cset end = {0};
            if (peek(r) == '\\') r->i++, escape_into(r, &end, true);
            else {
                uint32_t c = utf8_next(r);
                cs_add(&end, c, c);
            }
            if (end.n != 1 || end.lo[0] != end.hi[0] || end.lo[0] < one.lo[0])
                return rx_fail(r, LLC_ERR_FORMAT, "has a bad range in a character class");
            one.hi[0] = end.lo[0];
        }
        cs_union(s, &one);
    }
    if (peek(r) != ']') return rx_fail(r, LLC_ERR_FORMAT, "has an unterminated character class");
    r->i++;
    if (neg) cs_negate(s);
}

static void parse_alts(rx *r, sbuf *b, bool top);

/* (...) (the '(' taken). */
static void group(rx *r, sbuf *b) {
    if (peek(r) == '?') {
        const char *q = r->p + r->i;
        if (!strncmp(q, "?=", 2) || !strncmp(q, "?!", 2) || !strncmp(q, "?<=", 3) || !strncmp(q, "?<!", 3))
            return rx_fail(r, LLC_ERR_UNSUPPORTED, "uses a lookahead or lookbehind '(%.*s...)', which cannot be enforced",
                           q[1] == '<' ? 3 : 2, q);
        if (!strncmp(q, "?:", 2)) r->i += 2;
        else if (q[1] == '<') { /* a named group */
            const char *end = strchr(q, '>');
            if (!end) return rx_fail(r, LLC_ERR_FORMAT, "has an unterminated group name");
            r->i += (size_t)(end - q) + 1;
        } else {
            return rx_fail(r, LLC_ERR_UNSUPPORTED, "uses a group modifier '(%.2s', which is not supported", q);
        }
    }
    if (++r->depth > RX_MAX_DEPTH) return rx_fail(r, LLC_ERR_UNSUPPORTED, "nests groups deeper than %d", RX_MAX_DEPTH);
    sbuf in = {0};
    parse_alts(r, &in, false);
    r->depth--;
    if (!r->rc && peek(r) != ')') rx_fail(r, LLC_ERR_FORMAT, "has an unterminated group");
    if (!r->rc) r->i++, sb_printf(b, "(%s)", in.len ? sb_cstr(&in) : "\"\"");
    if (in.oom) b->oom = true;
    sb_free(&in);
}

/* {m}, {m,}, {m,n} at r->i: true (and the counts, max -1 for none) when it is
 * one; otherwise the '{' is a literal character. */
static bool braces(rx *r, long *min, long *max) {
    const char *s = r->p + r->i + 1;
    char *end;
    if (*s < '0' || *s > '9') return false;
    *min = strtol(s, &end, 10), *max = *min;
    if (*end == ',') {
        s = end + 1;
        *max = -1;
        if (*s >= '0' && *s <= '9') *max = strtol(s, &end, 10);
        else end = (char *)s;
    }
    if (*end != '}') return false;
    r->i = (size_t)(end + 1 - r->p);
    return true;
}

/* A quantifier after an atom, if one follows. */
static void quantifier(rx *r, sbuf *b, const char *atom) {
    char q = peek(r);
    long min, max;
    if (q == '*' || q == '+' || q == '?') {
        r->i++;
        sb_printf(b, "(%s)%c", atom, q);
    } else if (q == '{' && braces(r, &min, &max)) {
        if ((max >= 0 && max < min) || min > RX_MAX_REPEAT || max > RX_MAX_REPEAT)
            return rx_fail(r, LLC_ERR_UNSUPPORTED, "has a repetition {%ld,%ld} outside 0..%d", min, max, RX_MAX_REPEAT);
        if (max < 0) sb_printf(b, "(%s){%ld,}", atom, min);
        else sb_printf(b, "(%s){%ld,%ld}", atom, min, max);
    } else {
        sb_str(b, atom);
        return;
    }
    if (peek(r) == '?') r->i++; /* lazy: the same strings */
}

/* One atom (and its quantifier) appended to b; false at the end of a sequence. */
static bool atom(rx *r, sbuf *b) {
    char c = peek(r);
    if (!c || c == '|' || c == ')') return false;
    sbuf a = {0};
    cset s = {0};
    bool is_set = true;
    r->i++;
    if (c == '(') is_set = false, group(r, &a);
    else if (c == '[') class_into(r, &s);
    else if (c == '.') cs_add(&s, '\n', '\n'), cs_add(&s, '\r', '\r'), cs_add(&s, 0x2028, 0x2029), cs_negate(&s);
    else if (c == '\\') escape_into(r, &s, false);
    else if (c == '^' || c == '$')
        rx_fail(r, LLC_ERR_UNSUPPORTED, "has '%c' inside; anchors are supported only at its ends", c);
    else if (c == '*' || c == '+' || c == '?') rx_fail(r, LLC_ERR_FORMAT, "has '%c' with nothing to repeat", c);
    else {
        r->i--;
        uint32_t ch = utf8_next(r);
        cs_add(&s, ch, ch);
    }
    if (is_set && !r->rc) emit_set(r, &a, &s);
    if (!r->rc) quantifier(r, b, sb_cstr(&a));
    if (a.oom) b->oom = true;
    sb_free(&a);
    return !r->rc;
}

/* Alternatives up to ')' or the end. At the top, each may start with ^ and end
 * with $; without them it is searched for: any characters may surround it. */
static void parse_alts(rx *r, sbuf *b, bool top) {
    int n = 0;
    do {
        if (n++) r->i++; /* the '|' */
        bool start = top && peek(r) == '^';
        if (start) r->i++;
        sbuf seq = {0};
        int atoms = 0;
        bool end = false;
        while (!r->rc) {
            if (top && peek(r) == '$') {
                r->i++;
                end = true;
                if (peek(r) && peek(r) != '|') rx_fail(r, LLC_ERR_UNSUPPORTED, "has '$' inside; anchors are supported only at its ends");
                break;
            }
            size_t before = seq.len;
            if (before) sb_putc(&seq, ' ');
            if (!atom(r, &seq)) {
                seq.len = before;
                if (seq.p) seq.p[before] = 0;
                break;
            }
            atoms++;
        }
        const char *pre = top && !start ? "char* " : "", *post = top && !end ? " char*" : "";
        if (!atoms) pre = top && !start ? "char*" : "", post = top && !end && start ? "char*" : "";
        if (!atoms && !*pre && !*post) pre = "\"\"";
        sb_printf(b, "%s%s%s%s", n > 1 ? " | " : "", pre, sb_cstr(&seq), post);
        if (seq.oom) b->oom = true;
        sb_free(&seq);
    } while (!r->rc && peek(r) == '|');
}

/* PCRE2 reads the pattern as JavaScript would (\uHHHH, [] matching nothing):
 * a syntax error is reported with its own message. */
static int check_syntax(const char *pattern, char *msg, size_t cap) {
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_ALT_BSUX | PCRE2_ALLOW_EMPTY_CLASS, &code, &off, NULL);
    if (!re) {
        PCRE2_UCHAR why[160];
        pcre2_get_error_message(code, why, sizeof why);
        snprintf(msg, cap, "'pattern' is not a regular expression: %s (at offset %zu of /%.80s/)", (char *)why,
                 (size_t)off, pattern);
        return LLC_ERR_FORMAT;
    }
    uint32_t backrefs = 0;
    pcre2_pattern_info(re, PCRE2_INFO_BACKREFMAX, &backrefs);
    pcre2_code_free(re);
    if (backrefs) {
        snprintf(msg, cap, "'pattern' uses a backreference, which cannot be enforced (/%.80s/)", pattern);
        return LLC_ERR_UNSUPPORTED;
    }
    return 0;
}

int json_regex_gbnf(sbuf *b, const char *pattern, char *msg, size_t cap) {
    int rc = check_syntax(pattern, msg, cap);
    if (rc) return rc;
    rx r = {.p = pattern, .msg = msg, .cap = cap};
    sbuf out = {0};
    parse_alts(&r, &out, true);
    if (!r.rc && peek(&r)) rx_fail(&r, LLC_ERR_FORMAT, "has an unmatched ')'");
    if (!r.rc) sb_printf(b, "(%s)", sb_cstr(&out));
    if (out.oom) b->oom = true;
    sb_free(&out);
    return r.rc;
}
