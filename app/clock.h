/* clock.h — the monotonic clock the subcommands time themselves with. */
#ifndef LLC_APP_CLOCK_H
#define LLC_APP_CLOCK_H

#include "kernels/common.h"

/* Seconds on CLOCK_MONOTONIC. */
static inline double clock_now_s(void) { return llc_now_ms() * 1e-3; }

#endif
