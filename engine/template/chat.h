/* chat.h — chat templates: turning a conversation (system / user / assistant
 * messages) into the exact prompt text a model was trained on, and knowing
 * which strings end an assistant turn in that text.
 *
 * Two ways: a model's own Jinja template, run by engine/jinja as llama-server
 * runs it (chat_template_from_jinja), or a built-in format written in C.
 * chat_detect() recognises which well-known format a model's
 * `tokenizer.chat_template` string is by distinctive markers (as llama.cpp's
 * llm_chat_detect_template does): that format is the fallback when a model has
 * no template, when its template fails, or when the user names a format
 * (`--chat-template NAME`). Every built-in format below follows the model's
 * real Hugging Face template byte for byte for an ordinary alternating
 * conversation (optional system message first, then user/assistant turns);
 * the conventions below are the built-in formats'. A Jinja template renders
 * what the template says (with a leading BOS removed when the tokenizer adds
 * one).
 *
 * Conventions of the rendered text
 * --------------------------------
 * - BOS: the text never begins with the BOS token's text ("<s>",
 *   "<|begin_of_text|>", "<bos>", ...). The caller's tokenizer adds BOS by its
 *   add-BOS rule. Markers *inside* the text — "<|im_start|>", "[INST]", and
 *   llama2's "</s><s>" between turns — are written as text and must be
 *   tokenized with special-token parsing on, so each becomes its one token.
 * - Message content is copied as-is (after the trimming the real template
 *   does, if any). Content that itself contains template markers is not
 *   escaped: whether "<|im_end|>" typed by a user becomes a special token is
 *   the tokenizer's decision, not this module's.
 * - Trimming, where a template trims (Jinja `|trim` / `.strip()`), removes what
 *   Python's str.strip() removes: ASCII whitespace including \x1c-\x1f and the
 *   Unicode spaces (U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029,
 *   U+202F, U+205F, U+3000) in UTF-8.
 * - Every message is its own turn, in order: consecutive messages of the same
 *   role are not merged, and the "roles must alternate" checks some Jinja
 *   templates raise are not imitated.
 * - Templates without a system role (gemma, mistral-v1/v3) fold system text
 *   into a user turn the way the real template does: "SYSTEM\n\nUSER". gemma
 *   and mistral-v1 fold into the next user message after the system message;
 *   mistral-v3 / -v3-tekken fold all system text into the LAST user message
 *   (as their real templates and mistral_common do). Several system messages
 *   folded into one turn are joined with "\n\n". System text with no user
 *   message to fold into becomes a user turn of its own at its position.
 *   llama2 puts system text in a <<SYS>> block inside the next [INST].
 * - add_assistant_prompt appends the opening of an assistant turn (e.g.
 *   "<|im_start|>assistant\n"). [INST] formats (llama2, mistral-*) have none:
 *   the closing "[/INST]" already hands over to the assistant.
 * - Continuing a partial answer: when add_assistant_prompt is false and the
 *   last message is the assistant's, that message is written up to the end of
 *   its content (through the template's assistant branch, so with its leading
 *   space / trimming) and left open — no end-of-turn marker — so the model
 *   continues it (like Hugging Face's continue_final_message).
 * - Default system prompts that some templates insert when the conversation
 *   has none (Qwen2's "You are a helpful assistant.", deepseek-coder's,
 *   Mistral-Small-3's) are not reproduced: the caller supplies its own.
 *
 * Formats (names as chat_tmpl_name() gives them)
 * ----------------------------------------------
 * raw        base models without a template (e.g. the TinyStories models):
 *            a plain transcript. System text as a first paragraph
 *            ("SYSTEM\n\n"), then "User: TEXT\n" and "Assistant: TEXT\n"
 *            lines; the assistant prompt is "Assistant:" (no trailing space).
 *            Stop string "\nUser:".
 * chatml     <|im_start|>ROLE\nTEXT<|im_end|>\n   (Qwen2, OpenHermes, ...)
 * llama2     Meta Llama-2-chat / CodeLlama-instruct:
 *            [INST] <<SYS>>\nSYS\n<</SYS>>\n\nUSER [/INST] ASSISTANT </s><s>[INST] ...
 *            (user and assistant text stripped)
 * llama3     <|start_header_id|>ROLE<|end_header_id|>\n\nTEXT<|eot_id|> (trimmed)
 * llama3.1   llama3 plus the Llama-3.1/3.2 system header, always present:
 *            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
 *            before the (trimmed) first system message. 3.2's template stamps
 *            today's date; we keep the template's fixed fallback date so the
 *            prompt (and its cached prefix) does not change from day to day.
 * mistral-v1 " [INST] USER [/INST] ASSISTANT</s>"  (Mistral-7B-Instruct v0.1/v0.2,
 *            Mixtral-8x7B; also older GGUFs' pre-2024 "[INST]" templates, which
 *            Mistral replaced with this one)
 * mistral-v3 "[INST] USER[/INST] ASSISTANT</s>" (assistant trimmed; Mistral 7B v0.3)
 * mistral-v3-tekken "[INST]USER[/INST]ASSISTANT</s>" (Mistral-Nemo)
 * mistral-v7 "[SYSTEM_PROMPT] SYS[/SYSTEM_PROMPT][INST] USER[/INST] ASSISTANT</s>"
 * mistral-v7-tekken  the same without the spaces (Mistral-Small-3)
 * zephyr     <|ROLE|>\nTEXT</s>\n   (zephyr-7b-beta, TinyLlama-1.1B-Chat)
 * phi3       <|ROLE|>\nTEXT<|end|>\n
 * phi4       <|im_start|>ROLE<|im_sep|>TEXT<|im_end|>
 * gemma      <start_of_turn>user|model\nTEXT<end_of_turn>\n (trimmed; gemma 1/2/3)
 * deepseek   deepseek-coder-instruct: "### Instruction:\n...\n### Response:\n...\n<|EOT|>\n"
 * deepseek2  deepseek-llm-chat / DeepSeek-V2: "User: ...\n\nAssistant: ...<｜end▁of▁sentence｜>"
 * deepseek3  DeepSeek-V3: all system text first, then "<｜User｜>..." and
 *            "<｜Assistant｜>...<｜end▁of▁sentence｜>"
 */
#ifndef LLC_CHAT_H
#define LLC_CHAT_H

#include "kernels/common.h"

typedef enum chat_format {
    CHAT_FMT_UNKNOWN = -1,
    CHAT_FMT_RAW,               /* plain transcript for base models */
    CHAT_FMT_CHATML,
    CHAT_FMT_LLAMA2,            /* Meta Llama-2-chat, <<SYS>> */
    CHAT_FMT_LLAMA3,
    CHAT_FMT_LLAMA31,           /* llama3 + "Cutting Knowledge Date" system header */
    CHAT_FMT_MISTRAL_V1,
    CHAT_FMT_MISTRAL_V3,
    CHAT_FMT_MISTRAL_V3_TEKKEN,
    CHAT_FMT_MISTRAL_V7,
    CHAT_FMT_MISTRAL_V7_TEKKEN,
    CHAT_FMT_ZEPHYR,
    CHAT_FMT_PHI3,
    CHAT_FMT_PHI4,
    CHAT_FMT_GEMMA,
    CHAT_FMT_DEEPSEEK,          /* deepseek-coder-instruct */
    CHAT_FMT_DEEPSEEK2,         /* deepseek-llm-chat, DeepSeek-V2 */
    CHAT_FMT_DEEPSEEK3,         /* DeepSeek-V3 */
    CHAT_FMT_COUNT              /* number of templates, not a template */
} chat_format;

typedef enum chat_role { CHAT_SYSTEM, CHAT_USER, CHAT_ASSISTANT } chat_role;

typedef struct chat_msg {
    chat_role role;
    const char *content; /* NUL-terminated UTF-8; must not be NULL */
    const char *reasoning; /* an assistant turn's reasoning, or NULL: a Jinja template gets it as
                              reasoning_content, to show or drop as it was written to */
} chat_msg;

/* A chat template as callers hold it: one of the built-in formats, or a
 * model's own Jinja template (with a built-in format as its fallback). The
 * built-in ones are static; chat_builtin(CHAT_FMT_X) is spelled CHAT_TMPL_X. */
typedef struct chat_template chat_template;
typedef const chat_template *chat_tmpl;

/* The static template of a built-in format; NULL for a value that is not one. */
chat_tmpl chat_builtin(int fmt);

#define CHAT_TMPL_RAW chat_builtin(CHAT_FMT_RAW)
#define CHAT_TMPL_CHATML chat_builtin(CHAT_FMT_CHATML)
#define CHAT_TMPL_LLAMA2 chat_builtin(CHAT_FMT_LLAMA2)
#define CHAT_TMPL_LLAMA3 chat_builtin(CHAT_FMT_LLAMA3)
#define CHAT_TMPL_LLAMA31 chat_builtin(CHAT_FMT_LLAMA31)
#define CHAT_TMPL_MISTRAL_V1 chat_builtin(CHAT_FMT_MISTRAL_V1)
#define CHAT_TMPL_MISTRAL_V3 chat_builtin(CHAT_FMT_MISTRAL_V3)
#define CHAT_TMPL_MISTRAL_V3_TEKKEN chat_builtin(CHAT_FMT_MISTRAL_V3_TEKKEN)
#define CHAT_TMPL_MISTRAL_V7 chat_builtin(CHAT_FMT_MISTRAL_V7)
#define CHAT_TMPL_MISTRAL_V7_TEKKEN chat_builtin(CHAT_FMT_MISTRAL_V7_TEKKEN)
#define CHAT_TMPL_ZEPHYR chat_builtin(CHAT_FMT_ZEPHYR)
#define CHAT_TMPL_PHI3 chat_builtin(CHAT_FMT_PHI3)
#define CHAT_TMPL_PHI4 chat_builtin(CHAT_FMT_PHI4)
#define CHAT_TMPL_GEMMA chat_builtin(CHAT_FMT_GEMMA)
#define CHAT_TMPL_DEEPSEEK chat_builtin(CHAT_FMT_DEEPSEEK)
#define CHAT_TMPL_DEEPSEEK2 chat_builtin(CHAT_FMT_DEEPSEEK2)
#define CHAT_TMPL_DEEPSEEK3 chat_builtin(CHAT_FMT_DEEPSEEK3)

/* Which built-in format a model's `tokenizer.chat_template` Jinja source is.
 * NULL, empty or all-whitespace → CHAT_FMT_RAW (a base model with no template).
 * A string that is exactly a format name (see chat_tmpl_from_name) → that one.
 * A non-empty template we do not recognise → CHAT_FMT_CHATML: the most common
 * format, and llama.cpp's fallback too. Never returns CHAT_FMT_UNKNOWN. */
chat_format chat_detect(const char *jinja_src);

/* Format from its name ("chatml", "llama2", "llama3", "mistral-v1", "zephyr",
 * "phi3", "gemma", "raw", ...; ASCII case-insensitive). "mistral" is accepted as
 * an alias of "mistral-v1". Returns -1 (CHAT_FMT_UNKNOWN) for NULL or an
 * unknown name. */
int chat_tmpl_from_name(const char *name);

/* The canonical name of a format; "unknown" for a value that is not one. */
const char *chat_format_name(int fmt);

/* A template's name: its format's, or "jinja" for a model's Jinja template;
 * "unknown" for NULL. */
const char *chat_tmpl_name(chat_tmpl t);

/* All canonical format names in enum order, ", "-separated, for --help and errors. */
const char *chat_tmpl_names(void);

/* ---- the model's own Jinja template ---- */

/* Compiles a Jinja chat template (engine/jinja, applied as llama-server does:
 * engine/template/chat_jinja.h) with the model's BOS and EOS texts. strip_bos removes
 * one leading BOS text from every render (for tokenizers that add BOS
 * themselves). The fallback format is chat_detect(src). The template is tried
 * on a sample conversation (system, user, assistant, user): a syntax error or
 * a template that fails on it is an error here (LLC_ERR_FORMAT, one line
 * "template line N: ..."), so the caller can say so once and use the
 * built-in format instead. *out is freed with chat_template_free. */
int chat_template_from_jinja(const char *src, size_t len, const char *bos, const char *eos,
                             bool strip_bos, chat_template **out, llc_err *err);

/* Frees a template from chat_template_from_jinja; NULL and the built-in
 * templates are ignored. */
void chat_template_free(chat_tmpl t);

/* The built-in format of t (a Jinja template's fallback); CHAT_FMT_UNKNOWN for NULL. */
chat_format chat_tmpl_format(chat_tmpl t);

/* Whether t renders a model's Jinja template. */
bool chat_tmpl_is_jinja(chat_tmpl t);

/* A Jinja template's source text (NUL-terminated; what engine/toolcall reads
 * its tool-call format from); NULL for a built-in format. */
const char *chat_tmpl_source(chat_tmpl t);

/* How many renders of a Jinja template failed and used the fallback format,
 * and the first failure's message ("" when none). Safe from any thread. */
int chat_tmpl_fallbacks(chat_tmpl t, char *first_error, size_t cap);

/* Renders msgs[0..n) into a malloc'd NUL-terminated string in *out (the caller
 * frees it). add_assistant_prompt appends the opening of the assistant's turn
 * so the model answers next. n == 0 is allowed (msgs may then be NULL).
 * A Jinja template that fails on these messages (raise_exception, a runtime
 * error, a limit) renders them with its fallback format instead (counted, see
 * chat_tmpl_fallbacks). Errors (with *out set to NULL and a line in err):
 * LLC_ERR_RANGE for NULL t, n < 0, or a message whose role is not a
 * chat_role; LLC_ERR_FORMAT for a message whose content is NULL; LLC_ERR_NOMEM. */
int chat_render(chat_tmpl t, const chat_msg *msgs, int n, bool add_assistant_prompt,
                char **out, llc_err *err);

/* Renders OpenAI-shaped messages (a cJSON array: role, content, tool_calls,
 * tool_call_id, name) with optional tools (a cJSON array or NULL), as
 * llama-server's POST /apply-template does. A Jinja template gets everything;
 * a built-in format takes system/user/assistant messages with string content
 * (other roles and tools are refused: LLC_ERR_UNSUPPORTED). Unlike
 * chat_render, a Jinja template's error is returned, not replaced by the
 * fallback (the caller asked for this template's rendering). */
struct cJSON;
int chat_apply_json(chat_tmpl t, const struct cJSON *messages, const struct cJSON *tools,
                    bool add_generation_prompt, char **out, llc_err *err);
/* The same with more template variables (an object, or NULL; a request's
 * chat_template_kwargs such as {"enable_thinking": false}); a built-in format
 * ignores them. */
/* msgs[0..n) as OpenAI-shaped messages (a cJSON array of {role, content}, the
 * caller's to free), for chat_apply_json*; NULL when out of memory. */
struct cJSON *chat_msgs_to_json(const chat_msg *msgs, int n);
int chat_apply_json_vars(chat_tmpl t, const struct cJSON *messages, const struct cJSON *tools,
                         bool add_generation_prompt, const struct cJSON *vars, char **out, llc_err *err);

/* Strings that end an assistant turn in this template's text ("<|im_end|>",
 * "<|eot_id|>", "</s>", "<end_of_turn>", "\nUser:" for raw ...), for the engine
 * to use as stop strings in addition to the model's end-of-generation tokens.
 * For a Jinja template, its fallback format's. A static NULL-terminated array;
 * for NULL, an empty one ({NULL}). */
const char *const *chat_stop_strings(chat_tmpl t);

#endif
