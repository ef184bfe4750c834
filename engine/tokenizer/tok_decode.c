/* tok_decode.c — ids back to text: single pieces (tok_piece), whole sequences
 * (tok_decode) and the incremental UTF-8-safe stream (tok_stream_*). All share the
 * SentencePiece leading-space rule: one space is dropped from the first token that
 * follows any leading BOS tokens. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tokenizer/tok_internal.h"
#include "engine/tokenizer/tokenizer.h"

/* The piece of id, or NULL/0 for a non-rendering control token. id must be valid. */
static const char *piece_of(const tokenizer *t, int32_t id, bool special, size_t *len) {
    if (!special && (t->attr[id] & (TOK_ATTR_UNKNOWN | TOK_ATTR_CONTROL))) {
        *len = 0;
        return "";
    }
    *len = t->piece_len[id];
    return t->piece_buf + t->piece_off[id];
}

static bool strips_space(const tokenizer *t) {
    return t->kind == TOK_KIND_SPM && t->add_space_prefix;
}

/* Applies the leading-space rule for one token; updates *pending. */
static const char *ruled_piece(const tokenizer *t, int32_t id, bool special, bool *pending,
                               size_t *len) {
    const char *p = piece_of(t, id, special, len);
    if (*pending && id != t->special[TOK_SPECIAL_BOS]) {
        *pending = false;
        if (*len && p[0] == ' ') {
            p++;
            (*len)--;
        }
    }
    return p;
}

int tok_piece(const tokenizer *t, int32_t id, bool special, char *buf, int cap) {
    if (!t || id < 0 || id >= t->n_vocab) return LLC_ERR_RANGE;
    size_t len;
    const char *p = piece_of(t, id, special, &len);
    if (len > INT_MAX) return LLC_ERR_RANGE;
    if (buf && cap > 0) memcpy(buf, p, len < (size_t)cap ? len : (size_t)cap);
    return (int)len;
}

int tok_decode(const tokenizer *t, const int32_t *ids, int n, bool special, char **out,
               size_t *len_out) {
    if (out) *out = NULL;
    if (len_out) *len_out = 0;
    if (!t || !out || n < 0 || (n > 0 && !ids)) return LLC_ERR_RANGE;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab) return LLC_ERR_RANGE;
        total += t->piece_len[ids[i]];
    }
    char *buf = malloc(total + 1);
    if (!buf) return LLC_ERR_NOMEM;
    bool pending = strips_space(t);
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        const char *p = ruled_piece(t, ids[i], special, &pending, &len);
        memcpy(buf + k, p, len);
        k += len;
    }
    buf[k] = 0;
    *out = buf;
    if (len_out) *len_out = k;
    return 0;
}

/* ---- streaming ---- */

struct tok_stream {
    const tokenizer *t;
    bool special;
    bool pending_space; /* the leading-space rule has not fired yet */
    char *q;            /* validated UTF-8 not yet written: q[q_start, q_len) */
    size_t q_start, q_len, q_cap;
    unsigned char tail[4]; /* an unfinished UTF-8 sequence (at most 3 bytes) */
    int n_tail;
};

int tok_stream_create(const tokenizer *t, bool special, tok_stream **out) {
    if (!out) return LLC_ERR_RANGE;
    *out = NULL;
    if (!t) return LLC_ERR_RANGE;
    tok_stream *s = calloc(1, sizeof *s);
    if (!s) return LLC_ERR_NOMEM;
    s->t = t;
    s->special = special;
    s->pending_space = strips_space(t);
    *out = s;
    return 0;
}

void tok_stream_continue(tok_stream *s, const int32_t *ids, int n) {
    if (!s || !ids) return;
    for (int i = 0; i < n && s->pending_space; i++)
        if (ids[i] != s->t->special[TOK_SPECIAL_BOS]) s->pending_space = false;
}

void tok_stream_free(tok_stream *s) {
    if (!s) return;
    free(s->q);
    free(s);
}

int tok_stream_pending(const tok_stream *s) {
    if (!s) return 0;
    size_t n = s->q_len - s->q_start + (size_t)s->n_tail;
    return n > INT_MAX ? INT_MAX : (int)n;
}

static int q_reserve(tok_stream *s, size_t more) {
    if (s->q_start && s->q_start == s->q_len) s->q_start = s->q_len = 0;
    if (s->q_len + more <= s->q_cap) return 0;
    if (s->q_start) { /* compact */
        memmove(s->q, s->q + s->q_start, s->q_len - s->q_start);
        s->q_len -= s->q_start;
        s->q_start = 0;
        if (s->q_len + more <= s->q_cap) return 0;
    }
    size_t nc = s->q_cap ? s->q_cap : 64;
    while (nc < s->q_len + more) nc *= 2;
    char *q = realloc(s->q, nc);
    if (!q) return LLC_ERR_NOMEM;
    s->q = q;
    s->q_cap = nc;
    return 0;
}

/* Moves the tail plus `data` into the queue as valid UTF-8; keeps an unfinished
 * end in the tail unless `final`. */
static int feed(tok_stream *s, const char *data, size_t len, bool final) {
    size_t n = (size_t)s->n_tail + len;
    if (!n) return 0;
    unsigned char small[64];
    unsigned char *b = n <= sizeof small ? small : malloc(n);
    if (!b) return LLC_ERR_NOMEM;
    memcpy(b, s->tail, (size_t)s->n_tail);
    if (len) memcpy(b + s->n_tail, data, len);
    /* worst case every byte becomes U+FFFD (3 bytes) */
    if (n > SIZE_MAX / 3 || q_reserve(s, n * 3)) {
        if (b != small) free(b);
        return LLC_ERR_NOMEM;
    }
    s->n_tail = 0;
    size_t i = 0;
    while (i < n) {
        int r = tok_utf8_status(b + i, n - i);
        if (r > 0) {
            memcpy(s->q + s->q_len, b + i, (size_t)r);
            s->q_len += (size_t)r;
            i += (size_t)r;
        } else if (r == 0 && !final) {
            s->n_tail = (int)(n - i);
            memcpy(s->tail, b + i, n - i);
            break;
        } else {
            memcpy(s->q + s->q_len, "\xEF\xBF\xBD", 3);
            s->q_len += 3;
            i += r < 0 ? (size_t)-r : n - i;
        }
    }
    if (b != small) free(b);
    return 0;
}

/* Writes queued text (cut at a character boundary) to out, NUL-terminated. */
static int drain(tok_stream *s, char *out, int cap) {
    size_t avail = s->q_len - s->q_start, room = (size_t)cap - 1, m = avail;
    if (m > room) {
        m = room;
        while (m > 0 && ((unsigned char)s->q[s->q_start + m] & 0xC0) == 0x80) m--;
    }
    if (m > INT_MAX - 1) m = INT_MAX - 1;
    if (m) memcpy(out, s->q + s->q_start, m);
    out[m] = 0;
    s->q_start += m;
    return (int)m;
}

int tok_stream_push(tok_stream *s, int32_t id, char *out, int cap) {
    if (!s || !out || cap < 1) return LLC_ERR_RANGE;
    const tokenizer *t = s->t;
    if (id < 0 || id >= t->n_vocab) {
        out[0] = 0;
        return LLC_ERR_RANGE;
    }
    bool pending = s->pending_space;
    size_t len;
    const char *p = ruled_piece(t, id, s->special, &pending, &len);
    int rc = feed(s, p, len, false);
    if (rc) {
        out[0] = 0;
        return rc;
    }
    s->pending_space = pending;
    return drain(s, out, cap);
}

int tok_stream_flush(tok_stream *s, char *out, int cap) {
    if (!s || !out || cap < 1) return LLC_ERR_RANGE;
    int rc = feed(s, NULL, 0, true);
    if (rc) {
        out[0] = 0;
        return rc;
    }
    return drain(s, out, cap);
}
