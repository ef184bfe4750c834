/* sbuf.h — the one growable buffer: bytes or text appended at the end, always
 * NUL-terminated, with a sticky out-of-memory flag, so a writer appends freely and
 * checks once at the end (as redis's sds, without the header trick). A zeroed
 * sbuf is empty; nothing is allocated until the first append. Not thread-safe:
 * one owner at a time. */
#ifndef LLC_SBUF_H
#define LLC_SBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct sbuf {
    char *p;    /* NULL while nothing was appended; else p[len] == 0 */
    size_t len; /* bytes, without the NUL */
    size_t cap; /* bytes allocated */
    bool oom;   /* an append failed: the content is incomplete, later appends are ignored */
} sbuf;

void sb_add(sbuf *b, const void *src, size_t n);
void sb_str(sbuf *b, const char *s); /* (NULL appends nothing) */
void sb_putc(sbuf *b, char c);
void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_vprintf(sbuf *b, const char *fmt, va_list ap);
/* Room for n more bytes (and the NUL) after the content, to be written in place
 * at p + len (a recv into the buffer) and counted with sb_wrote; false (and oom)
 * when it cannot be had. */
bool sb_reserve(sbuf *b, size_t n);
/* Counts n bytes written in place after sb_reserve (n at most what it reserved). */
void sb_wrote(sbuf *b, size_t n);
/* Drops the first n bytes (the consumed head of a queue); the rest moves to the front. */
void sb_drop(sbuf *b, size_t n);
/* Empties the buffer, keeping its memory (and its oom flag). */
void sb_clear(sbuf *b);
/* The text so far ("" while empty); valid until the next append. */
const char *sb_cstr(const sbuf *b);
/* The malloc'd text (an empty string when empty), for the caller to free; the
 * buffer is left empty. NULL when an append had failed (the buffer is freed). */
char *sb_take(sbuf *b);
void sb_free(sbuf *b);

#endif
