/* common.h — what every module shares: result codes, the error-message carrier,
 * the programmer-error assert, and overflow-checked size arithmetic.
 *
 * Result codes: 0 ok, negative error, positive soft condition.
 * Functions that can fail on untrusted input take an `llc_err *` (may be NULL) and
 * write one line into it saying what is wrong; the caller decides how to show it. */
#ifndef LLC_COMMON_H
#define LLC_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    LLC_OK = 0,
    LLC_ERR_IO = -1,          /* open/read/mmap/write failed */
    LLC_ERR_FORMAT = -2,      /* malformed or hostile input */
    LLC_ERR_NOMEM = -3,       /* allocation failed */
    LLC_ERR_NOTFOUND = -4,    /* missing key / tensor / token */
    LLC_ERR_TYPE = -5,        /* value present but of the wrong type */
    LLC_ERR_UNSUPPORTED = -6, /* well-formed but not something we implement */
    LLC_ERR_RANGE = -7,       /* value out of the accepted range */
};

/* One human-readable line describing the last failure. */
typedef struct llc_err {
    char msg[320];
} llc_err;

/* Formats into err (if non-NULL) and returns `code`, so callers can write
 *   return llc_fail(err, LLC_ERR_FORMAT, "bad thing %d", x);            */
int llc_fail(llc_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes an existing message: "context: old message". */
void llc_err_prefix(llc_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Milliseconds on CLOCK_MONOTONIC: for durations (queue time, TTFT, throttling). */
double llc_now_ms(void);

/* Called before aborting on a programmer error; a UI registers a hook that
 * restores the terminal (endwin) so the message is readable. */
typedef void (*llc_abort_hook)(void);
void llc_set_abort_hook(llc_abort_hook hook);
_Noreturn void llc_assert_fail(const char *expr, const char *file, int line);

#define LLC_ASSERT(expr) \
    ((expr) ? (void)0 : llc_assert_fail(#expr, __FILE__, __LINE__))

/* Overflow-checked arithmetic on sizes: return false on overflow. */
static inline bool llc_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool llc_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}

/* Bytes of memory the system can hand out now (/proc/meminfo's MemAvailable);
 * -1 when unknown. */
int64_t llc_mem_available(void);

#define LLC_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
