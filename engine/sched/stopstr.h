/* stopstr.h — stop strings over streamed text. Text arrives piece by piece; a stop
 * string may span pieces. Text that could still turn out to be the start of a
 * stop string is held back until decided, so nothing is shown and then retracted. */
#ifndef LLC_STOPSTR_H
#define LLC_STOPSTR_H

#include <stdbool.h>
#include <stddef.h>

typedef struct stopstr stopstr;

/* Copies the n stop strings (empty ones are ignored). */
int stopstr_create(const char *const *stops, int n, stopstr **out);
void stopstr_free(stopstr *s);
/* Adds a piece. emit, emit_len: text now safe to show (valid until the next call).
 * Returns 1 when a stop string matched: the emitted text ends right before it
 * and nothing after it is ever emitted; 0 while the text goes on; LLC_ERR_NOMEM
 * when memory ran out (text was lost: the stream cannot go on truthfully). */
int stopstr_push(stopstr *s, const char *piece, size_t len, const char **emit, size_t *emit_len);
/* At the end of generation: whatever was held back. 0, or LLC_ERR_NOMEM. */
int stopstr_flush(stopstr *s, const char **emit, size_t *emit_len);

#endif
