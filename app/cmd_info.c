/* cmd_info.c — `llmchat info`: what a GGUF file holds (metadata and tensor table),
 * and whether llmchat can run it (the model is loaded on the CPU to find out; a
 * file that needs something not yet supported says what, in one line). */
#include <stdio.h>
#include <stdlib.h>

#include "app/commands.h"
#include "engine/gguf.h"
#include "engine/model.h"
#include "kernels/quant.h"

static bool g_tensors;

static const cli_opt g_opts[] = {
    {"tensors", 't', CLI_FLAG, &g_tensors, NULL, "list every tensor", 0, 0, NULL},
    {0},
};

const cli_cmd cli_info = {
    .name = "info",
    .usage = "[-m MODEL] [--tensors]",
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
    cli_parse(&cli_info, &common, argc, argv, NULL, 0);
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
    /* can it run? (zero-copy weight views; no packed copies for a mere check) */
    setenv("LLC_PREPACK", "0", 1);
    backend *be = NULL;
    model *m = NULL;
    int rc = backend_cpu_create(1, &be, &err);
    if (!rc) rc = model_load(g, be, &m, &err);
    if (rc) {
        printf("runs in llmchat: no: %s\n", err.msg);
    } else {
        const model_hparams *hp = model_hparams_of(m);
        printf("runs in llmchat: yes (%s, %d layers, dim %d, %d/%d heads of %d", hp->arch_name, hp->n_layers,
               hp->dim, hp->n_heads, hp->n_kv_heads, hp->head_dim);
        if (hp->n_expert) printf(", %d of %d experts", hp->n_expert_used, hp->n_expert);
        if (hp->swa_window) printf(", sliding window %d", hp->swa_window);
        printf(")\n");
    }
    model_free(m);
    backend_free(be);
    gguf_free(g);
    return 0; /* the file was shown; whether it runs is the last line */
}
