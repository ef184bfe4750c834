/* highlight.h — syntax colours for the code of fenced blocks: a small
 * table-driven scanner that splits a line of code into keywords, types and
 * built-in names, strings, comments and numbers, for the languages models
 * write most (C/C++, Python, JavaScript/TypeScript, shell, JSON, Rust, Go,
 * Java, SQL, YAML), named as a fence's info string names them ("py",
 * "bash", "ts", ...). One line at a time with a state carried to the next
 * (block comments, strings that span lines), so a block still streaming is
 * coloured as far as it goes. No curses and no allocation: ui/markdown gives
 * the spans styles, ui/view colours. */
#ifndef LLC_UI_HIGHLIGHT_H
#define LLC_UI_HIGHLIGHT_H

#include <stddef.h>

typedef struct hl_lang hl_lang; /* one language's table (static; never freed) */

typedef enum hl_kind {
    HL_PLAIN,
    HL_KEYWORD,
    HL_TYPE,    /* types, built-in names and constants, shell variables */
    HL_STRING,
    HL_COMMENT,
    HL_NUMBER,
} hl_kind;

/* The language a fence names (case-insensitive: "c", "Python", "sh", ...);
 * NULL when it is not one of them (the code is then shown plain). */
const hl_lang *hl_find(const char *name, size_t len);

/* The language's canonical name ("c", "python", ...). */
const char *hl_name(const hl_lang *lang);

/* Called for each span of a line, left to right, covering it exactly. */
typedef void (*hl_emit)(void *ctx, size_t off, size_t len, hl_kind kind);

/* Splits one line of code (no '\n') into spans. state is 0 on a block's
 * first line, then what the previous call returned. lang NULL: one plain
 * span. Returns the state for the next line. */
int hl_line(const hl_lang *lang, int state, const char *s, size_t len, hl_emit emit, void *ctx);

#endif
