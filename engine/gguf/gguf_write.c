/* gguf_write.c — serialises metadata and tensors into the GGUF layout.
 * Metadata is encoded into a growing byte buffer (an sbuf) as it is added; tensor data is
 * referenced and streamed out at write time. */
#include "gguf_write.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "kernels/sbuf.h"

static void bb_u32(sbuf *b, uint32_t v) { sb_add(b, &v, 4); }
static void bb_u64(sbuf *b, uint64_t v) { sb_add(b, &v, 8); }
static void bb_str(sbuf *b, const char *s, uint64_t len) {
    bb_u64(b, len);
    sb_add(b, s, len);
}

typedef struct wtensor {
    char *name;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS];
    uint32_t type;
    uint64_t n_bytes;
    uint64_t offset;
    const void *data;
} wtensor;

#define MAX_ALIGN 4096

struct gguf_writer {
    uint32_t version;
    uint32_t align;     /* data alignment (32 unless set) */
    uint64_t n_kv;
    sbuf kv; /* encoded key/value pairs */
    wtensor *tensors;
    uint64_t n_tensors, cap_tensors;
};

int gguf_writer_create(gguf_writer **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return LLC_ERR_NOMEM;
    (*out)->version = 3;
    (*out)->align = 32;
    return 0;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    free(w->kv.p);
    for (uint64_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->tensors);
    free(w);
}

void gguf_writer_set_version(gguf_writer *w, uint32_t version) { w->version = version; }

int gguf_writer_set_alignment(gguf_writer *w, uint32_t align) {
    if (align == 0 || align > MAX_ALIGN || (align & (align - 1))) return LLC_ERR_RANGE;
    w->align = align;
    return gguf_w_u32(w, "general.alignment", align);
}

static void put_key(gguf_writer *w, const char *key, gguf_type t) {
    bb_str(&w->kv, key, strlen(key));
    bb_u32(&w->kv, (uint32_t)t);
    w->n_kv++;
}

static int done(gguf_writer *w) { return w->kv.oom ? LLC_ERR_NOMEM : 0; }

int gguf_w_u32(gguf_writer *w, const char *key, uint32_t v) {
    put_key(w, key, GGUF_TYPE_UINT32);
    bb_u32(&w->kv, v);
    return done(w);
}
int gguf_w_i32(gguf_writer *w, const char *key, int32_t v) {
    put_key(w, key, GGUF_TYPE_INT32);
    sb_add(&w->kv, &v, 4);
    return done(w);
}
int gguf_w_f32(gguf_writer *w, const char *key, float v) {
    put_key(w, key, GGUF_TYPE_FLOAT32);
    sb_add(&w->kv, &v, 4);
    return done(w);
}
int gguf_w_bool(gguf_writer *w, const char *key, bool v) {
    uint8_t b = v;
    put_key(w, key, GGUF_TYPE_BOOL);
    sb_add(&w->kv, &b, 1);
    return done(w);
}
int gguf_w_str(gguf_writer *w, const char *key, const char *v) {
    put_key(w, key, GGUF_TYPE_STRING);
    bb_str(&w->kv, v, strlen(v));
    return done(w);
}

static uint64_t elem_size(gguf_type t) {
    static const uint8_t sz[GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return (unsigned)t < GGUF_TYPE_COUNT ? sz[t] : 0;
}

int gguf_w_arr(gguf_writer *w, const char *key, gguf_type elem_type, const void *data, uint64_t n) {
    if (!elem_size(elem_type)) return LLC_ERR_TYPE;
    put_key(w, key, GGUF_TYPE_ARRAY);
    bb_u32(&w->kv, (uint32_t)elem_type);
    bb_u64(&w->kv, n);
    sb_add(&w->kv, data, n * elem_size(elem_type));
    return done(w);
}

int gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t n) {
    put_key(w, key, GGUF_TYPE_ARRAY);
    bb_u32(&w->kv, GGUF_TYPE_STRING);
    bb_u64(&w->kv, n);
    for (uint64_t i = 0; i < n; i++) bb_str(&w->kv, strs[i], strlen(strs[i]));
    return done(w);
}

/* Encodes a parsed value's payload (everything after its type tag). */
static void put_value(sbuf *b, const gguf_value *v) {
    switch (v->type) {
    case GGUF_TYPE_STRING: bb_str(b, v->v.str.ptr, v->v.str.len); break;
    case GGUF_TYPE_ARRAY: {
        const gguf_array *a = &v->v.arr;
        bb_u32(b, (uint32_t)a->elem_type);
        bb_u64(b, a->n);
        if (a->elem_type == GGUF_TYPE_STRING)
            for (uint64_t i = 0; i < a->n; i++) bb_str(b, a->strs[i].ptr, a->strs[i].len);
        else if (a->elem_type == GGUF_TYPE_ARRAY)
            for (uint64_t i = 0; i < a->n; i++) put_value(b, &a->arrays[i]);
        else
            sb_add(b, a->data, a->n * elem_size(a->elem_type));
        break;
    }
    case GGUF_TYPE_FLOAT32: { float f = (float)v->v.f64; sb_add(b, &f, 4); break; }
    case GGUF_TYPE_FLOAT64: sb_add(b, &v->v.f64, 8); break;
    default: sb_add(b, &v->v.u64, elem_size(v->type)); break; /* little-endian low bytes */
    }
}

int gguf_w_copy(gguf_writer *w, const gguf *src, const char *key) {
    const gguf_value *v = gguf_find(src, key);
    if (!v) return LLC_ERR_NOTFOUND;
    put_key(w, key, v->type);
    put_value(&w->kv, v);
    return done(w);
}

int gguf_w_tensor(gguf_writer *w, const char *name, uint32_t n_dims, const int64_t *ne,
                  uint32_t type, const void *data) {
    if (n_dims > GGUF_MAX_DIMS || !qtype_get(type)) return LLC_ERR_RANGE;
    if (w->n_tensors == w->cap_tensors) {
        uint64_t cap = w->cap_tensors ? w->cap_tensors * 2 : 16;
        wtensor *t = realloc(w->tensors, cap * sizeof *t);
        if (!t) return LLC_ERR_NOMEM;
        w->tensors = t;
        w->cap_tensors = cap;
    }
    wtensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name) return LLC_ERR_NOMEM;
    t->n_dims = n_dims;
    uint64_t rows = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = d < (int)n_dims ? ne[d] : 1;
    for (int d = 1; d < GGUF_MAX_DIMS; d++) rows *= (uint64_t)t->ne[d];
    t->type = type;
    t->n_bytes = qtype_row_bytes(type, t->ne[0]) * rows;
    t->data = data;
    w->n_tensors++;
    return 0;
}

static uint64_t align_up(uint64_t x, uint32_t a) { return (x + a - 1) / a * a; }

/* Header, metadata and tensor infos, padded to the data section. */
static int encode_head(gguf_writer *w, sbuf *h) {
    bb_u32(h, 0x46554747u);
    bb_u32(h, w->version);
    bb_u64(h, w->n_tensors);
    bb_u64(h, w->n_kv);
    sb_add(h, w->kv.p, w->kv.len);
    uint64_t off = 0;
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        wtensor *t = &w->tensors[i];
        bb_str(h, t->name, strlen(t->name));
        bb_u32(h, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) bb_u64(h, (uint64_t)t->ne[d]);
        bb_u32(h, t->type);
        t->offset = off;
        bb_u64(h, off);
        off = align_up(off + t->n_bytes, w->align);
    }
    static const uint8_t zeros[MAX_ALIGN];
    if (w->n_tensors) sb_add(h, zeros, align_up(h->len, w->align) - h->len);
    return h->oom ? LLC_ERR_NOMEM : 0;
}

int gguf_writer_to_memory(gguf_writer *w, uint8_t **buf, size_t *size, llc_err *err) {
    sbuf h = {0};
    int rc = encode_head(w, &h);
    static const uint8_t zeros[MAX_ALIGN];
    for (uint64_t i = 0; !rc && i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        sb_add(&h, t->data, t->n_bytes);
        if (i + 1 < w->n_tensors) sb_add(&h, zeros, align_up(t->n_bytes, w->align) - t->n_bytes);
        if (h.oom) rc = LLC_ERR_NOMEM;
    }
    if (rc) {
        free(h.p);
        return llc_fail(err, rc, "out of memory building a GGUF file");
    }
    *buf = (uint8_t *)h.p;
    *size = h.len;
    return 0;
}

int gguf_writer_write(gguf_writer *w, const char *path, llc_err *err) {
    sbuf h = {0};
    int rc = encode_head(w, &h);
    if (rc) {
        free(h.p);
        return llc_fail(err, rc, "out of memory building a GGUF file");
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(h.p);
        return llc_fail(err, LLC_ERR_IO, "%s: %s", path, strerror(errno));
    }
    static const uint8_t zeros[MAX_ALIGN];
    bool ok = fwrite(h.p, 1, h.len, f) == h.len;
    free(h.p);
    for (uint64_t i = 0; ok && i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        ok = fwrite(t->data, 1, t->n_bytes, f) == t->n_bytes;
        uint64_t pad = align_up(t->n_bytes, w->align) - t->n_bytes;
        if (ok && pad && i + 1 < w->n_tensors) ok = fwrite(zeros, 1, pad, f) == pad;
    }
    if (fclose(f) != 0) ok = false;
    if (!ok) {
        int e = errno;
        remove(path);
        return llc_fail(err, LLC_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    return 0;
}
