/* sse.h — a Server-Sent Events reader (the text/event-stream format OpenAI
 * compatible servers stream answers in). Bytes go in as they arrive, split
 * anywhere; each complete event comes out once, its data lines joined with
 * '\n'. Lines end in \n, \r\n or \r; lines starting with ':' are comments;
 * fields other than data and event are ignored. No I/O here. */
#ifndef LLC_UI_SSE_H
#define LLC_UI_SSE_H

#include <stddef.h>

typedef struct sse sse;

/* Called for each event: its type ("message" unless an event: field said
 * otherwise) and its data (NUL-terminated, len bytes). A nonzero return stops
 * sse_feed, which returns it. */
typedef int (*sse_on_event)(void *ctx, const char *event, const char *data, size_t len);

/* max_event: the most bytes one event may hold (a longer one is an error). */
int sse_create(size_t max_event, sse **out);
void sse_free(sse *s);
/* Reads n more bytes. Returns 0, a callback's nonzero value, or LLC_ERR_RANGE
 * when an event grows past max_event (the reader is then unusable). */
int sse_feed(sse *s, const char *buf, size_t n, sse_on_event on_event, void *ctx);

#endif
