/* jinja.h — a Jinja2 interpreter for the subset real chat templates use.
 *
 * jinja_parse() compiles template source into an immutable tree (lexer with
 * Hugging Face's settings trim_blocks + lstrip_blocks, whitespace control
 * `{%- -%}`, comments); jinja_render() evaluates it against variables given as
 * a cJSON object. A compiled template is read-only and may be rendered from
 * several threads at once: every render has its own memory arena.
 *
 * Supported: statements if/elif/else, for (tuple targets, `if` filter, else,
 * loop.index/index0/revindex/first/last/length/previtem/nextitem, break,
 * continue), set (names, tuples, `ns.attr`, block set), macro (defaults,
 * keyword arguments), call blocks with caller(), filter blocks, generation
 * blocks (rendered as their body), raw. Values none/bool/int/float/string/
 * list/dict with Python semantics for truth, comparison, `in`, slicing,
 * `+ - * / // % **`, `~`; the usual filters, tests, and string/dict/list
 * methods (see jinja_eval.c); globals range, namespace, dict,
 * raise_exception, strftime_now.
 *
 * Untrusted templates are bounded: nesting depth, evaluation steps, output
 * size and memory are limited, and every error is one line with the template
 * line number. */
#ifndef LLC_JINJA_H
#define LLC_JINJA_H

#include <time.h>

#include <cjson/cJSON.h>

#include "kernels/common.h"

typedef struct jinja_tpl jinja_tpl;

typedef struct jinja_opts {
    time_t now;            /* strftime_now's clock; 0 = the current time */
    long long max_steps;   /* evaluation steps before giving up; 0 = default (20M) */
    size_t max_output;     /* bytes of output; 0 = default (32 MiB) */
    size_t max_memory;     /* arena bytes; 0 = default (512 MiB) */
} jinja_opts;

/* Compiles src[0..len). Errors: LLC_ERR_FORMAT with "line N: ..." for a syntax
 * error, LLC_ERR_RANGE for nesting beyond the limit, LLC_ERR_NOMEM. */
int jinja_parse(const char *src, size_t len, jinja_tpl **out, llc_err *err);

void jinja_free(jinja_tpl *t);

/* Renders t with the members of `vars` (a cJSON object; NULL = none) as global
 * variables. A cJSON object node whose `valuestring` is set (cJSON leaves it
 * unused for objects) is a mapping that came from that JSON text: it behaves
 * as the mapping everywhere except that printing it whole gives the text
 * back (tool-call arguments, which clients send as strings). *out is malloc'd and NUL-terminated (the caller frees it); *out_len
 * (may be NULL) gets its length. Errors: LLC_ERR_FORMAT for a runtime error
 * (including raise_exception: "template error: MESSAGE"), LLC_ERR_RANGE when a
 * limit is reached, LLC_ERR_NOMEM. opts may be NULL. */
int jinja_render(const jinja_tpl *t, const cJSON *vars, const jinja_opts *opts, char **out,
                 size_t *out_len, llc_err *err);

#endif
