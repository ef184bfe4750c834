/* reasoning.c — splitting a thinking model's answer into reasoning and content
 * (see reasoning.h): the format from the template's markers, and one state
 * machine per format over a buffer of text not yet decided. */
#include "engine/template/reasoning.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/sbuf.h"

#define THINK_OPEN "<think>"
#define THINK_CLOSE "</think>"
#define MM_OPEN "<mm:think>"
#define MM_CLOSE "</mm:think>"
#define H_MESSAGE "<|message|>"
#define H_ANALYSIS "<|channel|>analysis"
#define H_HEADER_MAX 512 /* a harmony header longer than this is not one: plain text */

typedef enum {
    S_START,        /* THINK: before the answer's first non-space (a block may open) */
    S_REASON_LEAD,  /* reasoning, its leading whitespace not shown */
    S_REASON,       /* reasoning */
    S_AFTER,        /* THINK: between the block and the answer (whitespace dropped) */
    S_CONTENT,      /* the answer, to the end (THINK; HARMONY's plain text) */
    S_HEADER,       /* HARMONY: a message's header, up to <|message|> */
    S_MSG_CONTENT,  /* HARMONY: a final / commentary message */
} state;

struct reasoning_parser {
    reasoning_format fmt;
    reasoning_sink sink;
    state st;
    sbuf held; /* text fed and not yet decided */
    bool reason_shown; /* some reasoning went out (HARMONY: separate messages by a newline) */
    bool to_function;  /* HARMONY: this message calls a function: its markup goes on (from "to=")
                          for the tool-call reader, <|call|> included */
    const char *open, *close; /* THINK, MINIMAX: the block's markers */
    int pieces;        /* pieces fed while in the reasoning (reasoning_pieces) */
};

static const char *const g_names[] = {"none", "think", "harmony", "minimax"};

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
    if (strstr(src, MM_OPEN) || strstr(src, MM_CLOSE)) return REASONING_MINIMAX;
    if (strstr(src, THINK_OPEN) || strstr(src, THINK_CLOSE)) return REASONING_THINK;
    /* MiniMax-M1: its model opens <think> though the template never shows it */
    if (strstr(src, "<beginning_of_sentence>ai name=assistant")) return REASONING_THINK;
    return REASONING_NONE;
}

const char *reasoning_format_name(reasoning_format f) {
    return (unsigned)f < LLC_ARRAY_LEN(g_names) ? g_names[f] : "?";
}

static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

bool reasoning_prompt_opens(reasoning_format f, const char *prompt) {
    if ((f != REASONING_THINK && f != REASONING_MINIMAX) || !prompt) return false;
    size_t n = strlen(prompt);
    while (n > 0 && is_space(prompt[n - 1])) n--;
    const char *open = f == REASONING_MINIMAX ? MM_OPEN : THINK_OPEN;
    const size_t k = strlen(open);
    return n >= k && memcmp(prompt + n - k, open, k) == 0;
}

bool reasoning_prompt_ids_open(reasoning_format f, const tokenizer *tok, const int32_t *ids, int n) {
    const int k = n < 16 ? n : 16; /* "<mm:think>" and whitespace: a few tokens in any vocabulary */
    char *tail = NULL;
    bool open = (f == REASONING_THINK || f == REASONING_MINIMAX) && k > 0 && tok_decode(tok, ids + n - k, k, true, &tail, NULL) == 0 &&
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
    p->open = f == REASONING_MINIMAX ? MM_OPEN : THINK_OPEN;
    p->close = f == REASONING_MINIMAX ? MM_CLOSE : THINK_CLOSE;
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

/* ---- THINK ---- */

static size_t step_think(reasoning_parser *p, const char *s, size_t n, bool final) {
    switch (p->st) {
    case S_START: {
        size_t i = 0;
        while (i < n && is_space(s[i])) i++;
        const size_t k = strlen(p->open), kc = strlen(p->close), rest = n - i;
        if (rest >= k && memcmp(s + i, p->open, k) == 0) {
            p->st = S_REASON_LEAD;
            return i + k;
        }
        if (rest >= kc && memcmp(s + i, p->close, kc) == 0) { /* no thinking this time: the bare end marker */
            p->st = S_AFTER;
            return i + kc;
        }
        if (!final && ((rest < k && memcmp(s + i, p->open, rest) == 0) || (rest < kc && memcmp(s + i, p->close, rest) == 0)))
            return 0; /* undecided */
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
        const size_t j = find(s, n, p->close);
        if (j < n) {
            reason_run(p, s, j, 0, true);
            p->st = S_AFTER;
            return j + strlen(p->close);
        }
        return reason_run(p, s, n, partial(s, n, p->close), final);
    }
    default:
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
        const size_t used = p->fmt == REASONING_HARMONY ? step_harmony(p, s, n, final) : step_think(p, s, n, final);
        off += used;
        if (used == 0 && p->st == before) break; /* needs more text */
    }
    held_drop(p, off);
    return p->held.oom ? LLC_ERR_NOMEM : 0;
}

static bool thinking(const reasoning_parser *p) { return p->st == S_REASON_LEAD || p->st == S_REASON; }

int reasoning_feed(reasoning_parser *p, const char *text, size_t len) {
    if (!len) return 0;
    if (p->st == S_CONTENT && !p->held.len) { /* the common case: straight through */
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
