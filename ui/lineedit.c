/* lineedit.c — the input buffer: one contiguous NUL-terminated byte array (so
 * le_text costs nothing and a paste is one memmove), the cursor, the kill buffer,
 * the sticky column of up/down, and the history with its saved draft. Positions
 * are kept on cluster boundaries with textwrap's cluster functions. */
#include "ui/lineedit.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common.h"

/* What the previous call was: kills chain, vertical moves keep their column. */
enum { OP_OTHER, OP_INSERT, OP_KILL, OP_VERT };

struct lineedit {
    char *buf; /* text, NUL-terminated */
    size_t len, cap, cur;
    char *kill; /* kill buffer (not NUL-terminated) */
    size_t kill_len, kill_cap;
    int last_op;
    int goal_col;  /* column kept by up/down; -1 when not moving vertically */
    bool after_cr; /* the last insert ended with a CR: drop a LF that starts the next */
    char *hist[LE_HISTORY_MAX];
    size_t hist_n;
    size_t hist_pos; /* entry shown while browsing; hist_n when not browsing */
    char *draft;     /* the contents saved by the first le_history_prev */
    size_t draft_len;
    tw_lines rows; /* scratch for up/down */
};

/* Grows *p to hold need bytes. */
static int grow(char **p, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap > SIZE_MAX / 2 ? need : *cap * 2;
    if (c < need) c = need;
    char *np = realloc(*p, c);
    if (!np) return LLC_ERR_NOMEM;
    *p = np;
    *cap = c;
    return 0;
}

lineedit *le_create(void) {
    lineedit *le = calloc(1, sizeof *le);
    if (!le) return NULL;
    if (grow(&le->buf, &le->cap, 64)) {
        free(le);
        return NULL;
    }
    le->buf[0] = 0;
    le->goal_col = -1;
    return le;
}

void le_free(lineedit *le) {
    if (!le) return;
    free(le->buf);
    free(le->kill);
    for (size_t i = 0; i < le->hist_n; i++) free(le->hist[i]);
    free(le->draft);
    tw_lines_free(&le->rows);
    free(le);
}

/* Every public call that acts starts here; returns the previous operation. */
static int begin(lineedit *le, int op) {
    int prev = le->last_op;
    le->last_op = op;
    if (op != OP_VERT) le->goal_col = -1;
    if (op != OP_INSERT) le->after_cr = false;
    return prev;
}

/* Moves the cursor off the inside of a cluster: past marks that belong to the
 * character before it (after an insert or delete joined them). */
static void snap(lineedit *le) {
    size_t c = le->cur;
    if (c == 0 || le->buf[c - 1] == '\n') return;
    while (c < le->len && (unsigned char)le->buf[c] >= 0xCC) {
        uint32_t cp;
        size_t n = tw_decode(le->buf + c, le->len - c, &cp);
        if (!tw_is_mark(cp)) break;
        c += n;
    }
    le->cur = c;
}

/* ---- text and cursor ---- */

const char *le_text(const lineedit *le, size_t *len) {
    if (len) *len = le->len;
    return le->buf;
}

size_t le_cursor(const lineedit *le) {
    return le->cur;
}

void le_set_cursor(lineedit *le, size_t pos) {
    begin(le, OP_OTHER);
    if (pos > le->len) pos = le->len;
    while (pos > 0 && ((unsigned char)le->buf[pos] & 0xC0) == 0x80) pos--;
    if (pos > 0 && pos < le->len && le->buf[pos - 1] != '\n') {
        uint32_t cp;
        tw_decode(le->buf + pos, le->len - pos, &cp);
        if (tw_is_mark(cp)) pos = tw_cluster_start(le->buf, pos);
    }
    le->cur = pos;
}

/* Copies src to dst (when dst is not NULL) normalised as le_insert describes;
 * returns the length of the result. */
static size_t sanitize(const char *src, size_t n, char *dst) {
    const unsigned char *u = (const unsigned char *)src;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        if (c < 0x80) {
            i++;
            if (c == '\r') {
                c = '\n';
                if (i < n && u[i] == '\n') i++;
            } else if (c < 0x20 ? c != '\n' && c != '\t' : c == 0x7F) {
                continue;
            }
            if (dst) dst[o] = (char)c;
            o++;
            continue;
        }
        uint32_t cp;
        size_t k = tw_decode(src + i, n - i, &cp);
        if (cp >= 0x80 && cp < 0xA0) { /* C1 control */
            i += k;
            continue;
        }
        if (k == 1) { /* invalid byte */
            if (dst) memcpy(dst + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
            continue;
        }
        if (dst) memcpy(dst + o, src + i, k);
        o += k;
        i += k;
    }
    return o;
}

/* Inserts src at the cursor, normalised; the cursor moves past it. */
static int insert_at_cursor(lineedit *le, const char *src, size_t n) {
    size_t m = sanitize(src, n, NULL), need;
    if (__builtin_add_overflow(le->len, m + 1, &need)) return LLC_ERR_NOMEM;
    int rc = grow(&le->buf, &le->cap, need);
    if (rc) return rc;
    memmove(le->buf + le->cur + m, le->buf + le->cur, le->len - le->cur + 1);
    sanitize(src, n, le->buf + le->cur);
    le->cur += m;
    le->len += m;
    snap(le);
    return 0;
}

/* Replaces the whole text; cursor at the end. Unchanged on failure. */
static int replace_text(lineedit *le, const char *src, size_t n) {
    size_t m = sanitize(src, n, NULL), need;
    if (__builtin_add_overflow(m, (size_t)1, &need)) return LLC_ERR_NOMEM;
    int rc = grow(&le->buf, &le->cap, need);
    if (rc) return rc;
    sanitize(src, n, le->buf);
    le->buf[m] = 0;
    le->len = le->cur = m;
    return 0;
}

int le_set_text(lineedit *le, const char *utf8, size_t len) {
    begin(le, OP_OTHER);
    return replace_text(le, utf8, len);
}

void le_clear(lineedit *le) {
    begin(le, OP_OTHER);
    le->len = le->cur = 0;
    le->buf[0] = 0;
}

/* ---- editing ---- */

int le_insert(lineedit *le, const char *utf8, size_t len) {
    bool skip_lf = le->after_cr;
    begin(le, OP_INSERT);
    if (skip_lf && len > 0 && utf8[0] == '\n') {
        utf8++;
        len--;
    }
    if (len == 0) return 0;
    int rc = insert_at_cursor(le, utf8, len);
    if (!rc) le->after_cr = utf8[len - 1] == '\r';
    return rc;
}

int le_newline(lineedit *le) {
    begin(le, OP_OTHER);
    return insert_at_cursor(le, "\n", 1);
}

/* Removes bytes [a, b) and puts the cursor at a. */
static void erase(lineedit *le, size_t a, size_t b) {
    memmove(le->buf + a, le->buf + b, le->len - b + 1);
    le->len -= b - a;
    le->cur = a;
    snap(le);
}

int le_backspace(lineedit *le) {
    begin(le, OP_OTHER);
    if (le->cur == 0) return LE_EDGE;
    erase(le, tw_cluster_start(le->buf, le->cur), le->cur);
    return 0;
}

int le_delete(lineedit *le) {
    begin(le, OP_OTHER);
    if (le->cur >= le->len) return LE_EDGE;
    erase(le, le->cur, tw_cluster_end(le->buf, le->len, le->cur));
    return 0;
}

/* ---- moving ---- */

int le_left(lineedit *le) {
    begin(le, OP_OTHER);
    if (le->cur == 0) return LE_EDGE;
    le->cur = tw_cluster_start(le->buf, le->cur);
    return 0;
}

int le_right(lineedit *le) {
    begin(le, OP_OTHER);
    if (le->cur >= le->len) return LE_EDGE;
    le->cur = tw_cluster_end(le->buf, le->len, le->cur);
    return 0;
}

/* Letters, digits and '_' in ASCII; outside ASCII everything but the spaces and
 * punctuation of these blocks. */
static bool is_word_cp(uint32_t cp) {
    if (cp < 0x80)
        return (cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') ||
               (cp >= 'a' && cp <= 'z') || cp == '_';
    static const struct {
        uint32_t lo, hi;
    } not_word[] = {
        {0x00A0, 0x00BF}, {0x00D7, 0x00D7}, {0x00F7, 0x00F7}, {0x2000, 0x206F},
        {0x2E00, 0x2E7F}, {0x3000, 0x303F}, {0xFE10, 0xFE1F}, {0xFE30, 0xFE4F},
        {0xFF01, 0xFF0F}, {0xFF1A, 0xFF20}, {0xFF3B, 0xFF40}, {0xFF5B, 0xFF65},
    };
    for (size_t i = 0; i < LLC_ARRAY_LEN(not_word); i++)
        if (cp >= not_word[i].lo && cp <= not_word[i].hi) return false;
    return true;
}

static uint32_t cp_at(const lineedit *le, size_t pos) {
    uint32_t cp;
    tw_decode(le->buf + pos, le->len - pos, &cp);
    return cp;
}

/* Whether the cluster before pos (pos > 0) starts with a word character. */
static bool word_before(const lineedit *le, size_t pos, size_t *start) {
    *start = tw_cluster_start(le->buf, pos);
    return is_word_cp(cp_at(le, *start));
}

int le_word_left(lineedit *le) {
    begin(le, OP_OTHER);
    if (le->cur == 0) return LE_EDGE;
    size_t p = le->cur, q;
    while (p > 0 && !word_before(le, p, &q)) p = q;
    while (p > 0 && word_before(le, p, &q)) p = q;
    le->cur = p;
    return 0;
}

int le_word_right(lineedit *le) {
    begin(le, OP_OTHER);
    if (le->cur >= le->len) return LE_EDGE;
    size_t p = le->cur;
    while (p < le->len && !is_word_cp(cp_at(le, p))) p = tw_cluster_end(le->buf, le->len, p);
    while (p < le->len && is_word_cp(cp_at(le, p))) p = tw_cluster_end(le->buf, le->len, p);
    le->cur = p;
    return 0;
}

/* Start of the line holding pos: just after the '\n' before it. */
static size_t line_start(const lineedit *le, size_t pos) {
    const char *nl = pos ? memrchr(le->buf, '\n', pos) : NULL;
    return nl ? (size_t)(nl - le->buf) + 1 : 0;
}

/* End of the line holding pos: its '\n', or the end of the text. */
static size_t line_end(const lineedit *le, size_t pos) {
    const char *nl = memchr(le->buf + pos, '\n', le->len - pos);
    return nl ? (size_t)(nl - le->buf) : le->len;
}

int le_home(lineedit *le) {
    begin(le, OP_OTHER);
    size_t p = line_start(le, le->cur);
    if (p == le->cur) return LE_EDGE;
    le->cur = p;
    return 0;
}

int le_end(lineedit *le) {
    begin(le, OP_OTHER);
    size_t p = line_end(le, le->cur);
    if (p == le->cur) return LE_EDGE;
    le->cur = p;
    return 0;
}

/* Row and column of pos in rows (wrapped from text at width); the column is
 * capped at width (spaces swallowed after a full row). */
static size_t locate(const char *text, const tw_lines *rows, size_t pos, int width, int *col) {
    size_t r = tw_line_of(rows, pos);
    int c = tw_col_of(text, &rows->v[r], pos, width);
    *col = c > width ? width : c;
    return r;
}

/* The position on row r nearest to column goal, not past it: the last cluster
 * boundary drawn on that row (its end belongs to the next row when that row starts
 * right there). */
static size_t pos_in_row(const char *text, const tw_lines *rows, size_t r, int goal, int width) {
    const tw_line *ln = &rows->v[r];
    size_t b = tw_pos_at_col(text, ln, goal, width), end = ln->off + ln->len;
    if (b == end && b > ln->off && r + 1 < rows->n && rows->v[r + 1].off == end)
        b = tw_cluster_start(text, b);
    return b;
}

/* le_up (dir < 0) and le_down (dir > 0). Only the '\n'-delimited lines involved
 * are wrapped: rows never span a '\n', so they wrap the same on their own. */
static int vertical(lineedit *le, int width, int dir) {
    begin(le, OP_VERT);
    int w = width > 0 ? width : TW_NO_WRAP;
    size_t ls = line_start(le, le->cur), lend = line_end(le, le->cur);
    int rc = tw_wrap(le->buf + ls, lend - ls, w, &le->rows);
    if (rc) return rc;
    int col;
    size_t row = locate(le->buf + ls, &le->rows, le->cur - ls, w, &col);
    int goal = le->goal_col >= 0 ? le->goal_col : col;
    size_t base = ls, target;
    if (dir < 0 && row > 0) {
        target = row - 1;
    } else if (dir > 0 && row + 1 < le->rows.n) {
        target = row + 1;
    } else if (dir < 0) {
        if (ls == 0) return LE_EDGE;
        base = line_start(le, ls - 1);
        if ((rc = tw_wrap(le->buf + base, ls - 1 - base, w, &le->rows))) return rc;
        target = le->rows.n - 1;
    } else {
        if (lend == le->len) return LE_EDGE;
        base = lend + 1;
        if ((rc = tw_wrap(le->buf + base, line_end(le, base) - base, w, &le->rows))) return rc;
        target = 0;
    }
    le->cur = base + pos_in_row(le->buf + base, &le->rows, target, goal, w);
    le->goal_col = goal;
    return 0;
}

int le_up(lineedit *le, int width) {
    return vertical(le, width, -1);
}

int le_down(lineedit *le, int width) {
    return vertical(le, width, 1);
}

/* ---- kill and yank ---- */

/* Moves bytes [a, b) into the kill buffer (after or before what a chain of kills
 * already put there) and deletes them. */
static int kill_range(lineedit *le, size_t a, size_t b, bool backward, bool chain) {
    size_t n = b - a;
    if (!chain) le->kill_len = 0;
    int rc = grow(&le->kill, &le->kill_cap, le->kill_len + n);
    if (rc) return rc;
    if (backward) {
        memmove(le->kill + n, le->kill, le->kill_len);
        memcpy(le->kill, le->buf + a, n);
    } else {
        memcpy(le->kill + le->kill_len, le->buf + a, n);
    }
    le->kill_len += n;
    erase(le, a, b);
    return 0;
}

int le_kill_to_end(lineedit *le) {
    bool chain = begin(le, OP_KILL) == OP_KILL;
    size_t e = line_end(le, le->cur);
    if (e == le->cur) {
        if (e == le->len) return LE_EDGE;
        e++; /* the '\n' */
    }
    return kill_range(le, le->cur, e, false, chain);
}

int le_kill_to_start(lineedit *le) {
    bool chain = begin(le, OP_KILL) == OP_KILL;
    size_t s = line_start(le, le->cur);
    if (s == le->cur) {
        if (s == 0) return LE_EDGE;
        s--; /* the '\n' */
    }
    return kill_range(le, s, le->cur, true, chain);
}

static bool is_blank_cp(uint32_t cp) {
    return cp == ' ' || cp == '\t' || cp == '\n';
}

int le_kill_word_back(lineedit *le) {
    bool chain = begin(le, OP_KILL) == OP_KILL;
    if (le->cur == 0) return LE_EDGE;
    size_t p = le->cur, q;
    while (p > 0 && is_blank_cp(cp_at(le, q = tw_cluster_start(le->buf, p)))) p = q;
    while (p > 0 && !is_blank_cp(cp_at(le, q = tw_cluster_start(le->buf, p)))) p = q;
    return kill_range(le, p, le->cur, true, chain);
}

int le_yank(lineedit *le) {
    begin(le, OP_OTHER);
    if (le->kill_len == 0) return LE_EDGE;
    return insert_at_cursor(le, le->kill, le->kill_len);
}

/* ---- history ---- */

void le_history_reset(lineedit *le) {
    le->hist_pos = le->hist_n;
    free(le->draft);
    le->draft = NULL;
    le->draft_len = 0;
}

int le_history_add(lineedit *le, const char *text) {
    le_history_reset(le);
    if (!text || !*text) return LE_EDGE;
    if (le->hist_n && !strcmp(le->hist[le->hist_n - 1], text)) return LE_EDGE;
    char *copy = strdup(text);
    if (!copy) return LLC_ERR_NOMEM;
    if (le->hist_n == LE_HISTORY_MAX) {
        free(le->hist[0]);
        memmove(le->hist, le->hist + 1, (LE_HISTORY_MAX - 1) * sizeof *le->hist);
        le->hist_n--;
    }
    le->hist[le->hist_n++] = copy;
    le->hist_pos = le->hist_n;
    return 0;
}

int le_history_prev(lineedit *le) {
    begin(le, OP_OTHER);
    if (le->hist_pos == 0) return LE_EDGE;
    bool saved = false;
    if (le->hist_pos == le->hist_n) {
        free(le->draft);
        le->draft = malloc(le->len + 1);
        if (!le->draft) return LLC_ERR_NOMEM;
        memcpy(le->draft, le->buf, le->len + 1);
        le->draft_len = le->len;
        saved = true;
    }
    const char *e = le->hist[le->hist_pos - 1];
    int rc = replace_text(le, e, strlen(e));
    if (rc) {
        if (saved) le_history_reset(le);
        return rc;
    }
    le->hist_pos--;
    return 0;
}

int le_history_next(lineedit *le) {
    begin(le, OP_OTHER);
    if (le->hist_pos >= le->hist_n) return LE_EDGE;
    if (le->hist_pos + 1 == le->hist_n) {
        int rc = replace_text(le, le->draft ? le->draft : "", le->draft_len);
        if (rc) return rc;
        le_history_reset(le);
        return 0;
    }
    const char *e = le->hist[le->hist_pos + 1];
    int rc = replace_text(le, e, strlen(e));
    if (rc) return rc;
    le->hist_pos++;
    return 0;
}

size_t le_history_count(const lineedit *le) {
    return le->hist_n;
}

const char *le_history_get(const lineedit *le, size_t i) {
    return i < le->hist_n ? le->hist[i] : NULL;
}

/* ---- drawing ---- */

int le_layout(const lineedit *le, int width, tw_lines *lines, size_t *row, int *col) {
    int w = width < 1 ? 1 : width;
    int rc = tw_wrap(le->buf, le->len, w, lines);
    if (rc) return rc;
    *row = locate(le->buf, lines, le->cur, w, col);
    return 0;
}
