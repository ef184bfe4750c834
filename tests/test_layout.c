/* test_layout.c — the chat screen's arithmetic (ui/layout): the tab bar keeps
 * the current tab in view however many tabs there are, a scrolled-up
 * transcript holds still while an answer grows below it and its "more below"
 * line covers no text, and a narrow status line is cut between fields. */
#include "tests/test.h"
#include "ui/layout.h"

static void test_tab_bar_follows_the_current_tab(void) {
    int w[14];
    for (int i = 0; i < 14; i++) w[i] = 10;
    CHECK(layout_first_tab(w, 14, 0, 100, 1) == 0);
    CHECK(layout_first_tab(w, 14, 8, 100, 1) == 0); /* 9 tabs + ">" fit in 100 */
    for (int cur = 0; cur < 14; cur++) { /* whatever the tab, it is whole on the bar */
        int first = layout_first_tab(w, 14, cur, 60, 1);
        int used = (first > 0) + (cur < 13);
        for (int i = first; i <= cur; i++) used += w[i];
        CHECKF(first <= cur && used <= 60, "cur %d first %d used %d", cur, first, used);
        CHECK(first == 0 || used + w[first - 1] > 60 - (first == 1)); /* and no further right than needed */
    }
    CHECK(layout_first_tab(w, 14, 13, 60, 1) == 9); /* "<" + 5 tabs */
    int wide[3] = {80, 80, 80};
    CHECK(layout_first_tab(wide, 3, 2, 40, 1) == 2); /* wider than the bar: it starts there */
}

/* A click on the tab bar lands on the tab drawn there, the same arithmetic
 * as the bar's: "<" and ">" reach the tabs cut off. */
static void test_click_on_a_tab(void) {
    int w[14];
    for (int i = 0; i < 14; i++) w[i] = 10;
    CHECK(layout_tab_at(w, 14, 0, 100, 1, 0) == 0);
    CHECK(layout_tab_at(w, 14, 0, 100, 1, 9) == 0);
    CHECK(layout_tab_at(w, 14, 0, 100, 1, 10) == 1);
    CHECK(layout_tab_at(w, 14, 0, 100, 1, 89) == 8);
    CHECK(layout_tab_at(w, 14, 0, 100, 1, 90) == 9); /* the cut-off tenth */
    CHECK(layout_tab_at(w, 14, 0, 100, 1, 99) == 9); /* its ">" */
    CHECK(layout_tab_at(w, 14, 0, 100, 1, 100) == -1);
    CHECK(layout_tab_at(w, 14, 0, 100, 1, -1) == -1);
    /* scrolled to the last tab: "<" + tabs 9..13 (first 9) */
    CHECK(layout_tab_at(w, 14, 13, 60, 1, 0) == 8);
    CHECK(layout_tab_at(w, 14, 13, 60, 1, 1) == 9);
    CHECK(layout_tab_at(w, 14, 13, 60, 1, 50) == 13);
    CHECK(layout_tab_at(w, 14, 13, 60, 1, 51) == -1); /* past the last tab */
    int three[3] = {12, 8, 15};
    CHECK(layout_tab_at(three, 3, 1, 80, 1, 12) == 1);
    CHECK(layout_tab_at(three, 3, 1, 80, 1, 20) == 2);
    CHECK(layout_tab_at(three, 3, 1, 80, 1, 35) == -1);
    CHECK(layout_tab_at(three, 0, 0, 80, 1, 3) == -1);
}

/* A search hit opened: its message starts the screen, or shows at the bottom
 * when it is among the last rows. */
static void test_scroll_to_a_row(void) {
    for (int row = 0; row < 100; row += 7) {
        int prev = 0, shown, scroll = layout_scroll_to(100, 20, row);
        int first = layout_transcript(100, 20, &scroll, &prev, &shown);
        if (row <= 80) CHECKF(first == row, "row %d: first %d", row, first);
        else CHECKF(scroll == 0 && first == 80, "row %d: first %d, scroll %d", row, first, scroll);
    }
}

static void test_scrolled_view_holds_still(void) {
    int scroll = 0, prev = 0, shown;
    int first = layout_transcript(100, 20, &scroll, &prev, &shown);
    CHECK(first == 80 && shown == 20 && prev == 100); /* at the bottom: follows the end */
    first = layout_transcript(105, 20, &scroll, &prev, &shown);
    CHECK(first == 85 && scroll == 0);
    scroll = 10; /* PgUp */
    first = layout_transcript(105, 20, &scroll, &prev, &shown);
    CHECK(shown == 19 && first == 105 - 19 - 10); /* the last row is the "10 more below" line */
    int held = first;
    for (int total = 106; total < 140; total += 3) { /* an answer streams in below */
        first = layout_transcript(total, 20, &scroll, &prev, &shown);
        CHECKF(first == held, "total %d: first %d, was %d", total, first, held);
    }
    CHECK(scroll == 10 + (139 - 105)); /* the rows below count up */
    scroll = 1000; /* past the top: clamped */
    first = layout_transcript(139, 20, &scroll, &prev, &shown);
    CHECK(first == 0 && scroll == 139 - 19);
    scroll = 5, prev = 0; /* everything fits: no scrolling, no marker */
    first = layout_transcript(10, 20, &scroll, &prev, &shown);
    CHECK(first == 0 && scroll == 0 && shown == 20);
}

static void test_status_cut_between_fields(void) {
    const char *s = " stories260K.gguf | cpu | 12.5 tok/s | TTFT 30 ms | cache 50% | KV 3/96 | run 1 ";
    size_t len = strlen(s);
    CHECK(layout_fit_fields(s, len, 200) == len);
    size_t n = layout_fit_fields(s, len, 62);
    CHECKF(n == strlen(" stories260K.gguf | cpu | 12.5 tok/s | TTFT 30 ms | cache 50%"), "%zu: '%.*s'", n, (int)n, s);
    n = layout_fit_fields(s, len, 30); /* ends on a whole field, no dangling "|" */
    CHECKF(n == strlen(" stories260K.gguf | cpu"), "'%.*s'", (int)n, s);
    n = layout_fit_fields(s, len, 24); /* exactly up to the separator */
    CHECK(n == strlen(" stories260K.gguf | cpu"));
    const char *words = " one two three four";
    CHECK(layout_fit_fields(words, strlen(words), 12) == strlen(" one two")); /* no field: a word */
    const char *one = "abcdefghijklmnop";
    CHECK(layout_fit_fields(one, strlen(one), 5) == 5); /* one long word: cut anyway */
}

int main(void) {
    RUN(test_tab_bar_follows_the_current_tab);
    RUN(test_click_on_a_tab);
    RUN(test_scrolled_view_holds_still);
    RUN(test_scroll_to_a_row);
    RUN(test_status_cut_between_fields);
    return t_summary();
}
