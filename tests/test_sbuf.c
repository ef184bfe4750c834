/* test_sbuf.c — the growable buffer every layer uses: appends of every kind keep
 * the text NUL-terminated and exact, long formatted appends are whole, take hands
 * over the text, a failed append sticks, and a queue (write in place, drop the
 * head, clear) keeps the rest exact. */
#include "kernels/sbuf.h"

#include <stdint.h>

#include "tests/test.h"

static void test_appends(void) {
    sbuf b = {0};
    CHECK(!strcmp(sb_cstr(&b), "") && b.p == NULL && b.len == 0);
    sb_str(&b, "abc");
    sb_str(&b, NULL);
    sb_putc(&b, '-');
    sb_add(&b, "xyz\0tail", 8); /* bytes, NULs included */
    sb_printf(&b, "|%d|%s|", 42, "q");
    CHECK(b.len == 3 + 1 + 8 + 6);
    CHECK(!memcmp(b.p, "abc-xyz\0tail|42|q|", b.len) && b.p[b.len] == 0);
    CHECK(!b.oom);
    sb_free(&b);
    CHECK(b.p == NULL && b.len == 0 && b.cap == 0);
}

/* Formatted text longer than any fixed scratch comes out whole. */
static void test_long_printf(void) {
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    sbuf b = {0};
    sb_printf(&b, "<%s>", big);
    CHECK(b.len == sizeof big + 1 && b.p[0] == '<' && b.p[b.len - 1] == '>' && b.p[b.len] == 0);
    for (int i = 0; i < 10000; i++) sb_printf(&b, "%d,", i % 10);
    CHECK(b.len == sizeof big + 1 + 20000);
    sb_free(&b);
}

static void test_take(void) {
    sbuf b = {0};
    char *s = sb_take(&b); /* empty: an empty string, not NULL */
    CHECK(s && !strcmp(s, ""));
    free(s);
    sb_str(&b, "kept");
    s = sb_take(&b);
    CHECK(s && !strcmp(s, "kept") && b.p == NULL && b.len == 0);
    free(s);
    b.oom = true; /* an append failed earlier: the text is incomplete */
    sb_str(&b, "ignored");
    CHECK(b.len == 0);
    CHECK(sb_take(&b) == NULL && !b.oom);
}

/* The byte queues of a server connection: read in place, drop what was parsed. */
static void test_queue(void) {
    sbuf b = {0};
    CHECK(sb_reserve(&b, 100) && b.cap >= 101 && b.len == 0);
    memcpy(b.p, "line one\nline", 13);
    sb_wrote(&b, 13);
    CHECK(b.len == 13 && b.p[13] == 0);
    sb_drop(&b, 9);
    CHECK(b.len == 4 && !strcmp(b.p, "line"));
    size_t cap = b.cap;
    sb_clear(&b);
    CHECK(b.len == 0 && b.cap == cap && !strcmp(sb_cstr(&b), ""));
    sb_str(&b, "abc");
    sb_drop(&b, 5); /* more than there is: empty */
    CHECK(b.len == 0 && b.p[0] == 0);
    sb_free(&b);
    sb_clear(&b); /* nothing allocated: still fine */
    sb_drop(&b, 1);
    CHECK(b.p == NULL && b.len == 0);
    b.oom = true;
    CHECK(!sb_reserve(&b, 1));
    CHECK(!sb_reserve(&(sbuf){0}, SIZE_MAX)); /* cannot be had */
}

/* A read loop that reserves and then reads nothing (an empty file) leaves "",
 * not the allocator's leftovers: an empty --api-key-file once became a key. */
static void test_reserve_reads_empty(void) {
    sbuf b = {0};
    CHECK(sb_reserve(&b, 1 << 16) && !strcmp(sb_cstr(&b), ""));
    char *text = sb_take(&b);
    CHECK(text && text[0] == 0);
    free(text);
    sb_str(&b, "abc");
    CHECK(sb_reserve(&b, 1 << 20) && !strcmp(b.p, "abc")); /* a grown buffer keeps its end */
    sb_free(&b);
}

int main(void) {
    RUN(test_appends);
    RUN(test_long_printf);
    RUN(test_take);
    RUN(test_queue);
    RUN(test_reserve_reads_empty);
    return t_summary();
}
