/* sse.c — Server-Sent Events reader (see sse.h). */
#include "ui/sse.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/common.h"

struct sse {
    size_t max;
    char *line;          /* the line being read */
    size_t line_len, line_cap;
    char *data;          /* the event's data so far */
    size_t data_len, data_cap;
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
    free(s->line);
    free(s->data);
    free(s);
}

static int grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    char *p = realloc(*buf, c);
    if (!p) return LLC_ERR_NOMEM;
    *buf = p;
    *cap = c;
    return 0;
}

/* One complete line (without its end). */
static int on_line(sse *s, sse_on_event cb, void *ctx) {
    const char *l = s->line;
    size_t n = s->line_len;
    if (n == 0) { /* blank line: dispatch */
        int rc = 0;
        if (s->has_data) {
            s->data[s->data_len] = 0;
            rc = cb(ctx, s->event[0] ? s->event : "message", s->data, s->data_len);
        }
        s->data_len = 0;
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
        size_t need = s->data_len + (s->has_data ? 1 : 0) + vlen + 1;
        if (need > s->max) return LLC_ERR_RANGE;
        if (grow(&s->data, &s->data_cap, need)) return LLC_ERR_NOMEM;
        if (s->has_data) s->data[s->data_len++] = '\n';
        memcpy(s->data + s->data_len, val, vlen);
        s->data_len += vlen;
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
            s->line_len = 0;
            if (rc) {
                if (rc == LLC_ERR_RANGE || rc == LLC_ERR_NOMEM) s->broken = true;
                return rc;
            }
            continue;
        }
        if (s->line_len + 1 > s->max) {
            s->broken = true;
            return LLC_ERR_RANGE;
        }
        if (grow(&s->line, &s->line_cap, s->line_len + 1)) {
            s->broken = true;
            return LLC_ERR_NOMEM;
        }
        s->line[s->line_len++] = ch;
    }
    return 0;
}
