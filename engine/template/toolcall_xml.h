/* toolcall_xml.h — the reader of XML-style tool calls (Qwen3-Coder, GLM 4.5/4.6,
 * MiniMax-M2 and M3, Hy3, Kimi K3), whose arguments are key/value markup rather than one JSON
 * object. Internal to engine/template: toolcall.c dispatches to it for those
 * formats and records what it emits (see toolcall.h for the formats and for
 * what the sink receives). */
#ifndef LLC_TOOLCALL_XML_H
#define LLC_TOOLCALL_XML_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "engine/template/toolcall.h"

/* A format's markup: what the reader looks for, and what a grammar forcing a
 * call writes (app/server's tool_choice "required"). */
typedef struct toolcall_xml_markup {
    const char *open, *close;  /* the block around the calls */
    const char *call_open;     /* before a name; NULL: the name follows `open` */
    const char *name_end;      /* after a name; NULL: it ends at whitespace or '<' */
    const char *call_close;    /* after a call's pairs; NULL: `close` ends the call */
    const char *key_open, *key_close;
    const char *value_open;    /* NULL: the value follows key_close */
    const char *value_close;   /* NULL: the key's own closing tag, ns "</" KEY ">" */
    bool trim_nl;              /* one newline each side of a value is markup */
    const char *ns;            /* MiniMax-M3: the token string before every tag, whose
                                  nested tags make an object or array value; or NULL */
    const char *attrs_end;     /* Kimi K3: after a name or key, attributes (name="value" ...)
                                  run up to this marker; a key's type="string" makes its
                                  value a string where the schema does not say; the name's and
                                  key's &quot; &amp; &lt; &gt; &apos; are read back. NULL: none */
    const char *json_open;     /* Kimi K3: a call's arguments as one JSON object instead of
                                  pairs, json_open ATTRS attrs_end {...} json_close; or NULL */
    const char *json_close;
} toolcall_xml_markup;

/* The markup of f, or NULL when f is not an XML format. */
const toolcall_xml_markup *toolcall_xml_markup_of(toolcall_format f);

typedef struct xml_reader xml_reader;

/* Whether f is one of the XML formats read here. */
bool toolcall_xml_format(toolcall_format f);
/* Whether the schema of a parameter types it as a string only ("string", or
 * "string" and "null"): its value is raw text, else JSON. */
bool toolcall_xml_is_string(const cJSON *prop);

/* A reader for one answer in format f (toolcall_xml_format(f)). tools (copied;
 * may be NULL) types each value by its parameter's schema. The sink's call
 * index is unused (the caller numbers calls); its callbacks may be NULL. */
int xml_reader_create(toolcall_format f, const cJSON *tools, const toolcall_sink *sink, xml_reader **out);
void xml_reader_free(xml_reader *r);
/* The next piece of the answer (at_end: the answer is over, len may be 0).
 * 0, or LLC_ERR_NOMEM. */
int xml_reader_feed(xml_reader *r, const char *text, size_t len, bool at_end);

#endif
