/* fileio.h — reading whole input files for the subcommands. */
#ifndef LLC_APP_FILEIO_H
#define LLC_APP_FILEIO_H

#include <stddef.h>

#include "kernels/common.h"

/* Reads all of path into a malloc'd, NUL-terminated buffer (binary-safe: *len is
 * the byte count). Returns NULL with err set on failure. */
char *file_read_all(const char *path, size_t *len, llc_err *err);
/* A secret (an API key) kept in a file: its first line, without surrounding
 * whitespace; malloc'd. An empty one, or one over 4 KiB, is an error. */
char *file_read_secret(const char *path, llc_err *err);

/* The GBNF text of --grammar-file FILE or --json-schema FILE|JSON (schema text
 * when it starts with '{', else a file), converted (engine/grammar/json_schema.h);
 * *out is NULL when neither is given. Both, an unreadable file or a bad
 * grammar/schema: an error saying which. */
int file_read_grammar(const char *grammar_file, const char *json_schema, char **out, llc_err *err);

#endif
