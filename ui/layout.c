/* layout.c — tab bar window, transcript scroll anchoring, status line fitting
 * (see layout.h). */
#include "ui/layout.h"

#include <string.h>

#include "ui/textwrap.h"

int layout_first_tab(const int *widths, int n, int cur, int width, int marker) {
    if (n <= 0 || cur <= 0) return 0;
    if (cur >= n) cur = n - 1;
    for (int first = 0; first < cur; first++) {
        int used = first > 0 ? marker : 0;
        for (int i = first; i <= cur; i++) used += widths[i];
        if (cur < n - 1) used += marker;
        if (used <= width) return first;
    }
    return cur;
}

int layout_tab_at(const int *widths, int n, int cur, int width, int marker, int x) {
    if (n <= 0 || x < 0 || x >= width) return -1;
    int first = layout_first_tab(widths, n, cur, width, marker);
    int at = 0;
    if (first > 0) {
        if (x < marker) return first - 1;
        at = marker;
    }
    int i = first;
    for (; i < n && at + widths[i] <= width - (i < n - 1 ? marker : 0); i++) {
        if (x < at + widths[i]) return i;
        at += widths[i];
    }
    return i < n ? i : -1; /* the tab cut off on the right, or its ">" */
}

int layout_transcript(int total, int height, int *scroll, int *prev_total, int *shown) {
    if (*scroll > 0 && *prev_total > 0 && total > *prev_total) *scroll += total - *prev_total;
    *prev_total = total;
    int rows = height;
    if (*scroll > 0 && total > height) rows = height > 1 ? height - 1 : height;
    int max_scroll = total > rows ? total - rows : 0;
    if (*scroll > max_scroll) *scroll = max_scroll;
    if (*scroll < 0) *scroll = 0;
    if (*scroll == 0) rows = height;
    *shown = rows;
    int first = total - rows - *scroll;
    return first < 0 ? 0 : first;
}

int layout_scroll_to(int total, int height, int row) {
    int scroll = total - row - (height > 1 ? height - 1 : height); /* (scrolled: the last row is the marker) */
    return scroll > 0 ? scroll : 0;
}

/* Drops trailing spaces and a trailing "|". */
static size_t trim_end(const char *s, size_t n) {
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '|')) n--;
    return n;
}

size_t layout_fit_fields(const char *s, size_t len, int width) {
    size_t fit = tw_truncate(s, len, width);
    if (fit == len) return len;
    size_t best_field = 0, best_word = 0;
    for (size_t i = 1; i <= fit && i < len; i++) { /* a cut may fall right on a space */
        if (s[i] != ' ') continue;
        if (i + 2 < len && s[i + 1] == '|' && s[i + 2] == ' ') best_field = i;
        best_word = i;
    }
    size_t cut = trim_end(s, best_field);
    if (!cut) cut = trim_end(s, best_word);
    return cut ? cut : fit;
}
