/* sbuf.c — the growable buffer (see sbuf.h). */
#include "kernels/sbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for `extra` more bytes and the NUL; false (and oom) when there is none. */
bool sb_reserve(sbuf *b, size_t extra) {
    if (b->oom) return false;
    if (extra > SIZE_MAX - 1 - b->len) return !(b->oom = true);
    const size_t need = b->len + extra + 1;
    if (need <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *p = realloc(b->p, cap);
    if (!p) return !(b->oom = true);
    p[b->len] = 0; /* a fresh buffer reads as "" even when nothing is written */
    b->p = p;
    b->cap = cap;
    return true;
}

void sb_add(sbuf *b, const void *src, size_t n) {
    if (!sb_reserve(b, n)) return;
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
    b->p[b->len] = 0;
}

void sb_str(sbuf *b, const char *s) {
    if (s) sb_add(b, s, strlen(s));
}

void sb_putc(sbuf *b, char c) { sb_add(b, &c, 1); }

void sb_vprintf(sbuf *b, const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    char tmp[256];
    const int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    if (n < 0) {
        va_end(again);
        return;
    }
    if ((size_t)n < sizeof tmp) sb_add(b, tmp, (size_t)n);
    else if (sb_reserve(b, (size_t)n)) {
        vsnprintf(b->p + b->len, (size_t)n + 1, fmt, again);
        b->len += (size_t)n;
    }
    va_end(again);
}

void sb_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

void sb_wrote(sbuf *b, size_t n) {
    b->len += n;
    b->p[b->len] = 0;
}

void sb_drop(sbuf *b, size_t n) {
    if (n >= b->len) {
        sb_clear(b);
        return;
    }
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
    b->p[b->len] = 0;
}

void sb_clear(sbuf *b) {
    b->len = 0;
    if (b->p) b->p[0] = 0;
}

const char *sb_cstr(const sbuf *b) { return b->p ? b->p : ""; }

char *sb_take(sbuf *b) {
    if (b->oom) {
        sb_free(b);
        return NULL;
    }
    char *p = b->p ? b->p : strdup("");
    *b = (sbuf){0};
    return p;
}

void sb_free(sbuf *b) {
    free(b->p);
    *b = (sbuf){0};
}
