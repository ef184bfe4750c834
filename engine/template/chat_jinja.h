/* chat_jinja.h — a model's own Jinja chat template, applied the way
 * llama-server applies it (`--jinja`, `POST /apply-template`).
 *
 * chat_jinja_create() compiles the template and probes what it can do with a
 * few trial renders (as llama.cpp does): whether it shows a system message,
 * and whether it wants tool-call arguments as an object rather than a JSON
 * string. chat_jinja_apply() then renders OpenAI-shaped messages:
 *   - each message is rebuilt as role, content (null becomes ""), then name,
 *     tool_call_id and tool_calls ({type, function: {name, arguments}, id}),
 *     only the members it has; role "developer" becomes "system";
 *   - a template without a system role gets the system text merged into the
 *     next user message ("SYSTEM\nUSER"); system text with no user message
 *     after it becomes a user message of its own;
 *   - arguments given as a JSON string are parsed to an object when the
 *     template wants objects;
 *   - variables: messages, tools (only when given), add_generation_prompt,
 *     bos_token, eos_token, enable_thinking = true (false for Apertus, and
 *     drop_thinking = false for DeepSeek V4, as llama.cpp's handlers for
 *     those formats render them), date_string ("%d %b %Y")
 *     and datetime ("%b %d %Y") of `now`, and strftime_now(fmt);
 *   - extra (an object, or NULL): more variables, over the ones above (not
 *     messages): a request's chat_template_kwargs ({"enable_thinking": false});
 *   - strip_bos removes one leading bos_token from the result (the tokenizer
 *     adds BOS itself).
 * A created chat_jinja is read-only: renders from several threads are safe. */
#ifndef LLC_CHAT_JINJA_H
#define LLC_CHAT_JINJA_H

#include <time.h>

#include <cjson/cJSON.h>

#include "kernels/common.h"

typedef struct chat_jinja chat_jinja;

/* Compiles src[0..len) with the model's BOS/EOS token texts (NULL = ""). A
 * syntax error fails here (LLC_ERR_FORMAT, "template line N: ..."). */
int chat_jinja_create(const char *src, size_t len, const char *bos, const char *eos,
                      chat_jinja **out, llc_err *err);
void chat_jinja_free(chat_jinja *cj);

/* Renders `messages` (a JSON array of OpenAI messages) and `tools` (a JSON
 * array, or NULL for none). now = 0 uses the current time. *out is malloc'd.
 * Errors: LLC_ERR_FORMAT for a malformed message or a template error
 * (raise_exception included), LLC_ERR_RANGE for a template over its limits,
 * LLC_ERR_NOMEM. */
int chat_jinja_apply(const chat_jinja *cj, const cJSON *messages, const cJSON *tools,
                     bool add_generation_prompt, bool strip_bos, time_t now, const cJSON *extra,
                     char **out, llc_err *err);

#endif
