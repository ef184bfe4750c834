/* markdown.h — Markdown as models write it, laid out for a terminal: the text
 * of an answer becomes display rows of styled segments, wrapped to a width.
 * No curses here (ui/view.c maps styles to attributes), so the layout is
 * unit-tested. The stored text stays plain Markdown; only the view uses this.
 *
 * Understood: ATX headings (# ..), **bold** / __bold__, *italic* / _italic_,
 * ~~strike~~, `inline code`, [links](url) and <autolinks>, bulleted and
 * numbered lists (nested by indentation), block quotes (nested), horizontal
 * rules, backslash escapes, fenced code blocks (``` or ~~~): shown without
 * the fence lines, with a border, the language and the block's number (#N,
 * what /copy code N takes) on the top border, the code's own indentation
 * kept, and syntax colours for the languages ui/highlight knows — and
 * GitHub's pipe tables: a box with aligned columns (:-- :-: --:), cells
 * wrapped to fit the width. Source line breaks are kept (models use them as
 * breaks). Incomplete input — a text still streaming — lays out as far as it
 * goes: an unclosed fence is code up to the end; an unclosed ** stays literal;
 * a table shows its rows so far (from a delimiter row's first "|-").
 * Any bytes are accepted; invalid UTF-8 is kept as is (textwrap measures it). */
#ifndef LLC_UI_MARKDOWN_H
#define LLC_UI_MARKDOWN_H

#include <stddef.h>
#include <stdint.h>

/* Segment styles (bits). */
enum {
    MD_BOLD = 1 << 0,
    MD_ITALIC = 1 << 1,
    MD_STRIKE = 1 << 2,
    MD_CODE = 1 << 3,      /* `inline code` */
    MD_LINK = 1 << 4,      /* a link's text, or an autolink */
    MD_URL = 1 << 5,       /* a link's target, shown after its text */
    MD_HEADING = 1 << 6,
    MD_QUOTE = 1 << 7,     /* text inside a block quote */
    MD_CODEBLOCK = 1 << 8, /* a fenced code block's text and border */
    MD_MARK = 1 << 9,      /* structure drawn by the layout: bullets, numbers, quote bars,
                              code borders and language, rules, table lines */
    /* syntax colours inside a code block (with MD_CODEBLOCK) */
    MD_KEYWORD = 1 << 10,
    MD_TYPE = 1 << 11,     /* types, built-in names, constants, shell variables */
    MD_STRING = 1 << 12,
    MD_COMMENT = 1 << 13,
    MD_NUMBER = 1 << 14,
};

/* Row kinds. */
typedef enum md_row_kind {
    MD_ROW_TEXT,      /* a paragraph, list item or quote line (or a part of one) */
    MD_ROW_HEADING,   /* level in md_row.level */
    MD_ROW_CODE_TOP,  /* the border above a code block, with its language */
    MD_ROW_CODE,      /* a line of code (or a part of a long one) */
    MD_ROW_CODE_END,  /* the border below a closed code block */
    MD_ROW_RULE,      /* a horizontal rule */
    MD_ROW_TABLE,     /* a table's border or a line of its cells */
    MD_ROW_BLANK,
} md_row_kind;

typedef struct md_seg {
    uint32_t off, len; /* bytes of md_doc.text */
    uint16_t style;
} md_seg;

typedef struct md_row {
    md_row_kind kind;
    int level;         /* heading level 1..6; 0 otherwise */
    uint32_t seg, n_seg; /* its segments: md_doc.segs[seg .. seg + n_seg), left to right */
} md_row;

/* A laid-out text. Zero-initialise ({0}); md_layout reuses its memory. */
typedef struct md_doc {
    char *text;        /* everything shown, segment by segment */
    size_t len, cap;
    md_seg *segs;
    size_t n_segs, cap_segs;
    md_row *rows;
    size_t n_rows, cap_rows;
    /* what was laid out (callers use these to know when to redo it) */
    size_t src_len;
    int width;
} md_doc;

/* Lays out len bytes of Markdown in rows of at most width cells (width < 4
 * counts as 4). Replaces what doc held. Returns 0 or LLC_ERR_NOMEM (the doc is
 * then empty but valid). */
int md_layout(const char *src, size_t len, int width, md_doc *doc);
void md_doc_free(md_doc *doc);

/* Copies row r's shown text (its segments joined) into buf (NUL-terminated,
 * cut to n - 1 bytes); returns its full length. For tests and copying. */
size_t md_row_text(const md_doc *doc, size_t r, char *buf, size_t n);

/* The code of fenced code block k of src (1: the first, as numbered on its
 * border; 0: the last), as laid out (without the fences, the fence's
 * indentation taken off every line; an unclosed block runs to the end):
 * malloc'd, NUL-terminated, its length in *out_len. NULL when src has no such
 * block (or out of memory). */
char *md_code_block(const char *src, size_t len, int k, size_t *out_len);
/* How many fenced code blocks src has (an unclosed last one counts). */
int md_code_blocks(const char *src, size_t len);
/* md_code_block(src, len, 0, out_len). */
char *md_last_code_block(const char *src, size_t len, size_t *out_len);

#endif
