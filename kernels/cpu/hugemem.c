/* hugemem.c — huge_alloc/huge_free: mmap'd anonymous memory, its start rounded up
 * to 2 MB (the spare head and tail of the reservation are unmapped again), advised
 * MADV_HUGEPAGE. Only whole aligned 2 MB ranges become huge pages; the rest of a
 * mapping stays in 4 KB pages, so nothing beyond n is ever made resident. */
#include "kernels/cpu/hugemem.h"

#include <stdint.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

static size_t page_round(size_t n) { return (n + 4095) & ~(size_t)4095; }

void *huge_alloc(size_t n) {
    if (!n) return NULL;
    const size_t len = page_round(n);
    if (len < n || len + HUGE_PAGE < len) return NULL;
    uint8_t *r = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) return NULL;
    uint8_t *p = (uint8_t *)(((uintptr_t)r + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (p > r) munmap(r, (size_t)(p - r));
    const size_t tail = (size_t)(r + len + HUGE_PAGE - (p + len));
    if (tail) munmap(p + len, tail);
#ifdef MADV_HUGEPAGE
    (void)madvise(p, len, MADV_HUGEPAGE); /* a hint: without it, ordinary pages */
#endif
    return p;
}

void huge_free(void *p, size_t n) {
    if (p) munmap(p, page_round(n));
}
