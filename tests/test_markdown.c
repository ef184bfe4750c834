/* test_markdown.c — the Markdown layout (ui/markdown.c): what each construct
 * shows and in which style, fenced code (no fence lines, indentation and
 * language kept, a border), wrapping with aligned continuation rows, text that
 * is still streaming, the last code block for copying, and arbitrary bytes;
 * syntax colours in code blocks (ui/highlight: keywords, types, strings,
 * comments, numbers, state across lines), numbered blocks and /copy code N's
 * block, and pipe tables (aligned, boxed, wrapped to the width, streaming). */
#include "tests/test.h"
#include "ui/highlight.h"
#include "ui/markdown.h"
#include "ui/markdown_internal.h"

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
                  "Here:\n┌─ python #1 \n│ def f():\n│     return 1\n│ \n└─\nDone.");
    CHECK(g_doc.rows[1].kind == MD_ROW_CODE_TOP && g_doc.rows[2].kind == MD_ROW_CODE &&
          g_doc.rows[5].kind == MD_ROW_CODE_END);
    CHECK(style_of("    ") == MD_CODEBLOCK);                   /* indentation kept */
    CHECK(style_of("return") == (MD_CODEBLOCK | MD_KEYWORD));   /* python is coloured */
    EXPECT_LAYOUT("```\n**not bold** `x`\n```", 80, "┌─ #1 \n│ **not bold** `x`\n└─");
    /* a fence inside a list item: its indentation comes off the code lines only */
    EXPECT_LAYOUT("1. Run:\n   ```sh\n   make\n     -j2\n   ```", 80, "1. Run:\n┌─ sh #1 \n│ make\n│   -j2\n└─");
    /* tabs become spaces; ~~~ fences; a longer closing fence */
    EXPECT_LAYOUT("~~~\n\tx\n~~~~", 80, "┌─ #1 \n│     x\n└─");
}

static void test_wrapping_keeps_prefixes(void) {
    EXPECT_LAYOUT("- alpha beta gamma delta", 14, "• alpha beta \n  gamma delta");
    EXPECT_LAYOUT("> alpha beta gamma", 10, "│ alpha \n│ beta \n│ gamma");
    EXPECT_LAYOUT("```\nabcdefghij\n```", 8, "┌─ #1 \n│ abcdef\n│ ghij\n└─");
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
    EXPECT_LAYOUT("```js\nlet a", 80, "┌─ js #1 \n│ let a");
    EXPECT_LAYOUT("```js\nlet a = 1;\n``", 80, "┌─ js #1 \n│ let a = 1;\n│ ``");
    EXPECT_LAYOUT("```js\nlet a = 1;\n```", 80, "┌─ js #1 \n│ let a = 1;\n└─");
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


/* The style of the n-th (0-based) segment whose text is exactly word (-1: none). */
static int style_of_word(const char *word, int nth) {
    for (size_t i = 0; i < g_doc.n_segs; i++) {
        const md_seg *s = &g_doc.segs[i];
        if (s->len == strlen(word) && !memcmp(g_doc.text + s->off, word, s->len) && nth-- == 0) return s->style;
    }
    return -1;
}

static void test_syntax_colours(void) {
    lay("```c\n#include <stdio.h>\nint main(void) { /* say\n   hi */ return printf(\"%d\\n\", 42); } // done\n```", 80);
    CHECK(style_of_word("#include", 0) == (MD_CODEBLOCK | MD_KEYWORD));
    CHECK(style_of_word("<stdio.h>", 0) == (MD_CODEBLOCK | MD_STRING));
    CHECK(style_of_word("int", 0) == (MD_CODEBLOCK | MD_TYPE));
    CHECK(style_of_word("/* say", 0) == (MD_CODEBLOCK | MD_COMMENT));
    CHECK(style_of_word("   hi */", 0) == (MD_CODEBLOCK | MD_COMMENT)); /* the comment goes on across the line */
    CHECK(style_of_word("return", 0) == (MD_CODEBLOCK | MD_KEYWORD));
    CHECK(style_of_word("\"%d\\n\"", 0) == (MD_CODEBLOCK | MD_STRING));
    CHECK(style_of_word("42", 0) == (MD_CODEBLOCK | MD_NUMBER));
    CHECK(style_of_word("// done", 0) == (MD_CODEBLOCK | MD_COMMENT));
    lay("```python\ns = \"\"\"one\nfor x in two\"\"\" if True else 0x1F  # note\n```", 80);
    CHECK(style_of_word("\"\"\"one", 0) == (MD_CODEBLOCK | MD_STRING));
    CHECK(style_of_word("for x in two\"\"\"", 0) == (MD_CODEBLOCK | MD_STRING)); /* still the string */
    CHECK(style_of_word("if", 0) == (MD_CODEBLOCK | MD_KEYWORD));
    CHECK(style_of_word("True", 0) == (MD_CODEBLOCK | MD_TYPE));
    CHECK(style_of_word("0x1F", 0) == (MD_CODEBLOCK | MD_NUMBER));
    CHECK(style_of_word("# note", 0) == (MD_CODEBLOCK | MD_COMMENT));
    lay("```bash\necho \"$HOME\" $# a#b ${X:-1} # c\n```", 80);
    CHECK(style_of_word("echo", 0) == (MD_CODEBLOCK | MD_TYPE));
    CHECK(style_of_word("$#", 0) == (MD_CODEBLOCK | MD_TYPE));  /* not a comment */
    CHECK(style_of_word("${X:-1}", 0) == (MD_CODEBLOCK | MD_TYPE));
    CHECK(style_of_word("# c", 0) == (MD_CODEBLOCK | MD_COMMENT));
    lay("```rust\nfn f<'a>(x: &'a str) -> char { 'x' }\n```", 80);
    CHECK(style_of_word("fn", 0) == (MD_CODEBLOCK | MD_KEYWORD));
    CHECK(style_of_word("'x'", 0) == (MD_CODEBLOCK | MD_STRING)); /* a char; the lifetimes are not strings */
    CHECK(style_of_word("str", 0) == (MD_CODEBLOCK | MD_TYPE));
    lay("```json\n{\"a\": [1, -2.5e3, true, null]}\n```", 80);
    CHECK(style_of_word("\"a\"", 0) == (MD_CODEBLOCK | MD_STRING));
    CHECK(style_of_word("2.5e3", 0) == (MD_CODEBLOCK | MD_NUMBER));
    CHECK(style_of_word("null", 0) == (MD_CODEBLOCK | MD_TYPE));
    lay("```SQL\nSelect name FROM t -- all\n```", 80); /* any case */
    CHECK(style_of_word("Select", 0) == (MD_CODEBLOCK | MD_KEYWORD));
    CHECK(style_of_word("-- all", 0) == (MD_CODEBLOCK | MD_COMMENT));
    /* an unknown language, or none: plain code */
    lay("```brainfuck\nif return\n```\n```\nint x\n```", 80);
    CHECK(style_of_word("if return", 0) == MD_CODEBLOCK);
    CHECK(style_of_word("int x", 0) == MD_CODEBLOCK);
    /* aliases; a JS template string spanning lines */
    CHECK(hl_find("py", 2) && !strcmp(hl_name(hl_find("py", 2)), "python"));
    CHECK(hl_find("TSX", 3) && !strcmp(hl_name(hl_find("TSX", 3)), "typescript"));
    CHECK(!hl_find("", 0) && !hl_find("cobol", 5));
    lay("```js\nconst s = `a\nb ${x}` + 1;\n```", 80);
    CHECK(style_of_word("b ${x}`", 0) == (MD_CODEBLOCK | MD_STRING));
    CHECK(style_of_word("1", 0) == (MD_CODEBLOCK | MD_NUMBER));
    /* streaming: every prefix of a coloured block lays out, ending as the whole */
    const char *src = "```go\nfunc main() {\n\ts := `raw\nline` // x\n\tn := 3.5\n}\n```";
    char whole[4096];
    snprintf(whole, sizeof whole, "%s", lay(src, 30));
    for (size_t n = 0; n <= strlen(src); n++) CHECK(md_layout(src, n, 30, &g_doc) == 0);
    CHECK(!strcmp(lay(src, 30), whole));
    CHECK(style_of_word("// x", 0) == (MD_CODEBLOCK | MD_COMMENT));
}

static void test_code_blocks_numbered(void) {
    const char *src = "one:\n```sh\nls\n```\ntwo:\n  ~~~\n  a\n    b\n  ~~~\nthree:\n```py\nstreaming";
    EXPECT_LAYOUT(src, 80, "one:\n┌─ sh #1 \n│ ls\n└─\ntwo:\n┌─ #2 \n│ a\n│   b\n└─\nthree:\n┌─ py #3 \n│ streaming");
    size_t n = 0;
    CHECK(md_code_blocks(src, strlen(src)) == 3);
    char *code = md_code_block(src, strlen(src), 1, &n);
    CHECK(code && !strcmp(code, "ls") && n == 2);
    free(code);
    code = md_code_block(src, strlen(src), 2, &n);
    CHECK(code && !strcmp(code, "a\n  b"));
    free(code);
    code = md_code_block(src, strlen(src), 3, &n);
    CHECK(code && !strcmp(code, "streaming"));
    free(code);
    CHECK(md_code_block(src, strlen(src), 4, &n) == NULL);
    CHECK(md_code_blocks("no code", 7) == 0);
}

static void test_table_widths(void) {
    int w[4];
    int nat[4] = {3, 10, 2, 30};
    CHECK(md_table_widths(nat, 4, 100, w) == 0 && w[0] == 3 && w[1] == 10 && w[2] == 2 && w[3] == 30);
    CHECK(md_table_widths(nat, 4, 30, w) == 0); /* share 7: 3 and 2 fit; then 12 each for the others */
    CHECKF(w[0] == 3 && w[2] == 2 && w[1] == 10 && w[3] == 15, "%d %d %d %d", w[0], w[1], w[2], w[3]);
    CHECK(md_table_widths(nat, 4, 20, w) == 0);
    CHECKF(w[0] == 3 && w[2] == 2 && w[1] + w[3] == 15 && w[1] >= 7 && w[3] >= 7, "%d %d %d %d", w[0], w[1], w[2], w[3]);
    CHECK(md_table_widths(nat, 4, 3, w) == -1); /* not one cell each */
    int zero[2] = {0, 0};
    CHECK(md_table_widths(zero, 2, 10, w) == 0 && w[0] == 1 && w[1] == 1);
}

static void test_tables(void) {
    const char *src = "Sizes:\n| name | n | note |\n|:---|--:|:-:|\n| **a** | 1 | x |\n| bb | 22 |\n\nafter";
    EXPECT_LAYOUT(src, 80,
                  "Sizes:\n"
                  "┌──────┬────┬──────┐\n"
                  "│ name │  n │ note │\n"
                  "├──────┼────┼──────┤\n"
                  "│ a    │  1 │  x   │\n"
                  "│ bb   │ 22 │      │\n"
                  "└──────┴────┴──────┘\n"
                  "\n"
                  "after");
    CHECK(g_doc.rows[1].kind == MD_ROW_TABLE && g_doc.rows[6].kind == MD_ROW_TABLE);
    CHECK(style_of_word("name", 0) == MD_BOLD);   /* the header */
    CHECK(style_of_word("a", 0) == MD_BOLD);      /* a cell's own markup */
    CHECK(style_of("┌─") == MD_MARK);
    /* wrapped to the width: the long column wraps, every row fits */
    src = "| k | text |\n|---|---|\n| 1 | one two three four five six |\n";
    EXPECT_LAYOUT(src, 20,
                  "┌───┬──────────────┐\n"
                  "│ k │ text         │\n"
                  "├───┼──────────────┤\n"
                  "│ 1 │ one two      │\n"
                  "│   │ three four   │\n"
                  "│   │ five six     │\n"
                  "└───┴──────────────┘\n");
    /* <br> breaks a cell's line; an escaped pipe and one in code stay in the cell */
    EXPECT_LAYOUT("|a|b|\n|-|-|\n|x<br>y|p \\| `q|r`|", 80,
                  "┌───┬─────────┐\n│ a │ b       │\n├───┼─────────┤\n│ x │ p | q|r │\n│ y │         │\n└───┴─────────┘");
    /* a backslash last on a row stays in its cell */
    EXPECT_LAYOUT("|a|b|\n|-|-|\n|x|y\\", 80, "┌───┬────┐\n│ a │ b  │\n├───┼────┤\n│ x │ y\\ │\n└───┴────┘");
    /* streaming: the header alone is text; from the delimiter row's first "|-" a table */
    EXPECT_LAYOUT("| a | b |\n", 80, "| a | b |\n");
    EXPECT_LAYOUT("| a | b |\n|-", 80, "┌───┬───┐\n│ a │ b │\n├───┼───┤\n└───┴───┘");
    EXPECT_LAYOUT("| a | b |\n|---|---|\n| 1", 80, "┌───┬───┐\n│ a │ b │\n├───┼───┤\n│ 1 │   │\n└───┴───┘");
    /* not tables: no delimiter row, or a different number of cells */
    EXPECT_LAYOUT("a | b\nc | d", 80, "a | b\nc | d");
    EXPECT_LAYOUT("a | b\n---", 80, "a | b\n────────────────────────────────────────────────────────────────────────────────");
    EXPECT_LAYOUT("a | b\n---\n", 80, "a | b\n────────────────────────────────────────────────────────────────────────────────\n");
    EXPECT_LAYOUT("| a | b |\n|---|---|---|\n", 80, "| a | b |\n|---|---|---|\n");
    /* too narrow for a box: the lines as text */
    lay("| a | b | c |\n|---|---|---|\n| 1 | 2 | 3 |", 8);
    CHECK(g_doc.n_rows >= 3 && g_doc.rows[0].kind == MD_ROW_TEXT);
    /* any width: every row fits */
    src = "| col | a longer column | third |\n|---|:-:|--:|\n| 1 | words words words words | 3 |\n| x | y | z |";
    for (int width = 4; width < 60; width++) {
        lay(src, width);
        for (size_t r = 0; r < g_doc.n_rows; r++) {
            char row[512];
            md_row_text(&g_doc, r, row, sizeof row);
            int w = 0;
            for (const unsigned char *p = (const unsigned char *)row; *p; p++) w += (*p & 0xC0) != 0x80;
            CHECKF(w <= width || g_doc.rows[r].kind != MD_ROW_TABLE, "width %d row %zu is %d cells: '%s'", width,
                   r, w, row);
        }
    }
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
    RUN(test_syntax_colours);
    RUN(test_code_blocks_numbered);
    RUN(test_table_widths);
    RUN(test_tables);
    RUN(test_any_bytes);
    md_doc_free(&g_doc);
    return t_summary();
}
