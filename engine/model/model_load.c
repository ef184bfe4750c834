/* model_load.c — a model's hyper-parameters and weights from GGUF, for every
 * architecture the forward pass runs. What sets the architectures apart is one
 * table (g_archs); everything else is read from the file: optional biases are
 * loaded wherever a file has them, fused tensors (attn_qkv, a gate+up ffn_up,
 * stacked experts) become views of their row ranges. Every shape is checked
 * against the hyper-parameters before a byte of it is used. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/model_internal.h"
#include "kernels/quant.h"

/* What an architecture switches on (zero: off). */
typedef struct arch_info {
    const char *name;
    model_arch arch;
    bk_rope_style rope;
    bool qk_norm;     /* attn_q_norm / attn_k_norm required */
    bool post_norms;  /* post_attention_norm / post_ffw_norm required */
    bool embd_scale;  /* embeddings times sqrt(dim) */
    bool moe;         /* experts instead of a dense FFN (llama: when the file has expert_count) */
    model_ffn_act act;
    model_moe_gating gating; /* how router logits become expert weights */
    int swa_pattern;  /* sliding-window layer pattern (0: none) */
    int no_rope_step; /* layer l has no RoPE when (l + 1) % no_rope_step == 0 (smollm3) */
    bool attn_temp;   /* query temperature by position (attention.temperature_scale: mistral3) */
    bool ffn_norm_post_attn; /* the FFN's norm is named post_attention_norm (gpt-oss) */
    bool layer_types; /* sliding-window layers from attention.sliding_window_pattern, each type with
                         its own heads, head size and RoPE; V = K where attn_v is absent (gemma4) */
    /* hybrid models: the mixer of the recurrent layers, which are those with
       attention.head_count_kv 0 (lfm2), or with rec_interval all but every
       full_attention_interval-th (qwen35) */
    layer_mixer recurrent;
    bool rec_interval;
    bool attn_gate;   /* wq gives each head's query then an output gate (qwen35) */
    const char *out_norm; /* the final norm's tensor, when not output_norm.weight (lfm2) */
    bool granite;     /* embedding, residual, attention and logit scales from the file; RoPE only
                         where rope.scaling.finetuned says so; experts where the file has them */
} arch_info;

static const arch_info g_archs[] = {
    {.name = "llama", .arch = ARCH_LLAMA, .rope = BK_ROPE_NORMAL},
    {.name = "mistral3", .arch = ARCH_MISTRAL3, .rope = BK_ROPE_NORMAL, .attn_temp = true},
    {.name = "smollm3", .arch = ARCH_SMOLLM3, .rope = BK_ROPE_NORMAL, .no_rope_step = 4},
    {.name = "qwen2", .arch = ARCH_QWEN2, .rope = BK_ROPE_NEOX},
    {.name = "qwen2moe", .arch = ARCH_QWEN2MOE, .rope = BK_ROPE_NEOX, .moe = true, .gating = MOE_SOFTMAX},
    {.name = "qwen3", .arch = ARCH_QWEN3, .rope = BK_ROPE_NEOX, .qk_norm = true},
    {.name = "qwen3moe", .arch = ARCH_QWEN3MOE, .rope = BK_ROPE_NEOX, .qk_norm = true, .moe = true},
    {.name = "phi3", .arch = ARCH_PHI3, .rope = BK_ROPE_NEOX},
    {.name = "gemma2", .arch = ARCH_GEMMA2, .rope = BK_ROPE_NEOX, .post_norms = true, .embd_scale = true,
     .act = FFN_GELU, .swa_pattern = 2},
    {.name = "gemma3", .arch = ARCH_GEMMA3, .rope = BK_ROPE_NEOX, .qk_norm = true, .post_norms = true,
     .embd_scale = true, .act = FFN_GELU, .swa_pattern = 6},
    {.name = "gemma4", .arch = ARCH_GEMMA4, .rope = BK_ROPE_NEOX, .qk_norm = true, .post_norms = true,
     .embd_scale = true, .act = FFN_GELU, .layer_types = true},
    {.name = "gpt-oss", .arch = ARCH_GPT_OSS, .rope = BK_ROPE_NEOX, .moe = true, .act = FFN_SWIGLU_OAI,
     .gating = MOE_TOPK_SOFTMAX, .swa_pattern = 2, .ffn_norm_post_attn = true},
    {.name = "lfm2", .arch = ARCH_LFM2, .rope = BK_ROPE_NEOX, .qk_norm = true, .recurrent = MIX_SHORTCONV,
     .out_norm = "token_embd_norm.weight"},
    /* (text only: the multi-section RoPE's sections all take the token's position) */
    {.name = "qwen35", .arch = ARCH_QWEN35, .rope = BK_ROPE_NEOX, .qk_norm = true, .ffn_norm_post_attn = true,
     .recurrent = MIX_DELTANET, .rec_interval = true, .attn_gate = true},
    {.name = "qwen35moe", .arch = ARCH_QWEN35MOE, .rope = BK_ROPE_NEOX, .qk_norm = true, .ffn_norm_post_attn = true,
     .recurrent = MIX_DELTANET, .rec_interval = true, .attn_gate = true, .moe = true},
    {.name = "granitehybrid", .arch = ARCH_GRANITEHYBRID, .rope = BK_ROPE_NORMAL, .recurrent = MIX_MAMBA2,
     .granite = true},
};
#define ARCH_LIST                                                                                        \
    "llama (Mixtral-style experts too), mistral3, smollm3, qwen2, qwen2moe, qwen3, qwen3moe, phi3, gemma2, " \
    "gemma3, gemma4, gpt-oss, lfm2, qwen35, qwen35moe and granitehybrid"

/* Architectures close to a supported one, refused with what is missing. */
static const struct {
    const char *name, *missing;
} g_near_archs[] = {
    {"qwen3next", "its linear-attention layers are not implemented"},
    {"gemma3n", "its per-layer embeddings and AltUp are not implemented"},
    {"command-r", "its parallel attention/FFN blocks and LayerNorm are not implemented"},
};

typedef struct loader {
    const gguf *g;
    model *m;
    const arch_info *ai;
    llc_err *err;
    char key[128];
} loader;

static const char *arch_key(loader *L, const char *suffix) {
    snprintf(L->key, sizeof L->key, "%s.%s", L->m->hp.arch_name, suffix);
    return L->key;
}

static int get_int(loader *L, const char *suffix, bool required, int def, int lo, int hi, int *out) {
    int64_t v;
    int rc = gguf_get_i64(L->g, arch_key(L, suffix), &v, L->err);
    if (rc == LLC_ERR_NOTFOUND && !required) {
        *out = def;
        return 0;
    }
    if (rc) return rc;
    if (v < lo || v > hi)
        return llc_fail(L->err, LLC_ERR_RANGE, "%s = %lld is outside %d..%d", L->key, (long long)v,
                        lo, hi);
    *out = (int)v;
    return 0;
}

/* *found (may be NULL) says whether the key was there */
static int get_float(loader *L, const char *suffix, float def, float *out, bool *found) {
    int rc = gguf_get_f32(L->g, arch_key(L, suffix), out, L->err);
    if (found) *found = rc == 0;
    if (rc == LLC_ERR_NOTFOUND) {
        *out = def;
        return 0;
    }
    if (!rc && !isfinite(*out)) return llc_fail(L->err, LLC_ERR_RANGE, "%s is not finite", L->key);
    return rc;
}

/* A per-layer integer into the int field at `field` (offsetof) of each layer: an
 * array of n_layers values or one value for all (absent: def, or an error when
 * required). *max gets the largest. */
static int get_layer_ints(loader *L, const char *suffix, size_t field, bool required, int def, int lo, int hi,
                          int *max) {
    model_hparams *hp = &L->m->hp;
    layer *ly = L->m->layers;
    gguf_array arr = {0};
    const bool is_arr = gguf_get_arr(L->g, arch_key(L, suffix), GGUF_TYPE_COUNT, &arr, NULL) == 0;
    int one = def, rc;
    if (!is_arr && (rc = get_int(L, suffix, required, def, lo, hi, &one))) return rc;
    if (is_arr && arr.n != (uint64_t)hp->n_layers)
        return llc_fail(L->err, LLC_ERR_FORMAT, "%s has %llu values for %d layers", L->key,
                        (unsigned long long)arr.n, hp->n_layers);
    *max = 0;
    for (int l = 0; l < hp->n_layers; l++) {
        int64_t v = one;
        if (is_arr) {
            if (arr.elem_type == GGUF_TYPE_STRING || arr.elem_type == GGUF_TYPE_ARRAY)
                return llc_fail(L->err, LLC_ERR_TYPE, "%s must hold integers", L->key);
            v = gguf_arr_int(&arr, (uint64_t)l);
        }
        if (v < lo || v > hi)
            return llc_fail(L->err, LLC_ERR_RANGE, "%s[%d] = %lld is outside %d..%d", L->key, l, (long long)v, lo, hi);
        *(int *)((char *)&ly[l] + field) = (int)v;
        if (v > *max) *max = (int)v;
    }
    return 0;
}

/* ---- tensors ---- */

/* Finds tensor `name` and checks its shape is [n_in, n_out, n_3] (trailing 1s
 * omitted in the file). *out is NULL when it is absent and not required. */
static int find_tensor(loader *L, const char *name, int64_t n_in, int64_t n_out, int64_t n_3,
                       bool required, const gguf_tensor **out) {
    const gguf_tensor *t = gguf_find_tensor(L->g, name);
    *out = t;
    if (!t) {
        if (!required) return 0;
        return llc_fail(L->err, LLC_ERR_NOTFOUND, "tensor '%s' is missing", name);
    }
    if (t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != n_3 || t->ne[3] != 1)
        return llc_fail(L->err, LLC_ERR_FORMAT,
                        "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld] "
                        "from the hyper-parameters",
                        name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                        (long long)t->ne[3], (long long)n_in, (long long)n_out, (long long)n_3);
    if (n_out == 1 && t->type != QT_F32)
        return llc_fail(L->err, LLC_ERR_UNSUPPORTED, "tensor '%s' is %s; norms and biases must be F32",
                        name, qtype_name(t->type));
    return 0;
}

/* Hands rows [row0, row0 + n_rows) of t (rows of t->ne[0] elements; a vector's
 * "rows" are its elements) to the backend as one weight. */
static int load_rows(loader *L, const gguf_tensor *t, int64_t row0, int64_t n_rows, bk_weight *out) {
    const bool vec = t->ne[1] == 1 && t->ne[2] == 1;
    const int64_t n_in = vec ? n_rows : t->ne[0], n_out = vec ? 1 : n_rows;
    const size_t row_bytes = vec ? sizeof(float) : qtype_row_bytes(t->type, t->ne[0]);
    const bk_tensor bt = {.name = t->name, .type = t->type, .n_in = n_in, .n_out = n_out,
                          .data = (const uint8_t *)t->data + (size_t)row0 * row_bytes,
                          .n_bytes = (size_t)n_rows * row_bytes, .droppable = t->in_file_mapping};
    return L->m->be->ops->weight_load(L->m->be->ctx, &bt, out, L->err);
}

/* Loads `name` whole, checked as [n_in] (n_out == 1) or [n_in, n_out]. An absent
 * optional tensor leaves *out zeroed. */
static int get_weight(loader *L, const char *name, int64_t n_in, int64_t n_out, bool required,
                      bk_weight *out) {
    memset(out, 0, sizeof *out);
    const gguf_tensor *t;
    int rc = find_tensor(L, name, n_in, n_out, 1, required, &t);
    if (rc || !t) return rc;
    rc = load_rows(L, t, 0, n_out == 1 ? n_in : n_out, out);
    if (!rc) L->m->weight_bytes += t->n_bytes;
    return rc;
}

/* Loads `name` ([n_in, sum of parts] or, for a bias, [sum of parts]) split into
 * consecutive row ranges parts[i] -> outs[i]. *found says whether it was there. */
static int get_split(loader *L, const char *name, int64_t n_in, const int64_t *parts, int n_parts,
                     bool bias, bk_weight **outs, bool *found) {
    int64_t total = 0;
    for (int i = 0; i < n_parts; i++) total += parts[i];
    const gguf_tensor *t;
    int rc = bias ? find_tensor(L, name, total, 1, 1, false, &t)
                  : find_tensor(L, name, n_in, total, 1, false, &t);
    *found = t != NULL;
    if (rc || !t) return rc;
    for (int i = 0, row = 0; i < n_parts; row += (int)parts[i], i++)
        if ((rc = load_rows(L, t, row, parts[i], outs[i]))) return rc;
    L->m->weight_bytes += t->n_bytes;
    return 0;
}

/* ---- hyper-parameters ---- */

/* YaRN's ramp: the pair indices where extrapolation gives way to interpolation,
 * from the wavelengths beta_fast and beta_slow rotations long at the original
 * context (as llama.cpp's ggml_rope_yarn_corr_dims computes them). */
static float yarn_corr_dim(int n_rot, int n_ctx_orig, float n_turns, float base) {
    return (float)n_rot * logf((float)n_ctx_orig / (n_turns * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

/* YaRN's attention factor (mscale) for a scaling factor: 1 + 0.1·m·ln(factor). */
static float yarn_mscale(float factor, float m) { return factor <= 1.0f ? 1.0f : 0.1f * m * logf(factor) + 1.0f; }

/* RoPE scaling: a factor without a type is linear (as llama.cpp reads it), "none"
 * turns it off, "yarn" mixes interpolated and extrapolated frequencies and scales
 * by an attention factor; LongRoPE files (phi3) carry per-pair factors instead
 * (load_rope_factors). */
static int load_rope_scaling(loader *L, bk_rope *rp) {
    model_hparams *hp = &L->m->hp;
    int rc;
    rp->freq_scale = 1.0f;
    gguf_str stype;
    bool typed = gguf_get_str(L->g, arch_key(L, "rope.scaling.type"), &stype, NULL) == 0;
    const bool yarn = typed && gguf_str_eq(stype, "yarn");
    if (typed && !yarn && !gguf_str_eq(stype, "none") && !gguf_str_eq(stype, "linear") &&
        !gguf_str_eq(stype, "longrope"))
        return llc_fail(L->err, LLC_ERR_UNSUPPORTED,
                        "RoPE scaling '%.*s' is not supported (linear, yarn and longrope are)",
                        (int)(stype.len > 20 ? 20 : stype.len), stype.ptr);
    if (!typed || !gguf_str_eq(stype, "none")) {
        float factor;
        bool found;
        if ((rc = get_float(L, "rope.scaling.factor", 0.0f, &factor, &found))) return rc;
        if (!found && (rc = get_float(L, "rope.scale_linear", 0.0f, &factor, NULL))) return rc;
        if (factor < 0) return llc_fail(L->err, LLC_ERR_RANGE, "RoPE scaling factor is negative");
        if (factor > 0) rp->freq_scale = 1.0f / factor;
    }
    if ((rc = get_int(L, "rope.scaling.original_context_length", false, hp->n_ctx_train, 1, 1 << 24,
                      &hp->n_ctx_orig)) ||
        (rc = get_float(L, "rope.scaling.attn_factor", 1.0f, &rp->mscale, NULL)))
        return rc;
    if (rp->mscale <= 0) return llc_fail(L->err, LLC_ERR_RANGE, "RoPE attention factor must be positive");
    if (!yarn) return 0;
    float beta_fast, beta_slow, log_mul;
    if ((rc = get_float(L, "rope.scaling.yarn_ext_factor", 1.0f, &rp->ext_factor, NULL)) ||
        (rc = get_float(L, "rope.scaling.yarn_beta_fast", 32.0f, &beta_fast, NULL)) ||
        (rc = get_float(L, "rope.scaling.yarn_beta_slow", 1.0f, &beta_slow, NULL)) ||
        (rc = get_float(L, "rope.scaling.yarn_log_multiplier", 0.0f, &log_mul, NULL)))
        return rc;
    if (beta_fast <= 0 || beta_slow <= 0) return llc_fail(L->err, LLC_ERR_RANGE, "YaRN's beta values must be positive");
    const float lo = floorf(yarn_corr_dim(rp->n_rot, hp->n_ctx_orig, beta_fast, rp->freq_base));
    const float hi = ceilf(yarn_corr_dim(rp->n_rot, hp->n_ctx_orig, beta_slow, rp->freq_base));
    rp->corr_lo = lo > 0 ? lo : 0;
    rp->corr_hi = hi < (float)(rp->n_rot - 1) ? hi : (float)(rp->n_rot - 1);
    /* the attention factor, as llama.cpp sets it: 1 + 0.1·ln(factor), divided out
     * again by a log multiplier (mscale_all_dims) where the file has one */
    const float factor = 1.0f / rp->freq_scale;
    if (rp->ext_factor != 0.0f)
        rp->mscale *= log_mul != 0.0f ? yarn_mscale(factor, 1.0f) / yarn_mscale(factor, log_mul)
                                      : yarn_mscale(factor, 1.0f);
    return 0;
}

static int load_rope(loader *L) {
    model_hparams *hp = &L->m->hp;
    bk_rope *rp = &hp->rope;
    int rc;
    rp->style = L->ai->rope;
    int full_head_dim = hp->head_dim; /* (the full-attention layers') */
    for (int l = 0; l < hp->n_layers; l++)
        if (!L->m->layers[l].swa) full_head_dim = L->m->layers[l].head_dim;
    if ((rc = get_int(L, "rope.dimension_count", false, full_head_dim, 2, full_head_dim, &rp->n_rot)))
        return rc;
    if (rp->n_rot % 2) return llc_fail(L->err, LLC_ERR_FORMAT, "RoPE dimension count must be even");
    if ((rc = get_float(L, "rope.freq_base", 10000.0f, &rp->freq_base, NULL))) return rc;
    if (rp->freq_base <= 1) return llc_fail(L->err, LLC_ERR_RANGE, "RoPE base must be > 1");
    if ((rc = load_rope_scaling(L, rp))) return rc;
    /* sliding-window layers: gemma3 has its own base and no scaling there */
    hp->rope_swa = *rp;
    if (hp->arch == ARCH_GEMMA3) {
        hp->rope_swa.freq_scale = 1.0f;
        hp->rope_swa.freq_base = 10000.0f;
    }
    if ((rc = get_float(L, "rope.freq_base_swa", hp->rope_swa.freq_base, &hp->rope_swa.freq_base, NULL)))
        return rc;
    if (L->ai->layer_types) { /* gemma4: the sliding-window layers' own head size */
        int max_rot = 0;
        for (int l = 0; l < hp->n_layers; l++)
            if (L->m->layers[l].swa) max_rot = L->m->layers[l].head_dim;
        if (max_rot && (rc = get_int(L, "rope.dimension_count_swa", false, max_rot, 2, max_rot, &hp->rope_swa.n_rot)))
            return rc;
        if (hp->rope_swa.n_rot % 2) return llc_fail(L->err, LLC_ERR_FORMAT, "RoPE dimension count must be even");
    }
    if (hp->rope_swa.freq_base <= 1) return llc_fail(L->err, LLC_ERR_RANGE, "RoPE base must be > 1");
    return 0;
}

/* Per-pair frequency factors: llama 3's rope_freqs, or LongRoPE's (phi3) tables
 * for short and long contexts. The engine gives each sequence the trained
 * context, so the long ones apply when that exceeds the original context, as
 * llama.cpp chooses them by its context size. */
static int load_rope_factors(loader *L) {
    model *m = L->m;
    model_hparams *hp = &m->hp;
    const gguf_tensor *rf = gguf_find_tensor(L->g, "rope_freqs.weight");
    const gguf_tensor *lf = gguf_find_tensor(L->g, "rope_factors_long.weight");
    const gguf_tensor *sf = gguf_find_tensor(L->g, "rope_factors_short.weight");
    const char *name = "rope_freqs.weight";
    if (lf || sf) {
        if (!lf || !sf)
            return llc_fail(L->err, LLC_ERR_FORMAT, "LongRoPE needs both rope_factors_long and rope_factors_short");
        const bool use_long = hp->n_ctx_train > hp->n_ctx_orig;
        rf = use_long ? lf : sf;
        name = use_long ? "rope_factors_long.weight" : "rope_factors_short.weight";
    }
    if (!rf) return 0;
    if (rf->type != QT_F32 || gguf_tensor_n_elems(rf) != hp->rope.n_rot / 2)
        return llc_fail(L->err, LLC_ERR_FORMAT, "%s must be F32 [%d]", name, hp->rope.n_rot / 2);
    m->rope_factors = malloc((size_t)rf->n_bytes);
    if (!m->rope_factors) return llc_fail(L->err, LLC_ERR_NOMEM, "out of memory");
    memcpy(m->rope_factors, rf->data, (size_t)rf->n_bytes);
    hp->rope.freq_factors = m->rope_factors;
    if (!hp->swa_pattern) hp->rope_swa.freq_factors = m->rope_factors;
    return 0;
}

/* Which layers are sliding-window (a fixed pattern, or gemma4's per-layer list),
 * each layer's heads and head size, and the KV caches shared by the last
 * attention.shared_kv_layers layers: each reads the last earlier layer of its
 * type that has its own (as llama.cpp assigns them). */
static int load_layer_types(loader *L, int head_dim, int head_dim_swa) {
    model_hparams *hp = &L->m->hp;
    const arch_info *ai = L->ai;
    int rc;
    gguf_array pat = {0};
    if (ai->layer_types) {
        if ((rc = gguf_get_arr(L->g, arch_key(L, "attention.sliding_window_pattern"), GGUF_TYPE_BOOL, &pat, L->err)))
            return rc;
        if (pat.n != (uint64_t)hp->n_layers)
            return llc_fail(L->err, LLC_ERR_FORMAT, "%s has %llu values for %d layers", L->key,
                            (unsigned long long)pat.n, hp->n_layers);
        hp->swa_pattern = 1; /* (some layers are sliding-window) */
    } else {
        hp->swa_pattern = ai->swa_pattern;
        head_dim_swa = head_dim;
    }
    if (hp->swa_pattern &&
        (rc = get_int(L, "attention.sliding_window", true, 0, 1, 1 << 24, &hp->swa_window)))
        return rc;
    if ((rc = get_int(L, "attention.shared_kv_layers", false, 0, 0, hp->n_layers - 1, &hp->n_kv_shared))) return rc;
    const int kv_from = hp->n_layers - hp->n_kv_shared;
    int interval = 0;
    if (ai->rec_interval && (rc = get_int(L, "full_attention_interval", false, 4, 1, 4096, &interval))) return rc;
    hp->head_dim = 0;
    for (int l = 0; l < hp->n_layers; l++) {
        layer *ly = &L->m->layers[l];
        ly->out_scale = 1.0f;
        if (ai->recurrent && (interval ? (l + 1) % interval != 0 : ly->n_kv_heads == 0)) {
            /* a recurrent layer: no attention, no KV */
            ly->mixer = ai->recurrent;
            ly->kv_layer = l;
            hp->n_recurrent++;
            continue;
        }
        ly->swa = ai->layer_types ? pat.data[l] != 0
                                  : hp->swa_pattern > 0 && l % hp->swa_pattern < hp->swa_pattern - 1;
        ly->n_heads = hp->n_heads;
        ly->head_dim = ly->swa ? head_dim_swa : head_dim;
        ly->rope = ly->swa ? &hp->rope_swa : &hp->rope;
        if (ly->head_dim > hp->head_dim) hp->head_dim = ly->head_dim;
        if (ly->n_heads % ly->n_kv_heads)
            return llc_fail(L->err, LLC_ERR_FORMAT, "%d attention heads are not a multiple of %d KV heads (layer %d)",
                            ly->n_heads, ly->n_kv_heads, l);
        ly->kv_layer = l < kv_from ? l : kv_from - (ly->swa ? 2 : 1);
        const layer *src = &L->m->layers[ly->kv_layer < 0 ? 0 : ly->kv_layer];
        if (ly->kv_layer < 0 || src->swa != ly->swa || src->head_dim != ly->head_dim ||
            src->n_kv_heads != ly->n_kv_heads)
            return llc_fail(L->err, LLC_ERR_FORMAT, "layer %d shares the KV cache of layer %d, which is of another kind",
                            l, ly->kv_layer);
    }
    return 0;
}

static int load_hparams(loader *L) {
    model_hparams *hp = &L->m->hp;
    gguf_str arch;
    int rc = gguf_get_str(L->g, "general.architecture", &arch, L->err);
    if (rc) return rc;
    for (size_t i = 0; i < LLC_ARRAY_LEN(g_archs); i++)
        if (gguf_str_eq(arch, g_archs[i].name)) L->ai = &g_archs[i];
    if (!L->ai) {
        const int alen = (int)(arch.len > 40 ? 40 : arch.len);
        for (size_t i = 0; i < LLC_ARRAY_LEN(g_near_archs); i++)
            if (gguf_str_eq(arch, g_near_archs[i].name))
                return llc_fail(L->err, LLC_ERR_UNSUPPORTED, "architecture '%.*s' is not supported: %s",
                                alen, arch.ptr, g_near_archs[i].missing);
        return llc_fail(L->err, LLC_ERR_UNSUPPORTED, "architecture '%.*s' is not supported (" ARCH_LIST " are)",
                        alen, arch.ptr);
    }
    const arch_info *ai = L->ai;
    hp->arch = ai->arch;
    hp->arch_name = ai->name;
    hp->act = ai->act;
    hp->embd_scale = ai->embd_scale;
    hp->post_norms = ai->post_norms;
    const int BIG = 1 << 20;
    /* experts: qwen3moe always; llama when the file has them (Mixtral) */
    int64_t n_exp = 0;
    const bool moe = ai->moe || ((ai->arch == ARCH_LLAMA || ai->granite) &&
                                 gguf_get_i64(L->g, arch_key(L, "expert_count"), &n_exp, NULL) == 0 && n_exp > 0);
    if ((rc = get_int(L, "embedding_length", true, 0, 1, BIG, &hp->dim)) ||
        (rc = get_int(L, "block_count", true, 0, 1, 4096, &hp->n_layers)) ||
        (rc = get_int(L, "attention.head_count", true, 0, 1, 4096, &hp->n_heads)) ||
        (rc = get_int(L, "context_length", false, 2048, 1, 1 << 24, &hp->n_ctx_train)))
        return rc;
    L->m->layers = calloc((size_t)hp->n_layers, sizeof *L->m->layers);
    if (!L->m->layers) return llc_fail(L->err, LLC_ERR_NOMEM, "out of memory");
    if ((rc = get_layer_ints(L, "feed_forward_length", offsetof(layer, ffn_dim), !moe, 0, moe ? 0 : 1, BIG,
                             &hp->ffn_dim)) ||
        (rc = get_layer_ints(L, "attention.head_count_kv", offsetof(layer, n_kv_heads), false, hp->n_heads,
                             ai->recurrent ? 0 : 1, 4096, &hp->n_kv_heads)))
        return rc;
    int def_head_dim = hp->dim % hp->n_heads ? 0 : hp->dim / hp->n_heads;
    int head_dim, head_dim_swa, vlen, vlen_swa;
    if ((rc = get_int(L, "attention.key_length", false, def_head_dim, 1, 4096, &head_dim)) ||
        (rc = get_int(L, "attention.value_length", false, head_dim, 1, 4096, &vlen)) ||
        (rc = get_int(L, "attention.key_length_swa", false, head_dim, 1, 4096, &head_dim_swa)) ||
        (rc = get_int(L, "attention.value_length_swa", false, head_dim_swa, 1, 4096, &vlen_swa)))
        return rc;
    if (head_dim <= 0)
        return llc_fail(L->err, LLC_ERR_UNSUPPORTED, "head size cannot be derived (dim %d, %d heads)",
                        hp->dim, hp->n_heads);
    if (vlen != head_dim || vlen_swa != head_dim_swa)
        return llc_fail(L->err, LLC_ERR_UNSUPPORTED,
                        "keys of %d and values of %d per head are not supported (they must be equal)",
                        vlen != head_dim ? head_dim : head_dim_swa, vlen != head_dim ? vlen : vlen_swa);
    if ((rc = load_layer_types(L, head_dim, head_dim_swa))) return rc;
    if (hp->n_recurrent) { /* before any weight goes to a backend that cannot run the model */
        const backend_ops *op = L->m->be->ops;
        if (!op->mul || !op->copy || !op->conv1d_state || !op->mul_sigmoid || !op->delta_net || !op->ssm_scan ||
            !op->rmsnorm_groups)
            return llc_fail(L->err, LLC_ERR_UNSUPPORTED, "the %s backend has no recurrent-layer ops (%s is a hybrid model)",
                            L->m->be->name, hp->arch_name);
    }
    if ((rc = get_float(L, "attention.layer_norm_rms_epsilon", 1e-5f, &hp->norm_eps, NULL))) return rc;
    if (hp->norm_eps <= 0) return llc_fail(L->err, LLC_ERR_RANGE, "RMSNorm epsilon must be positive");

    /* q·k scale: 1/sqrt(head_dim), except the 27B gemmas (46 and 62 layers), which
     * divide by sqrt(dim / heads) as llama.cpp does */
    hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
    if ((hp->arch == ARCH_GEMMA2 && hp->n_layers == 46) || (hp->arch == ARCH_GEMMA3 && hp->n_layers == 62))
        hp->attn_scale = 1.0f / sqrtf((float)(hp->dim / hp->n_heads));
    if (hp->arch == ARCH_GEMMA2) {
        if ((rc = get_float(L, "attn_logit_softcapping", 50.0f, &hp->attn_softcap, NULL)) ||
            (rc = get_float(L, "final_logit_softcapping", 30.0f, &hp->final_softcap, NULL)))
            return rc;
        if (hp->attn_softcap < 0 || hp->final_softcap < 0)
            return llc_fail(L->err, LLC_ERR_RANGE, "soft-capping values must not be negative");
    }
    if (hp->arch == ARCH_GEMMA4) { /* queries and keys are normed: no 1/sqrt(head_dim) */
        hp->attn_scale = 1.0f;
        if ((rc = get_float(L, "final_logit_softcapping", 0.0f, &hp->final_softcap, NULL))) return rc;
        if (hp->final_softcap < 0) return llc_fail(L->err, LLC_ERR_RANGE, "soft-capping values must not be negative");
        if ((rc = get_int(L, "embedding_length_per_layer_input", false, 0, 0, BIG, &hp->n_embd_per_layer))) return rc;
    }
    if (moe) {
        if ((rc = get_int(L, "expert_count", true, 0, 1, 4096, &hp->n_expert)) ||
            (rc = get_int(L, "expert_used_count", true, 0, 1,
                          hp->n_expert < MODEL_MAX_EXPERT_USED ? hp->n_expert : MODEL_MAX_EXPERT_USED,
                          &hp->n_expert_used)) ||
            (rc = get_int(L, "expert_feed_forward_length", hp->ffn_dim == 0, hp->ffn_dim, 1, BIG,
                          &hp->expert_ffn_dim)))
            return rc;
        hp->ffn_dim = 0; /* no dense FFN */
        hp->gating = ai->gating;
        if ((rc = get_int(L, "expert_shared_feed_forward_length", false, 0, 0, BIG, &hp->shared_ffn_dim))) return rc;
    }
    hp->no_rope_step = ai->no_rope_step;
    if ((rc = load_rope(L))) return rc;
    if (ai->granite) {
        bool found, finetuned = false;
        if ((rc = get_float(L, "embedding_scale", 0.0f, &hp->embd_mult, NULL)) ||
            (rc = get_float(L, "residual_scale", 0.0f, &hp->residual_scale, NULL)) ||
            (rc = get_float(L, "logit_scale", 0.0f, &hp->logit_scale, NULL)) ||
            (rc = get_float(L, "attention.scale", hp->attn_scale, &hp->attn_scale, &found)))
            return rc;
        if (found && hp->attn_scale == 0.0f) hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim);
        if (hp->logit_scale < 0) return llc_fail(L->err, LLC_ERR_RANGE, "%s.logit_scale must not be negative", ai->name);
        rc = gguf_get_bool(L->g, arch_key(L, "rope.scaling.finetuned"), &finetuned, L->err);
        if (rc && rc != LLC_ERR_NOTFOUND) return rc;
        if (!finetuned) hp->no_rope_step = 1; /* no layer rotates */
    }
    if (ai->attn_temp) {
        if ((rc = get_float(L, "attention.temperature_scale", 0.0f, &hp->attn_temp_scale, NULL))) return rc;
        hp->attn_temp_floor = hp->n_ctx_orig; /* the position step, as llama.cpp takes it */
    }
    return 0;
}

/* ---- weights ---- */

/* blk.<l>.<suffix> in the caller's buffer n */
#define NAME(suffix) (snprintf(n, sizeof n, "blk.%d." suffix, l), n)

static int load_attention_rest(loader *L, int l, layer *ly, int64_t q_dim);

static int load_attention(loader *L, int l, layer *ly) {
    const model_hparams *hp = &L->m->hp;
    const int64_t q_dim = (int64_t)ly->n_heads * ly->head_dim, kv_dim = (int64_t)ly->n_kv_heads * ly->head_dim;
    char n[96];
    int rc;
    bool fused;
    if ((rc = get_weight(L, NAME("attn_norm.weight"), hp->dim, 1, true, &ly->attn_norm))) return rc;
    if (ly->kv_layer != l) { /* it reads an earlier layer's cache: its own K and V (if any) go unused */
        if ((rc = get_weight(L, NAME("attn_q.weight"), hp->dim, q_dim, true, &ly->wq))) return rc;
        return load_attention_rest(L, l, ly, q_dim);
    }
    if (L->ai->layer_types) { /* gemma4: no attn_v means V is K's projection, and V is RMS-normed */
        ly->v_norm = true;
        if ((rc = get_weight(L, NAME("attn_q.weight"), hp->dim, q_dim, true, &ly->wq)) ||
            (rc = get_weight(L, NAME("attn_k.weight"), hp->dim, kv_dim, true, &ly->wk)) ||
            (rc = get_weight(L, NAME("attn_v.weight"), hp->dim, kv_dim, false, &ly->wv)))
            return rc;
        if (!ly->wv.data) ly->wv = ly->wk;
        return load_attention_rest(L, l, ly, q_dim);
    }
    /* qwen35: each head's query, then its output gate */
    const int64_t q_rows = L->ai->attn_gate ? 2 * q_dim : q_dim;
    if (L->ai->attn_gate) {
        ly->attn_gate = true;
        if (2 * q_dim > L->m->rec_width) L->m->rec_width = (int)(2 * q_dim);
    }
    const int64_t parts[3] = {q_rows, kv_dim, kv_dim};
    bk_weight *w[3] = {&ly->wq, &ly->wk, &ly->wv}, *b[3] = {&ly->bq, &ly->bk, &ly->bv};
    if ((rc = get_split(L, NAME("attn_qkv.weight"), hp->dim, parts, 3, false, w, &fused))) return rc;
    if (fused) {
        if ((rc = get_split(L, NAME("attn_qkv.bias"), 0, parts, 3, true, b, &fused))) return rc;
    } else if ((rc = get_weight(L, NAME("attn_q.weight"), hp->dim, q_rows, true, &ly->wq)) ||
               (rc = get_weight(L, NAME("attn_k.weight"), hp->dim, kv_dim, true, &ly->wk)) ||
               (rc = get_weight(L, NAME("attn_v.weight"), hp->dim, kv_dim, true, &ly->wv)) ||
               (rc = get_weight(L, NAME("attn_q.bias"), q_dim, 1, false, &ly->bq)) ||
               (rc = get_weight(L, NAME("attn_k.bias"), kv_dim, 1, false, &ly->bk)) ||
               (rc = get_weight(L, NAME("attn_v.bias"), kv_dim, 1, false, &ly->bv)))
        return rc;
    return load_attention_rest(L, l, ly, q_dim);
}

/* The attention weights after Q, K and V: output, norms, sinks. */
static int load_attention_rest(loader *L, int l, layer *ly, int64_t q_dim) {
    const model_hparams *hp = &L->m->hp;
    char n[96];
    int rc;
    bool qk = L->ai->qk_norm, own_kv = ly->kv_layer == l;
    if ((rc = get_weight(L, NAME("attn_output.weight"), q_dim, hp->dim, true, &ly->wo)) ||
        (rc = get_weight(L, NAME("attn_output.bias"), hp->dim, 1, false, &ly->bo)) ||
        (rc = get_weight(L, NAME("attn_q_norm.weight"), ly->head_dim, 1, qk, &ly->q_norm)) ||
        (rc = get_weight(L, NAME("attn_k_norm.weight"), ly->head_dim, 1, qk && own_kv, &ly->k_norm)) ||
        (rc = get_weight(L, NAME("attn_sinks.weight"), ly->n_heads, 1, false, &ly->sinks)))
        return rc;
    if (!L->ai->ffn_norm_post_attn && /* (gpt-oss: that name is its FFN's norm) */
        (rc = get_weight(L, NAME("post_attention_norm.weight"), hp->dim, 1, hp->post_norms, &ly->post_attn_norm)))
        return rc;
    if (!qk) ly->q_norm.data = ly->k_norm.data = NULL; /* llama.cpp ignores them there too */
    return 0;
}

static int load_dense_ffn(loader *L, int l, layer *ly) {
    const model_hparams *hp = &L->m->hp;
    const int64_t ff = ly->ffn_dim;
    char n[96];
    int rc;
    if (gguf_find_tensor(L->g, NAME("ffn_gate.weight"))) {
        if ((rc = get_weight(L, n, hp->dim, ff, true, &ly->gate)) ||
            (rc = get_weight(L, NAME("ffn_up.weight"), hp->dim, ff, true, &ly->up)) ||
            (rc = get_weight(L, NAME("ffn_gate.bias"), ff, 1, false, &ly->b_gate)) ||
            (rc = get_weight(L, NAME("ffn_up.bias"), ff, 1, false, &ly->b_up)))
            return rc;
    } else { /* gate and up fused in ffn_up: the first ff rows gate, the next ff up */
        const gguf_tensor *t = gguf_find_tensor(L->g, NAME("ffn_up.weight"));
        if (!t) return llc_fail(L->err, LLC_ERR_NOTFOUND, "tensor 'blk.%d.ffn_gate.weight' is missing", l);
        if (t->ne[1] == ff)
            return llc_fail(L->err, LLC_ERR_UNSUPPORTED,
                            "layer %d has a feed-forward block without a gate, which is not supported", l);
        const int64_t parts[2] = {ff, ff};
        bk_weight *w[2] = {&ly->gate, &ly->up}, *b[2] = {&ly->b_gate, &ly->b_up};
        bool found;
        if ((rc = get_split(L, n, hp->dim, parts, 2, false, w, &found)) ||
            (rc = get_split(L, NAME("ffn_up.bias"), 0, parts, 2, true, b, &found)))
            return rc;
    }
    if ((rc = get_weight(L, NAME("ffn_down.weight"), ff, hp->dim, true, &ly->down)) ||
        (rc = get_weight(L, NAME("ffn_down.bias"), hp->dim, 1, false, &ly->b_down)))
        return rc;
    return 0;
}

/* Experts stacked in one tensor [n_in, n_out, n_expert] become n_expert views. */
static int load_experts(loader *L, const char *name, int64_t n_in, int64_t n_out, bk_weight *views) {
    const model_hparams *hp = &L->m->hp;
    const gguf_tensor *t;
    int rc = find_tensor(L, name, n_in, n_out, hp->n_expert, true, &t);
    for (int e = 0; !rc && e < hp->n_expert; e++) rc = load_rows(L, t, (int64_t)e * n_out, n_out, &views[e]);
    if (!rc) /* per step a token reads n_expert_used of them */
        L->m->weight_bytes += t->n_bytes / (uint64_t)hp->n_expert * (uint64_t)hp->n_expert_used;
    return rc;
}

/* Expert biases stacked in one F32 tensor [n_out, n_expert] (gpt-oss): n_expert
 * bias views, or none (*views set to NULL) where the file has no such tensor. */
static int load_expert_biases(loader *L, const char *name, int64_t n_out, bk_weight **views) {
    const model_hparams *hp = &L->m->hp;
    const gguf_tensor *t;
    int rc = find_tensor(L, name, n_out, hp->n_expert, 1, false, &t);
    if (rc || !t) {
        *views = NULL;
        return rc;
    }
    if (t->type != QT_F32)
        return llc_fail(L->err, LLC_ERR_UNSUPPORTED, "tensor '%s' is %s; biases must be F32", name, qtype_name(t->type));
    for (int e = 0; !rc && e < hp->n_expert; e++) rc = load_rows(L, t, e, 1, &(*views)[e]);
    return rc;
}

static int load_moe_ffn(loader *L, int l, layer *ly) {
    const model_hparams *hp = &L->m->hp;
    const int64_t ff = hp->expert_ffn_dim;
    char n[96];
    int rc;
    if (gguf_find_tensor(L->g, NAME("ffn_gate_shexp.weight")) || gguf_find_tensor(L->g, NAME("ffn_up_shexp.weight"))) {
        /* the shared expert: a gated FFN every token runs, behind a sigmoid gate (qwen2moe) */
        const int64_t sf = hp->shared_ffn_dim;
        if (!sf)
            return llc_fail(L->err, LLC_ERR_FORMAT, "layer %d has a shared expert but no %s.expert_shared_feed_forward_length",
                            l, hp->arch_name);
        if ((rc = get_weight(L, NAME("ffn_gate_shexp.weight"), hp->dim, sf, true, &ly->sh_gate)) ||
            (rc = get_weight(L, NAME("ffn_up_shexp.weight"), hp->dim, sf, true, &ly->sh_up)) ||
            (rc = get_weight(L, NAME("ffn_down_shexp.weight"), sf, hp->dim, true, &ly->sh_down)) ||
            (rc = get_weight(L, NAME("ffn_gate_inp_shexp.weight"), hp->dim, 1, false, &ly->sh_gate_inp)))
            return rc;
    }
    bk_weight *views = L->m->expert_views + (size_t)l * MODEL_EXPERT_VIEWS * hp->n_expert;
    ly->exp_gate = views;
    ly->exp_up = views + hp->n_expert;
    ly->exp_down = views + 2 * hp->n_expert;
    ly->exp_b_gate = views + 3 * hp->n_expert;
    ly->exp_b_up = views + 4 * hp->n_expert;
    ly->exp_b_down = views + 5 * hp->n_expert;
    if ((rc = get_weight(L, NAME("ffn_gate_inp.weight"), hp->dim, hp->n_expert, true, &ly->router)) ||
        (rc = get_weight(L, NAME("ffn_gate_inp.bias"), hp->n_expert, 1, false, &ly->router_b)) ||
        (rc = load_experts(L, NAME("ffn_gate_exps.weight"), hp->dim, ff, ly->exp_gate)) ||
        (rc = load_experts(L, NAME("ffn_up_exps.weight"), hp->dim, ff, ly->exp_up)) ||
        (rc = load_experts(L, NAME("ffn_down_exps.weight"), ff, hp->dim, ly->exp_down)) ||
        (rc = load_expert_biases(L, NAME("ffn_gate_exps.bias"), ff, &ly->exp_b_gate)) ||
        (rc = load_expert_biases(L, NAME("ffn_up_exps.bias"), ff, &ly->exp_b_up)) ||
        (rc = load_expert_biases(L, NAME("ffn_down_exps.bias"), hp->dim, &ly->exp_b_down)))
        return rc;
    return 0;
}

/* gemma4's per-layer embedding weights and layer_output_scale (read to the host) */
static int load_layer_extras(loader *L, int l, layer *ly) {
    const model_hparams *hp = &L->m->hp;
    const int64_t pl = hp->n_embd_per_layer;
    char n[96];
    int rc;
    if ((rc = get_weight(L, NAME("inp_gate.weight"), hp->dim, pl, true, &ly->ple_gate)) ||
        (rc = get_weight(L, NAME("proj.weight"), pl, hp->dim, true, &ly->ple_proj)) ||
        (rc = get_weight(L, NAME("post_norm.weight"), hp->dim, 1, true, &ly->ple_norm)))
        return rc;
    const gguf_tensor *t;
    if ((rc = find_tensor(L, NAME("layer_output_scale.weight"), 1, 1, 1, false, &t))) return rc;
    if (t) {
        memcpy(&ly->out_scale, t->data, sizeof ly->out_scale);
        if (!isfinite(ly->out_scale)) return llc_fail(L->err, LLC_ERR_RANGE, "%s is not finite", n);
    }
    return 0;
}

/* ---- recurrent mixers (hybrid models; their forward pass: model_recurrent.c) ---- */

/* A convolution's taps: [k, channels] F32 (+ an optional bias [channels]). */
static int load_conv(loader *L, const char *name, const char *bias_name, int k, int channels, layer *ly) {
    const gguf_tensor *t;
    int rc = find_tensor(L, name, k, channels, 1, true, &t);
    if (rc) return rc;
    if (t->type != QT_F32)
        return llc_fail(L->err, LLC_ERR_UNSUPPORTED, "tensor '%s' is %s; convolution taps must be F32", name,
                        qtype_name(t->type));
    ly->conv_k = k;
    ly->conv_ch = channels;
    if ((rc = get_weight(L, name, k, channels, true, &ly->conv_w))) return rc;
    return bias_name ? get_weight(L, bias_name, channels, 1, false, &ly->conv_b) : 0;
}

/* lfm2's gated short convolution: in_proj [dim -> 3 dim] (B, C, x), the
 * convolution's taps (shortconv.l_cache of them), out_proj. State: the last
 * l_cache - 1 values of B ⊙ x. */
static int load_shortconv(loader *L, int l, layer *ly) {
    model *m = L->m;
    const int64_t dim = m->hp.dim;
    char n[96];
    int k, rc;
    bool found;
    if ((rc = get_int(L, "shortconv.l_cache", true, 0, 2, 64, &k))) return rc;
    const int64_t parts[3] = {dim, dim, dim};
    bk_weight *w[3] = {&ly->rec_in[0], &ly->rec_in[1], &ly->rec_in[2]};
    if ((rc = get_split(L, NAME("shortconv.in_proj.weight"), dim, parts, 3, false, w, &found))) return rc;
    if (!found) return llc_fail(L->err, LLC_ERR_NOTFOUND, "tensor '%s' is missing", n);
    if ((rc = load_conv(L, NAME("shortconv.conv.weight"), NULL, k, (int)dim, ly)) ||
        (rc = get_weight(L, NAME("shortconv.out_proj.weight"), dim, dim, true, &ly->rec_out)))
        return rc;
    ly->state_n = (size_t)(k - 1) * dim;
    if (dim > m->rec_width) m->rec_width = (int)dim;
    return 0;
}

/* qwen35's gated delta net: attn_qkv [dim -> q, k, v], attn_gate (the output
 * gate z), the convolution over q, k, v (ssm.conv_kernel taps), per value head
 * ssm_dt.bias, ssm_a (-exp(A_log)), ssm_alpha and ssm_beta projections, the
 * heads' norm, ssm_out. Key heads: ssm.group_count of ssm.state_size; value
 * heads: ssm.time_step_rank of ssm.inner_size / that. State: the convolution's
 * window, then a [head_v x head_k] matrix per value head. */
static int load_deltanet(loader *L, int l, layer *ly) {
    model *m = L->m;
    const int64_t dim = m->hp.dim;
    char n[96];
    int k, d_state, n_group, dt_rank, inner, rc;
    if ((rc = get_int(L, "ssm.conv_kernel", true, 0, 2, 64, &k)) ||
        (rc = get_int(L, "ssm.state_size", true, 0, 1, 256, &d_state)) ||
        (rc = get_int(L, "ssm.group_count", true, 0, 1, 4096, &n_group)) ||
        (rc = get_int(L, "ssm.time_step_rank", true, 0, 1, 4096, &dt_rank)) ||
        (rc = get_int(L, "ssm.inner_size", true, 0, 1, 1 << 20, &inner)))
        return rc;
    if (inner % dt_rank || inner / dt_rank != d_state || dt_rank % n_group)
        return llc_fail(L->err, LLC_ERR_UNSUPPORTED,
                        "delta-net layers of %d value heads over %d inner, %d key heads of %d are not supported "
                        "(value heads as wide as key heads, a multiple of them)", dt_rank, inner, n_group, d_state);
    const int head_v = inner / dt_rank, conv_dim = 2 * n_group * d_state + inner;
    if ((rc = get_weight(L, NAME("attn_qkv.weight"), dim, conv_dim, true, &ly->rec_in[0])) ||
        (rc = get_weight(L, NAME("attn_gate.weight"), dim, inner, true, &ly->rec_z)) ||
        (rc = load_conv(L, NAME("ssm_conv1d.weight"), NULL, k, conv_dim, ly)) ||
        (rc = get_weight(L, NAME("ssm_dt.bias"), dt_rank, 1, true, &ly->dt_bias)) ||
        (rc = get_weight(L, NAME("ssm_a"), dt_rank, 1, true, &ly->ssm_a)) ||
        (rc = get_weight(L, NAME("ssm_alpha.weight"), dim, dt_rank, true, &ly->ssm_alpha)) ||
        (rc = get_weight(L, NAME("ssm_beta.weight"), dim, dt_rank, true, &ly->ssm_beta)) ||
        (rc = get_weight(L, NAME("ssm_norm.weight"), head_v, 1, true, &ly->ssm_norm)) ||
        (rc = get_weight(L, NAME("ssm_out.weight"), inner, dim, true, &ly->rec_out)))
        return rc;
    ly->delta = (bk_delta){.n_k_heads = n_group, .n_v_heads = dt_rank, .head_k = d_state, .head_v = head_v,
                           .eps = m->hp.norm_eps};
    ly->state_n = (size_t)(k - 1) * conv_dim + (size_t)dt_rank * head_v * d_state;
    if (conv_dim > m->rec_width) m->rec_width = conv_dim;
    return 0;
}

/* Mamba2 (granitehybrid): ssm_in [dim -> z (inner), xBC (inner + 2 groups x
 * state), dt (heads)], the convolution over xBC (ssm.conv_kernel taps, with a
 * bias), per head ssm_dt.bias, ssm_a (-exp(A_log)), ssm_d, the grouped norm
 * (optional), ssm_out. Heads: ssm.time_step_rank of ssm.inner_size / that.
 * State: the convolution's window, then a [head_dim x state] matrix per head. */
static int load_mamba2(loader *L, int l, layer *ly) {
    model *m = L->m;
    const int64_t dim = m->hp.dim;
    char n[96];
    int k, d_state, n_group, n_head, inner, rc;
    bool found;
    if ((rc = get_int(L, "ssm.conv_kernel", true, 0, 2, 64, &k)) ||
        (rc = get_int(L, "ssm.state_size", true, 0, 1, 1024, &d_state)) ||
        (rc = get_int(L, "ssm.group_count", true, 0, 1, 4096, &n_group)) ||
        (rc = get_int(L, "ssm.time_step_rank", true, 0, 1, 4096, &n_head)) ||
        (rc = get_int(L, "ssm.inner_size", true, 0, 1, 1 << 20, &inner)))
        return rc;
    if (inner % n_head || n_head % n_group)
        return llc_fail(L->err, LLC_ERR_UNSUPPORTED, "Mamba2 layers of %d heads over %d inner in %d groups are not "
                        "supported", n_head, inner, n_group);
    const int conv_dim = inner + 2 * n_group * d_state;
    const int64_t parts[3] = {inner, conv_dim, n_head};
    bk_weight *w[3] = {&ly->rec_in[0], &ly->rec_in[1], &ly->rec_in[2]};
    if ((rc = get_split(L, NAME("ssm_in.weight"), dim, parts, 3, false, w, &found))) return rc;
    if (!found) return llc_fail(L->err, LLC_ERR_NOTFOUND, "tensor '%s' is missing", n);
    if ((rc = load_conv(L, NAME("ssm_conv1d.weight"), NULL, k, conv_dim, ly)) ||
        (rc = get_weight(L, NAME("ssm_conv1d.bias"), conv_dim, 1, false, &ly->conv_b)) ||
        (rc = get_weight(L, NAME("ssm_dt.bias"), n_head, 1, true, &ly->dt_bias)) ||
        (rc = get_weight(L, NAME("ssm_a"), 1, n_head, true, &ly->ssm_a)) ||
        (rc = get_weight(L, NAME("ssm_d"), 1, n_head, true, &ly->ssm_d)) ||
        (rc = get_weight(L, NAME("ssm_norm.weight"), inner / n_group, n_group, false, &ly->ssm_norm)) ||
        (rc = get_weight(L, NAME("ssm_out.weight"), inner, dim, true, &ly->rec_out)))
        return rc;
    ly->ssm = (bk_ssm){.n_heads = n_head, .head_dim = inner / n_head, .n_groups = n_group, .d_state = d_state};
    ly->state_n = (size_t)(k - 1) * conv_dim + (size_t)inner * d_state;
    if (conv_dim > m->rec_width) m->rec_width = conv_dim;
    return 0;
}

static const struct {
    layer_mixer mixer;
    int (*load)(loader *L, int l, layer *ly);
} g_mixers[] = {
    {MIX_SHORTCONV, load_shortconv},
    {MIX_DELTANET, load_deltanet},
    {MIX_MAMBA2, load_mamba2},
};

/* A recurrent layer's mixer weights, and its part of a sequence's state slot. */
static int load_recurrent(loader *L, int l, layer *ly) {
    model *m = L->m;
    char n[96];
    int rc;
    if ((rc = get_weight(L, NAME("attn_norm.weight"), m->hp.dim, 1, true, &ly->attn_norm))) return rc;
    for (size_t i = 0; i < LLC_ARRAY_LEN(g_mixers); i++)
        if (g_mixers[i].mixer == ly->mixer) {
            if ((rc = g_mixers[i].load(L, l, ly))) return rc;
            ly->state_off = m->state_n;
            m->state_n += ly->state_n;
            return 0;
        }
    return llc_fail(L->err, LLC_ERR_UNSUPPORTED, "layer %d: its recurrent mixer is not implemented", l);
}

static int load_layer(loader *L, int l, layer *ly) {
    const model_hparams *hp = &L->m->hp;
    char n[96];
    int rc;
    if ((rc = ly->mixer == MIX_ATTN ? load_attention(L, l, ly) : load_recurrent(L, l, ly)) ||
        (rc = get_weight(L, L->ai->ffn_norm_post_attn ? NAME("post_attention_norm.weight") : NAME("ffn_norm.weight"),
                         hp->dim, 1, true, &ly->ffn_norm)) ||
        (rc = hp->n_expert ? load_moe_ffn(L, l, ly) : load_dense_ffn(L, l, ly)) ||
        (rc = get_weight(L, NAME("post_ffw_norm.weight"), hp->dim, 1, hp->post_norms, &ly->post_ffn_norm)))
        return rc;
    ly->no_rope = hp->no_rope_step > 0 && (l + 1) % hp->no_rope_step == 0;
    return hp->n_embd_per_layer ? load_layer_extras(L, l, ly) : 0;
}

#undef NAME

static int load_weights(loader *L) {
    model *m = L->m;
    model_hparams *hp = &m->hp;
    if (!gguf_n_tensors(L->g))
        return llc_fail(L->err, LLC_ERR_NOTFOUND, "the file holds no weights (a vocabulary-only GGUF?)");
    const gguf_tensor *emb = gguf_find_tensor(L->g, "token_embd.weight");
    if (!emb) return llc_fail(L->err, LLC_ERR_NOTFOUND, "tensor 'token_embd.weight' is missing");
    if (emb->ne[1] < 1 || emb->ne[1] > (1 << 24))
        return llc_fail(L->err, LLC_ERR_FORMAT, "token_embd.weight has a bad vocabulary size");
    hp->n_vocab = (int)emb->ne[1];
    int rc;
    if ((rc = get_weight(L, "token_embd.weight", hp->dim, hp->n_vocab, true, &m->tok_embd)) ||
        (rc = get_weight(L, L->ai->out_norm ? L->ai->out_norm : "output_norm.weight", hp->dim, 1, true,
                         &m->out_norm)) ||
        (rc = get_weight(L, "output.weight", hp->dim, hp->n_vocab, false, &m->output)) ||
        (rc = get_weight(L, "output.bias", hp->n_vocab, 1, false, &m->b_output)))
        return rc;
    hp->tied_output = m->output.data == NULL;
    if (hp->tied_output) m->output = m->tok_embd;

    if ((rc = load_rope_factors(L))) return rc;
    if (hp->n_embd_per_layer) { /* gemma4's per-layer embeddings */
        const int64_t all = (int64_t)hp->n_layers * hp->n_embd_per_layer;
        if ((rc = get_weight(L, "per_layer_token_embd.weight", all, hp->n_vocab, true, &m->ple_embd)) ||
            (rc = get_weight(L, "per_layer_model_proj.weight", hp->dim, all, true, &m->ple_model_proj)) ||
            (rc = get_weight(L, "per_layer_proj_norm.weight", hp->n_embd_per_layer, 1, true, &m->ple_proj_norm)))
            return rc;
    }
    if (L->ai->layer_types) { /* ones: the weight of gemma4's V norm */
        m->h_ones = malloc((size_t)hp->head_dim * sizeof *m->h_ones);
        if (!m->h_ones) return llc_fail(L->err, LLC_ERR_NOMEM, "out of memory");
        for (int i = 0; i < hp->head_dim; i++) m->h_ones[i] = 1.0f;
        const bk_tensor t = {.name = "ones", .type = QT_F32, .n_in = hp->head_dim, .n_out = 1, .data = m->h_ones,
                             .n_bytes = (size_t)hp->head_dim * sizeof(float)};
        if ((rc = m->be->ops->weight_load(m->be->ctx, &t, &m->ones, L->err))) return rc;
    }

    if (hp->n_expert) {
        m->expert_views = calloc((size_t)hp->n_layers * MODEL_EXPERT_VIEWS * (size_t)hp->n_expert,
                                 sizeof *m->expert_views);
        if (!m->expert_views) return llc_fail(L->err, LLC_ERR_NOMEM, "out of memory");
    }
    for (int l = 0; l < hp->n_layers; l++)
        if ((rc = load_layer(L, l, &m->layers[l]))) return rc;
    return 0;
}

int model_load_from(const gguf *g, model *m, llc_err *err) {
    loader L = {.g = g, .m = m, .err = err};
    int rc = load_hparams(&L);
    if (!rc) rc = load_weights(&L);
    return rc;
}
