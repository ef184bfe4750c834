/* tok_pool.c — the tokenizer's small containers: an append-only pool of byte
 * strings with an XXH3 hash index (vocabulary lookup, BPE symbol interning), a
 * growable id vector, and strict UTF-8 helpers. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "engine/tokenizer/tok_internal.h"

static uint32_t hash_bytes(const char *s, size_t len) {
    return (uint32_t)XXH3_64bits(s, len);
}

void tok_pool_free(tok_pool *p) {
    if (!p) return;
    free(p->buf);
    free(p->off);
    free(p->len);
    free(p->hash);
    free(p->slots);
    memset(p, 0, sizeof *p);
}

static int grow_entries(tok_pool *p, int32_t need) {
    if (need <= p->ncap) return 0;
    int64_t nc = p->ncap ? (int64_t)p->ncap * 2 : 256;
    while (nc < need) nc *= 2;
    if (nc > INT32_MAX) return LLC_ERR_RANGE;
    size_t *off = realloc(p->off, (size_t)nc * sizeof *off);
    if (!off) return LLC_ERR_NOMEM;
    p->off = off;
    uint32_t *len = realloc(p->len, (size_t)nc * sizeof *len);
    if (!len) return LLC_ERR_NOMEM;
    p->len = len;
    uint32_t *hash = realloc(p->hash, (size_t)nc * sizeof *hash);
    if (!hash) return LLC_ERR_NOMEM;
    p->hash = hash;
    p->ncap = (int32_t)nc;
    return 0;
}

static int grow_buf(tok_pool *p, size_t need) {
    if (need <= p->cap) return 0;
    size_t nc = p->cap ? p->cap : 4096;
    while (nc < need) {
        if (nc > SIZE_MAX / 2) return LLC_ERR_RANGE;
        nc *= 2;
    }
    char *b = realloc(p->buf, nc);
    if (!b) return LLC_ERR_NOMEM;
    p->buf = b;
    p->cap = nc;
    return 0;
}

/* Rebuilds the index with room for at least `n` strings at load <= 1/2. */
static int rehash(tok_pool *p, int32_t n) {
    uint64_t size = 64;
    while (size < (uint64_t)n * 2) size *= 2;
    if (size > ((uint64_t)1 << 31)) return LLC_ERR_RANGE;
    int32_t *slots = malloc((size_t)size * sizeof *slots);
    if (!slots) return LLC_ERR_NOMEM;
    memset(slots, 0xff, (size_t)size * sizeof *slots);
    uint32_t mask = (uint32_t)(size - 1);
    for (int32_t i = 0; i < p->n; i++) {
        /* keep the first of duplicates: insert in index order, skip if equal found */
        uint32_t h = p->hash[i] & mask;
        bool dup = false;
        while (slots[h] >= 0) {
            int32_t j = slots[h];
            if (p->hash[j] == p->hash[i] && p->len[j] == p->len[i] &&
                memcmp(p->buf + p->off[j], p->buf + p->off[i], p->len[i]) == 0) {
                dup = true;
                break;
            }
            h = (h + 1) & mask;
        }
        if (!dup) slots[h] = i;
    }
    free(p->slots);
    p->slots = slots;
    p->mask = mask;
    return 0;
}

int tok_pool_reserve(tok_pool *p, int32_t n, size_t bytes) {
    int rc = grow_entries(p, n);
    if (!rc) rc = grow_buf(p, bytes);
    if (!rc && (!p->slots || (uint64_t)n * 2 > (uint64_t)p->mask + 1)) rc = rehash(p, n);
    return rc;
}

static int32_t find_hashed(const tok_pool *p, const char *s, size_t len, uint32_t h,
                           uint32_t *slot_out) {
    uint32_t i = h & p->mask;
    while (p->slots[i] >= 0) {
        int32_t j = p->slots[i];
        if (p->hash[j] == h && p->len[j] == len && memcmp(p->buf + p->off[j], s, len) == 0) {
            if (slot_out) *slot_out = i;
            return j;
        }
        i = (i + 1) & p->mask;
    }
    if (slot_out) *slot_out = i;
    return -1;
}

static int32_t add_hashed(tok_pool *p, const char *s, size_t len, uint32_t h) {
    if (len > UINT32_MAX - 1) return LLC_ERR_RANGE;
    if (p->n == INT32_MAX) return LLC_ERR_RANGE;
    int rc = grow_entries(p, p->n + 1);
    if (rc) return rc;
    if (p->used > SIZE_MAX - len - 1) return LLC_ERR_RANGE;
    rc = grow_buf(p, p->used + len + 1);
    if (rc) return rc;
    if (!p->slots || (uint64_t)(p->n + 1) * 2 > (uint64_t)p->mask + 1) {
        rc = rehash(p, p->n + 1);
        if (rc) return rc;
    }
    /* s must not point into p->buf (grow_buf may have moved it); no caller does */
    int32_t i = p->n;
    if (len) memcpy(p->buf + p->used, s, len);
    p->buf[p->used + len] = 0;
    p->off[i] = p->used;
    p->len[i] = (uint32_t)len;
    p->hash[i] = h;
    p->used += len + 1;
    p->n++;
    uint32_t slot;
    if (find_hashed(p, p->buf + p->off[i], len, h, &slot) < 0)
        p->slots[slot] = i; /* first occurrence wins */
    return i;
}

int32_t tok_pool_add(tok_pool *p, const char *s, size_t len) {
    return add_hashed(p, s, len, hash_bytes(s, len));
}

int32_t tok_pool_find(const tok_pool *p, const char *s, size_t len) {
    if (!p->slots) return -1;
    return find_hashed(p, s, len, hash_bytes(s, len), NULL);
}

int32_t tok_pool_intern(tok_pool *p, const char *s, size_t len) {
    uint32_t h = hash_bytes(s, len);
    if (p->slots) {
        int32_t j = find_hashed(p, s, len, h, NULL);
        if (j >= 0) return j;
    }
    return add_hashed(p, s, len, h);
}

void tok_ids_push(tok_ids *ids, int32_t id) {
    if (ids->oom) return;
    if (ids->n == ids->cap) {
        size_t nc = ids->cap ? ids->cap * 2 : 64;
        int32_t *v = realloc(ids->v, nc * sizeof *v);
        if (!v) {
            ids->oom = true;
            return;
        }
        ids->v = v;
        ids->cap = nc;
    }
    ids->v[ids->n++] = id;
}

int tok_utf8_status(const unsigned char *p, size_t avail) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    int n;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c == 0xE0) n = 3, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC) n = 3;
    else if (c == 0xED) n = 3, hi = 0x9F;
    else if (c >= 0xEE && c <= 0xEF) n = 3;
    else if (c == 0xF0) n = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) n = 4;
    else if (c == 0xF4) n = 4, hi = 0x8F;
    else return -1;
    for (int i = 1; i < n; i++) {
        if ((size_t)i >= avail) return 0;
        unsigned b = p[i];
        unsigned l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (b < l || b > h) return -i;
    }
    return n;
}

int tok_utf8_valid_len(const unsigned char *s, size_t avail) {
    if (!avail) return 0;
    int r = tok_utf8_status(s, avail);
    return r > 0 ? r : 0;
}

uint32_t tok_utf8_decode(const unsigned char *s, int n) {
    switch (n) {
    case 1: return s[0];
    case 2: return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    case 3: return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    default:
        return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
               ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    }
}

int tok_utf8_encode(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}
