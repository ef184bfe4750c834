/* markdown_internal.h — what ui/markdown.c shares with the block layouts kept
 * in files of their own (ui/md_table.c): the layout context, the scratch line
 * of styled runs, and the row and inline helpers. Only ui/markdown*.c,
 * ui/md_*.c and white-box tests include it. */
#ifndef LLC_UI_MARKDOWN_INTERNAL_H
#define LLC_UI_MARKDOWN_INTERNAL_H

#include <stdbool.h>

#include "ui/markdown.h"
#include "ui/textwrap.h"

/* A line of styled text before wrapping. */
typedef struct md_line_buf {
    char *text;
    size_t len, cap;
    md_seg *runs; /* offsets into text */
    size_t n_runs, cap_runs;
} md_line_buf;

typedef struct md_ctx {
    md_doc *doc;
    md_line_buf lb;
    tw_lines wrap;
    int width;
    bool oom;
} md_ctx;

/* Grows *p (cap elements of elem bytes) to hold need: 0 or LLC_ERR_NOMEM. */
int md_grow(void **p, size_t *cap, size_t need, size_t elem);
/* Appends n bytes in style to the scratch line. */
void md_lb_add(md_ctx *c, const char *s, size_t n, uint16_t style);
/* Inline markup of s (emphasis, code spans, links) into the scratch line, on top of style. */
void md_inline(md_ctx *c, const char *s, size_t len, uint16_t style, int depth);
/* A new output row (NULL when out of memory: c->oom is set). */
md_row *md_row_open(md_ctx *c, md_row_kind kind, int level);
/* Appends n bytes in style to row r (the last row opened). */
void md_seg_add(md_ctx *c, md_row *r, const char *s, size_t n, uint16_t style);
/* Wraps the scratch line into rows of kind after prefix (first row) / cont (the others). */
void md_flush_line(md_ctx *c, md_row_kind kind, int level, const char *prefix, const char *cont,
                   uint16_t prefix_style);
/* Laid-out text lines that are plain paragraph lines (a table that cannot be drawn). */
void md_text_line(md_ctx *c, const char *s, size_t len);

/* A table (GitHub's pipe tables) starting at src: its header row, the
 * delimiter row (|---|:--:|; while it streams in, a start of one), and the
 * body rows up to a line without '|'. Lays it out as a box with aligned
 * columns, cells wrapped to fit width; returns the bytes it took (0: src does
 * not start a table). */
size_t md_table(md_ctx *c, const char *src, size_t len);

/* Column widths for a table: natural[i] cells wanted by column i (at least 1
 * is given), avail cells for all of them. Columns that fit in an even share
 * keep their width, the others share what is left. Returns 0, or -1 when
 * avail is under one cell per column. */
int md_table_widths(const int *natural, int n, int avail, int *out);

#endif
