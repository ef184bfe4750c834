/* fuzz_gguf.c — libFuzzer target for untrusted model files: the input is a GGUF
 * file. gguf_open_memory must accept or refuse it cleanly; an accepted file is
 * walked completely (every key, value, nested array element and tensor byte, as
 * the getters promise they stay inside the buffer), then handed to what reads
 * GGUF metadata next: the tokenizer loader, the chat template detector and the
 * model loader (a CPU backend with one thread). Built by `make fuzz`. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/template/chat.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend.h"

static volatile uint64_t g_sink; /* keeps the reads from being optimised away */

static void walk_value(const gguf_value *v, int depth) {
    switch (v->type) {
    case GGUF_TYPE_STRING:
        if (v->v.str.len) g_sink += (uint8_t)v->v.str.ptr[0] + (uint8_t)v->v.str.ptr[v->v.str.len - 1];
        break;
    case GGUF_TYPE_ARRAY: {
        const gguf_array *a = &v->v.arr;
        for (uint64_t i = 0; i < a->n && i < 4096; i++) {
            if (a->elem_type == GGUF_TYPE_STRING) {
                if (a->strs[i].len) g_sink += (uint8_t)a->strs[i].ptr[a->strs[i].len - 1];
            } else if (a->elem_type == GGUF_TYPE_ARRAY) {
                if (depth < 8) walk_value(&a->arrays[i], depth + 1);
            } else if (a->elem_type == GGUF_TYPE_FLOAT32 || a->elem_type == GGUF_TYPE_FLOAT64) {
                float f = gguf_arr_f32(a, i);
                uint32_t bits;
                memcpy(&bits, &f, sizeof bits);
                g_sink += bits;
            } else if (a->elem_type != GGUF_TYPE_BOOL) {
                g_sink += (uint64_t)gguf_arr_int(a, i);
            }
        }
        break;
    }
    default:
        g_sink += v->v.u64;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf *g = NULL;
    llc_err err;
    if (gguf_open_memory(data, size, &g, &err)) return 0;
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        const char *key = gguf_kv_key(g, i);
        const gguf_value *v = gguf_kv_value(g, i);
        if (gguf_find(g, key) == NULL) abort(); /* every key can be found again */
        walk_value(v, 0);
        uint32_t u;
        int64_t i64;
        float f;
        bool b;
        gguf_str s;
        gguf_array a;
        gguf_get_u32(g, key, &u, &err);
        gguf_get_i64(g, key, &i64, &err);
        gguf_get_f32(g, key, &f, &err);
        gguf_get_bool(g, key, &b, &err);
        gguf_get_str(g, key, &s, &err);
        gguf_get_arr(g, key, GGUF_TYPE_COUNT, &a, &err);
    }
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        if (gguf_find_tensor(g, t->name) != t) abort();
        if (t->n_bytes) /* the first and last byte lie inside the input */
            g_sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->n_bytes - 1];
        g_sink += (uint64_t)gguf_tensor_n_elems(t);
    }
    tokenizer *tok = NULL;
    if (tok_load(g, &tok, &err) == 0) {
        int32_t ids[64];
        int n = tok_encode(tok, "Hello world! <s> 123", 20, true, true, ids, 64);
        char *text = NULL;
        if (n > 0 && n <= 64 && tok_decode(tok, ids, n, true, &text, NULL) == 0) free(text);
        tok_free(tok);
    }
    gguf_str tmpl;
    if (gguf_get_str(g, "tokenizer.chat_template", &tmpl, &err) == 0 && tmpl.len < 65536) {
        char *src = malloc(tmpl.len + 1);
        if (src) {
            memcpy(src, tmpl.ptr, tmpl.len);
            src[tmpl.len] = 0;
            g_sink += (uint64_t)chat_detect(src);
            free(src);
        }
    }
    /* a backend per file: it keeps what it copied or packed until it goes */
    backend *be = NULL;
    if (backend_cpu_create(1, &be, &err)) abort();
    model *m = NULL;
    if (model_load(g, be, &m, &err) == 0) model_free(m);
    backend_free(be);
    gguf_free(g);
    return 0;
}
