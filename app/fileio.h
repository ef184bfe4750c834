/* fileio.h — reading whole input files for the subcommands. */
#ifndef LLC_APP_FILEIO_H
#define LLC_APP_FILEIO_H

#include <stddef.h>

#include "kernels/common.h"

/* Reads all of path into a malloc'd, NUL-terminated buffer (binary-safe: *len is
 * the byte count). Returns NULL with err set on failure. */
char *file_read_all(const char *path, size_t *len, llc_err *err);

#endif
