/* test_stopstr.c — stop strings across piece boundaries: never emit text that is
 * later retracted, never miss a stop, emit everything when none matches. */
#include "engine/sched/stopstr.h"
#include "tests/test.h"

/* Feeds pieces; returns the concatenated emitted text and whether it stopped. */
static bool run(const char *const *stops, int n, const char *const *pieces, int np, char *out) {
    stopstr *s;
    CHECK(stopstr_create(stops, n, &s) == 0);
    out[0] = 0;
    bool stopped = false;
    for (int i = 0; i < np && !stopped; i++) {
        const char *e;
        size_t el;
        stopped = stopstr_push(s, pieces[i], strlen(pieces[i]), &e, &el);
        strncat(out, e, el);
    }
    if (!stopped) {
        const char *e;
        size_t el;
        stopstr_flush(s, &e, &el);
        strncat(out, e, el);
    }
    stopstr_free(s);
    return stopped;
}

static void test_spanning_stop(void) {
    const char *stops[] = {"\nUser:"};
    const char *pieces[] = {"Hello", " there\n", "Us", "er: more"};
    char out[256];
    CHECK(run(stops, 1, pieces, 4, out));
    CHECK(!strcmp(out, "Hello there"));
}

static void test_false_start_is_released(void) {
    const char *stops[] = {"</s>"};
    const char *pieces[] = {"a <", "/b> c", " </"};
    char out[256];
    CHECK(!run(stops, 1, pieces, 3, out));
    CHECK(!strcmp(out, "a </b> c </"));
}

/* Nothing emitted is ever a prefix of a later-matched stop: check step by step. */
static void test_hold_back(void) {
    const char *stops[] = {"STOP", "xyz"};
    stopstr *s;
    stopstr_create(stops, 2, &s);
    const char *e;
    size_t el;
    CHECK(!stopstr_push(s, "abcST", 5, &e, &el) && el == 3 && !memcmp(e, "abc", 3));
    CHECK(!stopstr_push(s, "O", 1, &e, &el) && el == 0);
    CHECK(stopstr_push(s, "Pxyz", 4, &e, &el) && el == 0);
    CHECK(stopstr_push(s, "more", 4, &e, &el) && el == 0); /* stays stopped */
    stopstr_free(s);
}

static void test_earliest_of_several(void) {
    const char *stops[] = {"cd", "bc", ""};
    const char *pieces[] = {"abcd"};
    char out[64];
    CHECK(run(stops, 3, pieces, 1, out));
    CHECK(!strcmp(out, "a"));
    CHECK(!run(NULL, 0, pieces, 1, out) && !strcmp(out, "abcd"));
}

int main(void) {
    RUN(test_spanning_stop);
    RUN(test_false_start_is_released);
    RUN(test_hold_back);
    RUN(test_earliest_of_several);
    return t_summary();
}
