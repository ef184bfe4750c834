/* model.h — a decoder-only transformer: hyper-parameters, weights, and the forward
 * pass over a flattened varlen batch with a paged KV cache.
 *
 * Architectures (docs/DESIGN.md has the table of what each one switches on):
 * llama (Llama 2/3, TinyLlama, Mistral, SmolLM), qwen2 (QKV bias), qwen3
 * (per-head Q/K RMSNorm), qwen3moe (mixture of experts), phi3 (fused QKV and
 * gate+up), gemma2 and gemma3 (scaled embeddings, post norms, GELU gate,
 * sliding-window layers, soft-capping), mistral3 (YaRN, query temperature),
 * smollm3 (NoPE layers), qwen2moe (shared expert), gpt-oss (attention sinks,
 * biased experts, clamped SwiGLU); the hybrids lfm2 (gated short-convolution
 * layers beside attention layers) and qwen35, qwen35moe (gated delta-net
 * layers beside gated attention) and granitehybrid (Mamba2 layers beside
 * attention), whose recurrent layers keep a state per sequence (model_kv's
 * state slots, below). The model keeps views of the gguf's
 * tensors (the CPU backend reads the mmapped file directly), so the gguf must
 * outlive it. */
#ifndef LLC_MODEL_H
#define LLC_MODEL_H

#include "engine/gguf/gguf.h"
#include "kernels/backend.h"

typedef enum model_arch {
    ARCH_LLAMA, ARCH_MISTRAL3, ARCH_SMOLLM3, ARCH_QWEN2, ARCH_QWEN2MOE, ARCH_QWEN3, ARCH_QWEN3MOE, ARCH_PHI3,
    ARCH_GEMMA2, ARCH_GEMMA3, ARCH_GEMMA4, ARCH_GPT_OSS, ARCH_LFM2, ARCH_QWEN35, ARCH_QWEN35MOE,
    ARCH_GRANITEHYBRID
} model_arch;

/* The gate of a gated FFN: SwiGLU, GeGLU, or gpt-oss's clamped SwiGLU
 * (backend.h's swiglu_oai with alpha 1.702 and limit 7) */
typedef enum model_ffn_act { FFN_SILU, FFN_GELU, FFN_SWIGLU_OAI } model_ffn_act;

/* How a token's router logits become the weights of its chosen experts. */
typedef enum model_moe_gating {
    MOE_SOFTMAX_NORM, /* softmax over all experts, the chosen ones renormalised to sum 1 (qwen3moe, Mixtral) */
    MOE_SOFTMAX,      /* softmax over all experts, the chosen ones' probabilities as they are (qwen2moe) */
    MOE_TOPK_SOFTMAX, /* the largest logits chosen, a softmax over just those (gpt-oss) */
} model_moe_gating;

typedef struct model_hparams {
    model_arch arch;
    const char *arch_name;
    int n_vocab;
    int n_ctx_train;  /* context length the model was trained with */
    int n_ctx_orig;   /* context before RoPE scaling (rope.scaling.original_context_length) */
    int dim;          /* embedding width */
    int n_layers;
    /* attention geometry; where layers differ (gemma4) the largest of each, and
     * model_layer_geometry gives a layer's own */
    int n_heads, n_kv_heads, head_dim;
    int ffn_dim;      /* dense FFN width (the widest layer's); 0 in an MoE model */
    int n_embd_per_layer; /* gemma4's per-layer embeddings per layer; 0 = none */
    int n_kv_shared;  /* the last layers that read earlier layers' KV instead of their own (gemma4) */
    float norm_eps;
    bk_rope rope;     /* freq_factors point into the model when present */
    bk_rope rope_swa; /* RoPE of the sliding-window layers (gemma3: its own base) */
    bool tied_output; /* output projection shares token_embd */
    float attn_scale; /* scale of q·k (usually 1/sqrt(head_dim)) */
    float attn_softcap, final_softcap; /* gemma2 soft-capping; 0 = off */
    int swa_window;   /* tokens of a sliding-window layer's window; 0 = none */
    int swa_pattern;  /* layer l is sliding-window when l % swa_pattern < swa_pattern - 1 */
    bool embd_scale;  /* embeddings times sqrt(dim) (gemma) */
    bool post_norms;  /* RMSNorm after attention and after the FFN (gemma2/3) */
    model_ffn_act act;
    int n_expert, n_expert_used, expert_ffn_dim; /* mixture of experts; n_expert 0 = dense */
    model_moe_gating gating;
    int shared_ffn_dim; /* an always-on shared expert beside the routed ones (qwen2moe); 0 = none */
    int no_rope_step;   /* layer l has no RoPE when (l + 1) % no_rope_step == 0 (smollm3); 0 = every layer has */
    /* attention temperature (mistral3): queries times 1 + attn_temp_scale *
     * log(floor(pos / attn_temp_floor) + 1); 0 = off */
    float attn_temp_scale;
    int attn_temp_floor;
    /* hybrid models: layers whose mixer is a recurrence (short convolution)
     * instead of attention; they keep a state per sequence, not KV rows */
    int n_recurrent;
    /* granite's scales (0 = none): embeddings times embd_mult, each layer's mixer
     * and FFN outputs times residual_scale before they are added, logits
     * divided by logit_scale */
    float embd_mult, residual_scale, logit_scale;
} model_hparams;

typedef struct model model;

/* Reads hyper-parameters and weights from g onto the backend, validating shapes
 * against each other. */
int model_load(const gguf *g, backend *be, model **out, llc_err *err);
void model_free(model *m);
const model_hparams *model_hparams_of(const model *m);
/* Bytes of weights the model reads per forward step. */
uint64_t model_weight_bytes(const model *m);

/* A paged KV cache: n_blocks blocks of block_size tokens for every layer, in the
 * backend's memory. Slot s = block * block_size + offset. K and V are stored as
 * kv_type (QT_F32, QT_F16 or QT_Q8_0; see bk_attn in kernels/backend.h): another
 * type, or Q8_0 on a model whose KV rows do not split into its blocks, is
 * LLC_ERR_UNSUPPORTED with a message naming it. */
typedef struct model_kv model_kv;
int model_kv_create(const model *m, int n_blocks, int block_size, uint32_t kv_type, model_kv **out,
                    llc_err *err);
void model_kv_free(model_kv *kv);
/* Copies whole blocks (all layers, K and V): block dst[i] = block src[i].
 * Returns LLC_ERR_RANGE for ids outside the cache. */
int model_kv_copy_blocks(model_kv *kv, const int32_t *src, const int32_t *dst, int n, llc_err *err);
int model_kv_type(const model_kv *kv);
/* 0 when the model's KV can be stored as kv_type, else LLC_ERR_UNSUPPORTED with
 * the reason in err (as model_kv_create gives it). */
int model_kv_check_type(const model *m, uint32_t kv_type, llc_err *err);
/* Bytes one token of KV takes across all layers when stored as kv_type (0 for a
 * type the cache cannot hold). */
size_t model_kv_bytes_per_token(const model *m, uint32_t kv_type);
/* The KV types a cache can hold, by name ("f32", "f16", "q8_0"; any case): the
 * qtype id, or -1. model_kv_type_name is the reverse ("?" for others). */
int model_kv_type_from_name(const char *name);
const char *model_kv_type_name(uint32_t kv_type);

/* Recurrent state (hybrid models, hparams.n_recurrent > 0). Beside the KV
 * blocks a cache holds state slots: one slot is one sequence's state after
 * its last computed token, over all recurrent layers (model_state_bytes).
 * A step names each sequence's slot (bk_batch.state_slots; without it
 * sequence s of the batch uses slot s); a sequence whose first row in the step
 * is position 0 starts from a zeroed state, any other continues from what its
 * slot holds, so the caller must keep a slot in step with the KV entries it
 * computed (after a fork, copy the slot; a sequence cut back must be
 * recomputed from position 0). Slots are made as steps name them. */
size_t model_state_bytes(const model *m);
/* slot dst = slot src (made if needed); LLC_ERR_RANGE for negative slots */
int model_kv_state_copy(model_kv *kv, int src, int dst, llc_err *err);
/* State slots the cache has made so far. */
int model_kv_state_slots(const model_kv *kv);

/* Runs one step. logits (host memory) receives n_out rows of n_vocab floats, in the
 * order of batch->out_rows. Returns 0 or negative with err set (bad token ids,
 * slots outside the cache, out of memory). */
int model_forward(model *m, model_kv *kv, const bk_batch *batch, float *logits, llc_err *err);
/* The same, and also the hidden-state output mode: hidden (host memory) receives
 * batch->n_hidden rows of dim floats, the output of the final norm (before the
 * output projection) of rows batch->hidden_rows, in that order. Rows may be in
 * both lists; hidden may be NULL when n_hidden is 0. */
int model_forward_hidden(model *m, model_kv *kv, const bk_batch *batch, float *logits, float *hidden,
                         llc_err *err);
/* The same step, but of each output row only its k best logits (k <= TOPK_MAX,
 * kernels/topk.h): ids and vals (host memory) receive n_out rows of k, in the
 * order of batch->out_rows, as topk_row gives them from the row
 * model_forward_hidden would give. A step of many sequences then moves and
 * reads k entries per sequence, not the vocabulary. LLC_ERR_UNSUPPORTED where
 * model_can_forward_top says no. */
int model_forward_top(model *m, model_kv *kv, const bk_batch *batch, int k, int32_t *ids, float *vals,
                      float *hidden, llc_err *err);
/* Whether model_forward_top serves this model on its backend (the backend has
 * top_k and the model's logits need no transform on the host). */
bool model_can_forward_top(const model *m);

#endif
