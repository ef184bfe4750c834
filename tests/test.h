/* test.h — the unit-test harness: TEST functions, CHECK assertions that record a
 * failure and carry on, and a main() tail that prints "N passed, N failed".
 * A test passes when none of its CHECKs failed. */
#ifndef LLC_TEST_H
#define LLC_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_passed, t_failed, t_cur_failures;
static const char *t_cur_name;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            t_cur_failures++;                                                        \
            fprintf(stderr, "  %s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__,   \
                    t_cur_name, #cond);                                              \
        }                                                                            \
    } while (0)

/* CHECK with a printf-style explanation printed on failure. */
#define CHECKF(cond, ...)                                                            \
    do {                                                                             \
        if (!(cond)) {                                                               \
            t_cur_failures++;                                                        \
            fprintf(stderr, "  %s:%d: %s: CHECK(%s) failed: ", __FILE__, __LINE__,   \
                    t_cur_name, #cond);                                              \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
        }                                                                            \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                        \
    CHECKF(fabs((double)(a) - (double)(b)) <= (tol), "%.9g vs %.9g (tol %g)",        \
           (double)(a), (double)(b), (double)(tol))

static inline void t_run(const char *name, void (*fn)(void)) {
    t_cur_name = name;
    t_cur_failures = 0;
    fn();
    if (t_cur_failures) {
        t_failed++;
        printf("FAIL %s\n", name);
    } else {
        t_passed++;
        printf("ok   %s\n", name);
    }
    fflush(stdout);
}
#define RUN(fn) t_run(#fn, fn)

/* Prints the summary line the runner adds up; returns the exit status. */
static inline int t_summary(void) {
    printf("%d passed, %d failed\n", t_passed, t_failed);
    return t_failed ? 1 : 0;
}

/* Where ../shared lives (models, vocab, reference); LLC_SHARED overrides. */
static inline const char *t_shared(void) {
    const char *s = getenv("LLC_SHARED");
    return s && *s ? s : "../shared";
}

/* Reads a whole file into a malloc'd NUL-terminated buffer; NULL on failure. */
static inline char *t_read_file(const char *path, size_t *len_out) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        if (len_out) *len_out = (size_t)n;
    }
    return buf;
}

#endif
