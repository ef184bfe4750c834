/* cmd_info.c — `llmchat info`: what a GGUF file holds (metadata and tensor table),
 * which chat template it would use, and whether llmchat can run it. To find out,
 * the file is opened on the CPU exactly as `-m` opens it (llm_open), so a file that
 * needs something not yet supported gets the same one-line reason here as when a
 * command loads it. */
#include <stdio.h>
#include <stdlib.h>

#include "app/commands.h"
#include "app/llm.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model.h"
#include "kernels/quant.h"

static bool g_tensors;

static const cli_opt g_opts[] = {
    {"tensors", 't', CLI_FLAG, &g_tensors, NULL, "list every tensor", 0, 0, NULL},
    {0},
};

const cli_cmd cli_info = {
    .name = "info",
    .usage = "[FILE | -m MODEL] [--tensors]",
    .summary = "show a GGUF file's metadata and tensors",
    .opts = g_opts,
};

static void print_value(const gguf_value *v) {
    switch (v->type) {
    case GGUF_TYPE_STRING:
        if (v->v.str.len > 120) printf("\"%.120s\"... (%llu bytes)", v->v.str.ptr,
                                       (unsigned long long)v->v.str.len);
        else printf("\"%.*s\"", (int)v->v.str.len, v->v.str.ptr);
        break;
    case GGUF_TYPE_ARRAY:
        printf("[%llu x %s]", (unsigned long long)v->v.arr.n, gguf_type_name(v->v.arr.elem_type));
        break;
    case GGUF_TYPE_FLOAT32: case GGUF_TYPE_FLOAT64: printf("%g", v->v.f64); break;
    case GGUF_TYPE_BOOL: printf("%s", v->v.u64 ? "true" : "false"); break;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT8:
        printf("%llu", (unsigned long long)v->v.u64);
        break;
    default: printf("%lld", (long long)v->v.i64); break;
    }
}

int cmd_info(int argc, char **argv) {
    cli_common common = {0};
    const char *pos[1] = {NULL};
    int npos = cli_parse(&cli_info, &common, argc, argv, pos, 1);
    if (npos) {
        if (common.model_given) cli_usage_error(&cli_info, "give the file once: FILE or -m FILE");
        common.model = pos[0];
    }
    gguf *g;
    llc_err err;
    if (gguf_open(common.model, &g, &err)) {
        fprintf(stderr, "llmchat: %s\n", err.msg);
        return 1;
    }
    printf("%s: GGUF v%u, %lld metadata keys, %lld tensors\n", common.model, gguf_version(g),
           (long long)gguf_n_kv(g), (long long)gguf_n_tensors(g));
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        printf("  %-44s ", gguf_kv_key(g, i));
        print_value(gguf_kv_value(g, i));
        printf("\n");
    }
    uint64_t total = 0;
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        total += t->n_bytes;
        if (!g_tensors) continue;
        printf("  %-32s %-7s [", t->name, qtype_name(t->type));
        for (uint32_t d = 0; d < t->n_dims; d++) printf("%s%lld", d ? ", " : "", (long long)t->ne[d]);
        printf("]\n");
    }
    printf("tensor data: %.2f MiB\n", (double)total / (1024.0 * 1024.0));
    gguf_free(g);

    /* can it run? opened as -m opens it, on the CPU, with zero-copy weight views
     * (no packed copies for a mere check) and no draft */
    cli_common probe = common;
    probe.no_prepack = true;
    probe.device = "cpu";
    probe.threads = 1;
    probe.draft = NULL;
    llm L;
    if (llm_open(&probe, &L, &err)) {
        printf("runs in llmchat: no: %s\n", err.msg);
        return 0; /* the file was shown; whether it runs is the last line */
    }
    char desc[320];
    if (tok_describe(L.tok, desc, sizeof desc) > 0) printf("tokenizer: %s\n", desc);
    if (L.chat)
        printf("chat template: the model's own (tokenizer.chat_template, Jinja)\n");
    else if (L.chat_error[0])
        printf("chat template: %s\n", L.chat_error);
    else
        printf("chat template: none in the file; the built-in %s format\n",
               chat_format_name(L.chat_fallback));
    const model_hparams *hp = model_hparams_of(L.m);
    printf("runs in llmchat: yes (%s, %d layers, dim %d, %d/%d heads of %d", hp->arch_name, hp->n_layers,
           hp->dim, hp->n_heads, hp->n_kv_heads, hp->head_dim);
    if (hp->n_expert) printf(", %d of %d experts", hp->n_expert_used, hp->n_expert);
    if (hp->swa_window) printf(", sliding window %d", hp->swa_window);
    if (hp->n_recurrent)
        printf(", %d recurrent layers: a state of %.1f KiB per sequence",
               hp->n_recurrent, (double)model_state_bytes(L.m) / 1024.0);
    printf(")\n");
    llm_close(&L);
    return 0; /* the file was shown; whether it runs is the last line */
}
