/* common.c — error-message formatting and the programmer-error abort path. */
#include "common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int llc_fail(llc_err *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

void llc_err_prefix(llc_err *err, const char *fmt, ...) {
    if (!err) return;
    char prefix[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char joined[sizeof prefix + sizeof err->msg + 2];
    snprintf(joined, sizeof joined, "%s: %s", prefix, err->msg);
    size_t n = strlen(joined);
    if (n >= sizeof err->msg) n = sizeof err->msg - 1; /* keep the front: it names the place */
    memcpy(err->msg, joined, n);
    err->msg[n] = 0;
}

static llc_abort_hook g_abort_hook;

void llc_set_abort_hook(llc_abort_hook hook) { g_abort_hook = hook; }

void llc_assert_fail(const char *expr, const char *file, int line) {
    if (g_abort_hook) g_abort_hook();
    fprintf(stderr, "llmchat: internal error: assertion `%s` failed at %s:%d\n", expr, file,
            line);
    abort();
}

double llc_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int64_t llc_mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[128];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    fclose(f);
    return kb < 0 ? -1 : (int64_t)kb * 1024;
}
