/* srv_conn.c — a socket connection's bytes: the capped output queue (an sbuf; a
 * client that stops reading is dropped, never waited on) flushed without blocking, and
 * the NDJSON replies (errors, results) every method sends. The loop (srv.c),
 * the methods (srv_proto.c) and the sessions (srv_sessions.c) call these; they
 * call none of them back. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "app/server/srv_internal.h"

size_t srv_conn_pending(const conn *c) { return c->out.len - c->out_off; }

void srv_conn_write(srv *s, conn *c, const char *p, size_t n) {
    if (c->dead) return;
    if (srv_conn_pending(c) + n > s->cfg.max_outbuf) { /* it stopped reading: drop it */
        c->dead = true;
        return;
    }
    if (c->out_off > 0 && c->out.len + n >= c->out.cap) { /* compact rather than grow */
        sb_drop(&c->out, c->out_off);
        c->out_off = 0;
    }
    sb_add(&c->out, p, n);
    if (c->out.oom) { /* out of memory: the stream would have a hole, so it ends */
        c->dead = true;
        return;
    }
    c->t_active = llc_now_ms();
}

void srv_conn_flush(conn *c) {
    while (!c->dead && srv_conn_pending(c) > 0) {
        ssize_t w = send(c->fd, c->out.p + c->out_off, srv_conn_pending(c), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            c->out_off += (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else {
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) c->dead = true; /* EPIPE, ECONNRESET */
            break;
        }
    }
    if (srv_conn_pending(c) == 0) {
        sb_clear(&c->out);
        c->out_off = 0;
    }
}

void srv_conn_send(srv *s, conn *c, sbuf *b) {
    sb_add(b, "\n", 1);
    if (!b->oom) srv_conn_write(s, c, b->p, b->len);
    sb_free(b);
}

void srv_send_error(srv *s, conn *c, const char *id_json, const char *code, const char *msg) {
    sbuf b = {0};
    sb_printf(&b, "{\"id\":%s,\"event\":\"error\",\"code\":\"%s\",\"message\":", id_json, code);
    sb_json_str(&b, msg, strlen(msg));
    sb_add(&b, "}", 1);
    srv_conn_send(s, c, &b);
}

void srv_send_result(srv *s, conn *c, const char *id_json, cJSON *result) {
    char *r = result ? cJSON_PrintUnformatted(result) : NULL;
    cJSON_Delete(result);
    if (!r) {
        srv_send_error(s, c, id_json, "internal", "out of memory");
        return;
    }
    sbuf b = {0};
    sb_printf(&b, "{\"id\":%s,\"event\":\"result\",\"result\":", id_json);
    sb_str(&b, r);
    sb_add(&b, "}", 1);
    free(r);
    srv_conn_send(s, c, &b);
}
