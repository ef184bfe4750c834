/* test_textwrap.c — cell widths, UTF-8 decoding, clusters, truncation, and word
 * wrap: hand-picked cases, then properties over thousands of random strings
 * (limits kept, nothing but spaces lost, incremental wrap equals full wrap). */
#include "ui/textwrap.h"

#include "kernels/common.h"

#include <locale.h>
#include <stdint.h>
#include <time.h>
#include <wchar.h>

#include "tests/test.h"

/* The lines of tw_wrap(s, width) as "line|line|...", for comparing with a string. */
static const char *wrapped(const char *s, int width) {
    static char out[1024];
    tw_lines lines = {0};
    size_t len = strlen(s), o = 0;
    CHECK(tw_wrap(s, len, width, &lines) == 0);
    out[0] = 0;
    for (size_t i = 0; i < lines.n; i++) {
        const tw_line *l = &lines.v[i];
        CHECKF(l->width == tw_str_width(s + l->off, l->len), "line %zu of \"%s\"", i, s);
        if (i) out[o++] = '|';
        memcpy(out + o, s + l->off, l->len);
        o += l->len;
        out[o] = 0;
    }
    tw_lines_free(&lines);
    return out;
}

#define CHECK_WRAP(s, w, want)                                                  \
    do {                                                                        \
        const char *got_ = wrapped(s, w);                                       \
        CHECKF(!strcmp(got_, want), "wrap(\"%s\", %d) = \"%s\", want \"%s\"", s, \
               (int)(w), got_, want);                                          \
    } while (0)

static void test_char_width(void) {
    CHECK(tw_char_width('a') == 1);
    CHECK(tw_char_width(' ') == 1);
    CHECK(tw_char_width('\t') == 0);
    CHECK(tw_char_width('\n') == 0);
    CHECK(tw_char_width(0x7F) == 0);
    CHECK(tw_char_width(0x85) == 0);   /* C1 */
    CHECK(tw_char_width(0xE9) == 1);   /* é precomposed */
    CHECK(tw_char_width(0x20AC) == 1); /* € */
    CHECK(tw_char_width(0x0301) == 0); /* combining acute */
    CHECK(tw_char_width(0x20D7) == 0); /* combining vector arrow */
    CHECK(tw_char_width(0x200B) == 0); /* zero-width space */
    CHECK(tw_char_width(0x200D) == 0); /* ZWJ */
    CHECK(tw_char_width(0xFE0F) == 0); /* variation selector */
    CHECK(tw_char_width(0x1160) == 0); /* Hangul medial jamo */
    CHECK(tw_char_width(0x4E00) == 2); /* CJK */
    CHECK(tw_char_width(0x3042) == 2); /* hiragana */
    CHECK(tw_char_width(0x30A2) == 2); /* katakana */
    CHECK(tw_char_width(0xAC00) == 2); /* Hangul syllable */
    CHECK(tw_char_width(0xFF21) == 2); /* fullwidth A */
    CHECK(tw_char_width(0xFF61) == 1); /* halfwidth katakana punctuation */
    CHECK(tw_char_width(0x1F600) == 2);
    CHECK(tw_char_width(0x1F9E0) == 2);
    CHECK(tw_char_width(0x20000) == 2); /* CJK extension B */
    CHECK(tw_char_width(0x10FFFF) == 1);
    CHECK(tw_is_mark(0x0301) && tw_is_mark(0xFE0F) && !tw_is_mark('a') && !tw_is_mark(0x4E00));
    CHECK(!tw_is_mark(0x7F) && !tw_is_mark(0));
}

/* The tables follow glibc's wcwidth; compare over all of Unicode where the C
 * library knows the code point (a different glibc may know a few more). */
static void test_agrees_with_wcwidth(void) {
    /* (glibc 2.35 and later have C.UTF-8 built in: its absence is a broken setup) */
    CHECKF(setlocale(LC_CTYPE, "C.UTF-8") != NULL, "no C.UTF-8 locale to compare with");
    if (!setlocale(LC_CTYPE, NULL) || strcmp(setlocale(LC_CTYPE, NULL), "C.UTF-8")) return;
    int diff = 0;
    for (uint32_t cp = 0x20; cp < 0x110000; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        int w = wcwidth((wchar_t)cp);
        if (w < 0 || w == tw_char_width(cp)) continue;
        if (diff++ < 10) fprintf(stderr, "  U+%04X: wcwidth %d, ours %d\n", cp, w, tw_char_width(cp));
    }
    setlocale(LC_CTYPE, "C");
    printf("  %d code points differ from wcwidth\n", diff);
    CHECKF(diff < 300, "%d code points differ", diff);
}

static void test_decode(void) {
    uint32_t cp;
    CHECK(tw_decode("A", 1, &cp) == 1 && cp == 'A');
    CHECK(tw_decode("\xC3\xA9", 2, &cp) == 2 && cp == 0xE9);
    CHECK(tw_decode("\xE6\x97\xA5", 3, &cp) == 3 && cp == 0x65E5);
    CHECK(tw_decode("\xF0\x9F\x98\x80", 4, &cp) == 4 && cp == 0x1F600);
    CHECK(tw_decode("\xF4\x8F\xBF\xBF", 4, &cp) == 4 && cp == 0x10FFFF);
    CHECK(tw_decode("\xEF\xBF\xBD", 3, &cp) == 3 && cp == 0xFFFD);
    /* invalid: one byte, U+FFFD */
    const char *bad[] = {"\x80", "\xBF", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF",
                         "\xED\xA0\x80", "\xED\xBF\xBF", "\xF0\x80\x80\x80", "\xF0\x8F\xBF\xBF",
                         "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFF", "\xC3", "\xE6\x97",
                         "\xC3\x41", "\xE6\x41\xA5", "\xF0\x9F\x98\x41"};
    for (size_t i = 0; i < LLC_ARRAY_LEN(bad); i++) {
        cp = 0;
        size_t n = tw_decode(bad[i], strlen(bad[i]), &cp);
        CHECKF(n == 1 && cp == 0xFFFD, "bad[%zu]: %zu bytes, U+%04X", i, n, cp);
    }
    CHECK(tw_decode("\xE6\x97\xA5", 2, &cp) == 1 && cp == 0xFFFD); /* cut by len */
    CHECK(tw_decode("", 0, &cp) == 0 && cp == 0xFFFD);
}

static void test_str_width(void) {
    CHECK(tw_str_width("hello", 5) == 5);
    CHECK(tw_str_width("日本語", strlen("日本語")) == 6);
    CHECK(tw_str_width("😀", strlen("😀")) == 2);
    CHECK(tw_str_width("e\xCC\x81", 3) == 1);          /* e + combining acute */
    CHECK(tw_str_width("\xCC\x81", 2) == 0);           /* a mark alone */
    CHECK(tw_str_width("a\xFF\xFE" "b", 4) == 4);      /* two invalid bytes: 1 cell each */
    CHECK(tw_str_width("\xE6\x97", 2) == 2);           /* truncated sequence */
    CHECK(tw_str_width("a\tb", 3) == 5);               /* tab to column 4 */
    CHECK(tw_str_width("abcd\tb", 6) == 9);
    CHECK(tw_str_width("a\x1b[31mb", 7) == 6);         /* ESC counts 0 */
    CHECK(tw_str_width("", 0) == 0);
}

static void test_clusters(void) {
    const char *s = "e\xCC\x81\xCC\xA3x\n\xCC\x81y"; /* e+2 marks, x, \n, orphan mark, y */
    size_t len = strlen(s);
    CHECK(tw_cluster_end(s, len, 0) == 5);
    CHECK(tw_cluster_end(s, len, 5) == 6);
    CHECK(tw_cluster_end(s, len, 6) == 7);  /* '\n' alone */
    CHECK(tw_cluster_end(s, len, 7) == 9);  /* orphan mark */
    CHECK(tw_cluster_start(s, 5) == 0);
    CHECK(tw_cluster_start(s, 7) == 6);
    CHECK(tw_cluster_start(s, 9) == 7);     /* marks after '\n' do not join it */
    CHECK(tw_cluster_start(s, 10) == 9);
    CHECK(tw_cluster_start("\xCC\x81\xCC\x81", 4) == 0);
    CHECK(tw_cluster_start("a\xE6\x97\xA5", 4) == 1);
    CHECK(tw_cluster_start("\xE6\x97\xE6\x97\xA5", 2) == 1); /* invalid: byte by byte */
}

static void test_truncate(void) {
    const char *jp = "日本語";
    CHECK(tw_truncate(jp, 9, 6) == 9);
    CHECK(tw_truncate(jp, 9, 5) == 6);
    CHECK(tw_truncate(jp, 9, 1) == 0);
    CHECK(tw_truncate("e\xCC\x81xyz", 6, 1) == 3); /* keeps the mark */
    CHECK(tw_truncate("abc", 3, 0) == 0);
    CHECK(tw_truncate("abc", 3, -5) == 0);
    char out[32];
    CHECK(tw_ellipsize("hello", 5, 5, out, sizeof out) == 5 && !strcmp(out, "hello"));
    CHECK(tw_ellipsize("hello world", 11, 8, out, sizeof out) == 10 &&
          !strcmp(out, "hello w\xE2\x80\xA6"));
    CHECK(tw_ellipsize(jp, 9, 4, out, sizeof out) == 6 && !strcmp(out, "日\xE2\x80\xA6"));
    CHECK(tw_ellipsize(jp, 9, 1, out, sizeof out) == 3 && !strcmp(out, "\xE2\x80\xA6"));
    CHECK(tw_ellipsize(jp, 9, 0, out, sizeof out) == 0 && !strcmp(out, ""));
    CHECK(tw_ellipsize("hello world", 11, 8, out, 6) == 5 && !strcmp(out, "he\xE2\x80\xA6"));
    CHECK(tw_ellipsize(jp, 9, 6, out, 8) == 6 && !strcmp(out, "日\xE2\x80\xA6")); /* buffer */
    CHECK(tw_ellipsize(jp, 9, 6, out, 3) == 0 && !strcmp(out, "")); /* no room for "…" */
    CHECK(tw_ellipsize("abc", 3, 9, out, 3) == 2 && !strcmp(out, "ab"));
    CHECK(tw_ellipsize("abc", 3, 9, out, 1) == 0 && !strcmp(out, ""));
}

static void test_wrap_words(void) {
    CHECK_WRAP("hello world", 11, "hello world");
    CHECK_WRAP("hello world", 20, "hello world");
    CHECK_WRAP("hello world", 5, "hello|world"); /* exact width; the space is swallowed */
    CHECK_WRAP("hello world", 6, "hello |world");
    CHECK_WRAP("hello world", 8, "hello |world");
    CHECK_WRAP("the quick brown fox", 10, "the quick |brown fox");
    CHECK_WRAP("abcdefghij", 4, "abcd|efgh|ij");                  /* long word */
    CHECK_WRAP("a verylongword", 4, "a |very|long|word");
    CHECK_WRAP("ab      cd", 4, "ab  |cd");                       /* run of spaces */
    CHECK_WRAP("   indented", 20, "   indented");                 /* leading spaces kept */
    CHECK_WRAP("  abcdef", 4, "  ab|cdef");                       /* no break in the indent */
    CHECK_WRAP("abc   ", 10, "abc   ");                           /* trailing spaces that fit */
    CHECK_WRAP("abcd  ", 4, "abcd");                              /* ... that do not */
    CHECK_WRAP("abcd  \nxy", 4, "abcd|xy");                       /* no blank line */
    CHECK_WRAP("abcd\nxy", 4, "abcd|xy");
}

static void test_wrap_lines(void) {
    CHECK_WRAP("", 10, "");
    CHECK_WRAP("a\nb", 10, "a|b");
    CHECK_WRAP("a\n\nb", 10, "a||b"); /* empty line kept */
    CHECK_WRAP("abc\n", 10, "abc|");  /* ends with an empty line */
    CHECK_WRAP("\n\n", 10, "||");
    CHECK_WRAP("  \n x", 10, "  | x");
    tw_lines lines = {0};
    CHECK(tw_wrap("", 0, 10, &lines) == 0 && lines.n == 1 && lines.v[0].len == 0);
    CHECK(tw_wrap("ab\n\ncd", 6, 10, &lines) == 0 && lines.n == 3);
    CHECK(lines.v[1].off == 3 && lines.v[1].len == 0 && lines.v[2].off == 4);
    tw_lines_free(&lines);
    CHECK(lines.v == NULL && lines.n == 0);
}

static void test_wrap_wide_and_marks(void) {
    CHECK_WRAP("日本語", 6, "日本語");
    CHECK_WRAP("日本語", 5, "日本|語");
    CHECK_WRAP("日本語", 4, "日本|語");
    CHECK_WRAP("ab日本", 3, "ab|日|本");   /* a 2-cell char does not fit in the last column */
    CHECK_WRAP("a 日本語", 4, "a |日本|語");
    CHECK_WRAP("😀😀😀", 5, "😀😀|😀");
    /* e + combining acute, three times: 1 cell each, marks never split off */
    CHECK_WRAP("e\xCC\x81" "e\xCC\x81" "e\xCC\x81", 2, "e\xCC\x81" "e\xCC\x81|e\xCC\x81");
    CHECK_WRAP("ab e\xCC\x81\xCC\xA3", 3, "ab |e\xCC\x81\xCC\xA3");
    CHECK_WRAP("x\n\xCC\x81y", 5, "x|\xCC\x81y");   /* mark after '\n' starts the line */
    CHECK_WRAP("a\xFF\xFE" "bc", 2, "a\xFF|\xFE" "b|c"); /* invalid bytes: 1 cell each */
}

static void test_wrap_narrow_and_tabs(void) {
    CHECK_WRAP("ab", 1, "a|b");
    CHECK_WRAP("a b", 1, "a|b");
    CHECK_WRAP("日本", 1, "日|本"); /* too wide for the line: alone on it */
    CHECK_WRAP("ab", 0, "a|b");     /* width < 1 counts as 1 */
    CHECK_WRAP("ab", -3, "a|b");
    tw_lines lines = {0};
    CHECK(tw_wrap("日", 3, 1, &lines) == 0 && lines.n == 1 && lines.v[0].width == 2);
    /* tabs: to the next multiple of 4, never past the width */
    CHECK(tw_wrap("a\tb", 3, 8, &lines) == 0 && lines.n == 1 && lines.v[0].width == 5);
    CHECK(tw_wrap("abcdef\tx", 8, 7, &lines) == 0 && lines.n == 2 && lines.v[0].width == 7);
    CHECK(lines.v[0].len == 7 && lines.v[1].off == 7);
    CHECK(tw_wrap("\txy", 3, 2, &lines) == 0 && lines.n == 2 && lines.v[0].width == 2);
    tw_lines_free(&lines);
    CHECK_WRAP("ab\tcd", 4, "ab\t|cd");
    CHECK_WRAP("ab\t\tcd", 4, "ab\t|cd");
}

static void test_col_and_pos(void) {
    const char *s = "a日b\te\xCC\x81z"; /* cols: a0 日1 b3 tab4 e8 z9 */
    tw_line ln = {0, strlen(s), 10};
    CHECK(tw_col_of(s, &ln, 0, 80) == 0);
    CHECK(tw_col_of(s, &ln, 1, 80) == 1);
    CHECK(tw_col_of(s, &ln, 4, 80) == 3);
    CHECK(tw_col_of(s, &ln, 5, 80) == 4);
    CHECK(tw_col_of(s, &ln, 6, 80) == 8);
    CHECK(tw_col_of(s, &ln, 9, 80) == 9);
    CHECK(tw_pos_at_col(s, &ln, 0, 80) == 0);
    CHECK(tw_pos_at_col(s, &ln, 1, 80) == 1);
    CHECK(tw_pos_at_col(s, &ln, 2, 80) == 1); /* inside 日: before it */
    CHECK(tw_pos_at_col(s, &ln, 3, 80) == 4);
    CHECK(tw_pos_at_col(s, &ln, 7, 80) == 5); /* inside the tab */
    CHECK(tw_pos_at_col(s, &ln, 8, 80) == 6);
    CHECK(tw_pos_at_col(s, &ln, 9, 80) == 9); /* past é with its mark */
    CHECK(tw_pos_at_col(s, &ln, 99, 80) == 10);
    tw_lines lines = {0};
    CHECK(tw_wrap("aaa bbb ccc", 11, 4, &lines) == 0 && lines.n == 3);
    CHECK(tw_line_of(&lines, 0) == 0 && tw_line_of(&lines, 3) == 0 && tw_line_of(&lines, 4) == 1);
    CHECK(tw_line_of(&lines, 11) == 2);
    tw_lines_free(&lines);
    CHECK(tw_line_of(&lines, 5) == 0);
}

/* ---- properties over random text ---- */

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

/* Random text from pieces that hit the interesting cases. */
static size_t random_text(char *out, size_t max) {
    static const char *const pieces[] = {
        "a", "b", "word", "longerword", "x", " ", " ", " ", "  ", "\t", "\n", "\n\n",
        "日", "本語", "😀", "e\xCC\x81", "\xCC\x81", "\xCC\xA3", "\xE2\x80\x8B", "\xEF\xB8\x8F",
        "\xFF", "\x80", "\xE6\x97", "\xF0\x9F", "\xC3\xA9", "\x1b", "\r", "ｱ", "Ａ", "-",
    };
    size_t len = 0;
    size_t n = rnd(40);
    for (size_t i = 0; i < n; i++) {
        const char *p = pieces[rnd(LLC_ARRAY_LEN(pieces))];
        size_t pl = strlen(p);
        if (len + pl > max) break;
        memcpy(out + len, p, pl);
        len += pl;
    }
    return len;
}

static bool is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\n';
}

/* Checks one wrap of s against the rules; returns false (once reported) on a failure. */
static bool check_wrap(const char *s, size_t len, int width, const tw_lines *lines) {
    int w = width < 1 ? 1 : width;
    size_t covered = 0, newlines = 0;
    for (size_t i = 0; i < len; i++) newlines += s[i] == '\n';
    if (lines->n < newlines + 1) return false;
    for (size_t i = 0; i < lines->n; i++) {
        const tw_line *l = &lines->v[i];
        if (l->off < covered || l->off + l->len > len) return false;
        if (i > 0 && l->off <= lines->v[i - 1].off) return false;
        for (size_t j = covered; j < l->off; j++) /* only blanks between spans */
            if (!is_blank(s[j])) return false;
        /* width as reported, within the limit unless one wide cluster at width 1 */
        if (l->width != tw_col_of(s, l, l->off + l->len, w)) return false;
        size_t end = l->off + l->len;
        bool one_wide = w == 1 && l->width == 2 && l->len &&
                        tw_col_of(s, l, tw_cluster_start(s, end), w) == 0;
        if (l->width > w && !one_wide) return false;
        /* spans are cluster-aligned: start at a boundary, end at one */
        if (l->len && tw_cluster_start(s, tw_cluster_end(s, len, l->off)) != l->off) return false;
        if (end < len && end > l->off && tw_cluster_end(s, len, tw_cluster_start(s, end)) != end)
            return false;
        /* a line starts with a space only at the start of a text line */
        bool hard = l->off == 0 || s[l->off - 1] == '\n';
        if (!hard && l->len && (s[l->off] == ' ' || s[l->off] == '\t') &&
            tw_cluster_end(s, len, l->off) == l->off + 1)
            return false;
        if (memchr(s + l->off, '\n', l->len)) return false;
        covered = end;
    }
    for (size_t j = covered; j < len; j++)
        if (!is_blank(s[j])) return false;
    return true;
}

static bool same_lines(const tw_lines *a, const tw_lines *b) {
    if (a->n != b->n) return false;
    for (size_t i = 0; i < a->n; i++)
        if (a->v[i].off != b->v[i].off || a->v[i].len != b->v[i].len ||
            a->v[i].width != b->v[i].width)
            return false;
    return true;
}

static void dump(const char *what, const char *s, size_t len, int width) {
    fprintf(stderr, "  %s, width %d: \"", what, width);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7F) fputc(c, stderr);
        else fprintf(stderr, "\\x%02X", c);
    }
    fprintf(stderr, "\"\n");
}

static void test_wrap_properties(void) {
    char s[512];
    tw_lines full = {0}, inc = {0}, part = {0};
    int bad_rules = 0, bad_inc = 0, bad_split = 0, bad_clusters = 0;
    for (int iter = 0; iter < 4000; iter++) {
        size_t len = random_text(s, sizeof s);
        int width = iter % 10 == 0 ? (int)rnd(4) - 1 : 1 + (int)rnd(iter % 3 ? 12 : 40);
        CHECK(tw_wrap(s, len, width, &full) == 0);
        if (!check_wrap(s, len, width, &full) && bad_rules++ < 3) dump("rules broken", s, len, width);

        /* forward and backward cluster walks agree */
        size_t p = 0;
        bool ok = true;
        while (p < len) {
            size_t e = tw_cluster_end(s, len, p);
            if (e <= p || tw_cluster_start(s, e) != p) ok = false;
            p = e;
        }
        if (!ok && bad_clusters++ < 3) dump("cluster walk", s, len, width);

        /* growing the text piecewise, split anywhere (even inside a sequence),
         * gives the same lines as wrapping it whole */
        size_t at = 0;
        CHECK(tw_wrap(s, 0, width, &inc) == 0);
        while (at < len) {
            size_t step = 1 + rnd(iter % 2 ? 3 : 12);
            size_t next = at + step > len ? len : at + step;
            CHECK(tw_wrap_append(s, at, next, width, &inc) == 0);
            at = next;
        }
        if (!same_lines(&full, &inc) && bad_inc++ < 3) dump("incremental differs", s, len, width);

        /* each '\n'-delimited line wraps the same on its own */
        size_t ls = 0, row = 0;
        ok = true;
        for (;;) {
            const char *nl = memchr(s + ls, '\n', len - ls);
            size_t le = nl ? (size_t)(nl - s) : len;
            CHECK(tw_wrap(s + ls, le - ls, width, &part) == 0);
            for (size_t i = 0; i < part.n && ok; i++, row++) {
                const tw_line *a = &part.v[i], *b = &full.v[row];
                if (row >= full.n || a->off + ls != b->off || a->len != b->len || a->width != b->width)
                    ok = false;
            }
            if (!nl || !ok) break;
            ls = le + 1;
        }
        if ((!ok || row != full.n) && bad_split++ < 3) dump("per-line wrap differs", s, len, width);
    }
    CHECKF(bad_rules == 0, "%d texts broke the wrap rules", bad_rules);
    CHECKF(bad_clusters == 0, "%d texts with inconsistent clusters", bad_clusters);
    CHECKF(bad_inc == 0, "%d texts wrapped differently incrementally", bad_inc);
    CHECKF(bad_split == 0, "%d texts wrapped differently line by line", bad_split);
    tw_lines_free(&full);
    tw_lines_free(&inc);
    tw_lines_free(&part);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A 1 MB transcript wraps in linear time; streaming it in small pieces with
 * tw_wrap_append stays cheap and ends with the same lines. (Timings are printed,
 * with only a loose bound: this binary runs under the sanitizers.) */
static void test_wrap_large(void) {
    size_t cap = 1 << 20, len = 0;
    char *s = malloc(cap);
    const char *para[] = {"Lorem ipsum dolor sit amet, consectetur adipiscing elit. ",
                          "日本語のテキストも混ざっています。", "e\xCC\x81t\xC3\xA9 😀 ", "\n\n",
                          "averyveryveryverylongwordwithoutanyspacesatallthatmustbebroken "};
    while (len < cap - 128) {
        const char *p = para[rnd(LLC_ARRAY_LEN(para))];
        size_t pl = strlen(p);
        memcpy(s + len, p, pl);
        len += pl;
    }
    tw_lines full = {0}, inc = {0};
    double t0 = now_s();
    CHECK(tw_wrap(s, len, 80, &full) == 0);
    double t1 = now_s();
    CHECK(check_wrap(s, len, 80, &full));
    CHECK(tw_wrap(s, 0, 80, &inc) == 0);
    double t2 = now_s();
    for (size_t at = 0; at < len;) {
        size_t next = at + 1 + rnd(16);
        if (next > len) next = len;
        CHECK(tw_wrap_append(s, at, next, 80, &inc) == 0);
        at = next;
    }
    double t3 = now_s();
    CHECK(same_lines(&full, &inc));
    printf("  1 MB: wrap %.1f ms, streamed in ~8-byte pieces %.1f ms, %zu lines\n",
           (t1 - t0) * 1e3, (t3 - t2) * 1e3, full.n);
    CHECKF(t1 - t0 < 2.0, "wrap took %.3f s", t1 - t0);
    tw_lines_free(&full);
    tw_lines_free(&inc);
    free(s);
}

int main(void) {
    RUN(test_char_width);
    RUN(test_agrees_with_wcwidth);
    RUN(test_decode);
    RUN(test_str_width);
    RUN(test_clusters);
    RUN(test_truncate);
    RUN(test_wrap_words);
    RUN(test_wrap_lines);
    RUN(test_wrap_wide_and_marks);
    RUN(test_wrap_narrow_and_tabs);
    RUN(test_col_and_pos);
    RUN(test_wrap_properties);
    RUN(test_wrap_large);
    return t_summary();
}
