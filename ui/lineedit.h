/* lineedit.h — the chat input: a multi-line, readline-style edit buffer with a
 * kill buffer and a history of sent inputs. Pure data structure (no curses): the
 * UI maps keys to these calls and draws from le_text / le_layout.
 *
 * The text is always valid UTF-8 with no control characters other than '\n' and
 * '\t'; the cursor is a byte offset that is always on a cluster boundary (see
 * textwrap.h), so it is never inside a UTF-8 sequence nor between a character and
 * its combining marks.
 *
 * Result codes (kernels/common.h): 0 done, LLC_ERR_NOMEM, and LE_EDGE (positive,
 * soft) when there was nothing to do: the cursor is already at the start/end, on
 * the first/last line, nothing to delete or yank, no older/newer history entry. */
#ifndef LLC_LINEEDIT_H
#define LLC_LINEEDIT_H

#include <stddef.h>

#include "ui/textwrap.h"

enum { LE_EDGE = 1 };

/* Entries kept by the history; adding more drops the oldest. */
#define LE_HISTORY_MAX 500

typedef struct lineedit lineedit;

/* A new empty buffer with an empty history; NULL when out of memory. */
lineedit *le_create(void);
void le_free(lineedit *le);

/* ---- text and cursor ---- */

/* The contents, NUL-terminated; *len (may be NULL) gets the length. Valid until
 * the next call that changes the text. */
const char *le_text(const lineedit *le, size_t *len);
/* The cursor as a byte offset into le_text. */
size_t le_cursor(const lineedit *le);
/* Moves the cursor to byte offset pos (clamped, moved back to a cluster boundary;
 * e.g. for a mouse click mapped through le_layout's lines). */
void le_set_cursor(lineedit *le, size_t pos);
/* Replaces the contents (normalised as le_insert does); cursor at the end. */
int le_set_text(lineedit *le, const char *utf8, size_t len);
/* Empties the contents (the kill buffer and history stay). */
void le_clear(lineedit *le);

/* ---- editing ---- */

/* Inserts text at the cursor and moves the cursor past it: typing and (bracketed)
 * paste alike, in time linear in len + the text after the cursor. The input is
 * normalised: CR LF and lone CR become LF (also a CR ending one call and a LF
 * starting the next), invalid UTF-8 becomes U+FFFD, other C0/C1 control characters
 * (NUL included) and DEL are dropped (they would drive the terminal). utf8 must not
 * point into le's own text (le_text); the same holds for le_set_text. */
int le_insert(lineedit *le, const char *utf8, size_t len);
/* Inserts a '\n' (Shift/Alt-Enter, or Enter in multi-line mode). */
int le_newline(lineedit *le);
/* Deletes the cluster before the cursor (a '\n' before it joins the lines). */
int le_backspace(lineedit *le);
/* Deletes the cluster under the cursor (a '\n' joins the lines). */
int le_delete(lineedit *le);

/* ---- moving ---- */

/* One cluster (a character with its combining marks) left / right. */
int le_left(lineedit *le);
int le_right(lineedit *le);
/* To the start of the previous word / past the end of the next word (Alt-b /
 * Alt-f). Word characters: ASCII letters, digits, '_', and every non-ASCII
 * character except the spaces, punctuation and symbols of U+00A0-00BF, × ÷,
 * U+2000-206F, U+2E00-2E7F, U+3000-303F and the CJK/fullwidth punctuation forms. */
int le_word_left(lineedit *le);
int le_word_right(lineedit *le);
/* To the start / end of the current line, between '\n's (Ctrl-A / Ctrl-E). */
int le_home(lineedit *le);
int le_end(lineedit *le);
/* One row up / down, keeping the column (the column first asked for is kept over
 * a run of up/down moves through shorter rows). With width > 0 the rows are those
 * of le_layout at that width, so a long wrapped line is walked row by row; with
 * width <= 0 they are the lines between '\n's. Returns LE_EDGE, not moving, when
 * already on the first / last row: the caller can then browse the history. */
int le_up(lineedit *le, int width);
int le_down(lineedit *le, int width);

/* ---- kill and yank ---- */

/* Kill commands move the text they delete into the kill buffer; consecutive kills
 * add to it (forward kills after, backward kills before), as readline does. */

/* From the cursor to the end of the line (Ctrl-K); at the end of a line, the '\n'. */
int le_kill_to_end(lineedit *le);
/* From the start of the line to the cursor (Ctrl-U); at the start of a line that
 * is not the first, the '\n' before it. */
int le_kill_to_start(lineedit *le);
/* The whitespace before the cursor and the non-whitespace before that (Ctrl-W). */
int le_kill_word_back(lineedit *le);
/* Inserts the kill buffer at the cursor (Ctrl-Y). */
int le_yank(lineedit *le);

/* ---- history ---- */

/* Adds a sent input (NUL-terminated) as the newest entry, unless it is empty or
 * equal to the newest entry (LE_EDGE then); keeps at most LE_HISTORY_MAX entries.
 * Ends any browsing (le_history_reset). */
int le_history_add(lineedit *le, const char *text);
/* Replaces the contents with the previous (older) entry, cursor at the end. The
 * first step back saves the current contents as the draft. LE_EDGE at the oldest.
 * Edits made to a recalled entry are dropped when browsing on. */
int le_history_prev(lineedit *le);
/* The next (newer) entry; past the newest, the saved draft comes back. LE_EDGE
 * when not browsing (already at the draft). */
int le_history_next(lineedit *le);
/* Stops browsing: the contents stay as they are, the saved draft is dropped, and
 * the next le_history_prev starts from the newest entry. */
void le_history_reset(lineedit *le);
/* The number of entries, and entry i (0 = oldest), for saving the history. */
size_t le_history_count(const lineedit *le);
const char *le_history_get(const lineedit *le, size_t i);

/* ---- drawing ---- */

/* Wraps the contents at width (as tw_wrap; lines is reused between calls, free it
 * with tw_lines_free) and finds where the cursor goes: *row indexes lines, *col is
 * in 0..width. The column equals width when the cursor is just past a full row
 * (or on spaces swallowed at a soft break), so draw the box one column wider than
 * width. Returns 0 or LLC_ERR_NOMEM. */
int le_layout(const lineedit *le, int width, tw_lines *lines, size_t *row, int *col);

#endif
