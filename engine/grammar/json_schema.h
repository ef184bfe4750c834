/* json_schema.h — JSON Schema to GBNF (engine/grammar/grammar.h), for structured output.
 *
 * Supported, as llama.cpp's json-schema-to-grammar does it: type (one or a
 * list), object (properties in their order, required first, then the optional
 * ones in order; additionalProperties false / true / a schema, absent = none
 * where there are properties, any otherwise; propertyNames as a string schema
 * for the additional ones; minProperties / maxProperties where only additional
 * members are counted), array (items, prefixItems or draft 4's array of items
 * with additionalItems, minItems, maxItems), string (minLength, maxLength,
 * pattern — an ECMAScript regular expression, json_regex.c —, format date,
 * time, date-time, uuid, email, uri), integer and number (minimum, maximum,
 * exclusiveMinimum, exclusiveMaximum as numbers or draft 4's booleans, exactly,
 * within ±2^53; a bounded number is written without an exponent), boolean,
 * null, enum, const, anyOf, oneOf (as anyOf), allOf of one schema, $ref to
 * #/$defs/... or #/definitions/... (recursion allowed), true / {} (any JSON
 * value). Annotations (title, description, examples, default, $schema, $id,
 * $comment, ...) are ignored. What cannot be enforced gives an error naming
 * it: keywords (multipleOf, uniqueItems, not, if/then/else, remote $ref, ...),
 * other formats, pattern or format with a length, a pattern's backreferences
 * or lookarounds, counts over optional properties.
 *
 * Whitespace between tokens is optional and bounded (a space, or a newline and
 * up to 20 indentation characters); the document ends with its value. Strings
 * without maxLength are unbounded. Additional properties (when allowed) may
 * reuse a declared property's name with the additional schema. */
#ifndef LLC_JSON_SCHEMA_H
#define LLC_JSON_SCHEMA_H

#include <cjson/cJSON.h>

#include "kernels/common.h"

/* GBNF text (malloc'd, NUL-terminated) for documents valid against schema.
 * LLC_ERR_UNSUPPORTED / LLC_ERR_FORMAT with a message naming the keyword and
 * where it is ("schema.properties.age: ..."). */
int json_schema_to_gbnf(const cJSON *schema, char **out, llc_err *err);
/* The same from schema text. */
int json_schema_text_to_gbnf(const char *text, char **out, llc_err *err);
/* GBNF for any JSON object (response_format json_object). */
const char *json_object_gbnf(void);

#endif
