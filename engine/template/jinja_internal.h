/* jinja_internal.h — what the Jinja modules share: the memory arena, the
 * syntax tree (built by jinja_parse.c, read by jinja_eval.c) and the runtime
 * values (jinja_value.c). Not for use outside engine/jinja*. */
#ifndef LLC_JINJA_INTERNAL_H
#define LLC_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stdint.h>

#include "engine/template/jinja.h"

/* ---- arena: many small allocations freed together ---- */

typedef struct jarena_chunk jarena_chunk;
typedef struct jarena {
    jarena_chunk *head;
    size_t used;  /* bytes handed out in all chunks */
    size_t limit; /* 0 = none; beyond it jarena_alloc returns NULL */
} jarena;

void *jarena_alloc(jarena *a, size_t n); /* zeroed; NULL on failure */
void jarena_free(jarena *a);

/* ---- syntax tree ---- */

enum jnode_kind {
    /* expressions */
    JN_LIT, JN_NAME, JN_ATTR, JN_INDEX, JN_SLICE, JN_CALL, JN_FILTER, JN_TEST,
    JN_NOT, JN_NEG, JN_POS, JN_BIN, JN_AND, JN_OR, JN_COND, JN_LIST, JN_TUPLE, JN_DICT,
    /* statements */
    JN_TEXT, JN_OUT, JN_IF, JN_FOR, JN_SET, JN_SETBLOCK, JN_MACRO, JN_CALLBLOCK,
    JN_FILTERBLOCK, JN_BLOCK, JN_BREAK, JN_CONTINUE,
};

enum jbin_op {
    JOP_ADD, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW, JOP_CONCAT,
    JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOTIN,
};

typedef struct jstr {
    size_t n;
    char p[]; /* NUL-terminated */
} jstr;

typedef struct jnode jnode;
typedef struct jnodes {
    jnode **v;
    int n;
} jnodes;

struct jnode {
    int kind;
    int op;          /* JN_BIN: jbin_op; JN_TEST: 1 = negated */
    int line;
    jnode *a, *b, *c; /* children: operands, condition, target ... */
    jnodes list;     /* args, items, body */
    jnodes list2;    /* kwarg values, dict values, else body, macro defaults */
    const jstr **names; /* kwarg names, for/set targets, macro params */
    int n_names;
    const jstr *name; /* identifier, attribute, filter/test/macro name */
    /* JN_LIT */
    int lit_type;     /* a jv type */
    int64_t lit_i;
    double lit_f;
    const jstr *lit_s;
};

struct jinja_tpl {
    jarena arena;
    jnodes body;
};

/* ---- values ---- */

enum jv_type {
    JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT,
    JV_MACRO, JV_FUNC, JV_LOOP,
};

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jmacro jmacro;
typedef struct jfunc jfunc;
typedef struct jloop jloop;

typedef struct jv {
    int t;
    union {
        bool b;
        int64_t i;
        double f;
        const jstr *s;
        jlist *l;
        jdict *d;
        jmacro *m;
        jfunc *fn;
        jloop *loop;
    } u;
} jv;

struct jlist {
    jv *v;
    int n, cap;
    bool tuple;
};

struct jdict {
    const jstr **k; /* every key as a string: lookups go by it */
    jv *v;
    jv *kt; /* the key itself where it is not a string ({0: 'a'}), else JV_UNDEF; NULL when none is */
    int n, cap;
    bool ns; /* a namespace() object: attributes may be set */
    const jstr *text; /* the JSON text it was parsed from, printed by str(); or NULL */
};

struct jloop {
    const jlist *items;
    int index0;
    int depth0;
};

#define JV_UNDEF_V ((jv){.t = JV_UNDEF})
#define JV_NONE_V ((jv){.t = JV_NONE})

/* The render state every value operation can fail through (longjmp to the top). */
typedef struct jctx jctx;

_Noreturn void jx_fail(jctx *x, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void *jx_alloc(jctx *x, size_t n);

const jstr *js_new(jctx *x, const char *s, size_t n);
const jstr *js_cstr(jctx *x, const char *s);
jv jv_str(const jstr *s);
jv jv_strn(jctx *x, const char *s, size_t n);
jv jv_int(int64_t i);
jv jv_float(double f);
jv jv_bool(bool b);
jlist *jl_new(jctx *x, int cap);
void jl_push(jctx *x, jlist *l, jv v);
jdict *jd_new(jctx *x);
jv *jd_get(const jdict *d, const char *k, size_t n);
void jd_set(jctx *x, jdict *d, const jstr *k, jv v);
/* d[key] = v for a key of any type: looked up by str(key), listed as key. */
void jd_set_key(jctx *x, jdict *d, jv key, jv v);
/* The i-th key as the template wrote it (an int key stays an int). */
jv jd_key(const jdict *d, int i);
jv jv_from_json(jctx *x, const cJSON *j);
bool jv_truthy(jv v);
bool jv_equal(jv a, jv b);
const char *jv_type_name(jv v);

/* growable byte buffer in the arena's owner's heap (malloc) */
typedef struct jbuf {
    char *p;
    size_t n, cap;
} jbuf;
void jb_put(jctx *x, jbuf *b, const char *s, size_t n);
void jb_puts(jctx *x, jbuf *b, const char *s);
void jb_putc(jctx *x, jbuf *b, char c);
void jb_printf(jctx *x, jbuf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Appends str(v) (Jinja's output of a value: None, True, Python reprs of
 * lists and dicts). */
void jv_to_str(jctx *x, jbuf *b, jv v);
void jv_repr(jctx *x, jbuf *b, jv v);
/* JSON as Python's json.dumps(v, ensure_ascii=False, indent, sort_keys). indent < 0: none. */
void jv_to_json(jctx *x, jbuf *b, jv v, int indent, bool sort_keys, const char *item_sep,
                const char *key_sep);
/* str(v) as a new string value (strings are returned as they are). */
const jstr *jv_as_jstr(jctx *x, jv v);
void jfloat_repr(char *buf, size_t cap, double f);

#endif
