/* sse.c — Server-Sent Events reader (see sse.h). */
#include "ui/sse.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common.h"
#include "kernels/sbuf.h"

struct sse {
    size_t max;
    sbuf line;           /* the line being read */
    sbuf data;           /* the event's data so far */
    bool has_data;
    char event[64];
    bool after_cr;       /* the last byte was \r: a \n right after it is the same line end */
    bool broken;
};

int sse_create(size_t max_event, sse **out) {
    sse *s = calloc(1, sizeof *s);
    if (!s) return LLC_ERR_NOMEM;
    s->max = max_event;
    *out = s;
    return 0;
}

void sse_free(sse *s) {
    if (!s) return;
    sb_free(&s->line);
    sb_free(&s->data);
    free(s);
}

/* One complete line (without its end). */
static int on_line(sse *s, sse_on_event cb, void *ctx) {
    const char *l = s->line.p;
    size_t n = s->line.len;
    if (n == 0) { /* blank line: dispatch */
        int rc = 0;
        if (s->has_data) rc = cb(ctx, s->event[0] ? s->event : "message", sb_cstr(&s->data), s->data.len);
        sb_clear(&s->data);
        s->has_data = false;
        s->event[0] = 0;
        return rc;
    }
    if (l[0] == ':') return 0; /* comment (keep-alive) */
    size_t colon = 0;
    while (colon < n && l[colon] != ':') colon++;
    const char *val = l + colon;
    size_t vlen = 0;
    if (colon < n) {
        val = l + colon + 1;
        vlen = n - colon - 1;
        if (vlen && val[0] == ' ') val++, vlen--;
    }
    if (colon == 4 && !memcmp(l, "data", 4)) {
        size_t need = s->data.len + (s->has_data ? 1 : 0) + vlen + 1;
        if (need > s->max) return LLC_ERR_RANGE;
        if (s->has_data) sb_putc(&s->data, '\n');
        sb_add(&s->data, val, vlen);
        if (s->data.oom) return LLC_ERR_NOMEM;
        s->has_data = true;
    } else if (colon == 5 && !memcmp(l, "event", 5)) {
        size_t k = vlen < sizeof s->event - 1 ? vlen : sizeof s->event - 1;
        memcpy(s->event, val, k);
        s->event[k] = 0;
    }
    return 0;
}

int sse_feed(sse *s, const char *buf, size_t n, sse_on_event cb, void *ctx) {
    if (s->broken) return LLC_ERR_RANGE;
    for (size_t i = 0; i < n; i++) {
        char ch = buf[i];
        if (ch == '\n' && s->after_cr) { /* the \n of a \r\n */
            s->after_cr = false;
            continue;
        }
        s->after_cr = ch == '\r';
        if (ch == '\n' || ch == '\r') {
            int rc = on_line(s, cb, ctx);
            sb_clear(&s->line);
            if (rc) {
                if (rc == LLC_ERR_RANGE || rc == LLC_ERR_NOMEM) s->broken = true;
                return rc;
            }
            continue;
        }
        if (s->line.len + 1 > s->max) {
            s->broken = true;
            return LLC_ERR_RANGE;
        }
        sb_putc(&s->line, ch);
        if (s->line.oom) {
            s->broken = true;
            return LLC_ERR_NOMEM;
        }
    }
    return 0;
}
