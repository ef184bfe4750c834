/* clock.h — the monotonic clock the subcommands time themselves with. */
#ifndef LLC_APP_CLOCK_H
#define LLC_APP_CLOCK_H

#include <time.h>

/* Seconds on CLOCK_MONOTONIC. */
static inline double clock_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#endif
