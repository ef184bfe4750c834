/* modelgen.h — writing random-weight GGUF models of any llama-family shape and
 * weight type, with the vocabulary copied from another GGUF. Weight values do not
 * change speed, so these stand in for real models in benchmarks, and tiny ones
 * exercise architectures (qwen2 biases, qwen3 Q/K norms) and types in tests. */
#ifndef LLC_MODELGEN_H
#define LLC_MODELGEN_H

#include <stdint.h>

#include "kernels/common.h"

typedef struct modelgen_params {
    const char *arch;       /* "llama", "qwen2", "qwen3" */
    int dim, n_layers, n_heads, n_kv_heads, ffn_dim;
    int head_dim;           /* 0 = dim / n_heads */
    int n_ctx;              /* context_length written to the file */
    float rope_base;
    const char *wtype;      /* "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", or the
                               mixes "q4_k_m" (Q6_K for output, attn_v and some ffn_down) */
    bool tied_output;       /* no output.weight: logits use token_embd */
    uint64_t seed;
    const char *vocab_path; /* GGUF whose tokenizer.* metadata (and vocab size) is copied */
    int n_vocab;            /* used only when vocab_path is NULL: a byte-level toy vocab */
    /* Layers from tail_from on have their attn_output and ffn_down scaled by
     * tail_scale (0 = they add nothing). The random stream does not depend on it,
     * so a model with n_layers = tail_from and the same seed is exactly this
     * model's first layers: a speculative draft whose agreement tail_scale dials. */
    int tail_from;          /* 0 = no scaling */
    float tail_scale;
    int threads;            /* CPU threads that make and quantize rows (0 = every core) */
    /* > 0: only the first distinct_rows rows of a matrix are drawn and quantized,
     * the rest repeat them (speed tests of big shapes: a Q4_K 8B file in seconds,
     * not minutes). The stream moves on as if every row were drawn. */
    int distinct_rows;
} modelgen_params;

/* Fills p from a named preset ("tinyllama-1.1b", "tiny-llama", "tiny-qwen2",
 * "tiny-qwen3"); -1 if unknown. Leaves wtype/seed/vocab_path untouched. */
int modelgen_preset(const char *name, modelgen_params *p);
const char *modelgen_preset_names(void);

/* Writes the model to path. */
int modelgen_write(const modelgen_params *p, const char *path, llc_err *err);

#endif
