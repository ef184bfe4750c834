/* test_lineedit.c — the input buffer: editing multi-byte text, moves that never
 * land inside a character, kill/yank, word moves, up/down keeping the column over
 * '\n'-lines and wrapped rows, history with the draft, input normalisation, the
 * cursor in the drawn layout, a random-operation run checking the invariants, and
 * a 10 MB paste. */
#include "ui/lineedit.h"

#include <time.h>

#include "kernels/common.h"
#include "tests/test.h"

static const char *text(const lineedit *le) {
    return le_text(le, NULL);
}

/* Sets the contents and puts the cursor at byte pos. */
static void setup(lineedit *le, const char *s, size_t pos) {
    CHECK(le_set_text(le, s, strlen(s)) == 0);
    le_set_cursor(le, pos);
    CHECK(le_cursor(le) == pos);
}

/* The cursor is on a cluster boundary, the text is valid UTF-8, NUL-terminated,
 * with no control characters but '\n' and '\t'. */
static bool invariants(const lineedit *le) {
    size_t len, cur = le_cursor(le);
    const char *t = le_text(le, &len);
    if (strlen(t) != len || cur > len) return false;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = tw_decode(t + i, len - i, &cp);
        if (k == 1 && (unsigned char)t[i] >= 0x80) return false;
        if ((cp < 0x20 && cp != '\n' && cp != '\t') || (cp >= 0x7F && cp < 0xA0)) return false;
        i += k;
    }
    size_t p = 0;
    while (p < cur) p = tw_cluster_end(t, len, p);
    return p == cur;
}

static void test_insert_multibyte(void) {
    lineedit *le = le_create();
    CHECK(le && le_cursor(le) == 0 && !strcmp(text(le), ""));
    CHECK(le_insert(le, "日本語", strlen("日本語")) == 0 && le_cursor(le) == 9);
    CHECK(le_left(le) == 0 && le_cursor(le) == 6);
    CHECK(le_insert(le, "x", 1) == 0 && !strcmp(text(le), "日本x語") && le_cursor(le) == 7);
    CHECK(le_left(le) == 0 && le_left(le) == 0 && le_cursor(le) == 3);
    CHECK(le_insert(le, "é😀", strlen("é😀")) == 0 && !strcmp(text(le), "日é😀本x語"));
    CHECK(le_cursor(le) == 9);
    /* a combining mark typed after its base joins it: one step over both */
    le_clear(le);
    CHECK(le_insert(le, "e", 1) == 0 && le_insert(le, "\xCC\x81", 2) == 0 && le_cursor(le) == 3);
    CHECK(le_left(le) == 0 && le_cursor(le) == 0);
    CHECK(le_right(le) == 0 && le_cursor(le) == 3);
    CHECK(le_right(le) == LE_EDGE && le_cursor(le) == 3);
    /* a base typed before an orphan mark takes it: the cursor goes past the mark */
    setup(le, "\xCC\x81z", 0);
    CHECK(le_insert(le, "a", 1) == 0 && le_cursor(le) == 3 && invariants(le));
    CHECK(le_left(le) == 0 && le_cursor(le) == 0 && le_left(le) == LE_EDGE);
    CHECK(le_newline(le) == 0 && !strcmp(text(le), "\na\xCC\x81z") && le_cursor(le) == 1);
    le_free(le);
}

static void test_set_cursor_snaps(void) {
    lineedit *le = le_create();
    CHECK(le_set_text(le, "a日e\xCC\x81" "b", 8) == 0 && le_cursor(le) == 8);
    le_set_cursor(le, 2); /* inside 日 */
    CHECK(le_cursor(le) == 1);
    le_set_cursor(le, 5); /* between e and its mark */
    CHECK(le_cursor(le) == 4);
    le_set_cursor(le, 6); /* inside the mark */
    CHECK(le_cursor(le) == 4);
    le_set_cursor(le, 99);
    CHECK(le_cursor(le) == 8);
    le_free(le);
}

static void test_backspace_delete(void) {
    lineedit *le = le_create();
    setup(le, "ae\xCC\x81x", 4); /* after é (e + mark) */
    CHECK(le_backspace(le) == 0 && !strcmp(text(le), "ax") && le_cursor(le) == 1);
    CHECK(le_backspace(le) == 0 && le_backspace(le) == LE_EDGE && !strcmp(text(le), "x"));
    CHECK(le_delete(le) == 0 && le_delete(le) == LE_EDGE && !strcmp(text(le), ""));
    setup(le, "日本", 0);
    CHECK(le_delete(le) == 0 && !strcmp(text(le), "本") && le_cursor(le) == 0);
    setup(le, "ab\ncd", 3);
    CHECK(le_backspace(le) == 0 && !strcmp(text(le), "abcd") && le_cursor(le) == 2);
    setup(le, "ab\ncd", 2);
    CHECK(le_delete(le) == 0 && !strcmp(text(le), "abcd") && le_cursor(le) == 2);
    /* deleting the '\n' before an orphan mark joins it to the 'b': cursor after it */
    setup(le, "ab\n\xCC\x81", 3);
    CHECK(le_backspace(le) == 0 && le_cursor(le) == 4 && invariants(le));
    le_free(le);
}

static void test_word_moves(void) {
    lineedit *le = le_create();
    const char *s = "foo bar_baz, 日本語 (qux)";
    setup(le, s, 0);
    CHECK(le_word_right(le) == 0 && le_cursor(le) == 3);
    CHECK(le_word_right(le) == 0 && le_cursor(le) == 11);
    CHECK(le_word_right(le) == 0 && le_cursor(le) == 22); /* end of 日本語 */
    CHECK(le_word_right(le) == 0 && le_cursor(le) == 27);
    CHECK(le_word_right(le) == 0 && le_cursor(le) == strlen(s));
    CHECK(le_word_right(le) == LE_EDGE);
    CHECK(le_word_left(le) == 0 && le_cursor(le) == 24);
    CHECK(le_word_left(le) == 0 && le_cursor(le) == 13);
    CHECK(le_word_left(le) == 0 && le_cursor(le) == 4);
    CHECK(le_word_left(le) == 0 && le_cursor(le) == 0);
    CHECK(le_word_left(le) == LE_EDGE);
    setup(le, "one\n  two", 9);
    CHECK(le_word_left(le) == 0 && le_cursor(le) == 6);
    CHECK(le_word_left(le) == 0 && le_cursor(le) == 0);
    le_free(le);
}

static void test_home_end(void) {
    lineedit *le = le_create();
    setup(le, "first\nsecond line\nthird", 10);
    CHECK(le_home(le) == 0 && le_cursor(le) == 6);
    CHECK(le_home(le) == LE_EDGE);
    CHECK(le_end(le) == 0 && le_cursor(le) == 17);
    CHECK(le_end(le) == LE_EDGE);
    le_set_cursor(le, 19);
    CHECK(le_end(le) == 0 && le_cursor(le) == 23);
    le_free(le);
}

static void test_kill_yank(void) {
    lineedit *le = le_create();
    setup(le, "hello world foo", 11);
    CHECK(le_kill_to_end(le) == 0 && !strcmp(text(le), "hello world"));
    CHECK(le_kill_to_end(le) == LE_EDGE);
    le_home(le);
    CHECK(le_yank(le) == 0 && !strcmp(text(le), " foohello world") && le_cursor(le) == 4);
    CHECK(le_kill_to_start(le) == 0 && !strcmp(text(le), "hello world") && le_cursor(le) == 0);
    CHECK(le_kill_to_start(le) == LE_EDGE);
    /* Ctrl-W twice: one kill "two three" */
    setup(le, "one two three", 13);
    CHECK(le_kill_word_back(le) == 0 && !strcmp(text(le), "one two "));
    CHECK(le_kill_word_back(le) == 0 && !strcmp(text(le), "one "));
    CHECK(le_yank(le) == 0 && !strcmp(text(le), "one two three"));
    /* a move between kills starts a new kill */
    CHECK(le_kill_word_back(le) == 0 && le_left(le) == 0 && le_kill_word_back(le) == 0);
    CHECK(!strcmp(text(le), "one  "));
    le_end(le);
    CHECK(le_yank(le) == 0 && !strcmp(text(le), "one  two"));
    /* Ctrl-K at the end of a line takes the '\n'; chained kills add up */
    setup(le, "ab\ncd\nef", 0);
    CHECK(le_kill_to_end(le) == 0 && le_kill_to_end(le) == 0 && le_kill_to_end(le) == 0);
    CHECK(!strcmp(text(le), "\nef"));
    le_end(le);
    le_end(le);
    CHECK(le_yank(le) == 0 && !strcmp(text(le), "ab\ncd\nef"));
    /* Ctrl-U at the start of a line takes the '\n' before it */
    setup(le, "ab\ncd", 3);
    CHECK(le_kill_to_start(le) == 0 && !strcmp(text(le), "abcd") && le_cursor(le) == 2);
    CHECK(le_kill_to_start(le) == 0 && !strcmp(text(le), "cd"));
    CHECK(le_yank(le) == 0 && !strcmp(text(le), "ab\ncd"));
    /* multi-byte words */
    setup(le, "say 日本語 ", strlen("say 日本語 "));
    CHECK(le_kill_word_back(le) == 0 && !strcmp(text(le), "say "));
    le_clear(le);
    CHECK(le_yank(le) == 0 && !strcmp(text(le), "日本語 "));
    le_free(le);
}

static void test_up_down_lines(void) {
    lineedit *le = le_create();
    const char *s = "short\na much longer line\nmid";
    setup(le, s, 24); /* end of the long line, column 18 */
    CHECK(le_up(le, 0) == 0 && le_cursor(le) == 5);      /* end of "short" */
    CHECK(le_up(le, 0) == LE_EDGE && le_cursor(le) == 5);
    CHECK(le_down(le, 0) == 0 && le_cursor(le) == 24);   /* column 18 kept */
    CHECK(le_down(le, 0) == 0 && le_cursor(le) == 28);   /* end of "mid" */
    CHECK(le_down(le, 0) == LE_EDGE);
    CHECK(le_up(le, 0) == 0 && le_cursor(le) == 24);
    le_left(le); /* a horizontal move forgets the column */
    CHECK(le_up(le, 0) == 0 && le_cursor(le) == 5);
    CHECK(le_down(le, 0) == 0 && le_cursor(le) == 23);
    /* columns are cells: column 3 falls inside 本, so the cursor stops before it */
    setup(le, "日本語\nabcdef", 13);
    CHECK(le_up(le, 0) == 0 && le_cursor(le) == 3);
    CHECK(le_down(le, 0) == 0 && le_cursor(le) == 13);
    setup(le, "日本語\nabcdef", 14);
    CHECK(le_up(le, 0) == 0 && le_cursor(le) == 6);
    /* single line: both edges */
    setup(le, "one line", 3);
    CHECK(le_up(le, 0) == LE_EDGE && le_down(le, 0) == LE_EDGE && le_cursor(le) == 3);
    le_free(le);
}

static void test_up_down_wrapped(void) {
    lineedit *le = le_create();
    setup(le, "aaaa bbbb cccc\nxy", 14); /* rows at 5: "aaaa " "bbbb " "cccc" | "xy" */
    CHECK(le_up(le, 5) == 0 && le_cursor(le) == 9);
    CHECK(le_up(le, 5) == 0 && le_cursor(le) == 4);
    CHECK(le_up(le, 5) == LE_EDGE);
    CHECK(le_down(le, 5) == 0 && le_cursor(le) == 9);
    CHECK(le_down(le, 5) == 0 && le_cursor(le) == 14);
    CHECK(le_down(le, 5) == 0 && le_cursor(le) == 17); /* "xy" is shorter: its end */
    CHECK(le_down(le, 5) == LE_EDGE);
    CHECK(le_up(le, 5) == 0 && le_cursor(le) == 14);   /* column 4 kept */
    /* a word broken over rows: the end of a row is the start of the next */
    setup(le, "abcdefghij", 2);
    CHECK(le_down(le, 4) == 0 && le_cursor(le) == 6);
    CHECK(le_down(le, 4) == 0 && le_cursor(le) == 10);
    CHECK(le_up(le, 4) == 0 && le_cursor(le) == 6);
    setup(le, "abcdefghij", 9);
    CHECK(le_up(le, 4) == 0 && le_cursor(le) == 5);
    CHECK(le_up(le, 4) == 0 && le_cursor(le) == 1);
    le_free(le);
}

static void test_layout(void) {
    lineedit *le = le_create();
    tw_lines lines = {0};
    size_t row;
    int col;
    CHECK(le_layout(le, 10, &lines, &row, &col) == 0 && lines.n == 1 && row == 0 && col == 0);
    setup(le, "hello world", 11);
    CHECK(le_layout(le, 5, &lines, &row, &col) == 0 && lines.n == 2 && row == 1 && col == 5);
    le_set_cursor(le, 5); /* just past "hello", a full row */
    CHECK(le_layout(le, 5, &lines, &row, &col) == 0 && row == 0 && col == 5);
    le_set_cursor(le, 6);
    CHECK(le_layout(le, 5, &lines, &row, &col) == 0 && row == 1 && col == 0);
    setup(le, "abc\n", 4);
    CHECK(le_layout(le, 10, &lines, &row, &col) == 0 && lines.n == 2 && row == 1 && col == 0);
    setup(le, "日本語x", 9);
    CHECK(le_layout(le, 5, &lines, &row, &col) == 0 && lines.n == 2 && row == 1 && col == 2);
    le_set_cursor(le, 6); /* before 語, which starts row 1 */
    CHECK(le_layout(le, 5, &lines, &row, &col) == 0 && row == 1 && col == 0);
    setup(le, "abcd     ", 9); /* spaces swallowed after a full row: column capped */
    CHECK(le_layout(le, 4, &lines, &row, &col) == 0 && lines.n == 1 && row == 0 && col == 4);
    setup(le, "a\tb", 2);
    CHECK(le_layout(le, 10, &lines, &row, &col) == 0 && row == 0 && col == 4);
    tw_lines_free(&lines);
    le_free(le);
}

static void test_history(void) {
    lineedit *le = le_create();
    CHECK(le_history_prev(le) == LE_EDGE && le_history_next(le) == LE_EDGE);
    CHECK(le_history_add(le, "first") == 0);
    CHECK(le_history_add(le, "second\nline") == 0);
    CHECK(le_history_add(le, "second\nline") == LE_EDGE); /* consecutive duplicate */
    CHECK(le_history_add(le, "") == LE_EDGE);
    CHECK(le_history_count(le) == 2 && !strcmp(le_history_get(le, 0), "first"));
    CHECK(le_history_get(le, 2) == NULL);
    le_insert(le, "draft", 5);
    le_left(le);
    CHECK(le_history_next(le) == LE_EDGE && !strcmp(text(le), "draft"));
    CHECK(le_history_prev(le) == 0 && !strcmp(text(le), "second\nline") && le_cursor(le) == 11);
    CHECK(le_history_prev(le) == 0 && !strcmp(text(le), "first"));
    CHECK(le_history_prev(le) == LE_EDGE && !strcmp(text(le), "first"));
    le_insert(le, " edited", 7); /* dropped when browsing on */
    CHECK(le_history_next(le) == 0 && !strcmp(text(le), "second\nline"));
    CHECK(le_history_next(le) == 0 && !strcmp(text(le), "draft") && le_cursor(le) == 5);
    CHECK(le_history_next(le) == LE_EDGE);
    /* browsing again saves the new draft; adding an entry ends browsing */
    CHECK(le_history_prev(le) == 0 && le_history_add(le, "third") == 0);
    le_clear(le);
    CHECK(le_history_prev(le) == 0 && !strcmp(text(le), "third"));
    CHECK(le_history_next(le) == 0 && !strcmp(text(le), ""));
    /* the cap keeps the newest LE_HISTORY_MAX entries */
    char buf[32];
    for (int i = 0; i < LE_HISTORY_MAX + 100; i++) {
        snprintf(buf, sizeof buf, "entry %d", i);
        CHECK(le_history_add(le, buf) == 0);
    }
    CHECK(le_history_count(le) == LE_HISTORY_MAX);
    CHECK(!strcmp(le_history_get(le, 0), "entry 100"));
    CHECK(!strcmp(le_history_get(le, LE_HISTORY_MAX - 1), "entry 599"));
    le_free(le);
}

static void test_normalise(void) {
    lineedit *le = le_create();
    const char in[] = "a\r\nb\rc\x01\x1b[31md\x7f\xc2\x85" "e\xff\tf";
    CHECK(le_insert(le, in, sizeof in - 1) == 0);
    CHECK(!strcmp(text(le), "a\nb\nc[31mde\xEF\xBF\xBD\tf"));
    CHECK(le_cursor(le) == strlen(text(le)));
    /* CR at the end of one insert, LF at the start of the next: one newline */
    le_clear(le);
    CHECK(le_insert(le, "x\r", 2) == 0 && le_insert(le, "\ny", 2) == 0 && !strcmp(text(le), "x\ny"));
    CHECK(le_insert(le, "\r", 1) == 0 && le_left(le) == 0 && le_right(le) == 0);
    CHECK(le_insert(le, "\n", 1) == 0 && !strcmp(text(le), "x\ny\n\n")); /* moved in between */
    CHECK(le_insert(le, "", 0) == 0);
    /* a NUL in the input is dropped, le_text stays a C string */
    CHECK(le_set_text(le, "a\0b", 3) == 0 && !strcmp(text(le), "ab"));
    le_free(le);
}

/* ---- random operations ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static void test_random_operations(void) {
    static const char *const pieces[] = {
        "a", "word", " ", "  ", "\n", "\t", "日本", "😀", "e\xCC\x81", "\xCC\x81", "\xCC\xA3",
        "\xFF", "\xE6\x97", "\r", "\r\n", "\x1b", "x y z", "\xEF\xB8\x8F",
    };
    lineedit *le = le_create();
    tw_lines lines = {0};
    int bad = 0;
    for (int i = 0; i < 20000 && bad < 3; i++) {
        int op = (int)rnd(20), rc = 0;
        const char *p = pieces[rnd(LLC_ARRAY_LEN(pieces))];
        int width = (int)rnd(12) - 1;
        switch (op) {
        case 0: case 1: case 2: case 3: rc = le_insert(le, p, strlen(p)); break;
        case 4: rc = le_backspace(le); break;
        case 5: rc = le_delete(le); break;
        case 6: rc = le_left(le); break;
        case 7: rc = le_right(le); break;
        case 8: rc = le_word_left(le); break;
        case 9: rc = le_word_right(le); break;
        case 10: rc = le_up(le, width); break;
        case 11: rc = le_down(le, width); break;
        case 12: rc = le_kill_to_end(le); break;
        case 13: rc = le_kill_word_back(le); break;
        case 14: rc = le_yank(le); break;
        case 15: rc = rnd(2) ? le_home(le) : le_end(le); break;
        case 16: rc = le_kill_to_start(le); break;
        case 17: le_set_cursor(le, rnd(64)); break;
        case 18: rc = le_newline(le); break;
        default: {
            size_t row;
            int col;
            rc = le_layout(le, width, &lines, &row, &col);
            int w = width < 1 ? 1 : width;
            if (rc == 0 && (row >= lines.n || col < 0 || col > w)) rc = -100;
        }
        }
        if (rc < 0 || !invariants(le)) {
            bad++;
            fprintf(stderr, "  op %d (rc %d) at step %d broke the buffer\n", op, rc, i);
        }
        if (le_text(le, NULL)[0] && rnd(200) == 0) le_clear(le);
    }
    CHECK(bad == 0);
    tw_lines_free(&lines);
    le_free(le);
}

/* A 10 MB bracketed paste into the middle of some text, in one call. */
static void test_big_paste(void) {
    const char *unit = "line of pasted text, 日本語 and é\tand 😀\r\n";
    size_t ul = strlen(unit), n = 0, cap = 10u << 20;
    char *paste = malloc(cap);
    while (n + ul <= cap) {
        memcpy(paste + n, unit, ul);
        n += ul;
    }
    lineedit *le = le_create();
    CHECK(le_set_text(le, "<>", 2) == 0 && le_left(le) == 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(le_insert(le, paste, n) == 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    size_t units = n / ul, len;
    const char *t = le_text(le, &len);
    CHECK(len == n - units + 2); /* each CR LF became LF */
    CHECK(le_cursor(le) == len - 1 && t[0] == '<' && t[len - 1] == '>');
    bool same = true;
    for (size_t i = 0; i < units && same; i++)
        same = !memcmp(t + 1 + i * (ul - 1), unit, ul - 2) && t[1 + i * (ul - 1) + ul - 2] == '\n';
    CHECK(same);
    printf("  10 MB paste: %.1f ms\n",
           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6);
    /* and the buffer still works at that size */
    tw_lines lines = {0};
    size_t row;
    int col;
    CHECK(le_layout(le, 80, &lines, &row, &col) == 0 && row == lines.n - 1 && col == 0);
    CHECK(le_up(le, 80) == 0 && le_backspace(le) == 0);
    le_end(le);
    CHECK(le_kill_to_start(le) == 0 && le_yank(le) == 0);
    tw_lines_free(&lines);
    le_free(le);
    free(paste);
}

int main(void) {
    RUN(test_insert_multibyte);
    RUN(test_set_cursor_snaps);
    RUN(test_backspace_delete);
    RUN(test_word_moves);
    RUN(test_home_end);
    RUN(test_kill_yank);
    RUN(test_up_down_lines);
    RUN(test_up_down_wrapped);
    RUN(test_layout);
    RUN(test_history);
    RUN(test_normalise);
    RUN(test_random_operations);
    RUN(test_big_paste);
    return t_summary();
}
