/* llm.h — a model ready to run, as the subcommands open it: the GGUF file, its
 * tokenizer, a backend chosen by --device/--threads, and the weights on it. */
#ifndef LLC_APP_LLM_H
#define LLC_APP_LLM_H

#include "app/cli.h"
#include "engine/template/chat.h"
#include "engine/sched/engine.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend.h"

typedef struct llm {
    gguf *file;
    tokenizer *tok;
    backend *be;
    model *m;
    /* --draft: the speculative decoding draft on the same backend, or NULL */
    gguf *draft_file;
    tokenizer *draft_tok;
    model *draft;
    char draft_error[320]; /* why --draft is not used ("" when it is, or not asked) */
    /* the model's own Jinja chat template, compiled at open; NULL when it has
     * none or it cannot be used (chat_error says why, chat_fallback is the
     * built-in format used instead) */
    chat_template *chat;
    char *chat_src;        /* its Jinja source (NULL with no chat) */
    chat_format chat_fallback;
    char chat_error[400];
    /* --device auto on a CUDA build without a usable GPU, opened quietly
     * (cli_common.quiet): why it runs on the CPU, for the caller to show ("" else) */
    char device_note[300];
    /* memory: the tensor data of the file (what the weights need, in the page
     * cache or copied), and the memory available before they were loaded (-1:
     * unknown); the KV cache gets what the weights leave (llm_kv_plan_make) */
    uint64_t file_weight_bytes;
    int64_t mem_at_open;
} llm;

/* Opens common->model on the backend common->device asks for. On failure prints
 * nothing and returns a negative code with err set; out is left empty. On the
 * CPU, a model whose weights exceed the memory available is refused in one line
 * before they are loaded. With
 * --draft, also opens the draft model; a draft that cannot be used (fails to
 * load, another vocabulary, bigger than the model) is not an error: draft_error
 * says why and the model runs without speculation. */
int llm_open(const cli_common *common, llm *out, llc_err *err);
void llm_close(llm *l);

/* Tokenizes len bytes into a malloc'd array (*ids); returns the count or negative. */
int llm_tokenize(const tokenizer *tok, const char *text, size_t len, bool add_bos, bool special,
                 int32_t **ids);

/* Renders a one-turn conversation (optional system message, then `user`) with
 * the chat template named by `template_name`, or else the model's own
 * (tokenizer.chat_template), or a plain transcript for base models. *out is
 * malloc'd. */
int llm_render_chat(const llm *l, const char *template_name, const char *system, const char *user,
                    char **out, llc_err *err);

/* The chat template: the built-in format named (error if unknown), else the
 * model's own Jinja template (tokenizer.chat_template, owned by l), else raw
 * for base models. When the model's template cannot be used (a syntax error,
 * or it fails on a sample conversation) this prints one line to stderr saying
 * why and which built-in format is used instead. */
int llm_chat_template(const llm *l, const char *template_name, chat_tmpl *out, llc_err *err);

/* --chat-template-file: the Jinja template in `path` is used instead of the
 * model's own (a template that cannot be used is reported by
 * llm_chat_template and its detected built-in format used, as for the
 * model's). Error (err set): the file cannot be read. */
int llm_chat_template_file(llm *l, const char *path, llc_err *err);

/* The default KV budget: this many sequences of the model's full context (a
 * context counted as at most LLM_DEFAULT_CONTEXT tokens), within half of the memory
 * available (on the CPU: what was available at open less the weights).
 * "Available" is MemAvailable, or $LLC_MEM_AVAILABLE (a size such as 512M) when
 * set: for tests, or to keep llmchat within less than the machine has. More sequences than this still run: they share cached prefixes and
 * the scheduler preempts when blocks run out. */
#define LLM_DEFAULT_SEQUENCES 8
#define LLM_DEFAULT_CONTEXT 8192

/* The K/V element type --kv-type names (a qtype id: QT_F32, QT_F16, QT_Q8_0),
 * LLM_DEFAULT_KV_TYPE when it is not given. */
#define LLM_DEFAULT_KV_TYPE QT_F16
uint32_t llm_kv_type(const cli_common *common);

/* What the KV budget (--kv-mem, or the default above) holds: KV blocks of
 * block_size tokens, K/V stored as llm_kv_type (a smaller type fits more tokens
 * in the same bytes). A hybrid model's recurrent states (model_state_bytes each)
 * come out of the same budget, at most half of it: one per running sequence,
 * LLM_SPEC_SPARE_STATES that speculative decoding restores from, and snapshots
 * at block ends for prefix reuse (an eighth of the budget, at most
 * ENGINE_MAX_SNAPSHOTS); so a model with big states runs fewer sequences at once
 * rather than outgrowing the memory it was given. max_running and max_snapshots
 * are 0 (the engine's defaults) for other models. */
typedef struct llm_kv_plan {
    int n_blocks;
    int max_running;   /* engine_params.max_running */
    int max_snapshots; /* engine_params.max_snapshots */
} llm_kv_plan;
#define LLM_SPEC_SPARE_STATES 4 /* engine_params.spec_max_seqs' default */
#define LLM_MAX_RUNNING 256     /* engine_params.max_running's default */
/* 0, or negative with err set when the budget holds fewer than 2 blocks, or when
 * the weights and one short context (2048 tokens, or the model's context if
 * shorter) do not fit in the memory available (said in one line, before the
 * cache is allocated). */
int llm_kv_plan_make(const llm *l, const cli_common *common, int block_size, llm_kv_plan *plan, llc_err *err);

/* 0 when a KV cache of `bytes` can be allocated: on the CPU backend, no more than
 * the memory available now (the allocation would succeed, overcommitted, and
 * clearing it would exhaust the machine); else LLC_ERR_NOMEM with err set ("...
 * does not fit in memory"). Other backends report their own allocation failure. */
int llm_kv_mem_check(const llm *l, int64_t bytes, llc_err *err);

/* Starts the shared engine on l with the KV budget above, and the draft model
 * (or n-gram drafting) and draft lengths of common. */
int llm_engine_create(llm *l, const cli_common *common, engine **out, llc_err *err);

#endif
