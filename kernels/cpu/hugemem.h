/* hugemem.h — anonymous memory for weights the CPU streams through: 2 MB aligned and
 * advised to the kernel as transparent huge pages (MADV_HUGEPAGE), so a matrix is
 * read without a TLB miss per 4 KB page. Where the kernel gives no huge pages the
 * memory is ordinary pages; it is never worse than malloc. */
#ifndef LLC_CPU_HUGEMEM_H
#define LLC_CPU_HUGEMEM_H

#include <stddef.h>

/* n bytes (n > 0), 64-byte aligned at least; NULL when the memory is not there. */
void *huge_alloc(size_t n);
/* Frees what huge_alloc(n) returned (the same n); NULL is ignored. */
void huge_free(void *p, size_t n);

#endif
