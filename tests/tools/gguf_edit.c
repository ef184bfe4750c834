/* gguf_edit.c — writes a copy of a GGUF file with a few changes, so tests can make
 * files that need what llmchat does not support (another architecture, a RoPE
 * scaling type, a tensor type, an extra tensor) from the real models in ../shared.
 *
 * Usage: gguf_edit IN OUT [EDIT...], each EDIT one of
 *   -s KEY=TEXT      set a string            -u KEY=N     set a uint32
 *   -f KEY=X         set a float32           -d KEY       delete a key
 *   -t NAME=TYPE     give tensor NAME another type (q4_k, iq2_xxs ...), data zeroed
 *   -a NAME=TYPE:N0[,N1[,N2]]   add a zero tensor    -r NAME   remove a tensor
 *   -p PREFIX=NEW    rename every key starting with PREFIX (an architecture's keys)
 * Keys that are set replace the file's value in place or are appended. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"
#include "kernels/quant.h"

#define MAX_EDITS 512 /* every matrix of a 22-layer model retyped in one call */

typedef struct edit {
    char op;
    char *key, *val; /* key and the text after '=' (NULL for -d / -r) */
    bool used;
} edit;

static edit g_edits[MAX_EDITS];
static int g_n;

static void die(const char *msg, const char *arg) {
    fprintf(stderr, "gguf_edit: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    exit(2);
}

static edit *find_edit(const char *ops, const char *key) {
    for (int i = 0; i < g_n; i++)
        if (strchr(ops, g_edits[i].op) && !strcmp(g_edits[i].key, key)) return &g_edits[i];
    return NULL;
}

static void write_set(gguf_writer *w, const edit *e, const char *key) {
    int rc = 0;
    switch (e->op) {
    case 's': rc = gguf_w_str(w, key, e->val); break;
    case 'u': rc = gguf_w_u32(w, key, (uint32_t)strtoul(e->val, NULL, 10)); break;
    case 'f': rc = gguf_w_f32(w, key, strtof(e->val, NULL)); break;
    }
    if (rc) die("cannot set", key);
}

/* Zeroed data for a tensor of `type` and shape ne (kept until the file is written). */
static void *zero_data(uint32_t type, const int64_t *ne, uint32_t n_dims) {
    int64_t rows = 1;
    for (uint32_t d = 1; d < n_dims; d++) rows *= ne[d];
    size_t bytes = qtype_row_bytes(type, ne[0]) * (size_t)rows;
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) die("out of memory", NULL);
    return p;
}

int main(int argc, char **argv) {
    if (argc < 3) die("usage: gguf_edit IN OUT [-s|-u|-f KEY=VALUE] [-d KEY] [-t|-a NAME=...] [-r NAME] [-p OLD=NEW]", NULL);
    for (int i = 3; i < argc; i++) {
        if (argv[i][0] != '-' || !strchr("sufdtarp", argv[i][1]) || argv[i][2] || i + 1 >= argc)
            die("bad edit", argv[i]);
        if (g_n == MAX_EDITS) die("too many edits", NULL);
        edit *e = &g_edits[g_n++];
        e->op = argv[i][1];
        e->key = strdup(argv[++i]);
        char *eq = strchr(e->key, '=');
        if (strchr("suftap", e->op)) {
            if (!eq) die("missing '='", argv[i]);
            *eq = 0;
            e->val = eq + 1;
        }
    }
    gguf *g;
    llc_err err;
    if (gguf_open(argv[1], &g, &err)) die(err.msg, NULL);
    gguf_writer *w;
    if (gguf_writer_create(&w)) die("out of memory", NULL);
    gguf_writer_set_version(w, gguf_version(g));
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        const char *key = gguf_kv_key(g, i);
        if (!strcmp(key, "general.alignment") || find_edit("d", key)) continue;
        edit *e = find_edit("suf", key);
        if (e) {
            write_set(w, e, key);
            e->used = true;
            continue;
        }
        const edit *p = NULL;
        for (int k = 0; k < g_n && !p; k++)
            if (g_edits[k].op == 'p' && !strncmp(key, g_edits[k].key, strlen(g_edits[k].key)))
                p = &g_edits[k];
        if (p) { /* renamed: same value under the new prefix */
            char renamed[256];
            snprintf(renamed, sizeof renamed, "%s%s", p->val, key + strlen(p->key));
            const gguf_value *v = gguf_kv_value(g, i);
            int rc;
            switch (v->type) {
            case GGUF_TYPE_UINT32: rc = gguf_w_u32(w, renamed, (uint32_t)v->v.u64); break;
            case GGUF_TYPE_INT32: rc = gguf_w_i32(w, renamed, (int32_t)v->v.i64); break;
            case GGUF_TYPE_FLOAT32: rc = gguf_w_f32(w, renamed, (float)v->v.f64); break;
            case GGUF_TYPE_BOOL: rc = gguf_w_bool(w, renamed, v->v.u64 != 0); break;
            case GGUF_TYPE_STRING: {
                char *s = strndup(v->v.str.ptr, (size_t)v->v.str.len);
                rc = gguf_w_str(w, renamed, s);
                free(s);
                break;
            }
            default: die("cannot rename a key of this type", key);
            }
            if (rc) die("cannot rename", key);
            continue;
        }
        if (gguf_w_copy(w, g, key)) die("cannot copy", key);
    }
    for (int k = 0; k < g_n; k++)
        if (strchr("suf", g_edits[k].op) && !g_edits[k].used) write_set(w, &g_edits[k], g_edits[k].key);

    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        if (find_edit("r", t->name)) continue;
        const edit *e = find_edit("t", t->name);
        uint32_t type = t->type;
        const void *data = t->data;
        if (e) {
            int ty = qtype_from_name(e->val);
            if (ty < 0) die("unknown tensor type", e->val);
            type = (uint32_t)ty;
            data = zero_data(type, t->ne, t->n_dims);
        }
        if (gguf_w_tensor(w, t->name, t->n_dims, t->ne, type, data)) die("cannot add tensor", t->name);
    }
    for (int k = 0; k < g_n; k++) {
        const edit *e = &g_edits[k];
        if (e->op != 'a') continue;
        char *colon = strchr(e->val, ':');
        if (!colon) die("-a wants NAME=TYPE:N0[,N1...]", e->key);
        *colon = 0;
        int ty = qtype_from_name(e->val);
        if (ty < 0) die("unknown tensor type", e->val);
        int64_t ne[4] = {1, 1, 1, 1};
        uint32_t nd = 0;
        for (char *s = colon + 1; *s && nd < 4; nd++) {
            ne[nd] = strtoll(s, &s, 10);
            if (*s == ',') s++;
        }
        if (!nd) die("-a wants a shape", e->key);
        if (gguf_w_tensor(w, e->key, nd, ne, (uint32_t)ty, zero_data((uint32_t)ty, ne, nd)))
            die("cannot add tensor", e->key);
    }
    if (gguf_writer_write(w, argv[2], &err)) die(err.msg, NULL);
    gguf_writer_free(w);
    gguf_free(g);
    return 0;
}
