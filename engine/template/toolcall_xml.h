/* toolcall_xml.h — the reader of XML-style tool calls (Qwen3-Coder, GLM 4.5/4.6,
 * MiniMax-M2), whose arguments are key/value markup rather than one JSON
 * object. Internal to engine/template: toolcall.c dispatches to it for those
 * formats and records what it emits (see toolcall.h for the formats and for
 * what the sink receives). */
#ifndef LLC_TOOLCALL_XML_H
#define LLC_TOOLCALL_XML_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "engine/template/toolcall.h"

typedef struct xml_reader xml_reader;

/* Whether f is one of the XML formats read here. */
bool toolcall_xml_format(toolcall_format f);

/* A reader for one answer in format f (toolcall_xml_format(f)). tools (copied;
 * may be NULL) types each value by its parameter's schema. The sink's call
 * index is unused (the caller numbers calls); its callbacks may be NULL. */
int xml_reader_create(toolcall_format f, const cJSON *tools, const toolcall_sink *sink, xml_reader **out);
void xml_reader_free(xml_reader *r);
/* The next piece of the answer (at_end: the answer is over, len may be 0).
 * 0, or LLC_ERR_NOMEM. */
int xml_reader_feed(xml_reader *r, const char *text, size_t len, bool at_end);

#endif
