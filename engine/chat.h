/* chat.h — chat templates: turning a conversation (system / user / assistant
 * messages) into the exact prompt text a model was trained on, and knowing
 * which strings end an assistant turn in that text.
 *
 * We do not run Jinja. chat_detect() recognises which well-known template a
 * model's `tokenizer.chat_template` string is by distinctive markers (as
 * llama.cpp's llm_chat_detect_template does) and chat_render() writes that
 * format in C. Every format below follows the model's real Hugging Face
 * template byte for byte for an ordinary alternating conversation
 * (optional system message first, then user/assistant turns).
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

typedef enum chat_tmpl {
    CHAT_TMPL_UNKNOWN = -1,
    CHAT_TMPL_RAW,               /* plain transcript for base models */
    CHAT_TMPL_CHATML,
    CHAT_TMPL_LLAMA2,            /* Meta Llama-2-chat, <<SYS>> */
    CHAT_TMPL_LLAMA3,
    CHAT_TMPL_LLAMA31,           /* llama3 + "Cutting Knowledge Date" system header */
    CHAT_TMPL_MISTRAL_V1,
    CHAT_TMPL_MISTRAL_V3,
    CHAT_TMPL_MISTRAL_V3_TEKKEN,
    CHAT_TMPL_MISTRAL_V7,
    CHAT_TMPL_MISTRAL_V7_TEKKEN,
    CHAT_TMPL_ZEPHYR,
    CHAT_TMPL_PHI3,
    CHAT_TMPL_PHI4,
    CHAT_TMPL_GEMMA,
    CHAT_TMPL_DEEPSEEK,          /* deepseek-coder-instruct */
    CHAT_TMPL_DEEPSEEK2,         /* deepseek-llm-chat, DeepSeek-V2 */
    CHAT_TMPL_DEEPSEEK3,         /* DeepSeek-V3 */
    CHAT_TMPL_COUNT              /* number of templates, not a template */
} chat_tmpl;

typedef enum chat_role { CHAT_SYSTEM, CHAT_USER, CHAT_ASSISTANT } chat_role;

typedef struct chat_msg {
    chat_role role;
    const char *content; /* NUL-terminated UTF-8; must not be NULL */
} chat_msg;

/* Which template a model's `tokenizer.chat_template` Jinja source is.
 * NULL, empty or all-whitespace → CHAT_TMPL_RAW (a base model with no template).
 * A string that is exactly a template name (see chat_tmpl_from_name) → that one.
 * A non-empty template we do not recognise → CHAT_TMPL_CHATML: the most common
 * format, and llama.cpp's fallback too. Never returns CHAT_TMPL_UNKNOWN. */
chat_tmpl chat_detect(const char *jinja_src);

/* Template from its name ("chatml", "llama2", "llama3", "mistral-v1", "zephyr",
 * "phi3", "gemma", "raw", ...; ASCII case-insensitive). "mistral" is accepted as
 * an alias of "mistral-v1". Returns -1 (CHAT_TMPL_UNKNOWN) for NULL or an
 * unknown name. */
int chat_tmpl_from_name(const char *name);

/* The canonical name; "unknown" for a value that is not a template. */
const char *chat_tmpl_name(chat_tmpl t);

/* All canonical names in enum order, ", "-separated, for --help and errors. */
const char *chat_tmpl_names(void);

/* Renders msgs[0..n) into a malloc'd NUL-terminated string in *out (the caller
 * frees it). add_assistant_prompt appends the opening of the assistant's turn
 * so the model answers next. n == 0 is allowed (msgs may then be NULL).
 * Errors (with *out set to NULL and a line in err): LLC_ERR_RANGE for a value
 * that is not a template, n < 0, or a message whose role is not a chat_role;
 * LLC_ERR_FORMAT for a message whose content is NULL; LLC_ERR_NOMEM. */
int chat_render(chat_tmpl t, const chat_msg *msgs, int n, bool add_assistant_prompt,
                char **out, llc_err *err);

/* Strings that end an assistant turn in this template's text ("<|im_end|>",
 * "<|eot_id|>", "</s>", "<end_of_turn>", "\nUser:" for raw ...), for the engine
 * to use as stop strings in addition to the model's end-of-generation tokens.
 * A static NULL-terminated array; for a value that is not a template, an empty
 * one ({NULL}). */
const char *const *chat_stop_strings(chat_tmpl t);

#endif
