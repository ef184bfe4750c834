/* test_model.c — the forward pass: greedy continuations equal the reference
 * implementation's token for token; a batched varlen step equals each sequence
 * run alone; chunked prefill equals one-shot prefill; every architecture and
 * weight type loads and runs; bad batches and mismatched files are clean errors. */
#include <cjson/cJSON.h>

#include "engine/model/batch.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"
#include "engine/model/model.h"
#include "engine/model/modelgen.h"
#include "kernels/backend.h"
#include "kernels/cpu/matmul.h"
#include "kernels/quant.h"
#include "tests/test.h"

#ifdef LLC_CUDA
#include "kernels/cuda/backend_cuda.h"
#endif

#include <unistd.h>

/* LLC_TEST_DEVICE=cuda (make test-cuda): the reference checks on the GPU */
static bool on_cuda(void) {
    const char *d = getenv("LLC_TEST_DEVICE");
    return d && !strcmp(d, "cuda");
}

static int test_backend(int threads, backend **out, llc_err *err) {
    if (!on_cuda()) return backend_cpu_create(threads, out, err);
#ifdef LLC_CUDA
    return backend_cuda_create(0, out, err);
#else
    return llc_fail(err, LLC_ERR_UNSUPPORTED, "LLC_TEST_DEVICE=cuda: this build has no CUDA backend");
#endif
}

typedef struct loaded {
    gguf *g;
    backend *be;
    model *m;
} loaded;

static int load(const char *path, int threads, loaded *L) {
    llc_err err = {{0}};
    memset(L, 0, sizeof *L);
    int rc = gguf_open(path, &L->g, &err);
    if (!rc) rc = test_backend(threads, &L->be, &err);
    if (!rc) rc = model_load(L->g, L->be, &L->m, &err);
    if (rc) fprintf(stderr, "  load %s: %s\n", path, err.msg);
    return rc;
}

static void unload(loaded *L) {
    model_free(L->m);
    backend_free(L->be);
    gguf_free(L->g);
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Greedy decode from the reference prompt tokens; compare the first n_check
 * tokens of each case (all of them when n_check is 0). */
static void check_reference_n(const char *model_name, const char *ref_name, int n_check) {
    char path[512];
    snprintf(path, sizeof path, "%s/reference/%s", t_shared(), ref_name);
    char *text = t_read_file(path, NULL);
    CHECKF(text != NULL, "cannot read %s", path);
    if (!text) return;
    snprintf(path, sizeof path, "%s/models/%s", t_shared(), model_name);
    loaded L;
    if (load(path, 2, &L)) {
        CHECK(0);
        free(text);
        return;
    }
    int n_vocab = model_hparams_of(L.m)->n_vocab;
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    int cases = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        cJSON *pt = cJSON_GetObjectItem(o, "prompt_tokens"), *want = cJSON_GetObjectItem(o, "tokens");
        CHECK(cJSON_IsArray(pt) && cJSON_IsArray(want));
        int np = cJSON_GetArraySize(pt), nw = cJSON_GetArraySize(want), total = np + nw;
        int n_blocks = (total + 15) / 16;
        int32_t *toks = malloc((size_t)total * sizeof *toks), *blocks = malloc((size_t)n_blocks * 4);
        for (int i = 0; i < np; i++) toks[i] = cJSON_GetArrayItem(pt, i)->valueint;
        /* blocks in reverse order: the block table, not adjacency, must matter */
        for (int i = 0; i < n_blocks; i++) blocks[i] = n_blocks - 1 - i;
        model_kv *kv;
        batch *b;
        llc_err err;
        CHECK(model_kv_create(L.m, n_blocks, 16, 0 /* f32 */, &kv, &err) == 0);
        batch_create(n_blocks, 16, &b);
        batch_add(b, toks, np, 0, blocks, n_blocks, BATCH_OUT_LAST);
        int mismatch = -1;
        if (n_check > 0 && n_check < nw) nw = n_check;
        for (int i = 0; i < nw; i++) {
            CHECK(model_forward(L.m, kv, batch_view(b), logits, &err) == 0);
            int next = argmax(logits, n_vocab);
            if (next != cJSON_GetArrayItem(want, i)->valueint && mismatch < 0) mismatch = i;
            toks[np + i] = cJSON_GetArrayItem(want, i)->valueint; /* teacher-force the reference */
            batch_clear(b);
            batch_add(b, &toks[np + i], 1, np + i, blocks, n_blocks, BATCH_OUT_LAST);
        }
        CHECKF(mismatch < 0, "%s: case %d: first mismatch at generated token %d", model_name, cases, mismatch);
        batch_free(b);
        model_kv_free(kv);
        free(toks);
        free(blocks);
        cJSON_Delete(o);
        cases++;
    }
    CHECK(cases >= 1);
    free(logits);
    free(text);
    unload(&L);
}

static void check_reference(const char *model_name, const char *ref_name) {
    check_reference_n(model_name, ref_name, 0);
}

static void test_reference_stories(void) { check_reference("stories260K.gguf", "greedy_stories260K.jsonl"); }
static void test_reference_llama2xs(void) { check_reference("llama2xs.gguf", "greedy_llama2xs.jsonl"); }

/* max |a[i] - b[i]|; *scale = max(1, max |a[i]|), for bounds relative to the
 * largest logit */
static double max_abs_diff(const float *a, const float *b, int n, double *scale) {
    double worst = 0;
    *scale = 1;
    for (int i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)a[i] - b[i]));
        *scale = fmax(*scale, fabs((double)a[i]));
    }
    return worst;
}

/* Runs sequences (lengths lens[], start positions 0) together in one varlen step and
 * each alone; all logits of all rows must agree within tol. */
static void check_batched_equals_single(const char *path, int threads, double tol) {
    loaded L;
    if (load(path, threads, &L)) {
        CHECK(0);
        return;
    }
    const int n_vocab = model_hparams_of(L.m)->n_vocab;
    enum { NS = 5 };
    static const int lens[NS] = {1, 15, 16, 17, 40};
    /* each sequence also has a cached prefix of pre[s] tokens computed earlier */
    static const int pre[NS] = {0, 3, 16, 0, 21};
    int max_blocks = 8, n_blocks = NS * max_blocks;
    model_kv *kv;
    batch *b;
    llc_err err;
    CHECK(model_kv_create(L.m, n_blocks, 16, 0 /* f32 */, &kv, &err) == 0);
    batch_create(max_blocks, 16, &b);
    int32_t toks[NS][64], blocks[NS][8];
    uint64_t rng = 12345;
    for (int s = 0; s < NS; s++) {
        for (int i = 0; i < 64; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            toks[s][i] = (int32_t)((rng >> 33) % (uint64_t)n_vocab);
        }
        for (int i = 0; i < max_blocks; i++) blocks[s][i] = (i * NS + s * 3 + 1) % n_blocks; /* interleaved */
    }
    /* prefixes, each alone */
    for (int s = 0; s < NS; s++) {
        if (!pre[s]) continue;
        float *lg = malloc((size_t)n_vocab * 4);
        batch_clear(b);
        batch_add(b, toks[s], pre[s], 0, blocks[s], max_blocks, BATCH_OUT_LAST);
        batch_set_state_slot(b, s);
        CHECK(model_forward(L.m, kv, batch_view(b), lg, &err) == 0);
        free(lg);
    }
    /* a hybrid model's states after the prefixes, kept in slots NS.. to run the
     * sequences again alone from the same point (no-ops for other models) */
    for (int s = 0; s < NS; s++) CHECK(model_kv_state_copy(kv, s, NS + s, &err) == 0);
    /* all sequences together, logits for every row */
    int total = 0;
    for (int s = 0; s < NS; s++) total += lens[s];
    float *together = malloc((size_t)total * n_vocab * 4), *alone = malloc((size_t)64 * n_vocab * 4);
    batch_clear(b);
    for (int s = 0; s < NS; s++) {
        batch_add(b, toks[s] + pre[s], lens[s], pre[s], blocks[s], max_blocks, BATCH_OUT_ALL);
        batch_set_state_slot(b, s);
    }
    CHECK(model_forward(L.m, kv, batch_view(b), together, &err) == 0);
    /* again, alone (recomputing the same KV entries in place) */
    double worst = 0;
    int row0 = 0;
    for (int s = 0; s < NS; s++) {
        batch_clear(b);
        batch_add(b, toks[s] + pre[s], lens[s], pre[s], blocks[s], max_blocks, BATCH_OUT_ALL);
        CHECK(model_kv_state_copy(kv, NS + s, 2 * NS, &err) == 0); /* (any slot: it is the same state) */
        batch_set_state_slot(b, 2 * NS);
        CHECK(model_forward(L.m, kv, batch_view(b), alone, &err) == 0);
        for (size_t i = 0; i < (size_t)lens[s] * n_vocab; i++) {
            double d = fabs((double)alone[i] - together[(size_t)row0 * n_vocab + i]);
            if (d > worst) worst = d;
        }
        row0 += lens[s];
    }
    CHECKF(worst <= tol, "%s: batched vs single max abs diff %g > %g", path, worst, tol);
    /* and token by token (decode) equals the prefill of the same tokens */
    int s = NS - 1;
    batch_clear(b);
    batch_add(b, toks[s], pre[s] + lens[s], 0, blocks[s], max_blocks, BATCH_OUT_LAST);
    float *full = malloc((size_t)n_vocab * 4), *step = malloc((size_t)n_vocab * 4);
    CHECK(model_forward(L.m, kv, batch_view(b), full, &err) == 0);
    for (int i = 0; i < pre[s] + lens[s]; i++) {
        batch_clear(b);
        batch_add(b, &toks[s][i], 1, i, blocks[s], max_blocks, BATCH_OUT_LAST);
        CHECK(model_forward(L.m, kv, batch_view(b), step, &err) == 0);
    }
    /* Decode (one row) and prefill (many rows) run different kernels whose float
     * accumulation orders differ; the bound is relative to the largest logit. */
    double scale, worst2 = max_abs_diff(full, step, n_vocab, &scale);
    CHECKF(worst2 <= tol * scale, "%s: decode vs prefill max abs diff %g (largest logit %g)", path,
           worst2, scale);
    for (int i = 0; i < n_vocab; i++) CHECK(isfinite(full[i]));
    free(full);
    free(step);
    free(together);
    free(alone);
    batch_free(b);
    model_kv_free(kv);
    unload(&L);
}

/* The architectures of ../shared/models/arch: greedy continuations equal
 * llama.cpp's (the Q8_0 model: the first 8 tokens, as the README there says), and
 * a batched varlen step with prefixes, windows and experts equals each sequence
 * alone. */
static void check_arch(const char *name, int n_check) {
    char file[128], ref[128], path[512];
    snprintf(file, sizeof file, "arch/%s.gguf", name);
    snprintf(ref, sizeof ref, "arch/%s.jsonl", name);
    check_reference_n(file, ref, n_check);
    snprintf(path, sizeof path, "%s/models/%s", t_shared(), file);
    check_batched_equals_single(path, 2, n_check ? 2e-2 : 2e-4);
}

static void test_arch_gemma2(void) { check_arch("gemma2", 0); }
static void test_arch_gemma3(void) { check_arch("gemma3", 0); }
static void test_arch_phi3(void) { check_arch("phi3", 0); }
static void test_arch_qwen3moe(void) { check_arch("qwen3moe", 0); }
static void test_arch_qwen2_bias(void) { check_arch("qwen2-bias", 0); }
static void test_arch_llama_rope_scale(void) { check_arch("llama-rope-scale", 0); }
/* The README asks for the first 8 tokens; with the activation scales rounded to
 * fp16 as ggml stores them (mm_act_scale) all of them match, at every SIMD level
 * (float32 scales changed tokens 4 and 5 of two prompts). */
static void test_arch_mistral_gqa_q8(void) { check_arch("mistral-gqa-q8", 0); }
/* The 2026 families (../shared/reference/arch/README.md lists what each exercises). */
static void test_arch_qwen3_yarn(void) { check_arch("qwen3-yarn", 0); }
static void test_arch_phi3_longrope(void) { check_arch("phi3-longrope", 0); }
static void test_arch_mistral3(void) { check_arch("mistral3", 0); }
static void test_arch_smollm3(void) { check_arch("smollm3", 0); }
static void test_arch_qwen2moe(void) { check_arch("qwen2moe", 0); }
/* MXFP4 experts, Q8_0 elsewhere: the first 8 tokens, as the README asks (all 24
 * match with AVX2 and AVX-512; the scalar level's float sums drift at token 11
 * of one prompt) */
static void test_arch_gpt_oss(void) { check_arch("gpt-oss", 8); }
/* per-layer head sizes and KV heads, V = K, layers reading earlier layers' caches,
 * per-layer embeddings */
static void test_arch_gemma4(void) { check_arch("gemma4", 0); }
/* hybrid: gated short-convolution layers (a state per sequence) beside attention */
static void test_arch_lfm2(void) { check_arch("lfm2", 0); }
/* hybrid: gated delta-net layers (convolution window and delta-rule matrices
 * per sequence) beside gated attention with partial RoPE; and with experts */
static void test_arch_qwen35(void) { check_arch("qwen35", 0); }
static void test_arch_qwen35moe(void) { check_arch("qwen35moe", 0); }
/* hybrid: Mamba2 layers (conv bias, D skip, grouped norm) beside an attention
 * layer without RoPE; granite's scales; experts with a shared expert */
static void test_arch_granitehybrid(void) { check_arch("granitehybrid", 0); }

/* Prefix sharing under sliding windows (gemma2: window 8, here over blocks of 4
 * tokens): sequence B reuses the blocks of A's first 32 tokens and computes only
 * its own suffix, in the same step as A's next chunk; its logits equal B computed
 * alone from scratch in other blocks. */
static void test_window_prefix_sharing(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/arch/gemma2.gguf", t_shared());
    loaded L;
    if (load(path, 2, &L)) {
        CHECK(0);
        return;
    }
    const int V = model_hparams_of(L.m)->n_vocab, BS = 4;
    model_kv *kv;
    batch *b;
    llc_err err;
    CHECK(model_kv_create(L.m, 64, BS, 0 /* f32 */, &kv, &err) == 0);
    batch_create(16, BS, &b);
    int32_t a_toks[56], b_toks[52], a_blocks[14], b_blocks[13], fresh[13];
    for (int i = 0; i < 56; i++) a_toks[i] = (i * 131 + 7) % V;
    for (int i = 0; i < 52; i++) b_toks[i] = i < 32 ? a_toks[i] : (i * 17 + 3) % V;
    for (int i = 0; i < 14; i++) a_blocks[i] = 2 * i + 1;
    for (int i = 0; i < 13; i++) b_blocks[i] = i < 8 ? a_blocks[i] : 40 + i, fresh[i] = 63 - i;
    float *shared = malloc((size_t)20 * V * 4), *alone = malloc((size_t)20 * V * 4), *scratch = malloc((size_t)56 * V * 4);
    /* A: 40 tokens; then A's last 16 with B's 20 (positions 32..51) in one step */
    batch_add(b, a_toks, 40, 0, a_blocks, 10, BATCH_OUT_LAST);
    CHECK(model_forward(L.m, kv, batch_view(b), scratch, &err) == 0);
    batch_clear(b);
    batch_add(b, a_toks + 40, 16, 40, a_blocks, 14, BATCH_OUT_LAST);
    batch_add(b, b_toks + 32, 20, 32, b_blocks, 13, BATCH_OUT_ALL);
    CHECK(model_forward(L.m, kv, batch_view(b), scratch, &err) == 0);
    memcpy(shared, scratch + V, (size_t)20 * V * 4);
    /* B alone, all 52 tokens in fresh blocks */
    batch_clear(b);
    batch_add(b, b_toks, 52, 0, fresh, 13, BATCH_OUT_ALL);
    CHECK(model_forward(L.m, kv, batch_view(b), scratch, &err) == 0);
    memcpy(alone, scratch + (size_t)32 * V, (size_t)20 * V * 4);
    double scale, worst = max_abs_diff(alone, shared, 20 * V, &scale);
    CHECKF(worst <= 2e-4 * scale, "shared prefix vs alone: max abs diff %g (largest logit %g)", worst, scale);
    free(shared), free(alone), free(scratch);
    batch_free(b);
    model_kv_free(kv);
    unload(&L);
}

/* Mixtral's layout: a llama file with experts. Made from qwen3moe.gguf (keys
 * renamed to llama.*, the Q/K norms dropped): it loads as a mixture of experts and
 * a batched step equals each sequence alone. */
static void test_llama_with_experts(void) {
    char src[512], path[] = "/tmp/llmchat-moe-XXXXXX";
    snprintf(src, sizeof src, "%s/models/arch/qwen3moe.gguf", t_shared());
    gguf *g;
    llc_err err;
    if (gguf_open(src, &g, &err)) {
        CHECK(0);
        return;
    }
    gguf_writer *w;
    gguf_writer_create(&w);
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        const char *k = gguf_kv_key(g, i);
        const gguf_value *v = gguf_kv_value(g, i);
        char renamed[128];
        if (!strcmp(k, "general.architecture")) gguf_w_str(w, k, "llama");
        else if (strncmp(k, "qwen3moe.", 9)) gguf_w_copy(w, g, k);
        else if (snprintf(renamed, sizeof renamed, "llama.%s", k + 9), v->type == GGUF_TYPE_FLOAT32)
            gguf_w_f32(w, renamed, (float)v->v.f64);
        else gguf_w_u32(w, renamed, (uint32_t)v->v.u64);
    }
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        if (!strstr(t->name, "attn_q_norm") && !strstr(t->name, "attn_k_norm"))
            gguf_w_tensor(w, t->name, t->n_dims, t->ne, t->type, t->data);
    }
    int fd = mkstemp(path);
    close(fd);
    CHECKF(gguf_writer_write(w, path, &err) == 0, "%s", err.msg);
    gguf_writer_free(w);
    gguf_free(g);
    loaded L;
    if (load(path, 2, &L)) {
        CHECK(0);
    } else {
        const model_hparams *hp = model_hparams_of(L.m);
        CHECK(hp->arch == ARCH_LLAMA && hp->n_expert == 8 && hp->n_expert_used == 2 && hp->expert_ffn_dim == 64);
        unload(&L);
        check_batched_equals_single(path, 2, 2e-4);
    }
    remove(path);
}

static void test_batched_equals_single_stories(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", t_shared());
    check_batched_equals_single(path, 2, 1e-4);
    check_batched_equals_single(path, 1, 1e-4);
}

/* A prompt's last logits at the best SIMD level and at AVX2, which ignores the
 * packed copies and reads the weights from the file: the CPU backend dropped
 * those pages after packing, so this checks they come back intact. */
static void check_levels_agree(const char *path, double tol) {
    if (cpu_matmul_max_level() < CPU_SIMD_AVX512) return; /* nothing is packed */
    loaded L;
    if (load(path, 2, &L)) {
        CHECK(0);
        return;
    }
    const int n_vocab = model_hparams_of(L.m)->n_vocab;
    model_kv *kv;
    batch *b;
    llc_err err;
    CHECK(model_kv_create(L.m, 4, 16, 0 /* f32 */, &kv, &err) == 0);
    batch_create(4, 16, &b);
    int32_t toks[20], blocks[4] = {0, 1, 2, 3};
    for (int i = 0; i < 20; i++) toks[i] = (i * 37 + 5) % n_vocab;
    float *best = malloc((size_t)n_vocab * 4), *avx2 = malloc((size_t)n_vocab * 4);
    float *again = malloc((size_t)n_vocab * 4);
    const float *outs[3] = {best, avx2, again};
    for (int k = 0; k < 3; k++) {
        cpu_matmul_set_level(k == 1 ? CPU_SIMD_AVX2 : cpu_matmul_max_level());
        batch_clear(b);
        batch_add(b, toks, 20, 0, blocks, 4, BATCH_OUT_LAST);
        CHECK(model_forward(L.m, kv, batch_view(b), (float *)outs[k], &err) == 0);
    }
    cpu_matmul_set_level(cpu_matmul_max_level());
    double scale, worst = max_abs_diff(best, avx2, n_vocab, &scale);
    CHECKF(worst <= tol * scale, "%s: AVX-512 (packed) vs AVX2 (file) max abs diff %g (largest logit %g)", path,
           worst, scale);
    CHECK(memcmp(best, again, (size_t)n_vocab * 4) == 0); /* and the packed path is repeatable */
    free(best), free(avx2), free(again);
    batch_free(b);
    model_kv_free(kv);
    unload(&L);
}

/* Random-weight models of each architecture and weight type. */
static void gen_and_check(const char *preset, const char *wtype, int dim, int ffn) {
    modelgen_params p = {0};
    CHECK(modelgen_preset(preset, &p) == 0);
    if (dim) p.dim = dim;
    if (ffn) p.ffn_dim = ffn;
    p.wtype = wtype;
    p.seed = 7;
    char vocab[512], path[] = "/tmp/llmchat-model-XXXXXX";
    snprintf(vocab, sizeof vocab, "%s/models/stories260K.gguf", t_shared());
    p.vocab_path = vocab;
    int fd = mkstemp(path);
    close(fd);
    llc_err err;
    int rc = modelgen_write(&p, path, &err);
    CHECKF(rc == 0, "%s %s: %s", preset, wtype, err.msg);
    /* Quantized weights mean int8-rounded activations: a rounding-level difference
     * upstream (one-row and batched kernels sum in different orders) can move an
     * activation by a whole int8 step, which random-weight models amplify to ~0.5%
     * of the largest logit. Float weights must agree to float rounding. */
    if (!rc && !strcmp(wtype + 2, "_k_m")) {
        /* llama.cpp's _M mixes: the base K type, Q6_K for the output and for attn_v /
         * ffn_down of the last layer */
        gguf *g = NULL;
        CHECK(gguf_open(path, &g, &err) == 0);
        if (g) {
            const uint32_t base = wtype[1] == '5' ? QT_Q5_K : QT_Q4_K;
            const gguf_tensor *q = gguf_find_tensor(g, "blk.0.attn_q.weight");
            char last_v[64];
            snprintf(last_v, sizeof last_v, "blk.%d.attn_v.weight", p.n_layers - 1);
            const gguf_tensor *v = gguf_find_tensor(g, last_v);
            const gguf_tensor *o = gguf_find_tensor(g, "output.weight");
            CHECKF(q && q->type == base, "%s: attn_q is not %s", wtype, qtype_name(base));
            CHECKF(v && v->type == QT_Q6_K, "%s: attn_v of the last layer is not Q6_K", wtype);
            CHECKF(o && o->type == QT_Q6_K, "%s: output is not Q6_K", wtype);
            gguf_free(g);
        }
    }
    bool quantized = wtype[0] == 'q';
    if (!rc) check_batched_equals_single(path, 2, quantized ? 2e-2 : 2e-4);
    if (!rc && quantized) check_levels_agree(path, 2e-2);
    remove(path);
}

static void test_archs_and_types(void) {
    gen_and_check("tiny-llama", "f32", 0, 0);
    gen_and_check("tiny-llama", "f16", 0, 0);
    gen_and_check("tiny-llama", "bf16", 0, 0);
    gen_and_check("tiny-llama", "q8_0", 0, 0);
    gen_and_check("tiny-llama", "q4_0", 0, 0);
    gen_and_check("tiny-llama", "q4_k", 256, 512);
    gen_and_check("tiny-llama", "q6_k", 256, 512);
    gen_and_check("tiny-llama", "q4_k_m", 256, 512);
    gen_and_check("tiny-llama", "q5_k_m", 256, 512);
    gen_and_check("tiny-qwen2", "f16", 0, 0);
    gen_and_check("tiny-qwen3", "q8_0", 0, 0);
}

/* stories260K with a 4-block KV cache and a one-row batch (token `tok` at
 * position 0, logits wanted) whose fields the tests change one at a time. The
 * batch points into the struct: use it where it was opened. */
typedef struct one_step {
    loaded L;
    model_kv *kv;
    int32_t tok, pos, seq_start[2], kv_len, bt[4], slot, out;
    bk_batch b;
} one_step;

static int one_step_open(one_step *o, int32_t tok) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", t_shared());
    memset(o, 0, sizeof *o);
    if (load(path, 1, &o->L)) return -1;
    llc_err err;
    if (model_kv_create(o->L.m, 4, 16, 0 /* f32 */, &o->kv, &err)) {
        unload(&o->L);
        return -1;
    }
    o->tok = tok;
    o->seq_start[1] = 1;
    o->kv_len = 1;
    for (int i = 0; i < 4; i++) o->bt[i] = i;
    o->b = (bk_batch){.n_tokens = 1, .tokens = &o->tok, .positions = &o->pos, .n_seqs = 1,
                      .seq_start = o->seq_start, .kv_len = &o->kv_len, .block_table = o->bt, .max_blocks = 4,
                      .slots = &o->slot, .n_out = 1, .out_rows = &o->out};
    return 0;
}

static void one_step_close(one_step *o) {
    model_kv_free(o->kv);
    unload(&o->L);
}

/* An op that fails stops the step at once, with the op named: the forward pass
 * checks every op's status instead of running on and failing a step later. */
static int g_rope_calls;
static int failing_rope(void *ctx, float *x, int n_heads, int head_dim, const bk_rope *rp) {
    g_rope_calls++;
    return LLC_ERR_IO;
}

static void test_failing_op_stops_the_step(void) {
    one_step o;
    if (one_step_open(&o, 5)) {
        CHECK(0);
        return;
    }
    float logits[512];
    llc_err err;
    CHECK(model_forward(o.L.m, o.kv, &o.b, logits, &err) == 0);
    const backend_ops *cpu_ops = o.L.be->ops;
    backend_ops failing = *cpu_ops;
    failing.rope = failing_rope;
    o.L.be->ops = &failing;
    g_rope_calls = 0;
    const int rc = model_forward(o.L.m, o.kv, &o.b, logits, &err);
    CHECKF(rc == LLC_ERR_IO && strstr(err.msg, "rope"), "rc %d: %s", rc, err.msg);
    CHECKF(g_rope_calls == 1, "rope ran %d times: the step went on after it failed", g_rope_calls);
    o.L.be->ops = cpu_ops;
    CHECK(model_forward(o.L.m, o.kv, &o.b, logits, &err) == 0);
    one_step_close(&o);
}

static void test_bad_batches(void) {
    one_step o;
    if (one_step_open(&o, 600)) {
        CHECK(0);
        return;
    }
    float logits[512];
    llc_err err;
    model *m = o.L.m;
    CHECK(model_forward(m, o.kv, &o.b, logits, &err) == LLC_ERR_RANGE && strstr(err.msg, "vocabulary"));
    o.tok = 5;
    o.slot = 64;
    CHECK(model_forward(m, o.kv, &o.b, logits, &err) == LLC_ERR_RANGE && strstr(err.msg, "slot"));
    o.slot = 0;
    o.bt[0] = 9;
    CHECK(model_forward(m, o.kv, &o.b, logits, &err) == LLC_ERR_RANGE && strstr(err.msg, "block id"));
    o.bt[0] = 0;
    o.pos = 3;
    CHECK(model_forward(m, o.kv, &o.b, logits, &err) == LLC_ERR_RANGE && strstr(err.msg, "position"));
    o.pos = 0;
    o.out = 1;
    CHECK(model_forward(m, o.kv, &o.b, logits, &err) == LLC_ERR_RANGE);
    o.out = 0;
    CHECK(model_forward(m, o.kv, &o.b, logits, &err) == 0);
    one_step_close(&o);
}

/* A file whose hyper-parameters disagree with its tensors is refused by name. */
static void test_shape_mismatch(void) {
    char src[512];
    snprintf(src, sizeof src, "%s/models/stories260K.gguf", t_shared());
    gguf *g;
    llc_err err;
    if (gguf_open(src, &g, &err)) {
        CHECK(0);
        return;
    }
    static const struct { const char *key; uint32_t value; const char *needle; } cases[] = {
        {"llama.embedding_length", 96, "token_embd.weight"},
        {"llama.feed_forward_length", 171, "ffn_gate.weight"},
        {"llama.attention.head_count_kv", 3, "multiple"},
        {"llama.block_count", 6, "blk.5.attn_norm.weight' is missing"},
    };
    for (size_t c = 0; c < LLC_ARRAY_LEN(cases); c++) {
        gguf_writer *w;
        gguf_writer_create(&w);
        for (int64_t i = 0; i < gguf_n_kv(g); i++) {
            const char *k = gguf_kv_key(g, i);
            if (!strcmp(k, cases[c].key)) gguf_w_u32(w, k, cases[c].value);
            else gguf_w_copy(w, g, k);
        }
        for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
            const gguf_tensor *t = gguf_tensor_at(g, i);
            gguf_w_tensor(w, t->name, t->n_dims, t->ne, t->type, t->data);
        }
        uint8_t *buf;
        size_t size;
        CHECK(gguf_writer_to_memory(w, &buf, &size, &err) == 0);
        gguf *g2;
        CHECK(gguf_open_memory(buf, size, &g2, &err) == 0);
        backend *be;
        backend_cpu_create(1, &be, &err);
        model *m = NULL;
        int rc = model_load(g2, be, &m, &err);
        CHECKF(rc < 0 && m == NULL && strstr(err.msg, cases[c].needle), "case %zu: rc %d '%s'", c, rc,
               err.msg);
        model_free(m);
        backend_free(be);
        gguf_free(g2);
        free(buf);
        gguf_writer_free(w);
    }
    gguf_free(g);
}

/* Loads a copy of ../shared/models/<src> in which string key `key` is set to
 * `value` (when key is not NULL), tensors whose name contains `drop` are left
 * out, and an F32 tensor `add` [16] is added; returns model_load's code. */
static int load_variant(const char *src, const char *key, const char *value, const char *drop, const char *add,
                        llc_err *err) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/%s", t_shared(), src);
    gguf *g;
    if (gguf_open(path, &g, err)) return -100;
    gguf_writer *w;
    gguf_writer_create(&w);
    bool set = false;
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        const char *k = gguf_kv_key(g, i);
        if (key && !strcmp(k, key)) gguf_w_str(w, k, value), set = true;
        else gguf_w_copy(w, g, k);
    }
    if (key && !set) gguf_w_str(w, key, value);
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        if (!drop || !strstr(t->name, drop)) gguf_w_tensor(w, t->name, t->n_dims, t->ne, t->type, t->data);
    }
    static const float ones[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    const int64_t ne[1] = {16};
    if (add) gguf_w_tensor(w, add, 1, ne, 0 /* F32 */, ones);
    uint8_t *buf = NULL;
    size_t size;
    int rc = gguf_writer_to_memory(w, &buf, &size, err);
    gguf *g2 = NULL;
    backend *be = NULL;
    model *m = NULL;
    if (!rc) rc = gguf_open_memory(buf, size, &g2, err);
    if (!rc) rc = backend_cpu_create(1, &be, err);
    if (!rc) rc = model_load(g2, be, &m, err);
    model_free(m);
    backend_free(be);
    gguf_free(g2);
    free(buf);
    gguf_writer_free(w);
    gguf_free(g);
    return rc;
}

/* What is not supported is refused in one line that names it. */
static void test_unsupported_named(void) {
    static const struct {
        const char *src, *key, *value, *drop, *add, *needle;
    } cases[] = {
        {"arch/llama-rope-scale.gguf", "llama.rope.scaling.type", "su", NULL, NULL, "RoPE scaling 'su'"},
        {"arch/phi3.gguf", NULL, NULL, NULL, "rope_factors_long.weight", "LongRoPE needs both"},
        {"arch/qwen3moe.gguf", NULL, NULL, NULL, "blk.0.ffn_up_shexp.weight",
         "layer 0 has a shared expert but no qwen3moe.expert_shared_feed_forward_length"},
        {"arch/llama-rope-scale.gguf", NULL, NULL, "ffn_gate", NULL, "feed-forward block without a gate"},
        {"arch/gemma2.gguf", "general.architecture", "gemma3n", NULL, NULL, "'gemma3n' is not supported"},
        {"arch/qwen3moe.gguf", "general.architecture", "qwen3next", NULL, NULL,
         "'qwen3next' is not supported: its linear-attention layers"},
        {"arch/qwen35.gguf", NULL, NULL, "blk.1.ssm_a", NULL, "tensor 'blk.1.ssm_a' is missing"},
        {"arch/granitehybrid.gguf", NULL, NULL, "blk.2.ssm_in", NULL, "tensor 'blk.2.ssm_in.weight' is missing"},
        {"arch/lfm2.gguf", NULL, NULL, "blk.0.shortconv.conv", NULL, "tensor 'blk.0.shortconv.conv.weight' is missing"},
        {"arch/gemma4.gguf", NULL, NULL, "blk.2.attn_k.", NULL, "tensor 'blk.2.attn_k.weight' is missing"},
        {"arch/gemma4.gguf", "gemma4.attention.shared_kv_layers", "x", NULL, NULL, "shared_kv_layers"},
        {"arch/phi3.gguf", "general.architecture", "falcon", NULL, NULL,
         "'falcon' is not supported (llama (Mixtral-style experts too), mistral3, smollm3"},
        {"arch/phi3.gguf", NULL, NULL, "blk.", NULL, "'blk.0.attn_norm.weight' is missing"},
        {"arch/gemma2.gguf", NULL, NULL, "post_ffw_norm", NULL, "blk.0.post_ffw_norm.weight' is missing"},
    };
    for (size_t c = 0; c < LLC_ARRAY_LEN(cases); c++) {
        llc_err err = {{0}};
        int rc = load_variant(cases[c].src, cases[c].key, cases[c].value, cases[c].drop, cases[c].add, &err);
        CHECKF(rc < 0 && rc != -100 && strstr(err.msg, cases[c].needle), "case %zu: rc %d '%s'", c, rc, err.msg);
    }
    /* and the plain file loads (the helper itself is sound) */
    llc_err err;
    CHECK(load_variant("arch/phi3.gguf", NULL, NULL, NULL, NULL, &err) == 0);
}

/* The KV cache types: bytes per token (f16 half of f32, q8_0 34/128 of it, others
 * refused by name); a copied block (copy-on-write) reads exactly as its source in
 * every type, so copies move the type's whole block; an f16 cache's logits are
 * near f32's, q8_0's a little further. */
static void test_kv_types(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", t_shared());
    loaded L;
    if (load(path, 2, &L)) {
        CHECK(0);
        return;
    }
    const size_t f32 = model_kv_bytes_per_token(L.m, QT_F32);
    CHECK(f32 > 0 && model_kv_bytes_per_token(L.m, QT_F16) * 2 == f32 &&
          model_kv_bytes_per_token(L.m, QT_Q8_0) * 128 == f32 * 34 && model_kv_bytes_per_token(L.m, QT_Q4_0) == 0);
    CHECK(model_kv_type_from_name("F16") == QT_F16 && model_kv_type_from_name("q8_0") == QT_Q8_0 &&
          model_kv_type_from_name("q4_0") < 0 && model_kv_type_from_name(NULL) < 0);
    model_kv *kv = NULL;
    llc_err err = {{0}};
    CHECK(model_kv_create(L.m, 4, 16, QT_Q4_0, &kv, &err) == LLC_ERR_UNSUPPORTED && !kv && strstr(err.msg, "Q4_0"));
    const int n_vocab = model_hparams_of(L.m)->n_vocab;
    int32_t toks[21];
    for (int i = 0; i < 21; i++) toks[i] = (i * 37 + 5) % n_vocab;
    float *ref = malloc((size_t)n_vocab * 4), *a = malloc((size_t)n_vocab * 4), *c = malloc((size_t)n_vocab * 4);
    const uint32_t types[] = {QT_F32, QT_F16, QT_Q8_0};
    const double tol[] = {0, 0.01, 0.05};
    for (size_t t = 0; t < LLC_ARRAY_LEN(types); t++) {
        CHECK(model_kv_create(L.m, 3, 16, types[t], &kv, &err) == 0 && model_kv_type(kv) == (int)types[t]);
        if (!kv) continue;
        batch *b;
        batch_create(3, 16, &b);
        int32_t blocks[2] = {0, 1}, copied[2] = {0, 2}, src = 1, dst = 2;
        batch_add(b, toks, 20, 0, blocks, 2, BATCH_OUT_LAST);
        CHECK(model_forward(L.m, kv, batch_view(b), a, &err) == 0);
        CHECK(model_kv_copy_blocks(kv, &src, &dst, 1, &err) == 0); /* block 2 = block 1 (tokens 16..19) */
        batch_clear(b);
        batch_add(b, toks + 20, 1, 20, blocks, 2, BATCH_OUT_LAST);
        CHECK(model_forward(L.m, kv, batch_view(b), a, &err) == 0);
        batch_clear(b);
        batch_add(b, toks + 20, 1, 20, copied, 2, BATCH_OUT_LAST);
        CHECK(model_forward(L.m, kv, batch_view(b), c, &err) == 0);
        CHECKF(!memcmp(a, c, (size_t)n_vocab * 4), "%s: the copied block does not read as its source",
               qtype_name(types[t]));
        if (t == 0) memcpy(ref, a, (size_t)n_vocab * 4);
        double scale, worst = max_abs_diff(ref, a, n_vocab, &scale);
        CHECKF(worst <= tol[t] * scale, "%s KV: logits differ from f32's by %g (largest %g)", qtype_name(types[t]),
               worst, scale);
        batch_free(b);
        model_kv_free(kv);
        kv = NULL;
    }
    free(ref), free(a), free(c);
    unload(&L);
}

/* Logits of the last of n prompt tokens, in one prefill step. */
static int prefill_logits(model *m, const int32_t *toks, int n, float *logits) {
    int n_blocks = (n + 15) / 16;
    int32_t blocks[16];
    for (int i = 0; i < n_blocks; i++) blocks[i] = i;
    model_kv *kv;
    batch *b;
    llc_err err;
    int rc = model_kv_create(m, n_blocks, 16, 0 /* f32 */, &kv, &err);
    if (rc) return rc;
    batch_create(n_blocks, 16, &b);
    batch_add(b, toks, n, 0, blocks, n_blocks, BATCH_OUT_LAST);
    rc = model_forward(m, kv, batch_view(b), logits, &err);
    batch_free(b);
    model_kv_free(kv);
    return rc;
}

/* general.alignment = 1 is legal GGUF: tensor data may then start at any byte.
 * Such a model loads and computes the same logits as the aligned file (no
 * misaligned loads: UBSan, which the unit tests run under, would abort). */
static void test_alignment_1(void) {
    char src[512];
    snprintf(src, sizeof src, "%s/models/stories260K.gguf", t_shared());
    loaded L;
    if (load(src, 2, &L)) {
        CHECK(0);
        return;
    }
    static const int32_t toks[] = {1, 403, 407, 261, 378, 434, 297, 306, 372, 442, 446, 269};
    const int n = (int)LLC_ARRAY_LEN(toks), n_vocab = model_hparams_of(L.m)->n_vocab;
    float *want = malloc((size_t)n_vocab * sizeof *want), *got = malloc((size_t)n_vocab * sizeof *got);
    CHECK(prefill_logits(L.m, toks, n, want) == 0);
    bool misaligned = false;
    /* a padding key of 0..3 bytes moves the data section: take a length that puts
     * the first tensor at an odd address */
    for (int pad = 0; pad < 4 && !misaligned; pad++) {
        gguf_writer *w;
        gguf_writer_create(&w);
        CHECK(gguf_writer_set_alignment(w, 1) == 0);
        char padstr[4] = {0};
        memset(padstr, 'x', (size_t)pad);
        gguf_w_str(w, "test.pad", padstr);
        for (int64_t i = 0; i < gguf_n_kv(L.g); i++)
            if (strcmp(gguf_kv_key(L.g, i), "general.alignment")) gguf_w_copy(w, L.g, gguf_kv_key(L.g, i));
        for (int64_t i = 0; i < gguf_n_tensors(L.g); i++) {
            const gguf_tensor *t = gguf_tensor_at(L.g, i);
            gguf_w_tensor(w, t->name, t->n_dims, t->ne, t->type, t->data);
        }
        uint8_t *buf;
        size_t size;
        llc_err err;
        CHECK(gguf_writer_to_memory(w, &buf, &size, &err) == 0);
        gguf_writer_free(w);
        gguf *g2 = NULL;
        CHECKF(gguf_open_memory(buf, size, &g2, &err) == 0, "%s", err.msg);
        if (!g2) {
            free(buf);
            break;
        }
        CHECK(gguf_alignment(g2) == 1);
        if ((uintptr_t)gguf_tensor_at(g2, 0)->data % 2) {
            misaligned = true;
            backend *be;
            model *m = NULL;
            CHECK(backend_cpu_create(2, &be, &err) == 0);
            int rc = model_load(g2, be, &m, &err);
            CHECKF(rc == 0, "load with alignment 1: %s", err.msg);
            if (!rc) {
                CHECK(prefill_logits(m, toks, n, got) == 0);
                CHECK(memcmp(want, got, (size_t)n_vocab * sizeof *got) == 0);
            }
            model_free(m);
            backend_free(be);
        }
        gguf_free(g2);
        free(buf);
    }
    CHECK(misaligned);
    free(want);
    free(got);
    unload(&L);
}

/* On the GPU: the greedy continuations of every reference, prompt prefilled in
 * one step and each token decoded alone (decode steps are recorded and replayed). */
static void test_arch_references(void) {
    static const char *const names[] = {"gemma2", "gemma3", "phi3", "qwen3moe", "qwen2-bias", "llama-rope-scale",
                                        "mistral-gqa-q8", "qwen3-yarn", "phi3-longrope", "mistral3", "smollm3",
                                        "qwen2moe", "gemma4"};
    for (size_t i = 0; i < LLC_ARRAY_LEN(names); i++) {
        char file[128], ref[128];
        snprintf(file, sizeof file, "arch/%s.gguf", names[i]);
        snprintf(ref, sizeof ref, "arch/%s.jsonl", names[i]);
        check_reference_n(file, ref, 0);
    }
}

int main(void) {
    if (on_cuda()) {
        RUN(test_reference_stories);
        RUN(test_reference_llama2xs);
        RUN(test_arch_references);
        return t_summary();
    }
    RUN(test_reference_stories);
    RUN(test_reference_llama2xs);
    RUN(test_batched_equals_single_stories);
    RUN(test_arch_gemma2);
    RUN(test_arch_gemma3);
    RUN(test_arch_phi3);
    RUN(test_arch_qwen3moe);
    RUN(test_arch_qwen2_bias);
    RUN(test_arch_llama_rope_scale);
    RUN(test_arch_mistral_gqa_q8);
    RUN(test_arch_qwen3_yarn);
    RUN(test_arch_phi3_longrope);
    RUN(test_arch_mistral3);
    RUN(test_arch_smollm3);
    RUN(test_arch_qwen2moe);
    RUN(test_arch_gpt_oss);
    RUN(test_arch_gemma4);
    RUN(test_arch_lfm2);
    RUN(test_arch_qwen35);
    RUN(test_arch_qwen35moe);
    RUN(test_arch_granitehybrid);
    RUN(test_window_prefix_sharing);
    RUN(test_llama_with_experts);
    RUN(test_archs_and_types);
    RUN(test_bad_batches);
    RUN(test_failing_op_stops_the_step);
    RUN(test_shape_mismatch);
    RUN(test_unsupported_named);
    RUN(test_kv_types);
    RUN(test_alignment_1);
    return t_summary();
}
