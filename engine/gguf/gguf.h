/* gguf.h — read-only access to GGUF v2/v3 files over mmap.
 *
 * The whole file is validated at open: every count, length, offset, dimension and
 * type is checked against the file size and sane limits, so the getters below never
 * read outside the mapping. Strings are (pointer, length) views into the mapping —
 * not NUL-terminated — except keys and tensor names, which are copied and are.
 * Everything returned stays valid until gguf_free(). */
#ifndef LLC_GGUF_H
#define LLC_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/common.h"

typedef enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_type;

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

typedef struct gguf gguf;

typedef struct gguf_str {
    const char *ptr; /* into the mapping; not NUL-terminated */
    uint64_t len;
} gguf_str;

/* A view of an array value. Elements of fixed-size types are raw little-endian
 * bytes at `data` (possibly unaligned: read them with the gguf_arr_* helpers). */
typedef struct gguf_array {
    gguf_type elem_type;
    uint64_t n;
    const uint8_t *data;              /* fixed-size element types */
    const gguf_str *strs;             /* elem_type == STRING */
    const struct gguf_value *arrays;  /* elem_type == ARRAY: n nested values */
} gguf_array;

typedef struct gguf_value {
    gguf_type type;
    union {
        uint64_t u64; /* UINT8..UINT64 and BOOL, zero-extended */
        int64_t i64;  /* INT8..INT64, sign-extended */
        double f64;   /* FLOAT32 and FLOAT64 */
        gguf_str str;
        gguf_array arr;
    } v;
} gguf_value;

typedef struct gguf_tensor {
    const char *name;        /* NUL-terminated copy */
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* elements per dimension, ne[0] fastest; unused = 1 */
    uint32_t type;           /* qtype id (quant.h) */
    uint64_t offset;         /* from the start of the data section */
    uint64_t n_bytes;
    const void *data;        /* into the mapping */
    bool in_file_mapping;    /* data lies in gguf_open's read-only file mapping: its pages
                                may be dropped (MADV_DONTNEED) and are read back from the file */
} gguf_tensor;

/* Opens and validates `path`. On failure returns a negative code and a one-line
 * message in err; *out is NULL. */
int gguf_open(const char *path, gguf **out, llc_err *err);
/* The same over a caller-owned buffer (kept referenced, not copied). */
int gguf_open_memory(const void *buf, size_t size, gguf **out, llc_err *err);
void gguf_free(gguf *g);

uint32_t gguf_version(const gguf *g);
uint64_t gguf_file_size(const gguf *g);
uint32_t gguf_alignment(const gguf *g);

/* Metadata key/value pairs, in file order. */
int64_t gguf_n_kv(const gguf *g);
const char *gguf_kv_key(const gguf *g, int64_t i);
const gguf_value *gguf_kv_value(const gguf *g, int64_t i);
/* The value under `key`, or NULL. */
const gguf_value *gguf_find(const gguf *g, const char *key);
const char *gguf_type_name(gguf_type t);

/* Typed getters. Missing key: LLC_ERR_NOTFOUND; wrong type or value that does not
 * fit: LLC_ERR_TYPE / LLC_ERR_RANGE; err names the key. Integer getters accept any
 * integer type whose value fits; float getters accept FLOAT32/FLOAT64 and integers. */
int gguf_get_u32(const gguf *g, const char *key, uint32_t *out, llc_err *err);
int gguf_get_i64(const gguf *g, const char *key, int64_t *out, llc_err *err);
int gguf_get_f32(const gguf *g, const char *key, float *out, llc_err *err);
int gguf_get_bool(const gguf *g, const char *key, bool *out, llc_err *err);
int gguf_get_str(const gguf *g, const char *key, gguf_str *out, llc_err *err);
/* `want` = the required element type, or GGUF_TYPE_COUNT to accept any. */
int gguf_get_arr(const gguf *g, const char *key, gguf_type want, gguf_array *out,
                 llc_err *err);

/* Element readers for fixed-size arrays (index must be < arr->n). Integer readers
 * accept any integer element type; f32 accepts FLOAT32/FLOAT64. */
int64_t gguf_arr_int(const gguf_array *arr, uint64_t i);
float gguf_arr_f32(const gguf_array *arr, uint64_t i);

/* True if s equals the NUL-terminated c string. */
bool gguf_str_eq(gguf_str s, const char *c);

/* Tensors, in file order. */
int64_t gguf_n_tensors(const gguf *g);
const gguf_tensor *gguf_tensor_at(const gguf *g, int64_t i);
const gguf_tensor *gguf_find_tensor(const gguf *g, const char *name);
int64_t gguf_tensor_n_elems(const gguf_tensor *t);

#endif
