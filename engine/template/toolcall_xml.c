/* toolcall_xml.c — reading XML-style tool calls out of a streamed answer
 * (see toolcall_xml.h). The five formats differ only in their markers, so one
 * state machine reads them all from a table (xml_spec):
 *
 *   QWEN3_CODER  <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n
 *                ... </function>\n</tool_call>   (one newline around a value is markup)
 *   GLM          <tool_call>NAME\n<arg_key>KEY</arg_key>\n<arg_value>VALUE</arg_value>\n
 *                ... </tool_call>
 *   MINIMAX      <minimax:tool_call>\n<invoke name="NAME">\n<parameter name="KEY">VALUE
 *                </parameter>\n ... </invoke>\n<invoke ...>...</invoke>\n</minimax:tool_call>
 *   MINIMAX_M3   NS<tool_call>\nNS<invoke name="NAME">NS<KEY>VALUENS</KEY>...NS</invoke>\n
 *                NS</tool_call>   (NS the token string ]<]minimax[>[; a value that is an
 *                object or array is nested NS<k>..NS</k> / NS<item>..NS</item> markup)
 *   KIMI_K3      <|open|>tools<|sep|><|open|>call tool="NAME" index="1"<|sep|>
 *                <|open|>argument key="KEY" type="string"<|sep|>VALUE<|close|>argument<|sep|>
 *                ... <|close|>call<|sep|><|close|>tools<|sep|>   (the attributes after a
 *                name or key are skipped up to <|sep|>; type="string" types a value), or
 *                the arguments as one object: <|open|>json type="object"<|sep|>{...}
 *                <|close|>json<|sep|> (what its template writes for arguments given as a
 *                JSON string, as OpenAI clients send them)
 *   HUNYUAN      <tool_calls:opensource>\n<tool_call:opensource>NAME<tool_sep:opensource>\n
 *                <arg_key:opensource>KEY</arg_key:opensource>\n<arg_value:opensource>VALUE
 *                </arg_value:opensource>\n ... </tool_call:opensource>\n</tool_calls:opensource>
 *
 * Values are raw text. The arguments handed on are a JSON object built from
 * the pairs, {"KEY": VALUE, ...}: a value whose parameter the tool's schema
 * types "string" is a JSON string (streamed as it comes); any other value (or
 * one with no schema) is parsed as JSON once complete, and is a string when it
 * is not JSON. As in toolcall.c, the reader keeps the whole answer and a
 * position up to which it has decided; a marker cut by a piece boundary waits
 * for the next piece, so where the answer is cut never changes what is read. */
#include "engine/template/toolcall_xml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/sbuf.h"

typedef toolcall_xml_markup xml_spec;

static const xml_spec QWEN3_CODER = {"<tool_call>", "</tool_call>", "<function=", ">", "</function>",
                                     "<parameter=", ">", NULL, "</parameter>", true, NULL, NULL, NULL, NULL};
static const xml_spec GLM = {"<tool_call>", "</tool_call>", NULL, NULL, NULL,
                             "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", false, NULL, NULL, NULL, NULL};
static const xml_spec MINIMAX = {"<minimax:tool_call>", "</minimax:tool_call>", "<invoke name=\"", "\">",
                                 "</invoke>", "<parameter name=\"", "\">", NULL, "</parameter>", false, NULL, NULL, NULL, NULL};
#define K3_SEP "<|sep|>"
static const xml_spec KIMI_K3 = {"<|open|>tools" K3_SEP, "<|close|>tools" K3_SEP, "<|open|>call tool=\"", "\"",
                                 "<|close|>call" K3_SEP, "<|open|>argument key=\"", "\"", K3_SEP,
                                 "<|close|>argument" K3_SEP, false, NULL, K3_SEP, "<|open|>json", "<|close|>json" K3_SEP};
#define HY ":opensource" /* tencent Hy3: every tag ends with its model's suffix */
static const xml_spec HUNYUAN = {"<tool_calls" HY ">", "</tool_calls" HY ">", "<tool_call" HY ">", "<tool_sep" HY ">",
                                 "</tool_call" HY ">", "<arg_key" HY ">", "</arg_key" HY ">", "<arg_value" HY ">",
                                 "</arg_value" HY ">", false, NULL, NULL, NULL, NULL};
#define M3_NS "]<]minimax[>["
static const xml_spec MINIMAX_M3 = {M3_NS "<tool_call>", M3_NS "</tool_call>", M3_NS "<invoke name=\"", "\">",
                                    M3_NS "</invoke>", M3_NS "<", ">", NULL, NULL, false, M3_NS, NULL, NULL, NULL};

enum { NAME_MAX_LEN = 128, NEST_MAX = 32, ATTRS_MAX_LEN = 256 };

typedef enum xstate {
    X_TEXT,  /* outside calls */
    X_BLOCK, /* inside the block, before a call (call_open) or the block's end */
    X_NAME,  /* a call's name */
    X_ATTRS, /* attrs_end formats: a call's attributes after its name */
    X_PAIRS, /* inside a call: the next key, or the call's end */
    X_KEY,   /* a key */
    X_VOPEN, /* after a key: value_open */
    X_VALUE, /* a value, up to value_close */
    X_JATTRS, /* json_open formats: the JSON block's attributes */
    X_JSON,  /* the JSON block's object, up to json_close */
    X_AFTER, /* whitespace after a block */
} xstate;

struct xml_reader {
    const xml_spec *sp;
    cJSON *tools;
    toolcall_sink sink;
    sbuf buf;
    size_t pos; /* decided up to here */
    xstate st;
    bool oom;
    int n_calls;        /* calls in the whole answer */
    int block_calls;    /* calls in the current block */
    size_t ws_from;     /* the whitespace before the block began here (given back if it is no call) */
    size_t mark_end;    /* just past the block's opening */
    bool in_call;       /* a call was announced and its object is open */
    int n_pairs;        /* pairs of the current call */
    const cJSON *props; /* the current tool's parameters' properties, or NULL */
    bool raw;           /* the current value is a string: streamed */
    bool lead_done;     /* trim_nl: the value's leading newline was looked at */
    size_t vstart, vsent, vscan; /* the value's start, sent up to, no close marker before */
    size_t json_at;     /* where the call's JSON block opened */
    char *key;
    char *vclose, *vopen;   /* ns formats: the key's closing and opening tags */
};

const toolcall_xml_markup *toolcall_xml_markup_of(toolcall_format f) {
    switch (f) {
    case TOOLCALL_QWEN3_CODER: return &QWEN3_CODER;
    case TOOLCALL_GLM: return &GLM;
    case TOOLCALL_MINIMAX: return &MINIMAX;
    case TOOLCALL_MINIMAX_M3: return &MINIMAX_M3;
    case TOOLCALL_HUNYUAN: return &HUNYUAN;
    case TOOLCALL_KIMI_K3: return &KIMI_K3;
    default: return NULL;
    }
}

bool toolcall_xml_format(toolcall_format f) { return toolcall_xml_markup_of(f) != NULL; }

int xml_reader_create(toolcall_format f, const cJSON *tools, const toolcall_sink *sink, xml_reader **out) {
    *out = NULL;
    xml_reader *r = calloc(1, sizeof *r);
    if (!r) return LLC_ERR_NOMEM;
    r->sp = toolcall_xml_markup_of(f);
    if (!r->sp) r->sp = &QWEN3_CODER;
    if (sink) r->sink = *sink;
    if (tools && !(r->tools = cJSON_Duplicate(tools, true))) {
        free(r);
        return LLC_ERR_NOMEM;
    }
    *out = r;
    return 0;
}

void xml_reader_free(xml_reader *r) {
    if (!r) return;
    cJSON_Delete(r->tools);
    free(r->key);
    free(r->vclose);
    free(r->vopen);
    free(r->buf.p);
    free(r);
}

/* ---- text helpers ---- */

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static size_t skip_ws(const char *s, size_t i, size_t n) {
    while (i < n && is_ws(s[i])) i++;
    return i;
}

enum { M_NO = -1, M_MORE = 0, M_YES = 1 };

/* Whether s[i..n) starts with m: M_YES, M_MORE (a proper prefix of m: more
 * text decides), M_NO. A NULL m never matches. */
static int match(const char *s, size_t i, size_t n, const char *m) {
    if (!m) return M_NO;
    size_t ml = strlen(m), have = n - i;
    if (have >= ml) return memcmp(s + i, m, ml) == 0 ? M_YES : M_NO;
    return memcmp(s + i, m, have) == 0 ? M_MORE : M_NO;
}

/* The longest suffix of s[from..n) that is a proper prefix of m. */
static size_t partial_suffix(const char *s, size_t from, size_t n, const char *m) {
    for (size_t k = strlen(m) - 1; k > 0; k--)
        if (n - from >= k && memcmp(s + n - k, m, k) == 0) return k;
    return 0;
}

/* s as the inside of a JSON string literal. */
static void json_escape(sbuf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            sb_putc(b, '\\');
            sb_putc(b, (char)c);
        } else if (c == '\n') {
            sb_str(b, "\\n");
        } else if (c == '\t') {
            sb_str(b, "\\t");
        } else if (c == '\r') {
            sb_str(b, "\\r");
        } else if (c < 0x20) {
            char esc[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
            sb_str(b, esc);
        } else {
            sb_putc(b, (char)c);
        }
    }
}

/* ---- output ---- */

static void out_content(xml_reader *r, size_t from, size_t to) {
    if (to > from && r->sink.content) r->sink.content(r->sink.ud, r->buf.p + from, to - from);
}

static void out_args(xml_reader *r, const char *s, size_t n) {
    if (n && r->sink.args) r->sink.args(r->sink.ud, r->n_calls - 1, s, n);
}

static void out_escaped(xml_reader *r, const char *s, size_t n) {
    sbuf e = {0};
    json_escape(&e, s, n);
    if (e.oom) r->oom = true;
    else out_args(r, e.p, e.len);
    sb_free(&e);
}

/* The schema of the named tool's parameters' properties, or NULL. */
static const cJSON *tool_props(const cJSON *tools, const char *name) {
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const char *n = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "name"));
        if (n && strcmp(n, name) == 0)
            return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(fn, "parameters"),
                                                    "properties");
    }
    return NULL;
}

bool toolcall_xml_is_string(const cJSON *prop) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(prop, "type");
    if (cJSON_IsString(type)) return strcmp(type->valuestring, "string") == 0;
    bool str = false;
    const cJSON *t;
    cJSON_ArrayForEach(t, type) {
        const char *v = cJSON_GetStringValue(t);
        if (!v || (strcmp(v, "string") && strcmp(v, "null"))) return false;
        str = str || !strcmp(v, "string");
    }
    return str;
}

/* Kimi K3 writes names and keys as attribute values: its escapes are read back
 * (every '&' in a name is written &amp;, so no other text reads as one). */
static void unescape_attr(char *s) {
    static const struct { const char *ent; char c; } ents[] = {
        {"&quot;", '"'}, {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&apos;", '\''}};
    char *w = s;
    for (const char *p = s; *p;) {
        size_t k = 0;
        while (k < sizeof ents / sizeof ents[0] && strncmp(p, ents[k].ent, strlen(ents[k].ent))) k++;
        if (k < sizeof ents / sizeof ents[0]) *w++ = ents[k].c, p += strlen(ents[k].ent);
        else *w++ = *p++;
    }
    *w = 0;
}

/* The name or key buf[from..to), as written (attribute escapes read back). */
static char *word_at(xml_reader *r, size_t from, size_t to) {
    char *w = strndup(r->buf.p + from, to - from);
    if (!w) r->oom = true;
    else if (r->sp->attrs_end) unescape_attr(w);
    return w;
}

static bool begin_call(xml_reader *r, size_t from, size_t to) {
    char *name = word_at(r, from, to);
    if (!name) return false;
    r->n_calls++;
    r->block_calls++;
    if (r->sink.call) r->sink.call(r->sink.ud, r->n_calls - 1, name);
    r->props = tool_props(r->tools, name);
    free(name);
    r->in_call = true;
    r->n_pairs = 0;
    out_args(r, "{", 1);
    return true;
}

static void end_call(xml_reader *r) {
    if (r->in_call) out_args(r, "}", 1);
    r->in_call = false;
}

/* A key is read: its value comes next (after value_open, if the format has it). */
static bool begin_key(xml_reader *r, size_t from, size_t to) {
    free(r->key);
    if (!(r->key = word_at(r, from, to))) return false;
    r->raw = toolcall_xml_is_string(cJSON_GetObjectItemCaseSensitive(r->props, r->key));
    if (r->sp->ns) {
        free(r->vclose);
        free(r->vopen);
        r->vclose = r->vopen = NULL;
        if (asprintf(&r->vclose, "%s</%s>", r->sp->ns, r->key) < 0) r->vclose = NULL;
        if (asprintf(&r->vopen, "%s<%s>", r->sp->ns, r->key) < 0) r->vopen = NULL;
        if (!r->vclose || !r->vopen) {
            r->oom = true;
            return false;
        }
    }
    return true;
}

/* ---- MiniMax-M3's nested values ---- */

/* Whether a schema says its value is of JSON type t. */
static bool schema_is(const cJSON *schema, const char *t) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(schema, "type");
    return cJSON_IsString(type) && strcmp(type->valuestring, t) == 0;
}

/* A scalar written as raw text: a string when its schema says so, else JSON,
 * else a string. */
static cJSON *scalar_value(const char *s, size_t n, const cJSON *schema) {
    if (!toolcall_xml_is_string(schema)) {
        cJSON *v = cJSON_ParseWithLength(s, n);
        if (v) return v;
        if (n == 0 && schema_is(schema, "array")) return cJSON_CreateArray();
        if (n == 0 && schema_is(schema, "object")) return cJSON_CreateObject();
    }
    char *t = strndup(s, n);
    cJSON *v = t ? cJSON_CreateString(t) : NULL;
    free(t);
    return v;
}

/* Where the element whose content starts at s[i] ends: the position of its
 * closing tag `close` (nested elements of the same name counted), or n. */
static size_t element_end(const char *s, size_t i, size_t n, const char *open, const char *close) {
    const size_t ol = strlen(open), cl = strlen(close);
    int depth = 0;
    for (size_t k = i; k + cl <= n; k++) {
        if (k + ol <= n && memcmp(s + k, open, ol) == 0) depth++, k += ol - 1;
        else if (memcmp(s + k, close, cl) == 0 && depth-- == 0) return k;
    }
    return n;
}

/* A value in ns markup as JSON: text without tags is a scalar; a run of
 * NS<item>..NS</item> an array; of NS<k>..NS</k> an object. NULL: not that markup
 * (or out of memory). */
static cJSON *ns_value(const char *ns, const char *s, size_t n, const cJSON *schema, int depth) {
    const size_t nl = strlen(ns);
    if (!memmem(s, n, ns, nl)) return scalar_value(s, n, schema);
    if (depth > NEST_MAX) return NULL;
    cJSON *obj = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    bool items = true, keys = false, ok = obj && arr;
    size_t i = skip_ws(s, 0, n);
    while (ok && i < n) {
        size_t k = i + nl + 1, e = k; /* NS<name> */
        ok = n - i > nl + 1 && memcmp(s + i, ns, nl) == 0 && s[i + nl] == '<';
        while (ok && e < n && s[e] != '>' && s[e] != '<' && s[e] != '/' && e - k <= NAME_MAX_LEN) e++;
        ok = ok && e < n && s[e] == '>' && e > k;
        char *name = ok ? strndup(s + k, e - k) : NULL, *open = NULL, *close = NULL;
        ok = name && asprintf(&open, "%s<%s>", ns, name) >= 0 && asprintf(&close, "%s</%s>", ns, name) >= 0;
        size_t end = ok ? element_end(s, e + 1, n, open, close) : n;
        ok = ok && end < n;
        if (ok) {
            const bool item = !strcmp(name, "item");
            const cJSON *sub = item ? cJSON_GetObjectItemCaseSensitive(schema, "items")
                                    : cJSON_GetObjectItemCaseSensitive(
                                          cJSON_GetObjectItemCaseSensitive(schema, "properties"), name);
            cJSON *v = ns_value(ns, s + e + 1, end - e - 1, sub, depth + 1);
            cJSON *v2 = v ? cJSON_Duplicate(v, true) : NULL;
            ok = v && v2;
            if (ok) {
                cJSON_AddItemToArray(arr, v);
                cJSON_DeleteItemFromObjectCaseSensitive(obj, name);
                cJSON_AddItemToObject(obj, name, v2);
            } else {
                cJSON_Delete(v);
                cJSON_Delete(v2);
            }
            items = items && item;
            keys = true;
            i = skip_ws(s, end + strlen(close), n);
        }
        free(name);
        free(open);
        free(close);
    }
    if (!ok || !keys) {
        cJSON_Delete(obj);
        cJSON_Delete(arr);
        return NULL;
    }
    const bool as_array = items && !schema_is(schema, "object");
    cJSON_Delete(as_array ? obj : arr);
    return as_array ? arr : obj;
}

/* The value begins at `at`: its key goes out (and a string's opening quote). */
static void begin_value(xml_reader *r, size_t at) {
    sbuf k = {0};
    if (r->n_pairs++) sb_str(&k, ", ");
    sb_putc(&k, '"');
    json_escape(&k, r->key, strlen(r->key));
    sb_str(&k, r->raw ? "\": \"" : "\": ");
    if (k.oom) r->oom = true;
    else out_args(r, k.p, k.len);
    sb_free(&k);
    r->vstart = r->vsent = r->vscan = at;
    r->lead_done = !r->sp->trim_nl;
    r->st = X_VALUE;
}

/* The value is buf[vstart..end): the rest of a string, or the whole typed value. */
static void end_value(xml_reader *r, size_t end) {
    const char *s = r->buf.p;
    if (r->sp->trim_nl && end > r->vstart && s[end - 1] == '\n') end--;
    if (r->raw) {
        if (end > r->vsent) out_escaped(r, s + r->vsent, end - r->vsent);
        out_args(r, "\"", 1);
        return;
    }
    char *text = strndup(s + r->vstart, end - r->vstart);
    cJSON *v = !text          ? NULL
               : r->sp->ns    ? ns_value(r->sp->ns, text, strlen(text),
                                         cJSON_GetObjectItemCaseSensitive(r->props, r->key), 0)
                              : cJSON_ParseWithOpts(text, NULL, true);
    if (cJSON_IsString(v)) { /* (ns_value: not JSON) a string, below */
        cJSON_Delete(v);
        v = NULL;
    }
    char *json = v ? cJSON_PrintUnformatted(v) : NULL;
    if (!text || (v && !json)) {
        r->oom = true;
    } else if (json) {
        out_args(r, json, strlen(json));
    } else { /* not JSON: the text as a string */
        out_args(r, "\"", 1);
        out_escaped(r, text, strlen(text));
        out_args(r, "\"", 1);
    }
    free(json);
    cJSON_Delete(v);
    free(text);
}

/* ---- the states ---- */

/* The markup was not a call: the block's opening (and the whitespace before
 * it) is content, reading goes on after it. */
static bool not_a_call(xml_reader *r) {
    out_content(r, r->ws_from, r->mark_end);
    r->pos = r->mark_end;
    r->st = X_TEXT;
    return true;
}

/* Something unexpected at i: before the block's first call, the block is
 * text; after it, the calls stand and the rest is text. */
static bool malformed(xml_reader *r, size_t i) {
    if (r->block_calls == 0) return not_a_call(r);
    end_call(r);
    r->pos = i;
    r->st = X_TEXT;
    return true;
}

/* The answer ended inside a call: it keeps what it had. */
static bool cut_off(xml_reader *r) {
    if (r->block_calls == 0) return not_a_call(r);
    end_call(r);
    r->pos = r->buf.len;
    r->st = X_TEXT;
    return true;
}

static bool step_text(xml_reader *r, bool at_end) {
    const char *s = r->buf.p, *m = r->sp->open;
    size_t n = r->buf.len, ml = strlen(m);
    const char *hit = n > r->pos ? memmem(s + r->pos, n - r->pos, m, ml) : NULL;
    if (hit) {
        size_t k = (size_t)(hit - s), e = k;
        while (e > r->pos && is_ws(s[e - 1])) e--;
        out_content(r, r->pos, e);
        r->ws_from = e;
        r->pos = r->mark_end = k + ml;
        r->block_calls = 0;
        r->st = X_BLOCK;
        return true;
    }
    size_t e = n;
    if (!at_end) e -= partial_suffix(s, r->pos, n, m);
    if (!at_end || r->n_calls > 0)
        while (e > r->pos && is_ws(s[e - 1])) e--;
    out_content(r, r->pos, e);
    r->pos = e;
    return false;
}

/* Reads a name or key from r->pos up to `end` (NULL: whitespace or '<'):
 * M_YES with *to (its end) and *next (past `end`), M_MORE, or M_NO. */
static int read_word(xml_reader *r, const char *end, bool at_end, size_t *to, size_t *next) {
    const char *s = r->buf.p;
    size_t n = r->buf.len, k = r->pos;
    while (k < n && k - r->pos <= NAME_MAX_LEN && s[k] != '\n' && s[k] != '<' && (end ? s[k] != end[0] : !is_ws(s[k])))
        k++;
    if (k - r->pos > NAME_MAX_LEN) return M_NO;
    if (k == n) return at_end ? M_NO : M_MORE;
    int m = end ? match(s, k, n, end) : M_YES;
    if (m == M_MORE && at_end) m = M_NO;
    if (m != M_YES) return m;
    if (k == r->pos) return M_NO;
    *to = k;
    *next = k + (end ? strlen(end) : 0);
    return M_YES;
}

static bool step_block(xml_reader *r, bool at_end) {
    const char *s = r->buf.p;
    size_t n = r->buf.len, i = skip_ws(s, r->pos, n);
    if (i >= n) return at_end ? cut_off(r) : false;
    int close = match(s, i, n, r->sp->close);
    if (close == M_YES && r->block_calls > 0) {
        r->pos = i + strlen(r->sp->close);
        r->st = X_AFTER;
        return true;
    }
    if (!r->sp->call_open) { /* the name follows the opening, once */
        if (r->block_calls > 0) return malformed(r, i);
        r->pos = i;
        r->st = X_NAME;
        return true;
    }
    int call = match(s, i, n, r->sp->call_open);
    if (call == M_YES) {
        r->pos = i + strlen(r->sp->call_open);
        r->st = X_NAME;
        return true;
    }
    if ((call == M_MORE || close == M_MORE) && !at_end) return false;
    return malformed(r, i);
}

static bool step_name(xml_reader *r, bool at_end) {
    size_t to, next;
    int m = read_word(r, r->sp->name_end, at_end, &to, &next);
    if (m == M_MORE) return false;
    if (m == M_NO) return malformed(r, r->pos);
    if (!begin_call(r, r->pos, to)) return false;
    r->pos = next;
    r->st = r->sp->attrs_end ? X_ATTRS : X_PAIRS;
    return true;
}

/* attrs_end formats: the attributes from r->pos up to attrs_end (name="value"
 * pairs, no tag in them): M_YES with *end at the marker, M_MORE, or M_NO. */
static int skip_attrs(xml_reader *r, bool at_end, size_t *end) {
    const char *s = r->buf.p, *m = r->sp->attrs_end;
    size_t n = r->buf.len, k = r->pos;
    for (; k < n && k - r->pos <= ATTRS_MAX_LEN; k++) {
        if (s[k] != m[0]) continue;
        int hit = match(s, k, n, m);
        if (hit == M_YES) {
            *end = k;
            return M_YES;
        }
        if (hit == M_MORE) return at_end ? M_NO : M_MORE;
        return M_NO; /* another tag: not attributes */
    }
    return k - r->pos > ATTRS_MAX_LEN || at_end ? M_NO : M_MORE;
}

/* The attributes at r->pos: true with *end at attrs_end; else false with the
 * step's result in *ret (wait for more, or the call ends there). */
static bool attrs_read(xml_reader *r, bool at_end, size_t *end, bool *ret) {
    int m = skip_attrs(r, at_end, end);
    if (m == M_YES) return true;
    *ret = m == M_MORE ? false : at_end ? cut_off(r) : malformed(r, r->pos);
    return false;
}

static bool step_attrs(xml_reader *r, bool at_end) {
    size_t end;
    bool ret;
    if (!attrs_read(r, at_end, &end, &ret)) return ret;
    r->pos = end + strlen(r->sp->attrs_end);
    r->st = X_PAIRS;
    return true;
}

static bool step_pairs(xml_reader *r, bool at_end) {
    const char *s = r->buf.p;
    size_t n = r->buf.len, i = skip_ws(s, r->pos, n);
    if (i >= n) return at_end ? cut_off(r) : false;
    int key = match(s, i, n, r->sp->key_open), call = match(s, i, n, r->sp->call_close);
    int close = match(s, i, n, r->sp->close), json = r->n_pairs ? M_NO : match(s, i, n, r->sp->json_open);
    if (json == M_YES) { /* the arguments as one object, in place of pairs */
        r->json_at = i;
        r->pos = i + strlen(r->sp->json_open);
        r->st = X_JATTRS;
        return true;
    }
    if (json == M_MORE && key != M_YES) return at_end ? cut_off(r) : false;
    /* the call's end first: MiniMax-M3's key opening (NS<) is a prefix of it */
    if (call == M_YES || close == M_YES) { /* (a missing </function> is forgiven) */
        end_call(r);
        r->pos = i + strlen(call == M_YES ? r->sp->call_close : r->sp->close);
        r->st = call == M_YES ? X_BLOCK : X_AFTER;
    } else if (call == M_MORE || close == M_MORE) {
        return at_end ? cut_off(r) : false;
    } else if (key == M_YES) {
        r->pos = i + strlen(r->sp->key_open);
        r->st = X_KEY;
    } else if (key == M_MORE) {
        return at_end ? cut_off(r) : false;
    } else {
        return malformed(r, i);
    }
    return true;
}

static bool step_key(xml_reader *r, bool at_end) {
    size_t to, next;
    int m = read_word(r, r->sp->key_close, at_end, &to, &next);
    if (m == M_MORE) return false;
    if (m == M_NO) return at_end ? cut_off(r) : malformed(r, r->pos);
    if (!begin_key(r, r->pos, to)) return false;
    r->pos = next;
    if (r->sp->value_open) r->st = X_VOPEN;
    else begin_value(r, next);
    return true;
}

static bool step_vopen(xml_reader *r, bool at_end) {
    if (r->sp->attrs_end) { /* the key's attributes, then the value (value_open is attrs_end) */
        size_t end;
        bool ret;
        if (!attrs_read(r, at_end, &end, &ret)) return ret;
        const cJSON *prop = cJSON_GetObjectItemCaseSensitive(r->props, r->key);
        static const char as_string[] = "type=\"string\"";
        if (!cJSON_GetObjectItemCaseSensitive(prop, "type") &&
            memmem(r->buf.p + r->pos, end - r->pos, as_string, sizeof as_string - 1))
            r->raw = true; /* the schema does not type it; the model says string */
        begin_value(r, end + strlen(r->sp->attrs_end));
        return true;
    }
    const char *s = r->buf.p;
    size_t n = r->buf.len, i = skip_ws(s, r->pos, n);
    int m = i < n ? match(s, i, n, r->sp->value_open) : M_MORE;
    if (m == M_YES) {
        begin_value(r, i + strlen(r->sp->value_open));
        return true;
    }
    if (m == M_MORE) return at_end ? cut_off(r) : false;
    return malformed(r, i);
}

/* The closing marker m of the value or block that starts at vstart, searched from
 * vscan (no marker begins before it); when it is not there yet, vscan moves to
 * where a marker cut off by the buffer's end could still begin. */
static const char *find_close(xml_reader *r, const char *m) {
    const char *s = r->buf.p;
    const size_t n = r->buf.len, ml = strlen(m);
    const char *hit = n > r->vscan ? memmem(s + r->vscan, n - r->vscan, m, ml) : NULL;
    if (!hit) r->vscan = n + 1 > ml + r->vstart ? n + 1 - ml : r->vstart;
    return hit;
}

static bool step_value(xml_reader *r, bool at_end) {
    const char *s = r->buf.p, *m = r->sp->value_close ? r->sp->value_close : r->vclose;
    size_t n = r->buf.len, ml = strlen(m);
    if (r->sp->ns && !r->raw) { /* nested markup: the matching close, once it is there */
        const size_t end = element_end(s, r->vstart, n, r->vopen, r->vclose);
        if (end == n && !at_end) return false;
        end_value(r, end == n ? n - partial_suffix(s, r->vstart, n, m) : end);
        if (end == n) return cut_off(r);
        r->pos = end + ml;
        r->st = X_PAIRS;
        return true;
    }
    if (!r->lead_done) { /* trim_nl: a newline first is markup */
        if (r->vstart >= n && !at_end) return false;
        if (r->vstart < n && s[r->vstart] == '\n') r->vstart++;
        r->vsent = r->vscan = r->vstart;
        r->lead_done = true;
    }
    const char *hit = find_close(r, m);
    if (hit || at_end) {
        size_t end = hit ? (size_t)(hit - s) : n - partial_suffix(s, r->vstart, n, m);
        end_value(r, end);
        if (!hit) return cut_off(r);
        r->pos = end + ml;
        r->st = X_PAIRS;
        return true;
    }
    if (r->raw) { /* stream what cannot be the closing markup (or the newline before it) */
        size_t hold = partial_suffix(s, r->vsent, n, m);
        if (r->sp->trim_nl && hold == 0 && n > r->vsent && s[n - 1] == '\n') hold = 1;
        if (r->sp->trim_nl && hold > 0 && n - hold > r->vsent && s[n - hold - 1] == '\n') hold++;
        if (n - hold > r->vsent) out_escaped(r, s + r->vsent, n - hold - r->vsent);
        if (n - hold > r->vsent) r->vsent = n - hold;
    }
    return false;
}

static bool step_json_attrs(xml_reader *r, bool at_end) {
    size_t end;
    bool ret;
    if (!attrs_read(r, at_end, &end, &ret)) return ret;
    r->vstart = r->vscan = end + strlen(r->sp->attrs_end);
    r->st = X_JSON;
    return true;
}

/* The JSON block, once closed: an object's members go out as the call's (a block
 * that is no object ends the call, and the block is text). */
static bool step_json(xml_reader *r, bool at_end) {
    const char *s = r->buf.p, *m = r->sp->json_close;
    const char *hit = find_close(r, m);
    if (!hit) return at_end ? cut_off(r) : false;
    const size_t end = (size_t)(hit - s);
    cJSON *v = cJSON_ParseWithLength(s + r->vstart, end - r->vstart);
    if (!cJSON_IsObject(v)) {
        cJSON_Delete(v);
        return malformed(r, r->json_at);
    }
    char *json = cJSON_PrintUnformatted(v);
    cJSON_Delete(v);
    if (!json) {
        r->oom = true;
        return false;
    }
    const size_t len = strlen(json); /* {members}: the call's own braces are out already */
    if (len > 2) out_args(r, json + 1, len - 2);
    r->n_pairs = len > 2; /* (pairs after it are joined with a comma) */
    free(json);
    r->pos = end + strlen(m);
    r->st = X_PAIRS;
    return true;
}

static bool step_after(xml_reader *r, bool at_end) {
    size_t i = skip_ws(r->buf.p, r->pos, r->buf.len);
    if (i >= r->buf.len && !at_end) return false;
    r->pos = i;
    r->st = X_TEXT;
    return true;
}

static bool step(xml_reader *r, bool at_end) {
    switch (r->st) {
    case X_TEXT: return step_text(r, at_end);
    case X_BLOCK: return step_block(r, at_end);
    case X_NAME: return step_name(r, at_end);
    case X_ATTRS: return step_attrs(r, at_end);
    case X_PAIRS: return step_pairs(r, at_end);
    case X_KEY: return step_key(r, at_end);
    case X_VOPEN: return step_vopen(r, at_end);
    case X_VALUE: return step_value(r, at_end);
    case X_JATTRS: return step_json_attrs(r, at_end);
    case X_JSON: return step_json(r, at_end);
    case X_AFTER: return step_after(r, at_end);
    }
    return false;
}

int xml_reader_feed(xml_reader *r, const char *text, size_t len, bool at_end) {
    if (len) sb_add(&r->buf, text, len);
    if (!r->buf.p) sb_add(&r->buf, "", 0);
    if (r->buf.oom) return LLC_ERR_NOMEM;
    int guard = 0;
    while (!r->oom && step(r, at_end))
        if (++guard > 1000000) break; /* every step moves on; this is only a backstop */
    return r->oom ? LLC_ERR_NOMEM : 0;
}
