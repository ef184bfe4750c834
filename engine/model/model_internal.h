/* model_internal.h — the model's insides, shared by the loader (model_load.c:
 * hyper-parameters and weights per architecture) and the forward pass (model.c).
 * Nothing outside engine/model*.c includes it. */
#ifndef LLC_MODEL_INTERNAL_H
#define LLC_MODEL_INTERNAL_H

#include "engine/model/model.h"

/* views per expert: gate, up, down and their three biases */
#define MODEL_EXPERT_VIEWS 6

/* the most experts a token may use (expert_used_count) */
#define MODEL_MAX_EXPERT_USED 64

/* A weight that is absent has data == NULL. Fused tensors in the file (phi3's
 * attn_qkv, a gate+up ffn_up, stacked experts) are loaded as views of their row
 * ranges, so the forward pass sees separate matrices either way; it multiplies
 * Q, K, V (and gate, up) in one backend call whether the file fused them or not. */
/* What mixes a layer's tokens: attention over the KV cache, or a recurrence
 * with a state per sequence (model_recurrent.c). */
typedef enum layer_mixer {
    MIX_ATTN,
    MIX_SHORTCONV, /* lfm2: in_proj to B, C, x; C ⊙ conv(B ⊙ x); out_proj */
    MIX_DELTANET,  /* qwen35: conv + SiLU over q, k, v; the gated delta rule; gated RMSNorm; out */
    MIX_MAMBA2,    /* granitehybrid: in to z, xBC, dt; conv + SiLU over xBC; selective scan; gate; grouped norm */
} layer_mixer;

typedef struct layer {
    layer_mixer mixer;
    /* this layer's geometry: the model's, except where layers differ (gemma4's
     * sliding-window and full layers have their own heads and head sizes) */
    int n_heads, n_kv_heads, head_dim, ffn_dim;
    int kv_layer;                     /* the layer whose KV cache it reads: itself, or an earlier one
                                         whose cache it shares (gemma4's last layers; wk, wv unused) */
    const bk_rope *rope;              /* its RoPE (the model's, or the sliding-window layers') */
    float out_scale;                  /* the layer's output times this (gemma4's layer_output_scale) */
    bk_weight attn_norm, wq, wk, wv, wo;   /* wv absent (gemma4's full layers): V is K's projection */
    bk_weight bq, bk, bv, bo;         /* optional biases */
    bk_weight q_norm, k_norm;         /* per-head RMSNorm over head_dim (qwen3, gemma3) */
    bk_weight post_attn_norm;         /* gemma2/3 */
    bk_weight ffn_norm, gate, up, down;
    bk_weight b_gate, b_up, b_down;   /* optional biases */
    bk_weight post_ffn_norm;          /* gemma2/3 */
    bk_weight router, router_b;       /* MoE: [n_expert x dim], optional bias [n_expert] */
    bk_weight *exp_gate, *exp_up, *exp_down; /* MoE: [n_expert] views of the stacked tensors */
    bk_weight *exp_b_gate, *exp_b_up, *exp_b_down; /* their biases (gpt-oss), or NULL */
    bk_weight sinks;                  /* attention sink logits [n_heads] (gpt-oss) */
    bk_weight sh_gate, sh_up, sh_down; /* MoE: the shared expert every token runs (qwen2moe) */
    bk_weight sh_gate_inp;            /* its sigmoid gate [dim] (optional) */
    bool swa;                         /* sliding-window attention in this layer */
    bool no_rope;                     /* keys and queries are not rotated (smollm3's NoPE layers) */
    bool v_norm;                      /* V RMS-normed without a weight (gemma4) */
    bool attn_gate;                   /* wq gives each head's query then its output gate, and the
                                         attention's output is times sigmoid(gate) (qwen35) */
    bk_weight ple_gate, ple_proj, ple_norm; /* gemma4's per-layer embedding: gate, projection, norm */
    /* recurrent mixers: the layer's part of a sequence's state slot (floats) */
    size_t state_off, state_n;
    int conv_k, conv_ch;              /* convolution taps and channels */
    bk_weight rec_in[3];              /* shortconv: in_proj's row ranges B, C, x; deltanet: [0] attn_qkv;
                                         mamba2: ssm_in's row ranges z, xBC, dt */
    bk_weight conv_w, conv_b;         /* [conv_ch] rows of conv_k taps (F32); bias (optional) */
    bk_weight rec_out;                /* output projection */
    bk_weight rec_z;                  /* deltanet: the output gate's projection (attn_gate) */
    bk_weight dt_bias, ssm_a, ssm_alpha, ssm_beta, ssm_norm; /* deltanet: decay and beta gates, norm */
    bk_delta delta;                   /* deltanet geometry */
    bk_weight ssm_d;                  /* mamba2: the skip D per head (and dt_bias, ssm_a, ssm_norm) */
    bk_ssm ssm;                       /* mamba2 geometry */
} layer;

struct model {
    model_hparams hp;
    backend *be;
    uint64_t serial;         /* unique per loaded model (the backend's recorded steps name it) */
    bk_weight tok_embd, out_norm, output, b_output;
    /* gemma4's per-layer embeddings: a table of n_layers x n_embd_per_layer per
     * token, a projection of the embedding to the same, and its norm */
    bk_weight ple_embd, ple_model_proj, ple_proj_norm;
    bk_weight ones;          /* head_dim ones: the weight of a norm without one (gemma4's V) */
    float *h_ones;           /* its host copy */
    layer *layers;
    bk_weight *expert_views; /* one allocation for every layer's expert views (and their biases') */
    float *rope_factors;     /* host copy of rope_freqs.weight, or NULL */
    uint64_t weight_bytes;
    /* activations in backend memory, sized for cap_rows rows and cap_out outputs */
    int cap_rows, cap_out;
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2, *xo, *logits;
    float *ple, *ple_proj;      /* per-layer embeddings, all layers' [T][n_layers][n], and their projection */
    float *ple_l, *ple_g;       /* one layer's [T][n], and its gate */
    int32_t *h_ple_rows;        /* [n_layers][cap_rows] the rows of ple (n wide) that are layer l's */
    /* MoE: router logits (backend and host), expert inputs/outputs, the routing */
    float *router_out, *xe, *ye, *moe_out, *h_router;
    int32_t *h_rows;  /* [n_expert][cap_rows] rows routed to each expert */
    float *h_weights; /* [n_expert][cap_rows] their mixing weights */
    int *h_count;     /* [n_expert] */
    int32_t *h_all_rows; /* [cap_rows] 0, 1, 2, ...: the shared expert's rows */
    float *h_row_gate;   /* [cap_rows] the shared expert's gate per row */
    /* recurrent layers: a sequence's state floats over all of them, the widest
     * activation a mixer needs, its buffers [cap_rows][rec_width], and per step
     * each sequence's slot and this layer's part of it */
    size_t state_n;
    int rec_width;
    float *rb[6];
    float **h_seq_state, **h_layer_state, **h_aux_state; /* [cap_seqs] */
    int32_t *h_q_rows, *h_g_rows; /* gated attention: [cap_rows * n_heads] rows of head_dim of wq's output
                                     that are queries, and gates */
    int cap_seqs;
};

/* The recurrent mixer of layer ly over the T rows of m->xb into m->xb, each of
 * the step's n_seqs sequences continuing from states[s] (its part of the
 * sequence's slot), which it updates. model_recurrent.c. */
int model_recurrent_mixer(model *m, const layer *ly, int T, int n_seqs, float *const *states, llc_err *err);

/* Reads hyper-parameters and weights from g into m (m->be set); the caller frees m
 * on error. */
int model_load_from(const gguf *g, model *m, llc_err *err);

#endif
