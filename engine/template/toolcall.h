/* toolcall.h — OpenAI-style function calling around a chat model: which
 * tool-call markup a model writes (from its chat template), reading that markup
 * out of the answer as it streams, and a prompt for models whose template
 * cannot offer tools.
 *
 * Formats
 * -------
 * HERMES   <tool_call>{"name": N, "arguments": {...}}</tool_call>, any number,
 *          text around them (NousResearch Hermes, Qwen 2.5 / QwQ, Granite 4 ...)
 * LLAMA3   an answer that starts with {"name": N, "parameters": {...}} (also
 *          {"type": "function", "name": ...} and "arguments"; several separated
 *          by ";"), N must be one of the offered tools; or <|python_tag|> then
 *          such an object, or code (a call of "python" with {"code": CODE})
 * MISTRAL  [TOOL_CALLS][{"name": N, "arguments": {...}}, ...]  (v3 .. Nemo) or
 *          [TOOL_CALLS]N[ARGS]{...}, repeated (Ministral 3, Magistral; an
 *          optional [CALL_ID]id before [ARGS] is skipped)
 * HARMONY  gpt-oss: a commentary message to a function,
 *          to=functions.N ... <|message|>{...}<|call|> — the reasoning parser
 *          (engine/template/reasoning) strips the rest of the harmony markup
 *          and hands this part on from "to=" (its markers are control tokens)
 * QWEN3_CODER <tool_call>\n<function=N>\n<parameter=K>\nVALUE\n</parameter>\n...
 *          </function>\n</tool_call> (Qwen3-Coder, Qwen3.5 ...)
 * GLM      <tool_call>N\n<arg_key>K</arg_key>\n<arg_value>VALUE</arg_value>\n...
 *          </tool_call> (GLM 4.5 / 4.6)
 * MINIMAX  <minimax:tool_call>\n<invoke name="N">\n<parameter name="K">VALUE
 *          </parameter>\n...</invoke>\n...</minimax:tool_call> (MiniMax-M2)
 * MINIMAX_M3 ]<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name="N">]<]minimax[>[<K>VALUE
 *          ]<]minimax[>[</K>...]<]minimax[>[</invoke>\n...]<]minimax[>[</tool_call> (MiniMax-M3:
 *          every marker namespaced by the token string ]<]minimax[>[; an object or
 *          array value is nested markup, <item> per array element)
 * HUNYUAN  <tool_calls:opensource>\n<tool_call:opensource>N<tool_sep:opensource>\n
 *          <arg_key:opensource>K</arg_key:opensource>\n<arg_value:opensource>VALUE
 *          </arg_value:opensource>\n...</tool_call:opensource>\n</tool_calls:opensource>
 *          (tencent Hy3: GLM's markup, every tag suffixed)
 *          These five write raw-text values (engine/template/toolcall_xml.c):
 *          the arguments are built as a JSON object {"K": VALUE, ...}, a value
 *          typed by its parameter's schema in the offered tools: "string" as
 *          a string (streamed), anything else (or no schema) parsed as JSON
 *          once complete, a string when it is not JSON.
 * MINIMAX_M1 <tool_calls>\n{"name": N, "arguments": {...}}\n...</tool_calls>: JSON
 *          objects one per line in one block (MiniMax-M1), or a JSON array of
 *          them (ServiceNow Apriel, whose template shows <tool_calls>[...])
 * KIMI_K2  <|tool_calls_section_begin|><|tool_call_begin|>functions.N:0
 *          <|tool_call_argument_begin|>{...}<|tool_call_end|>...<|tool_calls_section_end|>
 *          (Kimi K2; "functions." and the ":0" index are not the name)
 * SOLAR    <|tool_calls|><|tool_call:begin|>ID<|tool_call:name|>N<|tool_call:args|>{...}
 *          <|tool_call:end|>...<|calls|> (Solar Open)
 * COMMAND_A <|START_ACTION|>[{"tool_call_id": "0", "tool_name": N, "parameters": {...}},
 *          ...]<|END_ACTION|> (Cohere Command-A / Cohere2MoE)
 * GEMMA4   <|tool_call>call:N{key:<|"|>text<|"|>,n:18,o:{k:true}}<tool_call|> (Gemma 4:
 *          bare keys, <|"|>-quoted strings; made JSON once the value is complete)
 *          These four's markers are control tokens: the answer must show them.
 * GENERIC  templates whose own tool format is not one of these (or that have
 *          none: the built-in formats): the conversation gets a system message
 *          describing the tools (toolcall_generic_messages) that asks for
 *          HERMES markup, and the answer is read as HERMES.
 *
 * Reading an answer
 * -----------------
 * The parser is fed the answer's text pieces as they come. Text outside calls
 * goes to the sink's `content` at once, except what may still be the start of
 * a marker (held until decided: markup never shows as content) and whitespace
 * just before a call or after the last one (dropped). A call is announced
 * (`call`, with its index and name) once its name is complete; its arguments
 * follow in pieces (`args`) as the model writes them — the raw JSON text of
 * the arguments value, so the pieces joined are the call's arguments string
 * ("{}" when the call has none; a JSON string value is decoded). Markup that
 * turns out not to be a call (no name, not JSON) is given back as content.
 * At the end (toolcall_finish) held text is released; a call cut off by the
 * length limit keeps what its arguments had. The same calls and content are
 * kept for non-streaming answers (toolcall_count / _name / _arguments /
 * _content). */
#ifndef LLC_TOOLCALL_H
#define LLC_TOOLCALL_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "kernels/common.h"

typedef enum toolcall_format {
    TOOLCALL_GENERIC,
    TOOLCALL_HERMES,
    TOOLCALL_LLAMA3,
    TOOLCALL_MISTRAL,
    TOOLCALL_HARMONY,
    TOOLCALL_QWEN3_CODER,
    TOOLCALL_GLM,
    TOOLCALL_MINIMAX,
    TOOLCALL_MINIMAX_M1,
    TOOLCALL_MINIMAX_M3,
    TOOLCALL_HUNYUAN,
    TOOLCALL_KIMI_K2,
    TOOLCALL_SOLAR,
    TOOLCALL_COMMAND_A,
    TOOLCALL_GEMMA4,
    TOOLCALL_KIMI_K3,
    TOOLCALL_N_FORMATS /* (a count, not a format) */
} toolcall_format;

/* The tool-call format a Jinja chat template uses, by its markers (as
 * llama.cpp recognises them, by markup, never by name): one of the formats
 * above, or GENERIC for NULL, a template with no tools, or one whose format is
 * not read here (command-r, functionary v3.1 / v3.2, DeepSeek ...). */
toolcall_format toolcall_detect(const char *jinja_src);
/* "generic", "hermes", "llama3", "mistral", "harmony", "qwen3_coder", "glm",
 * "minimax", "minimax_m1", "minimax_m3", "hunyuan", "kimi_k2", "solar", "command_a", "gemma4",
 * "kimi_k3". */
const char *toolcall_format_name(toolcall_format f);

/* Where a parser's output goes as it is decided (each callback may be NULL;
 * text is not NUL-terminated). */
typedef struct toolcall_sink {
    void *ud;
    void (*content)(void *ud, const char *text, size_t len);
    void (*call)(void *ud, int index, const char *name); /* a call begins */
    void (*args)(void *ud, int index, const char *piece, size_t len);
} toolcall_sink;

typedef struct toolcall_parser toolcall_parser;

/* A parser for one answer. tools: the offered tools (OpenAI's array) or NULL;
 * LLAMA3's bare JSON calls must name one of them, the XML formats type values
 * by their parameters. sink may be NULL. */
int toolcall_parser_create(toolcall_format f, const cJSON *tools, const toolcall_sink *sink,
                           toolcall_parser **out);
void toolcall_parser_free(toolcall_parser *p);
/* The next piece of the answer. 0, or LLC_ERR_NOMEM. */
int toolcall_feed(toolcall_parser *p, const char *text, size_t len);
/* The answer is over: releases held text, ends an unfinished call. */
int toolcall_finish(toolcall_parser *p);

/* What was read so far (everything after toolcall_finish). */
int toolcall_count(const toolcall_parser *p);
const char *toolcall_name(const toolcall_parser *p, int i);
const char *toolcall_arguments(const toolcall_parser *p, int i);
const char *toolcall_content(const toolcall_parser *p, size_t *len);

/* Renders OpenAI messages for a template that shows no tools: tools (or NULL)
 * are described in a system message (the first message's, extended, or a new
 * one) asking for HERMES markup; required adds that a tool must be called;
 * assistant tool_calls become that markup after the content; tool messages
 * become user messages "<tool_response>\n...\n</tool_response>" (a run of
 * them one message). messages must be sanitized: string content, roles
 * system/user/assistant/tool. *out: a new array of system/user/assistant
 * messages with string content. */
int toolcall_generic_messages(const cJSON *messages, const cJSON *tools, bool required, cJSON **out,
                              llc_err *err);

#endif
