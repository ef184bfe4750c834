/* chat.c — chat templates: recognising a model's Jinja chat template by its
 * markers, rendering a conversation in that format, and the stop strings that
 * end an assistant turn. The formats and their conventions are described in
 * chat.h; each is one row of the table below, rendered by one loop. */
#include "engine/template/chat.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "engine/template/chat_jinja.h"
#include "kernels/sbuf.h"

/* DeepSeek's markers use U+FF5C (fullwidth vertical line) and U+2581 (lower
 * one-eighth block), written here as UTF-8 bytes. */
#define DS_BAR "\xef\xbd\x9c"
#define DS_SP "\xe2\x96\x81"
#define DS_USER "<" DS_BAR "User" DS_BAR ">"
#define DS_ASSISTANT "<" DS_BAR "Assistant" DS_BAR ">"
#define DS_EOS "<" DS_BAR "end" DS_SP "of" DS_SP "sentence" DS_BAR ">"

#define L3_HEADER(role) "<|start_header_id|>" role "<|end_header_id|>\n\n"
#define L31_PREAMBLE "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"

/* ---- trimming as Python's str.strip() (what Jinja's |trim does) ---- */

/* Length of the whitespace character that starts s[0..n), or 0. */
static size_t ws_prefix(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    unsigned c = s[0];
    if (c < 0x80)
        return (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f)) ? 1 : 0;
    if (n >= 2 && c == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2; /* U+0085, U+00A0 */
    if (n < 3) return 0;
    if (c == 0xe1 && s[1] == 0x9a && s[2] == 0x80) return 3; /* U+1680 */
    if (c == 0xe2 && s[1] == 0x80 &&
        ((s[2] >= 0x80 && s[2] <= 0x8a) || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
        return 3;                                              /* U+2000-200A, 2028, 2029, 202F */
    if (c == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) return 3;  /* U+205F */
    if (c == 0xe3 && s[1] == 0x80 && s[2] == 0x80) return 3;  /* U+3000 */
    return 0;
}

/* Length of the whitespace character that ends s[0..n), or 0. A multi-byte
 * match is unambiguous: lead bytes (C2, E1-E3) are never continuation bytes. */
static size_t ws_suffix(const unsigned char *s, size_t n) {
    if (n >= 1 && s[n - 1] < 0x80) return ws_prefix(s + n - 1, 1);
    if (n >= 2 && ws_prefix(s + n - 2, 2) == 2) return 2;
    if (n >= 3 && ws_prefix(s + n - 3, 3) == 3) return 3;
    return 0;
}

static void strip_span(const char **s, size_t *n) {
    const unsigned char *p = (const unsigned char *)*s;
    size_t len = *n, k;
    while ((k = ws_prefix(p, len)) > 0) {
        p += k;
        len -= k;
    }
    while ((k = ws_suffix(p, len)) > 0) len -= k;
    *s = (const char *)p;
    *n = len;
}

static void put_content(sbuf *b, const char *s, size_t n, bool trim) {
    if (trim) strip_span(&s, &n);
    sb_add(b, s, n);
}

/* ---- the formats ---- */

enum sys_mode {
    SYS_NATIVE,      /* system messages are turns of their own, where they stand */
    SYS_FOLD_NEXT,   /* folded into the next user message */
    SYS_FOLD_LAST,   /* all folded into the last user message (mistral v3) */
    SYS_LEAD_JOINED, /* all joined with "\n\n" at the very start (deepseek3) */
    SYS_LLAMA31,     /* first one goes in the fixed llama 3.1 system header */
};

typedef struct fmt {
    const char *name;
    const char *pre[3]; /* by chat_role: written before the content */
    const char *suf[3]; /* by chat_role: written after it (ends the turn) */
    bool trim[3];       /* by chat_role: content is |trim'med */
    const char *gen;    /* the assistant prompt */
    enum sys_mode sys;
    /* llama2 only: folded system text is wrapped in these and the whole user
     * text (block + message) is stripped; "<s>" starts every user turn that
     * is not at the very beginning. */
    const char *sys_open, *sys_close, *user_sep;
    const char *stop[3]; /* stop strings, NULL-terminated */
} fmt;

static const fmt FMTS[CHAT_FMT_COUNT] = {
    [CHAT_FMT_RAW] = {
        .name = "raw",
        .pre = {"", "User: ", "Assistant: "},
        .suf = {"\n\n", "\n", "\n"},
        .gen = "Assistant:",
        .stop = {"\nUser:"},
    },
    [CHAT_FMT_CHATML] = {
        .name = "chatml",
        .pre = {"<|im_start|>system\n", "<|im_start|>user\n", "<|im_start|>assistant\n"},
        .suf = {"<|im_end|>\n", "<|im_end|>\n", "<|im_end|>\n"},
        .gen = "<|im_start|>assistant\n",
        .stop = {"<|im_end|>"},
    },
    [CHAT_FMT_LLAMA2] = {
        .name = "llama2",
        .pre = {"", "[INST] ", " "},
        .suf = {"", " [/INST]", " </s>"},
        .trim = {false, true, true},
        .gen = "",
        .sys = SYS_FOLD_NEXT,
        .sys_open = "<<SYS>>\n",
        .sys_close = "\n<</SYS>>\n\n",
        .user_sep = "<s>",
        .stop = {"</s>"},
    },
    [CHAT_FMT_LLAMA3] = {
        .name = "llama3",
        .pre = {L3_HEADER("system"), L3_HEADER("user"), L3_HEADER("assistant")},
        .suf = {"<|eot_id|>", "<|eot_id|>", "<|eot_id|>"},
        .trim = {true, true, true},
        .gen = L3_HEADER("assistant"),
        .stop = {"<|eot_id|>"},
    },
    [CHAT_FMT_LLAMA31] = {
        .name = "llama3.1",
        .pre = {L3_HEADER("system"), L3_HEADER("user"), L3_HEADER("assistant")},
        .suf = {"<|eot_id|>", "<|eot_id|>", "<|eot_id|>"},
        .trim = {true, true, true},
        .gen = L3_HEADER("assistant"),
        .sys = SYS_LLAMA31,
        .stop = {"<|eot_id|>"},
    },
    [CHAT_FMT_MISTRAL_V1] = {
        .name = "mistral-v1",
        .pre = {"", " [INST] ", " "},
        .suf = {"", " [/INST]", "</s>"},
        .gen = "",
        .sys = SYS_FOLD_NEXT,
        .stop = {"</s>"},
    },
    [CHAT_FMT_MISTRAL_V3] = {
        .name = "mistral-v3",
        .pre = {"", "[INST] ", " "},
        .suf = {"", "[/INST]", "</s>"},
        .trim = {false, false, true},
        .gen = "",
        .sys = SYS_FOLD_LAST,
        .stop = {"</s>"},
    },
    [CHAT_FMT_MISTRAL_V3_TEKKEN] = {
        .name = "mistral-v3-tekken",
        .pre = {"", "[INST]", ""},
        .suf = {"", "[/INST]", "</s>"},
        .gen = "",
        .sys = SYS_FOLD_LAST,
        .stop = {"</s>"},
    },
    [CHAT_FMT_MISTRAL_V7] = {
        .name = "mistral-v7",
        .pre = {"[SYSTEM_PROMPT] ", "[INST] ", " "},
        .suf = {"[/SYSTEM_PROMPT]", "[/INST]", "</s>"},
        .gen = "",
        .stop = {"</s>"},
    },
    [CHAT_FMT_MISTRAL_V7_TEKKEN] = {
        .name = "mistral-v7-tekken",
        .pre = {"[SYSTEM_PROMPT]", "[INST]", ""},
        .suf = {"[/SYSTEM_PROMPT]", "[/INST]", "</s>"},
        .gen = "",
        .stop = {"</s>"},
    },
    [CHAT_FMT_ZEPHYR] = {
        .name = "zephyr",
        .pre = {"<|system|>\n", "<|user|>\n", "<|assistant|>\n"},
        .suf = {"</s>\n", "</s>\n", "</s>\n"},
        .gen = "<|assistant|>\n",
        .stop = {"</s>"},
    },
    [CHAT_FMT_PHI3] = {
        .name = "phi3",
        .pre = {"<|system|>\n", "<|user|>\n", "<|assistant|>\n"},
        .suf = {"<|end|>\n", "<|end|>\n", "<|end|>\n"},
        .gen = "<|assistant|>\n",
        .stop = {"<|end|>", "<|endoftext|>"},
    },
    [CHAT_FMT_PHI4] = {
        .name = "phi4",
        .pre = {"<|im_start|>system<|im_sep|>", "<|im_start|>user<|im_sep|>",
                "<|im_start|>assistant<|im_sep|>"},
        .suf = {"<|im_end|>", "<|im_end|>", "<|im_end|>"},
        .gen = "<|im_start|>assistant<|im_sep|>",
        .stop = {"<|im_end|>"},
    },
    [CHAT_FMT_GEMMA] = {
        .name = "gemma",
        .pre = {"", "<start_of_turn>user\n", "<start_of_turn>model\n"},
        .suf = {"", "<end_of_turn>\n", "<end_of_turn>\n"},
        .trim = {false, true, true},
        .gen = "<start_of_turn>model\n",
        .sys = SYS_FOLD_NEXT,
        .stop = {"<end_of_turn>"},
    },
    [CHAT_FMT_DEEPSEEK] = {
        .name = "deepseek",
        .pre = {"", "### Instruction:\n", "### Response:\n"},
        .suf = {"", "\n", "\n<|EOT|>\n"},
        .gen = "### Response:\n",
        .stop = {"<|EOT|>"},
    },
    [CHAT_FMT_DEEPSEEK2] = {
        .name = "deepseek2",
        .pre = {"", "User: ", "Assistant: "},
        .suf = {"\n\n", "\n\n", DS_EOS},
        .gen = "Assistant:",
        .stop = {DS_EOS},
    },
    [CHAT_FMT_DEEPSEEK3] = {
        .name = "deepseek3",
        .pre = {"", DS_USER, DS_ASSISTANT},
        .suf = {"", "", DS_EOS},
        .gen = DS_ASSISTANT,
        .sys = SYS_LEAD_JOINED,
        .stop = {DS_EOS},
    },
};

static bool tmpl_ok(int t) { return t >= 0 && t < CHAT_FMT_COUNT; }

/* ---- template objects ---- */

struct chat_template {
    chat_format fmt;    /* the built-in format, or a Jinja template's fallback */
    chat_jinja *jinja;  /* NULL for a built-in format */
    char *src;          /* the Jinja source (NULL for a built-in format) */
    bool strip_bos;
    atomic_int fallbacks;   /* renders that failed and used fmt */
    atomic_flag noted;      /* first_error written */
    char first_error[320];
};

static chat_template BUILTIN[CHAT_FMT_COUNT];
static atomic_flag builtin_init_started = ATOMIC_FLAG_INIT;
static atomic_bool builtin_ready;

chat_tmpl chat_builtin(int f) {
    if (!tmpl_ok(f)) return NULL;
    if (!atomic_load(&builtin_ready)) {
        if (!atomic_flag_test_and_set(&builtin_init_started)) {
            for (int i = 0; i < CHAT_FMT_COUNT; i++) BUILTIN[i].fmt = (chat_format)i;
            atomic_store(&builtin_ready, true);
        } else {
            while (!atomic_load(&builtin_ready)) {
            }
        }
    }
    return &BUILTIN[f];
}

chat_format chat_tmpl_format(chat_tmpl t) { return t ? t->fmt : CHAT_FMT_UNKNOWN; }
bool chat_tmpl_is_jinja(chat_tmpl t) { return t && t->jinja; }

int chat_tmpl_fallbacks(chat_tmpl t, char *first_error, size_t cap) {
    if (first_error && cap) first_error[0] = 0;
    if (!t || !t->jinja) return 0;
    int n = atomic_load(&((chat_template *)t)->fallbacks);
    if (n > 0 && first_error && cap) snprintf(first_error, cap, "%s", t->first_error);
    return n;
}

void chat_template_free(chat_tmpl t) {
    if (!t || !t->jinja) return;
    chat_template *m = (chat_template *)t; /* created by malloc in chat_template_from_jinja */
    chat_jinja_free(m->jinja);
    free(m->src);
    free(m);
}

const char *chat_tmpl_source(chat_tmpl t) { return t ? t->src : NULL; }

/* ---- names ---- */

int chat_tmpl_from_name(const char *name) {
    if (!name) return CHAT_FMT_UNKNOWN;
    for (int t = 0; t < CHAT_FMT_COUNT; t++)
        if (strcasecmp(name, FMTS[t].name) == 0) return t;
    if (strcasecmp(name, "mistral") == 0) return CHAT_FMT_MISTRAL_V1;
    return CHAT_FMT_UNKNOWN;
}

const char *chat_format_name(int f) { return tmpl_ok(f) ? FMTS[f].name : "unknown"; }

const char *chat_tmpl_name(chat_tmpl t) {
    if (!t) return "unknown";
    return t->jinja ? "jinja" : chat_format_name(t->fmt);
}

const char *chat_tmpl_names(void) {
    /* Kept in enum order; tests/test_chat.c checks it against the table. */
    return "raw, chatml, llama2, llama3, llama3.1, mistral-v1, mistral-v3, "
           "mistral-v3-tekken, mistral-v7, mistral-v7-tekken, zephyr, phi3, phi4, "
           "gemma, deepseek, deepseek2, deepseek3";
}

const char *const *chat_stop_strings(chat_tmpl t) {
    static const char *const none[1] = {NULL};
    return t && tmpl_ok(t->fmt) ? FMTS[t->fmt].stop : none;
}

/* ---- detection ---- */

chat_format chat_detect(const char *src) {
    if (!src) return CHAT_FMT_RAW;
    const char *s = src;
    while (*s == ' ' || (*s >= '\t' && *s <= '\r')) s++;
    if (!*s) return CHAT_FMT_RAW;

    int named = chat_tmpl_from_name(src);
    if (named >= 0) return (chat_format)named;

#define HAS(x) (strstr(src, (x)) != NULL)
    if (HAS("<|im_start|>")) return HAS("<|im_sep|>") ? CHAT_FMT_PHI4 : CHAT_FMT_CHATML;
    if (HAS("[SYSTEM_PROMPT]"))
        return HAS("[SYSTEM_PROMPT] ") || HAS("[INST] ") ? CHAT_FMT_MISTRAL_V7
                                                           : CHAT_FMT_MISTRAL_V7_TEKKEN;
    if (HAS("[INST]")) {
        if (HAS("<<SYS>>")) return CHAT_FMT_LLAMA2;
        /* v1 writes ' [INST] ' with a leading space; v3 and v3-tekken are the
         * templates with tool-call markers, tekken without the spaces. The
         * pre-2024 Mistral/Mixtral template has neither and renders as v1. */
        if (!HAS(" [INST]") && (HAS("[AVAILABLE_TOOLS]") || HAS("[TOOL_CALLS]")))
            return HAS("[INST] ") ? CHAT_FMT_MISTRAL_V3 : CHAT_FMT_MISTRAL_V3_TEKKEN;
        return CHAT_FMT_MISTRAL_V1;
    }
    if (HAS("<|start_header_id|>") && HAS("<|end_header_id|>"))
        return HAS("Cutting Knowledge Date") ? CHAT_FMT_LLAMA31 : CHAT_FMT_LLAMA3;
    if (HAS("<start_of_turn>")) return CHAT_FMT_GEMMA;
    if (HAS("<|assistant|>") && HAS("<|end|>")) return CHAT_FMT_PHI3;
    if (HAS("<|assistant|>") && HAS("<|user|>")) return CHAT_FMT_ZEPHYR;
    if (HAS("### Instruction:") && HAS("<|EOT|>")) return CHAT_FMT_DEEPSEEK;
    if (HAS(DS_USER) && HAS(DS_ASSISTANT)) return CHAT_FMT_DEEPSEEK3;
    if (HAS("'Assistant: ' + message['content'] + eos_token")) return CHAT_FMT_DEEPSEEK2;
#undef HAS
    return CHAT_FMT_CHATML;
}

/* ---- rendering ---- */

static void put_str_content(sbuf *o, const char *s, bool trim) { put_content(o, s, strlen(s), trim); }

/* A user turn; sys is the folded system text or NULL. */
static void emit_user(sbuf *o, const fmt *f, const char *content, const char *sys) {
    if (f->user_sep && o->len > 0) sb_str(o, f->user_sep);
    sb_str(o, f->pre[CHAT_USER]);
    if (sys && f->sys_open) {
        /* llama2: '[INST] ' + ('<<SYS>>\n' + sys + '\n<</SYS>>\n\n' + content).strip() */
        sbuf t = {0};
        sb_str(&t, f->sys_open);
        sb_str(&t, sys);
        sb_str(&t, f->sys_close);
        sb_str(&t, content);
        if (t.oom) o->oom = true;
        put_content(o, sb_cstr(&t), t.len, f->trim[CHAT_USER]);
        if (t.oom) o->oom = true;
        sb_free(&t);
    } else {
        if (sys) {
            sb_str(o, sys);
            sb_str(o, "\n\n");
        }
        put_str_content(o, content, f->trim[CHAT_USER]);
    }
    sb_str(o, f->suf[CHAT_USER]);
}

/* Folded system text that found no user message to join: a user turn of its
 * own (llama2 keeps its <<SYS>> block around it). */
static void emit_lone_system(sbuf *o, const fmt *f, const char *sys) {
    if (f->sys_open)
        emit_user(o, f, "", sys);
    else
        emit_user(o, f, sys, NULL);
}

static void join_system(sbuf *pend, bool *has_pend, const char *content) {
    if (*has_pend) sb_str(pend, "\n\n");
    sb_str(pend, content);
    *has_pend = true;
}

static void render(sbuf *o, const fmt *f, const chat_msg *m, int n, bool add) {
    bool open_last = !add && n > 0 && m[n - 1].role == CHAT_ASSISTANT;
    int start = 0;
    if (f->sys == SYS_LEAD_JOINED) {
        bool first = true;
        for (int i = 0; i < n; i++) {
            if (m[i].role != CHAT_SYSTEM) continue;
            if (!first) sb_str(o, "\n\n");
            sb_str(o, m[i].content);
            first = false;
        }
    } else if (f->sys == SYS_LLAMA31) {
        sb_str(o, f->pre[CHAT_SYSTEM]);
        sb_str(o, L31_PREAMBLE);
        if (n > 0 && m[0].role == CHAT_SYSTEM) {
            put_str_content(o, m[0].content, true);
            start = 1;
        }
        sb_str(o, f->suf[CHAT_SYSTEM]);
    }

    /* Pending system text to fold, for templates without a system role. */
    sbuf pend = {0};
    bool has_pend = false;
    int fold_into = -1; /* SYS_FOLD_LAST: the user message that takes it all */
    if (f->sys == SYS_FOLD_LAST) {
        for (int i = n - 1; i >= 0 && fold_into < 0; i--)
            if (m[i].role == CHAT_USER) fold_into = i;
        if (fold_into >= 0)
            for (int i = 0; i < n; i++)
                if (m[i].role == CHAT_SYSTEM) join_system(&pend, &has_pend, m[i].content);
    }
    bool fold_next = f->sys == SYS_FOLD_NEXT || (f->sys == SYS_FOLD_LAST && fold_into < 0);

    for (int i = start; i < n; i++) {
        const char *c = m[i].content;
        switch (m[i].role) {
        case CHAT_SYSTEM:
            if (f->sys == SYS_NATIVE || f->sys == SYS_LLAMA31) {
                sb_str(o, f->pre[CHAT_SYSTEM]);
                put_str_content(o, c, f->trim[CHAT_SYSTEM]);
                sb_str(o, f->suf[CHAT_SYSTEM]);
            } else if (fold_next) {
                join_system(&pend, &has_pend, c);
            } /* else: already gathered (fold-last, lead-joined) */
            break;
        case CHAT_USER:
            if (has_pend && (fold_next || i == fold_into)) {
                emit_user(o, f, c, sb_cstr(&pend));
                pend.len = 0;
                if (pend.p) pend.p[0] = 0;
                has_pend = false;
            } else {
                emit_user(o, f, c, NULL);
            }
            break;
        case CHAT_ASSISTANT:
            if (has_pend && fold_next) {
                emit_lone_system(o, f, sb_cstr(&pend));
                pend.len = 0;
                if (pend.p) pend.p[0] = 0;
                has_pend = false;
            }
            sb_str(o, f->pre[CHAT_ASSISTANT]);
            put_str_content(o, c, f->trim[CHAT_ASSISTANT]);
            if (!(open_last && i == n - 1)) sb_str(o, f->suf[CHAT_ASSISTANT]);
            break;
        }
    }
    if (has_pend) emit_lone_system(o, f, sb_cstr(&pend));
    if (pend.oom) o->oom = true;
    sb_free(&pend);
    if (add) sb_str(o, f->gen);
}

static int check_msgs(const chat_msg *msgs, int n, llc_err *err) {
    if (n < 0) return llc_fail(err, LLC_ERR_RANGE, "negative message count %d", n);
    if (n > 0 && !msgs) return llc_fail(err, LLC_ERR_RANGE, "%d messages but no array", n);
    for (int i = 0; i < n; i++) {
        int role = (int)msgs[i].role;
        if (role != CHAT_SYSTEM && role != CHAT_USER && role != CHAT_ASSISTANT)
            return llc_fail(err, LLC_ERR_RANGE, "message %d: role %d is not system, user or assistant",
                            i, role);
        if (!msgs[i].content)
            return llc_fail(err, LLC_ERR_FORMAT, "message %d: content is missing (NULL)", i);
    }
    return 0;
}

static int render_builtin(chat_format f, const chat_msg *msgs, int n, bool add, char **out, llc_err *err) {
    sbuf o = {0};
    render(&o, &FMTS[f], msgs, n, add);
    if (!(*out = sb_take(&o))) return llc_fail(err, LLC_ERR_NOMEM, "out of memory rendering %d chat messages", n);
    return LLC_OK;
}

static const char *ROLE_NAMES[3] = {"system", "user", "assistant"};

cJSON *chat_msgs_to_json(const chat_msg *msgs, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) {
        cJSON *m = cJSON_CreateObject();
        const char *r = msgs[i].role == CHAT_ASSISTANT && msgs[i].reasoning && msgs[i].reasoning[0] ? msgs[i].reasoning : NULL;
        if (!m || !cJSON_AddStringToObject(m, "role", ROLE_NAMES[msgs[i].role]) ||
            !cJSON_AddStringToObject(m, "content", msgs[i].content) ||
            (r && !cJSON_AddStringToObject(m, "reasoning_content", r))) {
            cJSON_Delete(m);
            cJSON_Delete(a);
            return NULL;
        }
        cJSON_AddItemToArray(a, m);
    }
    return a;
}

/* Continuing a partial answer (add == false, the last message the
 * assistant's): the render is cut right after that message's content, so the
 * model goes on writing it (as Hugging Face's continue_final_message). */
static void cut_after_last(char *text, const char *content) {
    const char *c = content;
    size_t n = strlen(c), len = strlen(text);
    strip_span(&c, &n);
    if (n == 0 || n > len) return;
    for (size_t i = len - n + 1; i-- > 0;)
        if (memcmp(text + i, c, n) == 0) {
            text[i + n] = 0;
            return;
        }
}

static int render_jinja(chat_tmpl t, const cJSON *messages, const cJSON *tools, bool add, const cJSON *vars,
                        char **out, llc_err *err) {
    return chat_jinja_apply(t->jinja, messages, tools, add, t->strip_bos, 0, vars, out, err);
}

int chat_render(chat_tmpl t, const chat_msg *msgs, int n, bool add_assistant_prompt,
                char **out, llc_err *err) {
    if (!out) return llc_fail(err, LLC_ERR_RANGE, "chat_render: no output pointer");
    *out = NULL;
    if (!t || !tmpl_ok(t->fmt)) return llc_fail(err, LLC_ERR_RANGE, "chat template does not exist");
    int rc = check_msgs(msgs, n, err);
    if (rc) return rc;
    if (t->jinja) {
        cJSON *j = chat_msgs_to_json(msgs, n);
        if (!j) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
        llc_err jerr = {{0}};
        rc = render_jinja(t, j, NULL, add_assistant_prompt, NULL, out, &jerr);
        cJSON_Delete(j);
        if (rc == 0) {
            if (!add_assistant_prompt && n > 0 && msgs[n - 1].role == CHAT_ASSISTANT)
                cut_after_last(*out, msgs[n - 1].content);
            return 0;
        }
        if (rc == LLC_ERR_NOMEM) return llc_fail(err, rc, "%s", jerr.msg);
        chat_template *m = (chat_template *)t; /* a Jinja template is heap-made, not const */
        if (!atomic_flag_test_and_set(&m->noted)) snprintf(m->first_error, sizeof m->first_error, "%s", jerr.msg);
        atomic_fetch_add(&m->fallbacks, 1);
    }
    return render_builtin(t->fmt, msgs, n, add_assistant_prompt, out, err);
}

int chat_apply_json(chat_tmpl t, const cJSON *messages, const cJSON *tools, bool add_generation_prompt,
                    char **out, llc_err *err) {
    return chat_apply_json_vars(t, messages, tools, add_generation_prompt, NULL, out, err);
}

int chat_apply_json_vars(chat_tmpl t, const cJSON *messages, const cJSON *tools, bool add_generation_prompt,
                         const cJSON *vars, char **out, llc_err *err) {
    if (!out) return llc_fail(err, LLC_ERR_RANGE, "chat_apply_json: no output pointer");
    *out = NULL;
    if (!t || !tmpl_ok(t->fmt)) return llc_fail(err, LLC_ERR_RANGE, "chat template does not exist");
    if (!cJSON_IsArray(messages)) return llc_fail(err, LLC_ERR_FORMAT, "messages must be an array");
    if (t->jinja) return render_jinja(t, messages, tools, add_generation_prompt, vars, out, err);
    if (tools && cJSON_IsArray(tools) && cJSON_GetArraySize(tools) > 0)
        return llc_fail(err, LLC_ERR_UNSUPPORTED, "the %s chat format has no tools", FMTS[t->fmt].name);
    int n = cJSON_GetArraySize(messages);
    chat_msg *m = calloc((size_t)(n ? n : 1), sizeof *m);
    if (!m) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    int i = 0, rc = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, messages) {
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "role"));
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
        int r = -1;
        for (int k = 0; k < 3 && role; k++)
            if (strcmp(role, ROLE_NAMES[k]) == 0) r = k;
        if (role && strcmp(role, "developer") == 0) r = CHAT_SYSTEM;
        if (r < 0) {
            rc = llc_fail(err, LLC_ERR_UNSUPPORTED, "message %d: role '%s' is not system, user or assistant",
                          i, role ? role : "(none)");
            break;
        }
        if (!cJSON_IsString(c) && !cJSON_IsNull(c) && c) {
            rc = llc_fail(err, LLC_ERR_UNSUPPORTED, "message %d: content must be a string", i);
            break;
        }
        m[i++] = (chat_msg){(chat_role)r, cJSON_IsString(c) ? c->valuestring : "", NULL};
    }
    if (rc == 0) rc = render_builtin(t->fmt, m, i, add_generation_prompt, out, err);
    free(m);
    return rc;
}

int chat_template_from_jinja(const char *src, size_t len, const char *bos, const char *eos,
                             bool strip_bos, chat_template **out, llc_err *err) {
    *out = NULL;
    chat_template *t = calloc(1, sizeof *t);
    if (!t) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    atomic_init(&t->fallbacks, 0);
    atomic_flag_clear(&t->noted);
    t->strip_bos = strip_bos;
    char *copy = strndup(src ? src : "", len);
    if (!copy) {
        free(t);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    t->fmt = chat_detect(copy);
    t->src = copy;
    int rc = chat_jinja_create(src, len, bos, eos, &t->jinja, err);
    if (rc) {
        free(copy);
        free(t);
        return rc;
    }
    /* the sample conversation every chat template must render */
    static const chat_msg sample[] = {{CHAT_SYSTEM, "You are helpful.", NULL}, {CHAT_USER, "Hi", NULL},
                                      {CHAT_ASSISTANT, "Hello.", NULL}, {CHAT_USER, "Bye", NULL}};
    cJSON *j = chat_msgs_to_json(sample, 4);
    char *text = NULL;
    rc = j ? render_jinja(t, j, NULL, true, NULL, &text, err) : llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    if (rc) { /* without a system message, for templates that refuse one */
        cJSON_Delete(j);
        j = chat_msgs_to_json(sample + 1, 3);
        rc = j ? render_jinja(t, j, NULL, true, NULL, &text, err) : LLC_ERR_NOMEM;
    }
    cJSON_Delete(j);
    free(text);
    if (rc) {
        chat_template_free(t);
        return rc;
    }
    *out = t;
    return 0;
}
