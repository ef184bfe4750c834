/* view.c — the curses main loop (see view.h): layout, drawing with cached word
 * wrap, the start-up warnings, key decoding (Alt-, Ctrl-PgUp/PgDn, bracketed
 * paste, readline's keys), the mouse (wheel, clicks on the tab bar and on a
 * code block's border), an input box per tab (drafts), Ctrl-X Ctrl-E in
 * $EDITOR, redraw throttling. */
#define _XOPEN_SOURCE_EXTENDED 1
#include "ui/view.h"

#include <curses.h>
#include <errno.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <ctype.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/sbuf.h"
#include "ui/clipboard.h"
#include "ui/layout.h"
#include "ui/lineedit.h"
#include "ui/markdown.h"
#include "ui/textwrap.h"
#include "ui/thinking.h"

enum {
    K_PASTE_BEGIN = KEY_MAX + 1,
    K_PASTE_END,
    K_CTRL_PGUP,
    K_CTRL_PGDN,
};

enum { C_USER = 1, C_BOT, C_ERROR, C_DIM, C_TAB, C_CODE, C_CODEBLOCK, C_HEADING, C_LINK, C_QUOTE,
       C_KEYWORD, C_TYPE, C_STRING, C_COMMENT, C_NUMBER };

/* A code block's top border on the screen: the shown message (-1: none) and its row in the message's layout. */
typedef struct code_top {
    int msg;
    size_t md_row;
} code_top;

typedef struct view {
    ui_app *a;
    lineedit *le;
    bool color;
    bool in_paste;
    sbuf paste;            /* bytes of a bracketed paste, inserted at its end */
    tw_lines panel_wrap, input_wrap, queued_wrap, warn_wrap;
    double last_draw;
    bool ctrl_x;           /* Ctrl-X was pressed: Ctrl-E may follow */
    bool alt_k;            /* the last key was Alt-K: another takes the code block before */
    const conv *tab;       /* the tab whose draft the input box holds */
    unsigned tabs_gen;     /* a->tabs_gen then */
    const char *panel_seen; /* the panel last drawn: a new one is scrolled to its first line */
    code_top *tops;         /* [n_tops]: per transcript row drawn, the code block border on it */
    int n_tops;
    const conv *tops_tab;   /* the tab they were drawn for, the screen rows they start at and span */
    int tops_top, tops_height;
} view;

static volatile sig_atomic_t g_stop;
static void on_term(int sig) { (void)sig; g_stop = 1; }

static void restore_terminal(void) {
    if (!isendwin()) {
        printf("\033[?2004l");
        fflush(stdout);
        endwin();
    }
}

/* ---- drawing ---- */

static void style(view *v, int pair, attr_t extra) {
    attrset(extra | (v->color && pair ? COLOR_PAIR(pair) : 0));
}

/* Draws len bytes at (y, x) clipped to width cells. */
static void put(int y, int x, const char *s, size_t len, int width) {
    if (width <= 0) return;
    size_t fit = tw_truncate(s, len, width);
    mvaddnstr(y, x, s, (int)fit);
}

static void rewrap(conv_msg *m, int width) {
    if (m->wrap_width != width || m->len < m->wrap_len || !m->wrap.n) {
        tw_wrap(m->text, m->len, width, &m->wrap);
    } else if (m->len > m->wrap_len) {
        tw_wrap_append(m->text, m->wrap_len, m->len, width, &m->wrap);
    }
    m->wrap_width = width;
    m->wrap_len = m->len;
}

/* One line of the transcript, as a description to draw later: plain text in
 * one style, or a row of laid-out Markdown. */
typedef struct tline {
    const char *text;
    size_t len;
    int pair;
    attr_t attr;
    int indent;
    const md_doc *md;    /* non-NULL: draw row md_row of it */
    size_t md_row;
    int msg;             /* the shown message it belongs to (-1: none) */
} tline;

typedef struct rows {
    tline *v;
    size_t n, cap;
} rows;

static void rows_push(rows *r, const char *text, size_t len, int pair, attr_t attr, int indent) {
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        tline *p = realloc(r->v, cap * sizeof *p);
        if (!p) return;
        r->v = p;
        r->cap = cap;
    }
    r->v[r->n++] = (tline){text, len, pair, attr, indent, NULL, 0, -1};
}

static void rows_push_md(rows *r, const md_doc *d, size_t k, int indent, int msg) {
    size_t n = r->n;
    rows_push(r, "", 0, 0, A_NORMAL, indent);
    if (r->n > n) r->v[n].md = d, r->v[n].md_row = k, r->v[n].msg = msg;
}

static void md_free_cache(void *p) {
    md_doc_free(p);
    free(p);
}

/* An answer laid out as Markdown at width, redone only when its text or the width changed. */
static const md_doc *markdown_of(conv_msg *m, int width) {
    md_doc *d = m->view;
    if (!d) {
        if (!(d = calloc(1, sizeof *d))) return NULL;
        m->view = d;
        m->view_free = md_free_cache;
        d->src_len = (size_t)-1;
    }
    if (d->src_len != m->len || d->width != width) md_layout(m->text, m->len, width, d);
    return d;
}

/* Curses attributes for a Markdown style. */
static attr_t md_attr(const view *v, unsigned st, int *pair) {
    attr_t a = A_NORMAL;
    *pair = 0;
    if (st & MD_BOLD) a |= A_BOLD;
#ifdef A_ITALIC
    if (st & MD_ITALIC) a |= A_ITALIC;
#else
    if (st & MD_ITALIC) a |= A_UNDERLINE;
#endif
    if (st & MD_STRIKE) a |= A_DIM;
    if (st & MD_LINK) a |= A_UNDERLINE, *pair = C_LINK;
    if (st & MD_URL) a |= A_DIM;
    if (st & MD_QUOTE) *pair = C_QUOTE;
    if (st & MD_HEADING) *pair = C_HEADING;
    if (st & MD_CODE) *pair = C_CODE;
    if (st & MD_CODEBLOCK) *pair = C_CODEBLOCK;
    /* syntax colours (on the code block's background); without colour: keywords bold, comments dim */
    if (st & MD_KEYWORD) *pair = C_KEYWORD, a |= A_BOLD;
    if (st & MD_TYPE) *pair = C_TYPE;
    if (st & MD_STRING) *pair = C_STRING;
    if (st & MD_NUMBER) *pair = C_NUMBER;
    if (st & MD_COMMENT) *pair = C_COMMENT, a |= v->color ? A_NORMAL : A_DIM;
    if ((st & MD_MARK) && !(st & MD_CODEBLOCK)) a |= A_DIM;
    if (!v->color && (st & (MD_CODE | MD_CODEBLOCK)) && !(st & (MD_MARK | MD_COMMENT))) a |= A_BOLD;
    return a;
}

static void draw_md_row(view *v, int y, int x, int W, const md_doc *d, size_t ri) {
    const md_row *row = &d->rows[ri];
    for (uint32_t k = 0; k < row->n_seg && x < W; k++) {
        const md_seg *sg = &d->segs[row->seg + k];
        int pair;
        attr_t a = md_attr(v, sg->style, &pair);
        if (row->kind == MD_ROW_HEADING && row->level <= 2) a |= A_UNDERLINE;
        style(v, pair, a);
        put(y, x, d->text + sg->off, sg->len, W - x);
        x += tw_str_width(d->text + sg->off, sg->len);
    }
    if (v->color && (row->kind == MD_ROW_CODE || row->kind == MD_ROW_CODE_TOP || row->kind == MD_ROW_CODE_END)) {
        style(v, C_CODEBLOCK, A_NORMAL); /* the code's background runs to the edge */
        for (; x < W; x++) mvaddch(y, x, ' ');
    }
    attrset(A_NORMAL);
}

/* Tab i's label on the bar into buf; returns its width in cells. */
static int tab_label(const ui_app *a, int i, char *buf, size_t n) {
    const conv *c = a->tabs[i];
    char title[64];
    tw_ellipsize(c->title, strlen(c->title), 18, title, sizeof title);
    snprintf(buf, n, " %d:%s%s ", i + 1, title, c->req_id ? " *" : "");
    return tw_str_width(buf, strlen(buf));
}

/* The tab bar: the tabs that fit, always the current one among them ("<" and
 * ">" say that tabs are cut off on that side). */
static void draw_tabs(view *v, int W) {
    ui_app *a = v->a;
    move(0, 0);
    style(v, C_DIM, A_REVERSE);
    hline(' ', W);
    char (*labels)[96] = malloc((size_t)(a->n_tabs ? a->n_tabs : 1) * sizeof *labels);
    int *widths = malloc((size_t)(a->n_tabs ? a->n_tabs : 1) * sizeof *widths);
    if (!labels || !widths) {
        free(labels);
        free(widths);
        return;
    }
    for (int i = 0; i < a->n_tabs; i++) widths[i] = tab_label(a, i, labels[i], sizeof labels[i]);
    int first = layout_first_tab(widths, a->n_tabs, a->cur, W, 1);
    int x = 0;
    if (first > 0) put(0, x++, "<", 1, W);
    int i = first;
    for (; i < a->n_tabs && x + widths[i] <= W - (i < a->n_tabs - 1 ? 1 : 0); i++) {
        bool cur = i == a->cur;
        style(v, cur ? C_TAB : C_DIM, cur ? A_BOLD : A_REVERSE);
        put(0, x, labels[i], strlen(labels[i]), W - x);
        x += widths[i];
    }
    if (i < a->n_tabs) { /* more to the right: as much of the next as fits, then ">" */
        style(v, C_DIM, A_REVERSE);
        if (W - 1 - x > 0) put(0, x, labels[i], strlen(labels[i]), W - 1 - x);
        put(0, W - 1, ">", 1, 1);
    }
    attrset(A_NORMAL);
    free(labels);
    free(widths);
}

/* "You" / "Assistant" with the answer's state, as static text. */
static const char *header_of(const conv_msg *m) {
    static const char *user[] = {"You", "You ...", "You [interrupted]", "You [stopped]", "You [error]"};
    static const char *bot[] = {"Assistant", "Assistant ...", "Assistant [interrupted]",
                                "Assistant [stopped]", "Assistant [error]"};
    int st = m->state >= 0 && m->state <= DB_STATE_ERROR ? m->state : 0;
    return m->role == DB_ROLE_USER ? user[st] : bot[st];
}

/* The line under an answer that ended before it was done saying: at max_tokens
 * or at the end of the context (NULL: it was not cut). */
static const char *finish_marker(const conv_msg *m) {
    if (m->role != DB_ROLE_ASSISTANT || m->state != DB_STATE_DONE) return NULL;
    if (!strcmp(m->finish, "length")) return "[cut off at max_tokens (/set max_tokens N)]";
    if (!strcmp(m->finish, "context")) return "[cut off: the context is full]";
    return NULL;
}

/* The code blocks' top borders on the screen, for a click to copy one. */
static void code_tops_reset(view *v, const conv *c, int top, int height) {
    if (height > v->n_tops) {
        code_top *t = realloc(v->tops, (size_t)height * sizeof *t);
        if (!t) height = v->n_tops;
        else v->tops = t, v->n_tops = height;
    }
    for (int y = 0; y < v->n_tops; y++) v->tops[y] = (code_top){-1, 0};
    v->tops_tab = c, v->tops_top = top, v->tops_height = height;
}

static void draw_transcript(view *v, int top, int height, int W) {
    ui_app *a = v->a;
    conv *c = ui_app_tab(a);
    int width = W - 2 > 1 ? W - 2 : 1;
    rows r = {0};
    static char alt_header[64]; /* lives until the next draw */
    static char marker[96];
    char *owned[64]; /* headers made for this draw */
    int n_owned = 0;
    int n = conv_n_shown(c);
    if (c->dropped_turns > 0) {
        snprintf(marker, sizeof marker, "~ %d earlier message%s left out: the context is full ~",
                 c->dropped_turns, c->dropped_turns == 1 ? " is" : "s are");
        rows_push(&r, marker, strlen(marker), C_DIM, A_DIM, 0);
    }
    if (n == 0 && !a->panel) {
        static const char *hello = "Type a message and press Enter. F1 or /help shows keys and commands.";
        rows_push(&r, hello, strlen(hello), C_DIM, A_DIM, 0);
    }
    int focus_row = -1; /* the row of c->focus_id's header */
    for (int i = 0; i < n; i++) {
        conv_msg *m = conv_shown(c, i);
        bool user = m->role == DB_ROLE_USER;
        const char *h = header_of(m);
        if (c->focus_id && m->id == c->focus_id) focus_row = (int)r.n;
        if (!user && i == n - 1 && c->n_alts > 1) {
            snprintf(alt_header, sizeof alt_header, "%s  (answer %d of %d, /alt for the next)", h,
                     c->alt_cur + 1, c->n_alts);
            h = alt_header;
        }
        char *vh = NULL; /* another version of a message of yours (/edit): lives until the draw ends */
        if (user && m->n_versions > 1 && asprintf(&vh, "%s  (version %d of %d, /branch prev|next)", h, m->version,
                                                  m->n_versions) >= 0) {
            if (n_owned < (int)(sizeof owned / sizeof *owned)) owned[n_owned++] = vh, h = vh;
            else free(vh);
        }
        rows_push(&r, h, strlen(h), user ? C_USER : C_BOT, A_BOLD, 0);
        if (!user && m->r_len) { /* a thinking model's reasoning: one folded line, or all of it */
            char *line = malloc(160); /* "thought for 4.2 s, 312 tokens (...)": ui/thinking.h */
            if (line) {
                think_line(m, llc_now_ms(), line, 160);
                if (n_owned < (int)(sizeof owned / sizeof *owned)) {
                    owned[n_owned++] = line;
                    rows_push(&r, line, strlen(line), C_DIM, A_DIM, 2);
                } else {
                    free(line);
                }
            }
            if (m->reasoning_shown) {
                tw_wrap(m->reasoning, m->r_len, width > 4 ? width - 2 : 1, &m->r_wrap);
                for (size_t k = 0; k < m->r_wrap.n; k++)
                    rows_push(&r, m->reasoning + m->r_wrap.v[k].off, m->r_wrap.v[k].len, C_DIM, A_DIM, 4);
            }
        }
        const md_doc *md = user ? NULL : markdown_of(m, width);
        if (md && (md->n_rows || !m->len)) {
            for (size_t k = 0; k < md->n_rows; k++) rows_push_md(&r, md, k, 2, i);
        } else {
            rewrap(m, width);
            for (size_t k = 0; k < m->wrap.n; k++)
                rows_push(&r, m->text + m->wrap.v[k].off, m->wrap.v[k].len, 0, A_NORMAL, 2);
        }
        if (m->error[0]) rows_push(&r, m->error, strlen(m->error), C_ERROR, A_NORMAL, 2);
        const char *cut = finish_marker(m);
        if (cut) rows_push(&r, cut, strlen(cut), C_DIM, A_DIM, 2);
        rows_push(&r, "", 0, 0, A_NORMAL, 0);
    }
    if (c->queued) { /* a message waiting for the answer to end */
        static const char *qh = "You (queued: sent when the answer ends)";
        rows_push(&r, qh, strlen(qh), C_USER, A_DIM, 0);
        tw_wrap(c->queued, c->queued_len, width, &v->queued_wrap);
        for (size_t k = 0; k < v->queued_wrap.n; k++)
            rows_push(&r, c->queued + v->queued_wrap.v[k].off, v->queued_wrap.v[k].len, 0, A_DIM, 2);
        rows_push(&r, "", 0, 0, A_NORMAL, 0);
    }
    int panel_row = -1; /* a panel just opened: its first line starts the screen (F1's keys come first) */
    if (a->panel && a->panel != v->panel_seen) panel_row = (int)r.n;
    v->panel_seen = a->panel;
    if (a->panel) {
        tw_wrap(a->panel, strlen(a->panel), W > 1 ? W - 1 : 1, &v->panel_wrap);
        for (size_t k = 0; k < v->panel_wrap.n; k++)
            rows_push(&r, a->panel + v->panel_wrap.v[k].off, v->panel_wrap.v[k].len, C_DIM,
                     k == 0 ? A_BOLD : A_NORMAL, 0);
    }
    int total = (int)r.n, shown;
    if (panel_row >= 0) {
        c->scroll = layout_scroll_to(total, height, panel_row);
        c->scroll_rows = total;
    }
    if (c->focus_id) { /* (a search hit opened): scroll so that the message starts the screen */
        if (focus_row >= 0) {
            c->scroll = layout_scroll_to(total, height, focus_row);
            c->scroll_rows = total;
        }
        c->focus_id = 0;
    }
    int first = layout_transcript(total, height, &c->scroll, &c->scroll_rows, &shown);
    code_tops_reset(v, c, top, height);
    for (int y = 0; y < height; y++) {
        move(top + y, 0);
        clrtoeol();
        int idx = first + y;
        if (idx >= total || y >= shown) continue;
        tline *rw = &r.v[idx];
        if (rw->md && rw->md->rows[rw->md_row].kind == MD_ROW_CODE_TOP && y < v->n_tops)
            v->tops[y] = (code_top){rw->msg, rw->md_row};
        if (rw->md) {
            draw_md_row(v, top + y, rw->indent, W, rw->md, rw->md_row);
            continue;
        }
        style(v, rw->pair, rw->attr);
        put(top + y, rw->indent, rw->text, rw->len, W - rw->indent);
        attrset(A_NORMAL);
    }
    if (c->scroll > 0) {
        style(v, C_DIM, A_REVERSE);
        char more[48];
        snprintf(more, sizeof more, " %d more below (PgDn) ", c->scroll);
        /* on a line of its own (layout_transcript keeps it free): no text hides under it */
        put(top + height - 1, W - tw_str_width(more, strlen(more)) > 0 ? W - tw_str_width(more, strlen(more)) : 0,
            more, strlen(more), W);
        attrset(A_NORMAL);
    }
    free(r.v);
    for (int k = 0; k < n_owned; k++) free(owned[k]);
}

static void draw_status(view *v, int y, int W) {
    move(y, 0);
    style(v, C_DIM, A_REVERSE);
    hline(' ', W);
    const char *st = v->a->status;
    put(y, 0, st, layout_fit_fields(st, strlen(st), W), W);
    attrset(A_NORMAL);
}

/* The input box: a separator (with the notice, if any) and the input rows.
 * Returns the rows it takes. */
static int input_rows(view *v, int W, int H) {
    size_t row;
    int col;
    le_layout(v->le, W - 3 > 1 ? W - 3 : 1, &v->input_wrap, &row, &col);
    int max = H / 3 > 1 ? H / 3 : 1;
    if (max > 8) max = 8;
    int n = (int)v->input_wrap.n;
    return n < 1 ? 1 : n > max ? max : n;
}

static void draw_input(view *v, int top, int n_rows, int W) {
    ui_app *a = v->a;
    move(top, 0);
    style(v, a->notice[0] && a->notice_error ? C_ERROR : C_DIM, A_NORMAL);
    hline(ACS_HLINE, W);
    const char *hint = a->notice[0] ? a->notice : "Enter send | Alt-Enter newline | F1 help";
    char buf[360];
    snprintf(buf, sizeof buf, " %s ", hint);
    size_t fit = layout_fit_fields(buf, strlen(buf), W - 4); /* cut between words, and say so */
    if (fit < strlen(buf)) snprintf(buf + fit, sizeof buf - fit, " \xE2\x80\xA6 ");
    put(top, 1, buf, strlen(buf), W - 2);
    attrset(A_NORMAL);
    size_t row;
    int col;
    int width = W - 3 > 1 ? W - 3 : 1;
    le_layout(v->le, width, &v->input_wrap, &row, &col);
    size_t len;
    const char *text = le_text(v->le, &len);
    size_t first = row >= (size_t)n_rows ? row - (size_t)n_rows + 1 : 0;
    for (int y = 0; y < n_rows; y++) {
        move(top + 1 + y, 0);
        clrtoeol();
        size_t k = first + (size_t)y;
        if (y == 0) mvaddstr(top + 1, 0, first ? "^ " : "> ");
        if (k < v->input_wrap.n)
            put(top + 1 + y, 2, text + v->input_wrap.v[k].off, v->input_wrap.v[k].len, width);
    }
    move(top + 1 + (int)(row - first), 2 + (col < width ? col : width));
}

/* The start-up warnings above the input box: each wrapped, in the error
 * colour, and a last line saying how to dismiss them; at most a quarter of
 * the screen (the first warnings are kept). Returns the rows they take. */
static const char WARN_HINT[] = "(Esc dismisses these warnings)";

static int warning_rows(view *v, int W, int H) {
    const char *w = v->a->warnings;
    if (!w) return 0;
    tw_wrap(w, strlen(w), W - 2 > 1 ? W - 2 : 1, &v->warn_wrap);
    int max = H / 4 > 2 ? H / 4 : 2;
    int n = (int)v->warn_wrap.n + 1;
    return n < max ? n : max;
}

static void draw_warnings(view *v, int top, int n_rows, int W) {
    const char *w = v->a->warnings;
    for (int y = 0; y < n_rows; y++) {
        move(top + y, 0);
        clrtoeol();
        bool hint = y == n_rows - 1;
        style(v, hint ? C_DIM : C_ERROR, hint ? A_DIM : A_NORMAL);
        if (hint) put(top + y, 2, WARN_HINT, sizeof WARN_HINT - 1, W - 2);
        else put(top + y, 2, w + v->warn_wrap.v[y].off, v->warn_wrap.v[y].len, W - 2);
        if (!hint && (y == 0 || w[v->warn_wrap.v[y].off - 1] == '\n')) mvaddstr(top + y, 0, "!");
        attrset(A_NORMAL);
    }
}

static void draw(view *v) {
    int H, W;
    getmaxyx(stdscr, H, W);
    v->tops_height = 0; /* (until the transcript is drawn: no code block border to click) */
    if (H < 4 || W < 10) {
        erase();
        mvaddstr(0, 0, "too small");
        refresh();
        return;
    }
    int n_in = input_rows(v, W, H), n_warn = warning_rows(v, W, H);
    int top = 1, status = H - 1, in_top = status - 1 - n_in;
    int height = in_top - n_warn - top;
    draw_tabs(v, W);
    if (height > 0) draw_transcript(v, top, height, W);
    if (height > 0 && n_warn) draw_warnings(v, in_top - n_warn, n_warn, W);
    draw_status(v, status, W);
    draw_input(v, in_top > 0 ? in_top : 0, n_in, W);
    refresh();
    v->last_draw = llc_now_ms();
    v->a->changed = false;
}

/* ---- keys ---- */

/* Each tab has its own input: while the tab stays, the box's text is its
 * draft; when another tab is shown (or tabs opened, closed, reloaded), the box
 * takes that tab's draft. */
static void sync_draft(view *v) {
    conv *c = ui_app_tab(v->a);
    if (c != v->tab || v->a->tabs_gen != v->tabs_gen) {
        le_set_text(v->le, c->draft ? c->draft : "", c->draft ? strlen(c->draft) : 0);
        v->tab = c;
        v->tabs_gen = v->a->tabs_gen;
        return;
    }
    size_t len;
    const char *text = le_text(v->le, &len);
    if (len == 0 && !c->draft) return;
    char *d = strndup(text, len);
    if (!d) return;
    free(c->draft);
    c->draft = d;
}

/* A paste begins: nothing held (and no failure from the last one). */
static void paste_begin(view *v) {
    if (v->paste.oom) sb_free(&v->paste);
    else sb_clear(&v->paste);
    v->in_paste = true;
}

/* The paste ends: into the input box whole, or, when it ran out of memory on
 * the way, not at all (a paste with a hole in it would pass for the whole). */
static void paste_end(view *v) {
    v->in_paste = false;
    if (v->paste.oom) ui_app_notice(v->a, true, "out of memory: the paste is not in the input");
    else le_insert(v->le, v->paste.p, v->paste.len);
    if (v->paste.oom) sb_free(&v->paste);
    else sb_clear(&v->paste);
}

static void submit(view *v) {
    size_t len;
    const char *text = le_text(v->le, &len);
    if (len == 0) return;
    char *copy = strndup(text, len);
    if (!copy) return;
    le_history_add(v->le, copy);
    ui_app_history_add(v->a, copy);
    if (ui_app_input(v->a, copy, len)) le_clear(v->le); /* refused: the text stays to be fixed */
    free(copy);
}

static void scroll_by(view *v, int d) {
    conv *c = ui_app_tab(v->a);
    c->scroll += d;
    if (c->scroll < 0) c->scroll = 0;
    v->a->changed = true;
}

/* The mouse: the wheel scrolls the transcript, a click on the tab bar
 * switches to the tab under it (ncurses decodes xterm's SGR 1006 reports
 * where terminfo has them: xterm-256color's kmous). */
enum { WHEEL_ROWS = 3 };

/* A click on a code block's top border (┌─ lang #K) copies the block, as
 * /copy N code K would. */
static void click_code_block(view *v, int y) {
    ui_app *a = v->a;
    conv *c = ui_app_tab(a);
    y -= v->tops_top;
    if (c != v->tops_tab || y < 0 || y >= v->tops_height || y >= v->n_tops || v->tops[y].msg < 0) return;
    const code_top *t = &v->tops[y];
    if (t->msg >= conv_n_shown(c)) return;
    const md_doc *d = conv_shown(c, t->msg)->view; /* (the layout drawn, cached on the message) */
    if (!d || t->md_row >= d->n_rows) return;
    int k = 0;
    for (size_t i = 0; i <= t->md_row; i++) k += d->rows[i].kind == MD_ROW_CODE_TOP;
    char cmd[48];
    snprintf(cmd, sizeof cmd, "/copy %d code %d", t->msg + 1, k);
    ui_app_input(a, cmd, strlen(cmd));
}

static void on_mouse(view *v) {
    MEVENT ev;
    if (getmouse(&ev) != OK) return;
    ui_app *a = v->a;
    if (ev.bstate & BUTTON4_PRESSED) scroll_by(v, WHEEL_ROWS);
#ifdef BUTTON5_PRESSED
    else if (ev.bstate & BUTTON5_PRESSED) scroll_by(v, -WHEEL_ROWS);
#endif
    else if ((ev.bstate & (BUTTON1_PRESSED | BUTTON1_CLICKED)) && ev.y > 0) click_code_block(v, ev.y);
    else if ((ev.bstate & (BUTTON1_PRESSED | BUTTON1_CLICKED)) && ev.y == 0 && a->n_tabs > 0) {
        int W = getmaxx(stdscr);
        int *widths = malloc((size_t)a->n_tabs * sizeof *widths);
        if (!widths) return;
        char label[96];
        for (int i = 0; i < a->n_tabs; i++) widths[i] = tab_label(a, i, label, sizeof label);
        int t = layout_tab_at(widths, a->n_tabs, a->cur, W, 1, ev.x);
        free(widths);
        if (t >= 0) ui_app_switch(a, t);
    }
}

/* Mouse reports on (Shift-drag still selects text in xterm-like terminals),
 * unless the config turned them off. Every button event is asked for, not
 * only the ones on_mouse acts on: ncurses answers an event outside the mask
 * by reading on for the next key, so a filtered release or right click would
 * block get_wch even in nodelay mode (a press whose release followed before
 * the frame was drawn left the click undrawn until the next key). Only
 * motion stays off (REPORT_MOUSE_POSITION would ask for every move). */
static void mouse_on(view *v) {
    if (v->a->cfg.no_mouse) return;
    mousemask(ALL_MOUSE_EVENTS, NULL);
    mouseinterval(0); /* presses at once, no wait for a click */
}

/* Alt-K: the last code block of the last answer with code; pressed again
 * at once, the block before it, and so on round (the notice names each #K). */
static void pick_code_block(view *v) {
    ui_app *a = v->a;
    int k = v->alt_k && a->copied_block > 1 ? a->copied_block - 1 : 0;
    char cmd[32];
    if (k) snprintf(cmd, sizeof cmd, "/copy code %d", k);
    else snprintf(cmd, sizeof cmd, "/copy code");
    ui_app_input(a, cmd, strlen(cmd));
    v->alt_k = true;
}

static void on_alt_key(view *v, wint_t ch) {
    ui_app *a = v->a;
    if (ch >= '0' && ch <= '9') { /* Alt-1..9, Alt-0 the tenth (/tab N any) */
        int i = ch == '0' ? 9 : (int)(ch - '1');
        ui_app_switch(a, i < a->n_tabs ? i : a->cur);
    }
    else if (ch == '\r' || ch == '\n') le_newline(v->le);
    else if (ch == 'c') ui_app_input(a, "/copy", 5);
    else if (ch == 'r') ui_app_input(a, "/reasoning", 10);
    else if (ch == 'k') pick_code_block(v);
    else if (ch == 'b') le_word_left(v->le);
    else if (ch == 'f') le_word_right(v->le);
    else if (ch == 'w') ui_app_close_tab(a);
    else if (ch == 127 || ch == 8) le_kill_word_back(v->le); /* Alt-Backspace: ESC DEL or ESC ^H */
}

/* A whole file, NUL-terminated (NULL when it cannot be read). */
static char *read_whole(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    sbuf b = {0};
    for (size_t r; f && sb_reserve(&b, 4096) && (r = fread(b.p + b.len, 1, b.cap - b.len - 1, f)) > 0;)
        sb_wrote(&b, r);
    bool ok = f && !ferror(f) && !b.oom;
    if (f) fclose(f);
    if (!ok) return sb_free(&b), NULL;
    *n = b.len;
    return sb_take(&b);
}

/* Runs $VISUAL, else $EDITOR, else vi on path with curses put aside; the
 * exit status, or -1 when it could not be run. */
static int run_editor(view *v, const char *path) {
    printf("\033[?2004l"); /* (bracketed paste off for the editor) */
    fflush(stdout);
    def_prog_mode();
    endwin();
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        execl("/bin/sh", "sh", "-c", "exec ${VISUAL:-${EDITOR:-vi}} \"$1\"", "sh", path, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    reset_prog_mode();
    mouse_on(v); /* (endwin turned the reports off) */
    printf("\033[?2004h");
    fflush(stdout);
    clearok(stdscr, TRUE);
    return pid < 0 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Ctrl-X Ctrl-E: the input goes to a file the editor opens, and what is in
 * it when the editor exits (less one final newline) comes back; an editor
 * that fails leaves the input as it was. */
static void compose_in_editor(view *v) {
    const char *tmp = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/llmchat-input-XXXXXX.md", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemps(path, 3); /* (0600: a draft is private) */
    size_t len;
    const char *text = le_text(v->le, &len);
    if (fd < 0 || write(fd, text, len) != (ssize_t)len) {
        ui_app_notice(v->a, true, "cannot write the input to a file for the editor: %s", strerror(errno));
        if (fd >= 0) close(fd), unlink(path);
        return;
    }
    close(fd);
    int st = run_editor(v, path);
    size_t n = 0;
    char *back = st == 0 ? read_whole(path, &n) : NULL;
    unlink(path);
    if (st == 127 || st < 0) ui_app_notice(v->a, true, "no editor could be run (set $VISUAL or $EDITOR)");
    else if (st) ui_app_notice(v->a, true, "the editor exited with status %d: the input is as it was", st);
    else if (!back) ui_app_notice(v->a, true, "cannot read back the editor's file");
    if (!back) return;
    if (n && back[n - 1] == '\n') n--;
    le_set_text(v->le, back, n);
    free(back);
}

/* Ctrl-D: on an empty input closes the tab (the last one quits), as a shell
 * ends at EOF; otherwise deletes the character under the cursor. */
static void ctrl_d(view *v) {
    size_t len;
    le_text(v->le, &len);
    if (len) le_delete(v->le);
    else if (v->a->n_tabs > 1) ui_app_close_tab(v->a);
    else ui_app_quit(v->a);
}

/* Ctrl-C: stops the tab's answer; with none coming, empties the input. */
static void ctrl_c(view *v) {
    if (!ui_app_cancel(v->a)) le_clear(v->le);
}

static void on_key(view *v, int is_key, wint_t ch, bool alt) {
    ui_app *a = v->a;
    int H, W;
    getmaxyx(stdscr, H, W);
    a->changed = true;
    if (!(alt && !is_key && ch == 'k')) v->alt_k = false;
    if (v->in_paste) {
        if (is_key && ch == K_PASTE_END) {
            paste_end(v);
        } else if (!is_key) {
            char buf[8];
            wchar_t w = (wchar_t)(ch == '\r' ? '\n' : ch);
            mbstate_t st = {0};
            size_t n = wcrtomb(buf, w, &st);
            if (n != (size_t)-1) sb_add(&v->paste, buf, n);
        }
        return;
    }
    if (v->ctrl_x) { /* readline's Ctrl-X prefix: Ctrl-X Ctrl-E edits the input in $EDITOR */
        v->ctrl_x = false;
        if (!is_key && !alt && ch == 5) {
            compose_in_editor(v);
            return;
        }
    }
    if (alt && (!is_key || ch == KEY_BACKSPACE)) { /* (keypad mode may turn the DEL of ESC DEL into KEY_BACKSPACE) */
        on_alt_key(v, is_key ? 127 : ch);
        return;
    }
    if (is_key) {
        switch (ch) {
        case K_PASTE_BEGIN: paste_begin(v); return;
        case K_CTRL_PGUP: ui_app_switch(a, a->cur - 1); return;
        case K_CTRL_PGDN: ui_app_switch(a, a->cur + 1); return;
        case KEY_RESIZE: return;
        case KEY_MOUSE: on_mouse(v); return;
        case KEY_F(1): ui_app_input(a, "/help", 5); return;
        case KEY_ENTER: submit(v); return;
        case KEY_BACKSPACE: le_backspace(v->le); return;
        case KEY_DC: le_delete(v->le); return;
        case KEY_LEFT: le_left(v->le); return;
        case KEY_RIGHT: le_right(v->le); return;
        case KEY_HOME: le_home(v->le); return;
        case KEY_END: le_end(v->le); return;
        case KEY_UP:
            if (le_up(v->le, W - 3) == LE_EDGE) le_history_prev(v->le);
            return;
        case KEY_DOWN:
            if (le_down(v->le, W - 3) == LE_EDGE) le_history_next(v->le);
            return;
        case KEY_PPAGE: scroll_by(v, H / 2); return;
        case KEY_NPAGE: scroll_by(v, -(H / 2)); return;
        default: return;
        }
    }
    switch (ch) {
    case '\r': submit(v); return;
    case '\n': le_newline(v->le); return;       /* Ctrl-J */
    case 3: ctrl_c(v); return;                  /* Ctrl-C */
    case 17: ui_app_quit(a); return;            /* Ctrl-Q */
    case 20: ui_app_new_tab(a); return;         /* Ctrl-T */
    case 23: le_kill_word_back(v->le); return;  /* Ctrl-W (readline's; Alt-W closes the tab) */
    case 1: le_home(v->le); return;             /* Ctrl-A */
    case 5: le_end(v->le); return;              /* Ctrl-E */
    case 2: le_left(v->le); return;             /* Ctrl-B */
    case 6: le_right(v->le); return;            /* Ctrl-F */
    case 11: le_kill_to_end(v->le); return;     /* Ctrl-K */
    case 21: le_kill_to_start(v->le); return;   /* Ctrl-U */
    case 25: le_yank(v->le); return;            /* Ctrl-Y */
    case 4: ctrl_d(v); return;                  /* Ctrl-D */
    case 12: clearok(stdscr, TRUE); return;     /* Ctrl-L */
    case 24: v->ctrl_x = true; return;          /* Ctrl-X (a prefix) */
    case 8: case 127: le_backspace(v->le); return;
    case 27: /* a lone Esc: close the panel, leave /edit */
        if (ui_app_escape(a)) le_clear(v->le);
        return;
    default:
        if (ch == '\t' || ch >= 32) {
            char buf[8];
            mbstate_t st = {0};
            size_t n = wcrtomb(buf, (wchar_t)ch, &st);
            if (n != (size_t)-1) le_insert(v->le, buf, n);
        }
    }
}

static void read_keys(view *v) {
    wint_t ch;
    int r;
    bool esc = false;
    while ((r = get_wch(&ch)) != ERR) {
        if (r == OK && ch == 27 && !v->in_paste && !esc) {
            esc = true; /* Alt-x arrives as Esc then x */
            continue;
        }
        on_key(v, r == KEY_CODE_YES, ch, esc);
        sync_draft(v);
        esc = false;
    }
    if (esc) on_key(v, 0, 27, false), sync_draft(v);
}

static void setup_terminal(view *v) {
    const char *loc = setlocale(LC_ALL, "");
    if (!loc || !strcmp(loc, "C") || !strcmp(loc, "POSIX")) setlocale(LC_ALL, "C.UTF-8"); /* text is UTF-8 */
    initscr();
    raw();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    nodelay(stdscr, TRUE);
    set_escdelay(25);
    v->color = has_colors() && !getenv("NO_COLOR");
    if (v->color) {
        start_color();
        use_default_colors();
        init_pair(C_USER, COLOR_CYAN, -1);
        init_pair(C_BOT, COLOR_GREEN, -1);
        init_pair(C_ERROR, COLOR_RED, -1);
        init_pair(C_DIM, COLOR_YELLOW, -1);
        init_pair(C_TAB, COLOR_BLACK, COLOR_CYAN);
        init_pair(C_CODE, COLOR_YELLOW, -1);
        init_pair(C_CODEBLOCK, COLORS >= 256 ? 252 : COLOR_WHITE, COLORS >= 256 ? 236 : COLOR_BLUE);
        init_pair(C_HEADING, COLOR_MAGENTA, -1);
        init_pair(C_LINK, COLOR_CYAN, -1);
        init_pair(C_QUOTE, COLOR_YELLOW, -1);
        short code_bg = COLORS >= 256 ? 236 : COLOR_BLUE; /* the code block's background */
        init_pair(C_KEYWORD, COLORS >= 256 ? 213 : COLOR_MAGENTA, code_bg);
        init_pair(C_TYPE, COLORS >= 256 ? 81 : COLOR_CYAN, code_bg);
        init_pair(C_STRING, COLORS >= 256 ? 150 : COLOR_GREEN, code_bg);
        init_pair(C_COMMENT, COLORS >= 256 ? 245 : COLOR_WHITE, code_bg);
        init_pair(C_NUMBER, COLORS >= 256 ? 215 : COLOR_YELLOW, code_bg);
    }
    define_key("\033[200~", K_PASTE_BEGIN);
    define_key("\033[201~", K_PASTE_END);
    define_key("\033[5;5~", K_CTRL_PGUP);
    define_key("\033[6;5~", K_CTRL_PGDN);
    mouse_on(v);
    printf("\033[?2004h"); /* bracketed paste */
    fflush(stdout);
    llc_set_abort_hook(restore_terminal);
}

int ui_run(ui_app *a, llc_err *err) {
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        return llc_fail(err, LLC_ERR_IO, "the chat needs a terminal (for scripts: llmchat ask or generate)");
    view v = {.a = a};
    if (!(v.le = le_create())) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    struct sigaction sa = {0};
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    for (int i = 0; i < ui_app_history_count(a); i++) le_history_add(v.le, ui_app_history_get(a, i));
    setup_terminal(&v);
    sync_draft(&v);
    draw(&v);
    while (!a->quit && !g_stop) {
        sync_draft(&v); /* (the socket server may have reloaded a tab) */
        if (a->edit_text) { /* /edit: the last message comes back into the input */
            le_set_text(v.le, a->edit_text, strlen(a->edit_text));
            free(a->edit_text);
            a->edit_text = NULL;
            sync_draft(&v);
            a->changed = true; /* (the frame drawn for the command had the input box empty) */
        }
        if (a->clipboard) { /* /copy: OSC 52 straight to the terminal, around curses */
            size_t n;
            int cut;
            char *seq = clip_osc52(a->clipboard, a->clipboard_len, &n, &cut);
            if (seq) {
                fwrite(seq, 1, n, stdout);
                fflush(stdout);
                if (cut) ui_app_notice(a, true, "copied only the first %d KB (terminals refuse more)", CLIP_MAX_BYTES / 1024);
            }
            free(seq);
            free(a->clipboard);
            a->clipboard = NULL;
        }
        bool streaming = false;
        for (int i = 0; i < a->n_tabs; i++) streaming = streaming || a->tabs[i]->req_id;
        int timeout = streaming || a->changed ? 33 : 500;
        if (a->loader) timeout = 100; /* the loading progress moves */
        struct pollfd fds[2 + 16] = {{.fd = STDIN_FILENO, .events = POLLIN},
                                     {.fd = a->cfg.on_extra && a->cfg.extra_fd > 0 ? a->cfg.extra_fd : -1,
                                      .events = POLLIN}};
        int app_fds[16];
        int n_app = ui_app_fds(a, app_fds, 16);
        for (int i = 0; i < n_app; i++) fds[2 + i] = (struct pollfd){.fd = app_fds[i], .events = POLLIN};
        if (poll(fds, (nfds_t)(2 + n_app), timeout) < 0 && errno != EINTR) break;
        if (fds[1].fd >= 0 && (fds[1].revents & POLLIN)) a->cfg.on_extra(a->cfg.extra_ctx, a);
        read_keys(&v);
        double t = llc_now_ms();
        ui_app_poll_events(a, t);
        ui_app_tick(a, t);
        if (a->changed && t - v.last_draw >= 33) draw(&v); /* at most ~30 frames a second */
    }
    restore_terminal();
    le_free(v.le);
    sb_free(&v.paste);
    tw_lines_free(&v.panel_wrap);
    tw_lines_free(&v.input_wrap);
    tw_lines_free(&v.queued_wrap);
    tw_lines_free(&v.warn_wrap);
    free(v.tops);
    llc_set_abort_hook(NULL);
    return 0;
}
