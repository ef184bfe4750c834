/* thinking.c — the chat's line for a thinking model's reasoning (see
 * thinking.h; its clock is storage/conv's conv_reasoning_clock). */
#include "ui/thinking.h"

#include <ctype.h>
#include <stdio.h>

/* Words in an answer's reasoning. */
static size_t word_count(const conv_msg *m) {
    size_t n = 0;
    for (size_t i = 0; i < m->r_len; i++)
        if (!isspace((unsigned char)m->reasoning[i]) && (i == 0 || isspace((unsigned char)m->reasoning[i - 1]))) n++;
    return n;
}

void think_line(const conv_msg *m, double now_ms, char *buf, size_t n) {
    const char *mark = m->reasoning_shown ? "v" : ">";
    const char *hint = m->reasoning_shown ? "Alt-R folds it" : "Alt-R or /reasoning shows it";
    const bool streaming = m->state == DB_STATE_STREAMING && !m->len;
    if (streaming && m->reasoning_t0) {
        const double s = (now_ms - m->reasoning_t0) / 1000.0;
        snprintf(buf, n, "%s thinking... %.1f s (%s)", mark, s > 0 ? s : 0, hint);
    } else if (!streaming && m->usage.reasoning_tokens > 0) {
        snprintf(buf, n, "%s thought for %.1f s, %lld token%s (%s)", mark, m->usage.reasoning_ms / 1000.0,
                 (long long)m->usage.reasoning_tokens, m->usage.reasoning_tokens == 1 ? "" : "s", hint);
    } else { /* stored before its size was, or still without a clock */
        snprintf(buf, n, "%s %s (%zu words, %s)", mark, streaming ? "thinking..." : "reasoning", word_count(m), hint);
    }
}
