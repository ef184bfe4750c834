/* llm.c — opening a model for a subcommand. */
#include "app/llm.h"
#include "app/fileio.h"
#include "kernels/quant.h"

#ifdef LLC_CUDA
#include "kernels/cuda/backend_cuda.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The CPU backend with the settings of common and the environment's knobs
 * (LLC_PREPACK=0: no packed weight copies; LLC_MMAP=1: weights read in place
 * from the file mapping), read here so the backend itself reads none. */
static int cpu_backend_create(const cli_common *common, backend **out, llc_err *err) {
    const char *prepack = getenv("LLC_PREPACK"), *mmap = getenv("LLC_MMAP");
    const backend_cpu_opts o = {.n_threads = common->threads,
                                .no_prepack = common->no_prepack || (prepack && !strcmp(prepack, "0")),
                                .keep_mapped = mmap && strcmp(mmap, "0")};
    return backend_cpu_create_opts(&o, out, err);
}

/* note (may be NULL): where a quiet open leaves the "no usable GPU" notice. */
static int backend_create(const cli_common *common, backend **out, char *note, size_t note_len, llc_err *err) {
#ifdef LLC_CUDA
    if (!strcmp(common->device, "cuda")) return backend_cuda_create(0, out, err);
    if (!strcmp(common->device, "auto")) {
        char why[256];
        if (!backend_cuda_unusable_reason(why, sizeof why)) return backend_cuda_create(0, out, err);
        if (common->quiet && note) /* the chat shows it in its own status area */
            snprintf(note, note_len, "%.200s: running on the CPU (--device cpu says so quietly)", why);
        else if (!common->quiet && isatty(STDERR_FILENO)) /* people, not scripts, get the notice */
            fprintf(stderr, "llmchat: %s: running on the CPU (--device cpu says so quietly)\n", why);
    }
#else
    (void)note, (void)note_len;
    if (!strcmp(common->device, "cuda"))
        return llc_fail(err, LLC_ERR_UNSUPPORTED, "this build has no CUDA backend (use --device cpu)");
#endif
    return cpu_backend_create(common, out, err);
}

/* Two vocabularies are the same when every token has the same text. */
static bool same_vocab(const tokenizer *a, const tokenizer *b, char *why, size_t n) {
    if (tok_n_vocab(a) != tok_n_vocab(b)) {
        snprintf(why, n, "it has %d tokens, the model %d", tok_n_vocab(b), tok_n_vocab(a));
        return false;
    }
    char pa[256], pb[256];
    for (int i = 0; i < tok_n_vocab(a); i++) {
        int la = tok_piece(a, i, true, pa, sizeof pa), lb = tok_piece(b, i, true, pb, sizeof pb);
        if (la != lb || (la > 0 && memcmp(pa, pb, (size_t)(la < 256 ? la : 256)))) {
            snprintf(why, n, "token %d differs from the model's", i);
            return false;
        }
    }
    return true;
}

static void open_draft(const char *path, llm *l) {
    llc_err err;
    char why[128];
    if (gguf_open(path, &l->draft_file, &err) || tok_load(l->draft_file, &l->draft_tok, &err) ||
        model_load(l->draft_file, l->be, &l->draft, &err)) {
        snprintf(l->draft_error, sizeof l->draft_error, "--draft: %.290s", err.msg);
    } else if (!same_vocab(l->tok, l->draft_tok, why, sizeof why)) {
        snprintf(l->draft_error, sizeof l->draft_error,
                 "--draft %.150s: not the model's vocabulary (%s)", path, why);
    } else if (model_weight_bytes(l->draft) > model_weight_bytes(l->m) * 5 / 4) {
        snprintf(l->draft_error, sizeof l->draft_error,
                 "--draft %.150s: it is bigger than the model (%.1f vs %.1f MB), so it cannot speed it up",
                 path, model_weight_bytes(l->draft) / 1e6, model_weight_bytes(l->m) / 1e6);
    } else {
        return;
    }
    model_free(l->draft);
    tok_free(l->draft_tok);
    gguf_free(l->draft_file);
    l->draft = NULL, l->draft_tok = NULL, l->draft_file = NULL;
}

/* Compiles a Jinja chat template with the model's BOS/EOS texts into l->chat;
 * `whose` names it in the message when it cannot be used. */
static void compile_chat(llm *l, const char *src, size_t len, const char *whose) {
    chat_template_free(l->chat);
    free(l->chat_src);
    l->chat = NULL;
    l->chat_src = NULL;
    l->chat_error[0] = 0;
    char *copy = strndup(src, len);
    l->chat_fallback = copy ? chat_detect(copy) : CHAT_FMT_CHATML;
    free(copy);
    int32_t bos = tok_bos(l->tok), eos = tok_eos(l->tok);
    const char *bt = bos >= 0 ? tok_text(l->tok, bos) : "", *et = eos >= 0 ? tok_text(l->tok, eos) : "";
    llc_err e = {{0}};
    if (chat_template_from_jinja(src, len, bt ? bt : "", et ? et : "", tok_add_bos(l->tok), &l->chat, &e) == 0)
        l->chat_src = strndup(src, len); /* (GET /props shows it; NULL if out of memory) */
    else
        snprintf(l->chat_error, sizeof l->chat_error, "%s chat template cannot be used (%s); using the built-in %s format",
                 whose, e.msg, chat_format_name(l->chat_fallback));
}

static void open_chat(llm *l) {
    gguf_str src = {0};
    l->chat_fallback = CHAT_FMT_RAW;
    if (gguf_get_str(l->file, "tokenizer.chat_template", &src, NULL) == 0)
        compile_chat(l, src.ptr, src.len, "the model's");
}

int llm_chat_template_file(llm *l, const char *path, llc_err *err) {
    size_t len = 0;
    char *src = file_read_all(path, &len, err);
    if (!src) return LLC_ERR_IO;
    char whose[300];
    snprintf(whose, sizeof whose, "the %s", path);
    compile_chat(l, src, len, whose);
    free(src);
    return 0;
}

/* Bytes of memory the system can hand out now: $LLC_MEM_AVAILABLE when set (a
 * size: tests, or a smaller share of the machine), else MemAvailable; -1 when
 * unknown. */
static int64_t mem_available(void) {
    const char *env = getenv("LLC_MEM_AVAILABLE");
    int64_t v;
    if (env && *env && cli_parse_size(env, &v) && v > 0) return v;
    return llc_mem_available();
}

/* "1.2 GB" or "340.0 MB" into buf. */
static const char *fmt_bytes(char *buf, size_t n, double bytes) {
    if (bytes >= 1e9) snprintf(buf, n, "%.1f GB", bytes / 1e9);
    else snprintf(buf, n, "%.1f MB", bytes / 1e6);
    return buf;
}

/* The CPU backend keeps the weights in host memory; the others on their device. */
static bool weights_in_host_memory(const llm *l) { return !strcmp(l->be->name, "cpu"); }

/* Before the weights are loaded: what they need, the memory there is, and on
 * the CPU (weights in host memory) the refusal of a model they exceed. */
static int check_weights_fit(llm *l, llc_err *err) {
    l->file_weight_bytes = 0;
    for (int64_t i = 0; i < gguf_n_tensors(l->file); i++) l->file_weight_bytes += gguf_tensor_at(l->file, i)->n_bytes;
    l->mem_at_open = mem_available();
    if (!weights_in_host_memory(l) || l->mem_at_open <= 0 || (int64_t)l->file_weight_bytes <= l->mem_at_open) return 0;
    char w[32], a[32];
    return llc_fail(err, LLC_ERR_NOMEM, "the model does not fit in memory: its weights take %s, %s is available",
                    fmt_bytes(w, sizeof w, (double)l->file_weight_bytes), fmt_bytes(a, sizeof a, (double)l->mem_at_open));
}

/* The memory the KV cache may take: on the CPU what was available at open less
 * the weights (their pages count as available while they are only cached);
 * elsewhere (weights on the device) the host memory available now. */
static int64_t kv_mem_available(const llm *l) {
    if (!weights_in_host_memory(l) || l->mem_at_open <= 0) return mem_available();
    int64_t left = l->mem_at_open - (int64_t)l->file_weight_bytes;
    return left > 0 ? left : 0;
}

int llm_open(const cli_common *common, llm *out, llc_err *err) {
    memset(out, 0, sizeof *out);
    int rc = gguf_open(common->model, &out->file, err);
    if (!rc) rc = tok_load(out->file, &out->tok, err);
    if (!rc) rc = backend_create(common, &out->be, out->device_note, sizeof out->device_note, err);
    if (!rc) rc = check_weights_fit(out, err);
    if (!rc) rc = model_load(out->file, out->be, &out->m, err);
    if ((rc == LLC_ERR_UNSUPPORTED || rc == LLC_ERR_NOMEM) && out->be && strcmp(out->be->name, "cpu") &&
        !strcmp(common->device, "auto")) {
        /* a type the GPU backend lacks, or a model too big for the GPU: the CPU runs it */
        char note[sizeof out->device_note];
        snprintf(note, sizeof note, "%.230s: running on the CPU", err->msg);
        if (common->quiet) snprintf(out->device_note, sizeof out->device_note, "%s", note);
        else fprintf(stderr, "llmchat: %s\n", note);
        backend_free(out->be);
        out->be = NULL;
        rc = cpu_backend_create(common, &out->be, err);
        if (!rc) rc = check_weights_fit(out, err);
        if (!rc) rc = model_load(out->file, out->be, &out->m, err);
    }
    if (!rc && tok_n_vocab(out->tok) != model_hparams_of(out->m)->n_vocab)
        rc = llc_fail(err, LLC_ERR_FORMAT, "the tokenizer has %d tokens but the model %d",
                      tok_n_vocab(out->tok), model_hparams_of(out->m)->n_vocab);
    if (rc) llm_close(out);
    if (!rc) open_chat(out);
    if (!rc && common->draft) open_draft(common->draft, out);
    return rc;
}

void llm_close(llm *l) {
    chat_template_free(l->chat);
    free(l->chat_src);
    model_free(l->draft);
    tok_free(l->draft_tok);
    gguf_free(l->draft_file);
    model_free(l->m);
    backend_free(l->be);
    tok_free(l->tok);
    gguf_free(l->file);
    memset(l, 0, sizeof *l);
}

int llm_tokenize(const tokenizer *tok, const char *text, size_t len, bool add_bos, bool special,
                 int32_t **ids) {
    *ids = NULL;
    if (len > (size_t)1 << 30) return LLC_ERR_RANGE;
    int cap = 2 * (int)len + 4; /* an upper bound for every vocabulary we load */
    int32_t *buf = malloc((size_t)cap * sizeof *buf);
    if (!buf) return LLC_ERR_NOMEM;
    int n = tok_encode(tok, text, len, add_bos, special, buf, cap);
    if (n > cap) {
        int32_t *nb = realloc(buf, (size_t)n * sizeof *nb);
        if (!nb) {
            free(buf);
            return LLC_ERR_NOMEM;
        }
        buf = nb;
        n = tok_encode(tok, text, len, add_bos, special, buf, n);
    }
    if (n < 0) {
        free(buf);
        return n;
    }
    *ids = buf;
    return n;
}

int llm_chat_template(const llm *l, const char *template_name, chat_tmpl *out, llc_err *err) {
    if (template_name) {
        int id = chat_tmpl_from_name(template_name);
        if (id < 0)
            return llc_fail(err, LLC_ERR_RANGE, "unknown chat template '%s' (known: %s)",
                            template_name, chat_tmpl_names());
        *out = chat_builtin(id);
        return 0;
    }
    if (l->chat) {
        *out = l->chat;
        return 0;
    }
    if (l->chat_error[0]) fprintf(stderr, "llmchat: %s\n", l->chat_error);
    *out = chat_builtin(l->chat_fallback);
    return 0;
}

int llm_render_chat(const llm *l, const char *template_name, const char *system, const char *user,
                    char **out, llc_err *err) {
    chat_tmpl t;
    int rc = llm_chat_template(l, template_name, &t, err);
    if (rc) return rc;
    chat_msg msgs[2];
    int n = 0;
    if (system) msgs[n++] = (chat_msg){CHAT_SYSTEM, system, NULL};
    msgs[n++] = (chat_msg){CHAT_USER, user, NULL};
    return chat_render(t, msgs, n, true, out, err);
}

uint32_t llm_kv_type(const cli_common *common) {
    const int t = common->kv_type ? model_kv_type_from_name(common->kv_type) : -1;
    return t >= 0 ? (uint32_t)t : LLM_DEFAULT_KV_TYPE;
}

int llm_kv_mem_check(const llm *l, int64_t bytes, llc_err *err) {
    const int64_t avail = kv_mem_available(l);
    if (!weights_in_host_memory(l) || avail < 0 || bytes <= avail) return 0;
    char k[32], a[32];
    return llc_fail(err, LLC_ERR_NOMEM, "a KV cache of %s does not fit in memory (%s is left beside the weights)",
                    fmt_bytes(k, sizeof k, (double)bytes), fmt_bytes(a, sizeof a, (double)avail));
}

/* A hybrid model's recurrent states out of the budget (see llm.h): at most half
 * of it, an eighth for snapshots; the bytes they take. */
static int64_t plan_states(const llm *l, int64_t budget, llm_kv_plan *plan) {
    const int64_t state = (int64_t)model_state_bytes(l->m);
    if (model_hparams_of(l->m)->n_recurrent <= 0 || state <= 0) return 0;
    int64_t snaps = budget / 8 / state, states = budget / 2 / state;
    if (snaps > ENGINE_MAX_SNAPSHOTS) snaps = ENGINE_MAX_SNAPSHOTS;
    int64_t running = states - snaps - LLM_SPEC_SPARE_STATES;
    if (running > LLM_MAX_RUNNING) running = LLM_MAX_RUNNING;
    if (running < 1) running = 1; /* one sequence runs, whatever the budget */
    plan->max_running = (int)running;
    plan->max_snapshots = snaps > 0 ? (int)snaps : -1;
    return (running + snaps + LLM_SPEC_SPARE_STATES) * state;
}

int llm_kv_plan_make(const llm *l, const cli_common *common, int block_size, llm_kv_plan *plan, llc_err *err) {
    *plan = (llm_kv_plan){0};
    const model_hparams *hp = model_hparams_of(l->m);
    const uint32_t kv_type = llm_kv_type(common);
    const int64_t per_token = (int64_t)model_kv_bytes_per_token(l->m, kv_type);
    int rc = model_kv_check_type(l->m, kv_type, err);
    if (rc) return rc;
    const int64_t per_block = per_token * block_size;
    int64_t budget = common->kv_mem;
    if (budget <= 0) {
        /* LLM_DEFAULT_SEQUENCES full contexts (a context counted as at most
         * LLM_DEFAULT_CONTEXT tokens: 128k-token models would otherwise ask for
         * tens of GB), within half of the memory available now */
        int64_t ctx = hp->n_ctx_train > 0 && hp->n_ctx_train < LLM_DEFAULT_CONTEXT ? hp->n_ctx_train
                                                                                  : LLM_DEFAULT_CONTEXT;
        budget = per_token * ctx * LLM_DEFAULT_SEQUENCES;
        const int64_t avail = kv_mem_available(l);
        const int64_t short_ctx = ctx < 2048 ? ctx : 2048;
        const int64_t min_budget = per_token * short_ctx; /* one short context */
        if (avail >= 0 && min_budget > avail) {
            char w[32], k[32], a[32];
            const bool cpu = weights_in_host_memory(l);
            return llc_fail(err, LLC_ERR_NOMEM,
                            "the model does not fit in memory: %s%s%sone %lld-token context of KV cache needs %s, "
                            "%s is available (--kv-mem sets the KV cache size)",
                            cpu ? "its weights take " : "", cpu ? fmt_bytes(w, sizeof w, (double)l->file_weight_bytes) : "",
                            cpu ? " and " : "", (long long)short_ctx, fmt_bytes(k, sizeof k, (double)min_budget),
                            fmt_bytes(a, sizeof a, (double)(cpu ? l->mem_at_open : avail)));
        }
        if (avail >= 0 && budget > avail / 2) budget = avail / 2 > min_budget ? avail / 2 : min_budget;
    }
    const int64_t state_bytes = plan_states(l, budget, plan);
    int64_t blocks = (budget - state_bytes) / per_block;
    if (blocks < 2)
        return llc_fail(err, LLC_ERR_RANGE, "--kv-mem %lld bytes hold fewer than 2 KV blocks of %lld bytes%s",
                        (long long)budget, (long long)per_block,
                        state_bytes ? " beside the model's recurrent states" : "");
    if (blocks > (1 << 24)) blocks = 1 << 24;
    rc = llm_kv_mem_check(l, blocks * per_block + state_bytes, err);
    if (rc) return rc;
    plan->n_blocks = (int)blocks;
    return 0;
}

int llm_engine_create(llm *l, const cli_common *common, engine **out, llc_err *err) {
    engine_params p = {.block_size = 16, .kv_type = llm_kv_type(common), .draft = l->draft, .ngram = common->ngram && !l->draft,
                       .draft_max = common->draft_max, .draft_min = common->draft_min,
                       .draft_p_min = common->draft_p_min, .warmup = !common->no_warmup};
    llm_kv_plan plan;
    int rc = llm_kv_plan_make(l, common, p.block_size, &plan, err);
    if (rc) return rc;
    p.n_blocks = plan.n_blocks;
    p.max_running = plan.max_running;
    p.max_snapshots = plan.max_snapshots;
    return engine_create(l->m, l->tok, &p, out, err);
}
