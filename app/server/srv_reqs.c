/* srv_reqs.c — the generation requests in flight on an NDJSON connection:
 * submitting one to the engine (with the per-connection limit), finding one by
 * its engine id, unlinking and freeing it, and the protocol's error code for a
 * result code. The methods (srv_proto.c) and the sessions (srv_sessions.c)
 * call these; a session's own handling of its requests' events goes through
 * the hooks it sets on them, so nothing here calls either back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/server/srv_internal.h"

const char *srv_code_of(int rc) {
    switch (rc) {
    case LLC_ERR_TYPE:
    case LLC_ERR_FORMAT: return "bad_request";
    case LLC_ERR_RANGE: return "bad_param";
    case LLC_ERR_UNSUPPORTED: return "unsupported";
    case LLC_ERR_NOTFOUND: return "not_found";
    default: return "internal";
    }
}

void srv_req_free(srv_req *r) {
    if (!r) return;
    for (int i = 0; r->pend && i < r->n; i++) {
        free(r->pend[i].ids);
        sb_free(&r->pend[i].lp);
        toolcall_parser_free(r->pend[i].tc);
        reasoning_parser_free(r->pend[i].rp);
        sb_free(&r->pend[i].rtext);
        sb_free(&r->pend[i].ctext);
    }
    free(r->pend);
    free(r->prompt_ids);
    free(r->id_json);
    free(r);
}

/* A sample's reasoning parser's output, gathered per token for its event. */
static void pend_reasoning(void *ud, const char *text, size_t len) {
    sb_add(&((struct srv_pending *)ud)->rtext, text, len);
}
static void pend_content(void *ud, const char *text, size_t len) {
    sb_add(&((struct srv_pending *)ud)->ctext, text, len);
}

srv_req *srv_req_find(conn *c, int64_t eid) {
    for (srv_req *r = c->reqs; r; r = r->next)
        if (r->eid == eid) return r;
    return NULL;
}

void srv_req_unlink(conn *c, srv_req *r) {
    for (srv_req **pp = &c->reqs; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            return;
        }
}

bool srv_req_full(srv *s, conn *c, const char *id_json) {
    int running = c->n_preps;
    for (const srv_req *q = c->reqs; q; q = q->next) running++;
    if (running < SRV_MAX_INFLIGHT) return false;
    char msg[96];
    snprintf(msg, sizeof msg, "%d requests are running on this connection; wait for one to end", running);
    srv_send_error(s, c, id_json, "too_many_requests", msg);
    return true;
}

srv_req *srv_req_submit(srv *s, conn *c, const char *id_json, srv_gen *g, llc_err *err) {
    if (srv_req_full(s, c, id_json)) return NULL;
    if (!c->ec && engine_client_create(s->e, &c->ec)) {
        srv_send_error(s, c, id_json, "internal", "cannot create an engine client");
        return NULL;
    }
    srv_req *r = calloc(1, sizeof *r);
    if (r) {
        r->n = g->req.n;
        r->pend = calloc((size_t)r->n, sizeof *r->pend);
        r->id_json = strdup(id_json);
        if (g->echo_prompt && (r->prompt_ids = malloc((size_t)g->req.n_prompt * sizeof *r->prompt_ids))) {
            memcpy(r->prompt_ids, g->req.prompt, (size_t)g->req.n_prompt * sizeof *r->prompt_ids);
            r->n_prompt_ids = g->req.n_prompt;
        }
    }
    bool tc_ok = true; /* with tools, each sample's calls are read for its done event */
    for (int i = 0; r && r->pend && g->tools && i < r->n; i++)
        tc_ok = tc_ok && toolcall_parser_create(g->tool_format, g->tools, NULL, &r->pend[i].tc) == 0;
    for (int i = 0; r && r->pend && g->reasoning != REASONING_NONE && i < r->n; i++) { /* a thinking model's chat */
        struct srv_pending *p = &r->pend[i];
        reasoning_sink sink = {p, pend_reasoning, pend_content};
        tc_ok = tc_ok && reasoning_parser_create(g->reasoning, g->in_reasoning, &sink, &p->rp) == 0;
    }
    if (!r || !r->pend || !r->id_json || (g->echo_prompt && !r->prompt_ids) || !tc_ok) {
        srv_req_free(r);
        srv_send_error(s, c, id_json, "internal", "out of memory");
        return NULL;
    }
    int64_t eid = engine_submit(s->e, c->ec, &g->req, err);
    if (eid < 0) {
        srv_req_free(r);
        srv_send_error(s, c, id_json, srv_code_of((int)eid), err->msg);
        return NULL;
    }
    r->eid = eid;
    r->logprobs = g->logprobs;
    r->n_logprobs = g->n_logprobs;
    r->warm_only = g->warm_only;
    r->n_dropped = g->n_dropped;
    r->next = c->reqs;
    c->reqs = r;
    return r;
}
