/* json_schema_internal.h — the pieces json_schema.c builds on, each its own file:
 * exact numeric ranges (json_range.c) and regular expressions over JSON string
 * contents (json_regex.c). Both append a GBNF expression (no rules of their own)
 * and, on failure, put the reason in msg. Private to engine/grammar/. */
#ifndef LLC_JSON_SCHEMA_INTERNAL_H
#define LLC_JSON_SCHEMA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "kernels/sbuf.h"

/* The largest magnitude a bound may have: 2^53, the last integer a double
 * (and so a JSON number in most parsers, JavaScript's included) holds exactly. */
#define JSON_RANGE_MAX 9007199254740992.0

/* One side of a numeric range: absent (set false), or v, excluded when ex. */
typedef struct num_bound {
    bool set, ex;
    double v;
} num_bound;

/* Appends an expression matching exactly the JSON numbers x with lo <(=) x <(=) hi:
 * integers (no fraction, no exponent) when integer, else decimals without an
 * exponent (at most 16 integer digits and about 16 fraction digits when a side
 * is open). 0, or LLC_ERR_UNSUPPORTED (a bound beyond ±2^53) / LLC_ERR_FORMAT
 * (nothing lies between the bounds) with msg. */
int json_range_gbnf(sbuf *b, num_bound lo, num_bound hi, bool integer, char *msg, size_t cap);

/* Appends an expression matching the JSON text between a string's quotes whose
 * decoded value the ECMAScript regular expression `pattern` matches (searching,
 * as JSON Schema's `pattern` does: without ^ or $ anything may come before or
 * after; the expression then refers to the rule `char`, one JSON string
 * character, which the caller defines). Literals, classes, escapes (\d \w \s
 * and their negations, \t \n \xHH \uHHHH ...), `.`, groups (capturing,
 * (?:...) and named), alternation, * + ? {m} {m,} {m,n} (lazy ones alike), ^ at
 * the start and $ at the end of the pattern or of one of its top-level
 * alternatives. Refused with LLC_ERR_UNSUPPORTED naming the construct:
 * backreferences, lookahead and lookbehind, word boundaries, \p{...}, anchors
 * elsewhere; LLC_ERR_FORMAT for a pattern that is not a regular expression
 * (PCRE2 checks the syntax). */
int json_regex_gbnf(sbuf *b, const char *pattern, char *msg, size_t cap);

#endif
