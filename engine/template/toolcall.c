/* toolcall.c — tool-call formats: detection from a chat template, the
 * incremental reader of calls in an answer, and the generic tools prompt
 * (see toolcall.h).
 *
 * The reader keeps the whole answer in one buffer and a position up to which
 * it has decided; each feed runs the state machine from there as far as the
 * text allows. Values are re-scanned from their start while incomplete (an
 * answer is at most a few thousand tokens, so this stays cheap) and only the
 * bytes not yet reported are handed to the sink. The XML-style formats
 * (Qwen3-Coder, GLM, MiniMax) are read by engine/template/toolcall_xml.c; this
 * file records what that reader emits, as for its own formats. */
#include "engine/template/toolcall.h"
#include "engine/template/toolcall_xml.h"
#include "kernels/sbuf.h"

#include <stdlib.h>
#include <string.h>

/* ---- text: kernels/sbuf.h ---- */

/* s as the inside of a JSON string literal. */
static void sb_json_escape(sbuf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c;
            sb_add(b, esc, 2);
        } else if (c == '\n') {
            sb_add(b, "\\n", 2);
        } else if (c == '\t') {
            sb_add(b, "\\t", 2);
        } else if (c == '\r') {
            sb_add(b, "\\r", 2);
        } else if (c < 0x20) {
            static const char hex[] = "0123456789abcdef";
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c >> 4], esc[5] = hex[c & 15];
            sb_add(b, esc, 6);
        } else {
            sb_add(b, s + i, 1);
        }
    }
}

/* ---- detection ---- */

toolcall_format toolcall_detect(const char *src) {
    if (!src || !strstr(src, "tools")) return TOOLCALL_GENERIC;
    if (strstr(src, "<|channel|>") && strstr(src, " to=") && strstr(src, "functions.")) return TOOLCALL_HARMONY;
    if (strstr(src, "[TOOL_CALLS]")) return TOOLCALL_MISTRAL;
    /* sequences of control tokens around a JSON call: Kimi K2's, Solar Open's */
    if (strstr(src, "<|tool_call_begin|>") && strstr(src, "<|tool_call_argument_begin|>")) return TOOLCALL_KIMI_K2;
    if (strstr(src, "<|tool_call:begin|>") && strstr(src, "<|tool_call:args|>")) return TOOLCALL_SOLAR;
    /* Kimi K3: tags with attributes, <|open|>call tool="NAME" index="1"<|sep|> */
    if (strstr(src, "<|open|>") && strstr(src, "open_tag('call'") && strstr(src, "open_tag('argument'"))
        return TOOLCALL_KIMI_K3;
    /* Gemma 4: <|tool_call>call:NAME{key:<|"|>text<|"|>,...}<tool_call|> */
    if (strstr(src, "<|tool_call>") && strstr(src, "<tool_call|>")) return TOOLCALL_GEMMA4;
    /* Command-A (Cohere2MoE): a JSON array of {"tool_call_id", "tool_name", "parameters"} */
    if (strstr(src, "<|START_ACTION|>") && strstr(src, "tool_name")) return TOOLCALL_COMMAND_A;
    /* XML-style arguments: MiniMax-M2's own block; M3's, namespaced by a token
       string (]<]minimax[>[<invoke ...) */
    if (strstr(src, "<minimax:tool_call>") && strstr(src, "<invoke name=")) return TOOLCALL_MINIMAX;
    if (strstr(src, "]<]minimax[>[") && strstr(src, "<invoke name=")) return TOOLCALL_MINIMAX_M3;
    /* tencent Hy3 builds GLM-style tags with a suffix: '<tool_call{}>'.format(':opensource') */
    if (strstr(src, "<tool_call{}>") && strstr(src, "<arg_key{}>") && strstr(src, ":opensource")) return TOOLCALL_HUNYUAN;
    /* MiniMax-M1: JSON objects one per line in <tool_calls>; Apriel: a JSON array
       in the same tags (the reader takes both) */
    if (strstr(src, "<tool_calls>")) return TOOLCALL_MINIMAX_M1;
    if (strstr(src, "<tool_call>")) {
        if (strstr(src, "<function=") && strstr(src, "<parameter=")) return TOOLCALL_QWEN3_CODER;
        if (strstr(src, "<arg_key>") && strstr(src, "<arg_value>")) return TOOLCALL_GLM;
        if (strstr(src, "<function=") || strstr(src, "<arg_key>") || strstr(src, "<invoke")) return TOOLCALL_GENERIC;
        return TOOLCALL_HERMES;
    }
    /* Llama 3.1+: the python tag, and JSON calls with "parameters"; functionary
       v3.1 also has the python tag but its own <function=...> calls */
    if (strstr(src, "<|python_tag|>") && !strstr(src, "<function=")) return TOOLCALL_LLAMA3;
    return TOOLCALL_GENERIC;
}

const char *toolcall_format_name(toolcall_format f) {
    switch (f) {
    case TOOLCALL_HERMES: return "hermes";
    case TOOLCALL_LLAMA3: return "llama3";
    case TOOLCALL_MISTRAL: return "mistral";
    case TOOLCALL_HARMONY: return "harmony";
    case TOOLCALL_QWEN3_CODER: return "qwen3_coder";
    case TOOLCALL_GLM: return "glm";
    case TOOLCALL_MINIMAX: return "minimax";
    case TOOLCALL_MINIMAX_M1: return "minimax_m1";
    case TOOLCALL_MINIMAX_M3: return "minimax_m3";
    case TOOLCALL_HUNYUAN: return "hunyuan";
    case TOOLCALL_KIMI_K2: return "kimi_k2";
    case TOOLCALL_SOLAR: return "solar";
    case TOOLCALL_COMMAND_A: return "command_a";
    case TOOLCALL_GEMMA4: return "gemma4";
    case TOOLCALL_KIMI_K3: return "kimi_k3";
    default: return "generic";
    }
}

/* ---- JSON scanning over a prefix of the answer ---- */

enum { SCAN_MALFORMED = -1, SCAN_INCOMPLETE = 0, SCAN_DONE = 1 };

static bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

static size_t skip_ws(const char *s, size_t i, size_t n) {
    while (i < n && is_ws(s[i])) i++;
    return i;
}

/* A string literal starting at s[i] == '"': *end just past its closing quote. */
static int scan_string(const char *s, size_t i, size_t n, size_t *end) {
    for (size_t k = i + 1; k < n; k++) {
        if (s[k] == '\\') {
            k++;
        } else if (s[k] == '"') {
            *end = k + 1;
            return SCAN_DONE;
        } else if ((unsigned char)s[k] < 0x20 && s[k] != '\t') {
            return SCAN_MALFORMED;
        }
    }
    return SCAN_INCOMPLETE;
}

/* One JSON value starting at s[i] (no leading whitespace): *end just past it.
 * Containers are matched by brackets only (their insides are not checked). */
static int scan_value(const char *s, size_t i, size_t n, size_t *end) {
    if (i >= n) return SCAN_INCOMPLETE;
    char c = s[i];
    if (c == '"') return scan_string(s, i, n, end);
    if (c == '{' || c == '[') {
        char stack[64];
        int depth = 0;
        for (size_t k = i; k < n; k++) {
            char d = s[k];
            if (d == '"') {
                size_t e;
                int r = scan_string(s, k, n, &e);
                if (r != SCAN_DONE) return r;
                k = e - 1;
            } else if (d == '{' || d == '[') {
                if (depth == (int)sizeof stack) return SCAN_MALFORMED;
                stack[depth++] = d == '{' ? '}' : ']';
            } else if (d == '}' || d == ']') {
                if (depth == 0 || stack[depth - 1] != d) return SCAN_MALFORMED;
                if (--depth == 0) {
                    *end = k + 1;
                    return SCAN_DONE;
                }
            }
        }
        return SCAN_INCOMPLETE;
    }
    /* number, true, false, null */
    size_t k = i;
    while (k < n && (strchr("+-.eE", s[k]) || (s[k] >= '0' && s[k] <= '9') || (s[k] >= 'a' && s[k] <= 'z'))) k++;
    if (k == i) return SCAN_MALFORMED;
    if (k == n) return SCAN_INCOMPLETE;
    *end = k;
    return SCAN_DONE;
}

/* The decoded text of the string literal s[i..end); NULL when not valid. */
static char *decode_string(const char *s, size_t i, size_t end) {
    cJSON *v = cJSON_ParseWithLength(s + i, end - i);
    char *out = cJSON_IsString(v) ? strdup(v->valuestring) : NULL;
    cJSON_Delete(v);
    return out;
}

/* ---- the parser ---- */

typedef enum pstate {
    P_START,        /* LLAMA3: nothing but whitespace yet; an answer may be a bare JSON call */
    P_TEXT,         /* text outside calls */
    P_AFTER_CALL,   /* whitespace after a call */
    P_OBJ,          /* a call object {"name": ..., "arguments": ...} */
    P_H_OPEN,       /* after <tool_call> */
    P_H_CLOSE,      /* after the object, before </tool_call> */
    P_M_OPEN,       /* after [TOOL_CALLS] */
    P_M_ARRAY,      /* inside [TOOL_CALLS][ ... ] between objects */
    P_M_NAME,       /* [TOOL_CALLS]NAME before [ARGS] */
    P_M_ARGS,       /* the value after [ARGS] */
    P_L3_TAG,       /* after <|python_tag|> */
    P_L3_CODE,      /* code after the python tag, to the end */
    P_L3_NEXT,      /* after a bare JSON call: maybe "; {...}" */
    P_HA_NAME,      /* HARMONY: after to=functions., the name up to <|message|> */
    P_HA_END,       /* HARMONY: after the arguments, their <|call|> */
    P_TC_LIST,      /* MINIMAX_M1, COMMAND_A: inside the block, between objects */
    P_SQ_LIST,      /* KIMI_K2, SOLAR: inside the section, before a call or its end */
    P_SQ_NAME,      /* KIMI_K2, SOLAR: a call's (id and) name, up to the arguments' marker */
    P_SQ_END,       /* KIMI_K2, SOLAR: after the arguments, the call's end marker */
    P_G4_CALL,      /* GEMMA4: after <|tool_call>call:, the name and its {...} */
    P_G4_END,       /* GEMMA4: after the arguments, <tool_call|> */
} pstate;

/* KIMI_K2 and SOLAR: a section of calls, each a sequence of markers around
 * its name and JSON arguments. */
typedef struct seq_markup {
    const char *open, *close; /* the section */
    const char *call_open;
    const char *name_at;      /* NULL: the name follows call_open; else an id comes first, the name after this */
    const char *args_at;      /* ends the name; the JSON arguments follow */
    const char *call_close;
    const char *prefix;       /* dropped from the front of the name (Kimi's "functions."), or NULL */
    bool index;               /* a ":N" after the name is dropped (Kimi's call index) */
} seq_markup;

static const seq_markup KIMI_K2 = {"<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                                   "<|tool_call_begin|>", NULL, "<|tool_call_argument_begin|>",
                                   "<|tool_call_end|>", "functions.", true};
static const seq_markup SOLAR = {"<|tool_calls|>", "<|calls|>", "<|tool_call:begin|>", "<|tool_call:name|>",
                                 "<|tool_call:args|>", "<|tool_call:end|>", NULL, false};

typedef struct call {
    char *name;
    sbuf args;
} call;

struct toolcall_parser {
    toolcall_format fmt;
    toolcall_sink sink;
    char **names; /* offered tools */
    int n_names;
    sbuf buf;     /* the answer so far */
    size_t pos;   /* decided up to here */
    pstate st;
    pstate after_obj; /* where a finished call object goes */
    bool finished;
    sbuf content;
    call *calls;
    int n_calls, cap_calls;
    bool oom;
    xml_reader *xml;    /* the XML formats' reader, or NULL */
    /* the markup being read */
    size_t ws_from;     /* whitespace before it began here (given back if it is no call) */
    size_t mark_end;    /* just past its marker (P_OBJ from a bare JSON answer: just past '{') */
    size_t obj_start;   /* its '{' */
    size_t obj_pos;     /* the next member to read */
    bool committed;     /* a marker says it is a call (bare JSON is not committed) */
    bool first_member;
    int cur;            /* the call announced for it, or -1 */
    int calls_at_mark;  /* calls before this markup began */
    bool args_seen, args_done, args_string;
    size_t args_start, args_end, args_sent;
};

static const char *const HERMES_OPEN = "<tool_call>";
static const char *const HERMES_CLOSE = "</tool_call>";
static const char *const MISTRAL_OPEN = "[TOOL_CALLS]";
static const char *const PYTHON_TAG = "<|python_tag|>";
static const char *const HARMONY_TO = "to=functions.";
static const char *const HARMONY_MESSAGE = "<|message|>";
static const char *const HARMONY_CALL = "<|call|>";
static const char *const M1_OPEN = "<tool_calls>";
static const char *const M1_CLOSE = "</tool_calls>";
static const char *const CA_OPEN = "<|START_ACTION|>";
static const char *const CA_CLOSE = "<|END_ACTION|>";
static const char *const G4_OPEN = "<|tool_call>call:";
static const char *const G4_CLOSE = "<tool_call|>";
static const char *const G4_QUOTE = "<|\"|>"; /* Gemma 4's string delimiter */

static const seq_markup *seq_of(toolcall_format f) {
    return f == TOOLCALL_KIMI_K2 ? &KIMI_K2 : f == TOOLCALL_SOLAR ? &SOLAR : NULL;
}

static void xml_content(void *ud, const char *text, size_t len);
static void xml_call(void *ud, int index, const char *name);
static void xml_args(void *ud, int index, const char *piece, size_t len);

static const char *marker_of(toolcall_format f) {
    switch (f) {
    case TOOLCALL_MISTRAL: return MISTRAL_OPEN;
    case TOOLCALL_LLAMA3: return PYTHON_TAG;
    case TOOLCALL_HARMONY: return HARMONY_TO;
    case TOOLCALL_MINIMAX_M1: return M1_OPEN;
    case TOOLCALL_COMMAND_A: return CA_OPEN;
    case TOOLCALL_GEMMA4: return G4_OPEN;
    case TOOLCALL_KIMI_K2: return KIMI_K2.open;
    case TOOLCALL_SOLAR: return SOLAR.open;
    default: return HERMES_OPEN;
    }
}

int toolcall_parser_create(toolcall_format f, const cJSON *tools, const toolcall_sink *sink,
                           toolcall_parser **out) {
    *out = NULL;
    toolcall_parser *p = calloc(1, sizeof *p);
    if (!p) return LLC_ERR_NOMEM;
    p->fmt = f;
    if (sink) p->sink = *sink;
    p->st = f == TOOLCALL_LLAMA3 ? P_START : P_TEXT;
    p->cur = -1;
    int n = cJSON_GetArraySize(tools);
    if (n > 0 && !(p->names = calloc((size_t)n, sizeof *p->names))) {
        free(p);
        return LLC_ERR_NOMEM;
    }
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "name"));
        if (name && p->n_names < n && !(p->names[p->n_names++] = strdup(name))) {
            toolcall_parser_free(p);
            return LLC_ERR_NOMEM;
        }
    }
    sb_add(&p->content, "", 0);
    if (toolcall_xml_format(f)) {
        toolcall_sink rec = {p, xml_content, xml_call, xml_args};
        if (xml_reader_create(f, tools, &rec, &p->xml)) {
            toolcall_parser_free(p);
            return LLC_ERR_NOMEM;
        }
    }
    *out = p;
    return p->content.oom ? (toolcall_parser_free(p), *out = NULL, LLC_ERR_NOMEM) : 0;
}

void toolcall_parser_free(toolcall_parser *p) {
    if (!p) return;
    for (int i = 0; i < p->n_names; i++) free(p->names[i]);
    free(p->names);
    for (int i = 0; i < p->n_calls; i++) {
        free(p->calls[i].name);
        free(p->calls[i].args.p);
    }
    free(p->calls);
    xml_reader_free(p->xml);
    free(p->buf.p);
    free(p->content.p);
    free(p);
}

/* ---- output ---- */

static void out_text(toolcall_parser *p, const char *s, size_t n) {
    if (n == 0) return;
    sb_add(&p->content, s, n);
    if (p->sink.content) p->sink.content(p->sink.ud, s, n);
}

static void out_content(toolcall_parser *p, size_t from, size_t to) {
    if (to > from) out_text(p, p->buf.p + from, to - from);
}

static void out_call(toolcall_parser *p, const char *name) {
    if (p->n_calls == p->cap_calls) {
        int cap = p->cap_calls ? 2 * p->cap_calls : 4;
        call *c = realloc(p->calls, (size_t)cap * sizeof *c);
        if (!c) {
            p->oom = true;
            return;
        }
        p->calls = c;
        p->cap_calls = cap;
    }
    call *c = &p->calls[p->n_calls];
    memset(c, 0, sizeof *c);
    if (!(c->name = strdup(name))) {
        p->oom = true;
        return;
    }
    sb_add(&c->args, "", 0);
    p->cur = p->n_calls++;
    if (p->sink.call) p->sink.call(p->sink.ud, p->cur, name);
}

static void out_args(toolcall_parser *p, const char *s, size_t n) {
    if (p->cur < 0 || n == 0) return;
    sb_add(&p->calls[p->cur].args, s, n);
    if (p->sink.args) p->sink.args(p->sink.ud, p->cur, s, n);
}

/* The XML reader's output, recorded as this parser's own. */
static void xml_content(void *ud, const char *text, size_t len) { out_text(ud, text, len); }
static void xml_call(void *ud, int index, const char *name) {
    (void)index;
    out_call(ud, name);
}
static void xml_args(void *ud, int index, const char *piece, size_t len) {
    (void)index;
    out_args(ud, piece, len);
}

/* ---- the markup being read ---- */

static void begin_markup(toolcall_parser *p, size_t ws_from, size_t mark_end, pstate st) {
    p->ws_from = ws_from;
    p->mark_end = mark_end;
    p->pos = mark_end;
    p->st = st;
    p->calls_at_mark = p->n_calls;
}

static void begin_obj(toolcall_parser *p, size_t at, bool committed, pstate after) {
    p->obj_start = p->obj_pos = at;
    p->committed = committed;
    p->first_member = true;
    p->cur = -1;
    p->args_seen = p->args_done = p->args_string = false;
    p->args_start = p->args_end = p->args_sent = 0;
    p->after_obj = after;
    p->st = P_OBJ;
}

/* The markup is not a call: its text (from the whitespace before it to the
 * end of its marker) is content, and reading goes on after the marker. */
static void not_a_call(toolcall_parser *p) {
    p->cur = -1;
    if (p->st == P_OBJ && p->n_calls > p->calls_at_mark) { /* a later object of a list: text from it */
        p->pos = p->obj_start;
        p->st = P_TEXT;
        return;
    }
    out_content(p, p->ws_from, p->mark_end);
    p->pos = p->mark_end;
    p->st = P_TEXT;
    p->cur = -1;
}

static bool known_name(const toolcall_parser *p, const char *name) {
    for (int i = 0; i < p->n_names; i++)
        if (strcmp(p->names[i], name) == 0) return true;
    return false;
}

/* Hands the call's arguments read so far (all of them once done) to the sink. */
static void send_args(toolcall_parser *p) {
    if (p->cur < 0 || !p->args_seen) return;
    const char *s = p->buf.p;
    if (p->args_string) {
        if (!p->args_done || p->args_sent) return;
        char *v = decode_string(s, p->args_start, p->args_end);
        out_args(p, v ? v : "", v ? strlen(v) : 0);
        free(v);
        p->args_sent = p->args_end;
        return;
    }
    size_t to = p->args_done ? p->args_end : p->buf.len;
    size_t from = p->args_sent > p->args_start ? p->args_sent : p->args_start;
    if (to > from) out_args(p, s + from, to - from);
    if (to > p->args_sent) p->args_sent = to;
}

/* The call is complete (or cut off at the end): "{}" when it had no arguments. */
static void end_call(toolcall_parser *p) {
    if (p->cur >= 0) {
        send_args(p);
        if (p->calls[p->cur].args.len == 0) out_args(p, "{}", 2);
    }
    p->cur = -1;
}

static bool key_is(const char *s, size_t a, size_t b, const char *k) {
    size_t n = strlen(k);
    return b - a == n + 2 && memcmp(s + a + 1, k, n) == 0;
}

/* Reads members of the call object. Returns true when the state changed. */
static bool step_obj(toolcall_parser *p, bool at_end) {
    const char *s = p->buf.p;
    size_t n = p->buf.len;
    size_t i = p->obj_pos;
    if (i == p->obj_start) i++; /* past '{' */
    for (;;) {
        p->obj_pos = i;
        i = skip_ws(s, i, n);
        if (i >= n) goto wait;
        if (s[i] == '}') {
            p->pos = i + 1;
            if (p->cur < 0) { /* no name: not a call */
                not_a_call(p);
                return true;
            }
            end_call(p);
            p->st = p->after_obj;
            return true;
        }
        if (s[i] == ',' && !p->first_member) {
            i++;
            continue;
        }
        if (s[i] != '"') goto malformed;
        size_t kend, v, vend;
        int r = scan_string(s, i, n, &kend);
        if (r == SCAN_MALFORMED) goto malformed;
        if (r == SCAN_INCOMPLETE) goto wait;
        v = skip_ws(s, kend, n);
        if (v >= n) goto wait;
        if (s[v] != ':') goto malformed;
        v = skip_ws(s, v + 1, n);
        if (v >= n) goto wait;
        bool is_name = key_is(s, i, kend, "name") || (p->fmt == TOOLCALL_COMMAND_A && key_is(s, i, kend, "tool_name"));
        bool is_args = key_is(s, i, kend, "arguments") || key_is(s, i, kend, "parameters");
        if (!p->committed && p->first_member && !is_name && !key_is(s, i, kend, "type")) goto malformed;
        if (is_args && !p->args_seen) {
            p->args_seen = true;
            p->args_start = v;
            p->args_string = s[v] == '"';
            r = scan_value(s, v, n, &vend);
            if (r == SCAN_MALFORMED) goto malformed;
            if (r == SCAN_INCOMPLETE) {
                p->args_seen = s[v] == '{' || s[v] == '['; /* streamed as they come */
                if (p->args_seen) send_args(p);
                p->args_seen = false; /* read again from the key next time */
                goto wait;
            }
            p->args_done = true;
            p->args_end = vend;
            send_args(p);
            i = vend;
        } else {
            r = scan_value(s, v, n, &vend);
            if (r == SCAN_MALFORMED) goto malformed;
            if (r == SCAN_INCOMPLETE) goto wait;
            if (is_name && p->cur < 0) {
                char *name = s[v] == '"' ? decode_string(s, v, vend) : NULL;
                if (!name || !name[0] || (!p->committed && !known_name(p, name))) {
                    free(name);
                    goto malformed;
                }
                out_call(p, name);
                free(name);
                send_args(p); /* arguments that came before the name */
            }
            i = vend;
        }
        p->first_member = false;
    }
wait:
    if (!at_end) return false;
    if (p->cur >= 0) { /* cut off: keep what came */
        p->args_seen = p->args_seen || (p->args_start && (s[p->args_start] == '{' || s[p->args_start] == '['));
        end_call(p);
        p->pos = n;
        p->st = P_TEXT;
        return true;
    }
malformed:
    if (p->cur >= 0) { /* announced already: the call stands, the rest is text */
        end_call(p);
        p->pos = i;
        p->st = P_TEXT;
        return true;
    }
    not_a_call(p);
    return true;
}

/* The longest suffix of s[from..n) that is a proper prefix of m. */
static size_t partial_suffix(const char *s, size_t from, size_t n, const char *m) {
    size_t ml = strlen(m);
    for (size_t k = ml - 1; k > 0; k--)
        if (n - from >= k && memcmp(s + n - k, m, k) == 0) return k;
    return 0;
}

static bool step_text(toolcall_parser *p, bool at_end) {
    const char *s = p->buf.p, *m = marker_of(p->fmt);
    size_t n = p->buf.len, ml = strlen(m);
    const char *hit = n > p->pos ? memmem(s + p->pos, n - p->pos, m, ml) : NULL;
    if (hit) {
        size_t k = (size_t)(hit - s), e = k;
        while (e > p->pos && is_ws(s[e - 1])) e--;
        out_content(p, p->pos, e);
        pstate next = p->fmt == TOOLCALL_MISTRAL ? P_M_OPEN
                      : p->fmt == TOOLCALL_LLAMA3 ? P_L3_TAG
                      : p->fmt == TOOLCALL_HARMONY ? P_HA_NAME
                      : p->fmt == TOOLCALL_MINIMAX_M1 || p->fmt == TOOLCALL_COMMAND_A ? P_TC_LIST
                      : seq_of(p->fmt)                                            ? P_SQ_LIST
                      : p->fmt == TOOLCALL_GEMMA4                                 ? P_G4_CALL
                                                                                  : P_H_OPEN;
        begin_markup(p, e, k + ml, next);
        return true;
    }
    size_t e = n;
    if (!at_end) e -= partial_suffix(s, p->pos, n, m);
    if (!at_end || p->n_calls > 0)
        while (e > p->pos && is_ws(s[e - 1])) e--;
    out_content(p, p->pos, e);
    p->pos = e;
    return false;
}

/* The call's name is buf[pos..name_end) and its arguments begin at args_at
 * (Mistral's NAME[ARGS], harmony's to=functions.NAME ...<|message|>): announces
 * it and reads the arguments (P_M_ARGS). */
static bool begin_named_call(toolcall_parser *p, size_t name_end, size_t args_at) {
    char *name = strndup(p->buf.p + p->pos, name_end - p->pos);
    if (!name) {
        p->oom = true;
        return false;
    }
    out_call(p, name);
    free(name);
    p->pos = args_at;
    p->args_seen = p->args_done = p->args_string = false;
    p->args_sent = 0;
    p->st = P_M_ARGS;
    return true;
}

/* After a call: whitespace, then its closing marker m (Hermes' </tool_call>,
 * harmony's <|call|>) when it is there; a prefix of m at the end waits for more. */
static bool step_close(toolcall_parser *p, const char *m, bool at_end) {
    const char *s = p->buf.p;
    size_t i = skip_ws(s, p->pos, p->buf.len), cl = strlen(m), have = p->buf.len - i;
    if (have >= cl && memcmp(s + i, m, cl) == 0) p->pos = i + cl;
    else if (have < cl && memcmp(s + i, m, have) == 0 && !at_end) return false;
    p->st = p->st == P_SQ_END ? P_SQ_LIST : P_AFTER_CALL; /* with or without the marker */
    return true;
}

/* Whether marker m is at s[i..n): 1 yes, 0 no, -1 it may be (s ends inside it). */
static int marker_at(const char *s, size_t i, size_t n, const char *m) {
    const size_t ml = strlen(m), have = n - i;
    if (have >= ml) return memcmp(s + i, m, ml) == 0;
    return memcmp(s + i, m, have) == 0 ? -1 : 0;
}

/* KIMI_K2, SOLAR: inside the section, a call begins or the section ends. */
static bool step_seq_list(toolcall_parser *p, bool at_end) {
    const seq_markup *sq = seq_of(p->fmt);
    const char *s = p->buf.p;
    const size_t n = p->buf.len, i = skip_ws(s, p->pos, n);
    if (i >= n && !at_end) return false;
    const int open = i < n ? marker_at(s, i, n, sq->call_open) : 0, close = i < n ? marker_at(s, i, n, sq->close) : 0;
    if (open == 1) {
        p->pos = i + strlen(sq->call_open);
        p->st = P_SQ_NAME;
    } else if (close == 1 && p->n_calls > p->calls_at_mark) {
        p->pos = i + strlen(sq->close);
        p->st = P_AFTER_CALL;
    } else if ((open < 0 || close < 0) && !at_end) {
        return false;
    } else if (p->n_calls == p->calls_at_mark) {
        not_a_call(p); /* no call: the section's opening is text */
    } else {
        p->pos = i; /* the calls stand, the rest is text */
        p->st = P_TEXT;
    }
    return true;
}

/* GEMMA4: the end of the value {...} at s[i] == '{' (nested braces and
 * brackets, <|"|>-quoted strings skipped): just past its '}', 0 when s ends
 * first, or (size_t)-1 when it is not one. */
static size_t g4_value_end(const char *s, size_t i, size_t n) {
    const size_t ql = strlen(G4_QUOTE);
    int depth = 0;
    for (size_t k = i; k < n; k++) {
        if (s[k] == '<' && n - k >= ql && memcmp(s + k, G4_QUOTE, ql) == 0) {
            const char *q = memmem(s + k + ql, n - k - ql, G4_QUOTE, ql);
            if (!q) return 0;
            k = (size_t)(q - s) + ql - 1;
        } else if (s[k] == '{' || s[k] == '[') {
            if (++depth > 64) return (size_t)-1;
        } else if (s[k] == '}' || s[k] == ']') {
            if (--depth == 0) return k + 1;
        }
    }
    return 0;
}

/* GEMMA4: its value syntax as JSON: <|"|>text<|"|> a string, a bare word
 * before ':' a key, true / false / null / a number as they are, any other bare
 * word a string. */
static void g4_to_json(sbuf *out, const char *s, size_t n) {
    const size_t ql = strlen(G4_QUOTE);
    for (size_t k = 0; k < n;) {
        if (n - k >= ql && memcmp(s + k, G4_QUOTE, ql) == 0) {
            const char *q = memmem(s + k + ql, n - k - ql, G4_QUOTE, ql);
            const size_t e = q ? (size_t)(q - s) : n;
            sb_add(out, "\"", 1);
            sb_json_escape(out, s + k + ql, e - k - ql);
            sb_add(out, "\"", 1);
            k = q ? e + ql : n;
        } else if (strchr("{}[],:", s[k]) || is_ws(s[k])) {
            sb_add(out, s + k, 1);
            k++;
        } else {
            size_t e = k;
            while (e < n && !strchr("{}[],:", s[e]) && !(n - e >= ql && memcmp(s + e, G4_QUOTE, ql) == 0)) e++;
            size_t b = e;
            while (b > k && is_ws(s[b - 1])) b--;
            const size_t after = skip_ws(s, e, n);
            const bool key = after < n && s[after] == ':';
            const char *lit_end = NULL;
            cJSON *lit = key ? NULL : cJSON_ParseWithLengthOpts(s + k, b - k, &lit_end, false);
            const bool raw = lit && lit_end == s + b && !cJSON_IsObject(lit) && !cJSON_IsArray(lit) && !cJSON_IsString(lit);
            cJSON_Delete(lit);
            if (raw) {
                sb_add(out, s + k, b - k);
            } else {
                sb_add(out, "\"", 1);
                sb_json_escape(out, s + k, b - k);
                sb_add(out, "\"", 1);
            }
            sb_add(out, s + b, e - b);
            k = e;
        }
    }
}

/* GEMMA4: NAME{...}: announces the call once its value is complete, with the
 * value as JSON for its arguments. */
static bool step_g4_call(toolcall_parser *p, bool at_end) {
    const char *s = p->buf.p;
    const size_t n = p->buf.len;
    size_t k = p->pos;
    while (k < n && s[k] != '{' && !is_ws(s[k]) && s[k] != '<' && k - p->pos <= 128) k++;
    if (k == n && k - p->pos <= 128 && !at_end) return false; /* the name goes on */
    const size_t end = k < n && s[k] == '{' && k > p->pos && k - p->pos <= 128 ? g4_value_end(s, k, n) : (size_t)-1;
    if (end == 0 && !at_end) return false;
    if (end == 0 || end == (size_t)-1) {
        not_a_call(p);
        return true;
    }
    char *name = strndup(s + p->pos, k - p->pos);
    sbuf args = {0};
    g4_to_json(&args, s + k, end - k);
    if (!name || args.oom) {
        p->oom = true;
    } else {
        out_call(p, name);
        out_args(p, args.p, args.len);
    }
    free(name);
    free(args.p);
    p->cur = -1;
    p->pos = end;
    p->st = P_G4_END;
    return true;
}

/* A call of the section is malformed: with no call before it, the section's
 * opening is text; after calls, they stand and the rest is text. */
static bool seq_fail(toolcall_parser *p) {
    if (p->n_calls == p->calls_at_mark) not_a_call(p);
    else p->st = P_TEXT;
    return true;
}

/* KIMI_K2, SOLAR: [ID name_at] NAME args_at, within 256 bytes (the search and
 * the give-up see the same window, so a cut never changes the answer). */
static bool step_seq_name(toolcall_parser *p, bool at_end) {
    const seq_markup *sq = seq_of(p->fmt);
    const char *s = p->buf.p;
    const size_t n = p->buf.len, window = n - p->pos < 256 ? n - p->pos : 256;
    const char *args = memmem(s + p->pos, window, sq->args_at, strlen(sq->args_at));
    if (!args) return at_end || window == 256 ? seq_fail(p) : false;
    size_t a = p->pos, b = (size_t)(args - s);
    if (sq->name_at) {
        const char *at = memmem(s + a, b - a, sq->name_at, strlen(sq->name_at));
        if (!at) return seq_fail(p);
        a = (size_t)(at - s) + strlen(sq->name_at);
    }
    while (a < b && is_ws(s[a])) a++;
    while (b > a && is_ws(s[b - 1])) b--;
    const size_t pl = sq->prefix ? strlen(sq->prefix) : 0;
    if (pl && b - a > pl && memcmp(s + a, sq->prefix, pl) == 0) a += pl;
    if (sq->index) { /* NAME:0 */
        size_t k = b;
        while (k > a && s[k - 1] >= '0' && s[k - 1] <= '9') k--;
        if (k < b && k > a + 1 && s[k - 1] == ':') b = k - 1;
    }
    bool bad = a == b || b - a > 128;
    for (size_t k = a; k < b && !bad; k++) bad = is_ws(s[k]) || s[k] == '<';
    if (bad) return seq_fail(p);
    p->pos = a;
    return begin_named_call(p, b, (size_t)(args - s) + strlen(sq->args_at));
}

static bool step(toolcall_parser *p, bool at_end) {
    const char *s = p->buf.p;
    size_t n = p->buf.len, i;
    switch (p->st) {
    case P_TEXT: return step_text(p, at_end);
    case P_OBJ: return step_obj(p, at_end);
    case P_START:
    case P_L3_NEXT:
    case P_AFTER_CALL:
        i = skip_ws(s, p->pos, n);
        while (p->st == P_L3_NEXT && i < n && (s[i] == ';' || is_ws(s[i]))) i++;
        if (i >= n && !at_end) return false;
        if (p->st != P_AFTER_CALL && i < n && s[i] == '{') {
            begin_markup(p, p->pos, i + 1, P_OBJ);
            begin_obj(p, i, false, P_L3_NEXT);
            return true;
        }
        if (p->st == P_AFTER_CALL || p->st == P_L3_NEXT) p->pos = i; /* whitespace after a call */
        p->st = P_TEXT;
        return true;
    case P_H_OPEN:
    case P_L3_TAG:
        i = skip_ws(s, p->pos, n);
        if (i >= n && !at_end) return false;
        if (i < n && s[i] == '{') {
            begin_obj(p, i, true, p->st == P_H_OPEN ? P_H_CLOSE : P_L3_NEXT);
            return true;
        }
        if (p->st == P_L3_TAG && i < n) { /* code: a call of "python" with {"code": ...} */
            out_call(p, "python");
            out_args(p, "{\"code\": \"", 10);
            p->pos = i;
            p->st = P_L3_CODE;
            return true;
        }
        not_a_call(p);
        return true;
    case P_L3_CODE: {
        sbuf esc = {0};
        sb_json_escape(&esc, s + p->pos, n - p->pos);
        if (esc.oom) p->oom = true;
        else out_args(p, esc.p, esc.len);
        free(esc.p);
        p->pos = n;
        if (!at_end) return false;
        out_args(p, "\"}", 2);
        p->cur = -1;
        p->st = P_TEXT;
        return true;
    }
    case P_H_CLOSE: return step_close(p, HERMES_CLOSE, at_end);
    case P_M_OPEN:
        i = skip_ws(s, p->pos, n);
        if (i >= n && !at_end) return false;
        if (i < n && s[i] == '[') {
            p->pos = i + 1;
            p->st = P_M_ARRAY;
        } else if (i < n && s[i] == '{') {
            begin_obj(p, i, true, P_AFTER_CALL);
        } else if (i < n) {
            p->pos = i;
            p->st = P_M_NAME;
        } else {
            not_a_call(p);
        }
        return true;
    case P_M_ARRAY:
        i = p->pos;
        while (i < n && (is_ws(s[i]) || s[i] == ',')) i++;
        if (i >= n && !at_end) return false;
        if (i < n && s[i] == '{') {
            begin_obj(p, i, true, P_M_ARRAY);
        } else if (i < n && s[i] == ']') {
            p->pos = i + 1;
            p->st = P_AFTER_CALL;
        } else {
            p->pos = i;
            p->st = P_TEXT;
        }
        return true;
    case P_HA_NAME: {
        /* NAME, then (a space, <|constrain|>json, <|channel|>commentary json ...) <|message|> */
        size_t k = p->pos;
        while (k < n && !is_ws(s[k]) && s[k] != '<' && k - p->pos <= 128) k++;
        if (k == n && k - p->pos <= 128 && !at_end) return false; /* the name goes on */
        /* <|message|> within 256 bytes: the search and the give-up see the same
         * window, so a cut never changes the answer */
        const size_t window = n - k < 256 ? n - k : 256;
        const char *msg = memmem(s + k, window, HARMONY_MESSAGE, strlen(HARMONY_MESSAGE));
        bool bad = k == p->pos || k - p->pos > 128 || (!msg && n - k >= 256);
        if (bad || (!msg && at_end)) {
            not_a_call(p);
            return true;
        }
        if (!msg) return false;
        return begin_named_call(p, k, (size_t)(msg - s) + strlen(HARMONY_MESSAGE));
    }
    case P_HA_END: return step_close(p, HARMONY_CALL, at_end);
    case P_G4_CALL: return step_g4_call(p, at_end);
    case P_G4_END: return step_close(p, G4_CLOSE, at_end);
    case P_SQ_LIST: return step_seq_list(p, at_end);
    case P_SQ_NAME: return step_seq_name(p, at_end);
    case P_SQ_END: return step_close(p, seq_of(p->fmt)->call_close, at_end);
    case P_TC_LIST: {
        /* objects one per line (or a JSON array of them), then </tool_calls> (<|END_ACTION|>) */
        i = p->pos;
        while (i < n && (is_ws(s[i]) || s[i] == ',' || s[i] == '[' || s[i] == ']')) i++;
        if (i >= n && !at_end) return false;
        if (i < n && s[i] == '{') {
            begin_obj(p, i, true, P_TC_LIST);
            return true;
        }
        const char *close = p->fmt == TOOLCALL_COMMAND_A ? CA_CLOSE : M1_CLOSE;
        const size_t cl = strlen(close), have = n - i;
        if (have >= cl && memcmp(s + i, close, cl) == 0) {
            if (p->n_calls == p->calls_at_mark) { /* an empty block: text */
                not_a_call(p);
                return true;
            }
            p->pos = i + cl;
            p->st = P_AFTER_CALL;
            return true;
        }
        if (have < cl && memcmp(s + i, close, have) == 0 && !at_end) return false;
        if (p->n_calls == p->calls_at_mark) not_a_call(p); /* no call: the block's opening is text */
        else p->pos = i, p->st = P_TEXT;                   /* the calls stand, the rest is text */
        return true;
    }
    case P_M_NAME: {
        /* NAME, then [ARGS] or [CALL_ID]ID[ARGS] */
        size_t k = p->pos;
        while (k < n && !is_ws(s[k]) && s[k] != '[' && s[k] != '{' && k - p->pos <= 128) k++;
        size_t have = n - k, args_at = 0;
        bool bad = k == p->pos || k - p->pos > 128 || (k < n && s[k] != '[');
        if (!bad && have >= 6 && memcmp(s + k, "[ARGS]", 6) == 0) {
            args_at = k + 6;
        } else if (!bad && have >= 9 && memcmp(s + k, "[CALL_ID]", 9) == 0) {
            /* [ARGS] within 70 bytes (an id of at most 64): the search and the give-up
             * see the same window, so a cut never changes the answer */
            const char *a = memmem(s + k + 9, have - 9 < 70 ? have - 9 : 70, "[ARGS]", 6);
            if (a) args_at = (size_t)(a - s) + 6;
            else bad = have - 9 >= 70;
        } else if (!bad) {
            bad = !((have < 6 && memcmp(s + k, "[ARGS]", have) == 0) ||
                    (have < 9 && memcmp(s + k, "[CALL_ID]", have) == 0));
        }
        if (bad || (!args_at && at_end)) {
            not_a_call(p);
            return true;
        }
        if (!args_at) return false;
        return begin_named_call(p, k, args_at);
    }
    case P_M_ARGS: {
        i = skip_ws(s, p->pos, n);
        if (i >= n && !at_end) return false;
        size_t vend;
        int r = i < n ? scan_value(s, i, n, &vend) : SCAN_INCOMPLETE;
        p->args_start = i;
        p->args_string = i < n && s[i] == '"';
        p->args_seen = r == SCAN_DONE || (i < n && (s[i] == '{' || s[i] == '['));
        if (r == SCAN_DONE) {
            p->args_done = true;
            p->args_end = vend;
            end_call(p);
            p->pos = vend;
            p->st = p->fmt == TOOLCALL_HARMONY ? P_HA_END : seq_of(p->fmt) ? P_SQ_END : P_AFTER_CALL;
            return true;
        }
        if (r == SCAN_MALFORMED || at_end) {
            end_call(p);
            p->pos = r == SCAN_MALFORMED ? i : n;
            p->st = P_TEXT;
            return true;
        }
        send_args(p);
        return false;
    }
    }
    return false;
}

static int recorded(const toolcall_parser *p);

static int run(toolcall_parser *p, bool at_end) {
    int guard = 0;
    while (!p->oom && step(p, at_end))
        if (++guard > 1000000) break; /* every step moves on; this is only a backstop */
    return recorded(p);
}

/* 0, or LLC_ERR_NOMEM when something could not be recorded. */
static int recorded(const toolcall_parser *p) {
    if (p->oom || p->buf.oom || p->content.oom) return LLC_ERR_NOMEM;
    for (int i = 0; i < p->n_calls; i++)
        if (p->calls[i].args.oom) return LLC_ERR_NOMEM;
    return 0;
}

int toolcall_feed(toolcall_parser *p, const char *text, size_t len) {
    if (p->finished || len == 0) return 0;
    if (p->xml) return xml_reader_feed(p->xml, text, len, false) ? LLC_ERR_NOMEM : recorded(p);
    sb_add(&p->buf, text, len);
    if (p->buf.oom) return LLC_ERR_NOMEM;
    return run(p, false);
}

int toolcall_finish(toolcall_parser *p) {
    if (p->finished) return 0;
    p->finished = true;
    if (p->xml) return xml_reader_feed(p->xml, NULL, 0, true) ? LLC_ERR_NOMEM : recorded(p);
    if (!p->buf.p) sb_add(&p->buf, "", 0);
    return run(p, true);
}

int toolcall_count(const toolcall_parser *p) { return p->n_calls; }

const char *toolcall_name(const toolcall_parser *p, int i) {
    return i >= 0 && i < p->n_calls ? p->calls[i].name : NULL;
}

const char *toolcall_arguments(const toolcall_parser *p, int i) {
    return i >= 0 && i < p->n_calls ? (p->calls[i].args.p ? p->calls[i].args.p : "") : NULL;
}

const char *toolcall_content(const toolcall_parser *p, size_t *len) {
    if (len) *len = p->content.len;
    return p->content.p ? p->content.p : "";
}

/* ---- the generic prompt ---- */

static const char *GENERIC_HEAD =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
static const char *GENERIC_TAIL =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
    "\"arguments\": <args-json-object>}\n</tool_call>";

static cJSON *text_msg(const char *role, const char *content) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    return m;
}

/* The markup of an assistant's tool_calls after its content. */
static void calls_text(sbuf *b, const cJSON *calls) {
    const cJSON *c;
    cJSON_ArrayForEach(c, calls) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "name"));
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (b->len) sb_str(b, "\n");
        sb_str(b, "<tool_call>\n{\"name\": \"");
        sb_json_escape(b, name ? name : "", name ? strlen(name) : 0);
        sb_str(b, "\", \"arguments\": ");
        if (cJSON_IsString(args)) {
            sb_str(b, args->valuestring[0] ? args->valuestring : "{}");
        } else {
            char *t = args ? cJSON_PrintUnformatted(args) : NULL;
            sb_str(b, t ? t : "{}");
            free(t);
        }
        sb_str(b, "}\n</tool_call>");
    }
}

int toolcall_generic_messages(const cJSON *messages, const cJSON *tools, bool required, cJSON **out,
                              llc_err *err) {
    *out = NULL;
    if (!cJSON_IsArray(messages)) return llc_fail(err, LLC_ERR_FORMAT, "messages must be an array");
    sbuf sys = {0};
    if (cJSON_GetArraySize(tools) > 0) {
        sb_str(&sys, GENERIC_HEAD);
        const cJSON *t;
        cJSON_ArrayForEach(t, tools) {
            char *j = cJSON_PrintUnformatted(t);
            sb_str(&sys, "\n");
            sb_str(&sys, j ? j : "{}");
            free(j);
        }
        sb_str(&sys, GENERIC_TAIL);
        if (required) sb_str(&sys, "\n\nCall at least one function in your answer.");
    }
    cJSON *o = cJSON_CreateArray();
    sbuf resp = {0}; /* a run of tool messages, becoming one user message */
    bool sys_done = sys.len == 0, oom = !o;
    const cJSON *m;
    cJSON_ArrayForEach(m, messages) {
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role"));
        const char *content = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "content"));
        if (!role) role = "user";
        if (!content) content = "";
        if (strcmp(role, "tool") == 0) {
            if (resp.len) sb_str(&resp, "\n");
            sb_str(&resp, "<tool_response>\n");
            sb_str(&resp, content);
            sb_str(&resp, "\n</tool_response>");
            continue;
        }
        if (resp.len) {
            cJSON_AddItemToArray(o, text_msg("user", resp.p));
            resp.len = 0;
        }
        if (!sys_done) {
            sys_done = true;
            if (strcmp(role, "system") == 0) {
                sbuf t = {0};
                sb_str(&t, content);
                if (t.len) sb_str(&t, "\n\n");
                sb_str(&t, sys.p);
                oom |= t.oom;
                cJSON_AddItemToArray(o, text_msg("system", t.p ? t.p : ""));
                free(t.p);
                continue;
            }
            cJSON_AddItemToArray(o, text_msg("system", sys.p));
        }
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        if (strcmp(role, "assistant") == 0 && cJSON_GetArraySize(calls) > 0) {
            sbuf t = {0};
            sb_str(&t, content);
            calls_text(&t, calls);
            oom |= t.oom;
            cJSON_AddItemToArray(o, text_msg("assistant", t.p ? t.p : ""));
            free(t.p);
            continue;
        }
        cJSON_AddItemToArray(o, text_msg(role, content));
    }
    if (resp.len) cJSON_AddItemToArray(o, text_msg("user", resp.p));
    if (!sys_done) cJSON_AddItemToArray(o, text_msg("system", sys.p));
    oom |= sys.oom || resp.oom;
    free(sys.p);
    free(resp.p);
    if (oom) {
        cJSON_Delete(o);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    *out = o;
    return 0;
}
