/* jinja_parse.c — Jinja template source to a syntax tree: splitting the source
 * into text and tags with Hugging Face's whitespace rules (trim_blocks,
 * lstrip_blocks, `-`/`+` modifiers), tokenizing tag contents, and a
 * recursive-descent parser with Jinja's operator precedence. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/template/jinja_internal.h"

#define MAX_DEPTH 200 /* nesting of statements and expressions */

/* ---- arena ---- */

struct jarena_chunk {
    jarena_chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char mem[];
};

void *jarena_alloc(jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (a->limit && (n > a->limit || a->used > a->limit - n)) return NULL;
    jarena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = c ? c->cap * 2 : 64 * 1024;
        if (cap > 8u << 20) cap = 8u << 20;
        if (cap < n) cap = n;
        c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->mem + c->used;
    c->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

void jarena_free(jarena *a) {
    jarena_chunk *c = a->head;
    while (c) {
        jarena_chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
    a->used = 0;
}

/* ---- parser state ---- */

enum seg_kind { SEG_TEXT, SEG_VAR, SEG_BLOCK };

typedef struct seg {
    int kind;
    const char *p; /* text, or the tag's inside (without delimiters/modifiers) */
    size_t n;
    int line;
} seg;

enum tok_kind { TK_END, TK_NAME, TK_INT, TK_FLOAT, TK_STR, TK_OP };

typedef struct tok {
    int kind;
    const char *p; /* source of names/ops */
    size_t n;
    int64_t i;
    double f;
    const jstr *s; /* TK_STR: decoded */
} tok;

typedef struct parser {
    jarena *arena;
    const char *src;
    seg *segs;
    int n_segs, cap_segs;
    int si;       /* current segment */
    tok *toks;    /* tokens of the current tag */
    int n_toks, ti;
    int line;
    int depth;
    const char *line_mark; /* line_at's memo */
    int line_mark_n;
    jmp_buf jb;
    llc_err *err;
    int code;
} parser;

static _Noreturn void pfail(parser *P, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static _Noreturn void pfail(parser *P, int code, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    P->code = llc_fail(P->err, code, "template line %d: %s", P->line, msg);
    longjmp(P->jb, 1);
}

static void *palloc(parser *P, size_t n) {
    void *p = jarena_alloc(P->arena, n);
    if (!p) pfail(P, LLC_ERR_NOMEM, "out of memory");
    return p;
}

static const jstr *pstr(parser *P, const char *s, size_t n) {
    jstr *j = palloc(P, sizeof *j + n + 1);
    memcpy(j->p, s, n);
    j->p[n] = 0;
    j->n = n;
    return j;
}

/* Line number of p; counts on from the last answer when p is past it (the
 * splitter moves forward), so splitting stays linear. */
static int line_at_from(const char *src, const char *p, const char **mark, int *mark_line) {
    const char *q = src;
    int l = 1;
    if (*mark && *mark >= src && *mark <= p) q = *mark, l = *mark_line;
    for (; q < p; q++) l += *q == '\n';
    *mark = p;
    *mark_line = l;
    return l;
}

/* ---- splitting into text and tags ---- */

static void add_seg(parser *P, int kind, const char *p, size_t n, int line) {
    if (P->n_segs == P->cap_segs) {
        int cap = P->cap_segs ? P->cap_segs * 2 : 64;
        seg *ns = palloc(P, (size_t)cap * sizeof *ns);
        if (P->n_segs) memcpy(ns, P->segs, (size_t)P->n_segs * sizeof *ns);
        P->segs = ns;
        P->cap_segs = cap;
    }
    P->segs[P->n_segs++] = (seg){kind, p, n, line};
}

#define line_at(P, p) line_at_from((P)->src, (p), &(P)->line_mark, &(P)->line_mark_n)

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* End of a {{ }} or {% %} tag starting its inside at s: the position of the
 * closing delimiter's first char, skipping string literals and balanced braces. */
static const char *find_tag_end(parser *P, const char *s, const char *end, char closer) {
    int depth = 0;
    for (const char *p = s; p < end; p++) {
        char c = *p;
        if (c == '\'' || c == '"') {
            for (p++; p < end && *p != c; p++)
                if (*p == '\\' && p + 1 < end) p++;
            if (p >= end) break;
        } else if (depth == 0 && c == closer && p + 1 < end && p[1] == '}') {
            return p;
        } else if (c == '{' || c == '[' || c == '(') {
            depth++;
        } else if ((c == '}' || c == ']' || c == ')') && depth > 0) {
            depth--;
        }
    }
    P->line = line_at(P, s);
    pfail(P, LLC_ERR_FORMAT, "unclosed tag");
}

static void split(parser *P, const char *src, size_t len) {
    const char *end = src + len, *pos = src;
    while (pos < end) {
        const char *q = pos;
        while (q + 1 < end && !(q[0] == '{' && (q[1] == '{' || q[1] == '%' || q[1] == '#'))) q++;
        if (q + 1 >= end) q = end;
        const char *text_end = q;
        if (q == end) {
            add_seg(P, SEG_TEXT, pos, (size_t)(end - pos), line_at(P, pos));
            break;
        }
        char kind = q[1];
        const char *s = q + 2;
        bool strip_before = false, no_lstrip = false;
        if (s < end && *s == '-') strip_before = true, s++;
        else if (s < end && *s == '+') no_lstrip = true, s++;
        const char *e, *after;
        bool strip_after = false, no_trim = false;
        if (kind == '#') {
            e = s;
            while (e + 1 < end && !(e[0] == '#' && e[1] == '}')) e++;
            if (e + 1 >= end) {
                P->line = line_at(P, q);
                pfail(P, LLC_ERR_FORMAT, "unclosed comment");
            }
            after = e + 2;
            if (e > s && e[-1] == '-') strip_after = true;
            if (e > s && e[-1] == '+') no_trim = true;
        } else {
            e = find_tag_end(P, s, end, kind == '{' ? '}' : '%');
            after = e + 2;
            if (e > s && e[-1] == '-') strip_after = true, e--;
            else if (e > s && e[-1] == '+' && kind == '%') no_trim = true, e--;
        }
        /* whitespace before the tag */
        const char *te = text_end;
        if (strip_before) {
            while (te > pos && is_ws(te[-1])) te--;
        } else if (kind != '{' && !no_lstrip) {
            const char *b = te;
            while (b > pos && (b[-1] == ' ' || b[-1] == '\t')) b--;
            bool at_line_start = b == src || b[-1] == '\n';
            if (at_line_start) te = b;
        }
        if (te > pos) add_seg(P, SEG_TEXT, pos, (size_t)(te - pos), line_at(P, pos));
        int line = line_at(P, q);
        if (kind != '#') {
            add_seg(P, kind == '{' ? SEG_VAR : SEG_BLOCK, s, (size_t)(e - s), line);
            /* {% raw %} ... {% endraw %}: the text between is literal */
            if (kind == '%') {
                const char *a = s, *z = e;
                while (a < z && is_ws(*a)) a++;
                while (z > a && is_ws(z[-1])) z--;
                if (z - a == 3 && memcmp(a, "raw", 3) == 0) {
                    P->n_segs--;
                    const char *r = after;
                    for (;;) {
                        const char *t = r;
                        while (t + 1 < end && !(t[0] == '{' && t[1] == '%')) t++;
                        if (t + 1 >= end) {
                            P->line = line;
                            pfail(P, LLC_ERR_FORMAT, "raw without endraw");
                        }
                        const char *u = t + 2;
                        bool sb = false;
                        if (*u == '-') sb = true, u++;
                        while (u < end && is_ws(*u)) u++;
                        if ((size_t)(end - u) >= 6 && memcmp(u, "endraw", 6) == 0) {
                            const char *c = u + 6;
                            while (c < end && is_ws(*c)) c++;
                            bool sa = false;
                            if (c < end && *c == '-') sa = true, c++;
                            if (c + 1 < end && c[0] == '%' && c[1] == '}') {
                                const char *body = after, *be = t;
                                if (strip_after) while (body < be && is_ws(*body)) body++;
                                if (sb) while (be > body && is_ws(be[-1])) be--;
                                if (be > body) add_seg(P, SEG_TEXT, body, (size_t)(be - body), line);
                                after = c + 2;
                                strip_after = sa;
                                break;
                            }
                        }
                        r = t + 2;
                    }
                }
            }
        }
        pos = after;
        if (strip_after) {
            while (pos < end && is_ws(*pos)) pos++;
        } else if (kind != '{' && !no_trim) {
            if (pos < end && *pos == '\n') pos++;
            else if (pos + 1 < end && pos[0] == '\r' && pos[1] == '\n') pos += 2;
        }
    }
}

/* ---- tokenizing a tag ---- */

static void add_tok(parser *P, tok t, int *cap) {
    if (P->n_toks == *cap) {
        int nc = *cap ? *cap * 2 : 32;
        tok *nt = palloc(P, (size_t)nc * sizeof *nt);
        if (P->n_toks) memcpy(nt, P->toks, (size_t)P->n_toks * sizeof *nt);
        P->toks = nt;
        *cap = nc;
    }
    P->toks[P->n_toks++] = t;
}

static void put_utf8(char *o, size_t *k, uint32_t c) {
    if (c < 0x80) o[(*k)++] = (char)c;
    else if (c < 0x800) {
        o[(*k)++] = (char)(0xc0 | (c >> 6));
        o[(*k)++] = (char)(0x80 | (c & 0x3f));
    } else if (c < 0x10000) {
        o[(*k)++] = (char)(0xe0 | (c >> 12));
        o[(*k)++] = (char)(0x80 | ((c >> 6) & 0x3f));
        o[(*k)++] = (char)(0x80 | (c & 0x3f));
    } else {
        o[(*k)++] = (char)(0xf0 | (c >> 18));
        o[(*k)++] = (char)(0x80 | ((c >> 12) & 0x3f));
        o[(*k)++] = (char)(0x80 | ((c >> 6) & 0x3f));
        o[(*k)++] = (char)(0x80 | (c & 0x3f));
    }
}

static void tokenize(parser *P, const seg *sg) {
    P->n_toks = 0;
    P->ti = 0;
    P->line = sg->line;
    int cap = 0; /* a fresh arena array for each tag */
    P->toks = NULL;
    const char *p = sg->p, *end = sg->p + sg->n;
    while (p < end) {
        char c = *p;
        if (is_ws(c)) {
            p++;
            continue;
        }
        tok t = {0};
        if (isalpha((unsigned char)c) || c == '_') {
            const char *s = p;
            while (p < end && (isalnum((unsigned char)*p) || *p == '_')) p++;
            t.kind = TK_NAME;
            t.p = s;
            t.n = (size_t)(p - s);
        } else if (isdigit((unsigned char)c)) {
            const char *s = p;
            while (p < end && (isdigit((unsigned char)*p) || *p == '_')) p++;
            bool fl = false;
            if (p + 1 < end && *p == '.' && isdigit((unsigned char)p[1])) {
                fl = true;
                p++;
                while (p < end && isdigit((unsigned char)*p)) p++;
            }
            if (p < end && (*p == 'e' || *p == 'E')) {
                const char *q = p + 1;
                if (q < end && (*q == '+' || *q == '-')) q++;
                if (q < end && isdigit((unsigned char)*q)) {
                    fl = true;
                    p = q;
                    while (p < end && isdigit((unsigned char)*p)) p++;
                }
            }
            char buf[64];
            size_t k = 0;
            for (const char *q = s; q < p && k < sizeof buf - 1; q++)
                if (*q != '_') buf[k++] = *q;
            buf[k] = 0;
            if (fl) {
                t.kind = TK_FLOAT;
                t.f = strtod(buf, NULL);
            } else {
                errno = 0;
                t.kind = TK_INT;
                t.i = strtoll(buf, NULL, 10);
                if (errno) pfail(P, LLC_ERR_FORMAT, "integer literal too large");
            }
        } else if (c == '\'' || c == '"') {
            const char *s = ++p;
            while (p < end && *p != c) {
                if (*p == '\\' && p + 1 < end) p++;
                p++;
            }
            if (p >= end) pfail(P, LLC_ERR_FORMAT, "unterminated string");
            size_t n = (size_t)(p - s);
            jstr *j = palloc(P, sizeof *j + n + 1);
            size_t k = 0;
            for (const char *q = s; q < p; q++) {
                if (*q != '\\') {
                    j->p[k++] = *q;
                    continue;
                }
                q++;
                switch (*q) {
                case 'n': j->p[k++] = '\n'; break;
                case 't': j->p[k++] = '\t'; break;
                case 'r': j->p[k++] = '\r'; break;
                case 'b': j->p[k++] = '\b'; break;
                case 'f': j->p[k++] = '\f'; break;
                case 'v': j->p[k++] = '\v'; break;
                case '0': j->p[k++] = '\0'; break;
                case '\\': j->p[k++] = '\\'; break;
                case '\'': j->p[k++] = '\''; break;
                case '"': j->p[k++] = '"'; break;
                case '\n': break;
                case 'x':
                case 'u':
                case 'U': {
                    int nd = *q == 'x' ? 2 : *q == 'u' ? 4 : 8;
                    uint32_t cp = 0;
                    int d = 0;
                    for (; d < nd && q + 1 < p && isxdigit((unsigned char)q[1]); d++) {
                        q++;
                        cp = cp * 16 + (uint32_t)(isdigit((unsigned char)*q) ? *q - '0' : (tolower((unsigned char)*q) - 'a' + 10));
                    }
                    if (d < nd || cp > 0x10ffff) pfail(P, LLC_ERR_FORMAT, "bad escape in string");
                    /* the escape itself is >= as long as its UTF-8 form */
                    put_utf8(j->p, &k, cp);
                    break;
                }
                default:
                    j->p[k++] = '\\';
                    j->p[k++] = *q;
                }
            }
            j->p[k] = 0;
            j->n = k;
            p++;
            t.kind = TK_STR;
            t.s = j;
        } else {
            static const char *two[] = {"==", "!=", "<=", ">=", "//", "**"};
            t.kind = TK_OP;
            t.p = p;
            t.n = 1;
            for (size_t i = 0; i < LLC_ARRAY_LEN(two); i++)
                if (p + 1 < end && p[0] == two[i][0] && p[1] == two[i][1]) t.n = 2;
            if (!strchr("+-*/%~|.,:()[]{}<>=!", c)) pfail(P, LLC_ERR_FORMAT, "unexpected character '%c'", c);
            p += t.n;
        }
        add_tok(P, t, &cap);
    }
    add_tok(P, (tok){.kind = TK_END}, &cap);
}

/* ---- token helpers ---- */

static tok *peek(parser *P) { return &P->toks[P->ti]; }
static tok *peek2(parser *P) { return &P->toks[P->ti + (P->toks[P->ti].kind != TK_END)]; }
static tok *next(parser *P) {
    tok *t = &P->toks[P->ti];
    if (t->kind != TK_END) P->ti++;
    return t;
}
static bool is_op(const tok *t, const char *op) {
    return t->kind == TK_OP && t->n == strlen(op) && memcmp(t->p, op, t->n) == 0;
}
static bool is_name(const tok *t, const char *nm) {
    return t->kind == TK_NAME && t->n == strlen(nm) && memcmp(t->p, nm, t->n) == 0;
}
static bool accept_op(parser *P, const char *op) {
    if (!is_op(peek(P), op)) return false;
    next(P);
    return true;
}
static bool accept_name(parser *P, const char *nm) {
    if (!is_name(peek(P), nm)) return false;
    next(P);
    return true;
}
static const char *tok_desc(const tok *t, char *buf, size_t cap) {
    switch (t->kind) {
    case TK_END: return "end of tag";
    case TK_STR: return "a string";
    case TK_INT:
    case TK_FLOAT: return "a number";
    default: snprintf(buf, cap, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->p); return buf;
    }
}
static void expect_op(parser *P, const char *op) {
    if (accept_op(P, op)) return;
    char b[64];
    pfail(P, LLC_ERR_FORMAT, "expected '%s', found %s", op, tok_desc(peek(P), b, sizeof b));
}
static const jstr *expect_ident(parser *P) {
    tok *t = peek(P);
    if (t->kind != TK_NAME) {
        char b[64];
        pfail(P, LLC_ERR_FORMAT, "expected a name, found %s", tok_desc(t, b, sizeof b));
    }
    next(P);
    return pstr(P, t->p, t->n);
}

static jnode *mk(parser *P, int kind) {
    jnode *n = palloc(P, sizeof *n);
    n->kind = kind;
    n->line = P->line;
    return n;
}

/* growable node list */
typedef struct nvec {
    jnode **v;
    int n, cap;
} nvec;
static void nv_push(parser *P, nvec *v, jnode *x) {
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 4;
        jnode **nv = palloc(P, (size_t)cap * sizeof *nv);
        if (v->n) memcpy(nv, v->v, (size_t)v->n * sizeof *nv);
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = x;
}
static jnodes nv_done(nvec *v) { return (jnodes){v->v, v->n}; }

typedef struct svec {
    const jstr **v;
    int n, cap;
} svec;
static void sv_push(parser *P, svec *v, const jstr *x) {
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 4;
        const jstr **nv = palloc(P, (size_t)cap * sizeof *nv);
        if (v->n) memcpy(nv, v->v, (size_t)v->n * sizeof *nv);
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = x;
}

static void enter(parser *P) {
    if (++P->depth > MAX_DEPTH) pfail(P, LLC_ERR_RANGE, "nested too deeply (more than %d levels)", MAX_DEPTH);
}
static void leave(parser *P) { P->depth--; }

/* ---- expressions ---- */

static jnode *parse_expr(parser *P);
static jnode *parse_or(parser *P);
static jnode *parse_unary(parser *P, bool with_filter);

static jnode *lit_none(parser *P) {
    jnode *n = mk(P, JN_LIT);
    n->lit_type = JV_NONE;
    return n;
}

/* call arguments after '(' : positional and name=value */
static void parse_args(parser *P, jnode *call) {
    nvec pos = {0}, kwv = {0};
    svec kwn = {0};
    while (!is_op(peek(P), ")")) {
        if (peek(P)->kind == TK_NAME && is_op(peek2(P), "=")) {
            sv_push(P, &kwn, expect_ident(P));
            next(P);
            nv_push(P, &kwv, parse_expr(P));
        } else {
            if (kwn.n) pfail(P, LLC_ERR_FORMAT, "positional argument after a keyword argument");
            nv_push(P, &pos, parse_expr(P));
        }
        if (!accept_op(P, ",")) break;
    }
    expect_op(P, ")");
    call->list = nv_done(&pos);
    call->list2 = nv_done(&kwv);
    call->names = kwn.v;
    call->n_names = kwn.n;
}

static jnode *parse_primary(parser *P) {
    tok *t = peek(P);
    jnode *n;
    char b[64];
    switch (t->kind) {
    case TK_STR: {
        next(P);
        n = mk(P, JN_LIT);
        n->lit_type = JV_STR;
        n->lit_s = t->s;
        /* adjacent string literals concatenate */
        while (peek(P)->kind == TK_STR) {
            const jstr *a = n->lit_s, *c = next(P)->s;
            jstr *j = palloc(P, sizeof *j + a->n + c->n + 1);
            memcpy(j->p, a->p, a->n);
            memcpy(j->p + a->n, c->p, c->n);
            j->n = a->n + c->n;
            j->p[j->n] = 0;
            n->lit_s = j;
        }
        return n;
    }
    case TK_INT:
        next(P);
        n = mk(P, JN_LIT);
        n->lit_type = JV_INT;
        n->lit_i = t->i;
        return n;
    case TK_FLOAT:
        next(P);
        n = mk(P, JN_LIT);
        n->lit_type = JV_FLOAT;
        n->lit_f = t->f;
        return n;
    case TK_NAME:
        next(P);
        if (is_name(t, "true") || is_name(t, "True") || is_name(t, "false") || is_name(t, "False")) {
            n = mk(P, JN_LIT);
            n->lit_type = JV_BOOL;
            n->lit_i = t->p[0] == 't' || t->p[0] == 'T';
            return n;
        }
        if (is_name(t, "none") || is_name(t, "None")) return lit_none(P);
        n = mk(P, JN_NAME);
        n->name = pstr(P, t->p, t->n);
        return n;
    case TK_OP:
        if (is_op(t, "(")) {
            next(P);
            if (accept_op(P, ")")) return mk(P, JN_TUPLE);
            jnode *e = parse_expr(P);
            if (is_op(peek(P), ",")) {
                nvec items = {0};
                nv_push(P, &items, e);
                while (accept_op(P, ",") && !is_op(peek(P), ")")) nv_push(P, &items, parse_expr(P));
                expect_op(P, ")");
                n = mk(P, JN_TUPLE);
                n->list = nv_done(&items);
                return n;
            }
            expect_op(P, ")");
            return e;
        }
        if (is_op(t, "[")) {
            next(P);
            nvec items = {0};
            while (!is_op(peek(P), "]")) {
                nv_push(P, &items, parse_expr(P));
                if (!accept_op(P, ",")) break;
            }
            expect_op(P, "]");
            n = mk(P, JN_LIST);
            n->list = nv_done(&items);
            return n;
        }
        if (is_op(t, "{")) {
            next(P);
            nvec keys = {0}, vals = {0};
            while (!is_op(peek(P), "}")) {
                nv_push(P, &keys, parse_expr(P));
                expect_op(P, ":");
                nv_push(P, &vals, parse_expr(P));
                if (!accept_op(P, ",")) break;
            }
            expect_op(P, "}");
            n = mk(P, JN_DICT);
            n->list = nv_done(&keys);
            n->list2 = nv_done(&vals);
            return n;
        }
        /* fallthrough */
    default:
        pfail(P, LLC_ERR_FORMAT, "unexpected %s in expression", tok_desc(t, b, sizeof b));
    }
}

static jnode *parse_postfix(parser *P, jnode *n) {
    for (;;) {
        if (accept_op(P, ".")) {
            tok *t = peek(P);
            jnode *a = mk(P, JN_ATTR);
            a->a = n;
            if (t->kind == TK_INT) { /* x.0 is x[0] */
                next(P);
                a->kind = JN_INDEX;
                a->b = mk(P, JN_LIT);
                a->b->lit_type = JV_INT;
                a->b->lit_i = t->i;
            } else {
                a->name = expect_ident(P);
            }
            n = a;
        } else if (accept_op(P, "[")) {
            jnode *s[3] = {NULL, NULL, NULL};
            int k = 0;
            bool slice = false;
            for (;;) {
                if (!is_op(peek(P), ":") && !is_op(peek(P), "]")) s[k] = parse_expr(P);
                if (k < 2 && accept_op(P, ":")) {
                    slice = true;
                    k++;
                    continue;
                }
                break;
            }
            expect_op(P, "]");
            jnode *x = mk(P, slice ? JN_SLICE : JN_INDEX);
            x->a = n;
            if (slice) {
                x->b = s[0];
                x->c = s[1];
                if (s[2]) {
                    nvec st = {0};
                    nv_push(P, &st, s[2]);
                    x->list = nv_done(&st);
                }
            } else {
                if (!s[0]) pfail(P, LLC_ERR_FORMAT, "empty subscript");
                x->b = s[0];
            }
            n = x;
        } else if (accept_op(P, "(")) {
            jnode *c = mk(P, JN_CALL);
            c->a = n;
            parse_args(P, c);
            n = c;
        } else {
            return n;
        }
    }
}

/* filters `| name(args)` and tests `is [not] name [arg]` after a unary operand */
static jnode *parse_filters(parser *P, jnode *n) {
    for (;;) {
        if (accept_op(P, "|")) {
            jnode *f = mk(P, JN_FILTER);
            f->a = n;
            f->name = expect_ident(P);
            while (accept_op(P, ".")) { /* dotted filter names: keep the last part */
                f->name = expect_ident(P);
            }
            if (accept_op(P, "(")) parse_args(P, f);
            n = f;
        } else if (accept_name(P, "is")) {
            jnode *t = mk(P, JN_TEST);
            t->a = n;
            if (accept_name(P, "not")) t->op = 1;
            tok *nt = peek(P);
            if (nt->kind == TK_NAME) {
                t->name = expect_ident(P);
            } else if (nt->kind == TK_OP && (is_op(nt, "==") || is_op(nt, "!=") || is_op(nt, "<") ||
                                             is_op(nt, ">") || is_op(nt, "<=") || is_op(nt, ">="))) {
                next(P);
                t->name = pstr(P, nt->p, nt->n);
            } else {
                char b[64];
                pfail(P, LLC_ERR_FORMAT, "expected a test name after 'is', found %s", tok_desc(nt, b, sizeof b));
            }
            if (accept_op(P, "(")) {
                parse_args(P, t);
            } else {
                /* one bare argument: `is divisibleby 3`, `is sameas none` */
                tok *a = peek(P);
                bool arg = a->kind == TK_STR || a->kind == TK_INT || a->kind == TK_FLOAT ||
                           (a->kind == TK_NAME && !is_name(a, "and") && !is_name(a, "or") &&
                            !is_name(a, "else") && !is_name(a, "if") && !is_name(a, "in") &&
                            !is_name(a, "is") && !is_name(a, "not")) ||
                           is_op(a, "[") || is_op(a, "{");
                if (arg) {
                    nvec args = {0};
                    nv_push(P, &args, parse_postfix(P, parse_primary(P)));
                    t->list = nv_done(&args);
                }
            }
            n = t;
        } else {
            return n;
        }
    }
}

static jnode *parse_unary(parser *P, bool with_filter) {
    enter(P);
    jnode *n;
    if (accept_op(P, "-")) {
        n = mk(P, JN_NEG);
        n->a = parse_unary(P, false);
    } else if (accept_op(P, "+")) {
        n = mk(P, JN_POS);
        n->a = parse_unary(P, false);
    } else {
        n = parse_postfix(P, parse_primary(P));
    }
    if (with_filter) n = parse_filters(P, n);
    leave(P);
    return n;
}

static jnode *bin(parser *P, int op, jnode *a, jnode *b) {
    jnode *n = mk(P, JN_BIN);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *parse_pow(parser *P) {
    jnode *n = parse_unary(P, true);
    while (accept_op(P, "**")) n = bin(P, JOP_POW, n, parse_unary(P, true));
    return n;
}
static jnode *parse_math2(parser *P) {
    jnode *n = parse_pow(P);
    for (;;) {
        if (accept_op(P, "*")) n = bin(P, JOP_MUL, n, parse_pow(P));
        else if (accept_op(P, "//")) n = bin(P, JOP_FLOORDIV, n, parse_pow(P));
        else if (accept_op(P, "/")) n = bin(P, JOP_DIV, n, parse_pow(P));
        else if (accept_op(P, "%")) n = bin(P, JOP_MOD, n, parse_pow(P));
        else return n;
    }
}
static jnode *parse_concat(parser *P) {
    jnode *n = parse_math2(P);
    while (accept_op(P, "~")) n = bin(P, JOP_CONCAT, n, parse_math2(P));
    return n;
}
static jnode *parse_math1(parser *P) {
    jnode *n = parse_concat(P);
    for (;;) {
        if (accept_op(P, "+")) n = bin(P, JOP_ADD, n, parse_concat(P));
        else if (accept_op(P, "-")) n = bin(P, JOP_SUB, n, parse_concat(P));
        else return n;
    }
}
static jnode *parse_compare(parser *P) {
    jnode *n = parse_math1(P);
    for (;;) {
        tok *t = peek(P);
        int op = -1;
        if (is_op(t, "==")) op = JOP_EQ;
        else if (is_op(t, "!=")) op = JOP_NE;
        else if (is_op(t, "<=")) op = JOP_LE;
        else if (is_op(t, ">=")) op = JOP_GE;
        else if (is_op(t, "<")) op = JOP_LT;
        else if (is_op(t, ">")) op = JOP_GT;
        else if (is_name(t, "in")) op = JOP_IN;
        else if (is_name(t, "not") && is_name(peek2(P), "in")) {
            next(P);
            op = JOP_NOTIN;
        }
        if (op < 0) return n;
        next(P);
        n = bin(P, op, n, parse_math1(P));
    }
}
static jnode *parse_not(parser *P) {
    if (accept_name(P, "not")) {
        enter(P);
        jnode *n = mk(P, JN_NOT);
        n->a = parse_not(P);
        leave(P);
        return n;
    }
    return parse_compare(P);
}
static jnode *parse_and(parser *P) {
    jnode *n = parse_not(P);
    while (accept_name(P, "and")) {
        jnode *x = mk(P, JN_AND);
        x->a = n;
        x->b = parse_not(P);
        n = x;
    }
    return n;
}
static jnode *parse_or(parser *P) {
    jnode *n = parse_and(P);
    while (accept_name(P, "or")) {
        jnode *x = mk(P, JN_OR);
        x->a = n;
        x->b = parse_and(P);
        n = x;
    }
    return n;
}
static jnode *parse_expr(parser *P) {
    enter(P);
    jnode *n = parse_or(P);
    while (accept_name(P, "if")) {
        jnode *c = mk(P, JN_COND);
        c->b = n;
        c->a = parse_or(P);
        if (accept_name(P, "else")) c->c = parse_expr(P);
        n = c;
    }
    leave(P);
    return n;
}

/* expression or bare tuple `a, b` */
static jnode *parse_tuple_expr(parser *P, bool with_cond) {
    jnode *e = with_cond ? parse_expr(P) : parse_or(P);
    if (!is_op(peek(P), ",")) return e;
    nvec items = {0};
    nv_push(P, &items, e);
    while (accept_op(P, ",")) {
        tok *t = peek(P);
        if (t->kind == TK_END || is_op(t, ")")) break;
        nv_push(P, &items, with_cond ? parse_expr(P) : parse_or(P));
    }
    jnode *n = mk(P, JN_TUPLE);
    n->list = nv_done(&items);
    return n;
}

static void expect_end(parser *P) {
    if (peek(P)->kind != TK_END) {
        char b[64];
        pfail(P, LLC_ERR_FORMAT, "unexpected %s", tok_desc(peek(P), b, sizeof b));
    }
}

/* ---- statements ---- */

/* Parses statements until a block tag whose first word is one of `stops`
 * (NULL-terminated); leaves the tokens of that tag current and returns its
 * word index, or -1 at the end of the template (an error when stops given). */
static int parse_body(parser *P, const char *const *stops, jnodes *out);

static jnode *parse_block_tag(parser *P, const tok *kw);

static int parse_body(parser *P, const char *const *stops, jnodes *out) {
    nvec body = {0};
    enter(P);
    while (P->si < P->n_segs) {
        seg *sg = &P->segs[P->si++];
        P->line = sg->line;
        if (sg->kind == SEG_TEXT) {
            jnode *t = mk(P, JN_TEXT);
            t->lit_s = pstr(P, sg->p, sg->n);
            nv_push(P, &body, t);
            continue;
        }
        tokenize(P, sg);
        if (sg->kind == SEG_VAR) {
            jnode *o = mk(P, JN_OUT);
            o->a = parse_tuple_expr(P, true);
            expect_end(P);
            nv_push(P, &body, o);
            continue;
        }
        tok *kw = next(P);
        if (kw->kind != TK_NAME) pfail(P, LLC_ERR_FORMAT, "expected a statement name after '{%%'");
        for (int i = 0; stops && stops[i]; i++)
            if (is_name(kw, stops[i])) {
                *out = nv_done(&body);
                leave(P);
                return i;
            }
        nv_push(P, &body, parse_block_tag(P, kw));
    }
    if (stops) {
        P->line = P->n_segs ? P->segs[P->n_segs - 1].line : 1;
        pfail(P, LLC_ERR_FORMAT, "missing {%% %s %%}", stops[0]);
    }
    *out = nv_done(&body);
    leave(P);
    return -1;
}

static void end_tag(parser *P, const char *name) {
    accept_name(P, name); /* `{% endmacro name %}` style trailers are allowed */
    (void)P;
}

static jnode *parse_if(parser *P) {
    jnode *n = mk(P, JN_IF);
    n->a = parse_tuple_expr(P, true);
    expect_end(P);
    static const char *const stops[] = {"endif", "elif", "else", NULL};
    int w = parse_body(P, stops, &n->list);
    if (w == 1) { /* elif: a nested if in the else branch */
        jnode *e = parse_if(P);
        nvec eb = {0};
        nv_push(P, &eb, e);
        n->list2 = nv_done(&eb);
        return n;
    }
    if (w == 2) {
        expect_end(P);
        static const char *const stops2[] = {"endif", NULL};
        parse_body(P, stops2, &n->list2);
    }
    expect_end(P);
    return n;
}

static jnode *parse_for(parser *P) {
    jnode *n = mk(P, JN_FOR);
    svec names = {0};
    do {
        if (accept_op(P, "(")) {
            do sv_push(P, &names, expect_ident(P));
            while (accept_op(P, ","));
            expect_op(P, ")");
        } else {
            sv_push(P, &names, expect_ident(P));
        }
    } while (accept_op(P, ","));
    n->names = names.v;
    n->n_names = names.n;
    if (!accept_name(P, "in")) pfail(P, LLC_ERR_FORMAT, "expected 'in' in for loop");
    n->a = parse_tuple_expr(P, false);
    if (accept_name(P, "if")) n->b = parse_expr(P);
    accept_name(P, "recursive");
    expect_end(P);
    static const char *const stops[] = {"endfor", "else", NULL};
    int w = parse_body(P, stops, &n->list);
    if (w == 1) {
        expect_end(P);
        static const char *const stops2[] = {"endfor", NULL};
        parse_body(P, stops2, &n->list2);
    }
    expect_end(P);
    return n;
}

static jnode *parse_set(parser *P) {
    jnode *n = mk(P, JN_SET);
    svec names = {0};
    const jstr *first = expect_ident(P);
    if (accept_op(P, ".")) { /* ns.attr */
        n->a = mk(P, JN_NAME);
        n->a->name = first;
        n->name = expect_ident(P);
    } else {
        sv_push(P, &names, first);
        while (accept_op(P, ",")) sv_push(P, &names, expect_ident(P));
    }
    n->names = names.v;
    n->n_names = names.n;
    if (!accept_op(P, "=")) {
        if (n->a || names.n != 1) pfail(P, LLC_ERR_FORMAT, "block set needs one plain name");
        n->kind = JN_SETBLOCK;
        /* optional filters: {% set x | trim %} */
        jnode *chain = NULL;
        while (accept_op(P, "|")) {
            jnode *f = mk(P, JN_FILTER);
            f->a = chain;
            f->name = expect_ident(P);
            if (accept_op(P, "(")) parse_args(P, f);
            chain = f;
        }
        n->b = chain;
        expect_end(P);
        static const char *const stops[] = {"endset", NULL};
        parse_body(P, stops, &n->list);
        expect_end(P);
        return n;
    }
    n->b = parse_tuple_expr(P, true);
    expect_end(P);
    return n;
}

static void parse_params(parser *P, jnode *n) {
    svec names = {0};
    nvec defs = {0};
    if (accept_op(P, "(")) {
        while (!is_op(peek(P), ")")) {
            sv_push(P, &names, expect_ident(P));
            nv_push(P, &defs, accept_op(P, "=") ? parse_expr(P) : NULL);
            if (!accept_op(P, ",")) break;
        }
        expect_op(P, ")");
    }
    n->names = names.v;
    n->n_names = names.n;
    n->list2 = nv_done(&defs);
}

static jnode *parse_block_tag(parser *P, const tok *kw) {
    jnode *n;
    if (is_name(kw, "if")) return parse_if(P);
    if (is_name(kw, "for")) return parse_for(P);
    if (is_name(kw, "set")) return parse_set(P);
    if (is_name(kw, "macro")) {
        n = mk(P, JN_MACRO);
        n->name = expect_ident(P);
        parse_params(P, n);
        expect_end(P);
        static const char *const stops[] = {"endmacro", NULL};
        parse_body(P, stops, &n->list);
        end_tag(P, "");
        if (peek(P)->kind == TK_NAME) next(P);
        expect_end(P);
        return n;
    }
    if (is_name(kw, "call")) {
        n = mk(P, JN_CALLBLOCK);
        jnode *params = mk(P, JN_MACRO);
        params->name = pstr(P, "caller", 6);
        if (is_op(peek(P), "(")) parse_params(P, params);
        n->a = parse_unary(P, false);
        if (n->a->kind != JN_CALL) pfail(P, LLC_ERR_FORMAT, "call block needs a macro call");
        n->b = params;
        expect_end(P);
        static const char *const stops[] = {"endcall", NULL};
        parse_body(P, stops, &params->list);
        expect_end(P);
        return n;
    }
    if (is_name(kw, "filter")) {
        n = mk(P, JN_FILTERBLOCK);
        jnode *chain = NULL;
        do {
            jnode *f = mk(P, JN_FILTER);
            f->a = chain;
            f->name = expect_ident(P);
            if (accept_op(P, "(")) parse_args(P, f);
            chain = f;
        } while (accept_op(P, "|"));
        n->b = chain;
        expect_end(P);
        static const char *const stops[] = {"endfilter", NULL};
        parse_body(P, stops, &n->list);
        expect_end(P);
        return n;
    }
    if (is_name(kw, "generation")) {
        n = mk(P, JN_BLOCK);
        expect_end(P);
        static const char *const stops[] = {"endgeneration", NULL};
        parse_body(P, stops, &n->list);
        expect_end(P);
        return n;
    }
    if (is_name(kw, "block")) {
        n = mk(P, JN_BLOCK);
        expect_ident(P);
        expect_end(P);
        static const char *const stops[] = {"endblock", NULL};
        parse_body(P, stops, &n->list);
        if (peek(P)->kind == TK_NAME) next(P);
        expect_end(P);
        return n;
    }
    if (is_name(kw, "break") || is_name(kw, "continue")) {
        n = mk(P, is_name(kw, "break") ? JN_BREAK : JN_CONTINUE);
        expect_end(P);
        return n;
    }
    if (is_name(kw, "do")) { /* expression statement: evaluate, output nothing */
        n = mk(P, JN_SET);
        n->b = parse_tuple_expr(P, true);
        expect_end(P);
        return n;
    }
    char b[64];
    pfail(P, LLC_ERR_FORMAT, "unknown or misplaced statement %s", tok_desc(kw, b, sizeof b));
}

int jinja_parse(const char *src, size_t len, jinja_tpl **out, llc_err *err) {
    if (!out) return llc_fail(err, LLC_ERR_RANGE, "jinja_parse: no output pointer");
    *out = NULL;
    if (!src && len) return llc_fail(err, LLC_ERR_RANGE, "jinja_parse: no source");
    jinja_tpl *t = calloc(1, sizeof *t);
    if (!t) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    parser *P = calloc(1, sizeof *P);
    if (!P) {
        free(t);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    P->arena = &t->arena;
    P->src = src ? src : "";
    P->err = err;
    P->line = 1;
    if (setjmp(P->jb)) {
        int code = P->code;
        free(P);
        jinja_free(t);
        return code;
    }
    split(P, P->src, len);
    parse_body(P, NULL, &t->body);
    free(P);
    *out = t;
    return 0;
}

void jinja_free(jinja_tpl *t) {
    if (!t) return;
    jarena_free(&t->arena);
    free(t);
}
