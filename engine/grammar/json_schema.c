/* json_schema.c — JSON Schema to GBNF. One rule per schema visited (named after
 * where it sits: root, root-name, item ...), shared primitives (string, number,
 * value ...) added on first use, identical bodies shared. Integer ranges become
 * exact digit-by-digit alternatives. */
#include "engine/grammar/json_schema.h"
#include "engine/grammar/grammar_internal.h"
#include "engine/grammar/json_schema_internal.h"
#include "kernels/sbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JS_MAX_DEPTH 64

/* s as a GBNF string literal. */
static void sb_literal(sbuf *b, const char *s) {
    sb_str(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') sb_printf(b, "\\%c", *p);
        else if (*p == '\n') sb_str(b, "\\n");
        else if (*p == '\r') sb_str(b, "\\r");
        else if (*p == '\t') sb_str(b, "\\t");
        else if (*p < 0x20 || *p == 0x7F) sb_printf(b, "\\x%02X", *p);
        else sb_add(b, (const char *)p, 1);
    }
    sb_str(b, "\"");
}

/* ---- the converter ---- */

typedef struct rule {
    char *name, *body; /* body NULL while a $ref target is being built */
} rule;

typedef struct ref_entry {
    char *ref, *rule_name;
} ref_entry;

typedef struct conv {
    const cJSON *root;
    rule *rules;
    int n_rules, cap_rules;
    str_index by_name, by_body; /* rule name -> rule, body -> its first rule */
    ref_entry *refs;
    int n_refs, cap_refs;
    llc_err *err;
    int rc;
    int depth;
} conv;

__attribute__((format(printf, 4, 5))) static void fail(conv *c, int code, const char *path, const char *fmt, ...) {
    if (c->rc) return;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->rc = llc_fail(c->err, code, "%s: %s", path, msg);
}

static rule *find_rule(conv *c, const char *name) {
    int i = str_index_find(&c->by_name, name, strlen(name));
    return i >= 0 ? &c->rules[i] : NULL;
}

static void nomem(conv *c) {
    if (!c->rc) c->rc = llc_fail(c->err, LLC_ERR_NOMEM, "out of memory");
}

/* Gives rule i its body (consumed), indexed so an equal body finds it. */
static bool set_body(conv *c, int i, char *body) {
    c->rules[i].body = body;
    size_t len = strlen(body);
    if (str_index_find(&c->by_body, body, len) < 0 && str_index_add(&c->by_body, body, len, i)) return nomem(c), false;
    return true;
}

/* Appends rule `name ::= body` (name not taken; body consumed, NULL for a body
 * set later); returns its index or -1. */
static int append_rule(conv *c, const char *name, char *body) {
    if (c->n_rules == c->cap_rules) {
        int cap = c->cap_rules ? c->cap_rules * 2 : 32;
        rule *r = realloc(c->rules, (size_t)cap * sizeof *r);
        if (!r) return free(body), nomem(c), -1;
        c->rules = r;
        c->cap_rules = cap;
    }
    int i = c->n_rules;
    c->rules[i] = (rule){strdup(name), NULL};
    if (!c->rules[i].name || str_index_add(&c->by_name, name, strlen(name), i))
        return free(c->rules[i].name), free(body), nomem(c), -1;
    c->n_rules++;
    if (body && !set_body(c, i, body)) return -1;
    return i;
}

/* Adds rule `name ::= body` and returns its name: the existing rule with the
 * same body if there is one, else under a name made unique. body is consumed. */
static const char *add_rule(conv *c, const char *name, char *body) {
    if (!body || c->rc) {
        free(body);
        nomem(c);
        return NULL;
    }
    int same = str_index_find(&c->by_body, body, strlen(body));
    if (same >= 0) {
        free(body);
        return c->rules[same].name;
    }
    char uniq[160];
    snprintf(uniq, sizeof uniq, "%.120s", name);
    for (int k = 1; find_rule(c, uniq); k++) snprintf(uniq, sizeof uniq, "%.120s%d", name, k);
    int i = append_rule(c, uniq, body);
    return i >= 0 ? c->rules[i].name : NULL;
}

/* The primitives, added on first use (with what they need). */
static const char *primitive(conv *c, const char *name) {
    static const struct { const char *name, *body, *deps; } prims[] = {
        {"space", "| \" \" | \"\\n\" [ \\t]{0,20}", ""},
        {"boolean", "(\"true\" | \"false\") space", "space"},
        {"null", "\"null\" space", "space"},
        {"integral-part", "[0] | [1-9] [0-9]{0,15}", ""},
        {"decimal-part", "[0-9]{1,16}", ""},
        {"integer", "(\"-\"? integral-part) space", "integral-part space"},
        {"number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space",
         "integral-part decimal-part space"},
        {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" hex4)", "hex4"},
        /* \\u escapes of UTF-16 surrogates are left out: alone they are not text */
        {"hex4", "[0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}", ""},
        {"string", "\"\\\"\" char* \"\\\"\" space", "char space"},
        {"value", "object | array | string | number | boolean | null",
         "object array string number boolean null"},
        {"object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space",
         "string value space"},
        {"array", "\"[\" space ( value (\",\" space value)* )? \"]\" space", "value space"},
        {"date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1] )", ""},
        {"time", "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? "
                 "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )", ""},
        {"date-string", "\"\\\"\" date \"\\\"\" space", "date space"},
        {"time-string", "\"\\\"\" time \"\\\"\" space", "time space"},
        {"date-time-string", "\"\\\"\" date \"T\" time \"\\\"\" space", "date time space"},
        {"email-string", "\"\\\"\" email-atom (\".\" email-atom)* \"@\" email-label (\".\" email-label)+ \"\\\"\" space",
         "email-atom email-label space"},
        {"email-atom", "[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\-]+", ""},
        {"email-label", "[A-Za-z0-9] ([A-Za-z0-9\\-]{0,61} [A-Za-z0-9])?", ""},
        /* RFC 3986: a scheme, ":", then characters a URI may hold (%-escapes whole) */
        {"uri-string", "\"\\\"\" [A-Za-z] [A-Za-z0-9+.\\-]* \":\" uri-char+ \"\\\"\" space", "uri-char space"},
        {"uri-char", "[A-Za-z0-9\\-._~:/?#\\[\\]@!$&'()*+,;=] | \"%\" [0-9A-Fa-f]{2}", ""},
        {"uuid", "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
                 "[0-9a-fA-F]{12} \"\\\"\" space", "space"},
    };
    for (size_t i = 0; i < sizeof prims / sizeof *prims; i++) {
        if (strcmp(prims[i].name, name)) continue;
        if (find_rule(c, name)) return find_rule(c, name)->name;
        /* register first (value and object refer to each other) */
        char *body = strdup(prims[i].body);
        if (!body) return nomem(c), NULL;
        if (append_rule(c, name, body) < 0) return NULL;
        char deps[128];
        snprintf(deps, sizeof deps, "%s", prims[i].deps);
        for (char *save = NULL, *d = strtok_r(deps, " ", &save); d; d = strtok_r(NULL, " ", &save)) primitive(c, d);
        return find_rule(c, name)->name;
    }
    return NULL;
}

static const char *visit(conv *c, const cJSON *s, const char *name, const char *path);

static bool has(const cJSON *s, const char *key) { return cJSON_GetObjectItemCaseSensitive(s, key) != NULL; }
static const cJSON *get(const cJSON *s, const char *key) { return cJSON_GetObjectItemCaseSensitive(s, key); }

/* A rule name part from a property name: letters, digits and '-'. */
static void name_part(char *out, size_t cap, const char *prefix, const char *key) {
    size_t n = (size_t)snprintf(out, cap, "%s-", prefix);
    for (const char *k = key; *k && n + 1 < cap && n < 100; k++)
        out[n++] = (*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') ? *k : '-';
    out[n] = 0;
}

/* A literal JSON value followed by space. */
static void sb_json_literal(conv *c, sbuf *b, const cJSON *v) {
    char *text = cJSON_PrintUnformatted(v);
    if (!text) return (void)(b->oom = true);
    sb_literal(b, text);
    free(text);
    sb_str(b, " space");
    primitive(c, "space");
}

/* ---- numbers ---- */

/* One side of a number's range: `minimum` with `exclusiveMinimum` (or the
 * maximum pair). The exclusive keyword is a number of its own (draft 6 on) or
 * a boolean that makes `minimum` exclusive (draft 4); with both, the stricter. */
static bool bound_of(conv *c, const cJSON *s, bool lower, num_bound *out, const char *path) {
    const char *kin = lower ? "minimum" : "maximum", *kex = lower ? "exclusiveMinimum" : "exclusiveMaximum";
    const cJSON *m = get(s, kin), *x = get(s, kex);
    *out = (num_bound){0};
    if (m && !cJSON_IsNumber(m)) return fail(c, LLC_ERR_FORMAT, path, "'%s' must be a number", kin), false;
    if (x && !cJSON_IsNumber(x) && !cJSON_IsBool(x))
        return fail(c, LLC_ERR_FORMAT, path, "'%s' must be a number or a boolean", kex), false;
    if (cJSON_IsTrue(x) && !m) return fail(c, LLC_ERR_FORMAT, path, "'%s': true needs '%s'", kex, kin), false;
    if (m) *out = (num_bound){.set = true, .ex = cJSON_IsTrue(x), .v = m->valuedouble};
    if (cJSON_IsNumber(x) && (!out->set || (lower ? x->valuedouble >= out->v : x->valuedouble <= out->v)))
        *out = (num_bound){.set = true, .ex = true, .v = x->valuedouble};
    return true;
}

/* integer or number, with its range when it has one. */
static const char *number_rule(conv *c, const cJSON *s, const char *name, const char *path, bool integer) {
    num_bound lo, hi;
    if (!bound_of(c, s, true, &lo, path) || !bound_of(c, s, false, &hi, path)) return NULL;
    if (!lo.set && !hi.set) return primitive(c, integer ? "integer" : "number");
    sbuf b = {0};
    char msg[160];
    int rc = json_range_gbnf(&b, lo, hi, integer, msg, sizeof msg);
    if (rc) return free(b.p), fail(c, rc, path, "%s", msg), NULL;
    sb_str(&b, " space");
    primitive(c, "space");
    if (b.oom) return free(b.p), fail(c, LLC_ERR_NOMEM, path, "out of memory"), NULL;
    return add_rule(c, name, b.p);
}

/* ---- kinds ---- */

/* A count's bounds (minLength/maxLength, minItems/maxItems, ...): lo 0 and hi
 * -1 (none) when absent. False (and the error) when not 0..10000 integers
 * with lo <= hi. */
static bool count_range(conv *c, const cJSON *s, const char *kmin, const char *kmax, int *lo, int *hi, const char *path) {
    const cJSON *mn = get(s, kmin), *mx = get(s, kmax);
    *lo = 0, *hi = -1;
    for (int k = 0; k < 2; k++) {
        const cJSON *v = k ? mx : mn;
        if (!v) continue;
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 || v->valuedouble > 10000)
            return fail(c, LLC_ERR_UNSUPPORTED, path, "'%s' must be an integer within 0..10000", k ? kmax : kmin), false;
        *(k ? hi : lo) = v->valueint;
    }
    if (*hi >= 0 && *hi < *lo) return fail(c, LLC_ERR_FORMAT, path, "'%s' is larger than '%s'", kmin, kmax), false;
    return true;
}

/* A string matching `pattern` (json_regex.c). */
static const char *pattern_rule(conv *c, const cJSON *pat, const char *name, const char *path) {
    if (!cJSON_IsString(pat)) return fail(c, LLC_ERR_FORMAT, path, "'pattern' must be a string"), NULL;
    sbuf b = {0};
    char msg[256];
    sb_str(&b, "\"\\\"\" ");
    int rc = json_regex_gbnf(&b, pat->valuestring, msg, sizeof msg);
    if (rc) return free(b.p), fail(c, rc, path, "%s", msg), NULL;
    sb_str(&b, " \"\\\"\" space");
    primitive(c, "char");
    primitive(c, "space");
    if (b.oom) return free(b.p), fail(c, LLC_ERR_NOMEM, path, "out of memory"), NULL;
    return add_rule(c, name, b.p);
}

/* The formats with a grammar of their own. */
static const struct { const char *format, *rule; } formats[] = {
    {"date", "date-string"}, {"time", "time-string"}, {"date-time", "date-time-string"},
    {"uuid", "uuid"}, {"email", "email-string"}, {"uri", "uri-string"},
};

static const char *string_rule(conv *c, const cJSON *s, const char *name, const char *path) {
    const cJSON *f = get(s, "format"), *pat = get(s, "pattern");
    int lo, hi;
    if (!count_range(c, s, "minLength", "maxLength", &lo, &hi, path)) return NULL;
    bool sized = lo > 0 || hi >= 0;
    if ((pat || f) && sized) /* the intersection of a pattern and a length is no grammar of ours */
        return fail(c, LLC_ERR_UNSUPPORTED, path, "'%s' together with 'minLength'/'maxLength' is not supported in "
                                                  "structured output", pat ? "pattern" : "format"), NULL;
    if (pat) return pattern_rule(c, pat, name, path); /* a pattern says more than a format (zod gives both) */
    if (f) {
        if (!cJSON_IsString(f)) return fail(c, LLC_ERR_FORMAT, path, "'format' must be a string"), NULL;
        for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
            if (!strcmp(f->valuestring, formats[i].format)) return primitive(c, formats[i].rule);
        return fail(c, LLC_ERR_UNSUPPORTED, path, "'format': '%.40s' is not supported in structured output (date, time, "
                                                  "date-time, uuid, email, uri are; or give a 'pattern')", f->valuestring), NULL;
    }
    if (!sized) return primitive(c, "string");
    primitive(c, "char");
    primitive(c, "space");
    sbuf b = {0};
    if (hi >= 0) sb_printf(&b, "\"\\\"\" char{%d,%d} \"\\\"\" space", lo, hi);
    else sb_printf(&b, "\"\\\"\" char{%d,} \"\\\"\" space", lo);
    if (b.oom) return free(b.p), fail(c, LLC_ERR_NOMEM, path, "out of memory"), NULL;
    return add_rule(c, name, b.p);
}

/* The items after the first `from` (any number within lo..hi, hi -1: no limit)
 * appended to b: the first without a comma when from is 0. */
static void more_items(sbuf *b, const char *item, int from, int lo, int hi) {
    if (hi == 0) return;
    if (from == 0) { /* item ( "," item ){lo-1, hi-1}, optional when lo is 0 */
        sb_printf(b, " %s%s", lo == 0 ? "( " : "", item);
        if (hi < 0) sb_printf(b, " ( \",\" space %s ){%d,}", item, lo > 1 ? lo - 1 : 0);
        else if (hi > 1) sb_printf(b, " ( \",\" space %s ){%d,%d}", item, lo > 1 ? lo - 1 : 0, hi - 1);
        if (lo == 0) sb_str(b, " )?");
    } else if (hi < 0) {
        sb_printf(b, " ( \",\" space %s ){%d,}", item, lo);
    } else {
        sb_printf(b, " ( \",\" space %s ){%d,%d}", item, lo, hi);
    }
}

/* Arrays: `items` for every item, or a tuple — `prefixItems` (or draft 4's
 * array form of `items`) for the first ones, then `items` (`additionalItems`)
 * for any more, none when false, any value when absent. The tuple's members
 * are all written (as far as maxItems allows). */
static const char *array_rule(conv *c, const cJSON *s, const char *name, const char *path) {
    char sub[192], subpath[320];
    const cJSON *prefix = get(s, "prefixItems"), *items = get(s, "items"), *more = items;
    const char *more_kw = "items";
    if (cJSON_IsArray(items)) {
        if (prefix) return fail(c, LLC_ERR_FORMAT, path, "give 'prefixItems' or an array of 'items', not both"), NULL;
        prefix = items, more = get(s, "additionalItems"), more_kw = "additionalItems";
    } else if (has(s, "additionalItems")) {
        return fail(c, LLC_ERR_UNSUPPORTED, path, "'additionalItems' needs 'items' to be an array"), NULL;
    }
    if (prefix && !cJSON_IsArray(prefix)) return fail(c, LLC_ERR_FORMAT, path, "'prefixItems' must be an array"), NULL;
    int lo, hi, n = cJSON_GetArraySize(prefix);
    if (!count_range(c, s, "minItems", "maxItems", &lo, &hi, path)) return NULL;
    int written = hi >= 0 && hi < n ? hi : n; /* tuple members written */
    if (cJSON_IsFalse(more) && lo > n)
        return fail(c, LLC_ERR_FORMAT, path, "'minItems' asks for more items than the tuple allows"), NULL;
    primitive(c, "space");
    sbuf b = {0};
    sb_str(&b, "\"[\" space");
    int i = 0;
    for (const cJSON *it = prefix ? prefix->child : NULL; it && i < written; it = it->next, i++) {
        snprintf(sub, sizeof sub, "%s-%d", name, i);
        snprintf(subpath, sizeof subpath, "%s.%s[%d]", path, prefix == items ? "items" : "prefixItems", i);
        const char *r = visit(c, it, sub, subpath);
        if (!r) return free(b.p), NULL;
        sb_printf(&b, "%s %s", i ? " \",\" space" : "", r);
    }
    if (written == n && !cJSON_IsFalse(more)) {
        snprintf(sub, sizeof sub, "%s-item", name);
        snprintf(subpath, sizeof subpath, "%s.%s", path, more_kw);
        const char *item = more ? visit(c, more, sub, subpath) : primitive(c, "value");
        if (!item) return free(b.p), NULL;
        more_items(&b, item, n, lo > n ? lo - n : 0, hi < 0 ? -1 : hi - n);
    }
    sb_str(&b, " \"]\" space");
    if (b.oom) return free(b.p), fail(c, LLC_ERR_NOMEM, path, "out of memory"), NULL;
    return add_rule(c, name, b.p);
}

static bool is_required(const cJSON *req, const char *key) {
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
        if (cJSON_IsString(r) && !strcmp(r->valuestring, key)) return true;
    return false;
}

/* The members of an object whose properties kv[0..n) are all optional (in that
 * order) and additional ones (extra, or NULL) may follow them: at least one.
 * Two chains of rules, built from the back, keep the grammar linear in n:
 *   NAME-first-i ::= kv[i] NAME-rest-(i+1) | NAME-first-(i+1)   (nothing written yet)
 *   NAME-rest-i  ::= ( "," space kv[i] )? NAME-rest-(i+1)       (something written)
 * where NAME-rest-n is the additional members ( "," space extra )* or nothing.
 * Returns the name of NAME-first-0. */
static const char *optional_chain(conv *c, const char *name, const char **kv, int n, const char *extra) {
    char rn[200], more_extra[240] = "";
    if (extra) snprintf(more_extra, sizeof more_extra, " ( \",\" space %s )*", extra);
    const char *rest = NULL; /* the rule for NAME-rest-(i+1); NULL: more_extra */
    const char *first = NULL;
    if (extra) { /* only additional members */
        sbuf b = {0};
        sb_printf(&b, "%s%s", extra, more_extra);
        snprintf(rn, sizeof rn, "%.150s-first", name);
        if (!(first = add_rule(c, rn, sb_take(&b)))) return NULL;
    }
    for (int i = n - 1; i >= 0; i--) {
        sbuf b = {0};
        sb_printf(&b, "%s%s%s", kv[i], rest ? " " : "", rest ? rest : more_extra);
        if (first) sb_printf(&b, " | %s", first);
        snprintf(rn, sizeof rn, "%.150s-first%d", name, i);
        if (!(first = add_rule(c, rn, sb_take(&b)))) return NULL;
        if (i == 0) break; /* NAME-rest-0 is never needed */
        sbuf r = {0};
        sb_printf(&r, "( \",\" space %s )?%s%s", kv[i], rest ? " " : "", rest ? rest : more_extra);
        snprintf(rn, sizeof rn, "%.150s-rest%d", name, i);
        if (!(rest = add_rule(c, rn, sb_take(&r)))) return NULL;
    }
    return first;
}

/* The key of additional members: any string, or one valid against
 * `propertyNames` — a string schema (type string, pattern, format, lengths,
 * enum or const of strings). With declared properties too, only {type:
 * string}: their names are not checked against it. */
static const char *key_rule(conv *c, const cJSON *s, const char *name, const char *path, bool has_props) {
    const cJSON *pn = get(s, "propertyNames");
    if (!pn || cJSON_IsTrue(pn)) return primitive(c, "string");
    char subpath[320], sub[192];
    snprintf(subpath, sizeof subpath, "%s.propertyNames", path);
    if (!cJSON_IsObject(pn)) return fail(c, LLC_ERR_UNSUPPORTED, subpath, "must be a schema object"), NULL;
    static const char *const allowed[] = {"type", "pattern", "format", "minLength", "maxLength", "enum", "const",
                                          "title", "description", "$comment", "examples", "default"};
    bool only_type = true;
    for (const cJSON *k = pn->child; k; k = k->next) {
        bool ok = false;
        for (size_t i = 0; i < sizeof allowed / sizeof *allowed; i++) ok |= !strcmp(k->string, allowed[i]);
        if (!ok) return fail(c, LLC_ERR_UNSUPPORTED, subpath, "'%s' is not supported in 'propertyNames' (type, pattern, "
                                                             "format, minLength, maxLength, enum, const are)", k->string), NULL;
        only_type &= !strcmp(k->string, "type") || k->string[0] == '$' || !strcmp(k->string, "title") ||
                     !strcmp(k->string, "description");
    }
    const cJSON *t = get(pn, "type"), *e = get(pn, "enum"), *cn = get(pn, "const");
    if (t && !(cJSON_IsString(t) && !strcmp(t->valuestring, "string")))
        return fail(c, LLC_ERR_FORMAT, subpath, "'type' must be \"string\": property names are strings"), NULL;
    for (const cJSON *v = cJSON_IsArray(e) ? e->child : NULL; v; v = v->next)
        if (!cJSON_IsString(v)) return fail(c, LLC_ERR_FORMAT, subpath, "'enum' must list strings"), NULL;
    if (cn && !cJSON_IsString(cn)) return fail(c, LLC_ERR_FORMAT, subpath, "'const' must be a string"), NULL;
    if (only_type) return primitive(c, "string");
    if (has_props)
        return fail(c, LLC_ERR_UNSUPPORTED, subpath, "is supported only without 'properties' (or as {\"type\": \"string\"})"), NULL;
    snprintf(sub, sizeof sub, "%s-key", name);
    if (t || e || cn) return visit(c, pn, sub, subpath);
    cJSON *str = cJSON_Duplicate(pn, true); /* a string schema without its type */
    if (!str || !cJSON_AddStringToObject(str, "type", "string")) return cJSON_Delete(str), nomem(c), NULL;
    const char *r = visit(c, str, sub, subpath);
    cJSON_Delete(str);
    return r;
}

static const char *object_rule(conv *c, const cJSON *s, const char *name, const char *path) {
    const cJSON *props = get(s, "properties"), *req = get(s, "required"), *add = get(s, "additionalProperties");
    if (props && !cJSON_IsObject(props)) return fail(c, LLC_ERR_FORMAT, path, "'properties' must be an object"), NULL;
    if (req && !cJSON_IsArray(req)) return fail(c, LLC_ERR_FORMAT, path, "'required' must be an array"), NULL;
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
        if (!cJSON_IsString(r) || !get(props, r->valuestring))
            return fail(c, LLC_ERR_UNSUPPORTED, path, "required property '%s' is not in 'properties'",
                        cJSON_IsString(r) ? r->valuestring : "?"), NULL;
    primitive(c, "space");
    /* the key-value rule of each property, required ones first */
    int n = cJSON_GetArraySize(props), n_req = 0;
    const char **kv = calloc((size_t)(n > 0 ? n : 1), sizeof *kv);
    if (!kv) return fail(c, LLC_ERR_NOMEM, path, "out of memory"), NULL;
    int k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (const cJSON *p = props ? props->child : NULL; p; p = p->next) {
            if (is_required(req, p->string) != (pass == 0)) continue;
            char sub[192], subpath[320];
            name_part(sub, sizeof sub, name, p->string);
            snprintf(subpath, sizeof subpath, "%s.properties.%s", path, p->string);
            const char *val = visit(c, p, sub, subpath);
            if (!val) return free(kv), NULL;
            sbuf b = {0};
            cJSON *key = cJSON_CreateString(p->string);
            char *key_json = key ? cJSON_PrintUnformatted(key) : NULL;
            cJSON_Delete(key);
            if (!key_json) return free(kv), fail(c, LLC_ERR_NOMEM, path, "out of memory"), NULL;
            sb_literal(&b, key_json);
            free(key_json);
            sb_printf(&b, " space \":\" space %s", val);
            char kvname[200];
            snprintf(kvname, sizeof kvname, "%s-kv", sub);
            kv[k++] = add_rule(c, kvname, b.oom ? (free(b.p), NULL) : b.p);
            if (!kv[k - 1]) return free(kv), NULL;
            n_req += pass == 0;
        }
    /* additional properties: a key (propertyNames) and a value of the given
       schema; with neither properties nor additionalProperties, any */
    const char *extra = NULL;
    if (has(s, "propertyNames") && !key_rule(c, s, name, path, n > 0)) return free(kv), NULL; /* checked even unused */
    static const cJSON any_schema = {.type = cJSON_True};
    if (!add && !props) add = &any_schema;
    if (add && !cJSON_IsFalse(add)) {
        char sub[192], subpath[320];
        snprintf(sub, sizeof sub, "%s-additional", name);
        snprintf(subpath, sizeof subpath, "%s.additionalProperties", path);
        const char *val = cJSON_IsTrue(add) ? primitive(c, "value") : visit(c, add, sub, subpath);
        const char *key = val ? key_rule(c, s, name, path, n > 0) : NULL;
        if (!key) return free(kv), NULL;
        sbuf b = {0};
        sb_printf(&b, "%s \":\" space %s", key, val);
        char kvname[200];
        snprintf(kvname, sizeof kvname, "%s-kv", sub);
        extra = add_rule(c, kvname, b.oom ? (free(b.p), NULL) : b.p);
        if (!extra) return free(kv), NULL;
    }
    /* how many members: only where the count is fixed but for additional ones */
    int lo, hi;
    if (!count_range(c, s, "minProperties", "maxProperties", &lo, &hi, path)) return free(kv), NULL;
    int fixed_max = extra ? -1 : n; /* members at most (-1: no limit) */
    bool counted = lo > n_req || (hi >= 0 && (fixed_max < 0 || hi < fixed_max));
    if (counted && n > n_req)
        return free(kv), fail(c, LLC_ERR_UNSUPPORTED, path, "'minProperties'/'maxProperties' with optional properties "
                                                            "is not supported in structured output"), NULL;
    if (counted && (hi >= 0 && hi < n_req))
        return free(kv), fail(c, LLC_ERR_FORMAT, path, "'maxProperties' is less than the required properties"), NULL;
    if (counted && !extra)
        return free(kv), fail(c, LLC_ERR_FORMAT, path, "'minProperties' asks for more properties than the schema allows"), NULL;
    sbuf b = {0};
    sb_str(&b, "\"{\" space ");
    if (counted) { /* required ones, then a counted number of additional ones */
        for (int i = 0; i < n_req; i++) sb_printf(&b, "%s%s", i ? " \",\" space " : "", kv[i]);
        more_items(&b, extra, n_req, lo > n_req ? lo - n_req : 0, hi < 0 ? -1 : hi - n_req);
    } else if (n_req > 0) { /* required in order, then each optional one may follow */
        for (int i = 0; i < n_req; i++) sb_printf(&b, "%s%s", i ? " \",\" space " : "", kv[i]);
        for (int i = n_req; i < n; i++) sb_printf(&b, " ( \",\" space %s )?", kv[i]);
        if (extra) sb_printf(&b, " ( \",\" space %s )*", extra);
    } else if (n > 0 || extra) { /* all optional: whichever comes first, then the later ones */
        const char *first = optional_chain(c, name, kv, n, extra);
        if (!first) return free(kv), free(b.p), NULL;
        sb_printf(&b, "%s?", first);
    }
    sb_str(&b, " \"}\" space");
    free(kv);
    if (b.oom) return free(b.p), fail(c, LLC_ERR_NOMEM, path, "out of memory"), NULL;
    return add_rule(c, name, b.p);
}

/* Alternatives: each member of arr visited; the rule is their union. */
static const char *union_rule(conv *c, const cJSON *arr, const char *name, const char *path, const char *kw) {
    if (!cJSON_IsArray(arr) || !arr->child) return fail(c, LLC_ERR_FORMAT, path, "'%s' must be a non-empty array", kw), NULL;
    sbuf b = {0};
    int i = 0;
    for (const cJSON *it = arr->child; it; it = it->next, i++) {
        char sub[192], subpath[320];
        snprintf(sub, sizeof sub, "%s-%d", name, i);
        snprintf(subpath, sizeof subpath, "%s.%s[%d]", path, kw, i);
        const char *r = visit(c, it, sub, subpath);
        if (!r) return free(b.p), NULL;
        sb_printf(&b, "%s%s", i ? " | " : "", r);
    }
    if (b.oom) return free(b.p), fail(c, LLC_ERR_NOMEM, path, "out of memory"), NULL;
    return add_rule(c, name, b.p);
}

static const char *ref_rule(conv *c, const char *ref, const char *path) {
    for (int i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ref, ref)) return c->refs[i].rule_name;
    const char *key = NULL;
    const cJSON *defs = NULL;
    if (!strncmp(ref, "#/$defs/", 8)) key = ref + 8, defs = get(c->root, "$defs");
    else if (!strncmp(ref, "#/definitions/", 14)) key = ref + 14, defs = get(c->root, "definitions");
    else if (!strcmp(ref, "#")) key = "", defs = NULL;
    else return fail(c, LLC_ERR_UNSUPPORTED, path, "$ref '%s': only local references (#, #/$defs/..., #/definitions/...) are supported", ref), NULL;
    const cJSON *target = defs ? get(defs, key) : (*key ? NULL : c->root);
    if (!target) return fail(c, LLC_ERR_FORMAT, path, "$ref '%s' points at nothing", ref), NULL;
    /* name the rule before visiting, so recursive references find it */
    char name[192];
    name_part(name, sizeof name, "ref", *key ? key : "root");
    char uniq[220];
    snprintf(uniq, sizeof uniq, "%.180s", name);
    for (int k = 1; find_rule(c, uniq); k++) snprintf(uniq, sizeof uniq, "%.180s%d", name, k);
    if (c->n_refs == c->cap_refs) {
        int cap = c->cap_refs ? c->cap_refs * 2 : 8;
        ref_entry *r = realloc(c->refs, (size_t)cap * sizeof *r);
        if (!r) return fail(c, LLC_ERR_NOMEM, path, "out of memory"), NULL;
        c->refs = r;
        c->cap_refs = cap;
    }
    ref_entry *e = &c->refs[c->n_refs];
    e->ref = strdup(ref);
    e->rule_name = strdup(uniq);
    if (!e->ref || !e->rule_name) {
        free(e->ref), free(e->rule_name);
        return fail(c, LLC_ERR_NOMEM, path, "out of memory"), NULL;
    }
    c->n_refs++;
    char *own = e->rule_name;
    /* a placeholder rule with the name; its body is a reference to the target's rule */
    int slot = append_rule(c, own, NULL);
    if (slot < 0) return NULL;
    char sub[200];
    snprintf(sub, sizeof sub, "%s-def", own);
    const char *body = visit(c, target, sub, ref);
    if (!body) return NULL;
    char *copy = strdup(body);
    if (!copy) return nomem(c), NULL;
    if (!set_body(c, slot, copy)) return NULL;
    return c->rules[slot].name;
}

/* Keywords we cannot enforce. */
static const char *const unsupported[] = {
    "patternProperties", "multipleOf", "uniqueItems", "not", "if", "then", "else",
    "dependentRequired", "dependentSchemas", "dependencies", "contains",
    "minContains", "maxContains", "unevaluatedProperties", "unevaluatedItems",
    "$dynamicRef", "$recursiveRef",
};

static const char *visit_inner(conv *c, const cJSON *s, const char *name, const char *path) {
    if (cJSON_IsTrue(s)) return primitive(c, "value");
    if (cJSON_IsFalse(s)) return fail(c, LLC_ERR_UNSUPPORTED, path, "the schema 'false' allows nothing"), NULL;
    if (!cJSON_IsObject(s)) return fail(c, LLC_ERR_FORMAT, path, "a schema must be an object or a boolean"), NULL;
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++) {
        const cJSON *v = get(s, unsupported[i]);
        if (v && !(cJSON_IsFalse(v) && !strcmp(unsupported[i], "uniqueItems")))
            return fail(c, LLC_ERR_UNSUPPORTED, path, "'%s' is not supported in structured output", unsupported[i]), NULL;
    }
    const cJSON *v;
    if ((v = get(s, "$ref"))) {
        if (!cJSON_IsString(v)) return fail(c, LLC_ERR_FORMAT, path, "'$ref' must be a string"), NULL;
        return ref_rule(c, v->valuestring, path);
    }
    if ((v = get(s, "const"))) {
        sbuf b = {0};
        sb_json_literal(c, &b, v);
        if (b.oom) return free(b.p), fail(c, LLC_ERR_NOMEM, path, "out of memory"), NULL;
        return add_rule(c, name, b.p);
    }
    if ((v = get(s, "enum"))) {
        if (!cJSON_IsArray(v) || !v->child) return fail(c, LLC_ERR_FORMAT, path, "'enum' must be a non-empty array"), NULL;
        sbuf b = {0};
        sb_str(&b, "(");
        for (const cJSON *it = v->child; it; it = it->next) {
            if (it != v->child) sb_str(&b, " |");
            char *text = cJSON_PrintUnformatted(it);
            if (!text) b.oom = true;
            else {
                sb_str(&b, " ");
                sb_literal(&b, text);
                free(text);
            }
        }
        sb_str(&b, " ) space");
        primitive(c, "space");
        if (b.oom) return free(b.p), fail(c, LLC_ERR_NOMEM, path, "out of memory"), NULL;
        return add_rule(c, name, b.p);
    }
    if ((v = get(s, "anyOf"))) return union_rule(c, v, name, path, "anyOf");
    if ((v = get(s, "oneOf"))) return union_rule(c, v, name, path, "oneOf");
    if ((v = get(s, "allOf"))) {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 1)
            return fail(c, LLC_ERR_UNSUPPORTED, path, "'allOf' is supported with one schema only"), NULL;
        char subpath[320];
        snprintf(subpath, sizeof subpath, "%s.allOf[0]", path);
        return visit(c, v->child, name, subpath);
    }
    const cJSON *type = get(s, "type");
    if (cJSON_IsArray(type)) { /* several types: one rule each */
        sbuf b = {0};
        int i = 0;
        for (const cJSON *t = type->child; t; t = t->next, i++) {
            if (!cJSON_IsString(t)) return free(b.p), fail(c, LLC_ERR_FORMAT, path, "'type' entries must be strings"), NULL;
            cJSON *one = cJSON_Duplicate(s, true);
            if (!one) return free(b.p), fail(c, LLC_ERR_NOMEM, path, "out of memory"), NULL;
            cJSON_ReplaceItemInObjectCaseSensitive(one, "type", cJSON_CreateString(t->valuestring));
            char sub[192];
            snprintf(sub, sizeof sub, "%s-%s", name, t->valuestring);
            const char *r = visit(c, one, sub, path);
            cJSON_Delete(one);
            if (!r) return free(b.p), NULL;
            sb_printf(&b, "%s%s", i ? " | " : "", r);
        }
        if (i == 0) return free(b.p), fail(c, LLC_ERR_FORMAT, path, "'type' is an empty array"), NULL;
        if (b.oom) return free(b.p), fail(c, LLC_ERR_NOMEM, path, "out of memory"), NULL;
        return add_rule(c, name, b.p);
    }
    if (type && !cJSON_IsString(type)) return fail(c, LLC_ERR_FORMAT, path, "'type' must be a string or an array"), NULL;
    const char *t = type ? type->valuestring : NULL;
    if (!t) { /* no type: guess from the keywords, as validators accept anything */
        if (has(s, "properties") || has(s, "additionalProperties") || has(s, "required") || has(s, "propertyNames") ||
            has(s, "minProperties") || has(s, "maxProperties"))
            t = "object";
        else if (has(s, "items") || has(s, "prefixItems") || has(s, "minItems") || has(s, "maxItems")) t = "array";
        else if (has(s, "pattern") || has(s, "format") || has(s, "minLength") || has(s, "maxLength")) t = "string";
        else return primitive(c, "value");
    }
    if (!strcmp(t, "object")) {
        if (!has(s, "properties") && !has(s, "additionalProperties") && !has(s, "propertyNames") &&
            !has(s, "minProperties") && !has(s, "maxProperties"))
            return primitive(c, "object");
        return object_rule(c, s, name, path);
    }
    if (!strcmp(t, "array")) return array_rule(c, s, name, path);
    if (!strcmp(t, "string")) return string_rule(c, s, name, path);
    if (!strcmp(t, "integer")) return number_rule(c, s, name, path, true);
    if (!strcmp(t, "number")) return number_rule(c, s, name, path, false);
    if (!strcmp(t, "boolean")) return primitive(c, "boolean");
    if (!strcmp(t, "null")) return primitive(c, "null");
    return fail(c, LLC_ERR_FORMAT, path, "unknown type '%s'", t), NULL;
}

static const char *visit(conv *c, const cJSON *s, const char *name, const char *path) {
    if (c->rc) return NULL;
    if (++c->depth > JS_MAX_DEPTH) {
        c->depth--;
        return fail(c, LLC_ERR_UNSUPPORTED, path, "the schema nests deeper than %d levels", JS_MAX_DEPTH), NULL;
    }
    const char *r = visit_inner(c, s, name, path);
    c->depth--;
    return c->rc ? NULL : r;
}

int json_schema_to_gbnf(const cJSON *schema, char **out, llc_err *err) {
    *out = NULL;
    conv c = {.root = schema, .err = err};
    const char *top = visit(&c, schema, "root-value", "schema");
    sbuf b = {0};
    if (top) {
        /* the top rule without the whitespace its value may end with: the
           document ends where the value does */
        rule *t = find_rule(&c, top);
        size_t tl = t && t->body ? strlen(t->body) : 0;
        if (t && !strcmp(top, "root-value") && tl > 6 && !strcmp(t->body + tl - 6, " space")) {
            sb_str(&b, "root ::= ");
            sb_add(&b, t->body, tl - 6);
            sb_str(&b, "\n");
        } else {
            sb_printf(&b, "root ::= %s\n", top);
        }
        for (int i = 0; i < c.n_rules; i++) {
            if (!c.rules[i].body) continue;
            sb_str(&b, c.rules[i].name);
            sb_str(&b, " ::= ");
            sb_str(&b, c.rules[i].body);
            sb_str(&b, "\n");
        }
        if (b.oom && !c.rc) c.rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < c.n_rules; i++) free(c.rules[i].name), free(c.rules[i].body);
    free(c.rules);
    str_index_free(&c.by_name);
    str_index_free(&c.by_body);
    for (int i = 0; i < c.n_refs; i++) free(c.refs[i].ref), free(c.refs[i].rule_name);
    free(c.refs);
    if (c.rc) {
        free(b.p);
        return c.rc;
    }
    *out = b.p;
    return 0;
}

int json_schema_text_to_gbnf(const char *text, char **out, llc_err *err) {
    *out = NULL;
    cJSON *j = cJSON_Parse(text);
    if (!j) return llc_fail(err, LLC_ERR_FORMAT, "the JSON schema is not valid JSON");
    int rc = json_schema_to_gbnf(j, out, err);
    cJSON_Delete(j);
    return rc;
}

const char *json_object_gbnf(void) {
    return "root ::= \"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\"\n"
           "object ::= \"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space\n"
           "array ::= \"[\" space ( value (\",\" space value)* )? \"]\" space\n"
           "value ::= object | array | string | number | boolean | null\n"
           "string ::= \"\\\"\" char* \"\\\"\" space\n"
           "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" hex4)\n"
           "hex4 ::= [0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}\n"
           "number ::= (\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space\n"
           "integral-part ::= [0] | [1-9] [0-9]{0,15}\n"
           "decimal-part ::= [0-9]{1,16}\n"
           "boolean ::= (\"true\" | \"false\") space\n"
           "null ::= \"null\" space\n"
           "space ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";
}
