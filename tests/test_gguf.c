/* test_gguf.c — the GGUF reader: real files, every value type through the writer,
 * typed-getter errors, hand-made hostile files, and a corruption suite
 * (truncations, flipped bytes, huge counts) that must end in a clean load or a
 * clean one-line error — never a crash or a sanitizer report. */
#include "engine/gguf/gguf.h"
#include "engine/gguf/gguf_write.h"
#include "kernels/quant.h"
#include "tests/test.h"

#include <unistd.h>

static char g_path[512];

static const char *model_path(const char *name) {
    snprintf(g_path, sizeof g_path, "%s/models/%s", t_shared(), name);
    return g_path;
}

static void test_real_model(void) {
    gguf *g = NULL;
    llc_err err = {{0}};
    int rc = gguf_open(model_path("stories260K.gguf"), &g, &err);
    CHECKF(rc == 0, "%s", err.msg);
    if (rc) return;
    CHECK(gguf_version(g) == 3);
    CHECK(gguf_n_kv(g) == 19);
    CHECK(gguf_n_tensors(g) == 48);
    gguf_str s;
    CHECK(gguf_get_str(g, "general.architecture", &s, &err) == 0 && gguf_str_eq(s, "llama"));
    uint32_t u;
    CHECK(gguf_get_u32(g, "llama.embedding_length", &u, &err) == 0 && u == 64);
    CHECK(gguf_get_u32(g, "llama.block_count", &u, &err) == 0 && u == 5);
    float f;
    CHECK(gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f, &err) == 0 &&
          fabsf(f - 1e-5f) < 1e-10f);
    gguf_array a;
    CHECK(gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &a, &err) == 0 && a.n == 512);
    CHECK(a.n == 512 && gguf_str_eq(a.strs[1], "<s>"));
    CHECK(gguf_get_arr(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &a, &err) == 0);
    const gguf_tensor *t = gguf_find_tensor(g, "blk.4.ffn_down.weight");
    CHECK(t != NULL);
    if (t) {
        CHECK(t->type == QT_F32 && t->n_dims == 2 && t->ne[0] == 172 && t->ne[1] == 64);
        CHECK(t->n_bytes == 172 * 64 * 4);
        CHECK((const char *)t->data + t->n_bytes <= (const char *)gguf_tensor_at(g, 0)->data +
                                                        gguf_file_size(g));
    }
    CHECK(gguf_find_tensor(g, "no.such.tensor") == NULL);
    /* every tensor lies inside the file */
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *ti = gguf_tensor_at(g, i);
        CHECK(ti->n_bytes == qtype_row_bytes(ti->type, ti->ne[0]) * (uint64_t)ti->ne[1]);
    }
    gguf_free(g);
    gguf_free(NULL);
}

static void test_missing_file(void) {
    gguf *g = (gguf *)1;
    llc_err err = {{0}};
    CHECK(gguf_open("/nonexistent/x.gguf", &g, &err) == LLC_ERR_IO && g == NULL);
    CHECK(strstr(err.msg, "/nonexistent/x.gguf") != NULL);
    CHECK(gguf_open("/tmp", &g, &err) == LLC_ERR_IO);
}

/* A file using every metadata type, nested arrays and several tensor types. */
static uint8_t *build_rich(uint32_t version, size_t *size) {
    gguf_writer *w;
    gguf_writer_create(&w);
    gguf_writer_set_version(w, version);
    gguf_w_u32(w, "u32", 7);
    gguf_w_i32(w, "i32", -5);
    gguf_w_f32(w, "f32", 0.25f);
    gguf_w_bool(w, "flag", true);
    gguf_w_str(w, "name", "hello");
    int16_t i16s[3] = {-1, 2, 3};
    gguf_w_arr(w, "i16s", GGUF_TYPE_INT16, i16s, 3);
    double f64s[2] = {1.5, -2.5};
    gguf_w_arr(w, "f64s", GGUF_TYPE_FLOAT64, f64s, 2);
    const char *strs[] = {"a", "", "ccc"};
    gguf_w_arr_str(w, "strs", strs, 3);
    uint64_t big = 1ull << 40;
    gguf_w_arr(w, "u64s", GGUF_TYPE_UINT64, &big, 1);
    gguf_writer *inner;
    gguf_writer_create(&inner);
    gguf_writer_free(inner);
    static float f32data[4 * 3];
    for (int i = 0; i < 12; i++) f32data[i] = (float)i;
    static uint8_t q8data[2 * 34], q4kdata[144], q6kdata[210];
    for (size_t i = 0; i < sizeof q8data; i++) q8data[i] = (uint8_t)(i * 7);
    int64_t ne_f[2] = {4, 3}, ne_q8[2] = {32, 2}, ne_k[1] = {256};
    gguf_w_tensor(w, "t.f32", 2, ne_f, QT_F32, f32data);
    gguf_w_tensor(w, "t.q8", 2, ne_q8, QT_Q8_0, q8data);
    gguf_w_tensor(w, "t.q4k", 1, ne_k, QT_Q4_K, q4kdata);
    gguf_w_tensor(w, "t.q6k", 1, ne_k, QT_Q6_K, q6kdata);
    uint8_t *buf = NULL;
    llc_err err;
    gguf_writer_to_memory(w, &buf, size, &err);
    gguf_writer_free(w);
    return buf;
}

/* Appends a nested array value "nest" = [[1,2],[3]] (uint8) by hand: the writer has
 * no setter for it, but gguf_w_copy must round-trip it. */
static uint8_t *build_nested(size_t *size) {
    uint8_t kv[256];
    size_t n = 0;
#define PUT(v, len) (memcpy(kv + n, (v), (len)), n += (len))
    uint64_t klen = 4;
    uint32_t t_arr = GGUF_TYPE_ARRAY, t_u8 = GGUF_TYPE_UINT8;
    uint64_t two = 2, one = 1;
    uint8_t a0[2] = {1, 2}, a1[1] = {3};
    uint32_t magic = 0x46554747u, ver = 3;
    uint64_t nt = 0, nkv = 1;
    PUT(&magic, 4); PUT(&ver, 4); PUT(&nt, 8); PUT(&nkv, 8);
    PUT(&klen, 8); PUT("nest", 4); PUT(&t_arr, 4);
    PUT(&t_arr, 4); PUT(&two, 8);
    PUT(&t_u8, 4); PUT(&two, 8); PUT(a0, 2);
    PUT(&t_u8, 4); PUT(&one, 8); PUT(a1, 1);
#undef PUT
    uint8_t *buf = malloc(n);
    memcpy(buf, kv, n);
    *size = n;
    return buf;
}

static void check_rich(const gguf *g, uint32_t version) {
    llc_err err;
    CHECK(gguf_version(g) == version);
    uint32_t u;
    int64_t i;
    float f;
    bool b;
    gguf_str s;
    gguf_array a;
    CHECK(gguf_get_u32(g, "u32", &u, &err) == 0 && u == 7);
    CHECK(gguf_get_i64(g, "i32", &i, &err) == 0 && i == -5);
    CHECK(gguf_get_u32(g, "i32", &u, &err) == LLC_ERR_RANGE);
    CHECK(gguf_get_f32(g, "f32", &f, &err) == 0 && f == 0.25f);
    CHECK(gguf_get_bool(g, "flag", &b, &err) == 0 && b);
    CHECK(gguf_get_str(g, "name", &s, &err) == 0 && gguf_str_eq(s, "hello"));
    CHECK(gguf_get_str(g, "u32", &s, &err) == LLC_ERR_TYPE && strstr(err.msg, "u32"));
    CHECK(gguf_get_u32(g, "missing.key", &u, &err) == LLC_ERR_NOTFOUND &&
          strstr(err.msg, "missing.key"));
    CHECK(gguf_get_bool(g, "u32", &b, &err) == LLC_ERR_TYPE);
    CHECK(gguf_get_arr(g, "i16s", GGUF_TYPE_INT16, &a, &err) == 0 && a.n == 3 &&
          gguf_arr_int(&a, 0) == -1 && gguf_arr_int(&a, 2) == 3);
    CHECK(gguf_get_arr(g, "i16s", GGUF_TYPE_STRING, &a, &err) == LLC_ERR_TYPE);
    CHECK(gguf_get_arr(g, "f64s", GGUF_TYPE_COUNT, &a, &err) == 0 && gguf_arr_f32(&a, 1) == -2.5f);
    CHECK(gguf_get_arr(g, "strs", GGUF_TYPE_STRING, &a, &err) == 0 && a.n == 3 &&
          gguf_str_eq(a.strs[0], "a") && a.strs[1].len == 0 && gguf_str_eq(a.strs[2], "ccc"));
    CHECK(gguf_get_arr(g, "u64s", GGUF_TYPE_UINT64, &a, &err) == 0 &&
          gguf_arr_int(&a, 0) == (int64_t)1 << 40);
    CHECK(gguf_n_tensors(g) == 4);
    const gguf_tensor *t = gguf_find_tensor(g, "t.f32");
    CHECK(t && t->ne[0] == 4 && t->ne[1] == 3 && ((const float *)t->data)[5] == 5.0f);
    t = gguf_find_tensor(g, "t.q8");
    CHECK(t && t->n_bytes == 68 && ((const uint8_t *)t->data)[3] == 21);
    t = gguf_find_tensor(g, "t.q6k");
    CHECK(t && t->n_bytes == 210 && t->offset % 32 == 0);
}

static void test_writer_roundtrip(void) {
    for (uint32_t v = 2; v <= 3; v++) {
        size_t size;
        uint8_t *buf = build_rich(v, &size);
        gguf *g = NULL;
        llc_err err = {{0}};
        int rc = gguf_open_memory(buf, size, &g, &err);
        CHECKF(rc == 0, "v%u: %s", v, err.msg);
        if (!rc) check_rich(g, v);
        gguf_free(g);
        free(buf);
    }
}

static void test_nested_arrays(void) {
    size_t size;
    uint8_t *buf = build_nested(&size);
    gguf *g = NULL;
    llc_err err = {{0}};
    CHECKF(gguf_open_memory(buf, size, &g, &err) == 0, "%s", err.msg);
    if (!g) return;
    gguf_array a;
    CHECK(gguf_get_arr(g, "nest", GGUF_TYPE_ARRAY, &a, &err) == 0 && a.n == 2);
    if (a.n == 2) {
        const gguf_array *a0 = &a.arrays[0].v.arr, *a1 = &a.arrays[1].v.arr;
        CHECK(a0->n == 2 && gguf_arr_int(a0, 1) == 2);
        CHECK(a1->n == 1 && gguf_arr_int(a1, 0) == 3);
    }
    /* copy through the writer and read back */
    gguf_writer *w;
    gguf_writer_create(&w);
    CHECK(gguf_w_copy(w, g, "nest") == 0);
    CHECK(gguf_w_copy(w, g, "absent") == LLC_ERR_NOTFOUND);
    uint8_t *buf2;
    size_t size2;
    CHECK(gguf_writer_to_memory(w, &buf2, &size2, &err) == 0);
    CHECK(size2 == size && memcmp(buf, buf2, size) == 0);
    gguf_writer_free(w);
    free(buf2);
    gguf_free(g);
    free(buf);
}

/* ---- hostile files made by hand ---- */

typedef struct {
    uint8_t b[4096];
    size_t n;
} hbuf;

static void hput(hbuf *h, const void *p, size_t n) {
    memcpy(h->b + h->n, p, n);
    h->n += n;
}
static void h32(hbuf *h, uint32_t v) { hput(h, &v, 4); }
static void h64(hbuf *h, uint64_t v) { hput(h, &v, 8); }
static void hstr(hbuf *h, const char *s) {
    h64(h, strlen(s));
    hput(h, s, strlen(s));
}
static void hhead(hbuf *h, uint32_t version, uint64_t nt, uint64_t nkv) {
    h->n = 0;
    h32(h, 0x46554747u);
    h32(h, version);
    h64(h, nt);
    h64(h, nkv);
}

/* Expects the buffer to fail with `code` and a message containing `needle`. */
static void expect_fail(const hbuf *h, int code, const char *needle) {
    uint8_t *copy = malloc(h->n ? h->n : 1);
    memcpy(copy, h->b, h->n);
    gguf *g = NULL;
    llc_err err = {{0}};
    int rc = gguf_open_memory(copy, h->n, &g, &err);
    CHECKF(rc == code && g == NULL, "rc=%d (want %d) msg='%s'", rc, code, err.msg);
    CHECKF(strstr(err.msg, needle) != NULL, "message '%s' lacks '%s'", err.msg, needle);
    gguf_free(g);
    free(copy);
}

static void test_hostile_headers(void) {
    hbuf h;
    h.n = 3;
    memcpy(h.b, "GGU", 3);
    expect_fail(&h, LLC_ERR_FORMAT, "too small");
    hhead(&h, 3, 0, 0);
    h.b[0] = 'X';
    expect_fail(&h, LLC_ERR_FORMAT, "bad magic");
    hhead(&h, 1, 0, 0);
    expect_fail(&h, LLC_ERR_UNSUPPORTED, "version 1");
    hhead(&h, 4, 0, 0);
    expect_fail(&h, LLC_ERR_UNSUPPORTED, "version 4");
    hhead(&h, 0x03000000u, 0, 0);
    expect_fail(&h, LLC_ERR_UNSUPPORTED, "big-endian");
    hhead(&h, 3, 0, UINT64_MAX);
    expect_fail(&h, LLC_ERR_FORMAT, "metadata count");
    hhead(&h, 3, UINT64_MAX / 2, 0);
    expect_fail(&h, LLC_ERR_FORMAT, "tensor count");

    /* a string whose length runs past the end */
    hhead(&h, 3, 0, 1);
    h64(&h, 1ull << 62);
    h64(&h, 0);
    expect_fail(&h, LLC_ERR_FORMAT, "truncated");
    /* invalid value type */
    hhead(&h, 3, 0, 1);
    hstr(&h, "k");
    h32(&h, 99);
    h64(&h, 0);
    expect_fail(&h, LLC_ERR_FORMAT, "invalid value type");
    /* an array with a huge count */
    hhead(&h, 3, 0, 1);
    hstr(&h, "k");
    h32(&h, GGUF_TYPE_ARRAY);
    h32(&h, GGUF_TYPE_UINT32);
    h64(&h, 1ull << 61);
    expect_fail(&h, LLC_ERR_FORMAT, "runs past the end");
    hhead(&h, 3, 0, 1);
    hstr(&h, "k");
    h32(&h, GGUF_TYPE_ARRAY);
    h32(&h, GGUF_TYPE_STRING);
    h64(&h, 1ull << 40);
    expect_fail(&h, LLC_ERR_FORMAT, "cannot fit");
    /* arrays nested too deep */
    hhead(&h, 3, 0, 1);
    hstr(&h, "k");
    h32(&h, GGUF_TYPE_ARRAY);
    for (int i = 0; i < 40; i++) {
        h32(&h, GGUF_TYPE_ARRAY);
        h64(&h, 1);
    }
    expect_fail(&h, LLC_ERR_FORMAT, "nested");
    /* duplicate key */
    hhead(&h, 3, 0, 2);
    for (int i = 0; i < 2; i++) {
        hstr(&h, "dup");
        h32(&h, GGUF_TYPE_UINT8);
        hput(&h, "x", 1);
    }
    expect_fail(&h, LLC_ERR_FORMAT, "appears twice");
    /* key with a NUL byte, and an empty key */
    hhead(&h, 3, 0, 1);
    h64(&h, 3);
    hput(&h, "a\0b", 3);
    h32(&h, GGUF_TYPE_UINT8);
    hput(&h, "x", 1);
    expect_fail(&h, LLC_ERR_FORMAT, "NUL");
    hhead(&h, 3, 0, 1);
    hstr(&h, "");
    h32(&h, GGUF_TYPE_UINT8);
    hput(&h, "x", 1);
    h64(&h, 0);
    expect_fail(&h, LLC_ERR_FORMAT, "length 0");
    /* bad alignment */
    hhead(&h, 3, 0, 1);
    hstr(&h, "general.alignment");
    h32(&h, GGUF_TYPE_UINT32);
    h32(&h, 24);
    expect_fail(&h, LLC_ERR_FORMAT, "power of two");
}

/* One tensor info; the data section follows padded to 32. */
static void htensor(hbuf *h, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                    uint64_t offset) {
    hstr(h, name);
    h32(h, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) h64(h, ne[d]);
    h32(h, type);
    h64(h, offset);
}
static void hpad_data(hbuf *h, size_t data_bytes) {
    while (h->n % 32) h->b[h->n++] = 0;
    memset(h->b + h->n, 0x3c, data_bytes);
    h->n += data_bytes;
}

static void test_hostile_tensors(void) {
    hbuf h;
    uint64_t ne[5] = {32, 2, 1, 1, 1};
    hhead(&h, 3, 1, 0);
    htensor(&h, "w", 5, ne, QT_F32, 0);
    expect_fail(&h, LLC_ERR_FORMAT, "dimensions");
    hhead(&h, 3, 1, 0);
    htensor(&h, "w", 2, ne, 4 /* removed Q4_2 */, 0);
    hpad_data(&h, 512);
    expect_fail(&h, LLC_ERR_FORMAT, "unknown type id 4");
    uint64_t odd[2] = {33, 1};
    hhead(&h, 3, 1, 0);
    htensor(&h, "w", 2, odd, QT_Q8_0, 0);
    hpad_data(&h, 64);
    expect_fail(&h, LLC_ERR_FORMAT, "whole number");
    hhead(&h, 3, 1, 0);
    htensor(&h, "w", 2, ne, QT_F32, 16);
    hpad_data(&h, 512);
    expect_fail(&h, LLC_ERR_FORMAT, "not aligned");
    hhead(&h, 3, 1, 0);
    htensor(&h, "w", 2, ne, QT_F32, 0);
    hpad_data(&h, 255); /* needs 256 */
    expect_fail(&h, LLC_ERR_FORMAT, "past the end");
    uint64_t huge[4] = {1ull << 32, 1ull << 32, 1ull << 32, 1};
    hhead(&h, 3, 1, 0);
    htensor(&h, "w", 4, huge, QT_F32, 0);
    expect_fail(&h, LLC_ERR_FORMAT, "absurd shape");
    uint64_t neg[2] = {UINT64_MAX, 1};
    hhead(&h, 3, 1, 0);
    htensor(&h, "w", 2, neg, QT_F32, 0);
    expect_fail(&h, LLC_ERR_FORMAT, "absurd shape");
    uint64_t near[2] = {1ull << 62, 1};
    hhead(&h, 3, 1, 0);
    htensor(&h, "w", 2, near, QT_F32, 0);
    expect_fail(&h, LLC_ERR_FORMAT, "overflows");
    hhead(&h, 3, 2, 0);
    htensor(&h, "w", 2, ne, QT_F32, 0);
    htensor(&h, "w", 2, ne, QT_F32, 256);
    hpad_data(&h, 512);
    expect_fail(&h, LLC_ERR_FORMAT, "appears twice");
    hhead(&h, 3, 2, 0);
    htensor(&h, "a", 2, ne, QT_F32, 0);
    htensor(&h, "b", 2, ne, QT_F32, 224);
    hpad_data(&h, 512);
    expect_fail(&h, LLC_ERR_FORMAT, "overlap");
    /* and a good one of the same shape loads */
    hhead(&h, 3, 2, 0);
    htensor(&h, "a", 2, ne, QT_F32, 0);
    htensor(&h, "b", 2, ne, QT_F32, 256);
    hpad_data(&h, 512);
    gguf *g = NULL;
    llc_err err;
    CHECKF(gguf_open_memory(h.b, h.n, &g, &err) == 0, "%s", err.msg);
    CHECK(g && gguf_n_tensors(g) == 2);
    gguf_free(g);
}

/* ---- corruption suite ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng_next(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Parses a variant; on success reads everything the API exposes. Counts outcomes. */
static int g_loaded, g_rejected;
static void try_variant(const uint8_t *buf, size_t size) {
    gguf *g = NULL;
    llc_err err = {{0}};
    int rc = gguf_open_memory(buf, size, &g, &err);
    if (rc) {
        CHECKF(rc < 0 && g == NULL, "rc=%d", rc);
        CHECKF(err.msg[0] != 0 && strchr(err.msg, '\n') == NULL, "error message '%s'", err.msg);
        g_rejected++;
        return;
    }
    g_loaded++;
    volatile uint64_t sink = 0;
    for (int64_t i = 0; i < gguf_n_kv(g); i++) {
        const gguf_value *v = gguf_kv_value(g, i);
        sink += strlen(gguf_kv_key(g, i));
        if (v->type == GGUF_TYPE_STRING && v->v.str.len)
            sink += (uint8_t)v->v.str.ptr[v->v.str.len - 1];
        if (v->type == GGUF_TYPE_ARRAY) {
            const gguf_array *a = &v->v.arr;
            if (a->elem_type == GGUF_TYPE_STRING)
                for (uint64_t j = 0; j < a->n; j++)
                    if (a->strs[j].len) sink += (uint8_t)a->strs[j].ptr[a->strs[j].len - 1];
            if (a->data && a->n) sink += (uint64_t)gguf_arr_int(a, a->n - 1);
        }
    }
    for (int64_t i = 0; i < gguf_n_tensors(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        CHECK(gguf_find_tensor(g, t->name) == t);
        if (t->n_bytes) sink += ((const uint8_t *)t->data)[t->n_bytes - 1];
        sink += ((const uint8_t *)t->data)[0];
    }
    (void)sink;
    gguf_free(g);
}

/* Offsets of every 8-byte count/length field in the header and metadata, found by
 * walking the valid file, so "huge count" variants hit real fields. */
static size_t find_u64_fields(const uint8_t *buf, size_t size, size_t *out, size_t cap) {
    size_t n = 0, pos = 8;
    uint64_t nt, nkv;
    memcpy(&nt, buf + 8, 8);
    memcpy(&nkv, buf + 16, 8);
    out[n++] = 8;
    out[n++] = 16;
    pos = 24;
    for (uint64_t i = 0; i < nkv && pos + 12 <= size && n + 2 < cap; i++) {
        uint64_t klen;
        memcpy(&klen, buf + pos, 8);
        out[n++] = pos;
        pos += 8 + klen;
        uint32_t t;
        memcpy(&t, buf + pos, 4);
        pos += 4;
        if (t == GGUF_TYPE_STRING) {
            uint64_t l;
            memcpy(&l, buf + pos, 8);
            out[n++] = pos;
            pos += 8 + l;
        } else if (t == GGUF_TYPE_ARRAY) {
            uint32_t et;
            uint64_t cnt;
            memcpy(&et, buf + pos, 4);
            memcpy(&cnt, buf + pos + 4, 8);
            out[n++] = pos + 4;
            pos += 12;
            if (et == GGUF_TYPE_STRING) {
                for (uint64_t j = 0; j < cnt && n + 2 < cap; j++) {
                    uint64_t l;
                    memcpy(&l, buf + pos, 8);
                    if (j < 4) out[n++] = pos;
                    pos += 8 + l;
                }
            } else {
                static const int sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
                pos += cnt * (uint64_t)sz[et];
            }
        } else {
            static const int sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
            pos += (size_t)sz[t];
        }
    }
    /* first tensor infos: name length, dims, offset */
    for (uint64_t i = 0; i < nt && i < 3 && pos + 8 <= size && n + 8 < cap; i++) {
        uint64_t l;
        memcpy(&l, buf + pos, 8);
        out[n++] = pos;
        pos += 8 + l;
        uint32_t nd;
        memcpy(&nd, buf + pos, 4);
        pos += 4;
        for (uint32_t d = 0; d < nd && d < 4; d++) out[n++] = pos + 8 * d;
        pos += 8 * (size_t)nd + 4;
        out[n++] = pos;
        pos += 8;
    }
    return n;
}

static void corrupt_suite(const char *label, const uint8_t *orig, size_t size, size_t meta_end) {
    g_loaded = g_rejected = 0;
    int before = t_cur_failures;
    /* every truncation inside the header and metadata, exact-size buffers so any
     * over-read is an ASan report */
    for (size_t cut = 0; cut < meta_end && cut < size; cut++) {
        uint8_t *b = malloc(cut ? cut : 1);
        memcpy(b, orig, cut);
        try_variant(b, cut);
        free(b);
    }
    /* truncations inside the tensor data */
    for (int i = 0; i < 12; i++) {
        size_t cut = meta_end + (size - meta_end) * (size_t)i / 12;
        uint8_t *b = malloc(cut ? cut : 1);
        memcpy(b, orig, cut);
        try_variant(b, cut);
        free(b);
    }
    uint8_t *b = malloc(size);
    memcpy(b, orig, size);
    /* single and multiple flipped bytes, concentrated where the structure is */
    for (int i = 0; i < 3000; i++) {
        size_t nflip = 1 + rng_next() % 3, pos[3];
        uint8_t old[3];
        for (size_t k = 0; k < nflip; k++) {
            pos[k] = (rng_next() % 4) ? rng_next() % meta_end : rng_next() % size;
            old[k] = b[pos[k]];
            b[pos[k]] ^= (uint8_t)(1u << (rng_next() % 8)) | (uint8_t)(rng_next() % 2 ? 0x80 : 0);
        }
        try_variant(b, size);
        for (size_t k = nflip; k-- > 0;) b[pos[k]] = old[k];
    }
    /* huge and off-by-some values in every count and length field */
    size_t fields[512];
    size_t nf = find_u64_fields(orig, size, fields, 512);
    static const uint64_t evil[] = {UINT64_MAX, UINT64_MAX / 2, 1ull << 63, 1ull << 32,
                                    0xFFFFFFFFull, 0, 1};
    for (size_t i = 0; i < nf; i++) {
        uint64_t old;
        memcpy(&old, b + fields[i], 8);
        for (size_t k = 0; k < LLC_ARRAY_LEN(evil) + 2; k++) {
            uint64_t v = k < LLC_ARRAY_LEN(evil) ? evil[k] : old + (k == 7 ? 1 : (uint64_t)-1);
            memcpy(b + fields[i], &v, 8);
            try_variant(b, size);
        }
        memcpy(b + fields[i], &old, 8);
    }
    free(b);
    printf("     %s: %d variants loaded cleanly, %d rejected with an error; %zu fields attacked\n",
           label, g_loaded, g_rejected, nf);
    CHECK(g_rejected > 0 && g_loaded > 0);
    CHECK(t_cur_failures == before);
}

/* End of the metadata: where the first tensor's data begins (or the file end). */
static size_t meta_end_of(const uint8_t *buf, size_t size) {
    gguf *g;
    llc_err err;
    if (gguf_open_memory(buf, size, &g, &err)) return size;
    size_t end = size;
    if (gguf_n_tensors(g)) end = (size_t)((const uint8_t *)gguf_tensor_at(g, 0)->data - buf);
    gguf_free(g);
    return end;
}

static void corrupt_file(const char *dir, const char *name, size_t max_meta) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s/%s", t_shared(), dir, name);
    size_t size;
    uint8_t *orig = (uint8_t *)t_read_file(path, &size);
    CHECKF(orig != NULL, "cannot read %s", path);
    if (!orig) return;
    size_t meta = meta_end_of(orig, size);
    if (meta > max_meta) meta = max_meta; /* keep big vocab files quick */
    corrupt_suite(name, orig, size, meta);
    free(orig);
}

static void test_corrupt_stories(void) { corrupt_file("models", "stories260K.gguf", 1u << 20); }
static void test_corrupt_llama2xs(void) { corrupt_file("models", "llama2xs.gguf", 1u << 20); }
static void test_corrupt_vocab(void) { corrupt_file("vocab", "ggml-vocab-phi-3.gguf", 6000); }

static void test_corrupt_rich(void) {
    size_t size;
    uint8_t *buf = build_rich(3, &size);
    corrupt_suite("writer-built file", buf, size, meta_end_of(buf, size));
    free(buf);
    buf = build_nested(&size);
    corrupt_suite("nested arrays", buf, size, size);
    free(buf);
}

/* Truncated files on disk go through the mmap path too. */
static void test_truncated_on_disk(void) {
    size_t size;
    uint8_t *orig = (uint8_t *)t_read_file(model_path("stories260K.gguf"), &size);
    if (!orig) {
        CHECK(0);
        return;
    }
    char path[] = "/tmp/llmchat-test-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    static const size_t cuts[] = {0, 5, 24, 100, 5000, 600000, 1185375};
    for (size_t i = 0; i < LLC_ARRAY_LEN(cuts); i++) {
        FILE *f = fopen(path, "wb");
        fwrite(orig, 1, cuts[i], f);
        fclose(f);
        gguf *g = NULL;
        llc_err err = {{0}};
        int rc = gguf_open(path, &g, &err);
        CHECKF(rc < 0 && g == NULL, "cut %zu loaded", cuts[i]);
        CHECKF(strstr(err.msg, path) != NULL, "message '%s' does not name the file", err.msg);
    }
    close(fd);
    remove(path);
    free(orig);
}

int main(void) {
    RUN(test_real_model);
    RUN(test_missing_file);
    RUN(test_writer_roundtrip);
    RUN(test_nested_arrays);
    RUN(test_hostile_headers);
    RUN(test_hostile_tensors);
    RUN(test_truncated_on_disk);
    RUN(test_corrupt_rich);
    RUN(test_corrupt_stories);
    RUN(test_corrupt_llama2xs);
    RUN(test_corrupt_vocab);
    return t_summary();
}
