/* srv_embed.c — the HTTP embeddings endpoints: OpenAI's POST /v1/embeddings
 * (and /embeddings), Ollama's POST /api/embed and its older /api/embeddings.
 * The inputs of one request go to the engine as one embeddings request (each
 * input a sequence, batched with everything else running); the answer is one
 * JSON object. Like a one-piece generation (srv_http_gen.c) nothing waits: the
 * connection is suspended while the engine works, and the server loop polls
 * the engine client's fd (resume) and the socket (a hang-up cancels). OpenAI's
 * vectors are JSON numbers or, with encoding_format "base64", the base64 of
 * their little-endian float32 bytes (what the official clients ask for). */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/llm.h"
#include "app/server/srv_http.h"

#define EMBED_SHUTDOWN 1 /* (a code of fail(): the request was cancelled by the shutdown) */

struct srv_embed {
    srv_embed *prev, *next; /* s->embeds */
    srv *s;
    struct MHD_Connection *mc;
    http_embed_kind kind;
    bool base64;          /* OpenAI encoding_format "base64" */
    bool suspended, gone, cancel_sent, finished;
    int fd;               /* the client's socket, watched for a hang-up */
    engine_client *ec;
    int64_t eid;
    int n;                /* inputs */
    int32_t **ids;        /* [n] each input's tokens */
    int *n_ids;
    float *vecs;          /* [n][dim] the embeddings as they come */
    int dim, n_got, n_done, prompt_tokens;
    char err_msg[256];
    double t_start;       /* ms */
    int read_rc;          /* embed_prepare: what was wrong with the request (0: nothing) */
    llc_err read_err;
};

void srv_embed_free(srv_embed *q) {
    if (!q) return;
    if (q->s) { /* listed (embed_start) */
        if (q->prev) q->prev->next = q->next;
        else if (q->s->embeds == q) q->s->embeds = q->next;
        if (q->next) q->next->prev = q->prev;
        q->s->http_active--;
    }
    engine_client_free(q->ec); /* cancels the request if it still runs */
    for (int i = 0; q->ids && i < q->n; i++) free(q->ids[i]);
    free(q->ids);
    free(q->n_ids);
    free(q->vecs);
    free(q);
}

/* ---- the server loop's side ---- */

static void cancel(srv_embed *q) {
    if (q->cancel_sent || !q->ec) return;
    engine_cancel(q->s->e, q->eid);
    q->cancel_sent = true;
}

static void resume(srv_embed *q) {
    if (!q->suspended) return;
    q->suspended = false;
    MHD_resume_connection(q->mc);
}

/* A suspended answer's socket: a hang-up cancels it and resumes the connection
 * (to be closed without an answer). */
static void on_socket(srv *s, void *ctx, short revents, double now) {
    srv_embed *q = ctx;
    if (!q->suspended) return;
    if (revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) {
        cancel(q);
        q->gone = true;
        resume(q);
    }
}

/* Its engine fd: results came, the answer can be written. */
static void on_engine(srv *s, void *ctx, short revents, double now) {
    srv_embed *q = ctx;
    if (q->suspended && (revents & POLLIN)) resume(q);
}

void srv_embed_poll_add(srv *s, srv_pollset *ps) {
    for (srv_embed *q = s->embeds; q; q = q->next) {
        if (!q->suspended) continue;
        srv_poll_add(ps, q->fd, POLLRDHUP, on_socket, q);
        srv_poll_add(ps, q->ec ? engine_client_fd(q->ec) : -1, POLLIN, on_engine, q);
    }
}

void srv_embed_cancel_all(srv *s, bool resume_all) {
    for (srv_embed *q = s->embeds; q; q = q->next) {
        cancel(q);
        if (!resume_all || !q->suspended) continue;
        q->gone = true; /* the daemon stops: close without an answer */
        resume(q);
    }
}

/* ---- answers ---- */

static enum MHD_Result fail(struct MHD_Connection *mc, http_embed_kind kind, int rc, const char *msg) {
    unsigned status = rc == LLC_ERR_NOMEM  ? MHD_HTTP_INTERNAL_SERVER_ERROR
                      : rc == EMBED_SHUTDOWN ? MHD_HTTP_SERVICE_UNAVAILABLE
                                           : MHD_HTTP_BAD_REQUEST;
    if (kind != HTTP_EMBED_OPENAI) return srv_ollama_error(mc, status, msg);
    const char *type = status == MHD_HTTP_BAD_REQUEST               ? "invalid_request_error"
                       : status == MHD_HTTP_SERVICE_UNAVAILABLE ? "unavailable_error"
                                                                : "server_error";
    return srv_http_error(mc, status, type, msg);
}

static void add_floats(sbuf *b, const float *v, int n) {
    sb_str(b, "[");
    for (int d = 0; d < n; d++) sb_printf(b, d ? ",%.9g" : "%.9g", (double)v[d]);
    sb_str(b, "]");
}

/* The base64 of v's little-endian float32 bytes, as a JSON string. */
static void add_base64(sbuf *b, const float *v, int n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t len = (size_t)n * 4;
    unsigned char *bytes = malloc(len ? len : 1);
    char *out = malloc((len + 2) / 3 * 4 + 1);
    if (!bytes || !out) {
        free(bytes), free(out);
        b->oom = true;
        return;
    }
    for (int i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        for (int k = 0; k < 4; k++) bytes[4 * i + k] = (unsigned char)(u >> (8 * k));
    }
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t w = (uint32_t)bytes[i] << 16 | (i + 1 < len ? (uint32_t)bytes[i + 1] << 8 : 0) |
                     (i + 2 < len ? bytes[i + 2] : 0);
        out[o++] = tab[w >> 18 & 63];
        out[o++] = tab[w >> 12 & 63];
        out[o++] = i + 1 < len ? tab[w >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? tab[w & 63] : '=';
    }
    sb_str(b, "\"");
    sb_add(b, out, o);
    sb_str(b, "\"");
    free(bytes);
    free(out);
}

static enum MHD_Result answer(srv_embed *q, struct MHD_Connection *mc) {
    if (q->n_got < q->n) { /* an input failed, or the request was cancelled (shutdown) */
        char msg[300];
        bool cancelled = q->cancel_sent && !q->err_msg[0];
        snprintf(msg, sizeof msg, "%s", cancelled ? "shutting down" : q->err_msg[0] ? q->err_msg : "the engine failed");
        http_embed_kind kind = q->kind;
        srv_embed_free(q);
        return fail(mc, kind, cancelled ? EMBED_SHUTDOWN : LLC_ERR_NOMEM, msg);
    }
    sbuf b = {0};
    const char *name = q->s->m.name;
    if (q->kind == HTTP_EMBED_OPENAI) {
        sb_str(&b, "{\"object\":\"list\",\"data\":[");
        for (int i = 0; i < q->n; i++) {
            sb_printf(&b, "%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":", i ? "," : "", i);
            if (q->base64) add_base64(&b, q->vecs + (size_t)i * q->dim, q->dim);
            else add_floats(&b, q->vecs + (size_t)i * q->dim, q->dim);
            sb_str(&b, "}");
        }
        sb_str(&b, "],\"model\":");
        sb_json_str(&b, name, strlen(name));
        sb_printf(&b, ",\"usage\":{\"prompt_tokens\":%d,\"total_tokens\":%d}}", q->prompt_tokens,
                  q->prompt_tokens);
    } else if (q->kind == HTTP_EMBED_OLLAMA) {
        sb_str(&b, "{\"model\":");
        sb_json_str(&b, name, strlen(name));
        sb_str(&b, ",\"embeddings\":[");
        for (int i = 0; i < q->n; i++) {
            if (i) sb_str(&b, ",");
            add_floats(&b, q->vecs + (size_t)i * q->dim, q->dim);
        }
        long long ns = (long long)((llc_now_ms() - q->t_start) * 1e6);
        sb_printf(&b, "],\"total_duration\":%lld,\"load_duration\":0,\"prompt_eval_count\":%d}", ns,
                  q->prompt_tokens);
    } else {
        sb_str(&b, "{\"embedding\":");
        add_floats(&b, q->vecs, q->dim);
        sb_str(&b, "}");
    }
    srv_embed_free(q);
    enum MHD_Result ret = b.oom ? MHD_NO : srv_http_json(mc, MHD_HTTP_OK, b.p, b.len);
    sb_free(&b);
    return ret;
}

/* Takes every event the engine has for q, without waiting. */
static void drain(srv_embed *q) {
    engine_event *ev;
    while (q->ec && !q->finished && (ev = engine_client_next(q->ec))) {
        int i = ev->seq_index;
        if (ev->kind == EV_ERROR) {
            snprintf(q->err_msg, sizeof q->err_msg, "%s", ev->message);
        } else if (ev->kind == EV_EMBEDDING && i >= 0 && i < q->n && ev->n_embd == q->dim) {
            memcpy(q->vecs + (size_t)i * q->dim, ev->embedding, (size_t)q->dim * sizeof *q->vecs);
            q->prompt_tokens += ev->prompt_tokens;
            q->n_got++;
        } else if (ev->kind == EV_DONE) {
            if (++q->n_done >= q->n) q->finished = true;
        }
        engine_event_free(ev);
    }
}

enum MHD_Result srv_http_embed_resume(srv *s, struct MHD_Connection *mc, srv_embed **pending) {
    (void)s;
    srv_embed *q = *pending;
    drain(q);
    if (q->finished) {
        *pending = NULL;
        return answer(q, mc);
    }
    if (q->gone) {
        *pending = NULL;
        srv_embed_free(q);
        return MHD_NO;
    }
    q->suspended = true;
    MHD_suspend_connection(q->mc);
    return MHD_YES;
}

/* ---- the request ---- */

/* Input i: a string (tokenized with BOS as the vocabulary wants, special-token
 * texts taken literally) or, for OpenAI, an array of token ids. */
static int read_input(const srv_model *m, srv_embed *q, const cJSON *in, int i, const char *name, llc_err *err) {
    if (cJSON_IsString(in)) {
        const char *t = in->valuestring;
        if (!*t) return llc_fail(err, LLC_ERR_RANGE, "'%s' is an empty string", name);
        int n = llm_tokenize(m->tok, t, strlen(t), tok_add_bos(m->tok), false, &q->ids[i]);
        if (n < 0) return llc_fail(err, n, "'%s' cannot be tokenized", name);
        q->n_ids[i] = n;
    } else if (cJSON_IsArray(in) && q->kind == HTTP_EMBED_OPENAI) {
        int n = cJSON_GetArraySize(in);
        if (n == 0) return llc_fail(err, LLC_ERR_RANGE, "'%s' is an empty array", name);
        if (!(q->ids[i] = malloc((size_t)n * sizeof *q->ids[i]))) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
        int k = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, in) {
            if (!cJSON_IsNumber(e) || e->valuedouble != (double)(int32_t)e->valuedouble || e->valuedouble < 0 ||
                e->valuedouble >= m->n_vocab)
                return llc_fail(err, LLC_ERR_RANGE, "'%s': item %d is not a token id of this model (0..%d)",
                                name, k, m->n_vocab - 1);
            q->ids[i][k++] = (int32_t)e->valuedouble;
        }
        q->n_ids[i] = n;
    } else {
        return llc_fail(err, LLC_ERR_TYPE, q->kind == HTTP_EMBED_OPENAI
                                               ? "'%s' must be a string, an array of strings, of token ids, or of arrays of token ids"
                                               : "'%s' must be a string or an array of strings", name);
    }
    return 0;
}

/* The inputs of j into q->ids; checks their lengths (cut to the context with
 * truncate). */
static int read_request(const srv_model *m, srv_embed *q, const cJSON *j, llc_err *err) {
    if (!cJSON_IsObject(j)) return llc_fail(err, LLC_ERR_TYPE, "the body must be a JSON object");
    const char *field = q->kind == HTTP_EMBED_OLLAMA_OLD ? "prompt" : "input";
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(j, field);
    if (!in || cJSON_IsNull(in)) return llc_fail(err, LLC_ERR_TYPE, "'%s' is required", field);
    bool truncate = q->kind != HTTP_EMBED_OPENAI; /* Ollama's default */
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "truncate");
    if (q->kind != HTTP_EMBED_OPENAI && f && !cJSON_IsNull(f)) {
        if (!cJSON_IsBool(f)) return llc_fail(err, LLC_ERR_TYPE, "'truncate' must be true or false");
        truncate = cJSON_IsTrue(f);
    }
    if (q->kind == HTTP_EMBED_OPENAI) {
        f = cJSON_GetObjectItemCaseSensitive(j, "encoding_format");
        if (f && !cJSON_IsNull(f)) {
            if (!cJSON_IsString(f) || (strcmp(f->valuestring, "float") && strcmp(f->valuestring, "base64")))
                return llc_fail(err, LLC_ERR_RANGE, "'encoding_format' must be \"float\" or \"base64\"");
            q->base64 = !strcmp(f->valuestring, "base64");
        }
        f = cJSON_GetObjectItemCaseSensitive(j, "dimensions");
        if (f && !cJSON_IsNull(f) && (!cJSON_IsNumber(f) || f->valuedouble != q->dim))
            return llc_fail(err, LLC_ERR_RANGE, "'dimensions' must be %d, this model's embedding size", q->dim);
    }
    /* one input, or an array of them (an array of numbers is one input of token ids) */
    bool many = cJSON_IsArray(in) && q->kind != HTTP_EMBED_OLLAMA_OLD &&
                !(q->kind == HTTP_EMBED_OPENAI && cJSON_IsNumber(cJSON_GetArrayItem(in, 0)));
    q->n = many ? cJSON_GetArraySize(in) : 1;
    if (q->n == 0) return llc_fail(err, LLC_ERR_RANGE, "'%s' is an empty array", field);
    if (q->n > ENGINE_MAX_EMBED_INPUTS)
        return llc_fail(err, LLC_ERR_RANGE, "'%s' has %d items; at most %d", field, q->n, ENGINE_MAX_EMBED_INPUTS);
    q->ids = calloc((size_t)q->n, sizeof *q->ids);
    q->n_ids = calloc((size_t)q->n, sizeof *q->n_ids);
    q->vecs = malloc((size_t)q->n * q->dim * sizeof *q->vecs);
    if (!q->ids || !q->n_ids || !q->vecs) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    const int n_ctx = m->n_ctx;
    for (int i = 0; i < q->n; i++) {
        char name[64]; /* 'input' or 'input[3]' in messages */
        if (many) snprintf(name, sizeof name, "%s[%d]", field, i);
        else snprintf(name, sizeof name, "%s", field);
        int rc = read_input(m, q, many ? cJSON_GetArrayItem(in, i) : in, i, name, err);
        if (rc) return rc;
        if (q->n_ids[i] > n_ctx && !truncate)
            return llc_fail(err, LLC_ERR_RANGE, "'%s' is %d tokens; the context is %d", name, q->n_ids[i], n_ctx);
        if (q->n_ids[i] > n_ctx) q->n_ids[i] = n_ctx;
    }
    return 0;
}

/* On a worker: the body read and tokenized into an embeddings request not yet
 * listed; what is wrong with it is kept for embed_start. */
static void *embed_prepare(const srv_model *m, int which, const char *body, size_t len) {
    srv_embed *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->kind = (http_embed_kind)which;
    q->fd = -1;
    q->dim = m->n_embd;
    q->t_start = llc_now_ms();
    llc_err *err = &q->read_err;
    cJSON *j = NULL;
    if (!srv_utf8_valid(body, len)) q->read_rc = llc_fail(err, LLC_ERR_RANGE, "the body is not valid UTF-8");
    else if (srv_json_has_nul(body, len)) q->read_rc = llc_fail(err, LLC_ERR_RANGE, NUL_REFUSED);
    else if (!(j = cJSON_ParseWithLength(body, len))) q->read_rc = llc_fail(err, LLC_ERR_RANGE, "the body is not valid JSON");
    else q->read_rc = read_request(m, q, j, err);
    cJSON_Delete(j);
    return q;
}

/* On the server thread: the read request submitted (or refused). */
static enum MHD_Result embed_start(srv *s, struct MHD_Connection *mc, void *ready, http_pending *pending) {
    srv_embed *q = ready;
    if (!q) return MHD_NO;
    s->http_active++; /* shutdown waits for its answer */
    q->s = s;
    q->mc = mc;
    q->next = s->embeds; /* listed: the server loop polls it while suspended */
    if (s->embeds) s->embeds->prev = q;
    s->embeds = q;
    llc_err err = q->read_err;
    int rc = q->read_rc;
    if (!rc && engine_client_create(s->e, &q->ec)) rc = llc_fail(&err, LLC_ERR_NOMEM, "out of memory");
    if (!rc) {
        embed_request r = {.inputs = (const int32_t *const *)q->ids, .n_tokens = q->n_ids, .n_inputs = q->n};
        q->eid = engine_submit_embed(s->e, q->ec, &r, &err);
        if (q->eid < 0) rc = (int)q->eid;
    }
    if (rc) {
        http_embed_kind kind = q->kind;
        srv_embed_free(q);
        return fail(mc, kind, rc, err.msg);
    }
    if (atomic_load(&s->stopping)) cancel(q);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    q->fd = ci ? ci->connect_fd : -1;
    pending->emb = q;
    return srv_http_embed_resume(s, mc, &pending->emb);
}

static void embed_discard(void *ready) { srv_embed_free(ready); }

const http_prep srv_http_embed_prep = {embed_prepare, embed_start, embed_discard};
