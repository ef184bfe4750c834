/* grammar.c — the GBNF parser: text to the compiled rules of grammar_internal.h.
 * Groups and repetitions become generated rules (named after the rule they sit
 * in, "item-3"), as in llama.cpp: x* is R ::= x R | (empty), x{m,n} is m copies
 * of x then a chain of n-m optional ones. After parsing, undefined rules and
 * left recursion (which the matcher could never expand) are refused. */
#include "engine/grammar/grammar.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/grammar/grammar_internal.h"

#define GRAMMAR_MAX_REPEAT 10000    /* largest m or n in {m,n} */
#define GRAMMAR_MAX_ELEMS (1 << 22) /* compiled size limit */

typedef struct prule {
    char *name;
    gelem *el;
    int n, cap;
    bool defined;
    const char *first_ref; /* where it was first referenced (for "undefined rule") */
    int n_generated;       /* rules generated inside it so far (for their names) */
} prule;

typedef struct parser {
    const char *src, *p, *end;
    prule *rules;
    int n_rules, cap_rules;
    int total;  /* elements in all rules */
    llc_err *err;
    int rc;     /* first error */
} parser;

static void where(const parser *ps, const char *at, int *line, int *col) {
    *line = 1, *col = 1;
    for (const char *q = ps->src; q < at && q < ps->end; q++) {
        if (*q == '\n') (*line)++, *col = 1;
        else if (((unsigned char)*q & 0xC0) != 0x80) (*col)++;
    }
}

__attribute__((format(printf, 3, 4))) static void fail_at(parser *ps, const char *at, const char *fmt, ...) {
    if (ps->rc) return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line, col;
    where(ps, at, &line, &col);
    ps->rc = llc_fail(ps->err, LLC_ERR_FORMAT, "grammar: line %d, column %d: %s", line, col, msg);
}

static void nomem(parser *ps) {
    if (!ps->rc) ps->rc = llc_fail(ps->err, LLC_ERR_NOMEM, "grammar: out of memory");
}

/* ---- rules ---- */

static int new_rule(parser *ps, const char *name, size_t len) {
    if (ps->n_rules == ps->cap_rules) {
        int cap = ps->cap_rules ? ps->cap_rules * 2 : 16;
        prule *r = realloc(ps->rules, (size_t)cap * sizeof *r);
        if (!r) return nomem(ps), -1;
        ps->rules = r;
        ps->cap_rules = cap;
    }
    prule *r = &ps->rules[ps->n_rules];
    memset(r, 0, sizeof *r);
    r->name = malloc(len + 1);
    if (!r->name) return nomem(ps), -1;
    memcpy(r->name, name, len);
    r->name[len] = 0;
    return ps->n_rules++;
}

static int find_rule(const parser *ps, const char *name, size_t len) {
    for (int i = 0; i < ps->n_rules; i++)
        if (strlen(ps->rules[i].name) == len && !memcmp(ps->rules[i].name, name, len)) return i;
    return -1;
}

/* A rule generated inside rule `parent` (a group or a repetition). */
static int generated_rule(parser *ps, int parent) {
    char name[160];
    int k = ++ps->rules[parent].n_generated;
    snprintf(name, sizeof name, "%.140s-%d", ps->rules[parent].name, k);
    while (find_rule(ps, name, strlen(name)) >= 0) /* a user rule of that name */
        snprintf(name, sizeof name, "%.140s-%d", ps->rules[parent].name, k = ++ps->rules[parent].n_generated);
    int id = new_rule(ps, name, strlen(name));
    if (id >= 0) ps->rules[id].defined = true;
    return id;
}

static void push(parser *ps, int rid, uint32_t type, uint32_t value) {
    if (ps->rc) return;
    prule *r = &ps->rules[rid];
    if (ps->total >= GRAMMAR_MAX_ELEMS) {
        fail_at(ps, ps->p, "the grammar is too large (over %d elements)", GRAMMAR_MAX_ELEMS);
        return;
    }
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 16;
        gelem *e = realloc(r->el, (size_t)cap * sizeof *e);
        if (!e) return nomem(ps);
        r->el = e;
        r->cap = cap;
    }
    r->el[r->n++] = (gelem){type, value};
    ps->total++;
}

/* ---- lexing ---- */

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Skips blanks and comments; newlines too when newline_ok. */
static void skip_space(parser *ps, bool newline_ok) {
    while (ps->p < ps->end) {
        char c = *ps->p;
        if (c == ' ' || c == '\t') ps->p++;
        else if ((c == '\n' || c == '\r') && newline_ok) ps->p++;
        else if (c == '#') {
            while (ps->p < ps->end && *ps->p != '\n') ps->p++;
        } else break;
    }
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One character of a literal or class: an escape or a UTF-8 sequence. */
static uint32_t parse_char(parser *ps) {
    const char *at = ps->p;
    if (ps->p >= ps->end) return fail_at(ps, at, "unexpected end of the grammar"), 0;
    unsigned char c = (unsigned char)*ps->p++;
    if (c == '\\') {
        if (ps->p >= ps->end) return fail_at(ps, at, "unexpected end after '\\'"), 0;
        char e = *ps->p++;
        int digits = 0;
        switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '\\': case '"': case '\'': case '[': case ']': case '-': case '/': case '^': return (uint32_t)e;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default: return fail_at(ps, at, "unknown escape '\\%c'", e), 0;
        }
        uint32_t v = 0;
        for (int i = 0; i < digits; i++) {
            int h = ps->p < ps->end ? hex_value(*ps->p) : -1;
            if (h < 0) return fail_at(ps, at, "'\\%c' needs %d hex digits", e, digits), 0;
            v = v * 16 + (uint32_t)h;
            ps->p++;
        }
        if (v > 0x10FFFF) return fail_at(ps, at, "code point U+%X is beyond U+10FFFF", v), 0;
        return v;
    }
    if (c < 0x80) return c;
    int need = c >= 0xF0 && c <= 0xF4 ? 3 : c >= 0xE0 && c < 0xF0 ? 2 : c >= 0xC2 && c < 0xE0 ? 1 : -1;
    uint32_t v = need == 3 ? (c & 7u) : need == 2 ? (c & 15u) : (c & 31u);
    for (int i = 0; i < need; i++) {
        if (ps->p >= ps->end || ((unsigned char)*ps->p & 0xC0) != 0x80) need = -1;
        else v = (v << 6) | ((unsigned char)*ps->p++ & 0x3Fu);
    }
    if (need < 0) return fail_at(ps, at, "invalid UTF-8"), 0;
    return v;
}

static int parse_int(parser *ps, int *out) {
    const char *at = ps->p;
    long v = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
        v = v * 10 + (*ps->p++ - '0');
        if (v > GRAMMAR_MAX_REPEAT) return fail_at(ps, at, "repetition count over %d", GRAMMAR_MAX_REPEAT), -1;
    }
    if (ps->p == at) return fail_at(ps, at, "expected a number"), -1;
    *out = (int)v;
    return 0;
}

/* ---- structure ---- */

static void parse_alternates(parser *ps, int rid, bool nested);

/* Replaces the symbol rules[rid].el[start..) by its repetition {lo, hi} (hi < 0: no bound). */
static void repeat_symbol(parser *ps, int rid, int start, int lo, int hi) {
    int len = ps->rules[rid].n - start;
    if (len <= 0) return; /* ("")? or ""*: a repetition of nothing is nothing */
    gelem *sym = malloc((size_t)len * sizeof *sym);
    if (!sym) return nomem(ps);
    memcpy(sym, ps->rules[rid].el + start, (size_t)len * sizeof *sym);
    ps->total -= len;
    ps->rules[rid].n = start;
    for (int k = 0; k < lo; k++)
        for (int i = 0; i < len; i++) push(ps, rid, sym[i].type, sym[i].value);
    if (hi < 0) { /* R ::= sym R | (empty) */
        int r = generated_rule(ps, rid);
        if (r >= 0) {
            for (int i = 0; i < len; i++) push(ps, r, sym[i].type, sym[i].value);
            push(ps, r, GE_RULE_REF, (uint32_t)r);
            push(ps, r, GE_ALT, 0);
            push(ps, r, GE_END, 0);
            push(ps, rid, GE_RULE_REF, (uint32_t)r);
        }
    } else if (hi > lo) { /* R1 ::= sym | (empty); Rk ::= sym R(k-1) | (empty) */
        int last = -1;
        for (int k = 0; k < hi - lo && !ps->rc; k++) {
            int r = generated_rule(ps, rid);
            if (r < 0) break;
            for (int i = 0; i < len; i++) push(ps, r, sym[i].type, sym[i].value);
            if (last >= 0) push(ps, r, GE_RULE_REF, (uint32_t)last);
            push(ps, r, GE_ALT, 0);
            push(ps, r, GE_END, 0);
            last = r;
        }
        if (last >= 0) push(ps, rid, GE_RULE_REF, (uint32_t)last);
    }
    free(sym);
}

static void parse_sequence(parser *ps, int rid, bool nested) {
    int last_sym = -1; /* start of the last symbol, for a repetition */
    while (ps->p < ps->end && !ps->rc) {
        const char *at = ps->p;
        char c = *ps->p;
        if (c == '"') {
            last_sym = ps->rules[rid].n;
            ps->p++;
            while (!ps->rc && (ps->p >= ps->end || *ps->p != '"')) {
                if (ps->p >= ps->end || *ps->p == '\n') {
                    fail_at(ps, at, "unterminated string literal");
                    break;
                }
                push(ps, rid, GE_CHAR, parse_char(ps));
            }
            ps->p++;
        } else if (c == '[') {
            last_sym = ps->rules[rid].n;
            ps->p++;
            uint32_t type = GE_CHAR;
            if (ps->p < ps->end && *ps->p == '^') type = GE_CHAR_NOT, ps->p++;
            bool first = true;
            while (!ps->rc && (ps->p >= ps->end || *ps->p != ']')) {
                if (ps->p >= ps->end) {
                    fail_at(ps, at, "unterminated character class");
                    break;
                }
                push(ps, rid, first ? type : GE_CHAR_ALT, parse_char(ps));
                first = false;
                if (ps->rc) break;
                if (ps->p + 1 < ps->end && *ps->p == '-' && ps->p[1] != ']') {
                    ps->p++;
                    const char *rng = ps->p;
                    uint32_t lo = ps->rules[rid].el[ps->rules[rid].n - 1].value, hi = parse_char(ps);
                    if (!ps->rc && hi < lo) fail_at(ps, rng, "range end U+%04X is below its start U+%04X", hi, lo);
                    push(ps, rid, GE_CHAR_RNG_UPPER, hi);
                }
            }
            if (!ps->rc && first) fail_at(ps, at, "empty character class");
            ps->p++;
        } else if (c == '.') {
            last_sym = ps->rules[rid].n;
            push(ps, rid, GE_CHAR_ANY, 0);
            ps->p++;
        } else if (is_name_char(c)) {
            last_sym = ps->rules[rid].n;
            const char *name = ps->p;
            while (ps->p < ps->end && is_name_char(*ps->p)) ps->p++;
            size_t len = (size_t)(ps->p - name);
            int ref = find_rule(ps, name, len);
            if (ref < 0 && (ref = new_rule(ps, name, len)) >= 0) ps->rules[ref].first_ref = name;
            if (ref >= 0) push(ps, rid, GE_RULE_REF, (uint32_t)ref);
        } else if (c == '(') {
            last_sym = ps->rules[rid].n;
            ps->p++;
            int sub = generated_rule(ps, rid);
            if (sub < 0) return;
            skip_space(ps, true);
            parse_alternates(ps, sub, true);
            if (ps->rc) return;
            if (ps->p >= ps->end || *ps->p != ')') return fail_at(ps, ps->p, "expected ')' closing the group");
            ps->p++;
            push(ps, rid, GE_RULE_REF, (uint32_t)sub);
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last_sym < 0) return fail_at(ps, at, "'%c' has nothing before it to repeat", c);
            int lo = 0, hi = -1;
            ps->p++;
            if (c == '+') lo = 1;
            else if (c == '?') hi = 1;
            else if (c == '{') {
                skip_space(ps, nested);
                if (parse_int(ps, &lo)) return;
                skip_space(ps, nested);
                hi = lo;
                if (ps->p < ps->end && *ps->p == ',') {
                    ps->p++;
                    skip_space(ps, nested);
                    hi = -1;
                    if (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9' && parse_int(ps, &hi)) return;
                    skip_space(ps, nested);
                }
                if (ps->p >= ps->end || *ps->p != '}') return fail_at(ps, ps->p, "expected '}' closing the repetition");
                ps->p++;
                if (hi >= 0 && hi < lo) return fail_at(ps, at, "repetition {%d,%d}: the maximum is below the minimum", lo, hi);
            }
            repeat_symbol(ps, rid, last_sym, lo, hi);
            last_sym = -1;
        } else {
            break;
        }
        skip_space(ps, nested);
    }
}

static void parse_alternates(parser *ps, int rid, bool nested) {
    parse_sequence(ps, rid, nested);
    while (!ps->rc && ps->p < ps->end && *ps->p == '|') {
        push(ps, rid, GE_ALT, 0);
        ps->p++;
        skip_space(ps, true);
        parse_sequence(ps, rid, nested);
    }
    push(ps, rid, GE_END, 0);
}

static void parse_rules(parser *ps) {
    skip_space(ps, true);
    while (ps->p < ps->end && !ps->rc) {
        const char *name = ps->p;
        while (ps->p < ps->end && is_name_char(*ps->p)) ps->p++;
        size_t len = (size_t)(ps->p - name);
        if (len == 0) return fail_at(ps, name, "expected a rule name");
        int rid = find_rule(ps, name, len);
        if (rid >= 0 && ps->rules[rid].defined)
            return fail_at(ps, name, "rule '%.*s' is defined twice", (int)len, name);
        if (rid < 0 && (rid = new_rule(ps, name, len)) < 0) return;
        ps->rules[rid].defined = true;
        skip_space(ps, false);
        if (ps->end - ps->p < 3 || memcmp(ps->p, "::=", 3))
            return fail_at(ps, ps->p, "expected '::=' after the rule name '%.*s'", (int)len, name);
        ps->p += 3;
        skip_space(ps, true);
        parse_alternates(ps, rid, false);
        if (ps->rc) return;
        if (ps->p < ps->end && *ps->p == '\r') ps->p++;
        if (ps->p < ps->end && *ps->p != '\n')
            return fail_at(ps, ps->p, "unexpected '%c' in rule '%.*s'", *ps->p, (int)len, name);
        skip_space(ps, true);
    }
}

/* ---- checks on the whole grammar ---- */

/* Left recursion: a rule reachable from itself through references each at the
 * start of an alternative, or after only nullable elements. */
static bool left_recursive(const grammar *g, int r, const bool *nullable, uint8_t *visit) {
    if (visit[r] == 1) return true;
    if (visit[r] == 2) return false;
    visit[r] = 1;
    const gelem *el = g->elems + g->rule_start[r];
    for (bool at_start = true;; el++) {
        if (el->type == GE_END) break;
        if (el->type == GE_ALT) {
            at_start = true;
            continue;
        }
        if (!at_start) continue;
        if (el->type == GE_RULE_REF) {
            if (left_recursive(g, (int)el->value, nullable, visit)) return true;
            if (!nullable[el->value]) at_start = false;
        } else if (el->type != GE_CHAR_RNG_UPPER && el->type != GE_CHAR_ALT) {
            at_start = false;
        }
    }
    visit[r] = 2;
    return false;
}

static int check_grammar(const grammar *g, char *const *names, llc_err *err) {
    bool *nullable = calloc((size_t)g->n_rules, sizeof *nullable);
    uint8_t *visit = calloc((size_t)g->n_rules, 1);
    if (!nullable || !visit) {
        free(nullable), free(visit);
        return llc_fail(err, LLC_ERR_NOMEM, "grammar: out of memory");
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (int r = 0; r < g->n_rules; r++) {
            if (nullable[r]) continue;
            bool alt_ok = true;
            for (const gelem *el = g->elems + g->rule_start[r];; el++) {
                if (el->type == GE_END || el->type == GE_ALT) {
                    if (alt_ok) nullable[r] = changed = true;
                    if (el->type == GE_END || nullable[r]) break;
                    alt_ok = true;
                } else if (el->type != GE_RULE_REF || !nullable[el->value]) {
                    alt_ok = false;
                }
            }
        }
    }
    int rc = 0;
    for (int r = 0; r < g->n_rules && !rc; r++)
        if (left_recursive(g, r, nullable, visit))
            rc = llc_fail(err, LLC_ERR_FORMAT, "grammar: rule '%s' is left-recursive (it can reach itself without consuming a character)",
                          names[r]);
    free(nullable);
    free(visit);
    return rc;
}

/* Fills alts / rule_alts: where each alternative of each rule starts. */
static int index_alternatives(grammar *g, llc_err *err) {
    int n = 0;
    for (int i = 0; i < g->n_elems; i++) n += g->elems[i].type == GE_ALT || g->elems[i].type == GE_END;
    g->alts = malloc((size_t)(n > 0 ? n : 1) * sizeof *g->alts);
    g->rule_alts = malloc((size_t)(g->n_rules + 1) * sizeof *g->rule_alts);
    if (!g->alts || !g->rule_alts) return llc_fail(err, LLC_ERR_NOMEM, "grammar: out of memory");
    int k = 0;
    for (int r = 0; r < g->n_rules; r++) {
        g->rule_alts[r] = k;
        int i = g->rule_start[r];
        g->alts[k++] = i;
        for (; g->elems[i].type != GE_END; i++)
            if (g->elems[i].type == GE_ALT) g->alts[k++] = i + 1;
    }
    g->rule_alts[g->n_rules] = k;
    return 0;
}

int grammar_parse(const char *text, size_t len, grammar **out, llc_err *err) {
    *out = NULL;
    parser ps = {.src = text, .p = text, .end = text + len, .err = err};
    parse_rules(&ps);
    for (int i = 0; i < ps.n_rules && !ps.rc; i++)
        if (!ps.rules[i].defined) fail_at(&ps, ps.rules[i].first_ref, "undefined rule '%s'", ps.rules[i].name);
    int root = ps.rc ? -1 : find_rule(&ps, "root", 4);
    if (!ps.rc && root < 0) ps.rc = llc_fail(err, LLC_ERR_FORMAT, "grammar: there is no rule named 'root'");
    grammar *g = NULL;
    if (!ps.rc) {
        g = calloc(1, sizeof *g);
        if (g) {
            g->elems = malloc((size_t)(ps.total > 0 ? ps.total : 1) * sizeof *g->elems);
            g->rule_start = malloc((size_t)ps.n_rules * sizeof *g->rule_start);
        }
        if (!g || !g->elems || !g->rule_start) {
            grammar_free(g);
            g = NULL;
            nomem(&ps);
        }
    }
    if (g) {
        for (int i = 0; i < ps.n_rules; i++) {
            g->rule_start[i] = g->n_elems;
            memcpy(g->elems + g->n_elems, ps.rules[i].el, (size_t)ps.rules[i].n * sizeof *g->elems);
            g->n_elems += ps.rules[i].n;
        }
        g->n_rules = ps.n_rules;
        g->root = root;
        if (!ps.rc) ps.rc = index_alternatives(g, err);
        char **names = ps.rc ? NULL : malloc((size_t)ps.n_rules * sizeof *names);
        if (!names && !ps.rc) ps.rc = llc_fail(err, LLC_ERR_NOMEM, "grammar: out of memory");
        else if (names) {
            for (int i = 0; i < ps.n_rules; i++) names[i] = ps.rules[i].name;
            ps.rc = check_grammar(g, names, err);
            free(names);
        }
        if (ps.rc) {
            grammar_free(g);
            g = NULL;
        }
    }
    for (int i = 0; i < ps.n_rules; i++) {
        free(ps.rules[i].name);
        free(ps.rules[i].el);
    }
    free(ps.rules);
    *out = g;
    return ps.rc;
}

void grammar_free(grammar *g) {
    if (!g) return;
    free(g->elems);
    free(g->rule_start);
    free(g->alts);
    free(g->rule_alts);
    free(g);
}

int grammar_n_rules(const grammar *g) { return g->n_rules; }
