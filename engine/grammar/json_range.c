/* json_range.c — GBNF for the JSON numbers between two bounds, exactly.
 *
 * A number's text is compared with a bound digit by digit once both are written
 * with the same number of integer digits, so the numbers of each integer length
 * are one digit walk (as llama.cpp's _generate_min_max_int, extended to
 * fractions): while the digits written so far equal a bound's ("tight"), the
 * next one is held to that bound's next digit; once they differ, any digits may
 * follow. A bound is written in its shortest decimal form (0.1, not
 * 0.1000000000000000055), so a schema's `maximum: 0.1` admits 0.1 and refuses
 * 0.10001. Negative numbers are "-" and the range of their magnitudes. */
#include "engine/grammar/json_schema_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common.h"

#define MAX_INT_DIGITS 16   /* as the number primitive's integral-part: 2^53 has 16 digits */
#define MAX_FRAC_DIGITS 40  /* of a bound, written out */
#define FREE_FRAC "15"      /* fraction digits after the bounds no longer matter */

/* A bound still being compared: its digits from here on (the integer digits
 * left, then the fraction's), whether the number so far equals the bound up to
 * here, and whether the bound itself is excluded. */
typedef struct dbound {
    const char *rest;
    bool tight, ex;
} dbound;

static bool zeros(const char *s) { return s[strspn(s, "0")] == 0; }

/* Whether the number may end here (no digits left to write): against lo the
 * rest must be zeros (equal) and lo included; against hi it may not be equal
 * to an excluded hi. */
static bool end_ok(dbound lo, dbound hi) {
    bool lo_ok = !lo.tight || (zeros(lo.rest) && !lo.ex);
    bool hi_ok = !hi.tight || !(zeros(hi.rest) && hi.ex);
    return lo_ok && hi_ok;
}

/* Any digits: int_left integer digits, then any fraction (none if integer). */
static void free_tail(sbuf *b, int int_left, bool in_frac, bool integer) {
    if (int_left > 0) sb_printf(b, int_left > 1 ? "[0-9]{%d}" : "[0-9]", int_left);
    if (integer) return;
    if (int_left > 0 || !in_frac) sb_str(b, int_left > 0 ? " (\".\" [0-9]{1," FREE_FRAC "})?" : "(\".\" [0-9]{1," FREE_FRAC "})?");
    else sb_str(b, "[0-9]{0," FREE_FRAC "}");
}

static bool tail(sbuf *b, int int_left, dbound lo, dbound hi, bool in_frac, bool integer);

/* Alternatives of one digit step, " | " apart. */
typedef struct step_alts {
    sbuf b;
    int n;
} step_alts;

/* One alternative of the digit step: digit(s) then what follows them. */
static void step_alt(step_alts *a, const char *digits, int int_left, dbound lo, dbound hi, bool in_frac, bool integer) {
    sbuf t = {0};
    int left = int_left > 0 ? int_left - 1 : 0;
    bool frac = in_frac || int_left == 0;
    if (tail(&t, left, lo, hi, frac, integer)) {
        sb_printf(&a->b, "%s%s%s%s", a->n ? " | " : "", digits, t.len ? " " : "", sb_cstr(&t));
        if (t.oom) a->b.oom = true;
        a->n++;
    }
    sb_free(&t);
}

static dbound advance(dbound d, bool tight) {
    if (*d.rest) d.rest++;
    d.tight = tight;
    return d;
}

/* The next digit, held to the tight bounds: the lower bound's digit (staying
 * tight to it), the digits strictly between (free), the upper bound's digit.
 * After the integer digits the fraction starts with "."; where the number may
 * end instead, the whole step is optional. */
static bool digit_step(sbuf *b, int int_left, dbound lo, dbound hi, bool in_frac, bool integer) {
    int l = lo.tight && *lo.rest ? *lo.rest - '0' : 0, h = hi.tight ? (*hi.rest ? *hi.rest - '0' : 0) : 9;
    step_alts a = {{0}, 0};
    char d[16];
    if (lo.tight && hi.tight && l == h) {
        snprintf(d, sizeof d, "\"%d\"", l);
        step_alt(&a, d, int_left, advance(lo, true), advance(hi, true), in_frac, integer);
    } else if (l <= h) {
        if (lo.tight) {
            snprintf(d, sizeof d, "\"%d\"", l);
            step_alt(&a, d, int_left, advance(lo, true), advance(hi, false), in_frac, integer);
        }
        int from = lo.tight ? l + 1 : l, to = hi.tight ? h - 1 : h;
        if (from <= to) {
            if (from == to) snprintf(d, sizeof d, "\"%d\"", from);
            else snprintf(d, sizeof d, "[%d-%d]", from, to);
            step_alt(&a, d, int_left, advance(lo, false), advance(hi, false), in_frac, integer);
        }
        if (hi.tight) {
            snprintf(d, sizeof d, "\"%d\"", h);
            step_alt(&a, d, int_left, advance(lo, false), advance(hi, true), in_frac, integer);
        }
    }
    bool eps = int_left == 0 && end_ok(lo, hi), dot = int_left == 0 && !in_frac;
    if (!a.n && !eps) return sb_free(&a.b), false;
    if (a.n) {
        sb_printf(b, "%s%s%s%s%s%s", eps ? "(" : "", dot ? "\".\" " : "", a.n > 1 ? "(" : "", sb_cstr(&a.b),
                  a.n > 1 ? ")" : "", eps ? ")?" : "");
        if (a.b.oom) b->oom = true;
    }
    sb_free(&a.b);
    return true;
}

/* What may follow, given the bounds; false (nothing written) when nothing may. */
static bool tail(sbuf *b, int int_left, dbound lo, dbound hi, bool in_frac, bool integer) {
    if (int_left == 0 && integer) return end_ok(lo, hi);
    if (int_left == 0 && lo.tight && zeros(lo.rest) && !lo.ex) lo.tight = false; /* anything more is >= lo */
    if (!lo.tight && !hi.tight) return free_tail(b, int_left, in_frac, integer), true;
    if (int_left == 0 && hi.tight && zeros(hi.rest)) { /* equal to hi so far: only zeros may follow */
        if (!end_ok(lo, hi)) return false;
        sb_str(b, in_frac ? "[0]{0," FREE_FRAC "}" : "(\".\" [0]{1," FREE_FRAC "})?");
        return true;
    }
    if (int_left == 0 && lo.tight && zeros(lo.rest) && !hi.tight) { /* equal to an excluded lo: some non-zero digit */
        sb_str(b, in_frac ? "" : "\".\" ");
        sb_str(b, "[0]{0,14} [1-9] [0-9]{0,14}");
        return true;
    }
    return digit_step(b, int_left, lo, hi, in_frac, integer);
}

/* v (>= 0, <= 2^53) in its shortest decimal form: integer digits (no leading
 * zeros, "0" for none) and fraction digits (no trailing zeros). */
static bool decimal_digits(double v, char *ip, size_t icap, char *fp, size_t fcap) {
    char e[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, v);
        if (strtod(e, NULL) == v) break;
    }
    char mant[24];
    size_t n = 0;
    const char *s = e;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9' && n + 1 < sizeof mant) mant[n++] = *s;
    mant[n] = 0;
    int point = atoi(s + 1) + 1; /* digits before the decimal point */
    size_t ni = 0, nf = 0;
    for (int i = 0; i < point; i++) {
        if (ni + 1 >= icap) return false;
        ip[ni++] = i < (int)n ? mant[i] : '0';
    }
    ip[ni] = 0;
    for (int i = point < 0 ? point : 0; i < 0; i++) {
        if (nf + 1 >= fcap) return false;
        fp[nf++] = '0';
    }
    for (int i = point > 0 ? point : 0; i < (int)n; i++) {
        if (nf + 1 >= fcap) return false;
        fp[nf++] = mant[i];
    }
    while (nf > 0 && fp[nf - 1] == '0') nf--;
    fp[nf] = 0;
    size_t lead = strspn(ip, "0");
    if (lead == ni) strcpy(ip, "0");
    else memmove(ip, ip + lead, ni - lead + 1);
    return true;
}

/* A magnitude bound written out: integer and fraction digits. */
typedef struct mag {
    bool set, ex;
    char ip[24], fp[MAX_FRAC_DIGITS + 2], all[24 + MAX_FRAC_DIGITS + 2];
} mag;

static bool mag_of(mag *m, bool set, double v, bool ex) {
    m->set = set, m->ex = ex;
    if (!set) return true;
    if (!decimal_digits(v, m->ip, sizeof m->ip, m->fp, sizeof m->fp)) return false;
    snprintf(m->all, sizeof m->all, "%s%s", m->ip, m->fp);
    return true;
}

/* The magnitudes from lo to hi (hi unset: no upper bound), one alternative per
 * integer length. False when none. */
static bool magnitudes(sbuf *b, const mag *lo, const mag *hi, bool integer) {
    int n_lo = (int)strlen(lo->ip), n_hi = hi->set ? (int)strlen(hi->ip) : MAX_INT_DIGITS;
    bool any = false;
    char first[24];
    for (int n = n_lo; n <= n_hi; n++) {
        dbound l = {lo->all, true, lo->ex}, h = {hi->all, hi->set && n == n_hi, hi->ex};
        if (n > n_lo) { /* the smallest number of n digits */
            snprintf(first, sizeof first, "1%0*d", n - 1, 0);
            if (n == 1) strcpy(first, "0");
            l = (dbound){first, true, false};
        }
        sbuf t = {0};
        if (tail(&t, n, l, h, false, integer)) {
            sb_printf(b, "%s(%s)", any ? " | " : "", sb_cstr(&t));
            if (t.oom) b->oom = true;
            any = true;
        }
        sb_free(&t);
    }
    return any;
}

int json_range_gbnf(sbuf *b, num_bound lo, num_bound hi, bool integer, char *msg, size_t cap) {
    if ((lo.set && fabs(lo.v) > JSON_RANGE_MAX) || (hi.set && fabs(hi.v) > JSON_RANGE_MAX)) {
        snprintf(msg, cap, "bounds beyond ±2^53 (9007199254740992) are not supported");
        return LLC_ERR_UNSUPPORTED;
    }
    if (integer) { /* the integers within: inclusive integer bounds */
        if (lo.set) lo.v = lo.ex ? floor(lo.v) + 1 : ceil(lo.v), lo.ex = false;
        if (hi.set) hi.v = hi.ex ? ceil(hi.v) - 1 : floor(hi.v), hi.ex = false;
    }
    if (lo.set && hi.set && (lo.v > hi.v || (lo.v == hi.v && (lo.ex || hi.ex)))) {
        snprintf(msg, cap, "no %s lies between the lower and the upper bound", integer ? "integer" : "number");
        return LLC_ERR_FORMAT;
    }
    sbuf alts = {0};
    bool any = false;
    if (!lo.set || lo.v < 0) { /* negative: "-" and magnitudes from |hi| (or just above 0) to |lo| */
        mag from, to;
        bool neg_hi = hi.set && hi.v < 0;
        if (!mag_of(&from, true, neg_hi ? -hi.v : 0, neg_hi ? hi.ex : true) || !mag_of(&to, lo.set, -lo.v, lo.ex))
            goto too_precise;
        sbuf t = {0};
        if (magnitudes(&t, &from, &to, integer)) sb_printf(&alts, "\"-\" (%s)", sb_cstr(&t)), any = true;
        if (t.oom) alts.oom = true;
        sb_free(&t);
    }
    if (!hi.set || hi.v > 0 || (hi.v == 0 && !hi.ex)) { /* zero and above */
        mag from, to;
        bool pos_lo = lo.set && lo.v >= 0;
        if (!mag_of(&from, true, pos_lo ? lo.v : 0, pos_lo && lo.ex) || !mag_of(&to, hi.set, hi.v, hi.ex))
            goto too_precise;
        sbuf t = {0};
        if (magnitudes(&t, &from, &to, integer)) sb_printf(&alts, "%s%s", any ? " | " : "", sb_cstr(&t)), any = true;
        if (t.oom) alts.oom = true;
        sb_free(&t);
    }
    if (!any) {
        sb_free(&alts);
        snprintf(msg, cap, "no %s lies between the lower and the upper bound", integer ? "integer" : "number");
        return LLC_ERR_FORMAT;
    }
    sb_printf(b, "(%s)", sb_cstr(&alts));
    if (alts.oom) b->oom = true;
    sb_free(&alts);
    return 0;
too_precise:
    sb_free(&alts);
    snprintf(msg, cap, "a bound with more than %d decimal places is not supported", MAX_FRAC_DIGITS);
    return LLC_ERR_UNSUPPORTED;
}
