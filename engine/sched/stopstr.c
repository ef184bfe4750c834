/* stopstr.c — hold-back matching of stop strings: keep the longest tail of the
 * pending text that is a prefix of some stop string, emit the rest. */
#include "engine/sched/stopstr.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/common.h"

struct stopstr {
    char **stops;
    size_t *lens;
    int n;
    bool stopped;
    char *pending; /* held text + newest piece */
    size_t len, cap;
    char *out;     /* what the last call emitted */
    size_t out_cap;
};

int stopstr_create(const char *const *stops, int n, stopstr **out) {
    *out = NULL;
    stopstr *s = calloc(1, sizeof *s);
    if (!s) return LLC_ERR_NOMEM;
    s->stops = calloc((size_t)(n > 0 ? n : 1), sizeof *s->stops);
    s->lens = calloc((size_t)(n > 0 ? n : 1), sizeof *s->lens);
    if (!s->stops || !s->lens) {
        stopstr_free(s);
        return LLC_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++) {
        if (!stops[i] || !*stops[i]) continue;
        if (!(s->stops[s->n] = strdup(stops[i]))) {
            stopstr_free(s);
            return LLC_ERR_NOMEM;
        }
        s->lens[s->n++] = strlen(stops[i]);
    }
    *out = s;
    return 0;
}

void stopstr_free(stopstr *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) free(s->stops[i]);
    free(s->stops);
    free(s->lens);
    free(s->pending);
    free(s->out);
    free(s);
}

static bool reserve(char **p, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    char *np = realloc(*p, c);
    if (!np) return false;
    *p = np;
    *cap = c;
    return true;
}

/* Moves the first n pending bytes to the output buffer. */
static void emit_front(stopstr *s, size_t n, const char **emit, size_t *emit_len) {
    if (!reserve(&s->out, &s->out_cap, n + 1)) n = 0;
    if (n) memcpy(s->out, s->pending, n);
    memmove(s->pending, s->pending + n, s->len - n);
    s->len -= n;
    *emit = s->out;
    *emit_len = n;
}

bool stopstr_push(stopstr *s, const char *piece, size_t len, const char **emit, size_t *emit_len) {
    *emit = "";
    *emit_len = 0;
    if (s->stopped) return true;
    if (!reserve(&s->pending, &s->cap, s->len + len + 1)) return false;
    memcpy(s->pending + s->len, piece, len);
    s->len += len;
    /* earliest full match */
    size_t best = SIZE_MAX;
    for (int i = 0; i < s->n; i++) {
        if (s->lens[i] > s->len) continue;
        const char *hit = memmem(s->pending, s->len, s->stops[i], s->lens[i]);
        if (hit && (size_t)(hit - s->pending) < best) best = (size_t)(hit - s->pending);
    }
    if (best != SIZE_MAX) {
        s->stopped = true;
        emit_front(s, best, emit, emit_len);
        s->len = 0;
        return true;
    }
    /* hold back the longest tail that a stop string starts with */
    size_t hold = 0;
    for (int i = 0; i < s->n; i++) {
        size_t max = s->lens[i] - 1 < s->len ? s->lens[i] - 1 : s->len;
        for (size_t k = max; k > hold; k--)
            if (!memcmp(s->pending + s->len - k, s->stops[i], k)) {
                hold = k;
                break;
            }
    }
    emit_front(s, s->len - hold, emit, emit_len);
    return false;
}

void stopstr_flush(stopstr *s, const char **emit, size_t *emit_len) {
    if (s->stopped) {
        *emit = "";
        *emit_len = 0;
        return;
    }
    emit_front(s, s->len, emit, emit_len);
}
