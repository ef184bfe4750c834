/* fileio.c — whole-file reads with clear errors, and the grammar options. */
#include "app/fileio.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"
#include "kernels/sbuf.h"

char *file_read_all(const char *path, size_t *len, llc_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        llc_fail(err, LLC_ERR_IO, "%s: %s", path, strerror(errno));
        return NULL;
    }
    sbuf b = {0};
    for (size_t got; sb_reserve(&b, 1 << 16) && (got = fread(b.p + b.len, 1, b.cap - b.len - 1, f)) > 0;)
        sb_wrote(&b, got);
    bool failed = ferror(f);
    fclose(f);
    if (b.oom || failed) {
        llc_fail(err, b.oom ? LLC_ERR_NOMEM : LLC_ERR_IO, "%s: %s", path, b.oom ? "out of memory" : "read error");
        sb_free(&b);
        return NULL;
    }
    *len = b.len;
    return sb_take(&b);
}

char *file_read_secret(const char *path, llc_err *err) {
    size_t len;
    char *text = file_read_all(path, &len, err);
    if (!text) return NULL;
    if (len > 4096) {
        free(text);
        llc_fail(err, LLC_ERR_RANGE, "%s: over 4 KiB: not a key file", path);
        return NULL;
    }
    size_t a = 0, b = strcspn(text, "\r\n"); /* the first line */
    while (a < b && isspace((unsigned char)text[a])) a++;
    while (b > a && isspace((unsigned char)text[b - 1])) b--;
    if (a == b) {
        free(text);
        llc_fail(err, LLC_ERR_FORMAT, "%s: the key file is empty", path);
        return NULL;
    }
    memmove(text, text + a, b - a);
    text[b - a] = 0;
    return text;
}

int file_read_grammar(const char *grammar_file, const char *json_schema, char **out, llc_err *err) {
    *out = NULL;
    if (grammar_file && json_schema) return llc_fail(err, LLC_ERR_RANGE, "give --grammar-file or --json-schema, not both");
    char *text = NULL;
    size_t len;
    if (grammar_file && !(text = file_read_all(grammar_file, &len, err))) return LLC_ERR_IO;
    if (json_schema) {
        const char *p = json_schema;
        while (*p == ' ' || *p == '\t' || *p == '\n') p++;
        char *schema = *p == '{' ? strdup(p) : file_read_all(json_schema, &len, err);
        if (!schema) return *p == '{' ? llc_fail(err, LLC_ERR_NOMEM, "out of memory") : LLC_ERR_IO;
        llc_err e2;
        int rc = json_schema_text_to_gbnf(schema, &text, &e2);
        free(schema);
        if (rc) return llc_fail(err, rc, "--json-schema: %s", e2.msg);
    }
    if (!text) return 0;
    grammar *g;
    llc_err e2;
    int rc = grammar_parse(text, strlen(text), &g, &e2);
    if (rc) {
        free(text);
        return llc_fail(err, rc, "%s: %s", grammar_file ? grammar_file : "--json-schema", e2.msg);
    }
    grammar_free(g);
    *out = text;
    return 0;
}
