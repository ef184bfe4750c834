/* text_lines.h — a text cut into lines, as byte ranges: the plain data type that
 * a conversation message keeps for whoever displays it (the UI's wrap cache,
 * filled by ui/textwrap) and that storage/conv only frees. No logic here, so the
 * conversation model needs nothing from ui/. */
#ifndef LLC_STORAGE_TEXT_LINES_H
#define LLC_STORAGE_TEXT_LINES_H

#include <stddef.h>

/* One display line: a span of the wrapped text. */
typedef struct tw_line {
    size_t off; /* first byte of the line, from the start of the wrapped text */
    size_t len; /* bytes shown; the break itself is not included (a '\n', or the
                   spaces swallowed at a soft break) */
    int width;  /* cells taken by those bytes */
} tw_line;

/* A growable array of lines; zero-initialise it ({0}), free with tw_lines_free
 * (ui/textwrap) or free(lines.v). */
typedef struct tw_lines {
    tw_line *v;
    size_t n, cap;
} tw_lines;

#endif
