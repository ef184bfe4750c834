/* layout.h — the arithmetic of the chat screen that does not need a terminal:
 * which tabs the tab bar shows, where a scrolled transcript starts, and how much
 * of the status line fits. view.c draws with it; tests check it directly. */
#ifndef LLC_UI_LAYOUT_H
#define LLC_UI_LAYOUT_H

#include <stddef.h>

/* The first tab the tab bar shows so that tab cur (of n, widths[i] cells each)
 * is whole on a bar of width cells, leaving marker cells on each side that has
 * tabs cut off (for "<" / ">"). 0 when everything up to cur fits. */
int layout_first_tab(const int *widths, int n, int cur, int width, int marker);

/* The tab a click at column x of that bar lands on (the bar drawn from
 * layout_first_tab: "<" at column 0 when tabs are cut off on the left, the
 * tabs that fit, as much of the next as fits and ">" in the last column).
 * The "<" gives the tab before the first shown, the cut-off tab and ">" the
 * first tab not wholly shown; -1 past the last tab. */
int layout_tab_at(const int *widths, int n, int cur, int width, int marker, int x);

/* The transcript: total rows, height rows on the screen, *scroll rows up from
 * the bottom (clamped here). A scrolled-up view holds still while rows are
 * added below it: *prev_total is the total at the last call (0: none yet), and
 * growth since then is added to *scroll. While scrolled up, the last screen row
 * is the "N more below" line, so *shown (the content rows drawn) is height - 1.
 * Returns the first row to draw. */
int layout_transcript(int total, int height, int *scroll, int *prev_total, int *shown);

/* The scroll (rows up from the bottom) that makes row the first one drawn, as
 * far as the transcript allows (0 when the row shows at the bottom anyway). */
int layout_scroll_to(int total, int height, int row);

/* The longest prefix of a status line (fields separated by " | ") that fits in
 * width cells, cut after a whole field, else after a whole word, else anywhere;
 * the trailing separator or spaces are left off. Returns its length in bytes. */
size_t layout_fit_fields(const char *s, size_t len, int width);

#endif
