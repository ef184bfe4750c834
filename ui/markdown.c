/* markdown.c — Markdown laid out in styled, wrapped rows (see markdown.h).
 *
 * One pass over the source lines: each line is classified (code fence, code
 * line, heading, rule, list item, quote, paragraph, blank), its inline markup
 * becomes a run of styled text in a scratch line, and that line is wrapped
 * (ui/textwrap) after its prefix (bullet, number, quote bars, code border);
 * continuation rows get a prefix of spaces as wide, so text stays aligned.
 * A code line's spans take their colours from ui/highlight; a line that
 * starts a pipe table hands the table to md_table.c. */
#include "ui/markdown.h"
#include "ui/highlight.h"
#include "ui/markdown_internal.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common.h"
#include "ui/textwrap.h"

/* ---- growing arrays ---- */

int md_grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return LLC_ERR_NOMEM;
    *p = q;
    *cap = c;
    return 0;
}

void md_lb_add(md_ctx *c, const char *s, size_t n, uint16_t style) {
    md_line_buf *b = &c->lb;
    if (!n || c->oom) return;
    if (md_grow((void **)&b->text, &b->cap, b->len + n + 1, 1)) {
        c->oom = true;
        return;
    }
    memcpy(b->text + b->len, s, n);
    if (b->n_runs && b->runs[b->n_runs - 1].style == style &&
        b->runs[b->n_runs - 1].off + b->runs[b->n_runs - 1].len == b->len) {
        b->runs[b->n_runs - 1].len += (uint32_t)n;
    } else {
        if (md_grow((void **)&b->runs, &b->cap_runs, b->n_runs + 1, sizeof *b->runs)) {
            c->oom = true;
            return;
        }
        b->runs[b->n_runs++] = (md_seg){(uint32_t)b->len, (uint32_t)n, style};
    }
    b->len += n;
}

/* ---- output rows ---- */

md_row *md_row_open(md_ctx *c, md_row_kind kind, int level) {
    md_doc *d = c->doc;
    if (c->oom || md_grow((void **)&d->rows, &d->cap_rows, d->n_rows + 1, sizeof *d->rows)) {
        c->oom = true;
        return NULL;
    }
    md_row *r = &d->rows[d->n_rows++];
    *r = (md_row){kind, level, (uint32_t)d->n_segs, 0};
    return r;
}

void md_seg_add(md_ctx *c, md_row *r, const char *s, size_t n, uint16_t style) {
    md_doc *d = c->doc;
    if (!r || !n || c->oom) return;
    if (md_grow((void **)&d->text, &d->cap, d->len + n + 1, 1) ||
        md_grow((void **)&d->segs, &d->cap_segs, d->n_segs + 1, sizeof *d->segs)) {
        c->oom = true;
        return;
    }
    memcpy(d->text + d->len, s, n);
    d->text[d->len + n] = 0;
    md_seg *last = r->n_seg ? &d->segs[d->n_segs - 1] : NULL;
    if (last && last->style == style && last->off + last->len == d->len) {
        last->len += (uint32_t)n;
    } else {
        d->segs[d->n_segs++] = (md_seg){(uint32_t)d->len, (uint32_t)n, style};
        r->n_seg++;
    }
    d->len += n;
}

/* Wraps the scratch line after prefix (first row) / cont (the others). */
void md_flush_line(md_ctx *c, md_row_kind kind, int level, const char *prefix, const char *cont,
                   uint16_t prefix_style) {
    md_line_buf *b = &c->lb;
    int pw = tw_str_width(prefix, strlen(prefix));
    int avail = c->width - pw > 1 ? c->width - pw : 1;
    if (c->oom || tw_wrap(b->text ? b->text : "", b->len, avail, &c->wrap)) {
        c->oom = true;
        return;
    }
    size_t ri = 0; /* the run the current byte is in */
    for (size_t k = 0; k < c->wrap.n; k++) {
        md_row *r = md_row_open(c, kind, level);
        const char *p = k == 0 ? prefix : cont;
        md_seg_add(c, r, p, strlen(p), prefix_style);
        size_t from = c->wrap.v[k].off, to = from + c->wrap.v[k].len;
        while (ri < b->n_runs && b->runs[ri].off + b->runs[ri].len <= from) ri++;
        for (size_t j = ri; j < b->n_runs && b->runs[j].off < to; j++) {
            size_t s = b->runs[j].off > from ? b->runs[j].off : from;
            size_t e = b->runs[j].off + b->runs[j].len < to ? b->runs[j].off + b->runs[j].len : to;
            if (e > s) md_seg_add(c, r, b->text + s, e - s, b->runs[j].style);
        }
    }
    b->len = 0;
    b->n_runs = 0;
}

/* ---- inline markup ---- */

static bool is_alnum(unsigned char ch) {
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch >= 0x80;
}

static bool is_punct(char ch) { return ch && strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", ch); }

/* The end of a code span opened by n backticks at i (the index after the closing run), or 0. */
static size_t code_span_end(const char *s, size_t len, size_t i, size_t n) {
    for (size_t j = i + n; j < len;) {
        if (s[j] != '`') {
            j++;
            continue;
        }
        size_t k = j;
        while (k < len && s[k] == '`') k++;
        if (k - j == n) return k;
        j = k;
    }
    return 0;
}

/* Where delimiter d (1 or 2 chars of ch) that opens at i closes, or 0: the next
 * run of exactly that many ch, not after a space, outside code spans. */
static size_t find_close(const char *s, size_t len, size_t i, char ch, size_t n) {
    for (size_t j = i + n; j < len; j++) {
        if (s[j] == '\\') {
            j++;
            continue;
        }
        if (s[j] == '`') {
            size_t k = j;
            while (k < len && s[k] == '`') k++;
            size_t e = code_span_end(s, len, j, k - j);
            j = (e ? e : k) - 1;
            continue;
        }
        if (s[j] != ch) continue;
        size_t k = j;
        while (k < len && s[k] == ch) k++;
        size_t run = k - j;
        bool after_space = s[j - 1] == ' ' || s[j - 1] == '\t';
        if (run == n && !after_space && j > i + n) {
            if (ch == '_' && k < len && is_alnum((unsigned char)s[k])) { /* snake_case stays */
                j = k - 1;
                continue;
            }
            return j;
        }
        if (n == 2 && run == 3 && !after_space && j > i + n) return j + 1; /* ***x***: the last two close */
        j = k - 1;
    }
    return 0;
}

void md_inline(md_ctx *c, const char *s, size_t len, uint16_t style, int depth) {
    size_t lit = 0; /* start of plain text not yet added */
    size_t i = 0;
#define FLUSH_TO(x) (md_lb_add(c, s + lit, (x) - lit, style))
    while (i < len) {
        char ch = s[i];
        if (ch == '\\' && i + 1 < len && is_punct(s[i + 1])) {
            FLUSH_TO(i);
            md_lb_add(c, s + i + 1, 1, style);
            i += 2;
            lit = i;
            continue;
        }
        if (ch == '`') {
            size_t k = i;
            while (k < len && s[k] == '`') k++;
            size_t e = code_span_end(s, len, i, k - i);
            if (!e) {
                i = k;
                continue;
            }
            FLUSH_TO(i);
            size_t a = k, b = e - (k - i);
            if (b - a >= 2 && s[a] == ' ' && s[b - 1] == ' ') a++, b--;
            md_lb_add(c, s + a, b - a, (uint16_t)(style | MD_CODE));
            i = lit = e;
            continue;
        }
        if (depth < 8 && (ch == '*' || ch == '_' || ch == '~')) {
            size_t k = i;
            while (k < len && s[k] == ch) k++;
            size_t run = k - i;
            bool opens = k < len && s[k] != ' ' && s[k] != '\t' &&
                         !(ch == '_' && i > 0 && is_alnum((unsigned char)s[i - 1]));
            size_t n = run >= 2 ? 2 : 1;
            if (ch == '~' && run != 2) opens = false;
            if (opens && run <= 3) {
                if (run == 3) n = 2; /* ***x***: bold around *x* */
                size_t close = find_close(s, len, i, ch, n);
                if (close) {
                    FLUSH_TO(i);
                    uint16_t add = ch == '~' ? MD_STRIKE : n == 2 ? MD_BOLD : MD_ITALIC;
                    md_inline(c, s + i + n, close - i - n, (uint16_t)(style | add), depth + 1);
                    i = lit = close + n;
                    continue;
                }
            }
            i = k;
            continue;
        }
        if (ch == '[') { /* [text](url) */
            size_t j = i + 1;
            int nest = 0;
            while (j < len && !(s[j] == ']' && nest == 0)) {
                if (s[j] == '[') nest++;
                else if (s[j] == ']') nest--;
                j++;
            }
            if (j + 1 < len && s[j + 1] == '(') {
                size_t u = j + 2, e = u;
                while (e < len && s[e] != ')' && s[e] != ' ') e++;
                if (e < len && s[e] == ')' && e > u) {
                    FLUSH_TO(i);
                    if (depth < 8) md_inline(c, s + i + 1, j - i - 1, (uint16_t)(style | MD_LINK), depth + 1);
                    bool same = e - u == j - i - 1 && !memcmp(s + u, s + i + 1, e - u);
                    if (!same) {
                        md_lb_add(c, " (", 2, (uint16_t)(style | MD_URL));
                        md_lb_add(c, s + u, e - u, (uint16_t)(style | MD_URL));
                        md_lb_add(c, ")", 1, (uint16_t)(style | MD_URL));
                    }
                    i = lit = e + 1;
                    continue;
                }
            }
            i++;
            continue;
        }
        if (ch == '<' && (len - i > 8) && (!strncmp(s + i + 1, "http://", 7) || !strncmp(s + i + 1, "https://", 8))) {
            size_t e = i + 1;
            while (e < len && s[e] != '>' && s[e] != ' ') e++;
            if (e < len && s[e] == '>') {
                FLUSH_TO(i);
                md_lb_add(c, s + i + 1, e - i - 1, (uint16_t)(style | MD_LINK));
                i = lit = e + 1;
                continue;
            }
        }
        i++;
    }
    FLUSH_TO(len);
#undef FLUSH_TO
}

/* ---- blocks ---- */

static size_t lead_spaces(const char *s, size_t len) {
    size_t i = 0;
    while (i < len && (s[i] == ' ' || s[i] == '\t')) i++;
    return i;
}

/* A fence (``` or ~~~, 3 or more) after up to any indentation: its char and length. */
static bool fence_at(const char *s, size_t len, size_t *indent, char *fch, size_t *flen) {
    size_t i = lead_spaces(s, len);
    if (i >= len || (s[i] != '`' && s[i] != '~')) return false;
    size_t k = i;
    while (k < len && s[k] == s[i]) k++;
    if (k - i < 3) return false;
    if (s[i] == '`' && memchr(s + k, '`', len - k)) return false; /* inline code, not a fence */
    *indent = i;
    *fch = s[i];
    *flen = k - i;
    return true;
}

static bool is_rule(const char *s, size_t len) {
    size_t i = lead_spaces(s, len);
    if (i > 3 || i >= len || (s[i] != '-' && s[i] != '*' && s[i] != '_')) return false;
    char ch = s[i];
    int n = 0;
    for (; i < len; i++) {
        if (s[i] == ch) n++;
        else if (s[i] != ' ' && s[i] != '\t') return false;
    }
    return n >= 3;
}

/* A list marker at s: returns its length including the space after it (0: none);
 * buf gets what to show ("• " or "12. "). */
static size_t list_marker(const char *s, size_t len, char *buf, size_t n) {
    if (len >= 2 && (s[0] == '-' || s[0] == '*' || s[0] == '+') && (s[1] == ' ' || s[1] == '\t')) {
        snprintf(buf, n, "• ");
        return 2;
    }
    size_t d = 0;
    while (d < len && d < 9 && s[d] >= '0' && s[d] <= '9') d++;
    if (d > 0 && d + 1 < len && (s[d] == '.' || s[d] == ')') && (s[d + 1] == ' ' || s[d + 1] == '\t')) {
        snprintf(buf, n, "%.*s. ", (int)d, s);
        return d + 2;
    }
    return 0;
}

static void blank_row(md_ctx *c) { md_row_open(c, MD_ROW_BLANK, 0); }

/* One line outside code blocks. */
void md_text_line(md_ctx *c, const char *s, size_t len) {
    char prefix[160] = "", cont[160] = "";
    size_t pl = 0;
    uint16_t base = 0;
    /* block quotes: "> " markers, any depth */
    size_t i = lead_spaces(s, len);
    int quote = 0;
    while (i < len && s[i] == '>' && quote < 16) {
        quote++;
        i++;
        if (i < len && s[i] == ' ') i++;
        while (i < len && s[i] == ' ' && i + 1 < len && s[i + 1] == '>') i++; /* "> > nested" */
    }
    if (quote) {
        for (int q = 0; q < quote && pl + 4 < sizeof prefix; q++) pl += (size_t)snprintf(prefix + pl, sizeof prefix - pl, "│ ");
        memcpy(cont, prefix, pl + 1);
        base = MD_QUOTE;
        s += i;
        len -= i;
        i = 0;
    }
    size_t sp = lead_spaces(s, len);
    if (sp == len) { /* blank (inside a quote: the bars only) */
        if (quote) {
            md_row *r = md_row_open(c, MD_ROW_TEXT, 0);
            md_seg_add(c, r, prefix, pl, MD_MARK | MD_QUOTE);
        } else {
            blank_row(c);
        }
        return;
    }
    if (is_rule(s, len)) {
        md_row *r = md_row_open(c, MD_ROW_RULE, 0);
        md_seg_add(c, r, prefix, pl, MD_MARK | MD_QUOTE);
        int w = c->width - tw_str_width(prefix, pl);
        for (int k = 0; k < w && k < 400; k++) md_seg_add(c, r, "─", 3, MD_MARK);
        return;
    }
    if (sp <= 3 && s[sp] == '#') { /* ATX heading */
        size_t h = sp;
        while (h < len && s[h] == '#') h++;
        int level = (int)(h - sp);
        if (level <= 6 && (h == len || s[h] == ' ' || s[h] == '\t')) {
            size_t a = h + lead_spaces(s + h, len - h), b = len;
            while (b > a && (s[b - 1] == ' ' || s[b - 1] == '\t')) b--;
            size_t t = b;
            while (t > a && s[t - 1] == '#') t--;
            if (t < b && (t == a || s[t - 1] == ' ')) b = t; /* closing #s */
            while (b > a && s[b - 1] == ' ') b--;
            md_inline(c, s + a, b - a, (uint16_t)(base | MD_HEADING | MD_BOLD), 0);
            md_flush_line(c, MD_ROW_HEADING, level, prefix, cont, MD_MARK | MD_QUOTE);
            return;
        }
    }
    char marker[24];
    size_t ml = list_marker(s + sp, len - sp, marker, sizeof marker);
    if (ml) {
        int nest = (int)(sp / 2);
        if (nest > 8) nest = 8;
        for (int k = 0; k < nest && pl + 2 < sizeof prefix; k++) prefix[pl++] = ' ', prefix[pl++] = ' ';
        prefix[pl] = 0;
        size_t cl = pl;
        memcpy(cont, prefix, pl + 1);
        pl += (size_t)snprintf(prefix + pl, sizeof prefix - pl, "%s", marker);
        int mw = tw_str_width(marker, strlen(marker));
        for (int k = 0; k < mw && cl + 1 < sizeof cont; k++) cont[cl++] = ' ';
        cont[cl] = 0;
        size_t a = sp + ml;
        a += lead_spaces(s + a, len - a);
        md_inline(c, s + a, len - a, base, 0);
        md_flush_line(c, MD_ROW_TEXT, 0, prefix, cont, (uint16_t)(MD_MARK | base));
        return;
    }
    /* a paragraph line: its own indentation is kept */
    if (sp) md_lb_add(c, s, sp, base);
    md_inline(c, s + sp, len - sp, base, 0);
    md_flush_line(c, MD_ROW_TEXT, 0, prefix, cont, MD_MARK | MD_QUOTE);
}

/* Syntax colours (ui/highlight) as Markdown styles. */
static const uint16_t g_hl_style[] = {
    [HL_PLAIN] = 0, [HL_KEYWORD] = MD_KEYWORD, [HL_TYPE] = MD_TYPE,
    [HL_STRING] = MD_STRING, [HL_COMMENT] = MD_COMMENT, [HL_NUMBER] = MD_NUMBER,
};

typedef struct code_out {
    md_ctx *c;
    const char *s;
    int col; /* tabs become spaces (to the next multiple of TW_TAB), so every terminal agrees */
} code_out;

static void code_span(void *p, size_t off, size_t len, hl_kind kind) {
    code_out *o = p;
    uint16_t st = (uint16_t)(MD_CODEBLOCK | g_hl_style[kind]);
    const char *s = o->s + off;
    for (size_t a = 0; a < len;) {
        size_t b = a;
        while (b < len && s[b] != '\t') b++;
        md_lb_add(o->c, s + a, b - a, st);
        o->col += tw_str_width(s + a, b - a);
        if (b < len) {
            int pad = TW_TAB - o->col % TW_TAB;
            md_lb_add(o->c, "        ", (size_t)pad, st);
            o->col += pad;
            b++;
        }
        a = b;
    }
}

/* A line of code, coloured for lang (NULL: plain); returns the highlighter's state for the next. */
static int code_line(md_ctx *c, const char *s, size_t len, size_t indent, const hl_lang *lang, int state) {
    size_t k = 0; /* the fence's indentation comes off */
    while (k < indent && k < len && (s[k] == ' ' || s[k] == '\t')) k++;
    code_out o = {c, s + k, 0};
    state = hl_line(lang, state, s + k, len - k, code_span, &o);
    md_flush_line(c, MD_ROW_CODE, 0, "│ ", "│ ", MD_CODEBLOCK | MD_MARK);
    return state;
}

int md_layout(const char *src, size_t len, int width, md_doc *doc) {
    doc->len = doc->n_segs = doc->n_rows = 0;
    doc->src_len = len;
    doc->width = width;
    md_ctx c = {.doc = doc, .width = width < 4 ? 4 : width};
    bool in_code = false;
    char fch = 0;
    size_t flen = 0, findent = 0;
    const hl_lang *lang = NULL; /* the open code block's language, when it is one ui/highlight knows */
    int hl_state = 0, n_blocks = 0;
    size_t pos = 0;
    while (pos < len || (pos == 0 && len == 0)) {
        if (len == 0) break;
        const char *nl = memchr(src + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - src) : len;
        const char *s = src + pos;
        size_t n = end - pos;
        if (n && s[n - 1] == '\r') n--;
        size_t ind;
        char ch;
        size_t fl;
        if (in_code) {
            size_t i = lead_spaces(s, n), k = i;
            while (k < n && s[k] == fch) k++;
            if (k - i >= flen && lead_spaces(s + k, n - k) == n - k) { /* closing fence */
                in_code = false;
                md_row *r = md_row_open(&c, MD_ROW_CODE_END, 0);
                md_seg_add(&c, r, "└─", 6, MD_CODEBLOCK | MD_MARK);
            } else {
                hl_state = code_line(&c, s, n, findent, lang, hl_state);
            }
        } else if (fence_at(s, n, &ind, &ch, &fl)) {
            in_code = true;
            fch = ch;
            flen = fl;
            findent = ind;
            size_t a = ind + fl;
            a += lead_spaces(s + a, n - a);
            size_t b = a;
            while (b < n && s[b] != ' ' && s[b] != '\t' && s[b] != '{') b++;
            lang = hl_find(s + a, b - a);
            hl_state = 0;
            md_row *r = md_row_open(&c, MD_ROW_CODE_TOP, 0);
            md_seg_add(&c, r, "┌─ ", 7, MD_CODEBLOCK | MD_MARK);
            if (b > a) {
                md_seg_add(&c, r, s + a, b - a > 40 ? 40 : b - a, MD_CODEBLOCK | MD_MARK | MD_BOLD);
                md_seg_add(&c, r, " ", 1, MD_CODEBLOCK | MD_MARK);
            }
            char num[24]; /* the number /copy code N takes */
            int nn = snprintf(num, sizeof num, "#%d ", ++n_blocks);
            md_seg_add(&c, r, num, (size_t)nn, MD_CODEBLOCK | MD_MARK);
        } else {
            size_t took = md_table(&c, src + pos, len - pos);
            if (took) { /* a table: the lines it took */
                pos += took;
                if (pos >= len) {
                    if (src[len - 1] == '\n') blank_row(&c); /* (as after any last line) */
                    break;
                }
                continue;
            }
            md_text_line(&c, s, n);
        }
        if (!nl) break;
        pos = end + 1;
        if (pos == len) { /* the text ends with a line break: an empty last line */
            if (!in_code) blank_row(&c);
            break;
        }
    }
    if (c.oom) {
        doc->len = doc->n_segs = doc->n_rows = 0;
    }
    free(c.lb.text);
    free(c.lb.runs);
    tw_lines_free(&c.wrap);
    return c.oom ? LLC_ERR_NOMEM : 0;
}

void md_doc_free(md_doc *doc) {
    if (!doc) return;
    free(doc->text);
    free(doc->segs);
    free(doc->rows);
    memset(doc, 0, sizeof *doc);
}

size_t md_row_text(const md_doc *doc, size_t r, char *buf, size_t n) {
    size_t total = 0;
    if (n) buf[0] = 0;
    if (r >= doc->n_rows) return 0;
    const md_row *row = &doc->rows[r];
    for (uint32_t k = 0; k < row->n_seg; k++) {
        const md_seg *sg = &doc->segs[row->seg + k];
        if (n && total < n - 1) {
            size_t take = sg->len < n - 1 - total ? sg->len : n - 1 - total;
            memcpy(buf + total, doc->text + sg->off, take);
            buf[total + take] = 0;
        }
        total += sg->len;
    }
    return total;
}

/* Finds block k (1-based; 0: the last) of src: its code's byte range and the
 * fence's indentation. Returns how many blocks src has. */
static int find_code_block(const char *src, size_t len, int k, size_t *from, size_t *to, size_t *indent) {
    bool in_code = false;
    char fch = 0;
    size_t flen = 0, findent = 0, code_start = 0;
    int n = 0;
    size_t pos = 0;
    while (pos < len) {
        const char *nl = memchr(src + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - src) : len;
        const char *s = src + pos;
        size_t ln = end - pos, ind, fl;
        char ch;
        if (in_code) {
            size_t i = lead_spaces(s, ln), e = i;
            while (e < ln && s[e] == fch) e++;
            if (e - i >= flen && lead_spaces(s + e, ln - e) == ln - e) {
                in_code = false;
                if (k == 0 || n == k) *from = code_start, *to = pos, *indent = findent;
            }
        } else if (fence_at(s, ln, &ind, &ch, &fl)) {
            in_code = true;
            n++;
            fch = ch, flen = fl, findent = ind;
            code_start = nl ? end + 1 : len;
        }
        if (!nl) break;
        pos = end + 1;
    }
    if (in_code && (k == 0 || n == k)) *from = code_start, *to = len, *indent = findent;
    return n;
}

int md_code_blocks(const char *src, size_t len) {
    size_t a, b, ind;
    return find_code_block(src, len, -1, &a, &b, &ind);
}

char *md_code_block(const char *src, size_t len, int k, size_t *out_len) {
    size_t best_start = 0, best_end = 0, best_indent = 0;
    int n = find_code_block(src, len, k, &best_start, &best_end, &best_indent);
    if (!n || k > n || k < 0) return NULL;
    char *out = malloc(best_end - best_start + 1);
    if (!out) return NULL;
    size_t o = 0;
    for (size_t p = best_start; p < best_end;) { /* line by line, the fence's indentation off */
        const char *nl = memchr(src + p, '\n', best_end - p);
        size_t e = nl ? (size_t)(nl - src) + 1 : best_end;
        size_t i = 0;
        while (i < best_indent && p + i < e && (src[p + i] == ' ' || src[p + i] == '\t')) i++;
        memcpy(out + o, src + p + i, e - p - i);
        o += e - p - i;
        p = e;
    }
    if (o && out[o - 1] == '\n') o--; /* the line break before the closing fence */
    out[o] = 0;
    *out_len = o;
    return out;
}

char *md_last_code_block(const char *src, size_t len, size_t *out_len) { return md_code_block(src, len, 0, out_len); }
