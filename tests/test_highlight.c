/* test_highlight.c — the syntax colours of code blocks (ui/highlight): every
 * language's names find it, the spans of a line cover it exactly in order
 * whatever the bytes (random lines in every language and state), the state
 * carried to the next line opens and closes block comments and multi-line
 * strings, and a line cut anywhere colours its start as the whole line does
 * (what a block still streaming shows). */
#include <stdbool.h>

#include "tests/test.h"
#include "ui/highlight.h"

typedef struct spans {
    size_t at;       /* where the next span must start */
    bool ok;
    hl_kind kind[512]; /* the kind of each byte */
} spans;

static void on_span(void *p, size_t off, size_t len, hl_kind kind) {
    spans *s = p;
    if (off != s->at || len == 0) s->ok = false;
    for (size_t i = off; i < off + len && i < 512; i++) s->kind[i] = kind;
    s->at = off + len;
}

/* Colours line s in lang from state; checks coverage; returns the new state. */
static int colour(const hl_lang *lang, int state, const char *s, spans *out) {
    *out = (spans){.ok = true};
    int next = hl_line(lang, state, s, strlen(s), on_span, out);
    CHECKF(out->ok && out->at == strlen(s), "'%s': spans do not cover the line", s);
    return next;
}

static const char *const g_names[] = {"c", "cpp", "python", "javascript", "typescript", "sh", "json",
                                      "rust", "go", "java", "sql", "yaml"};

static void test_names(void) {
    for (size_t i = 0; i < sizeof g_names / sizeof *g_names; i++) {
        const hl_lang *l = hl_find(g_names[i], strlen(g_names[i]));
        CHECKF(l && !strcmp(hl_name(l), g_names[i]), "%s", g_names[i]);
    }
    struct { const char *alias, *name; } al[] = {{"h", "c"}, {"C++", "cpp"}, {"py", "python"}, {"JS", "javascript"},
                                                 {"tsx", "typescript"}, {"bash", "sh"}, {"zsh", "sh"},
                                                 {"rs", "rust"}, {"golang", "go"}, {"yml", "yaml"}};
    for (size_t i = 0; i < sizeof al / sizeof *al; i++) {
        const hl_lang *l = hl_find(al[i].alias, strlen(al[i].alias));
        CHECKF(l && !strcmp(hl_name(l), al[i].name), "%s", al[i].alias);
    }
    CHECK(!hl_find("pyth", 4) && !hl_find("c ", 2) && !hl_find(NULL, 0));
    spans sp;
    CHECK(colour(NULL, 0, "int x; // plain", &sp) == 0 && sp.kind[0] == HL_PLAIN && sp.kind[10] == HL_PLAIN);
}

static void test_state_across_lines(void) {
    const hl_lang *c = hl_find("c", 1), *py = hl_find("python", 6);
    spans sp;
    int st = colour(c, 0, "x = 1; /* open", &sp);
    CHECK(st != 0 && sp.kind[0] == HL_PLAIN && sp.kind[4] == HL_NUMBER && sp.kind[7] == HL_COMMENT);
    st = colour(c, st, "still */ int y;", &sp);
    CHECK(st == 0 && sp.kind[0] == HL_COMMENT && sp.kind[7] == HL_COMMENT && sp.kind[9] == HL_TYPE);
    st = colour(py, 0, "s = '''a", &sp);
    CHECK(st != 0 && sp.kind[4] == HL_STRING);
    st = colour(py, st, "b \\''' c''' + 2", &sp); /* an escaped quote does not close it */
    CHECK(st == 0 && sp.kind[3] == HL_STRING && sp.kind[9] == HL_STRING && sp.kind[14] == HL_NUMBER);
    st = colour(c, 0, "char *s = \"unclosed", &sp); /* a one-line string ends with its line */
    CHECK(st == 0 && sp.kind[11] == HL_STRING);
    CHECK(colour(c, 0, "a->b // c", &sp) == 0 && sp.kind[0] == HL_PLAIN && sp.kind[5] == HL_COMMENT);
    CHECK(colour(c, 0, "x1 = y2", &sp) == 0 && sp.kind[1] == HL_PLAIN); /* digits inside a name */
}

static void test_any_bytes_any_cut(void) {
    static const char alphabet[] = "ab_1 2.e+x\"'`#/*-$<>{}\\:\t\xc3\xa9\xff";
    unsigned r = 777;
    char line[200];
    for (int round = 0; round < 3000; round++) {
        size_t n = (size_t)(round % 120);
        for (size_t i = 0; i < n; i++) {
            r = r * 1103515245u + 12345u;
            line[i] = alphabet[(r >> 16) % (sizeof alphabet - 1)];
        }
        line[n] = 0;
        const hl_lang *l = hl_find(g_names[round % 12], strlen(g_names[round % 12]));
        spans whole, part;
        int st = colour(l, 0, line, &whole);
        st = colour(l, st, line, &part); /* from whatever state it left */
        (void)st;
        /* a cut line (streaming) colours its bytes as the whole line does, up to the
         * last token the cut may have split: compare all but the last 8 bytes */
        size_t cut = n / 2;
        char save = line[cut];
        line[cut] = 0;
        colour(l, 0, line, &part);
        line[cut] = save;
        for (size_t i = 0; i + 8 < cut; i++) {
            if (whole.kind[i] == part.kind[i]) continue;
            CHECKF(false, "%s: '%s' cut at %zu: byte %zu is %d, whole %d", g_names[round % 12], line, cut, i,
                   part.kind[i], whole.kind[i]);
            break;
        }
    }
}

int main(void) {
    RUN(test_names);
    RUN(test_state_across_lines);
    RUN(test_any_bytes_any_cut);
    return t_summary();
}
