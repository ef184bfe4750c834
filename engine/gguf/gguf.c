/* gguf.c — GGUF v2/v3 parser and validator over mmap, and the typed getters.
 *
 * The parser walks the file once with a bounds-checked cursor. Every count is
 * bounded by the bytes left before anything is allocated, so a hostile file can
 * make us neither read outside the mapping nor allocate more than a small multiple
 * of its own size. Keys and tensor names get sorted indexes, which both detect
 * duplicates and serve lookups. */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/quant.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */
#define GGUF_MAX_DEPTH 8       /* nesting of arrays inside arrays */
#define GGUF_MAX_KEY_LEN 65535
#define GGUF_MAX_NAME_LEN 256

typedef struct gguf_kv {
    char *key;
    gguf_value value;
} gguf_kv;

struct gguf {
    const uint8_t *base;
    uint64_t size;
    bool mapped; /* base came from mmap and is unmapped by gguf_free */
    uint32_t version;
    uint32_t alignment;
    uint64_t data_offset; /* file offset of the tensor data section */
    int64_t n_kv;
    gguf_kv *kvs;
    int64_t *kv_sorted; /* indexes into kvs ordered by key */
    int64_t n_tensors;
    gguf_tensor *tensors;
    int64_t *tensor_sorted; /* indexes into tensors ordered by name */
};

/* ---- bounds-checked cursor ---- */

typedef struct cursor {
    const uint8_t *base;
    uint64_t size;
    uint64_t pos;
    llc_err *err;
} cursor;

static uint64_t cur_left(const cursor *c) { return c->size - c->pos; }

static int cur_need(cursor *c, uint64_t n, const char *what) {
    if (n > cur_left(c))
        return llc_fail(c->err, LLC_ERR_FORMAT,
                        "truncated file: %s needs %llu bytes at offset %llu, only %llu left",
                        what, (unsigned long long)n, (unsigned long long)c->pos,
                        (unsigned long long)cur_left(c));
    return 0;
}

static int cur_read(cursor *c, void *dst, uint64_t n, const char *what) {
    int rc = cur_need(c, n, what);
    if (rc) return rc;
    memcpy(dst, c->base + c->pos, n);
    c->pos += n;
    return 0;
}

static int cur_u32(cursor *c, uint32_t *v, const char *what) { return cur_read(c, v, 4, what); }
static int cur_u64(cursor *c, uint64_t *v, const char *what) { return cur_read(c, v, 8, what); }

static int cur_str(cursor *c, gguf_str *s, const char *what) {
    uint64_t len;
    int rc = cur_u64(c, &len, what);
    if (rc) return rc;
    if ((rc = cur_need(c, len, what))) return rc;
    s->ptr = (const char *)c->base + c->pos;
    s->len = len;
    c->pos += len;
    return 0;
}

/* ---- values ---- */

static const char *const g_type_names[GGUF_TYPE_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool",  "string", "array", "uint64", "int64", "float64",
};

const char *gguf_type_name(gguf_type t) {
    return (unsigned)t < GGUF_TYPE_COUNT ? g_type_names[t] : "invalid";
}

/* Size of a fixed-size element type; 0 for STRING/ARRAY. */
static uint64_t type_size(gguf_type t) {
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64: case GGUF_TYPE_FLOAT64: return 8;
    default: return 0;
    }
}

static bool type_is_int(gguf_type t) {
    return t <= GGUF_TYPE_INT32 || t == GGUF_TYPE_UINT64 || t == GGUF_TYPE_INT64;
}
static bool type_is_signed(gguf_type t) {
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 ||
           t == GGUF_TYPE_INT64;
}

/* Decodes one fixed-size scalar at p into v. */
static void decode_scalar(gguf_type t, const uint8_t *p, gguf_value *v) {
    v->type = t;
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_BOOL: v->v.u64 = p[0]; break;
    case GGUF_TYPE_INT8: v->v.i64 = (int8_t)p[0]; break;
    case GGUF_TYPE_UINT16: { uint16_t x; memcpy(&x, p, 2); v->v.u64 = x; break; }
    case GGUF_TYPE_INT16: { int16_t x; memcpy(&x, p, 2); v->v.i64 = x; break; }
    case GGUF_TYPE_UINT32: { uint32_t x; memcpy(&x, p, 4); v->v.u64 = x; break; }
    case GGUF_TYPE_INT32: { int32_t x; memcpy(&x, p, 4); v->v.i64 = x; break; }
    case GGUF_TYPE_FLOAT32: { float x; memcpy(&x, p, 4); v->v.f64 = x; break; }
    case GGUF_TYPE_UINT64: { uint64_t x; memcpy(&x, p, 8); v->v.u64 = x; break; }
    case GGUF_TYPE_INT64: { int64_t x; memcpy(&x, p, 8); v->v.i64 = x; break; }
    case GGUF_TYPE_FLOAT64: { double x; memcpy(&x, p, 8); v->v.f64 = x; break; }
    default: break;
    }
}

static void value_free(gguf_value *v) {
    if (v->type != GGUF_TYPE_ARRAY) return;
    gguf_array *a = &v->v.arr;
    free((void *)a->strs);
    if (a->arrays) {
        for (uint64_t i = 0; i < a->n; i++) value_free((gguf_value *)&a->arrays[i]);
        free((void *)a->arrays);
    }
    a->strs = NULL;
    a->arrays = NULL;
}

static int parse_value(cursor *c, gguf_type t, int depth, gguf_value *out);

static int parse_array(cursor *c, int depth, gguf_value *out) {
    gguf_array *a = &out->v.arr;
    uint32_t et;
    uint64_t n;
    int rc;
    if ((rc = cur_u32(c, &et, "array element type"))) return rc;
    if ((rc = cur_u64(c, &n, "array length"))) return rc;
    if (et >= GGUF_TYPE_COUNT)
        return llc_fail(c->err, LLC_ERR_FORMAT, "array element type %u is not a GGUF type", et);
    a->elem_type = (gguf_type)et;
    uint64_t esz = type_size(a->elem_type);
    if (esz) {
        uint64_t bytes;
        if (!llc_mul_u64(n, esz, &bytes) || bytes > cur_left(c))
            return llc_fail(c->err, LLC_ERR_FORMAT,
                            "array of %llu %s values at offset %llu runs past the end of the file",
                            (unsigned long long)n, gguf_type_name(a->elem_type),
                            (unsigned long long)c->pos);
        a->data = c->base + c->pos;
        a->n = n;
        c->pos += bytes;
        return 0;
    }
    if (a->elem_type == GGUF_TYPE_STRING) {
        if (n > cur_left(c) / 8) /* each string needs at least its 8-byte length */
            return llc_fail(c->err, LLC_ERR_FORMAT,
                            "string array of %llu entries cannot fit in the file",
                            (unsigned long long)n);
        gguf_str *strs = calloc(n ? n : 1, sizeof *strs);
        if (!strs) return llc_fail(c->err, LLC_ERR_NOMEM, "out of memory for a string array");
        a->strs = strs;
        for (uint64_t i = 0; i < n; i++) {
            if ((rc = cur_str(c, &strs[i], "string array entry"))) return rc;
            a->n = i + 1;
        }
        a->n = n;
        return 0;
    }
    /* nested arrays */
    if (depth + 1 >= GGUF_MAX_DEPTH)
        return llc_fail(c->err, LLC_ERR_FORMAT, "arrays nested more than %d deep", GGUF_MAX_DEPTH);
    if (n > cur_left(c) / 12) /* each nested array needs its type and length */
        return llc_fail(c->err, LLC_ERR_FORMAT, "array of %llu arrays cannot fit in the file",
                        (unsigned long long)n);
    gguf_value *vals = calloc(n ? n : 1, sizeof *vals);
    if (!vals) return llc_fail(c->err, LLC_ERR_NOMEM, "out of memory for a nested array");
    a->arrays = vals;
    for (uint64_t i = 0; i < n; i++) {
        a->n = i + 1; /* so a failure frees what was parsed */
        if ((rc = parse_value(c, GGUF_TYPE_ARRAY, depth + 1, &vals[i]))) return rc;
    }
    a->n = n;
    return 0;
}

static int parse_value(cursor *c, gguf_type t, int depth, gguf_value *out) {
    memset(out, 0, sizeof *out);
    out->type = t;
    if (t == GGUF_TYPE_STRING) return cur_str(c, &out->v.str, "string value");
    if (t == GGUF_TYPE_ARRAY) return parse_array(c, depth, out);
    uint64_t esz = type_size(t);
    int rc = cur_need(c, esz, "value");
    if (rc) return rc;
    decode_scalar(t, c->base + c->pos, out);
    c->pos += esz;
    return 0;
}

/* ---- sorted indexes ---- */

static const void *g_sort_base; /* qsort has no context argument in C11 */

static int cmp_kv_index(const void *a, const void *b) {
    const gguf_kv *kvs = g_sort_base;
    return strcmp(kvs[*(const int64_t *)a].key, kvs[*(const int64_t *)b].key);
}
static int cmp_tensor_index(const void *a, const void *b) {
    const gguf_tensor *ts = g_sort_base;
    return strcmp(ts[*(const int64_t *)a].name, ts[*(const int64_t *)b].name);
}
static int cmp_tensor_offset(const void *a, const void *b) {
    const gguf_tensor *ts = g_sort_base;
    uint64_t x = ts[*(const int64_t *)a].offset, y = ts[*(const int64_t *)b].offset;
    return x < y ? -1 : x > y;
}

static int64_t *sorted_index(int64_t n, const void *base, int (*cmp)(const void *, const void *)) {
    int64_t *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
    if (!idx) return NULL;
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    g_sort_base = base;
    qsort(idx, (size_t)n, sizeof *idx, cmp);
    return idx;
}

/* Copies a (ptr, len) string into a NUL-terminated heap string; rejects embedded NULs. */
static int dup_name(cursor *c, gguf_str s, uint64_t max_len, const char *what, char **out) {
    if (s.len == 0 || s.len > max_len)
        return llc_fail(c->err, LLC_ERR_FORMAT, "%s of length %llu (must be 1..%llu)", what,
                        (unsigned long long)s.len, (unsigned long long)max_len);
    if (memchr(s.ptr, 0, s.len))
        return llc_fail(c->err, LLC_ERR_FORMAT, "%s contains a NUL byte", what);
    char *d = malloc(s.len + 1);
    if (!d) return llc_fail(c->err, LLC_ERR_NOMEM, "out of memory");
    memcpy(d, s.ptr, s.len);
    d[s.len] = 0;
    *out = d;
    return 0;
}

/* ---- the file ---- */

static int parse_header(gguf *g, cursor *c, uint64_t *n_tensors, uint64_t *n_kv) {
    uint32_t magic;
    int rc;
    if (c->size < 4 + 4 + 8 + 8)
        return llc_fail(c->err, LLC_ERR_FORMAT, "not a GGUF file: %llu bytes is too small",
                        (unsigned long long)c->size);
    if ((rc = cur_u32(c, &magic, "magic"))) return rc;
    if (magic != GGUF_MAGIC) return llc_fail(c->err, LLC_ERR_FORMAT, "not a GGUF file (bad magic)");
    if ((rc = cur_u32(c, &g->version, "version"))) return rc;
    if (g->version == 1)
        return llc_fail(c->err, LLC_ERR_UNSUPPORTED, "GGUF version 1 is too old; convert the model again");
    if (g->version >= 0x10000 && (g->version & 0xFFFF) == 0)
        return llc_fail(c->err, LLC_ERR_UNSUPPORTED, "big-endian GGUF files are not supported");
    if (g->version != 2 && g->version != 3)
        return llc_fail(c->err, LLC_ERR_UNSUPPORTED, "GGUF version %u is not supported (2 and 3 are)",
                        g->version);
    if ((rc = cur_u64(c, n_tensors, "tensor count"))) return rc;
    if ((rc = cur_u64(c, n_kv, "metadata count"))) return rc;
    /* a key/value pair takes at least 8+1+4+1 bytes, a tensor info 8+1+4+4+8 */
    if (*n_kv > cur_left(c) / 14)
        return llc_fail(c->err, LLC_ERR_FORMAT, "metadata count %llu cannot fit in the file",
                        (unsigned long long)*n_kv);
    if (*n_tensors > cur_left(c) / 25)
        return llc_fail(c->err, LLC_ERR_FORMAT, "tensor count %llu cannot fit in the file",
                        (unsigned long long)*n_tensors);
    return 0;
}

static int parse_kvs(gguf *g, cursor *c, uint64_t n_kv) {
    int rc;
    g->kvs = calloc(n_kv ? n_kv : 1, sizeof *g->kvs);
    if (!g->kvs) return llc_fail(c->err, LLC_ERR_NOMEM, "out of memory for metadata");
    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_kv *kv = &g->kvs[i];
        gguf_str key;
        uint32_t t;
        if ((rc = cur_str(c, &key, "metadata key"))) return rc;
        if ((rc = dup_name(c, key, GGUF_MAX_KEY_LEN, "metadata key", &kv->key))) return rc;
        g->n_kv = (int64_t)i + 1;
        if ((rc = cur_u32(c, &t, "metadata value type"))) return rc;
        if (t >= GGUF_TYPE_COUNT)
            return llc_fail(c->err, LLC_ERR_FORMAT, "metadata '%s' has invalid value type %u",
                            kv->key, t);
        if ((rc = parse_value(c, (gguf_type)t, 0, &kv->value))) {
            llc_err_prefix(c->err, "metadata '%s'", kv->key);
            return rc;
        }
    }
    g->kv_sorted = sorted_index(g->n_kv, g->kvs, cmp_kv_index);
    if (!g->kv_sorted) return llc_fail(c->err, LLC_ERR_NOMEM, "out of memory");
    for (int64_t i = 1; i < g->n_kv; i++)
        if (!strcmp(g->kvs[g->kv_sorted[i]].key, g->kvs[g->kv_sorted[i - 1]].key))
            return llc_fail(c->err, LLC_ERR_FORMAT, "metadata key '%s' appears twice",
                            g->kvs[g->kv_sorted[i]].key);
    return 0;
}

static int read_alignment(gguf *g, llc_err *err) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_value *v = gguf_find(g, "general.alignment");
    if (!v) return 0;
    if (!type_is_int(v->type) || (type_is_signed(v->type) && v->v.i64 <= 0) ||
        v->v.u64 == 0 || v->v.u64 > (1u << 30) || (v->v.u64 & (v->v.u64 - 1)))
        return llc_fail(err, LLC_ERR_FORMAT,
                        "general.alignment must be a power of two up to 2^30");
    g->alignment = (uint32_t)v->v.u64;
    return 0;
}

static int parse_tensor_info(cursor *c, gguf_tensor *t) {
    gguf_str name;
    int rc;
    if ((rc = cur_str(c, &name, "tensor name"))) return rc;
    if ((rc = dup_name(c, name, GGUF_MAX_NAME_LEN, "tensor name", (char **)&t->name))) return rc;
    if ((rc = cur_u32(c, &t->n_dims, "tensor dimension count"))) return rc;
    if (t->n_dims > GGUF_MAX_DIMS)
        return llc_fail(c->err, LLC_ERR_FORMAT, "tensor '%s' has %u dimensions (at most %d)",
                        t->name, t->n_dims, GGUF_MAX_DIMS);
    uint64_t n_elems = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        if ((rc = cur_u64(c, &ne, "tensor dimension"))) return rc;
        if (ne > (uint64_t)INT64_MAX || !llc_mul_u64(n_elems, ne, &n_elems) ||
            n_elems > (uint64_t)INT64_MAX)
            return llc_fail(c->err, LLC_ERR_FORMAT, "tensor '%s' has an absurd shape", t->name);
        t->ne[d] = (int64_t)ne;
    }
    if ((rc = cur_u32(c, &t->type, "tensor type"))) return rc;
    if ((rc = cur_u64(c, &t->offset, "tensor offset"))) return rc;
    const qtype_info *qi = qtype_get(t->type);
    if (!qi)
        return llc_fail(c->err, LLC_ERR_FORMAT, "tensor '%s' has unknown type id %u", t->name,
                        t->type);
    if (t->ne[0] % qi->block_elems)
        return llc_fail(c->err, LLC_ERR_FORMAT,
                        "tensor '%s': row of %lld elements is not a whole number of %s blocks",
                        t->name, (long long)t->ne[0], qi->name);
    uint64_t rows = t->ne[0] ? n_elems / (uint64_t)t->ne[0] : 0;
    uint64_t row_bytes;
    if (!llc_mul_u64((uint64_t)t->ne[0] / qi->block_elems, qi->block_bytes, &row_bytes) ||
        !llc_mul_u64(rows, row_bytes, &t->n_bytes))
        return llc_fail(c->err, LLC_ERR_FORMAT, "tensor '%s' size overflows", t->name);
    return 0;
}

static int parse_tensors(gguf *g, cursor *c, uint64_t n_tensors) {
    int rc;
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    if (!g->tensors) return llc_fail(c->err, LLC_ERR_NOMEM, "out of memory for tensor infos");
    for (uint64_t i = 0; i < n_tensors; i++) {
        g->n_tensors = (int64_t)i + 1;
        if ((rc = parse_tensor_info(c, &g->tensors[i]))) return rc;
    }
    /* the data section starts at the next multiple of the alignment */
    uint64_t pad = (g->alignment - c->pos % g->alignment) % g->alignment;
    g->data_offset = c->pos + pad;
    uint64_t data_size = g->data_offset <= c->size ? c->size - g->data_offset : 0;

    for (int64_t i = 0; i < g->n_tensors; i++) {
        gguf_tensor *t = &g->tensors[i];
        uint64_t end;
        if (t->offset % g->alignment)
            return llc_fail(c->err, LLC_ERR_FORMAT, "tensor '%s' offset %llu is not aligned to %u",
                            t->name, (unsigned long long)t->offset, g->alignment);
        if (!llc_add_u64(t->offset, t->n_bytes, &end) || end > data_size)
            return llc_fail(c->err, LLC_ERR_FORMAT,
                            "tensor '%s' (%llu bytes at data offset %llu) runs past the end of "
                            "the file (truncated?)",
                            t->name, (unsigned long long)t->n_bytes,
                            (unsigned long long)t->offset);
        t->data = c->base + g->data_offset + t->offset;
    }
    g->tensor_sorted = sorted_index(g->n_tensors, g->tensors, cmp_tensor_index);
    int64_t *by_offset = sorted_index(g->n_tensors, g->tensors, cmp_tensor_offset);
    if (!g->tensor_sorted || !by_offset) {
        free(by_offset);
        return llc_fail(c->err, LLC_ERR_NOMEM, "out of memory");
    }
    rc = 0;
    for (int64_t i = 1; i < g->n_tensors && !rc; i++) {
        const gguf_tensor *a = &g->tensors[g->tensor_sorted[i - 1]];
        const gguf_tensor *b = &g->tensors[g->tensor_sorted[i]];
        if (!strcmp(a->name, b->name))
            rc = llc_fail(c->err, LLC_ERR_FORMAT, "tensor '%s' appears twice", a->name);
        const gguf_tensor *p = &g->tensors[by_offset[i - 1]];
        const gguf_tensor *q = &g->tensors[by_offset[i]];
        if (!rc && p->offset + p->n_bytes > q->offset)
            rc = llc_fail(c->err, LLC_ERR_FORMAT, "tensors '%s' and '%s' overlap", p->name, q->name);
    }
    free(by_offset);
    return rc;
}

static int parse(gguf *g, llc_err *err) {
    cursor c = {.base = g->base, .size = g->size, .pos = 0, .err = err};
    uint64_t n_tensors, n_kv;
    int rc;
    if ((rc = parse_header(g, &c, &n_tensors, &n_kv))) return rc;
    if ((rc = parse_kvs(g, &c, n_kv))) return rc;
    if ((rc = read_alignment(g, err))) return rc;
    return parse_tensors(g, &c, n_tensors);
}

int gguf_open_memory(const void *buf, size_t size, gguf **out, llc_err *err) {
    *out = NULL;
    gguf *g = calloc(1, sizeof *g);
    if (!g) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    g->base = buf;
    g->size = size;
    int rc = parse(g, err);
    if (rc) {
        gguf_free(g);
        return rc;
    }
    *out = g;
    return 0;
}

int gguf_open(const char *path, gguf **out, llc_err *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return llc_fail(err, LLC_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return llc_fail(err, LLC_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return llc_fail(err, LLC_ERR_FORMAT, "%s: file is empty", path);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return llc_fail(err, LLC_ERR_IO, "%s: mmap: %s", path, strerror(errno));
    int rc = gguf_open_memory(map, (size_t)st.st_size, out, err);
    if (rc) {
        munmap(map, (size_t)st.st_size);
        llc_err_prefix(err, "%s", path);
        return rc;
    }
    (*out)->mapped = true;
    for (int64_t i = 0; i < (*out)->n_tensors; i++) (*out)->tensors[i].in_file_mapping = true;
    return 0;
}

void gguf_free(gguf *g) {
    if (!g) return;
    for (int64_t i = 0; i < g->n_kv; i++) {
        free(g->kvs[i].key);
        value_free(&g->kvs[i].value);
    }
    free(g->kvs);
    free(g->kv_sorted);
    for (int64_t i = 0; i < g->n_tensors; i++) free((void *)g->tensors[i].name);
    free(g->tensors);
    free(g->tensor_sorted);
    if (g->mapped) munmap((void *)g->base, g->size);
    free(g);
}

/* ---- accessors ---- */

uint32_t gguf_version(const gguf *g) { return g->version; }
uint64_t gguf_file_size(const gguf *g) { return g->size; }
uint32_t gguf_alignment(const gguf *g) { return g->alignment; }
int64_t gguf_n_kv(const gguf *g) { return g->n_kv; }
const char *gguf_kv_key(const gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? g->kvs[i].key : NULL;
}
const gguf_value *gguf_kv_value(const gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? &g->kvs[i].value : NULL;
}

const gguf_value *gguf_find(const gguf *g, const char *key) {
    int64_t lo = 0, hi = g->n_kv;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(g->kvs[g->kv_sorted[mid]].key, key);
        if (c == 0) return &g->kvs[g->kv_sorted[mid]].value;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static const gguf_value *find_or_fail(const gguf *g, const char *key, llc_err *err, int *rc) {
    const gguf_value *v = gguf_find(g, key);
    *rc = v ? 0 : llc_fail(err, LLC_ERR_NOTFOUND, "metadata key '%s' is missing", key);
    return v;
}

static int wrong_type(llc_err *err, const char *key, const gguf_value *v, const char *want) {
    return llc_fail(err, LLC_ERR_TYPE, "metadata '%s' is %s, expected %s", key,
                    gguf_type_name(v->type), want);
}

int gguf_get_i64(const gguf *g, const char *key, int64_t *out, llc_err *err) {
    int rc;
    const gguf_value *v = find_or_fail(g, key, err, &rc);
    if (!v) return rc;
    if (!type_is_int(v->type)) return wrong_type(err, key, v, "an integer");
    if (!type_is_signed(v->type) && v->v.u64 > (uint64_t)INT64_MAX)
        return llc_fail(err, LLC_ERR_RANGE, "metadata '%s' is out of range", key);
    *out = v->v.i64;
    return 0;
}

int gguf_get_u32(const gguf *g, const char *key, uint32_t *out, llc_err *err) {
    int64_t x;
    int rc = gguf_get_i64(g, key, &x, err);
    if (rc) return rc;
    if (x < 0 || x > (int64_t)UINT32_MAX)
        return llc_fail(err, LLC_ERR_RANGE, "metadata '%s' = %lld is out of range", key,
                        (long long)x);
    *out = (uint32_t)x;
    return 0;
}

int gguf_get_f32(const gguf *g, const char *key, float *out, llc_err *err) {
    int rc;
    const gguf_value *v = find_or_fail(g, key, err, &rc);
    if (!v) return rc;
    if (v->type == GGUF_TYPE_FLOAT32 || v->type == GGUF_TYPE_FLOAT64) *out = (float)v->v.f64;
    else if (type_is_signed(v->type)) *out = (float)v->v.i64;
    else if (type_is_int(v->type)) *out = (float)v->v.u64;
    else return wrong_type(err, key, v, "a number");
    return 0;
}

int gguf_get_bool(const gguf *g, const char *key, bool *out, llc_err *err) {
    int rc;
    const gguf_value *v = find_or_fail(g, key, err, &rc);
    if (!v) return rc;
    if (v->type != GGUF_TYPE_BOOL) return wrong_type(err, key, v, "bool");
    *out = v->v.u64 != 0;
    return 0;
}

int gguf_get_str(const gguf *g, const char *key, gguf_str *out, llc_err *err) {
    int rc;
    const gguf_value *v = find_or_fail(g, key, err, &rc);
    if (!v) return rc;
    if (v->type != GGUF_TYPE_STRING) return wrong_type(err, key, v, "string");
    *out = v->v.str;
    return 0;
}

int gguf_get_arr(const gguf *g, const char *key, gguf_type want, gguf_array *out, llc_err *err) {
    int rc;
    const gguf_value *v = find_or_fail(g, key, err, &rc);
    if (!v) return rc;
    if (v->type != GGUF_TYPE_ARRAY) return wrong_type(err, key, v, "array");
    if (want != GGUF_TYPE_COUNT && v->v.arr.elem_type != want)
        return llc_fail(err, LLC_ERR_TYPE, "metadata '%s' is an array of %s, expected %s", key,
                        gguf_type_name(v->v.arr.elem_type), gguf_type_name(want));
    *out = v->v.arr;
    return 0;
}

int64_t gguf_arr_int(const gguf_array *arr, uint64_t i) {
    LLC_ASSERT(i < arr->n && type_size(arr->elem_type));
    gguf_value v;
    decode_scalar(arr->elem_type, arr->data + i * type_size(arr->elem_type), &v);
    if (arr->elem_type == GGUF_TYPE_FLOAT32 || arr->elem_type == GGUF_TYPE_FLOAT64)
        return (int64_t)v.v.f64;
    return v.v.i64;
}

float gguf_arr_f32(const gguf_array *arr, uint64_t i) {
    LLC_ASSERT(i < arr->n && type_size(arr->elem_type));
    gguf_value v;
    decode_scalar(arr->elem_type, arr->data + i * type_size(arr->elem_type), &v);
    if (arr->elem_type == GGUF_TYPE_FLOAT32 || arr->elem_type == GGUF_TYPE_FLOAT64)
        return (float)v.v.f64;
    return type_is_signed(arr->elem_type) ? (float)v.v.i64 : (float)v.v.u64;
}

bool gguf_str_eq(gguf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && memcmp(s.ptr, c, n) == 0;
}

int64_t gguf_n_tensors(const gguf *g) { return g->n_tensors; }
const gguf_tensor *gguf_tensor_at(const gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf *g, const char *name) {
    int64_t lo = 0, hi = g->n_tensors;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(g->tensors[g->tensor_sorted[mid]].name, name);
        if (c == 0) return &g->tensors[g->tensor_sorted[mid]];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

int64_t gguf_tensor_n_elems(const gguf_tensor *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}
