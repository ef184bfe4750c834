/* prompt.h — a conversation as the model's prompt: rendered with the chat
 * template, tokenized, and, when it does not fit its token budget, with the
 * oldest turns left out (a system message is always kept). Used by the chat UI
 * and the socket server alike, so a session gives the same prompt either way
 * and the engine's prefix cache finds the earlier turns again. */
#ifndef LLC_PROMPT_H
#define LLC_PROMPT_H

#include "engine/template/chat.h"
#include "engine/tokenizer/tokenizer.h"

typedef struct prompt {
    int32_t *ids;  /* malloc'd; the caller frees with free() */
    int n_ids;
    int n_dropped; /* leading non-system messages left out to fit */
} prompt;

/* Builds the prompt of msgs[0..n) (system first if any; the last message is
 * normally the user's) with the assistant's turn opened. The rendered template
 * text is tokenized with its special tokens recognised and BOS added when the
 * vocabulary wants it. Messages are dropped oldest first, a user message
 * together with the answer that follows it, until the prompt has at most
 * `budget` tokens; the last message is never dropped. Errors: LLC_ERR_RANGE
 * when even the system message and the last message exceed the budget (the
 * message says how many tokens they are), and the errors of chat_render. */
int prompt_build(const tokenizer *tok, chat_tmpl t, const chat_msg *msgs, int n, int budget,
                 prompt *out, llc_err *err);

/* The same for OpenAI-shaped messages (a cJSON array: role, content,
 * tool_calls, tool_call_id) and tools (or NULL), rendered with
 * chat_apply_json. Turns are dropped oldest first up to the next user
 * message, so a tool answer never loses the call it answers. vars: more
 * template variables (chat_apply_json_vars), or NULL. */
struct cJSON;
int prompt_build_json(const tokenizer *tok, chat_tmpl t, const struct cJSON *messages,
                      const struct cJSON *tools, const struct cJSON *vars, int budget, prompt *out,
                      llc_err *err);

/* The prompt budget of a conversation in a context of n_ctx tokens whose answer
 * may take max_tokens: the context less room for the answer (at most half). */
static inline int prompt_budget(int n_ctx, int max_tokens) {
    return n_ctx - (max_tokens < n_ctx / 2 ? max_tokens : n_ctx / 2);
}

#endif
