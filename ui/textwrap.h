/* textwrap.h — UTF-8 text measured in terminal cells, and word wrap into display
 * lines. Pure logic: no curses, no locale. Widths come from built-in tables that
 * follow glibc's wcwidth() (what ncurses positions characters by), so they do not
 * depend on setlocale().
 *
 * Vocabulary used below:
 *   cell     one terminal column; CJK and most emoji take 2, combining marks 0.
 *   mark     a zero-width code point that joins the character before it
 *            (combining accents, variation selectors, ZWJ/ZWSP, ...).
 *   cluster  a base code point with the marks that follow it; the unit that is
 *            never split by wrapping or cursor movement. '\n' is a cluster of its
 *            own, and marks right after a '\n' or at the start of the text form a
 *            cluster with no base.
 *   tab      advances to the next multiple of TW_TAB cells (from the start of the
 *            display line), never past the line width.
 * Invalid UTF-8 (stray bytes, overlongs, surrogates, truncated sequences) reads as
 * U+FFFD, one byte at a time, one cell each. */
#ifndef LLC_TEXTWRAP_H
#define LLC_TEXTWRAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/text_lines.h"

#define TW_TAB 4
/* A width that means "do not wrap" (large, but safe to add cell counts to). */
#define TW_NO_WRAP (INT32_MAX / 4)

/* tw_line, tw_lines: the line spans (storage/text_lines.h, so that a stored
 * conversation can carry a wrap cache without depending on the UI). */

/* Cells taken by code point cp: 2 for East Asian wide/fullwidth and emoji, 0 for
 * marks and control characters (C0, DEL, C1; '\t' too — tabs are expanded by the
 * functions that know the column), 1 for everything else. */
int tw_char_width(uint32_t cp);

/* True for zero-width code points that join the preceding character (marks). */
bool tw_is_mark(uint32_t cp);

/* Decodes the code point at s (len bytes available, len > 0) into *cp; returns the
 * bytes consumed, at least 1. Invalid or truncated input gives U+FFFD and consumes
 * one byte. Returns 0 (and U+FFFD) only when len is 0. */
size_t tw_decode(const char *s, size_t len, uint32_t *cp);

/* Byte offset just past the cluster that starts at pos (pos < len). */
size_t tw_cluster_end(const char *s, size_t len, size_t pos);

/* Byte offset where the cluster that ends at pos starts (0 < pos; s is the start of
 * the text, nothing before it is read). Agrees with tw_cluster_end. */
size_t tw_cluster_start(const char *s, size_t pos);

/* Cells taken by s on one line starting at column 0 (tabs expanded, '\n' counts 0).
 * Saturates at INT32_MAX. */
int tw_str_width(const char *s, size_t len);

/* Length of the longest prefix of s, in whole clusters, that fits in width cells
 * (tabs expanded from column 0). width < 1 gives 0. */
size_t tw_truncate(const char *s, size_t len, int width);

/* Writes s into out (out_size bytes, NUL-terminated) cut to width cells: all of it
 * when it fits, else the longest prefix that fits in width - 1 cells followed by
 * "…" (U+2026, one cell). When out_size is what cuts, the prefix is shortened to
 * leave room for the "…" (or, below 4 bytes, cut without one). Never splits a
 * cluster. Returns the bytes written, not counting the NUL. */
size_t tw_ellipsize(const char *s, size_t len, int width, char *out, size_t out_size);

/* Wraps text into lines (replacing what they held; the array is reused), each at
 * most width cells (width < 1 counts as 1). Rules:
 *   - '\n' ends a line (hard break); an empty text or one ending in '\n' ends with
 *     an empty line, so there is always at least one line.
 *   - A word that does not fit moves to the next line when spaces after other
 *     content on the line precede it; those spaces stay at the end of the line
 *     (they fit). A space that does not fit ends the line and is swallowed with
 *     the spaces after it, and with one '\n' right after them, so no blank line
 *     appears; if they run to the end of the text, no empty line follows. So a
 *     line starts with a space only where the text starts a line with one.
 *   - A word longer than the line is broken between clusters.
 *   - A cluster is never split: a 2-cell character that does not fit in the last
 *     column moves to the next line; marks stay with their base.
 *   - The only line wider than width: at width 1, a line whose one character
 *     with cells is a 2-cell one.
 * Runs in time linear in len. Returns 0, or LLC_ERR_NOMEM (lines keeps what it had
 * made; free it as usual). */
int tw_wrap(const char *text, size_t len, int width, tw_lines *lines);

/* Incremental wrap for text that grows at its end (streamed replies): lines holds
 * tw_wrap(text, old_len, width); text now has len >= old_len bytes and its first
 * old_len are unchanged. Re-wraps from the line before the one holding the last
 * character of the old text (a few lines), giving exactly tw_wrap(text, len, width).
 * The old text may end inside a UTF-8 sequence. Returns 0 or LLC_ERR_NOMEM. */
int tw_wrap_append(const char *text, size_t old_len, size_t len, int width, tw_lines *lines);

/* Frees the array and zeroes it. */
void tw_lines_free(tw_lines *lines);

/* The column at which byte pos (a cluster boundary, line->off <= pos) is drawn on
 * a line wrapped at width; pos may lie past the span, in the spaces swallowed after
 * it, and then the column may exceed width. Walks from the start of the line. */
int tw_col_of(const char *text, const tw_line *line, size_t pos, int width);

/* The last cluster boundary in [line->off, line->off + line->len] whose column is
 * <= col. */
size_t tw_pos_at_col(const char *text, const tw_line *line, int col, int width);

/* The index of the line that byte pos belongs to: the last line starting at or
 * before pos (0 when lines is empty). Binary search. */
size_t tw_line_of(const tw_lines *lines, size_t pos);

#endif
