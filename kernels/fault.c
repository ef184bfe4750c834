/* fault.c — the allocation fault injector of fault.h: one countdown, shared by
 * every thread (the engine thread allocates; a test arms it from another). */
#include "kernels/fault.h"

#include <stdatomic.h>
#include <stdlib.h>

static atomic_int g_countdown; /* 0: off; n: the nth allocation from now fails */

void llc_fault_fail_alloc(int nth) { atomic_store(&g_countdown, nth > 0 ? nth : 0); }

void llc_fault_arm_from_env(void) {
    const char *v = getenv("LLC_FAULT_ALLOC");
    if (v && atoi(v) > 0) llc_fault_fail_alloc(atoi(v));
}

static atomic_bool g_events_fail;

void llc_fault_fail_events(bool on) { atomic_store(&g_events_fail, on); }

bool llc_fault_event_fails(void) { return atomic_load_explicit(&g_events_fail, memory_order_relaxed); }

static atomic_bool g_text_fails;

void llc_fault_fail_text(bool on) { atomic_store(&g_text_fails, on); }

bool llc_fault_text_fails(void) { return atomic_load_explicit(&g_text_fails, memory_order_relaxed); }

bool llc_fault_alloc_fails(void) {
    int n = atomic_load_explicit(&g_countdown, memory_order_relaxed);
    while (n > 0)
        if (atomic_compare_exchange_weak(&g_countdown, &n, n - 1)) return n == 1;
    return false;
}
