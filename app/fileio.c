/* fileio.c — whole-file reads with clear errors. */
#include "app/fileio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *file_read_all(const char *path, size_t *len, llc_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        llc_fail(err, LLC_ERR_IO, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            char *nb = realloc(buf, (cap *= 2) + 1);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    bool failed = ferror(f);
    fclose(f);
    if (!buf || failed) {
        llc_fail(err, buf ? LLC_ERR_IO : LLC_ERR_NOMEM, "%s: %s", path,
                 buf ? "read error" : "out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}
