/* str_index.c — a string-to-integer map with an XXH3 hash index, for the
 * grammar's rule names (grammar.c) and the JSON-schema converter's rule names
 * and bodies (json_schema.c): lookups in constant time, so grammars of many
 * rules compile in time linear in their size. Keys are copied in. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "engine/grammar/grammar_internal.h"

static uint32_t key_hash(const char *key, size_t len) { return (uint32_t)XXH3_64bits(key, len); }

static bool same_key(const str_index *x, int e, const char *key, size_t len, uint32_t h) {
    return x->hash[e] == h && x->off[e + 1] - x->off[e] == len && (len == 0 || !memcmp(x->keys.p + x->off[e], key, len));
}

int str_index_find(const str_index *x, const char *key, size_t len) {
    if (!x->slots) return -1;
    uint32_t h = key_hash(key, len);
    for (uint32_t i = h & x->mask; x->slots[i] >= 0; i = (i + 1) & x->mask)
        if (same_key(x, x->slots[i], key, len, h)) return x->value[x->slots[i]];
    return -1;
}

static void insert_slot(str_index *x, int e) {
    uint32_t i = x->hash[e] & x->mask;
    while (x->slots[i] >= 0) i = (i + 1) & x->mask;
    x->slots[i] = e;
}

/* Room for one more entry: arrays grown, and the hash table at most half full. */
static int reserve_one(str_index *x) {
    if (x->n == x->cap) {
        int cap = x->cap ? x->cap * 2 : 64;
        uint32_t *hash = realloc(x->hash, (size_t)cap * sizeof *hash);
        if (hash) x->hash = hash;
        int *value = realloc(x->value, (size_t)cap * sizeof *value);
        if (value) x->value = value;
        size_t *off = realloc(x->off, (size_t)(cap + 1) * sizeof *off);
        if (off && !x->cap) off[0] = 0;
        if (off) x->off = off;
        if (!hash || !value || !off) return LLC_ERR_NOMEM;
        x->cap = cap;
    }
    if (x->slots && (uint64_t)(x->n + 1) * 2 <= (uint64_t)x->mask + 1) return 0;
    uint32_t n_slots = x->slots ? (x->mask + 1) * 2 : 128;
    int32_t *slots = malloc((size_t)n_slots * sizeof *slots);
    if (!slots) return LLC_ERR_NOMEM;
    memset(slots, 0xff, (size_t)n_slots * sizeof *slots);
    free(x->slots);
    x->slots = slots;
    x->mask = n_slots - 1;
    for (int e = 0; e < x->n; e++) insert_slot(x, e);
    return 0;
}

int str_index_add(str_index *x, const char *key, size_t len, int value) {
    if (reserve_one(x)) return LLC_ERR_NOMEM;
    sb_add(&x->keys, key, len);
    if (x->keys.oom) return LLC_ERR_NOMEM;
    int e = x->n++;
    x->off[e + 1] = x->keys.len;
    x->hash[e] = key_hash(key, len);
    x->value[e] = value;
    insert_slot(x, e);
    return 0;
}

void str_index_free(str_index *x) {
    free(x->slots), free(x->hash), free(x->value), free(x->off);
    sb_free(&x->keys);
    memset(x, 0, sizeof *x);
}
