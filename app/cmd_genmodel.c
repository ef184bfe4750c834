/* cmd_genmodel.c — `llmchat gen-model`: write a random-weight GGUF of a real shape
 * (e.g. TinyLlama-1.1B) for benchmarks and tests. */
#include <stdio.h>
#include <string.h>

#include "app/commands.h"
#include "engine/model/modelgen.h"

static modelgen_params g_p;
static const char *g_preset, *g_out, *g_arch;
static int64_t g_seed = 1;
static bool g_tied, g_fast;

static const char *const g_archs[] = {"llama", "qwen2", "qwen3", NULL};

static const cli_opt g_opts[] = {
    {"out", 'o', CLI_STR, &g_out, "PATH", "where to write the model (required)", 0, 0, NULL},
    {"preset", 0, CLI_STR, &g_preset, "NAME", "tinyllama-1.1b, tiny-llama, tiny-qwen2, tiny-qwen3", 0, 0, NULL},
    {"type", 't', CLI_STR, &g_p.wtype, "TYPE", "f32 f16 bf16 q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k iq4_nl iq4_xs q4_k_m q5_k_m (default f16)", 0, 0, NULL},
    {"vocab", 0, CLI_STR, &g_p.vocab_path, "GGUF", "copy the tokenizer from this file (default: -m)", 0, 0, NULL},
    {"arch", 0, CLI_CHOICE, &g_arch, "ARCH", "llama, qwen2 or qwen3", 0, 0, g_archs},
    {"dim", 0, CLI_INT, &g_p.dim, "N", "embedding width", 1, 1 << 16, NULL},
    {"layers", 0, CLI_INT, &g_p.n_layers, "N", "transformer blocks", 1, 1024, NULL},
    {"heads", 0, CLI_INT, &g_p.n_heads, "N", "attention heads", 1, 1024, NULL},
    {"kv-heads", 0, CLI_INT, &g_p.n_kv_heads, "N", "key/value heads", 1, 1024, NULL},
    {"head-dim", 0, CLI_INT, &g_p.head_dim, "N", "head size (default dim/heads)", 1, 1024, NULL},
    {"ffn", 0, CLI_INT, &g_p.ffn_dim, "N", "feed-forward width", 1, 1 << 18, NULL},
    {"ctx", 0, CLI_INT, &g_p.n_ctx, "N", "context length to record", 1, 1 << 24, NULL},
    {"tied", 0, CLI_FLAG, &g_tied, NULL, "no output.weight (logits reuse token_embd)", 0, 0, NULL},
    {"seed", 0, CLI_I64, &g_seed, "N", "random seed (default 1)", 0, 0, NULL},
    {"tail-from", 0, CLI_INT, &g_p.tail_from, "L", "scale the output projections of layers L.. (drafts)", 1, 1024, NULL},
    {"tail-scale", 0, CLI_FLOAT, &g_p.tail_scale, "S", "by S (0: those layers add nothing)", 0, 100, NULL},
    {"fast", 0, CLI_FLAG, &g_fast, NULL, "draw 512 rows per matrix and repeat them (speed tests of big shapes)", 0, 0, NULL},
    {0},
};

const cli_cmd cli_genmodel = {
    .name = "gen-model",
    .usage = "-o OUT.gguf [--preset NAME] [--type TYPE] [--vocab GGUF] [shape options]",
    .summary = "write a random-weight model of a given shape and weight type",
    .opts = g_opts,
};

int cmd_genmodel(int argc, char **argv) {
    cli_common common = {0};
    g_p = (modelgen_params){.arch = "llama", .n_ctx = 2048, .rope_base = 10000.0f, .wtype = "f16"};
    /* a preset sets the shape first; explicit options given after it win */
    for (int i = 1; i < argc; i++) {
        const char *name = !strncmp(argv[i], "--preset=", 9) ? argv[i] + 9
                           : !strcmp(argv[i], "--preset") && i + 1 < argc ? argv[i + 1] : NULL;
        if (name && modelgen_preset(name, &g_p))
            cli_usage_error(&cli_genmodel, "--preset: '%s' is not one of %s", name,
                            modelgen_preset_names());
    }
    cli_parse(&cli_genmodel, &common, argc, argv, NULL, 0);
    if (!g_out) cli_usage_error(&cli_genmodel, "--out is required");
    if (g_arch) g_p.arch = g_arch;
    if (!g_p.vocab_path) g_p.vocab_path = common.model;
    g_p.tied_output = g_tied;
    g_p.seed = (uint64_t)g_seed;
    g_p.threads = common.threads;
    if (g_fast) g_p.distinct_rows = 512;
    if (!g_p.dim || !g_p.n_layers || !g_p.n_heads || !g_p.ffn_dim)
        cli_usage_error(&cli_genmodel, "give --preset or --dim, --layers, --heads and --ffn");
    if (!g_p.n_kv_heads) g_p.n_kv_heads = g_p.n_heads;
    llc_err err;
    if (modelgen_write(&g_p, g_out, &err)) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        return 1;
    }
    printf("wrote %s (%s, dim %d, %d layers, %d/%d heads, ffn %d, %s)\n", g_out, g_p.arch, g_p.dim,
           g_p.n_layers, g_p.n_heads, g_p.n_kv_heads, g_p.ffn_dim, g_p.wtype);
    return 0;
}
