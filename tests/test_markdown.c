/* test_markdown.c — the Markdown layout (ui/markdown.c): what each construct
 * shows and in which style, fenced code (no fence lines, indentation and
 * language kept, a border), wrapping with aligned continuation rows, text that
 * is still streaming, the last code block for copying, and arbitrary bytes. */
#include "tests/test.h"
#include "ui/markdown.h"

static md_doc g_doc;

/* Lays out src at width and returns the rows joined with '\n'. */
static const char *lay(const char *src, int width) {
    static char out[8192];
    CHECK(md_layout(src, strlen(src), width, &g_doc) == 0);
    size_t o = 0;
    out[0] = 0;
    for (size_t r = 0; r < g_doc.n_rows; r++) {
        char row[1024];
        md_row_text(&g_doc, r, row, sizeof row);
        o += (size_t)snprintf(out + o, sizeof out - o, "%s%s", r ? "\n" : "", row);
    }
    return out;
}

/* The style of the segment holding the first occurrence of needle (-1: none). */
static int style_of(const char *needle) {
    for (size_t i = 0; i < g_doc.n_segs; i++) {
        const md_seg *s = &g_doc.segs[i];
        size_t n = strlen(needle);
        for (size_t k = 0; k + n <= s->len; k++)
            if (!memcmp(g_doc.text + s->off + k, needle, n)) return s->style;
    }
    return -1;
}

#define EXPECT_LAYOUT(src, width, want)                                                  \
    do {                                                                                 \
        const char *got_ = lay(src, width);                                              \
        CHECKF(!strcmp(got_, want), "\n--- got:\n%s\n--- want:\n%s", got_, want);        \
    } while (0)

static void test_inline_styles(void) {
    EXPECT_LAYOUT("Some **bold**, *italic*, __strong__, _em_ and `code`.", 80,
                  "Some bold, italic, strong, em and code.");
    CHECK(style_of("bold") == MD_BOLD);
    CHECK(style_of("italic") == MD_ITALIC);
    CHECK(style_of("strong") == MD_BOLD);
    CHECK(style_of("em") == MD_ITALIC);
    CHECK(style_of("code") == MD_CODE);
    CHECK(style_of("Some ") == 0);
    EXPECT_LAYOUT("***both*** and ~~gone~~", 80, "both and gone");
    CHECK((style_of("both") & (MD_BOLD | MD_ITALIC)) == (MD_BOLD | MD_ITALIC));
    CHECK(style_of("gone") == MD_STRIKE);
    /* what is not markup stays as it is */
    EXPECT_LAYOUT("snake_case_name, 2 * 3 * 4, a*b, ** x **", 80, "snake_case_name, 2 * 3 * 4, a*b, ** x **");
    EXPECT_LAYOUT("\\*not italic\\* and `a ** b`", 80, "*not italic* and a ** b");
    CHECK(style_of("a ** b") == MD_CODE);
    EXPECT_LAYOUT("``code with ` inside``", 80, "code with ` inside");
}

static void test_links(void) {
    EXPECT_LAYOUT("See [the docs](https://x.org/d) or <https://y.org>.", 80,
                  "See the docs (https://x.org/d) or https://y.org.");
    CHECK(style_of("the docs") == MD_LINK);
    CHECK(style_of("https://x.org/d") == MD_URL);
    CHECK(style_of("https://y.org") == MD_LINK);
    EXPECT_LAYOUT("[https://z.org](https://z.org) [not a link] (x)", 80, "https://z.org [not a link] (x)");
}

static void test_headings_lists_quotes_rules(void) {
    EXPECT_LAYOUT("# Title\n## Sub ##\n#nospace", 80, "Title\nSub\n#nospace");
    CHECK(g_doc.rows[0].kind == MD_ROW_HEADING && g_doc.rows[0].level == 1);
    CHECK(g_doc.rows[1].kind == MD_ROW_HEADING && g_doc.rows[1].level == 2);
    CHECK(g_doc.rows[2].kind == MD_ROW_TEXT);
    CHECK(style_of("Title") == (MD_HEADING | MD_BOLD));
    EXPECT_LAYOUT("- one\n* two\n  - nested **b**\n1. first\n10) tenth", 80,
                  "• one\n• two\n  • nested b\n1. first\n10. tenth");
    CHECK(style_of("• ") == MD_MARK);
    CHECK(style_of("b") == MD_BOLD || style_of("nested") == 0);
    EXPECT_LAYOUT("> quoted *text*\n> > deeper\n>\nafter", 80, "│ quoted text\n│ │ deeper\n│ \nafter");
    CHECK(style_of("quoted") == MD_QUOTE);
    CHECK(style_of("text") == (MD_QUOTE | MD_ITALIC));
    EXPECT_LAYOUT("a\n\n---\nb", 10, "a\n\n──────────\nb");
    CHECK(g_doc.rows[1].kind == MD_ROW_BLANK && g_doc.rows[2].kind == MD_ROW_RULE);
}

static void test_fenced_code(void) {
    EXPECT_LAYOUT("Here:\n```python\ndef f():\n    return 1\n\n```\nDone.", 80,
                  "Here:\n┌─ python \n│ def f():\n│     return 1\n│ \n└─\nDone.");
    CHECK(g_doc.rows[1].kind == MD_ROW_CODE_TOP && g_doc.rows[2].kind == MD_ROW_CODE &&
          g_doc.rows[5].kind == MD_ROW_CODE_END);
    CHECK(style_of("    return 1") == MD_CODEBLOCK);           /* no inline markup, indentation kept */
    EXPECT_LAYOUT("```\n**not bold** `x`\n```", 80, "┌─\n│ **not bold** `x`\n└─");
    /* a fence inside a list item: its indentation comes off the code lines only */
    EXPECT_LAYOUT("1. Run:\n   ```sh\n   make\n     -j2\n   ```", 80, "1. Run:\n┌─ sh \n│ make\n│   -j2\n└─");
    /* tabs become spaces; ~~~ fences; a longer closing fence */
    EXPECT_LAYOUT("~~~\n\tx\n~~~~", 80, "┌─\n│     x\n└─");
}

static void test_wrapping_keeps_prefixes(void) {
    EXPECT_LAYOUT("- alpha beta gamma delta", 14, "• alpha beta \n  gamma delta");
    EXPECT_LAYOUT("> alpha beta gamma", 10, "│ alpha \n│ beta \n│ gamma");
    EXPECT_LAYOUT("```\nabcdefghij\n```", 8, "┌─\n│ abcdef\n│ ghij\n└─");
    /* every row fits the width */
    lay("# A heading that is long\n- item with **bold words** in it\n> quote quote quote\n```\nx = 1 + 2 + 3\n```", 9);
    for (size_t r = 0; r < g_doc.n_rows; r++) {
        char row[256];
        md_row_text(&g_doc, r, row, sizeof row);
        int w = 0;
        for (const unsigned char *p = (const unsigned char *)row; *p; p++) w += (*p & 0xC0) != 0x80;
        CHECKF(w <= 9, "row %zu is %d cells: '%s'", r, w, row);
    }
}

static void test_streaming_text(void) {
    /* an answer cut anywhere lays out as far as it goes */
    EXPECT_LAYOUT("Some **bo", 80, "Some **bo");
    EXPECT_LAYOUT("```js\nlet a", 80, "┌─ js \n│ let a");
    EXPECT_LAYOUT("```js\nlet a = 1;\n``", 80, "┌─ js \n│ let a = 1;\n│ ``");
    EXPECT_LAYOUT("```js\nlet a = 1;\n```", 80, "┌─ js \n│ let a = 1;\n└─");
    EXPECT_LAYOUT("line\n", 80, "line\n");
    EXPECT_LAYOUT("", 80, "");
    /* laying out the text piece by piece ends where laying out the whole does */
    const char *src = "# T\n\nText *it* and `c`.\n\n```c\nint x;\n```\n- a\n- b\n> q";
    char whole[8192];
    snprintf(whole, sizeof whole, "%s", lay(src, 30));
    for (size_t n = 0; n <= strlen(src); n++) CHECK(md_layout(src, n, 30, &g_doc) == 0);
    CHECK(!strcmp(lay(src, 30), whole));
}

static void test_last_code_block(void) {
    size_t n = 0;
    const char *src = "a\n```\none\n```\nb\n  ```py\n  x = 1\n    y\n  ```\nc";
    char *code = md_last_code_block(src, strlen(src), &n);
    CHECK(code && !strcmp(code, "x = 1\n  y") && n == 9);
    free(code);
    code = md_last_code_block("```\nstill streaming", 19, &n);
    CHECK(code && !strcmp(code, "still streaming"));
    free(code);
    CHECK(md_last_code_block("no code here", 12, &n) == NULL);
}

static void test_any_bytes(void) {
    /* random bytes with a lot of markup characters: no crash, rows within width */
    unsigned s = 12345;
    static const char alphabet[] = "*_`~[]()<>#>-+1.\n \t\\|xyz\xc3\xa9\xe2\x82\xac\xff";
    char buf[600];
    for (int round = 0; round < 300; round++) {
        size_t n = (size_t)(round * 2 % 599);
        for (size_t i = 0; i < n; i++) {
            s = s * 1103515245u + 12345u;
            buf[i] = alphabet[(s >> 16) % (sizeof alphabet - 1)];
        }
        int width = 4 + round % 40;
        CHECK(md_layout(buf, n, width, &g_doc) == 0);
        for (size_t r = 0; r < g_doc.n_rows; r++)
            for (uint32_t k = 0; k < g_doc.rows[r].n_seg; k++)
                CHECK(g_doc.segs[g_doc.rows[r].seg + k].off + g_doc.segs[g_doc.rows[r].seg + k].len <= g_doc.len);
    }
}

int main(void) {
    RUN(test_inline_styles);
    RUN(test_links);
    RUN(test_headings_lists_quotes_rules);
    RUN(test_fenced_code);
    RUN(test_wrapping_keeps_prefixes);
    RUN(test_streaming_text);
    RUN(test_last_code_block);
    RUN(test_any_bytes);
    md_doc_free(&g_doc);
    return t_summary();
}
