/* stopstr.c — hold-back matching of stop strings: keep the longest tail of the
 * pending text that is a prefix of some stop string, emit the rest. */
#include "engine/sched/stopstr.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/common.h"
#include "kernels/sbuf.h"

struct stopstr {
    char **stops;
    size_t *lens;
    int n;
    bool stopped;
    sbuf pending; /* held text + newest piece */
    sbuf out;     /* what the last call emitted */
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
    sb_free(&s->pending);
    sb_free(&s->out);
    free(s);
}

/* Moves the first n pending bytes to the output buffer; false when it cannot
 * hold them (out of memory: nothing is emitted, the pending text is kept). */
static bool emit_front(stopstr *s, size_t n, const char **emit, size_t *emit_len) {
    sb_clear(&s->out);
    sb_add(&s->out, s->pending.p, n);
    if (s->out.oom) return false;
    sb_drop(&s->pending, n);
    *emit = s->out.p; /* (allocated by sb_add even for n = 0) */
    *emit_len = n;
    return true;
}

int stopstr_push(stopstr *s, const char *piece, size_t len, const char **emit, size_t *emit_len) {
    *emit = "";
    *emit_len = 0;
    if (s->stopped) return 1;
    sb_add(&s->pending, piece, len);
    if (s->pending.oom) return LLC_ERR_NOMEM;
    const char *text = s->pending.p;
    const size_t have = s->pending.len;
    /* earliest full match */
    size_t best = SIZE_MAX;
    for (int i = 0; i < s->n; i++) {
        if (s->lens[i] > have) continue;
        const char *hit = memmem(text, have, s->stops[i], s->lens[i]);
        if (hit && (size_t)(hit - text) < best) best = (size_t)(hit - text);
    }
    if (best != SIZE_MAX) {
        s->stopped = true;
        if (!emit_front(s, best, emit, emit_len)) return LLC_ERR_NOMEM;
        sb_clear(&s->pending);
        return 1;
    }
    /* hold back the longest tail that a stop string starts with */
    size_t hold = 0;
    for (int i = 0; i < s->n; i++) {
        size_t max = s->lens[i] - 1 < have ? s->lens[i] - 1 : have;
        for (size_t k = max; k > hold; k--)
            if (!memcmp(text + have - k, s->stops[i], k)) {
                hold = k;
                break;
            }
    }
    return emit_front(s, have - hold, emit, emit_len) ? 0 : LLC_ERR_NOMEM;
}

int stopstr_flush(stopstr *s, const char **emit, size_t *emit_len) {
    *emit = "";
    *emit_len = 0;
    if (s->stopped) return 0;
    return emit_front(s, s->pending.len, emit, emit_len) ? 0 : LLC_ERR_NOMEM;
}
