/* gguf_write.h — building GGUF files: metadata, tensor infos and data, written in
 * one go. Used by the random-weight model generator and by tests that need files
 * of a particular (or deliberately odd) shape. */
#ifndef LLC_GGUF_WRITE_H
#define LLC_GGUF_WRITE_H

#include "gguf.h"

typedef struct gguf_writer gguf_writer;

int gguf_writer_create(gguf_writer **out);
void gguf_writer_free(gguf_writer *w);
/* 2 or 3 (the default). */
void gguf_writer_set_version(gguf_writer *w, uint32_t version);

/* Metadata setters: each appends a key (keys are not checked for duplicates, so
 * tests can write invalid files on purpose). Strings are copied. */
int gguf_w_u32(gguf_writer *w, const char *key, uint32_t v);
int gguf_w_i32(gguf_writer *w, const char *key, int32_t v);
int gguf_w_f32(gguf_writer *w, const char *key, float v);
int gguf_w_bool(gguf_writer *w, const char *key, bool v);
int gguf_w_str(gguf_writer *w, const char *key, const char *v);
/* An array of fixed-size elements (raw little-endian bytes, n elements). */
int gguf_w_arr(gguf_writer *w, const char *key, gguf_type elem_type, const void *data, uint64_t n);
int gguf_w_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t n);
/* Copies key's value (of any type, nested arrays included) from another file. */
int gguf_w_copy(gguf_writer *w, const gguf *src, const char *key);

/* Adds a tensor. `data` (qtype_row_bytes(type, ne[0]) * rows bytes) is referenced,
 * not copied: it must stay valid until gguf_writer_write(). */
int gguf_w_tensor(gguf_writer *w, const char *name, uint32_t n_dims, const int64_t *ne,
                  uint32_t type, const void *data);

/* Data alignment: a power of two up to 4096 (default 32). Also writes the
 * general.alignment key (do not copy that key from another file as well). */
int gguf_writer_set_alignment(gguf_writer *w, uint32_t align);

/* Writes the file (alignment 32 unless set). Returns 0 or a negative code with err set. */
int gguf_writer_write(gguf_writer *w, const char *path, llc_err *err);
/* The same into a malloc'd buffer. */
int gguf_writer_to_memory(gguf_writer *w, uint8_t **buf, size_t *size, llc_err *err);

#endif
