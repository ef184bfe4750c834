/* reasoning.c — splitting a thinking model's answer into reasoning and content
 * (see reasoning.h): the format from the template's markers, and one state
 * machine per format over a buffer of text not yet decided. */
#include "engine/template/reasoning.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/sbuf.h"

#define H_MESSAGE "<|message|>"
#define H_ANALYSIS "<|channel|>analysis"
#define H_HEADER_MAX 512 /* a harmony header longer than this is not one: plain text */

/* What a block format's answers look like (every format but NONE and HARMONY). */
typedef struct fmt_info {
    const char *name;
    const char *open, *close; /* the reasoning block's markers (open NULL: only the prompt opens it) */
    const char *prompt_open;  /* a prompt ending in this (and whitespace) leaves the model inside the
                                 block (NULL: in open) */
    const char *drop[4];      /* the answer's own wrapper markup: dropped from the content wherever it
                                 shows, with the whitespace before it (and at the answer's end) */
    bool special;             /* the markers are control tokens: the answer must show them */
    const char *medium;       /* the template's word for reasoning_effort "medium" (NULL: "medium") */
} fmt_info;

static const fmt_info g_fmts[REASONING_N_FORMATS] = {
    [REASONING_NONE] = {"none", NULL, NULL, NULL, {NULL}, false},
    [REASONING_THINK] = {"think", "<think>", "</think>", NULL, {NULL}, false},
    [REASONING_HARMONY] = {"harmony", NULL, NULL, NULL, {NULL}, true},
    [REASONING_MINIMAX] = {"minimax", "<mm:think>", "</mm:think>", NULL, {NULL}, false},
    [REASONING_GRANITE] = {"granite", "<think>", "</think>", NULL, {"<response>", "</response>"}, false},
    [REASONING_MISTRAL] = {"mistral", "[THINK]", "[/THINK]", NULL, {NULL}, true},
    [REASONING_COMMAND_A] = {"command_a", "<|START_THINKING|>", "<|END_THINKING|>", NULL,
                             {"<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>"}, true},
    [REASONING_GEMMA4] = {"gemma4", "<|channel>thought", "<channel|>", NULL, {NULL}, true},
    [REASONING_KIMI_K3] = {"kimi_k3", "<|open|>think<|sep|>", "<|close|>think<|sep|>", NULL,
                           {"<|open|>response<|sep|>", "<|close|>response<|sep|>", "<|close|>message<|sep|>"}, true},
    [REASONING_HUNYUAN] = {"hunyuan", "<think:opensource>", "</think:opensource>", NULL, {NULL}, true,
                           "high" /* its template raises on anything but no_think/low/high */},
    [REASONING_SOLAR] = {"solar", "<|think|>", "<|end|>", NULL, {"<|begin|>assistant", "<|content|>", "<|end|>"}, true},
    [REASONING_APERTUS] = {"apertus", "<|inner_prefix|>", "<|inner_suffix|>", NULL, {NULL}, true},
    [REASONING_APRIEL] = {"apriel", NULL, "[BEGIN FINAL RESPONSE]", "Here are my reasoning steps:",
                          {"[END FINAL RESPONSE]"}, false},
};

typedef enum {
    S_START,        /* before the answer's first non-space (a block may open) */
    S_REASON_LEAD,  /* reasoning, its leading whitespace not shown */
    S_REASON,       /* reasoning */
    S_AFTER,        /* between the block and the answer (whitespace dropped) */
    S_CONTENT,      /* the answer, to the end (HARMONY's plain text) */
    S_HEADER,       /* HARMONY: a message's header, up to <|message|> */
    S_MSG_CONTENT,  /* HARMONY: a final / commentary message */
} state;

struct reasoning_parser {
    reasoning_format fmt;
    const fmt_info *info;
    reasoning_sink sink;
    state st;
    sbuf held; /* text fed and not yet decided */
    bool reason_shown; /* some reasoning went out (HARMONY: separate messages by a newline) */
    bool to_function;  /* HARMONY: this message calls a function: its markup goes on (from "to=")
                          for the tool-call reader, <|call|> included */
    int pieces;        /* pieces fed while in the reasoning (reasoning_pieces) */
};

/* Drops the first n bytes of the held text. */
static void held_drop(reasoning_parser *p, size_t n) {
    if (!n) return;
    memmove(p->held.p, p->held.p + n, p->held.len - n);
    p->held.len -= n;
    p->held.p[p->held.len] = 0;
}

reasoning_format reasoning_detect(const char *src) {
    if (!src) return REASONING_NONE;
    if (strstr(src, "<|channel|>") && strstr(src, "<|message|>")) return REASONING_HARMONY;
    if (strstr(src, "<|channel>") && strstr(src, "<channel|>")) return REASONING_GEMMA4; /* Gemma 4 */
    if (strstr(src, "<mm:think>") || strstr(src, "</mm:think>")) return REASONING_MINIMAX;
    /* tencent Hy3 builds its markers: '<think{}>'.format(':opensource') */
    if (strstr(src, "<think:opensource>") || (strstr(src, "<think{}>") && strstr(src, ":opensource")))
        return REASONING_HUNYUAN;
    /* Kimi K3's tags: open_tag('think') renders <|open|>think<|sep|> */
    if (strstr(src, "<|open|>") && strstr(src, "<|close|>") && strstr(src, "'think'")) return REASONING_KIMI_K3;
    if (strstr(src, "<|START_THINKING|>")) return REASONING_COMMAND_A;
    if (strstr(src, "[THINK]") && strstr(src, "[/THINK]")) return REASONING_MISTRAL;
    if (strstr(src, "<|inner_prefix|>") && strstr(src, "<|inner_suffix|>")) return REASONING_APERTUS;
    if (strstr(src, "<|think|>") && strstr(src, "<|begin|>assistant")) return REASONING_SOLAR;
    if (strstr(src, "[BEGIN FINAL RESPONSE]")) return REASONING_APRIEL;
    if (strstr(src, "<think>") && strstr(src, "<response>")) return REASONING_GRANITE; /* Granite 3.3 */
    if (strstr(src, "<think>") || strstr(src, "</think>")) return REASONING_THINK;
    /* MiniMax-M1: its model opens <think> though the template never shows it */
    if (strstr(src, "<beginning_of_sentence>ai name=assistant")) return REASONING_THINK;
    return REASONING_NONE;
}

const char *reasoning_format_name(reasoning_format f) {
    return (unsigned)f < REASONING_N_FORMATS ? g_fmts[f].name : "?";
}

bool reasoning_special_text(reasoning_format f) { return (unsigned)f < REASONING_N_FORMATS && g_fmts[f].special; }

const char *reasoning_effort_word(reasoning_format f, const char *effort) {
    if ((unsigned)f < REASONING_N_FORMATS && g_fmts[f].medium && effort && !strcmp(effort, "medium"))
        return g_fmts[f].medium;
    return effort;
}

static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* Whether format f reads a block (every format but NONE and HARMONY). */
static bool has_block(reasoning_format f) { return (unsigned)f < REASONING_N_FORMATS && g_fmts[f].close; }

bool reasoning_prompt_opens(reasoning_format f, const char *prompt) {
    if (!has_block(f) || !prompt) return false;
    size_t n = strlen(prompt);
    while (n > 0 && is_space(prompt[n - 1])) n--;
    const char *open = g_fmts[f].prompt_open ? g_fmts[f].prompt_open : g_fmts[f].open;
    const size_t k = strlen(open);
    return n >= k && memcmp(prompt + n - k, open, k) == 0;
}

bool reasoning_prompt_ids_open(reasoning_format f, const tokenizer *tok, const int32_t *ids, int n) {
    /* the opening marker and whitespace: a few tokens in a real vocabulary, one a byte at worst
       (Apriel's "Here are my reasoning steps:\n" is 29 bytes) */
    const int k = n < 64 ? n : 64;
    char *tail = NULL;
    bool open = has_block(f) && k > 0 && tok_decode(tok, ids + n - k, k, true, &tail, NULL) == 0 &&
                reasoning_prompt_opens(f, tail);
    free(tail);
    return open;
}

int reasoning_parser_create(reasoning_format f, bool in_reasoning, const reasoning_sink *sink,
                            reasoning_parser **out) {
    *out = NULL;
    reasoning_parser *p = calloc(1, sizeof *p);
    if (!p) return LLC_ERR_NOMEM;
    p->fmt = f;
    p->info = &g_fmts[(unsigned)f < REASONING_N_FORMATS ? f : REASONING_NONE];
    if (sink) p->sink = *sink;
    p->st = f == REASONING_HARMONY ? S_HEADER : f == REASONING_NONE ? S_CONTENT
            : in_reasoning         ? S_REASON_LEAD
                                   : S_START;
    *out = p;
    return 0;
}

void reasoning_parser_free(reasoning_parser *p) {
    if (!p) return;
    sb_free(&p->held);
    free(p);
}

static void to_reasoning(reasoning_parser *p, const char *s, size_t n) {
    if (!n) return;
    p->reason_shown = true;
    if (p->sink.reasoning) p->sink.reasoning(p->sink.ud, s, n);
}

static void to_content(reasoning_parser *p, const char *s, size_t n) {
    if (n && p->sink.content) p->sink.content(p->sink.ud, s, n);
}

/* Where marker m first occurs in s[0..n), or n. */
static size_t find(const char *s, size_t n, const char *m) {
    const char *hit = memmem(s, n, m, strlen(m));
    return hit ? (size_t)(hit - s) : n;
}

/* The length of the longest suffix of s[0..n) that is a proper prefix of m. */
static size_t partial(const char *s, size_t n, const char *m) {
    const size_t k = strlen(m);
    for (size_t len = k - 1 < n ? k - 1 : n; len > 0; len--)
        if (memcmp(s + n - len, m, len) == 0) return len;
    return 0;
}

/* Reasoning text s[0..n) that an end marker may follow: what is decided goes out;
 * a possible start of the marker and the whitespace before it are held (the
 * whitespace goes out only if more reasoning follows). Returns how much was
 * consumed. final: nothing follows, so held whitespace is dropped. */
static size_t reason_run(reasoning_parser *p, const char *s, size_t n, size_t hold, bool final) {
    size_t end = n - hold;
    if (final) end = n;
    size_t show = end;
    while (show > 0 && is_space(s[show - 1])) show--;
    to_reasoning(p, s, show);
    return final ? n : show;
}

/* ---- a block: THINK and the formats of g_fmts ---- */

/* Whether s[0..n) (n < strlen(m)) may still grow into marker m (NULL: never). */
static bool may_be(const char *s, size_t n, const char *m) {
    return m && n < strlen(m) && memcmp(s, m, n) == 0;
}

/* The first of the markers ms (NULL-ended, at most 4) in s[0..n): its position (n: none), its length. */
static size_t find_any(const char *const *ms, const char *s, size_t n, size_t *mlen) {
    size_t best = n;
    *mlen = 0;
    for (int i = 0; i < 4 && ms[i]; i++) {
        const size_t j = find(s, n, ms[i]);
        if (j < best) best = j, *mlen = strlen(ms[i]);
    }
    return best;
}

/* The answer with the format's wrapper markup dropped: text up to a marker
 * goes out, the marker and the whitespace before it do not; a possible start
 * of a marker and whitespace are held until decided (final: the whitespace
 * at the answer's end is dropped). */
static size_t content_run(reasoning_parser *p, const char *s, size_t n, bool final) {
    const char *const *drop = p->info->drop;
    size_t mlen;
    const size_t j = find_any(drop, s, n, &mlen);
    size_t hold = 0;
    for (int i = 0; j == n && !final && i < 4 && drop[i]; i++) {
        const size_t k = partial(s, n, drop[i]);
        if (k > hold) hold = k;
    }
    size_t show = j < n ? j : n - hold;
    while (show > 0 && is_space(s[show - 1])) show--;
    to_content(p, s, show);
    return j < n ? j + mlen : final ? n : show;
}

static size_t step_block(reasoning_parser *p, const char *s, size_t n, bool final) {
    const char *open = p->info->open, *close = p->info->close;
    switch (p->st) {
    case S_START: {
        size_t i = 0;
        while (i < n && is_space(s[i])) i++;
        const size_t kc = strlen(close), rest = n - i;
        if (open && rest >= strlen(open) && memcmp(s + i, open, strlen(open)) == 0) {
            p->st = S_REASON_LEAD;
            return i + strlen(open);
        }
        if (rest >= kc && memcmp(s + i, close, kc) == 0) { /* no thinking this time: the bare end marker */
            p->st = S_AFTER;
            return i + kc;
        }
        if (!final && (may_be(s + i, rest, open) || may_be(s + i, rest, close))) return 0; /* undecided */
        p->st = S_CONTENT;
        return 0;
    }
    case S_REASON_LEAD:
    case S_AFTER: {
        size_t i = 0;
        while (i < n && is_space(s[i])) i++;
        if (i < n) p->st = p->st == S_AFTER ? S_CONTENT : S_REASON;
        return i;
    }
    case S_REASON: {
        const size_t j = find(s, n, close);
        if (j < n) {
            reason_run(p, s, j, 0, true);
            p->st = S_AFTER;
            return j + strlen(close);
        }
        return reason_run(p, s, n, partial(s, n, close), final);
    }
    default:
        if (p->info->drop[0]) return content_run(p, s, n, final);
        to_content(p, s, n);
        return n;
    }
}

/* ---- HARMONY ---- */

static const char *const g_msg_ends[] = {"<|end|>", "<|return|>", "<|call|>", "<|start|>"};

/* The first end marker in s[0..n): its position (n: none) and length. */
static size_t find_msg_end(const char *s, size_t n, size_t *mlen) {
    size_t best = n;
    *mlen = 0;
    for (size_t i = 0; i < LLC_ARRAY_LEN(g_msg_ends); i++) {
        const size_t j = find(s, n, g_msg_ends[i]);
        if (j < best) best = j, *mlen = strlen(g_msg_ends[i]);
    }
    if (best < n && strncmp(s + best, "<|start|>", 9) == 0) *mlen = 0; /* it begins the next header */
    return best;
}

static size_t partial_msg_end(const char *s, size_t n) {
    size_t most = 0;
    for (size_t i = 0; i < LLC_ARRAY_LEN(g_msg_ends); i++) {
        const size_t k = partial(s, n, g_msg_ends[i]);
        if (k > most) most = k;
    }
    return most;
}

static size_t step_harmony(reasoning_parser *p, const char *s, size_t n, bool final) {
    switch (p->st) {
    case S_HEADER: {
        size_t i = 0;
        while (i < n && is_space(s[i])) i++;
        if (i < n && (s[i] != '<' || (i + 1 < n && s[i + 1] != '|'))) { /* not markup: plain text */
            p->st = S_CONTENT;
            return 0;
        }
        /* the search and the give-up see the same window, so a cut never changes the answer */
        const size_t window = n < H_HEADER_MAX ? n : H_HEADER_MAX;
        const size_t j = find(s, window, H_MESSAGE);
        if (j == window) {
            if (n >= H_HEADER_MAX) p->st = S_CONTENT; /* too long for a header: plain text */
            else return final ? n : 0;               /* a header cut off by the end is markup: dropped */
            return 0;
        }
        const bool analysis = find(s, j, H_ANALYSIS) < j;
        const size_t to = find(s, j, "to=");
        p->to_function = !analysis && to < j && find(s + to, j - to, "functions.") < j - to;
        if (p->to_function) to_content(p, s + to, j + strlen(H_MESSAGE) - to); /* "to=functions.N ...<|message|>" */
        if (analysis && p->reason_shown) to_reasoning(p, "\n", 1); /* a second analysis message */
        p->st = analysis ? S_REASON_LEAD : S_MSG_CONTENT;
        return j + strlen(H_MESSAGE);
    }
    case S_REASON_LEAD: {
        size_t i = 0;
        while (i < n && is_space(s[i])) i++;
        if (i < n) p->st = S_REASON;
        return i;
    }
    case S_REASON:
    case S_MSG_CONTENT: {
        size_t mlen;
        const size_t j = find_msg_end(s, n, &mlen);
        const bool reason = p->st == S_REASON;
        if (j < n) {
            if (reason) reason_run(p, s, j, 0, true);
            else to_content(p, s, p->to_function ? j + mlen : j); /* a call keeps its <|call|> */
            p->st = S_HEADER;
            p->to_function = false;
            return j + mlen;
        }
        const size_t hold = partial_msg_end(s, n);
        if (reason) return reason_run(p, s, n, hold, final);
        const size_t out = final ? n : n - hold;
        to_content(p, s, out);
        return out;
    }
    default:
        to_content(p, s, n);
        return n;
    }
}

/* Runs the state machine over the held text until it needs more (or, final,
 * until everything is out). */
static int run(reasoning_parser *p, bool final) {
    size_t off = 0;
    for (;;) { /* every step consumes text or moves to a state that will */
        const char *s = p->held.p ? p->held.p + off : "";
        const size_t n = p->held.len - off;
        const state before = p->st;
        const size_t used = p->fmt == REASONING_HARMONY ? step_harmony(p, s, n, final) : step_block(p, s, n, final);
        off += used;
        if (used == 0 && p->st == before) break; /* needs more text */
    }
    held_drop(p, off);
    return p->held.oom ? LLC_ERR_NOMEM : 0;
}

static bool thinking(const reasoning_parser *p) { return p->st == S_REASON_LEAD || p->st == S_REASON; }

int reasoning_feed(reasoning_parser *p, const char *text, size_t len) {
    if (!len) return 0;
    if (p->st == S_CONTENT && !p->held.len && !p->info->drop[0]) { /* the common case: straight through */
        to_content(p, text, len);
        return 0;
    }
    const bool before = thinking(p);
    sb_add(&p->held, text, len);
    if (p->held.oom) return LLC_ERR_NOMEM;
    int rc = run(p, false);
    if (before || thinking(p)) p->pieces++;
    return rc;
}

int reasoning_pieces(const reasoning_parser *p) { return p->pieces; }

int reasoning_finish(reasoning_parser *p) {
    int rc = run(p, true);
    if (p->held.len) { /* (a state that never decides: give it out as it was heading) */
        if (p->st == S_REASON || p->st == S_REASON_LEAD) to_reasoning(p, p->held.p, p->held.len);
        else to_content(p, p->held.p, p->held.len);
        held_drop(p, p->held.len);
    }
    return rc;
}
