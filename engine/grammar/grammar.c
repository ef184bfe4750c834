/* grammar.c — the GBNF parser: text to the compiled rules of grammar_internal.h.
 * Groups and repetitions become generated rules (named after the rule they sit
 * in, "item~3"), as in llama.cpp: x* is R ::= x R | (empty), x{m,n} is m copies
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
#define GRAMMAR_MAX_NESTING 2048    /* groups inside groups; the parser recurses once per level */
#define GENERATED_NAME_MAX 120      /* a generated name longer than this is cut and numbered by a serial */

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
    str_index ids;         /* rule name -> id */
    int serial;            /* numbers the generated rules whose names are cut */
    int depth;             /* groups open around the parser now */
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

static int find_rule(const parser *ps, const char *name, size_t len) { return str_index_find(&ps->ids, name, len); }

/* A new rule of that name (which the caller has checked is not taken). */
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
    if (str_index_add(&ps->ids, name, len, ps->n_rules)) return free(r->name), nomem(ps), -1;
    return ps->n_rules++;
}

/* A rule generated inside rule `parent` (a group or a repetition): "item~3".
 * '~' is not a name character, so no rule of the grammar's own can have that
 * name; once nesting has made the parent's name long, its first characters and
 * a serial ("item~1~1~...~#812") keep names short and still distinct. */
static int generated_rule(parser *ps, int parent) {
    char name[GENERATED_NAME_MAX + 32];
    const char *base = ps->rules[parent].name;
    if (strlen(base) > GENERATED_NAME_MAX) snprintf(name, sizeof name, "%.*s~#%d", GENERATED_NAME_MAX - 20, base, ++ps->serial);
    else snprintf(name, sizeof name, "%s~%d", base, ++ps->rules[parent].n_generated);
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
            if (ps->depth >= GRAMMAR_MAX_NESTING)
                return fail_at(ps, at, "groups are nested more than %d deep", GRAMMAR_MAX_NESTING);
            ps->p++;
            int sub = generated_rule(ps, rid);
            if (sub < 0) return;
            skip_space(ps, true);
            ps->depth++;
            parse_alternates(ps, sub, true);
            ps->depth--;
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

/* ---- checks on the whole grammar ----
 * Both run in time linear in the grammar and use no recursion, so a grammar of
 * a million chained rules is checked as quickly as it is parsed. */

static bool is_class_part(uint32_t type) { return type == GE_CHAR_RNG_UPPER || type == GE_CHAR_ALT; }

/* nullable[r]: rule r can match the empty string. An alternative is nullable
 * when it has no character class and every rule it references is nullable: each
 * alternative counts its references not yet known nullable, and a rule found
 * nullable visits the alternatives that reference it (a worklist, not passes). */
static int find_nullable(const grammar *g, bool *nullable) {
    int n_alts = g->rule_alts[g->n_rules];
    int *pending = calloc((size_t)n_alts, sizeof *pending);   /* references not yet nullable; -1: has a class */
    int *alt_rule = malloc((size_t)n_alts * sizeof *alt_rule);
    int *use_start = calloc((size_t)g->n_rules + 1, sizeof *use_start); /* alternatives referencing rule r: */
    int *uses = NULL;                                                 /* uses[use_start[r] .. use_start[r+1]) */
    int *queue = malloc((size_t)g->n_rules * sizeof *queue);
    int rc = pending && alt_rule && use_start && queue ? 0 : LLC_ERR_NOMEM;
    int n_uses = 0;
    for (int r = 0; !rc && r < g->n_rules; r++)
        for (int a = g->rule_alts[r]; a < g->rule_alts[r + 1]; a++) {
            alt_rule[a] = r;
            for (const gelem *el = g->elems + g->alts[a]; !gelem_ends_alt(el->type); el++) {
                if (el->type != GE_RULE_REF) pending[a] = -1;
                else {
                    if (pending[a] >= 0) pending[a]++;
                    use_start[el->value + 1]++, n_uses++;
                }
            }
        }
    if (!rc && !(uses = malloc((size_t)(n_uses > 0 ? n_uses : 1) * sizeof *uses))) rc = LLC_ERR_NOMEM;
    if (rc) goto out;
    for (int r = 0; r < g->n_rules; r++) use_start[r + 1] += use_start[r];
    int *fill = queue; /* borrowed as a cursor per rule until the worklist needs it */
    memcpy(fill, use_start, (size_t)g->n_rules * sizeof *fill);
    for (int a = 0; a < n_alts; a++)
        for (const gelem *el = g->elems + g->alts[a]; !gelem_ends_alt(el->type); el++)
            if (el->type == GE_RULE_REF) uses[fill[el->value]++] = a;
    int head = 0, tail = 0;
    for (int a = 0; a < n_alts; a++)
        if (pending[a] == 0 && !nullable[alt_rule[a]]) nullable[alt_rule[a]] = true, queue[tail++] = alt_rule[a];
    while (head < tail) {
        int r = queue[head++];
        for (int u = use_start[r]; u < use_start[r + 1]; u++) {
            int a = uses[u];
            if (pending[a] > 0 && --pending[a] == 0 && !nullable[alt_rule[a]])
                nullable[alt_rule[a]] = true, queue[tail++] = alt_rule[a];
        }
    }
out:
    free(pending), free(alt_rule), free(use_start), free(uses), free(queue);
    return rc;
}

/* Left recursion: a rule reachable from itself through references each at the
 * start of an alternative, or after only nullable elements. A depth-first search
 * with its own stack; returns the rule the cycle closes on, or -1 (-2: no memory). */
static int find_left_recursion(const grammar *g, const bool *nullable) {
    uint8_t *visit = calloc((size_t)g->n_rules, 1); /* 0 new, 1 on the path, 2 done */
    struct frame { int rule, elem; bool at_start; } *stack = malloc((size_t)g->n_rules * sizeof *stack);
    if (!visit || !stack) return free(visit), free(stack), -2;
    int found = -1;
    for (int r0 = 0; r0 < g->n_rules && found < 0; r0++) {
        if (visit[r0]) continue;
        int top = 0;
        stack[0] = (struct frame){r0, g->rule_start[r0], true};
        visit[r0] = 1;
        while (top >= 0 && found < 0) {
            struct frame *f = &stack[top];
            const gelem *el = &g->elems[f->elem];
            if (el->type == GE_END) {
                visit[f->rule] = 2;
                top--;
                continue;
            }
            f->elem++;
            if (el->type == GE_ALT) {
                f->at_start = true;
            } else if (!f->at_start || is_class_part(el->type)) {
                continue;
            } else if (el->type != GE_RULE_REF) {
                f->at_start = false;
            } else {
                int s = (int)el->value;
                if (!nullable[s]) f->at_start = false;
                if (visit[s] == 1) found = s;
                else if (visit[s] == 0) {
                    visit[s] = 1;
                    stack[++top] = (struct frame){s, g->rule_start[s], true};
                }
            }
        }
    }
    free(visit), free(stack);
    return found;
}

static int check_grammar(const grammar *g, char *const *names, llc_err *err) {
    bool *nullable = calloc((size_t)g->n_rules, sizeof *nullable);
    int rc = nullable ? find_nullable(g, nullable) : LLC_ERR_NOMEM;
    int cycle = rc ? -1 : find_left_recursion(g, nullable);
    free(nullable);
    if (rc || cycle == -2) return llc_fail(err, LLC_ERR_NOMEM, "grammar: out of memory");
    if (cycle >= 0)
        return llc_fail(err, LLC_ERR_FORMAT, "grammar: rule '%s' is left-recursive (it can reach itself without consuming a character)",
                        names[cycle]);
    return 0;
}

/* Refuses, with a message that says why, a grammar the matcher could not even
 * start: its first character's stacks take more expansion than the matcher allows. */
static int check_start(const grammar *g, llc_err *err) {
    grammar_state *st;
    int rc = grammar_state_create(g, false, &st);
    grammar_state_free(st);
    if (rc == LLC_ERR_RANGE)
        return llc_fail(err, LLC_ERR_RANGE, "grammar: too complex: its first character needs over %d rule "
                        "expansions", GRAMMAR_MAX_WORK);
    return rc ? llc_fail(err, LLC_ERR_NOMEM, "grammar: out of memory") : 0;
}

/* Fills alts / rule_alts: where each alternative of each rule starts. */
static int index_alternatives(grammar *g, llc_err *err) {
    int n = 0;
    for (int i = 0; i < g->n_elems; i++) n += gelem_ends_alt(g->elems[i].type);
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
            atomic_init(&g->refs, 1);
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
        if (!ps.rc) ps.rc = check_start(g, err);
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
    str_index_free(&ps.ids);
    *out = g;
    return ps.rc;
}

grammar *grammar_ref(grammar *g) {
    if (g) atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
    return g;
}

void grammar_free(grammar *g) {
    if (!g || atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) > 1) return;
    free(g->elems);
    free(g->rule_start);
    free(g->alts);
    free(g->rule_alts);
    free(g);
}

int grammar_n_rules(const grammar *g) { return g->n_rules; }
