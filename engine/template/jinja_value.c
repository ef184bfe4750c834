/* jinja_value.c — Jinja runtime values: construction in the render arena,
 * conversion from cJSON, truth and equality as Python has them, and the three
 * ways a value becomes text (str(), repr(), and json.dumps for |tojson). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/template/jinja_internal.h"

const jstr *js_new(jctx *x, const char *s, size_t n) {
    if (n > ((size_t)1 << 31)) jx_fail(x, LLC_ERR_RANGE, "string too long");
    jstr *j = jx_alloc(x, sizeof *j + n + 1);
    if (n) memcpy(j->p, s, n);
    j->p[n] = 0;
    j->n = n;
    return j;
}
const jstr *js_cstr(jctx *x, const char *s) { return js_new(x, s, strlen(s)); }
jv jv_str(const jstr *s) { return (jv){.t = JV_STR, .u.s = s}; }
jv jv_strn(jctx *x, const char *s, size_t n) { return jv_str(js_new(x, s, n)); }
jv jv_int(int64_t i) { return (jv){.t = JV_INT, .u.i = i}; }
jv jv_float(double f) { return (jv){.t = JV_FLOAT, .u.f = f}; }
jv jv_bool(bool b) { return (jv){.t = JV_BOOL, .u.b = b}; }

jlist *jl_new(jctx *x, int cap) {
    jlist *l = jx_alloc(x, sizeof *l);
    if (cap > 0) {
        l->v = jx_alloc(x, (size_t)cap * sizeof *l->v);
        l->cap = cap;
    }
    return l;
}

void jl_push(jctx *x, jlist *l, jv v) {
    if (l->n == l->cap) {
        if (l->cap > (1 << 26)) jx_fail(x, LLC_ERR_RANGE, "list too long");
        int cap = l->cap ? l->cap * 2 : 4;
        jv *nv = jx_alloc(x, (size_t)cap * sizeof *nv);
        if (l->n) memcpy(nv, l->v, (size_t)l->n * sizeof *nv);
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

jdict *jd_new(jctx *x) { return jx_alloc(x, sizeof(jdict)); }

jv *jd_get(const jdict *d, const char *k, size_t n) {
    for (int i = 0; i < d->n; i++)
        if (d->k[i]->n == n && memcmp(d->k[i]->p, k, n) == 0) return &d->v[i];
    return NULL;
}

void jd_set(jctx *x, jdict *d, const jstr *k, jv v) {
    jv *old = jd_get(d, k->p, k->n);
    if (old) {
        *old = v;
        return;
    }
    if (d->n == d->cap) {
        if (d->cap > (1 << 24)) jx_fail(x, LLC_ERR_RANGE, "dict too large");
        int cap = d->cap ? d->cap * 2 : 8;
        const jstr **nk = jx_alloc(x, (size_t)cap * sizeof *nk);
        jv *nv = jx_alloc(x, (size_t)cap * sizeof *nv);
        jv *nt = d->kt ? jx_alloc(x, (size_t)cap * sizeof *nt) : NULL;
        if (d->n) {
            memcpy(nk, d->k, (size_t)d->n * sizeof *nk);
            memcpy(nv, d->v, (size_t)d->n * sizeof *nv);
            if (nt) memcpy(nt, d->kt, (size_t)d->n * sizeof *nt);
        }
        d->k = nk;
        d->v = nv;
        d->kt = nt;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n] = v;
    if (d->kt) d->kt[d->n] = JV_UNDEF_V;
    d->n++;
}

void jd_set_key(jctx *x, jdict *d, jv key, jv v) {
    const jstr *k = jv_as_jstr(x, key);
    jd_set(x, d, k, v);
    if (key.t == JV_STR) return;
    if (!d->kt) d->kt = jx_alloc(x, (size_t)d->cap * sizeof *d->kt); /* zeroed: JV_UNDEF */
    d->kt[jd_get(d, k->p, k->n) - d->v] = key;
}

jv jd_key(const jdict *d, int i) {
    return d->kt && d->kt[i].t != JV_UNDEF ? d->kt[i] : jv_str(d->k[i]);
}

jv jv_from_json(jctx *x, const cJSON *j) {
    if (!j || cJSON_IsNull(j)) return JV_NONE_V;
    if (cJSON_IsBool(j)) return jv_bool(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9007199254740992.0) return jv_int((int64_t)d);
        return jv_float(d);
    }
    if (cJSON_IsString(j)) return jv_str(js_cstr(x, j->valuestring ? j->valuestring : ""));
    if (cJSON_IsArray(j)) {
        jlist *l = jl_new(x, cJSON_GetArraySize(j));
        for (const cJSON *c = j->child; c; c = c->next) jl_push(x, l, jv_from_json(x, c));
        return (jv){.t = JV_LIST, .u.l = l};
    }
    if (cJSON_IsObject(j)) {
        jdict *d = jd_new(x);
        if (j->valuestring) d->text = js_cstr(x, j->valuestring);
        for (const cJSON *c = j->child; c; c = c->next)
            jd_set(x, d, js_cstr(x, c->string ? c->string : ""), jv_from_json(x, c));
        return (jv){.t = JV_DICT, .u.d = d};
    }
    return JV_NONE_V;
}

bool jv_truthy(jv v) {
    switch (v.t) {
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0;
    case JV_STR: return v.u.s->n > 0;
    case JV_LIST: return v.u.l->n > 0;
    case JV_DICT: return v.u.d->n > 0 || v.u.d->ns;
    case JV_MACRO:
    case JV_FUNC:
    case JV_LOOP: return true;
    default: return false;
    }
}

static bool is_num(jv v) { return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL; }
static double num(jv v) { return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : v.u.b; }

bool jv_equal(jv a, jv b) {
    if (is_num(a) && is_num(b)) {
        if (a.t != JV_FLOAT && b.t != JV_FLOAT) {
            int64_t x = a.t == JV_INT ? a.u.i : a.u.b, y = b.t == JV_INT ? b.u.i : b.u.b;
            return x == y;
        }
        return num(a) == num(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR: return a.u.s->n == b.u.s->n && memcmp(a.u.s->p, b.u.s->p, a.u.s->n) == 0;
    case JV_LIST:
        if (a.u.l->n != b.u.l->n) return false;
        for (int i = 0; i < a.u.l->n; i++)
            if (!jv_equal(a.u.l->v[i], b.u.l->v[i])) return false;
        return true;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n) return false;
        for (int i = 0; i < a.u.d->n; i++) {
            jv *o = jd_get(b.u.d, a.u.d->k[i]->p, a.u.d->k[i]->n);
            if (!o || !jv_equal(a.u.d->v[i], *o)) return false;
        }
        return true;
    default: return a.u.m == b.u.m;
    }
}

const char *jv_type_name(jv v) {
    static const char *names[] = {"undefined", "none", "bool", "int", "float", "string",
                                  "list", "dict", "macro", "function", "loop"};
    return v.t >= 0 && v.t < (int)LLC_ARRAY_LEN(names) ? names[v.t] : "?";
}

/* ---- buffers ---- */

void jb_put(jctx *x, jbuf *b, const char *s, size_t n) {
    if (n == 0) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *np = jx_alloc(x, cap);
        if (b->n) memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
void jb_puts(jctx *x, jbuf *b, const char *s) { jb_put(x, b, s, strlen(s)); }
void jb_putc(jctx *x, jbuf *b, char c) { jb_put(x, b, &c, 1); }
void jb_printf(jctx *x, jbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) jb_put(x, b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Python's repr(float): the shortest text that reads back as the same double,
 * with ".0" on integral values and exponents from 1e16 up / below 1e-4. */
void jfloat_repr(char *buf, size_t cap, double f) {
    if (isnan(f)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(f)) {
        snprintf(buf, cap, f < 0 ? "-inf" : "inf");
        return;
    }
    char tmp[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp is d.ddde[+-]XX with prec significant digits */
    char digits[24];
    int nd = 0;
    const char *p = tmp;
    bool neg = *p == '-';
    if (neg) p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char out[64];
    int k = 0;
    if (neg) out[k++] = '-';
    if (exp10 >= 16 || exp10 < -4) {
        out[k++] = digits[0];
        if (nd > 1) {
            out[k++] = '.';
            for (int i = 1; i < nd; i++) out[k++] = digits[i];
        }
        k += snprintf(out + k, sizeof out - (size_t)k, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    } else if (exp10 < 0) {
        out[k++] = '0';
        out[k++] = '.';
        for (int i = -1; i > exp10; i--) out[k++] = '0';
        for (int i = 0; i < nd; i++) out[k++] = digits[i];
    } else {
        for (int i = 0; i <= exp10; i++) out[k++] = i < nd ? digits[i] : '0';
        out[k++] = '.';
        if (nd > exp10 + 1)
            for (int i = exp10 + 1; i < nd; i++) out[k++] = digits[i];
        else
            out[k++] = '0';
    }
    out[k] = 0;
    snprintf(buf, cap, "%s", out);
}

static void put_repr_str(jctx *x, jbuf *b, const jstr *s) {
    bool has_sq = memchr(s->p, '\'', s->n) != NULL, has_dq = memchr(s->p, '"', s->n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    jb_putc(x, b, q);
    for (size_t i = 0; i < s->n; i++) {
        unsigned char c = (unsigned char)s->p[i];
        if (c == '\\') jb_puts(x, b, "\\\\");
        else if (c == (unsigned char)q) {
            jb_putc(x, b, '\\');
            jb_putc(x, b, (char)c);
        } else if (c == '\n') jb_puts(x, b, "\\n");
        else if (c == '\r') jb_puts(x, b, "\\r");
        else if (c == '\t') jb_puts(x, b, "\\t");
        else if (c < 0x20 || c == 0x7f) jb_printf(x, b, "\\x%02x", c);
        else jb_putc(x, b, (char)c);
    }
    jb_putc(x, b, q);
}

void jv_repr(jctx *x, jbuf *b, jv v) {
    switch (v.t) {
    case JV_STR: put_repr_str(x, b, v.u.s); return;
    case JV_LIST:
        jb_putc(x, b, v.u.l->tuple ? '(' : '[');
        for (int i = 0; i < v.u.l->n; i++) {
            if (i) jb_puts(x, b, ", ");
            jv_repr(x, b, v.u.l->v[i]);
        }
        if (v.u.l->tuple && v.u.l->n == 1) jb_putc(x, b, ',');
        jb_putc(x, b, v.u.l->tuple ? ')' : ']');
        return;
    case JV_DICT:
        if (v.u.d->ns) jb_puts(x, b, "<Namespace ");
        jb_putc(x, b, '{');
        for (int i = 0; i < v.u.d->n; i++) {
            if (i) jb_puts(x, b, ", ");
            jv_repr(x, b, jd_key(v.u.d, i));
            jb_puts(x, b, ": ");
            jv_repr(x, b, v.u.d->v[i]);
        }
        jb_putc(x, b, '}');
        if (v.u.d->ns) jb_putc(x, b, '>');
        return;
    default: jv_to_str(x, b, v);
    }
}

void jv_to_str(jctx *x, jbuf *b, jv v) {
    char tmp[64];
    switch (v.t) {
    case JV_UNDEF: return;
    case JV_NONE: jb_puts(x, b, "None"); return;
    case JV_BOOL: jb_puts(x, b, v.u.b ? "True" : "False"); return;
    case JV_INT: jb_printf(x, b, "%lld", (long long)v.u.i); return;
    case JV_FLOAT:
        jfloat_repr(tmp, sizeof tmp, v.u.f);
        jb_puts(x, b, tmp);
        return;
    case JV_STR: jb_put(x, b, v.u.s->p, v.u.s->n); return;
    case JV_DICT:
        if (v.u.d->text) {
            jb_put(x, b, v.u.d->text->p, v.u.d->text->n);
            return;
        }
        jv_repr(x, b, v);
        return;
    case JV_LIST: jv_repr(x, b, v); return;
    case JV_MACRO: jb_puts(x, b, "<macro>"); return;
    case JV_FUNC: jb_puts(x, b, "<function>"); return;
    case JV_LOOP: jb_puts(x, b, "<loop>"); return;
    }
}

const jstr *jv_as_jstr(jctx *x, jv v) {
    if (v.t == JV_STR) return v.u.s;
    jbuf b = {0};
    jv_to_str(x, &b, v);
    return js_new(x, b.p ? b.p : "", b.n);
}

static void json_str(jctx *x, jbuf *b, const char *s, size_t n) {
    jb_putc(x, b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char ub[8];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) {
                snprintf(ub, sizeof ub, "\\u%04x", c);
                esc = ub;
            }
        }
        if (esc) {
            jb_put(x, b, s + i - run, run);
            run = 0;
            jb_puts(x, b, esc);
        } else {
            run++;
        }
    }
    jb_put(x, b, s + n - run, run);
    jb_putc(x, b, '"');
}

static void indent_nl(jctx *x, jbuf *b, int indent, int level) {
    jb_putc(x, b, '\n');
    for (int i = 0; i < indent * level; i++) jb_putc(x, b, ' ');
}

static int cmp_key(const void *a, const void *b) {
    const jstr *x = *(const jstr *const *)a, *y = *(const jstr *const *)b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->p, y->p, n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

static void to_json(jctx *x, jbuf *b, jv v, int indent, bool sort_keys, const char *isep,
                    const char *ksep, int level) {
    if (level > 200) jx_fail(x, LLC_ERR_RANGE, "tojson: nested too deeply");
    char tmp[64];
    switch (v.t) {
    case JV_UNDEF:
    case JV_NONE: jb_puts(x, b, "null"); return;
    case JV_BOOL: jb_puts(x, b, v.u.b ? "true" : "false"); return;
    case JV_INT: jb_printf(x, b, "%lld", (long long)v.u.i); return;
    case JV_FLOAT:
        if (isnan(v.u.f)) jb_puts(x, b, "NaN");
        else if (isinf(v.u.f)) jb_puts(x, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else {
            jfloat_repr(tmp, sizeof tmp, v.u.f);
            jb_puts(x, b, tmp);
        }
        return;
    case JV_STR: json_str(x, b, v.u.s->p, v.u.s->n); return;
    case JV_LIST:
        if (v.u.l->n == 0) {
            jb_puts(x, b, "[]");
            return;
        }
        jb_putc(x, b, '[');
        for (int i = 0; i < v.u.l->n; i++) {
            if (i) jb_puts(x, b, isep);
            if (indent >= 0) indent_nl(x, b, indent, level + 1);
            to_json(x, b, v.u.l->v[i], indent, sort_keys, isep, ksep, level + 1);
        }
        if (indent >= 0) indent_nl(x, b, indent, level);
        jb_putc(x, b, ']');
        return;
    case JV_DICT: {
        const jdict *d = v.u.d;
        if (d->n == 0) {
            jb_puts(x, b, "{}");
            return;
        }
        int *order = jx_alloc(x, (size_t)d->n * sizeof *order);
        for (int i = 0; i < d->n; i++) order[i] = i;
        if (sort_keys) { /* insertion sort by key: dicts here are small */
            for (int i = 1; i < d->n; i++)
                for (int j = i; j > 0 && cmp_key(&d->k[order[j - 1]], &d->k[order[j]]) > 0; j--) {
                    int t = order[j];
                    order[j] = order[j - 1];
                    order[j - 1] = t;
                }
        }
        jb_putc(x, b, '{');
        for (int i = 0; i < d->n; i++) {
            if (i) jb_puts(x, b, isep);
            if (indent >= 0) indent_nl(x, b, indent, level + 1);
            json_str(x, b, d->k[order[i]]->p, d->k[order[i]]->n);
            jb_puts(x, b, ksep);
            to_json(x, b, d->v[order[i]], indent, sort_keys, isep, ksep, level + 1);
        }
        if (indent >= 0) indent_nl(x, b, indent, level);
        jb_putc(x, b, '}');
        return;
    }
    default: jx_fail(x, LLC_ERR_FORMAT, "tojson: a %s is not JSON serializable", jv_type_name(v));
    }
}

void jv_to_json(jctx *x, jbuf *b, jv v, int indent, bool sort_keys, const char *item_sep,
                const char *key_sep) {
    if (!item_sep) item_sep = indent >= 0 ? "," : ", ";
    if (!key_sep) key_sep = ": ";
    to_json(x, b, v, indent, sort_keys, item_sep, key_sep, 0);
}
