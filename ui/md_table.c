/* md_table.c — GitHub's pipe tables in the Markdown layout (see
 * markdown_internal.h): a header row, a delimiter row that sets each column's
 * alignment, body rows; drawn as a box (┌─┬─┐ │ ├─┼─┤ └─┴─┘) with each
 * column as wide as its widest cell, or, when the table is wider than the
 * screen, columns that fit in an even share kept whole and the others wrapped
 * in what is left. Cells keep their inline markup; "<br>" breaks a line. */
#include <stdlib.h>
#include <string.h>

#include "kernels/common.h"
#include "ui/markdown_internal.h"

enum { MAX_COLS = 64 };
typedef enum { AL_LEFT, AL_CENTER, AL_RIGHT } align;

int md_table_widths(const int *natural, int n, int avail, int *out) {
    if (n <= 0) return 0;
    if (avail < n) return -1;
    int sum = 0;
    for (int i = 0; i < n; i++) sum += out[i] = natural[i] > 0 ? natural[i] : 1;
    if (sum <= avail) return 0;
    bool fixed[MAX_COLS] = {0};
    int left = n, rest = avail;
    for (bool changed = true; changed && left > 0;) { /* whoever fits in an even share keeps its width */
        changed = false;
        int share = rest / left;
        for (int i = 0; i < n; i++) {
            if (fixed[i] || out[i] > share) continue;
            fixed[i] = true, changed = true;
            rest -= out[i], left--;
        }
    }
    for (int i = 0, extra = left ? rest % left : 0; i < n; i++) /* the others share the rest */
        if (!fixed[i]) out[i] = rest / left + (extra-- > 0);
    return 0;
}

static size_t lead(const char *s, size_t n) {
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
    return i;
}

/* The row's cells: byte ranges of s, trimmed, without the outer pipes; '|'
 * escaped or inside `code` does not split. Returns how many (up to max). */
static int split_cells(const char *s, size_t n, size_t *off, size_t *len, int max) {
    size_t a = lead(s, n), b = n;
    while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t')) b--;
    if (a < b && s[a] == '|') a++;
    if (b > a && s[b - 1] == '|' && !(b - 1 > a && s[b - 2] == '\\')) b--;
    int k = 0;
    bool code = false;
    size_t start = a;
    for (size_t i = a; i <= b && k < max; i++) {
        if (i < b && s[i] == '\\') {
            if (i + 1 < b) {
                i++;
                continue;
            }
            i = b; /* a backslash last on the row belongs to the last cell */
        }
        if (i < b && s[i] == '`') code = !code;
        if (i == b || (s[i] == '|' && !code)) {
            size_t x = start + lead(s + start, i - start), y = i;
            while (y > x && (s[y - 1] == ' ' || s[y - 1] == '\t')) y--;
            off[k] = x, len[k] = y - x, k++;
            start = i + 1;
        }
    }
    return k;
}

static bool has_pipe(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\') i++;
        else if (s[i] == '|') return true;
    }
    return false;
}

/* A delimiter row (|---|:--:|); partial (the text's last line, still
 * streaming): any start of one. Fills the columns' alignment. */
static bool delimiter_row(const char *s, size_t n, bool partial, int n_cols, align *al) {
    size_t off[MAX_COLS], len[MAX_COLS];
    bool dash = false;
    for (size_t i = 0; i < n; i++) {
        if (!strchr("|-: \t", s[i])) return false;
        dash = dash || s[i] == '-';
    }
    if (!dash || (!has_pipe(s, n) && n_cols > 1)) return false; /* ("---" under "a | b" is a rule) */
    int k = split_cells(s, n, off, len, MAX_COLS);
    if (partial ? k > n_cols : k != n_cols) return false;
    for (int i = 0; i < n_cols; i++) {
        al[i] = AL_LEFT;
        if (i >= k) continue;
        const char *c = s + off[i];
        size_t m = len[i];
        if (!partial && (!m || !memchr(c, '-', m))) return false;
        bool l = m && c[0] == ':', r = m > 1 && c[m - 1] == ':';
        al[i] = l && r ? AL_CENTER : r ? AL_RIGHT : AL_LEFT;
    }
    return true;
}

/* The cells laid out: every cell's styled text one after the other. */
typedef struct cell {
    size_t off, len;    /* of t.text */
    size_t run, n_runs; /* of t.runs */
    int width;          /* its widest line */
} cell;

typedef struct table {
    md_line_buf t;
    cell *cells; /* [n_rows][n_cols] */
    size_t n_cells, cap_cells;
    int n_cols, n_rows;
} table;

/* Cell text s through the inline layout (with style) into the table. */
static void add_cell(md_ctx *c, table *tb, const char *s, size_t n, uint16_t style) {
    md_line_buf *lb = &c->lb;
    lb->len = lb->n_runs = 0;
    for (size_t i = 0; i <= n;) { /* <br> breaks a line */
        size_t j = i;
        size_t br = 0;
        for (; j < n; j++) {
            if (s[j] != '<') continue;
            if (!strncmp(s + j, "<br>", 4)) br = 4;
            else if (!strncmp(s + j, "<br/>", 5)) br = 5;
            else if (!strncmp(s + j, "<br />", 6)) br = 6;
            if (br) break;
        }
        md_inline(c, s + i, j - i, style, 0);
        if (j < n) md_lb_add(c, "\n", 1, style);
        i = j + (br ? br : 1);
    }
    if (c->oom || md_grow((void **)&tb->cells, &tb->cap_cells, tb->n_cells + 1, sizeof *tb->cells) ||
        md_grow((void **)&tb->t.text, &tb->t.cap, tb->t.len + lb->len + 1, 1) ||
        md_grow((void **)&tb->t.runs, &tb->t.cap_runs, tb->t.n_runs + lb->n_runs, sizeof *tb->t.runs)) {
        c->oom = true;
        return;
    }
    cell *ce = &tb->cells[tb->n_cells++];
    *ce = (cell){tb->t.len, lb->len, tb->t.n_runs, lb->n_runs, 1};
    if (lb->len) memcpy(tb->t.text + tb->t.len, lb->text, lb->len);
    for (size_t k = 0; k < lb->n_runs; k++) {
        md_seg r = lb->runs[k];
        r.off += (uint32_t)tb->t.len;
        tb->t.runs[tb->t.n_runs++] = r;
    }
    for (size_t a = 0; a < lb->len;) {
        const char *nl = memchr(lb->text + a, '\n', lb->len - a);
        size_t e = nl ? (size_t)(nl - lb->text) : lb->len;
        int w = tw_str_width(lb->text + a, e - a);
        if (w > ce->width) ce->width = w;
        a = e + 1;
    }
    tb->t.len += lb->len;
    lb->len = lb->n_runs = 0;
}

static void spaces(md_ctx *c, md_row *r, int n) {
    static const char sp[] = "                                ";
    for (; n > 0; n -= (int)sizeof sp - 1) md_seg_add(c, r, sp, (size_t)(n < (int)sizeof sp - 1 ? n : (int)sizeof sp - 1), 0);
}

/* A border: left, the columns' width of "─" joined by mid, right. */
static void border(md_ctx *c, const int *w, int n, const char *l, const char *mid, const char *r) {
    md_row *row = md_row_open(c, MD_ROW_TABLE, 0);
    md_seg_add(c, row, l, strlen(l), MD_MARK);
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < w[i] + 2; k++) md_seg_add(c, row, "─", 3, MD_MARK);
        const char *j = i < n - 1 ? mid : r;
        md_seg_add(c, row, j, strlen(j), MD_MARK);
    }
}

/* One table row: its cells wrapped to their columns, line by line. */
static void table_row(md_ctx *c, table *tb, int r, const int *w, const align *al, tw_lines *wl) {
    size_t n_lines = 1;
    for (int i = 0; i < tb->n_cols; i++) {
        cell *ce = &tb->cells[(size_t)r * (size_t)tb->n_cols + (size_t)i];
        if (tw_wrap(tb->t.text + ce->off, ce->len, w[i], &wl[i])) {
            c->oom = true;
            return;
        }
        if (wl[i].n > n_lines) n_lines = wl[i].n;
    }
    for (size_t k = 0; k < n_lines; k++) {
        md_row *row = md_row_open(c, MD_ROW_TABLE, 0);
        md_seg_add(c, row, "│", 3, MD_MARK);
        for (int i = 0; i < tb->n_cols; i++) {
            cell *ce = &tb->cells[(size_t)r * (size_t)tb->n_cols + (size_t)i];
            size_t from = 0, to = 0;
            if (k < wl[i].n) {
                from = ce->off + wl[i].v[k].off, to = from + wl[i].v[k].len;
                while (to > from && (tb->t.text[to - 1] == ' ' || tb->t.text[to - 1] == '\n')) to--;
            }
            int lw = tw_str_width(tb->t.text + from, to - from);
            int pad = w[i] - lw > 0 ? w[i] - lw : 0;
            int before = al[i] == AL_RIGHT ? pad : al[i] == AL_CENTER ? pad / 2 : 0;
            spaces(c, row, 1 + before);
            for (size_t j = ce->run; j < ce->run + ce->n_runs; j++) {
                const md_seg *s = &tb->t.runs[j];
                size_t a = s->off > from ? s->off : from, b = s->off + s->len < to ? s->off + s->len : to;
                if (b > a) md_seg_add(c, row, tb->t.text + a, b - a, s->style);
            }
            spaces(c, row, pad - before + 1);
            md_seg_add(c, row, "│", 3, MD_MARK);
        }
    }
}

size_t md_table(md_ctx *c, const char *src, size_t len) {
    const char *nl = memchr(src, '\n', len);
    size_t h_end = nl ? (size_t)(nl - src) : len;
    if (!nl || lead(src, h_end) > 3 || !has_pipe(src, h_end)) return 0;
    size_t off[MAX_COLS], ln[MAX_COLS];
    int n_cols = split_cells(src, h_end > 0 && src[h_end - 1] == '\r' ? h_end - 1 : h_end, off, ln, MAX_COLS);
    const char *d = src + h_end + 1;
    const char *dnl = memchr(d, '\n', len - h_end - 1);
    size_t d_len = dnl ? (size_t)(dnl - d) : len - h_end - 1;
    if (d_len && d[d_len - 1] == '\r') d_len--;
    align al[MAX_COLS];
    if (n_cols < 1 || !delimiter_row(d, d_len, !dnl, n_cols, al)) return 0;
    table tb = {.n_cols = n_cols};
    /* the rows: the header, then body lines that have a '|' */
    size_t pos = 0, end = dnl ? (size_t)(dnl - src) + 1 : len;
    for (int row = 0; pos < len && !c->oom; row++) {
        const char *s = src + pos;
        const char *e = memchr(s, '\n', len - pos);
        size_t n = e ? (size_t)(e - s) : len - pos;
        if (row == 1) { /* (the delimiter row) */
            pos = end;
            continue;
        }
        size_t m = n && s[n - 1] == '\r' ? n - 1 : n;
        if (row > 1 && (lead(s, m) == m || !has_pipe(s, m))) break;
        int k = split_cells(s, m, off, ln, MAX_COLS);
        for (int i = 0; i < n_cols; i++)
            if (i < k) add_cell(c, &tb, s + off[i], ln[i], row == 0 ? MD_BOLD : 0);
            else add_cell(c, &tb, "", 0, 0);
        tb.n_rows++;
        pos += n + (e ? 1 : 0);
        if (row > 1) end = pos;
    }
    int natural[MAX_COLS], w[MAX_COLS];
    for (int i = 0; i < n_cols; i++) natural[i] = 1;
    for (size_t k = 0; k < tb.n_cells; k++) {
        int i = (int)(k % (size_t)n_cols);
        if (tb.cells[k].width > natural[i]) natural[i] = tb.cells[k].width;
    }
    tw_lines wl[MAX_COLS] = {0};
    if (!c->oom && md_table_widths(natural, n_cols, c->width - 1 - 3 * n_cols, w) == 0) {
        border(c, w, n_cols, "┌", "┬", "┐");
        for (int r = 0; r < tb.n_rows && !c->oom; r++) {
            table_row(c, &tb, r, w, al, wl);
            if (r == 0) border(c, w, n_cols, "├", "┼", "┤");
        }
        border(c, w, n_cols, "└", "┴", "┘");
    } else if (!c->oom) { /* too narrow for a box: the lines as text */
        for (size_t p = 0; p < end;) {
            const char *e = memchr(src + p, '\n', end - p);
            size_t n = e ? (size_t)(e - src) - p : end - p;
            md_text_line(c, src + p, n && src[p + n - 1] == '\r' ? n - 1 : n);
            p += n + 1;
        }
    }
    for (int i = 0; i < n_cols; i++) tw_lines_free(&wl[i]);
    free(tb.t.text);
    free(tb.t.runs);
    free(tb.cells);
    return end;
}
