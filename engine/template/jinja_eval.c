/* jinja_eval.c — running a parsed Jinja template: scopes, statements,
 * expressions, and the built-in filters, tests, methods and global functions
 * chat templates use. Every render has its own arena, freed at the end; an
 * error anywhere unwinds to jinja_render with one line (longjmp: nothing but
 * arena memory is held between the failing point and the top). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/template/jinja_internal.h"

#define MAX_CALL_DEPTH 64     /* macro calls inside macro calls */
#define MAX_EVAL_DEPTH 1000   /* recursion of the evaluator (bounds the C stack) */
#define MAX_RANGE 1000000     /* items range() makes */

typedef struct scope scope;
struct scope {
    jdict *vars;
    scope *parent;
};

struct jmacro {
    const jnode *def; /* JN_MACRO: name, params, defaults, body */
    jmacro *caller;   /* the caller() of a call block, or NULL */
};

enum fn_kind { FN_GLOBAL, FN_LOOP_CYCLE };
struct jfunc {
    int kind;
    const char *name;
    jv self;
};

struct jctx {
    jarena arena;
    jmp_buf jb;
    llc_err *err;
    int code;
    int line;
    long long steps, max_steps;
    size_t max_output;
    int depth, call_depth;
    jbuf *out;
    scope *globals, *cur;
    time_t now;
    int brk; /* 1 = break, 2 = continue pending */
};

_Noreturn void jx_fail(jctx *x, int code, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    x->code = llc_fail(x->err, code, "template line %d: %s", x->line, msg);
    longjmp(x->jb, 1);
}

void *jx_alloc(jctx *x, size_t n) {
    void *p = jarena_alloc(&x->arena, n);
    if (!p) {
        if (x->arena.limit && x->arena.used + n > x->arena.limit)
            jx_fail(x, LLC_ERR_RANGE, "template uses too much memory (limit %zu MiB)", x->arena.limit >> 20);
        jx_fail(x, LLC_ERR_NOMEM, "out of memory");
    }
    return p;
}


/* ---- arguments ---- */

typedef struct jargs {
    jv *pos;
    int npos;
    const jstr **kwn;
    jv *kwv;
    int nkw;
} jargs;

/* Argument i (positional) or by name; NULL when not given. */
static jv *arg(const jargs *a, int i, const char *name) {
    if (i >= 0 && i < a->npos) return &a->pos[i];
    if (name)
        for (int k = 0; k < a->nkw; k++)
            if (strcmp(a->kwn[k]->p, name) == 0) return &a->kwv[k];
    return NULL;
}

static jv eval(jctx *x, const jnode *n);
static void exec_body(jctx *x, const jnodes *body);

static jargs eval_args(jctx *x, const jnode *n) {
    jargs a = {0};
    a.npos = n->list.n;
    a.nkw = n->n_names;
    if (a.npos) a.pos = jx_alloc(x, (size_t)a.npos * sizeof *a.pos);
    if (a.nkw) a.kwv = jx_alloc(x, (size_t)a.nkw * sizeof *a.kwv);
    for (int i = 0; i < a.npos; i++) a.pos[i] = eval(x, n->list.v[i]);
    for (int i = 0; i < a.nkw; i++) a.kwv[i] = eval(x, n->list2.v[i]);
    a.kwn = n->names;
    return a;
}

/* ---- helpers ---- */

static jv mk_list(jlist *l) { return (jv){.t = JV_LIST, .u.l = l}; }
static jv mk_dict(jdict *d) { return (jv){.t = JV_DICT, .u.d = d}; }
static jv S(jctx *x, const char *s) { return jv_str(js_cstr(x, s)); }

static const jstr *want_str(jctx *x, jv v, const char *what) {
    if (v.t == JV_STR) return v.u.s;
    jx_fail(x, LLC_ERR_FORMAT, "%s: expected a string, got %s", what, jv_type_name(v));
}
static int64_t want_int(jctx *x, jv v, const char *what) {
    if (v.t == JV_INT) return v.u.i;
    if (v.t == JV_BOOL) return v.u.b;
    if (v.t == JV_FLOAT) return (int64_t)v.u.f;
    jx_fail(x, LLC_ERR_FORMAT, "%s: expected a number, got %s", what, jv_type_name(v));
}

static bool is_num(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static double num(jv v) { return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : v.u.b; }

/* UTF-8: number of code points, and byte offset of code point i */
static size_t u8_len(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}
static size_t u8_off(const char *s, size_t n, size_t cp) {
    size_t i = 0;
    while (i < n && cp > 0) {
        i++;
        while (i < n && ((unsigned char)s[i] & 0xc0) == 0x80) i++;
        cp--;
    }
    return i;
}

/* Python's str.isspace() characters, as in chat.c's trimming */
static size_t ws_at(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80) return (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f)) ? 1 : 0;
    if (n >= 2 && c == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
    if (n < 3) return 0;
    if (c == 0xe1 && s[1] == 0x9a && s[2] == 0x80) return 3;
    if (c == 0xe2 && s[1] == 0x80 &&
        ((s[2] >= 0x80 && s[2] <= 0x8a) || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
        return 3;
    if (c == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) return 3;
    if (c == 0xe3 && s[1] == 0x80 && s[2] == 0x80) return 3;
    return 0;
}
static size_t ws_before(const unsigned char *s, size_t n) {
    if (n >= 1 && s[n - 1] < 0x80) return ws_at(s + n - 1, 1);
    if (n >= 2 && ws_at(s + n - 2, 2) == 2) return 2;
    if (n >= 3 && ws_at(s + n - 3, 3) == 3) return 3;
    return 0;
}

/* one code point of s at i: its length */
static size_t u8_cplen(const char *s, size_t n, size_t i) {
    size_t j = i + 1;
    while (j < n && ((unsigned char)s[j] & 0xc0) == 0x80) j++;
    return j - i;
}
static bool in_chars(const jstr *chars, const char *p, size_t len) {
    for (size_t i = 0; i < chars->n;) {
        size_t l = u8_cplen(chars->p, chars->n, i);
        if (l == len && memcmp(chars->p + i, p, len) == 0) return true;
        i += l;
    }
    return false;
}

/* strip: which = 1 left, 2 right, 3 both; chars NULL = whitespace */
static jv do_strip(jctx *x, const jstr *s, const jstr *chars, int which) {
    const char *p = s->p;
    size_t n = s->n, k;
    if (which & 1) {
        for (;;) {
            if (chars) {
                if (n == 0) break;
                k = u8_cplen(p, n, 0);
                if (!in_chars(chars, p, k)) break;
            } else if ((k = ws_at((const unsigned char *)p, n)) == 0) {
                break;
            }
            p += k;
            n -= k;
        }
    }
    if (which & 2) {
        for (;;) {
            if (chars) {
                if (n == 0) break;
                size_t i = n - 1;
                while (i > 0 && ((unsigned char)p[i] & 0xc0) == 0x80) i--;
                k = n - i;
                if (!in_chars(chars, p + i, k)) break;
            } else if ((k = ws_before((const unsigned char *)p, n)) == 0) {
                break;
            }
            n -= k;
        }
    }
    if (p == s->p && n == s->n) return jv_str(s);
    return jv_strn(x, p, n);
}

static jlist *iter_list(jctx *x, jv v, const char *what) {
    switch (v.t) {
    case JV_LIST: return v.u.l;
    case JV_DICT: {
        jlist *l = jl_new(x, v.u.d->n);
        for (int i = 0; i < v.u.d->n; i++) jl_push(x, l, jd_key(v.u.d, i));
        return l;
    }
    case JV_STR: {
        jlist *l = jl_new(x, (int)(v.u.s->n < 1024 ? v.u.s->n : 1024));
        for (size_t i = 0; i < v.u.s->n;) {
            size_t k = u8_cplen(v.u.s->p, v.u.s->n, i);
            jl_push(x, l, jv_strn(x, v.u.s->p + i, k));
            i += k;
        }
        return l;
    }
    case JV_UNDEF:
    case JV_NONE: return jl_new(x, 0);
    default: jx_fail(x, LLC_ERR_FORMAT, "%s: a %s is not iterable", what, jv_type_name(v));
    }
}

static jv items_of(jctx *x, jv v) {
    jlist *l = jl_new(x, v.t == JV_DICT ? v.u.d->n : 0);
    if (v.t == JV_DICT)
        for (int i = 0; i < v.u.d->n; i++) {
            jlist *t = jl_new(x, 2);
            t->tuple = true;
            jl_push(x, t, jd_key(v.u.d, i));
            jl_push(x, t, v.u.d->v[i]);
            jl_push(x, l, mk_list(t));
        }
    else if (v.t != JV_UNDEF && v.t != JV_NONE)
        jx_fail(x, LLC_ERR_FORMAT, "items: a %s is not a mapping", jv_type_name(v));
    return mk_list(l);
}

/* three-way comparison for sorting and < > */
static int cmp_values(jctx *x, jv a, jv b, bool case_insensitive) {
    if (is_num(a) && is_num(b)) {
        double p = num(a), q = num(b);
        return (p > q) - (p < q);
    }
    if (a.t == JV_STR && b.t == JV_STR) {
        const jstr *s = a.u.s, *t = b.u.s;
        size_t n = s->n < t->n ? s->n : t->n;
        for (size_t i = 0; i < n; i++) {
            int c = (unsigned char)s->p[i], d = (unsigned char)t->p[i];
            if (case_insensitive) c = tolower(c), d = tolower(d);
            if (c != d) return c < d ? -1 : 1;
        }
        return (s->n > t->n) - (s->n < t->n);
    }
    if (a.t == JV_LIST && b.t == JV_LIST) {
        int n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (int i = 0; i < n; i++) {
            int c = cmp_values(x, a.u.l->v[i], b.u.l->v[i], case_insensitive);
            if (c) return c;
        }
        return (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
    }
    jx_fail(x, LLC_ERR_FORMAT, "cannot compare a %s with a %s", jv_type_name(a), jv_type_name(b));
}

/* stable merge sort of v[0..n) by key[] */
static void sort_by(jctx *x, jv *v, jv *key, int n, bool ci, bool reverse) {
    if (n < 2) return;
    jv *tv = jx_alloc(x, (size_t)n * sizeof *tv), *tk = jx_alloc(x, (size_t)n * sizeof *tk);
    for (int w = 1; w < n; w *= 2) {
        for (int lo = 0; lo < n; lo += 2 * w) {
            int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                int c = cmp_values(x, key[i], key[j], ci);
                if (reverse) c = -c;
                if (c <= 0) tv[k] = v[i], tk[k++] = key[i++];
                else tv[k] = v[j], tk[k++] = key[j++];
            }
            while (i < mid) tv[k] = v[i], tk[k++] = key[i++];
            while (j < hi) tv[k] = v[j], tk[k++] = key[j++];
        }
        memcpy(v, tv, (size_t)n * sizeof *v);
        memcpy(key, tk, (size_t)n * sizeof *key);
    }
}

static jv get_attr(jctx *x, jv obj, const char *name, size_t n);

/* attribute path "a.b.c" of an item (selectattr, map, sort, groupby) */
static jv attr_path(jctx *x, jv v, const jstr *path) {
    const char *p = path->p, *end = path->p + path->n;
    while (p <= end) {
        const char *d = memchr(p, '.', (size_t)(end - p));
        if (!d) d = end;
        if (v.t == JV_LIST) {
            char *e;
            long i = strtol(p, &e, 10);
            v = e == d && i >= 0 && i < v.u.l->n ? v.u.l->v[i] : JV_UNDEF_V;
        } else {
            v = get_attr(x, v, p, (size_t)(d - p));
        }
        p = d + 1;
    }
    return v;
}

/* ---- scopes ---- */

static jv *lookup(jctx *x, const char *name, size_t n) {
    for (scope *s = x->cur; s; s = s->parent) {
        jv *v = jd_get(s->vars, name, n);
        if (v) return v;
    }
    return NULL;
}

static void set_var(jctx *x, const jstr *name, jv v) { jd_set(x, x->cur->vars, name, v); }

static scope *push_scope(jctx *x, scope *parent) {
    scope *s = jx_alloc(x, sizeof *s);
    s->vars = jd_new(x);
    s->parent = parent;
    return s;
}

/* ---- loop object ---- */

static jv loop_attr(jctx *x, const jloop *lp, const char *k, size_t n) {
#define IS(s) (n == sizeof(s) - 1 && memcmp(k, s, n) == 0)
    int len = lp->items->n, i = lp->index0;
    if (IS("index0")) return jv_int(i);
    if (IS("index")) return jv_int(i + 1);
    if (IS("revindex")) return jv_int(len - i);
    if (IS("revindex0")) return jv_int(len - i - 1);
    if (IS("first")) return jv_bool(i == 0);
    if (IS("last")) return jv_bool(i == len - 1);
    if (IS("length")) return jv_int(len);
    if (IS("depth")) return jv_int(lp->depth0 + 1);
    if (IS("depth0")) return jv_int(lp->depth0);
    if (IS("previtem")) return i > 0 ? lp->items->v[i - 1] : JV_UNDEF_V;
    if (IS("nextitem")) return i + 1 < len ? lp->items->v[i + 1] : JV_UNDEF_V;
    if (IS("cycle")) {
        jfunc *f = jx_alloc(x, sizeof *f);
        f->kind = FN_LOOP_CYCLE;
        f->self = (jv){.t = JV_LOOP, .u.loop = (jloop *)lp};
        return (jv){.t = JV_FUNC, .u.fn = f};
    }
#undef IS
    return JV_UNDEF_V;
}

static jv get_attr(jctx *x, jv obj, const char *name, size_t n) {
    if (obj.t == JV_DICT) {
        jv *v = jd_get(obj.u.d, name, n);
        return v ? *v : JV_UNDEF_V;
    }
    if (obj.t == JV_LOOP) return loop_attr(x, obj.u.loop, name, n);
    return JV_UNDEF_V;
}

static jv get_item(jctx *x, jv obj, jv key) {
    if (obj.t == JV_DICT) {
        if (key.t == JV_STR) return get_attr(x, obj, key.u.s->p, key.u.s->n);
        const jstr *k = jv_as_jstr(x, key);
        return get_attr(x, obj, k->p, k->n);
    }
    if (obj.t == JV_LIST && (key.t == JV_INT || key.t == JV_BOOL)) {
        int64_t i = key.t == JV_INT ? key.u.i : key.u.b;
        if (i < 0) i += obj.u.l->n;
        return i >= 0 && i < obj.u.l->n ? obj.u.l->v[i] : JV_UNDEF_V;
    }
    if (obj.t == JV_STR && key.t == JV_INT) {
        int64_t len = (int64_t)u8_len(obj.u.s->p, obj.u.s->n), i = key.u.i;
        if (i < 0) i += len;
        if (i < 0 || i >= len) return JV_UNDEF_V;
        size_t a = u8_off(obj.u.s->p, obj.u.s->n, (size_t)i);
        return jv_strn(x, obj.u.s->p + a, u8_cplen(obj.u.s->p, obj.u.s->n, a));
    }
    if (obj.t == JV_LOOP && key.t == JV_STR) return loop_attr(x, obj.u.loop, key.u.s->p, key.u.s->n);
    return JV_UNDEF_V;
}

/* Python slice indices over len items */
static void slice_idx(int64_t len, jv *start, jv *stop, int64_t step, int64_t *a, int64_t *b) {
    int64_t lo = step > 0 ? 0 : -1, hi = step > 0 ? len : len - 1;
    *a = step > 0 ? lo : hi;
    *b = step > 0 ? hi : lo;
    if (start && start->t != JV_NONE && start->t != JV_UNDEF) {
        int64_t s = start->t == JV_INT ? start->u.i : 0;
        if (s < 0) s += len;
        *a = s < lo ? lo : s > hi ? hi : s;
    }
    if (stop && stop->t != JV_NONE && stop->t != JV_UNDEF) {
        int64_t s = stop->t == JV_INT ? stop->u.i : 0;
        if (s < 0) s += len;
        *b = s < lo ? lo : s > hi ? hi : s;
    }
}

static jv do_slice(jctx *x, jv obj, jv *start, jv *stop, jv *stepv) {
    int64_t step = stepv && stepv->t == JV_INT ? stepv->u.i : 1;
    if (step == 0) jx_fail(x, LLC_ERR_FORMAT, "slice step cannot be zero");
    int64_t a, b;
    if (obj.t == JV_LIST) {
        slice_idx(obj.u.l->n, start, stop, step, &a, &b);
        jlist *l = jl_new(x, 0);
        for (int64_t i = a; step > 0 ? i < b : i > b; i += step) jl_push(x, l, obj.u.l->v[i]);
        return mk_list(l);
    }
    if (obj.t == JV_STR) {
        const jstr *s = obj.u.s;
        int64_t len = (int64_t)u8_len(s->p, s->n);
        slice_idx(len, start, stop, step, &a, &b);
        if (step == 1) {
            if (b <= a) return S(x, "");
            size_t oa = u8_off(s->p, s->n, (size_t)a), ob = u8_off(s->p, s->n, (size_t)b);
            return jv_strn(x, s->p + oa, ob - oa);
        }
        jbuf o = {0};
        for (int64_t i = a; step > 0 ? i < b : i > b; i += step) {
            size_t oa = u8_off(s->p, s->n, (size_t)i);
            jb_put(x, &o, s->p + oa, u8_cplen(s->p, s->n, oa));
        }
        return jv_strn(x, o.p ? o.p : "", o.n);
    }
    if (obj.t == JV_UNDEF || obj.t == JV_NONE) return JV_UNDEF_V;
    jx_fail(x, LLC_ERR_FORMAT, "cannot slice a %s", jv_type_name(obj));
}

/* ---- binary operators ---- */

static jv str_concat(jctx *x, jv a, jv b) {
    const jstr *s = jv_as_jstr(x, a), *t = jv_as_jstr(x, b);
    jstr *r = jx_alloc(x, sizeof *r + s->n + t->n + 1);
    memcpy(r->p, s->p, s->n);
    memcpy(r->p + s->n, t->p, t->n);
    r->n = s->n + t->n;
    r->p[r->n] = 0;
    return jv_str(r);
}

static jv py_percent(jctx *x, const jstr *fmt, jv args);

static bool contains(jctx *x, jv hay, jv needle) {
    switch (hay.t) {
    case JV_STR: {
        if (needle.t != JV_STR) jx_fail(x, LLC_ERR_FORMAT, "'in <string>' needs a string on the left, not a %s", jv_type_name(needle));
        if (needle.u.s->n == 0) return true;
        return memmem(hay.u.s->p, hay.u.s->n, needle.u.s->p, needle.u.s->n) != NULL;
    }
    case JV_LIST:
        for (int i = 0; i < hay.u.l->n; i++)
            if (jv_equal(hay.u.l->v[i], needle)) return true;
        return false;
    case JV_DICT:
        return needle.t == JV_STR && jd_get(hay.u.d, needle.u.s->p, needle.u.s->n) != NULL;
    case JV_UNDEF:
    case JV_NONE: return false;
    default: jx_fail(x, LLC_ERR_FORMAT, "'in' on a %s", jv_type_name(hay));
    }
}

static jv binop(jctx *x, int op, jv a, jv b) {
    switch (op) {
    case JOP_EQ: return jv_bool(jv_equal(a, b));
    case JOP_NE: return jv_bool(!jv_equal(a, b));
    case JOP_LT: return jv_bool(cmp_values(x, a, b, false) < 0);
    case JOP_LE: return jv_bool(cmp_values(x, a, b, false) <= 0);
    case JOP_GT: return jv_bool(cmp_values(x, a, b, false) > 0);
    case JOP_GE: return jv_bool(cmp_values(x, a, b, false) >= 0);
    case JOP_IN: return jv_bool(contains(x, b, a));
    case JOP_NOTIN: return jv_bool(!contains(x, b, a));
    case JOP_CONCAT: return str_concat(x, a, b);
    default: break;
    }
    if (op == JOP_ADD) {
        if (a.t == JV_LIST && b.t == JV_LIST) {
            jlist *l = jl_new(x, a.u.l->n + b.u.l->n);
            for (int i = 0; i < a.u.l->n; i++) jl_push(x, l, a.u.l->v[i]);
            for (int i = 0; i < b.u.l->n; i++) jl_push(x, l, b.u.l->v[i]);
            return mk_list(l);
        }
        if (a.t == JV_STR || b.t == JV_STR) {
            if ((a.t == JV_STR || a.t == JV_UNDEF) && (b.t == JV_STR || b.t == JV_UNDEF)) return str_concat(x, a, b);
            jx_fail(x, LLC_ERR_FORMAT, "cannot add a %s and a %s", jv_type_name(a), jv_type_name(b));
        }
    }
    if (op == JOP_MOD && a.t == JV_STR) return py_percent(x, a.u.s, b);
    if (op == JOP_MUL && ((a.t == JV_STR && b.t == JV_INT) || (a.t == JV_INT && b.t == JV_STR))) {
        const jstr *s = a.t == JV_STR ? a.u.s : b.u.s;
        int64_t k = a.t == JV_INT ? a.u.i : b.u.i;
        if (k <= 0 || s->n == 0) return S(x, "");
        if ((uint64_t)k * s->n > ((size_t)1 << 28)) jx_fail(x, LLC_ERR_RANGE, "string repetition too large");
        jbuf o = {0};
        for (int64_t i = 0; i < k; i++) jb_put(x, &o, s->p, s->n);
        return jv_strn(x, o.p, o.n);
    }
    if (!is_num(a) || !is_num(b))
        jx_fail(x, LLC_ERR_FORMAT, "unsupported operand types: %s and %s", jv_type_name(a), jv_type_name(b));
    bool fl = a.t == JV_FLOAT || b.t == JV_FLOAT;
    if (!fl) {
        int64_t p = a.t == JV_INT ? a.u.i : a.u.b, q = b.t == JV_INT ? b.u.i : b.u.b, r;
        switch (op) {
        case JOP_ADD:
            if (__builtin_add_overflow(p, q, &r)) break;
            return jv_int(r);
        case JOP_SUB:
            if (__builtin_sub_overflow(p, q, &r)) break;
            return jv_int(r);
        case JOP_MUL:
            if (__builtin_mul_overflow(p, q, &r)) break;
            return jv_int(r);
        case JOP_DIV:
            if (q == 0) jx_fail(x, LLC_ERR_FORMAT, "division by zero");
            return jv_float((double)p / (double)q);
        case JOP_FLOORDIV:
        case JOP_MOD: {
            if (q == 0) jx_fail(x, LLC_ERR_FORMAT, "division by zero");
            if (p == INT64_MIN && q == -1) break;
            int64_t d = p / q, m = p % q;
            if (m != 0 && ((m < 0) != (q < 0))) d--, m += q;
            return jv_int(op == JOP_MOD ? m : d);
        }
        case JOP_POW:
            if (q >= 0) {
                int64_t acc = 1;
                bool ovf = false;
                for (int64_t i = 0; i < q && !ovf; i++) ovf = __builtin_mul_overflow(acc, p, &acc);
                if (!ovf) return jv_int(acc);
            }
            break;
        }
    }
    double p = num(a), q = num(b);
    switch (op) {
    case JOP_ADD: return jv_float(p + q);
    case JOP_SUB: return jv_float(p - q);
    case JOP_MUL: return jv_float(p * q);
    case JOP_DIV:
        if (q == 0) jx_fail(x, LLC_ERR_FORMAT, "division by zero");
        return jv_float(p / q);
    case JOP_FLOORDIV:
        if (q == 0) jx_fail(x, LLC_ERR_FORMAT, "division by zero");
        return jv_float(floor(p / q));
    case JOP_MOD: {
        if (q == 0) jx_fail(x, LLC_ERR_FORMAT, "division by zero");
        double m = fmod(p, q);
        if (m != 0 && ((m < 0) != (q < 0))) m += q;
        return jv_float(m);
    }
    case JOP_POW: return jv_float(pow(p, q));
    }
    jx_fail(x, LLC_ERR_FORMAT, "bad operator");
}

/* "fmt" % args — %s %d %i %f %r %% */
static jv py_percent(jctx *x, const jstr *fmt, jv args) {
    jbuf o = {0};
    int ai = 0;
    const jlist *al = args.t == JV_LIST && args.u.l->tuple ? args.u.l : NULL;
    for (size_t i = 0; i < fmt->n; i++) {
        char c = fmt->p[i];
        if (c != '%' || i + 1 >= fmt->n) {
            jb_putc(x, &o, c);
            continue;
        }
        char spec[32];
        size_t k = 0;
        spec[k++] = '%';
        i++;
        while (i < fmt->n && strchr("-+ #0123456789.", fmt->p[i]) && k < 20) spec[k++] = fmt->p[i++];
        char conv = i < fmt->n ? fmt->p[i] : 0;
        if (conv == '%') {
            jb_putc(x, &o, '%');
            continue;
        }
        jv v = al ? (ai < al->n ? al->v[ai++] : JV_UNDEF_V) : (ai++ == 0 ? args : JV_UNDEF_V);
        if (conv == 'd' || conv == 'i') {
            spec[k++] = 'l', spec[k++] = 'l', spec[k++] = 'd', spec[k] = 0;
            jb_printf(x, &o, spec, (long long)want_int(x, v, "%d"));
        } else if (conv == 'f' || conv == 'e' || conv == 'g') {
            spec[k++] = conv, spec[k] = 0;
            jb_printf(x, &o, spec, is_num(v) ? num(v) : 0.0);
        } else if (conv == 'r') {
            jv_repr(x, &o, v);
        } else {
            jv_to_str(x, &o, v);
        }
    }
    return jv_strn(x, o.p ? o.p : "", o.n);
}

/* ---- tests ---- */

static bool run_test(jctx *x, const char *name, jv v, const jargs *a) {
#define IS(s) (strcmp(name, s) == 0)
    jv *p = arg(a, 0, NULL);
    if (IS("defined")) return v.t != JV_UNDEF;
    if (IS("undefined")) return v.t == JV_UNDEF;
    if (IS("none")) return v.t == JV_NONE;
    if (IS("boolean")) return v.t == JV_BOOL;
    if (IS("true")) return v.t == JV_BOOL && v.u.b;
    if (IS("false")) return v.t == JV_BOOL && !v.u.b;
    if (IS("integer")) return v.t == JV_INT;
    if (IS("float")) return v.t == JV_FLOAT;
    if (IS("number")) return v.t == JV_INT || v.t == JV_FLOAT;
    if (IS("string")) return v.t == JV_STR;
    if (IS("mapping")) return v.t == JV_DICT;
    if (IS("iterable")) return v.t == JV_LIST || v.t == JV_DICT || v.t == JV_STR;
    if (IS("sequence")) return v.t == JV_LIST || v.t == JV_DICT || v.t == JV_STR;
    if (IS("callable")) return v.t == JV_MACRO || v.t == JV_FUNC;
    if (IS("odd")) return want_int(x, v, "odd") % 2 != 0;
    if (IS("even")) return want_int(x, v, "even") % 2 == 0;
    if (IS("divisibleby")) {
        int64_t d = p ? want_int(x, *p, "divisibleby") : 0;
        return d != 0 && want_int(x, v, "divisibleby") % d == 0;
    }
    if (IS("lower") || IS("upper")) {
        if (v.t != JV_STR) return false;
        for (size_t i = 0; i < v.u.s->n; i++)
            if (IS("lower") ? isupper((unsigned char)v.u.s->p[i]) : islower((unsigned char)v.u.s->p[i])) return false;
        return true;
    }
    if (!p) jx_fail(x, LLC_ERR_FORMAT, "test '%s' needs an argument or does not exist", name);
    if (IS("equalto") || IS("eq") || IS("==") || IS("sameas")) return jv_equal(v, *p);
    if (IS("ne") || IS("!=")) return !jv_equal(v, *p);
    if (IS("lt") || IS("<") || IS("lessthan")) return cmp_values(x, v, *p, false) < 0;
    if (IS("le") || IS("<=")) return cmp_values(x, v, *p, false) <= 0;
    if (IS("gt") || IS(">") || IS("greaterthan")) return cmp_values(x, v, *p, false) > 0;
    if (IS("ge") || IS(">=")) return cmp_values(x, v, *p, false) >= 0;
    if (IS("in")) return contains(x, *p, v);
    jx_fail(x, LLC_ERR_FORMAT, "unknown test '%s'", name);
#undef IS
}

/* ---- filters ---- */

static jv call_filter(jctx *x, const char *name, jv v, const jargs *a);

static jargs shift_args(const jargs *a, int k) {
    jargs r = *a;
    r.pos += k < a->npos ? k : a->npos;
    r.npos = a->npos > k ? a->npos - k : 0;
    return r;
}

static jv str_replace(jctx *x, const jstr *s, const jstr *old, const jstr *new, int64_t count) {
    jbuf o = {0};
    if (old->n == 0) {
        jb_put(x, &o, new->p, new->n);
        jb_put(x, &o, s->p, s->n);
        return jv_strn(x, o.p, o.n);
    }
    size_t i = 0;
    int64_t done = 0;
    while (i < s->n) {
        const char *f = (count < 0 || done < count) ? memmem(s->p + i, s->n - i, old->p, old->n) : NULL;
        if (!f) break;
        jb_put(x, &o, s->p + i, (size_t)(f - (s->p + i)));
        jb_put(x, &o, new->p, new->n);
        i = (size_t)(f - s->p) + old->n;
        done++;
    }
    jb_put(x, &o, s->p + i, s->n - i);
    return jv_strn(x, o.p ? o.p : "", o.n);
}

static jv case_map(jctx *x, const jstr *s, int mode) { /* 1 upper 2 lower 3 title 4 capitalize */
    jstr *r = (jstr *)js_new(x, s->p, s->n);
    bool start = true;
    for (size_t i = 0; i < r->n; i++) {
        unsigned char c = (unsigned char)r->p[i];
        if (mode == 1) r->p[i] = (char)toupper(c);
        else if (mode == 2) r->p[i] = (char)tolower(c);
        else if (mode == 3) {
            r->p[i] = (char)(start ? toupper(c) : tolower(c));
            start = !isalpha(c);
        } else {
            r->p[i] = (char)(i == 0 ? toupper(c) : tolower(c));
        }
    }
    return jv_str(r);
}

static jv do_indent(jctx *x, const jstr *s, jv *widthv, bool first, bool blank) {
    const jstr *ind;
    if (widthv && widthv->t == JV_STR) ind = widthv->u.s;
    else {
        int64_t w = widthv ? want_int(x, *widthv, "indent") : 4;
        if (w < 0) w = 0;
        if (w > 256) w = 256;
        char sp[257];
        memset(sp, ' ', (size_t)w);
        ind = js_new(x, sp, (size_t)w);
    }
    jbuf o = {0};
    if (first) jb_put(x, &o, ind->p, ind->n);
    /* lines of s + "\n" as str.splitlines() gives them (\n, \r\n, \r) */
    size_t i = 0, line_no = 0;
    jbuf src = {0};
    jb_put(x, &src, s->p, s->n);
    jb_putc(x, &src, '\n');
    while (i < src.n) {
        size_t j = i;
        while (j < src.n && src.p[j] != '\n' && src.p[j] != '\r') j++;
        size_t next_i = j + (j < src.n && src.p[j] == '\r' && j + 1 < src.n && src.p[j + 1] == '\n' ? 2 : 1);
        if (line_no > 0) {
            jb_putc(x, &o, '\n');
            if (blank || j > i) jb_put(x, &o, ind->p, ind->n);
        }
        jb_put(x, &o, src.p + i, j - i);
        line_no++;
        i = next_i;
    }
    return jv_strn(x, o.p ? o.p : "", o.n);
}

static jv call_filter(jctx *x, const char *name, jv v, const jargs *a) {
#define IS(s) (strcmp(name, s) == 0)
    jv *a0 = arg(a, 0, NULL);
    if (IS("safe") || IS("escape_once")) return v;
    if (IS("length") || IS("count")) {
        if (v.t == JV_STR) return jv_int((int64_t)u8_len(v.u.s->p, v.u.s->n));
        if (v.t == JV_LIST) return jv_int(v.u.l->n);
        if (v.t == JV_DICT) return jv_int(v.u.d->n);
        if (v.t == JV_UNDEF || v.t == JV_NONE) return jv_int(0);
        jx_fail(x, LLC_ERR_FORMAT, "length of a %s", jv_type_name(v));
    }
    if (IS("default") || IS("d")) {
        jv *bl = arg(a, 1, "boolean");
        bool use = v.t == JV_UNDEF || (bl && jv_truthy(*bl) && !jv_truthy(v));
        jv *dv = arg(a, 0, "default_value");
        return use ? (dv ? *dv : S(x, "")) : v;
    }
    if (IS("string")) return jv_str(jv_as_jstr(x, v));
    if (IS("trim")) {
        jv *ch = arg(a, 0, "chars");
        return do_strip(x, jv_as_jstr(x, v), ch && ch->t == JV_STR ? ch->u.s : NULL, 3);
    }
    if (IS("upper")) return case_map(x, jv_as_jstr(x, v), 1);
    if (IS("lower")) return case_map(x, jv_as_jstr(x, v), 2);
    if (IS("title")) return case_map(x, jv_as_jstr(x, v), 3);
    if (IS("capitalize")) return case_map(x, jv_as_jstr(x, v), 4);
    if (IS("items")) return items_of(x, v);
    if (IS("tojson")) {
        jv *ind = arg(a, 0, "indent"), *sk = arg(a, -1, "sort_keys"), *sep = arg(a, -1, "separators");
        const char *isep = NULL, *ksep = NULL;
        if (sep && sep->t == JV_LIST && sep->u.l->n == 2 && sep->u.l->v[0].t == JV_STR &&
            sep->u.l->v[1].t == JV_STR)
            isep = sep->u.l->v[0].u.s->p, ksep = sep->u.l->v[1].u.s->p;
        int indent = ind && ind->t != JV_NONE ? (int)want_int(x, *ind, "tojson indent") : -1;
        if (indent > 64) indent = 64;
        jbuf o = {0};
        jv_to_json(x, &o, v, indent, sk && jv_truthy(*sk), isep, ksep);
        return jv_strn(x, o.p ? o.p : "", o.n);
    }
    if (IS("join")) {
        jlist *l = iter_list(x, v, "join");
        jv *sep = arg(a, 0, "d"), *attr = arg(a, 1, "attribute");
        const jstr *s = sep ? jv_as_jstr(x, *sep) : js_cstr(x, "");
        jbuf o = {0};
        for (int i = 0; i < l->n; i++) {
            if (i) jb_put(x, &o, s->p, s->n);
            jv it = attr ? attr_path(x, l->v[i], jv_as_jstr(x, *attr)) : l->v[i];
            jv_to_str(x, &o, it);
        }
        return jv_strn(x, o.p ? o.p : "", o.n);
    }
    if (IS("replace")) {
        jv *o = arg(a, 0, "old"), *n = arg(a, 1, "new"), *c = arg(a, 2, "count");
        if (!o || !n) jx_fail(x, LLC_ERR_FORMAT, "replace needs two arguments");
        return str_replace(x, jv_as_jstr(x, v), jv_as_jstr(x, *o), jv_as_jstr(x, *n),
                           c && c->t != JV_NONE ? want_int(x, *c, "replace") : -1);
    }
    if (IS("list")) return mk_list(iter_list(x, v, "list"));
    if (IS("first") || IS("last")) {
        jlist *l = iter_list(x, v, name);
        if (l->n == 0) return JV_UNDEF_V;
        return IS("first") ? l->v[0] : l->v[l->n - 1];
    }
    if (IS("reverse")) {
        if (v.t == JV_STR) {
            jlist *l = iter_list(x, v, "reverse");
            jbuf o = {0};
            for (int i = l->n - 1; i >= 0; i--) jb_put(x, &o, l->v[i].u.s->p, l->v[i].u.s->n);
            return jv_strn(x, o.p ? o.p : "", o.n);
        }
        jlist *l = iter_list(x, v, "reverse"), *r = jl_new(x, l->n);
        for (int i = l->n - 1; i >= 0; i--) jl_push(x, r, l->v[i]);
        return mk_list(r);
    }
    if (IS("indent")) {
        jv *f = arg(a, 1, "first"), *b = arg(a, 2, "blank");
        return do_indent(x, jv_as_jstr(x, v), arg(a, 0, "width"), f && jv_truthy(*f), b && jv_truthy(*b));
    }
    if (IS("int")) {
        jv *dv = arg(a, 0, "default");
        if (v.t == JV_INT) return v;
        if (v.t == JV_BOOL) return jv_int(v.u.b);
        if (v.t == JV_FLOAT && isfinite(v.u.f)) return jv_int((int64_t)v.u.f);
        if (v.t == JV_STR) {
            char *e;
            errno = 0;
            long long i = strtoll(v.u.s->p, &e, 10);
            while (*e == ' ') e++;
            if (!errno && e != v.u.s->p && !*e) return jv_int(i);
            double d = strtod(v.u.s->p, &e);
            if (e != v.u.s->p && !*e && isfinite(d)) return jv_int((int64_t)d);
        }
        return dv ? *dv : jv_int(0);
    }
    if (IS("float")) {
        if (is_num(v)) return jv_float(num(v));
        if (v.t == JV_STR) {
            char *e;
            double d = strtod(v.u.s->p, &e);
            if (e != v.u.s->p && !*e) return jv_float(d);
        }
        jv *dv = arg(a, 0, "default");
        return dv ? *dv : jv_float(0);
    }
    if (IS("abs")) {
        if (v.t == JV_INT) return jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        return jv_float(fabs(num(v)));
    }
    if (IS("round")) {
        int64_t prec = a0 ? want_int(x, *a0, "round") : 0;
        jv *m = arg(a, 1, "method");
        double f = num(v), k = pow(10, (double)prec);
        const char *meth = m && m->t == JV_STR ? m->u.s->p : "common";
        double r = strcmp(meth, "floor") == 0 ? floor(f * k) / k : strcmp(meth, "ceil") == 0 ? ceil(f * k) / k : round(f * k) / k;
        return jv_float(r);
    }
    if (IS("dictsort")) {
        jv *cs = arg(a, 0, "case_sensitive"), *by = arg(a, 1, "by"), *rev = arg(a, 2, "reverse");
        jv it = items_of(x, v);
        jlist *l = it.u.l;
        jv *keys = jx_alloc(x, (size_t)(l->n ? l->n : 1) * sizeof *keys);
        bool by_value = by && by->t == JV_STR && strcmp(by->u.s->p, "value") == 0;
        for (int i = 0; i < l->n; i++) keys[i] = l->v[i].u.l->v[by_value ? 1 : 0];
        sort_by(x, l->v, keys, l->n, !(cs && jv_truthy(*cs)), rev && jv_truthy(*rev));
        return it;
    }
    if (IS("sort")) {
        jv *rev = arg(a, 0, "reverse"), *cs = arg(a, 1, "case_sensitive"), *attr = arg(a, 2, "attribute");
        jlist *src = iter_list(x, v, "sort"), *l = jl_new(x, src->n);
        for (int i = 0; i < src->n; i++) jl_push(x, l, src->v[i]);
        jv *keys = jx_alloc(x, (size_t)(l->n ? l->n : 1) * sizeof *keys);
        for (int i = 0; i < l->n; i++) keys[i] = attr ? attr_path(x, l->v[i], jv_as_jstr(x, *attr)) : l->v[i];
        sort_by(x, l->v, keys, l->n, !(cs && jv_truthy(*cs)), rev && jv_truthy(*rev));
        return mk_list(l);
    }
    if (IS("unique")) {
        jlist *src = iter_list(x, v, "unique"), *l = jl_new(x, 0);
        for (int i = 0; i < src->n; i++)
            if (!contains(x, mk_list(l), src->v[i])) jl_push(x, l, src->v[i]);
        return mk_list(l);
    }
    if (IS("min") || IS("max")) {
        jlist *l = iter_list(x, v, name);
        jv *attr = arg(a, 1, "attribute");
        if (l->n == 0) return JV_UNDEF_V;
        jv best = l->v[0], bk = attr ? attr_path(x, best, jv_as_jstr(x, *attr)) : best;
        for (int i = 1; i < l->n; i++) {
            jv k = attr ? attr_path(x, l->v[i], jv_as_jstr(x, *attr)) : l->v[i];
            int c = cmp_values(x, k, bk, true);
            if (IS("min") ? c < 0 : c > 0) best = l->v[i], bk = k;
        }
        return best;
    }
    if (IS("sum")) {
        jlist *l = iter_list(x, v, "sum");
        jv *attr = arg(a, 0, "attribute"), *start = arg(a, 1, "start");
        jv acc = start ? *start : jv_int(0);
        for (int i = 0; i < l->n; i++)
            acc = binop(x, JOP_ADD, acc, attr ? attr_path(x, l->v[i], jv_as_jstr(x, *attr)) : l->v[i]);
        return acc;
    }
    if (IS("map")) {
        jlist *src = iter_list(x, v, "map"), *l = jl_new(x, src->n);
        jv *attr = arg(a, -1, "attribute"), *dflt = arg(a, -1, "default");
        for (int i = 0; i < src->n; i++) {
            if (attr) {
                jv r = attr_path(x, src->v[i], jv_as_jstr(x, *attr));
                jl_push(x, l, r.t == JV_UNDEF && dflt ? *dflt : r);
            } else {
                if (!a0) jx_fail(x, LLC_ERR_FORMAT, "map needs a filter name or attribute=");
                jargs rest = shift_args(a, 1);
                jl_push(x, l, call_filter(x, want_str(x, *a0, "map")->p, src->v[i], &rest));
            }
        }
        return mk_list(l);
    }
    if (IS("select") || IS("reject") || IS("selectattr") || IS("rejectattr")) {
        bool by_attr = name[strlen(name) - 1] == 'r', keep_if = name[0] == 's';
        jlist *src = iter_list(x, v, name), *l = jl_new(x, 0);
        int k = by_attr ? 1 : 0;
        jv *tname = arg(a, k, NULL);
        jargs rest = shift_args(a, k + 1);
        for (int i = 0; i < src->n; i++) {
            jv it = src->v[i];
            if (by_attr) {
                if (!a0) jx_fail(x, LLC_ERR_FORMAT, "%s needs an attribute name", name);
                it = attr_path(x, it, jv_as_jstr(x, *a0));
            }
            bool ok = tname ? run_test(x, want_str(x, *tname, name)->p, it, &rest) : jv_truthy(it);
            if (ok == keep_if) jl_push(x, l, src->v[i]);
        }
        return mk_list(l);
    }
    if (IS("attr")) return a0 ? get_item(x, v, *a0) : JV_UNDEF_V;
    if (IS("from_json")) {
        const jstr *s = want_str(x, v, "from_json");
        cJSON *j = cJSON_ParseWithLength(s->p, s->n);
        if (!j) jx_fail(x, LLC_ERR_FORMAT, "from_json: not valid JSON");
        jv r = jv_from_json(x, j);
        cJSON_Delete(j);
        return r;
    }
    if (IS("pprint")) {
        jbuf o = {0};
        jv_repr(x, &o, v);
        return jv_strn(x, o.p ? o.p : "", o.n);
    }
    if (IS("wordcount")) {
        const jstr *s = jv_as_jstr(x, v);
        int64_t c = 0;
        bool in = false;
        for (size_t i = 0; i < s->n; i++) {
            bool w = isalnum((unsigned char)s->p[i]) || s->p[i] == '_' || ((unsigned char)s->p[i] & 0x80);
            if (w && !in) c++;
            in = w;
        }
        return jv_int(c);
    }
    if (IS("escape") || IS("e") || IS("forceescape")) {
        const jstr *s = jv_as_jstr(x, v);
        jbuf o = {0};
        for (size_t i = 0; i < s->n; i++) {
            switch (s->p[i]) {
            case '&': jb_puts(x, &o, "&amp;"); break;
            case '<': jb_puts(x, &o, "&lt;"); break;
            case '>': jb_puts(x, &o, "&gt;"); break;
            case '"': jb_puts(x, &o, "&#34;"); break;
            case '\'': jb_puts(x, &o, "&#39;"); break;
            default: jb_putc(x, &o, s->p[i]);
            }
        }
        return jv_strn(x, o.p ? o.p : "", o.n);
    }
    if (IS("format")) {
        jlist *t = jl_new(x, a->npos);
        t->tuple = true;
        for (int i = 0; i < a->npos; i++) jl_push(x, t, a->pos[i]);
        return py_percent(x, jv_as_jstr(x, v), mk_list(t));
    }
    if (IS("batch")) {
        int64_t n = a0 ? want_int(x, *a0, "batch") : 1;
        if (n < 1) n = 1;
        jlist *src = iter_list(x, v, "batch"), *l = jl_new(x, 0), *cur = NULL;
        for (int i = 0; i < src->n; i++) {
            if (!cur || cur->n == n) {
                cur = jl_new(x, (int)(n < 64 ? n : 64));
                jl_push(x, l, mk_list(cur));
            }
            jl_push(x, cur, src->v[i]);
        }
        return mk_list(l);
    }
    jx_fail(x, LLC_ERR_FORMAT, "unknown filter '%s'", name);
#undef IS
}

/* ---- methods of strings, dicts and lists ---- */

static jv str_split(jctx *x, const jstr *s, jv *sepv, int64_t maxsplit, bool from_right) {
    jlist *l = jl_new(x, 0);
    if (!sepv || sepv->t == JV_NONE) { /* runs of whitespace */
        const unsigned char *p = (const unsigned char *)s->p;
        size_t n = s->n, i = 0;
        if (from_right && maxsplit >= 0) { /* rare: rsplit() with a limit */
            jlist *parts = str_split(x, s, NULL, -1, false).u.l;
            if (parts->n <= maxsplit + 1) return mk_list(parts);
            jbuf head = {0};
            int keep = parts->n - (int)maxsplit;
            /* head: the original text up to the start of part[keep] */
            const char *start = parts->v[keep].u.s->p;
            (void)start;
            for (int k = 0; k < keep; k++) {
                if (k) jb_putc(x, &head, ' ');
                jb_put(x, &head, parts->v[k].u.s->p, parts->v[k].u.s->n);
            }
            jl_push(x, l, jv_strn(x, head.p ? head.p : "", head.n));
            for (int k = keep; k < parts->n; k++) jl_push(x, l, parts->v[k]);
            return mk_list(l);
        }
        int64_t done = 0;
        while (i < n) {
            size_t k;
            while (i < n && (k = ws_at(p + i, n - i)) > 0) i += k;
            if (i >= n) break;
            if (maxsplit >= 0 && done >= maxsplit) {
                size_t e = n;
                size_t kk;
                while (e > i && (kk = ws_before(p + i, e - i)) > 0) e -= kk;
                jl_push(x, l, jv_strn(x, s->p + i, e - i));
                break;
            }
            size_t j = i;
            while (j < n && ws_at(p + j, n - j) == 0) j += u8_cplen(s->p, n, j);
            jl_push(x, l, jv_strn(x, s->p + i, j - i));
            done++;
            i = j;
        }
        return mk_list(l);
    }
    const jstr *sep = want_str(x, *sepv, "split");
    if (sep->n == 0) jx_fail(x, LLC_ERR_FORMAT, "split: empty separator");
    if (!from_right) {
        size_t i = 0;
        int64_t done = 0;
        for (;;) {
            const char *f = (maxsplit < 0 || done < maxsplit) ? memmem(s->p + i, s->n - i, sep->p, sep->n) : NULL;
            if (!f) {
                jl_push(x, l, jv_strn(x, s->p + i, s->n - i));
                break;
            }
            jl_push(x, l, jv_strn(x, s->p + i, (size_t)(f - s->p) - i));
            i = (size_t)(f - s->p) + sep->n;
            done++;
        }
        return mk_list(l);
    }
    /* rsplit: collect from the right, then reverse */
    jlist *r = jl_new(x, 0);
    size_t end = s->n;
    int64_t done = 0;
    for (;;) {
        const char *f = NULL;
        if ((maxsplit < 0 || done < maxsplit) && end >= sep->n)
            for (size_t i = end - sep->n + 1; i-- > 0;)
                if (memcmp(s->p + i, sep->p, sep->n) == 0) {
                    f = s->p + i;
                    break;
                }
        if (!f) {
            jl_push(x, r, jv_strn(x, s->p, end));
            break;
        }
        size_t at = (size_t)(f - s->p);
        jl_push(x, r, jv_strn(x, s->p + at + sep->n, end - at - sep->n));
        end = at;
        done++;
    }
    for (int i = r->n - 1; i >= 0; i--) jl_push(x, l, r->v[i]);
    return mk_list(l);
}

static bool affix_match(jctx *x, const jstr *s, jv pat, bool end) {
    if (pat.t == JV_LIST) {
        for (int i = 0; i < pat.u.l->n; i++)
            if (affix_match(x, s, pat.u.l->v[i], end)) return true;
        return false;
    }
    const jstr *p = want_str(x, pat, end ? "endswith" : "startswith");
    if (p->n > s->n) return false;
    return memcmp(end ? s->p + s->n - p->n : s->p, p->p, p->n) == 0;
}

/* str.format: {} {0} {name} with {{ }} escapes; format specs are ignored */
static jv str_format(jctx *x, const jstr *f, const jargs *a) {
    jbuf o = {0};
    int auto_i = 0;
    for (size_t i = 0; i < f->n; i++) {
        char c = f->p[i];
        if (c == '{' && i + 1 < f->n && f->p[i + 1] == '{') {
            jb_putc(x, &o, '{');
            i++;
        } else if (c == '}' && i + 1 < f->n && f->p[i + 1] == '}') {
            jb_putc(x, &o, '}');
            i++;
        } else if (c == '{') {
            size_t j = i + 1;
            while (j < f->n && f->p[j] != '}') j++;
            if (j >= f->n) jx_fail(x, LLC_ERR_FORMAT, "format: unmatched '{'");
            size_t klen = 0;
            while (i + 1 + klen < j && f->p[i + 1 + klen] != ':' && f->p[i + 1 + klen] != '!') klen++;
            jv *v;
            if (klen == 0) v = arg(a, auto_i++, NULL);
            else if (isdigit((unsigned char)f->p[i + 1])) v = arg(a, atoi(f->p + i + 1), NULL);
            else {
                char key[64];
                snprintf(key, sizeof key, "%.*s", (int)(klen < 63 ? klen : 63), f->p + i + 1);
                v = arg(a, -1, key);
            }
            if (!v) jx_fail(x, LLC_ERR_FORMAT, "format: missing argument");
            jv_to_str(x, &o, *v);
            i = j;
        } else {
            jb_putc(x, &o, c);
        }
    }
    return jv_strn(x, o.p ? o.p : "", o.n);
}

/* Returns true and sets *out when obj has a method `name`. */
static bool call_method(jctx *x, jv obj, const char *name, const jargs *a, jv *out) {
#define IS(s) (strcmp(name, s) == 0)
    jv *a0 = arg(a, 0, NULL), *a1 = arg(a, 1, NULL);
    if (obj.t == JV_STR) {
        const jstr *s = obj.u.s;
        if (IS("strip") || IS("lstrip") || IS("rstrip")) {
            const jstr *ch = a0 && a0->t == JV_STR ? a0->u.s : NULL;
            *out = do_strip(x, s, ch, IS("strip") ? 3 : IS("lstrip") ? 1 : 2);
        } else if (IS("split") || IS("rsplit")) {
            jv *ms = arg(a, 1, "maxsplit");
            *out = str_split(x, s, arg(a, 0, "sep"), ms ? want_int(x, *ms, "split") : -1, IS("rsplit"));
        } else if (IS("startswith") || IS("endswith")) {
            if (!a0) jx_fail(x, LLC_ERR_FORMAT, "%s needs an argument", name);
            *out = jv_bool(affix_match(x, s, *a0, IS("endswith")));
        } else if (IS("replace")) {
            if (!a0 || !a1) jx_fail(x, LLC_ERR_FORMAT, "replace needs two arguments");
            jv *c = arg(a, 2, "count");
            *out = str_replace(x, s, want_str(x, *a0, "replace"), want_str(x, *a1, "replace"),
                               c ? want_int(x, *c, "replace") : -1);
        } else if (IS("removeprefix") || IS("removesuffix")) {
            const jstr *pfx = want_str(x, a0 ? *a0 : JV_UNDEF_V, name);
            bool pre = IS("removeprefix");
            if (pfx->n <= s->n && memcmp(pre ? s->p : s->p + s->n - pfx->n, pfx->p, pfx->n) == 0)
                *out = jv_strn(x, pre ? s->p + pfx->n : s->p, s->n - pfx->n);
            else
                *out = obj;
        } else if (IS("upper")) *out = case_map(x, s, 1);
        else if (IS("lower")) *out = case_map(x, s, 2);
        else if (IS("title")) *out = case_map(x, s, 3);
        else if (IS("capitalize")) *out = case_map(x, s, 4);
        else if (IS("format")) *out = str_format(x, s, a);
        else if (IS("join")) {
            jlist *l = a0 ? iter_list(x, *a0, "join") : jl_new(x, 0);
            jbuf o = {0};
            for (int i = 0; i < l->n; i++) {
                if (i) jb_put(x, &o, s->p, s->n);
                jv_to_str(x, &o, l->v[i]);
            }
            *out = jv_strn(x, o.p ? o.p : "", o.n);
        } else if (IS("find") || IS("rfind") || IS("index") || IS("count")) {
            const jstr *sub = want_str(x, a0 ? *a0 : JV_UNDEF_V, name);
            if (IS("count")) {
                int64_t c = 0;
                if (sub->n == 0) c = (int64_t)u8_len(s->p, s->n) + 1;
                else
                    for (const char *p = s->p; (p = memmem(p, s->n - (size_t)(p - s->p), sub->p, sub->n)); p += sub->n) c++;
                *out = jv_int(c);
            } else {
                const char *f = NULL;
                if (IS("rfind")) {
                    for (size_t i = s->n >= sub->n ? s->n - sub->n + 1 : 0; i-- > 0;)
                        if (memcmp(s->p + i, sub->p, sub->n) == 0) {
                            f = s->p + i;
                            break;
                        }
                } else {
                    f = memmem(s->p, s->n, sub->p, sub->n);
                }
                if (!f && IS("index")) jx_fail(x, LLC_ERR_FORMAT, "substring not found");
                *out = jv_int(f ? (int64_t)u8_len(s->p, (size_t)(f - s->p)) : -1);
            }
        } else if (IS("splitlines")) {
            jlist *l = jl_new(x, 0);
            size_t i = 0;
            while (i < s->n) {
                size_t j = i;
                while (j < s->n && s->p[j] != '\n' && s->p[j] != '\r') j++;
                jl_push(x, l, jv_strn(x, s->p + i, j - i));
                i = j + (j < s->n && s->p[j] == '\r' && j + 1 < s->n && s->p[j + 1] == '\n' ? 2 : 1);
            }
            *out = mk_list(l);
        } else if (IS("isdigit") || IS("isalpha") || IS("isalnum") || IS("isspace") || IS("isupper") ||
                   IS("islower")) {
            bool ok = s->n > 0, cased = false;
            for (size_t i = 0; i < s->n && ok; i++) {
                unsigned char c = (unsigned char)s->p[i];
                if (IS("isdigit")) ok = isdigit(c);
                else if (IS("isalpha")) ok = isalpha(c);
                else if (IS("isalnum")) ok = isalnum(c);
                else if (IS("isspace")) ok = isspace(c);
                else if (IS("isupper")) ok = !islower(c), cased |= isupper(c);
                else ok = !isupper(c), cased |= islower(c);
            }
            if (IS("isupper") || IS("islower")) ok = ok && cased;
            *out = jv_bool(ok);
        } else {
            return false;
        }
        return true;
    }
    if (obj.t == JV_DICT) {
        jdict *d = obj.u.d;
        if (IS("update") || IS("pop") || IS("setdefault")) d->text = NULL; /* no longer that JSON text */
        if (IS("get")) {
            if (!a0) jx_fail(x, LLC_ERR_FORMAT, "get needs a key");
            jv v = get_item(x, obj, *a0);
            jv *dv = arg(a, 1, "default");
            *out = v.t != JV_UNDEF ? v : dv ? *dv : JV_NONE_V;
        } else if (IS("items")) *out = items_of(x, obj);
        else if (IS("keys")) *out = mk_list(iter_list(x, obj, "keys"));
        else if (IS("values")) {
            jlist *l = jl_new(x, d->n);
            for (int i = 0; i < d->n; i++) jl_push(x, l, d->v[i]);
            *out = mk_list(l);
        } else if (IS("update")) {
            if (a0 && a0->t == JV_DICT)
                for (int i = 0; i < a0->u.d->n; i++) jd_set_key(x, d, jd_key(a0->u.d, i), a0->u.d->v[i]);
            for (int i = 0; i < a->nkw; i++) jd_set(x, d, a->kwn[i], a->kwv[i]);
            *out = JV_NONE_V;
        } else if (IS("pop")) {
            if (!a0) jx_fail(x, LLC_ERR_FORMAT, "pop needs a key");
            const jstr *k = jv_as_jstr(x, *a0);
            jv *v = jd_get(d, k->p, k->n);
            if (!v) {
                if (!a1) jx_fail(x, LLC_ERR_FORMAT, "pop: key '%.60s' not found", k->p);
                *out = *a1;
                return true;
            }
            *out = *v;
            int i = (int)(v - d->v);
            memmove(&d->k[i], &d->k[i + 1], (size_t)(d->n - i - 1) * sizeof *d->k);
            memmove(&d->v[i], &d->v[i + 1], (size_t)(d->n - i - 1) * sizeof *d->v);
            if (d->kt) memmove(&d->kt[i], &d->kt[i + 1], (size_t)(d->n - i - 1) * sizeof *d->kt);
            d->n--;
        } else if (IS("setdefault")) {
            if (!a0) jx_fail(x, LLC_ERR_FORMAT, "setdefault needs a key");
            const jstr *k = jv_as_jstr(x, *a0);
            jv *v = jd_get(d, k->p, k->n);
            if (!v) jd_set(x, d, k, a1 ? *a1 : JV_NONE_V);
            *out = v ? *v : a1 ? *a1 : JV_NONE_V;
        } else if (IS("copy")) {
            jdict *c = jd_new(x);
            for (int i = 0; i < d->n; i++) jd_set_key(x, c, jd_key(d, i), d->v[i]);
            *out = mk_dict(c);
        } else {
            return false;
        }
        return true;
    }
    if (obj.t == JV_LIST) {
        jlist *l = obj.u.l;
        if (IS("append")) {
            jl_push(x, l, a0 ? *a0 : JV_NONE_V);
            *out = JV_NONE_V;
        } else if (IS("extend")) {
            jlist *src = a0 ? iter_list(x, *a0, "extend") : jl_new(x, 0);
            int n = src->n;
            for (int i = 0; i < n; i++) jl_push(x, l, src->v[i]);
            *out = JV_NONE_V;
        } else if (IS("pop")) {
            int64_t i = a0 ? want_int(x, *a0, "pop") : l->n - 1;
            if (i < 0) i += l->n;
            if (i < 0 || i >= l->n) jx_fail(x, LLC_ERR_FORMAT, "pop index out of range");
            *out = l->v[i];
            memmove(&l->v[i], &l->v[i + 1], (size_t)(l->n - i - 1) * sizeof *l->v);
            l->n--;
        } else if (IS("insert")) {
            int64_t i = a0 ? want_int(x, *a0, "insert") : 0;
            if (i < 0) i += l->n;
            if (i < 0) i = 0;
            if (i > l->n) i = l->n;
            jl_push(x, l, JV_NONE_V);
            memmove(&l->v[i + 1], &l->v[i], (size_t)(l->n - 1 - i) * sizeof *l->v);
            l->v[i] = a1 ? *a1 : JV_NONE_V;
            *out = JV_NONE_V;
        } else if (IS("index") || IS("count")) {
            int64_t c = 0, at = -1;
            for (int i = 0; i < l->n; i++)
                if (a0 && jv_equal(l->v[i], *a0)) {
                    if (at < 0) at = i;
                    c++;
                }
            if (IS("index") && at < 0) jx_fail(x, LLC_ERR_FORMAT, "index: value not in list");
            *out = jv_int(IS("index") ? at : c);
        } else if (IS("copy")) {
            jlist *c = jl_new(x, l->n);
            for (int i = 0; i < l->n; i++) jl_push(x, c, l->v[i]);
            *out = mk_list(c);
        } else {
            return false;
        }
        return true;
    }
    return false;
#undef IS
}

/* ---- calls ---- */

static jv call_macro(jctx *x, jmacro *m, const jargs *a) {
    if (++x->call_depth > MAX_CALL_DEPTH)
        jx_fail(x, LLC_ERR_RANGE, "macro calls nested too deeply (more than %d)", MAX_CALL_DEPTH);
    const jnode *def = m->def;
    scope *saved = x->cur;
    jbuf *saved_out = x->out;
    int saved_line = x->line;
    x->cur = push_scope(x, x->globals);
    for (int i = 0; i < def->n_names; i++) {
        jv *v = arg(a, i, def->names[i]->p);
        jv val;
        if (v) val = *v;
        else if (def->list2.n > i && def->list2.v[i]) val = eval(x, def->list2.v[i]);
        else val = JV_UNDEF_V;
        set_var(x, def->names[i], val);
    }
    if (m->caller) set_var(x, js_cstr(x, "caller"), (jv){.t = JV_MACRO, .u.m = m->caller});
    jbuf out = {0};
    x->out = &out;
    exec_body(x, &def->list);
    x->brk = 0;
    x->out = saved_out;
    x->cur = saved;
    x->line = saved_line;
    x->call_depth--;
    return jv_strn(x, out.p ? out.p : "", out.n);
}

static jv call_global(jctx *x, const char *name, const jargs *a) {
#define IS(s) (strcmp(name, s) == 0)
    if (IS("raise_exception")) {
        jv *m = arg(a, 0, NULL);
        const jstr *s = m ? jv_as_jstr(x, *m) : js_cstr(x, "(no message)");
        jx_fail(x, LLC_ERR_FORMAT, "template error: %.200s", s->p);
    }
    if (IS("range")) {
        int64_t start = 0, stop, step = 1;
        if (a->npos == 1) stop = want_int(x, a->pos[0], "range");
        else if (a->npos >= 2) {
            start = want_int(x, a->pos[0], "range");
            stop = want_int(x, a->pos[1], "range");
            if (a->npos >= 3) step = want_int(x, a->pos[2], "range");
        } else {
            jx_fail(x, LLC_ERR_FORMAT, "range needs arguments");
        }
        if (step == 0) jx_fail(x, LLC_ERR_FORMAT, "range step cannot be zero");
        int64_t n = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                             : (start > stop ? (start - stop - step - 1) / -step : 0);
        if (n > MAX_RANGE) jx_fail(x, LLC_ERR_RANGE, "range of %lld items is too long", (long long)n);
        jlist *l = jl_new(x, (int)n);
        for (int64_t i = 0; i < n; i++) jl_push(x, l, jv_int(start + i * step));
        return mk_list(l);
    }
    if (IS("namespace") || IS("dict")) {
        jdict *d = jd_new(x);
        d->ns = IS("namespace");
        for (int i = 0; i < a->npos; i++)
            if (a->pos[i].t == JV_DICT)
                for (int k = 0; k < a->pos[i].u.d->n; k++) jd_set_key(x, d, jd_key(a->pos[i].u.d, k), a->pos[i].u.d->v[k]);
        for (int i = 0; i < a->nkw; i++) jd_set(x, d, a->kwn[i], a->kwv[i]);
        return mk_dict(d);
    }
    if (IS("strftime_now")) {
        jv *f = arg(a, 0, NULL);
        const jstr *fmt = f ? want_str(x, *f, "strftime_now") : js_cstr(x, "%Y-%m-%d");
        struct tm tm;
        time_t now = x->now;
        localtime_r(&now, &tm);
        char buf[256];
        size_t n = fmt->n < 128 ? strftime(buf, sizeof buf, fmt->p, &tm) : 0;
        return jv_strn(x, buf, n);
    }
    jx_fail(x, LLC_ERR_FORMAT, "'%s' is undefined or not callable", name);
#undef IS
}

static bool is_global_fn(const char *name) {
    static const char *const fns[] = {"raise_exception", "range", "namespace", "dict", "strftime_now"};
    for (size_t i = 0; i < LLC_ARRAY_LEN(fns); i++)
        if (strcmp(name, fns[i]) == 0) return true;
    return false;
}

static jv call_value(jctx *x, jv f, const jargs *a, const char *what) {
    if (f.t == JV_MACRO) return call_macro(x, f.u.m, a);
    if (f.t == JV_FUNC) {
        if (f.u.fn->kind == FN_LOOP_CYCLE) {
            if (a->npos == 0) return JV_UNDEF_V;
            return a->pos[f.u.fn->self.u.loop->index0 % a->npos];
        }
        return call_global(x, f.u.fn->name, a);
    }
    jx_fail(x, LLC_ERR_FORMAT, "'%s' is not callable (a %s)", what, jv_type_name(f));
}

/* ---- expressions ---- */

static jv eval_call(jctx *x, const jnode *n) {
    const jnode *c = n->a;
    jargs a = eval_args(x, n);
    if (c->kind == JN_ATTR) {
        jv obj = eval(x, c->a);
        jv out;
        if (call_method(x, obj, c->name->p, &a, &out)) return out;
        jv f = get_attr(x, obj, c->name->p, c->name->n);
        if (f.t == JV_UNDEF)
            jx_fail(x, LLC_ERR_FORMAT, "a %s has no method '%s'", jv_type_name(obj), c->name->p);
        return call_value(x, f, &a, c->name->p);
    }
    if (c->kind == JN_NAME) {
        jv *v = lookup(x, c->name->p, c->name->n);
        if (v && (v->t == JV_MACRO || v->t == JV_FUNC)) return call_value(x, *v, &a, c->name->p);
        if (is_global_fn(c->name->p)) return call_global(x, c->name->p, &a);
        if (!v) jx_fail(x, LLC_ERR_FORMAT, "'%s' is undefined", c->name->p);
        return call_value(x, *v, &a, c->name->p);
    }
    return call_value(x, eval(x, c), &a, "expression");
}

/* A filter block's chain `| a | b(args)`: each JN_FILTER's `a` is the filter
 * before it (NULL for the first), not an operand. */
static jv apply_filter_chain(jctx *x, const jnode *f, jv input) {
    jv v = f->a ? apply_filter_chain(x, f->a, input) : input;
    jargs a = eval_args(x, f);
    return call_filter(x, f->name->p, v, &a);
}

static void step(jctx *x) {
    if (++x->steps > x->max_steps)
        jx_fail(x, LLC_ERR_RANGE, "template takes too long (more than %lld steps)", x->max_steps);
}

static jv eval(jctx *x, const jnode *n) {
    step(x);
    if (++x->depth > MAX_EVAL_DEPTH) jx_fail(x, LLC_ERR_RANGE, "expression nested too deeply");
    jv r;
    switch (n->kind) {
    case JN_LIT:
        switch (n->lit_type) {
        case JV_STR: r = jv_str(n->lit_s); break;
        case JV_INT: r = jv_int(n->lit_i); break;
        case JV_FLOAT: r = jv_float(n->lit_f); break;
        case JV_BOOL: r = jv_bool(n->lit_i != 0); break;
        default: r = JV_NONE_V;
        }
        break;
    case JN_NAME: {
        jv *v = lookup(x, n->name->p, n->name->n);
        if (v) r = *v;
        else if (is_global_fn(n->name->p)) {
            jfunc *f = jx_alloc(x, sizeof *f);
            f->kind = FN_GLOBAL;
            f->name = n->name->p;
            r = (jv){.t = JV_FUNC, .u.fn = f};
        } else r = JV_UNDEF_V;
        break;
    }
    case JN_ATTR: r = get_attr(x, eval(x, n->a), n->name->p, n->name->n); break;
    case JN_INDEX: {
        jv obj = eval(x, n->a);
        r = get_item(x, obj, eval(x, n->b));
        break;
    }
    case JN_SLICE: {
        jv obj = eval(x, n->a);
        jv s = n->b ? eval(x, n->b) : JV_NONE_V, e = n->c ? eval(x, n->c) : JV_NONE_V;
        jv st = n->list.n ? eval(x, n->list.v[0]) : JV_NONE_V;
        r = do_slice(x, obj, &s, &e, &st);
        break;
    }
    case JN_CALL: r = eval_call(x, n); break;
    case JN_FILTER: {
        jv v = eval(x, n->a);
        jargs a = eval_args(x, n);
        r = call_filter(x, n->name->p, v, &a);
        break;
    }
    case JN_TEST: {
        jv v = eval(x, n->a);
        jargs a = eval_args(x, n);
        bool ok = run_test(x, n->name->p, v, &a);
        r = jv_bool(n->op ? !ok : ok);
        break;
    }
    case JN_NOT: r = jv_bool(!jv_truthy(eval(x, n->a))); break;
    case JN_NEG: {
        jv v = eval(x, n->a);
        if (v.t == JV_INT && v.u.i != INT64_MIN) r = jv_int(-v.u.i);
        else if (is_num(v)) r = jv_float(-num(v));
        else jx_fail(x, LLC_ERR_FORMAT, "cannot negate a %s", jv_type_name(v));
        break;
    }
    case JN_POS: r = eval(x, n->a); break;
    case JN_AND: {
        jv a = eval(x, n->a);
        r = jv_truthy(a) ? eval(x, n->b) : a;
        break;
    }
    case JN_OR: {
        jv a = eval(x, n->a);
        r = jv_truthy(a) ? a : eval(x, n->b);
        break;
    }
    case JN_COND: r = jv_truthy(eval(x, n->a)) ? eval(x, n->b) : n->c ? eval(x, n->c) : JV_UNDEF_V; break;
    case JN_BIN: {
        jv a = eval(x, n->a);
        r = binop(x, n->op, a, eval(x, n->b));
        break;
    }
    case JN_LIST:
    case JN_TUPLE: {
        jlist *l = jl_new(x, n->list.n);
        l->tuple = n->kind == JN_TUPLE;
        for (int i = 0; i < n->list.n; i++) jl_push(x, l, eval(x, n->list.v[i]));
        r = mk_list(l);
        break;
    }
    case JN_DICT: {
        jdict *d = jd_new(x);
        for (int i = 0; i < n->list.n; i++) {
            jv k = eval(x, n->list.v[i]);
            jd_set_key(x, d, k, eval(x, n->list2.v[i]));
        }
        r = mk_dict(d);
        break;
    }
    default: jx_fail(x, LLC_ERR_FORMAT, "not an expression");
    }
    x->depth--;
    return r;
}

/* ---- statements ---- */

static void output(jctx *x, jv v) {
    jv_to_str(x, x->out, v);
    if (x->out->n > x->max_output)
        jx_fail(x, LLC_ERR_RANGE, "output larger than %zu bytes", x->max_output);
}

static void assign_targets(jctx *x, const jstr *const *names, int n, jv v) {
    if (n == 1) {
        set_var(x, names[0], v);
        return;
    }
    if (v.t != JV_LIST || v.u.l->n != n)
        jx_fail(x, LLC_ERR_FORMAT, "cannot unpack a %s into %d names", jv_type_name(v), n);
    for (int i = 0; i < n; i++) set_var(x, names[i], v.u.l->v[i]);
}

static void exec_for(jctx *x, const jnode *n) {
    jv it = eval(x, n->a);
    jlist *src = it.t == JV_DICT ? iter_list(x, it, "for") : iter_list(x, it, "for");
    scope *saved = x->cur;
    x->cur = push_scope(x, saved);
    jlist *items = src;
    if (n->b) { /* `for x in y if cond`: filter first, so loop.length counts what is kept */
        items = jl_new(x, 0);
        for (int i = 0; i < src->n; i++) {
            assign_targets(x, n->names, n->n_names, src->v[i]);
            if (jv_truthy(eval(x, n->b))) jl_push(x, items, src->v[i]);
        }
    } else if (src->n > 0) { /* iterate over a snapshot: the body may change the list */
        items = jl_new(x, src->n);
        for (int i = 0; i < src->n; i++) jl_push(x, items, src->v[i]);
    }
    const jstr *loop_name = js_cstr(x, "loop");
    jv *outer_loop = lookup(x, "loop", 4);
    int depth0 = outer_loop && outer_loop->t == JV_LOOP ? outer_loop->u.loop->depth0 + 1 : 0;
    for (int i = 0; i < items->n; i++) {
        jloop *lp = jx_alloc(x, sizeof *lp);
        lp->items = items;
        lp->index0 = i;
        lp->depth0 = depth0;
        set_var(x, loop_name, (jv){.t = JV_LOOP, .u.loop = lp});
        assign_targets(x, n->names, n->n_names, items->v[i]);
        exec_body(x, &n->list);
        if (x->brk == 1) {
            x->brk = 0;
            break;
        }
        x->brk = 0;
    }
    x->cur = saved;
    if (items->n == 0 && n->list2.n) exec_body(x, &n->list2);
}

static void exec(jctx *x, const jnode *n) {
    step(x);
    x->line = n->line;
    switch (n->kind) {
    case JN_TEXT:
        jb_put(x, x->out, n->lit_s->p, n->lit_s->n);
        if (x->out->n > x->max_output) jx_fail(x, LLC_ERR_RANGE, "output larger than %zu bytes", x->max_output);
        return;
    case JN_OUT: output(x, eval(x, n->a)); return;
    case JN_IF:
        if (jv_truthy(eval(x, n->a))) exec_body(x, &n->list);
        else exec_body(x, &n->list2);
        return;
    case JN_FOR: exec_for(x, n); return;
    case JN_SET: {
        jv v = eval(x, n->b);
        if (n->a) { /* ns.attr = v */
            jv ns = eval(x, n->a);
            if (ns.t != JV_DICT) jx_fail(x, LLC_ERR_FORMAT, "cannot set an attribute of a %s", jv_type_name(ns));
            ns.u.d->text = NULL;
            jd_set(x, ns.u.d, n->name, v);
        } else if (n->n_names) {
            assign_targets(x, n->names, n->n_names, v);
        }
        return;
    }
    case JN_SETBLOCK:
    case JN_FILTERBLOCK: {
        jbuf *saved = x->out;
        jbuf b = {0};
        x->out = &b;
        exec_body(x, &n->list);
        x->out = saved;
        jv v = jv_strn(x, b.p ? b.p : "", b.n);
        if (n->b) v = apply_filter_chain(x, n->b, v);
        if (n->kind == JN_SETBLOCK) set_var(x, n->names[0], v);
        else output(x, v);
        return;
    }
    case JN_MACRO: {
        jmacro *m = jx_alloc(x, sizeof *m);
        m->def = n;
        set_var(x, n->name, (jv){.t = JV_MACRO, .u.m = m});
        return;
    }
    case JN_CALLBLOCK: {
        const jnode *call = n->a;
        jmacro *caller = jx_alloc(x, sizeof *caller);
        caller->def = n->b;
        jv f = call->a->kind == JN_NAME ? (lookup(x, call->a->name->p, call->a->name->n)
                                               ? *lookup(x, call->a->name->p, call->a->name->n)
                                               : JV_UNDEF_V)
                                        : eval(x, call->a);
        if (f.t != JV_MACRO) jx_fail(x, LLC_ERR_FORMAT, "call block: not a macro");
        jmacro with = *f.u.m;
        with.caller = caller;
        jargs a = eval_args(x, call);
        output(x, call_macro(x, &with, &a));
        return;
    }
    case JN_BLOCK: exec_body(x, &n->list); return;
    case JN_BREAK: x->brk = 1; return;
    case JN_CONTINUE: x->brk = 2; return;
    default: jx_fail(x, LLC_ERR_FORMAT, "not a statement");
    }
}

static void exec_body(jctx *x, const jnodes *body) {
    if (++x->depth > MAX_EVAL_DEPTH) jx_fail(x, LLC_ERR_RANGE, "statements nested too deeply");
    for (int i = 0; i < body->n && !x->brk; i++) exec(x, body->v[i]);
    x->depth--;
}

/* ---- entry ---- */

int jinja_render(const jinja_tpl *t, const cJSON *vars, const jinja_opts *opts, char **out,
                 size_t *out_len, llc_err *err) {
    if (!out) return llc_fail(err, LLC_ERR_RANGE, "jinja_render: no output pointer");
    *out = NULL;
    if (out_len) *out_len = 0;
    if (!t) return llc_fail(err, LLC_ERR_RANGE, "jinja_render: no template");
    jctx *x = calloc(1, sizeof *x);
    if (!x) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    jinja_opts o = opts ? *opts : (jinja_opts){0};
    x->err = err;
    x->max_steps = o.max_steps > 0 ? o.max_steps : 20000000;
    x->max_output = o.max_output > 0 ? o.max_output : (size_t)32 << 20;
    x->arena.limit = o.max_memory > 0 ? o.max_memory : (size_t)512 << 20;
    x->now = o.now ? o.now : time(NULL);
    x->line = 1;
    if (setjmp(x->jb)) {
        int code = x->code;
        jarena_free(&x->arena);
        free(x);
        return code;
    }
    jbuf b = {0};
    x->out = &b;
    x->globals = push_scope(x, NULL);
    x->cur = x->globals;
    if (vars)
        for (const cJSON *c = vars->child; c; c = c->next)
            if (c->string) set_var(x, js_cstr(x, c->string), jv_from_json(x, c));
    exec_body(x, &t->body);
    char *res = malloc(b.n + 1);
    if (!res) {
        jarena_free(&x->arena);
        free(x);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    if (b.n) memcpy(res, b.p, b.n);
    res[b.n] = 0;
    if (out_len) *out_len = b.n;
    *out = res;
    jarena_free(&x->arena);
    free(x);
    return 0;
}
