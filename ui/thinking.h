/* thinking.h — the folded line of a thinking model's reasoning in the chat:
 * "thought for 4.2 s, 312 tokens" once the answer began (the time the
 * reasoning streamed, measured by conv_reasoning_clock, and its token count from the provider;
 * both stored with the message's usage, so a reopened chat says the same),
 * "thinking... 3.1 s" while it still streams, and the reasoning's words for
 * answers stored before times were kept. No curses: the view draws the line. */
#ifndef LLC_UI_THINKING_H
#define LLC_UI_THINKING_H

#include <stdbool.h>
#include <stddef.h>

#include "storage/conv.h"

/* The folded (or unfolded: m->reasoning_shown) line of answer m, which has
 * reasoning, into buf (always NUL-terminated). */
void think_line(const conv_msg *m, double now_ms, char *buf, size_t n);

#endif
