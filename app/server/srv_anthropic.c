/* srv_anthropic.c — Anthropic's Messages API on llmchat's server (as
 * llama-server offers it), so Anthropic's clients work unchanged: POST
 * /v1/messages, streamed as Anthropic's server-sent events or answered with one
 * Message object, and POST /v1/messages/count_tokens. A request is read on a
 * worker into a srv_gen: its system prompt and content blocks (text, tool_use,
 * tool_result) become the chat messages srv_gen_chat takes, its tools
 * ({name, description, input_schema}) OpenAI's for srv_gen_tools; the
 * generation runs through srv_http_gen.c (srv_http_generate_as) with this
 * file's http_format writing the blocks: text, thinking (a thinking model's
 * reasoning) and tool_use. Errors are Anthropic's
 * {"type":"error","error":{"type":"invalid_request_error","message":...}}. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/server/srv_http.h"

enum { A_MESSAGES, A_COUNT }; /* the http_prep's `which` */

/* ---- errors ---- */

static const char *error_type(unsigned status) {
    switch (status) {
    case MHD_HTTP_UNAUTHORIZED: return "authentication_error";
    case MHD_HTTP_FORBIDDEN: return "permission_error";
    case MHD_HTTP_NOT_FOUND: return "not_found_error";
    case 413: return "request_too_large";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

static void error_body(sbuf *b, unsigned status, const char *msg) {
    sb_str(b, "{\"type\":\"error\",\"error\":{\"type\":\"");
    sb_str(b, error_type(status));
    sb_str(b, "\",\"message\":");
    sb_json_str(b, msg, strlen(msg));
    sb_str(b, "}}");
}

enum MHD_Result srv_anthropic_error(struct MHD_Connection *mc, unsigned status, const char *msg) {
    sbuf b = {0};
    error_body(&b, status, msg);
    enum MHD_Result ret = b.oom ? MHD_NO : srv_http_json(mc, status, b.p, b.len);
    sb_free(&b);
    return ret;
}

bool srv_anthropic_path(const char *url) {
    return !strcmp(url, "/v1/messages") || !strcmp(url, "/v1/messages/count_tokens");
}

static const cJSON *field(const cJSON *j, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, name);
    return cJSON_IsNull(f) ? NULL : f;
}

/* ---- the request: Anthropic's messages into OpenAI's chat messages ---- */

/* The text of `system`, or of a tool_result's content: a string or an array
 * of text blocks, joined. */
static int blocks_text(const cJSON *c, const char *what, sbuf *out, llc_err *err) {
    if (!c) return 0;
    if (cJSON_IsString(c)) {
        sb_str(out, c->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(c)) return llc_fail(err, LLC_ERR_TYPE, "%s must be a string or an array of text blocks", what);
    int k = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, c) {
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b, "type"));
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(b, "text");
        if (!type || strcmp(type, "text") || !cJSON_IsString(text))
            return llc_fail(err, LLC_ERR_TYPE, "%s[%d] must be {\"type\": \"text\", \"text\": string}%s", what, k,
                            type && strcmp(type, "text") ? " (the model reads text only)" : "");
        sb_str(out, text->valuestring);
        k++;
    }
    return 0;
}

static cJSON *chat_message(cJSON *out, const char *role, const char *content) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddItemToArray(out, m);
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content ? content : "");
    return m;
}

/* A tool_use block of message i as an OpenAI tool call (arguments: its input as JSON text). */
static int tool_use_call(const cJSON *b, int i, int k, cJSON *calls, llc_err *err) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "id"), *name = cJSON_GetObjectItemCaseSensitive(b, "name");
    const cJSON *input = field(b, "input");
    if (!cJSON_IsString(id) || !cJSON_IsString(name) || !*name->valuestring || (input && !cJSON_IsObject(input)))
        return llc_fail(err, LLC_ERR_TYPE, "messages[%d].content[%d]: a tool_use block is {\"id\": string, "
                        "\"name\": string, \"input\": object}", i, k);
    char *args = input ? cJSON_PrintUnformatted(input) : strdup("{}");
    cJSON *c = cJSON_CreateObject(), *f = cJSON_AddObjectToObject(c, "function");
    cJSON_AddStringToObject(c, "id", id->valuestring);
    cJSON_AddStringToObject(c, "type", "function");
    cJSON_AddStringToObject(f, "name", name->valuestring);
    cJSON_AddStringToObject(f, "arguments", args ? args : "{}");
    free(args);
    cJSON_AddItemToArray(calls, c);
    return 0;
}

/* A tool_result block of message i as an OpenAI tool message. */
static int tool_result_message(const cJSON *b, int i, int k, cJSON *out, llc_err *err) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(b, "tool_use_id");
    if (!cJSON_IsString(id))
        return llc_fail(err, LLC_ERR_TYPE, "messages[%d].content[%d].tool_use_id must be a string", i, k);
    char what[64];
    snprintf(what, sizeof what, "messages[%d].content[%d].content", i, k);
    sbuf t = {0};
    sb_add(&t, "", 0);
    int rc = blocks_text(field(b, "content"), what, &t, err);
    if (!rc && t.oom) rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    if (!rc) cJSON_AddStringToObject(chat_message(out, "tool", t.p), "tool_call_id", id->valuestring);
    sb_free(&t);
    return rc;
}

/* Message i ({role, content}) as chat messages appended to out: a user turn's
 * tool_result blocks become tool messages (before its text), an assistant
 * turn's tool_use blocks its tool_calls; thinking blocks are left out. */
static int convert_message(const cJSON *msg, int i, cJSON *out, llc_err *err) {
    const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(msg, "role"));
    if (!cJSON_IsObject(msg) || !role || (strcmp(role, "user") && strcmp(role, "assistant")))
        return llc_fail(err, LLC_ERR_TYPE, "messages[%d].role must be \"user\" or \"assistant\"", i);
    bool user = !strcmp(role, "user");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
    if (cJSON_IsString(content)) {
        chat_message(out, role, content->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(content))
        return llc_fail(err, LLC_ERR_TYPE, "messages[%d].content must be a string or an array of content blocks", i);
    sbuf text = {0};
    sb_add(&text, "", 0);
    cJSON *calls = cJSON_CreateArray();
    int rc = 0, k = 0, n_results = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, content) {
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(b, "type"));
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(b, "text");
        if (!type) rc = llc_fail(err, LLC_ERR_TYPE, "messages[%d].content[%d] must be an object with a 'type'", i, k);
        else if (!strcmp(type, "text") && cJSON_IsString(t)) sb_str(&text, t->valuestring);
        else if (!strcmp(type, "text")) rc = llc_fail(err, LLC_ERR_TYPE, "messages[%d].content[%d].text must be a string", i, k);
        else if (!strcmp(type, "tool_use") && !user) rc = tool_use_call(b, i, k, calls, err);
        else if (!strcmp(type, "tool_result") && user) rc = tool_result_message(b, i, k, out, err), n_results++;
        else if ((!strcmp(type, "thinking") || !strcmp(type, "redacted_thinking")) && !user) { /* not replayed */ }
        else if (!strcmp(type, "tool_use") || !strcmp(type, "tool_result") || !strcmp(type, "thinking"))
            rc = llc_fail(err, LLC_ERR_TYPE, "messages[%d].content[%d]: a %s block belongs in %s turn", i, k, type,
                          user ? "an assistant" : "a user");
        else rc = llc_fail(err, LLC_ERR_TYPE, "messages[%d].content[%d]: content blocks of type '%.40s' are not "
                           "supported (the model reads text only)", i, k, type);
        if (rc) break;
        k++;
    }
    if (!rc && text.oom) rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    if (!rc && (!user || text.len > 0 || n_results == 0)) {
        cJSON *m = chat_message(out, role, text.p);
        if (cJSON_GetArraySize(calls) > 0) cJSON_AddItemToObject(m, "tool_calls", calls), calls = NULL;
    }
    cJSON_Delete(calls);
    sb_free(&text);
    return rc;
}

/* `system` and `messages` as OpenAI's chat messages (*out, taken by the caller). */
static int convert_messages(const cJSON *j, cJSON **out, llc_err *err) {
    const cJSON *msgs = field(j, "messages"), *sys = field(j, "system"), *m;
    *out = NULL;
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
        return llc_fail(err, LLC_ERR_TYPE, "'messages' must be a non-empty array of {role, content}");
    cJSON *a = cJSON_CreateArray();
    if (!a) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    sbuf st = {0};
    int rc = blocks_text(sys, "'system'", &st, err);
    if (!rc && st.len) chat_message(a, "system", st.p);
    sb_free(&st);
    int i = 0;
    cJSON_ArrayForEach(m, msgs) {
        if (rc) break;
        rc = convert_message(m, i++, a, err);
    }
    if (rc) cJSON_Delete(a);
    else *out = a;
    return rc;
}

/* `tools` and `tool_choice` into OpenAI's shapes, in req (an object). */
static int convert_tools(const cJSON *j, cJSON *req, llc_err *err) {
    const cJSON *tools = field(j, "tools"), *choice = field(j, "tool_choice"), *t;
    if (tools && !cJSON_IsArray(tools))
        return llc_fail(err, LLC_ERR_TYPE, "'tools' must be an array of {name, description, input_schema}");
    cJSON *ot = cJSON_AddArrayToObject(req, "tools");
    int i = 0;
    cJSON_ArrayForEach(t, tools) {
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "type"));
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name"), *desc = field(t, "description");
        const cJSON *schema = cJSON_GetObjectItemCaseSensitive(t, "input_schema");
        if (type && strcmp(type, "custom"))
            return llc_fail(err, LLC_ERR_TYPE, "tools[%d]: server tools (type '%.60s') are not supported; give "
                            "{name, description, input_schema}", i, type);
        if (!cJSON_IsString(name) || !*name->valuestring)
            return llc_fail(err, LLC_ERR_TYPE, "tools[%d].name must be a non-empty string", i);
        if (!cJSON_IsObject(schema))
            return llc_fail(err, LLC_ERR_TYPE, "tools[%d].input_schema must be a JSON schema object", i);
        if (desc && !cJSON_IsString(desc)) return llc_fail(err, LLC_ERR_TYPE, "tools[%d].description must be a string", i);
        cJSON *o = cJSON_CreateObject(), *f = cJSON_AddObjectToObject(o, "function");
        cJSON_AddStringToObject(o, "type", "function");
        cJSON_AddStringToObject(f, "name", name->valuestring);
        if (desc) cJSON_AddStringToObject(f, "description", desc->valuestring);
        cJSON_AddItemToObject(f, "parameters", cJSON_Duplicate(schema, true));
        cJSON_AddItemToArray(ot, o);
        i++;
    }
    if (!choice) return 0;
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(choice, "type"));
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(choice, "name"));
    if (type && (!strcmp(type, "auto") || !strcmp(type, "none"))) cJSON_AddStringToObject(req, "tool_choice", type);
    else if (type && !strcmp(type, "any")) cJSON_AddStringToObject(req, "tool_choice", "required");
    else if (type && !strcmp(type, "tool") && name) {
        cJSON *c = cJSON_AddObjectToObject(req, "tool_choice");
        cJSON_AddStringToObject(c, "type", "function");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(c, "function"), "name", name);
    } else
        return llc_fail(err, LLC_ERR_TYPE, "'tool_choice' must be {\"type\": \"auto\"}, {\"type\": \"any\"}, "
                        "{\"type\": \"tool\", \"name\": ...} or {\"type\": \"none\"}");
    return 0;
}

/* The sampling and length fields, in the Ollama dialect's names for
 * srv_gen_params: max_tokens (required, but for count_tokens), stop_sequences,
 * temperature, top_p, top_k. */
static int sampling(const srv_model *m, const cJSON *j, bool count, srv_gen *g, llc_err *err) {
    const cJSON *max = field(j, "max_tokens"), *stops = field(j, "stop_sequences");
    if (!count && !max) return llc_fail(err, LLC_ERR_TYPE, "'max_tokens' is required");
    if (max && (!cJSON_IsNumber(max) || max->valuedouble < 1 || max->valuedouble > (1 << 24) ||
                max->valuedouble != floor(max->valuedouble)))
        return llc_fail(err, LLC_ERR_RANGE, "'max_tokens' must be a positive integer");
    if (stops && !cJSON_IsArray(stops))
        return llc_fail(err, LLC_ERR_TYPE, "'stop_sequences' must be an array of strings");
    cJSON *p = cJSON_CreateObject();
    if (!p) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    static const char *const names[] = {"temperature", "top_p", "top_k"};
    for (size_t i = 0; i < LLC_ARRAY_LEN(names); i++)
        if (field(j, names[i])) cJSON_AddItemToObject(p, names[i], cJSON_Duplicate(field(j, names[i]), true));
    if (stops) cJSON_AddItemToObject(p, "stop", cJSON_Duplicate(stops, true));
    /* count_tokens: the whole context is the prompt's (nothing dropped to leave room for an answer) */
    cJSON_AddNumberToObject(p, "num_predict", count ? 1 : max->valuedouble);
    llc_err e2;
    int rc = srv_gen_params(m, SRV_OLLAMA, p, g, &e2);
    cJSON_Delete(p);
    if (rc) return llc_fail(err, rc, "%s", !strncmp(e2.msg, "'stop'", 6) ? "'stop_sequences' must be an array of "
                                                                         "strings of at most 256 bytes" : e2.msg);
    return 0;
}

/* "thinking": {"type": "enabled", "budget_tokens": N} reads a thinking model's
 * reasoning out (as without it); "disabled" renders the template with
 * enable_thinking false. */
static int thinking(const cJSON *j, srv_gen *g, llc_err *err) {
    const cJSON *t = field(j, "thinking");
    if (!t) return 0;
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "type"));
    if (!type || (strcmp(type, "enabled") && strcmp(type, "disabled") && strcmp(type, "adaptive")))
        return llc_fail(err, LLC_ERR_TYPE, "'thinking' must be {\"type\": \"enabled\"} or {\"type\": \"disabled\"}");
    return strcmp(type, "disabled") ? 0 : srv_gen_thinking_off(g, err);
}

/* A request read on a worker: an error answer, or a generation to run (or count). */
typedef struct a_read {
    bool count, stream, stop_sequences;
    unsigned status;    /* an error answer (0: none) */
    char error[512];
    srv_gen g;
} a_read;

static void a_fail(a_read *r, int rc, const char *msg) {
    snprintf(r->error, sizeof r->error, "%s", msg);
    r->status = srv_http_status_of(rc);
}

/* On a worker: request j into r. */
static void read_request(const srv_model *m, const cJSON *j, a_read *r) {
    llc_err err = {{0}};
    if (!cJSON_IsObject(j)) return a_fail(r, LLC_ERR_TYPE, "the request must be a JSON object");
    const cJSON *name = field(j, "model"), *stream = field(j, "stream");
    if (!cJSON_IsString(name) || !*name->valuestring) return a_fail(r, LLC_ERR_TYPE, "'model' is required (any name)");
    if (stream && !cJSON_IsBool(stream)) return a_fail(r, LLC_ERR_TYPE, "'stream' must be true or false");
    r->stream = cJSON_IsTrue(stream);
    r->stop_sequences = cJSON_GetArraySize(field(j, "stop_sequences")) > 0;
    cJSON *req = cJSON_CreateObject(), *msgs = NULL;
    int rc = req ? 0 : llc_fail(&err, LLC_ERR_NOMEM, "out of memory");
    if (!rc) rc = sampling(m, j, r->count, &r->g, &err);
    if (!rc) rc = thinking(j, &r->g, &err);
    if (!rc) rc = convert_tools(j, req, &err);
    if (!rc) rc = srv_gen_tools(req, &r->g, &err);
    if (!rc) rc = convert_messages(j, &msgs, &err);
    if (!rc) rc = srv_gen_chat(m, msgs, &r->g, &err);
    if (!rc) rc = srv_gen_reasoning(m, j, &r->g, &err);
    cJSON_Delete(msgs);
    cJSON_Delete(req);
    if (rc) a_fail(r, rc, err.msg);
}

static void *a_prepare(const srv_model *m, int which, const char *body, size_t len) {
    a_read *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    srv_gen_init(&r->g);
    r->count = which == A_COUNT;
    cJSON *j = NULL;
    if (!srv_utf8_valid(body, len)) a_fail(r, LLC_ERR_TYPE, "the body is not valid UTF-8");
    else if (srv_json_has_nul(body, len)) a_fail(r, LLC_ERR_TYPE, NUL_REFUSED);
    else if (!(j = cJSON_ParseWithLength(body, len))) a_fail(r, LLC_ERR_TYPE, "the body is not valid JSON");
    else read_request(m, j, r);
    cJSON_Delete(j);
    return r;
}

static void a_discard(void *ready) {
    a_read *r = ready;
    srv_gen_free(&r->g);
    free(r);
}

/* ---- the answer ---- */

enum { OPEN_NONE, OPEN_TEXT, OPEN_THINKING, OPEN_TOOL };

/* An answer being written: its id and, in a stream, the content block open. */
typedef struct a_gen {
    char id[48], model[128];
    bool stop_sequences; /* the request gave some */
    int n_blocks;        /* blocks started */
    int open;            /* OPEN_*: the kind of block n_blocks - 1, if not closed */
} a_gen;

static unsigned g_counter;

/* A stream event: {"type": TYPE, ...}, filled by the caller, then sent by emit. */
static cJSON *ev(const char *type) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    return o;
}

/* Writes `event: TYPE` and `data: o` (o taken). */
static void emit(sbuf *out, cJSON *o) {
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "type"));
    char *txt = type ? cJSON_PrintUnformatted(o) : NULL;
    if (txt) sb_printf(out, "event: %s\ndata: %s\n\n", type, txt);
    else out->oom = true;
    free(txt);
    cJSON_Delete(o);
}

static const char *stop_reason(const a_gen *a, const http_gen_report *r) {
    if (r->finish == FINISH_LENGTH) return "max_tokens";
    if (r->calls && toolcall_count(r->calls) > 0) return "tool_use";
    if (r->stop_text && a->stop_sequences) return "stop_sequence";
    return "end_turn";
}

static cJSON *usage(int in, int out) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "input_tokens", in);
    cJSON_AddNumberToObject(u, "output_tokens", out);
    return u;
}

/* The Message object with no content yet. */
static cJSON *message_head(const a_gen *a) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", a->id);
    cJSON_AddStringToObject(o, "type", "message");
    cJSON_AddStringToObject(o, "role", "assistant");
    cJSON_AddStringToObject(o, "model", a->model);
    cJSON_AddArrayToObject(o, "content");
    return o;
}

static void tool_id(const a_gen *a, int k, char *buf, size_t n) {
    snprintf(buf, n, "toolu_%s_%d", a->id + 4, k); /* after "msg_" */
}

/* A call's input: its arguments as an object ({} when they are not one: cut off by max_tokens). */
static cJSON *call_input(const char *args) {
    cJSON *a = cJSON_Parse(args);
    if (cJSON_IsObject(a)) return a;
    cJSON_Delete(a);
    return cJSON_CreateObject();
}

static cJSON *block(const char *type) {
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", type);
    return b;
}

static cJSON *text_block(const char *key, const char *text, size_t len, const char *type) {
    cJSON *b = block(type);
    sbuf t = {0};
    sb_add(&t, text ? text : "", text ? len : 0);
    cJSON_AddStringToObject(b, key, t.p ? t.p : "");
    sb_free(&t);
    if (!strcmp(type, "thinking")) cJSON_AddStringToObject(b, "signature", "");
    return b;
}

static cJSON *tool_block(const a_gen *a, int k, const char *name, cJSON *input) {
    char id[96];
    tool_id(a, k, id, sizeof id);
    cJSON *b = block("tool_use");
    cJSON_AddStringToObject(b, "id", id);
    cJSON_AddStringToObject(b, "name", name);
    cJSON_AddItemToObject(b, "input", input);
    return b;
}

/* The whole Message: thinking, text, then the tool_use blocks. */
static cJSON *message_json(const a_gen *a, const http_gen_report *r) {
    cJSON *o = message_head(a), *content = cJSON_GetObjectItemCaseSensitive(o, "content");
    int n_calls = r->calls ? toolcall_count(r->calls) : 0;
    if (r->thinking_len) cJSON_AddItemToArray(content, text_block("thinking", r->thinking, r->thinking_len, "thinking"));
    if (r->len || (!n_calls && !r->thinking_len)) cJSON_AddItemToArray(content, text_block("text", r->text, r->len, "text"));
    for (int k = 0; k < n_calls; k++)
        cJSON_AddItemToArray(content, tool_block(a, k, toolcall_name(r->calls, k),
                                                 call_input(toolcall_arguments(r->calls, k))));
    cJSON_AddStringToObject(o, "stop_reason", stop_reason(a, r));
    cJSON_AddNullToObject(o, "stop_sequence");
    cJSON_AddItemToObject(o, "usage", usage(r->prompt_tokens, r->n_tokens));
    return o;
}

static void close_block(a_gen *a, sbuf *out) {
    if (a->open == OPEN_NONE) return;
    cJSON *o = ev("content_block_stop");
    cJSON_AddNumberToObject(o, "index", a->n_blocks - 1);
    emit(out, o);
    a->open = OPEN_NONE;
}

/* Opens a block of that kind (b: its start form, taken) unless one is open. */
static void open_block(a_gen *a, int kind, cJSON *b, sbuf *out) {
    if (a->open == kind && kind != OPEN_TOOL) {
        cJSON_Delete(b);
        return;
    }
    close_block(a, out);
    cJSON *o = ev("content_block_start");
    cJSON_AddNumberToObject(o, "index", a->n_blocks++);
    cJSON_AddItemToObject(o, "content_block", b);
    emit(out, o);
    a->open = kind;
}

static void delta(a_gen *a, const char *type, const char *key, const char *text, size_t len, sbuf *out) {
    cJSON *o = ev("content_block_delta");
    cJSON_AddNumberToObject(o, "index", a->n_blocks - 1);
    cJSON *d = cJSON_AddObjectToObject(o, "delta");
    cJSON_AddStringToObject(d, "type", type);
    sbuf t = {0};
    sb_add(&t, text, len);
    cJSON_AddStringToObject(d, key, t.p ? t.p : "");
    sb_free(&t);
    emit(out, o);
}

static void on_begin(void *ctx, const http_gen_report *r, sbuf *out) {
    cJSON *m = message_head(ctx), *o = ev("message_start");
    cJSON_AddNullToObject(m, "stop_reason");
    cJSON_AddNullToObject(m, "stop_sequence");
    cJSON_AddItemToObject(m, "usage", usage(r->prompt_tokens, 0));
    cJSON_AddItemToObject(o, "message", m);
    emit(out, o);
    emit(out, ev("ping"));
}

static void on_piece(void *ctx, const http_gen_report *r, sbuf *out) {
    a_gen *a = ctx;
    if (r->thinking_len) {
        open_block(a, OPEN_THINKING, text_block("thinking", "", 0, "thinking"), out);
        delta(a, "thinking_delta", "thinking", r->thinking, r->thinking_len, out);
    }
    if (r->len) {
        open_block(a, OPEN_TEXT, text_block("text", "", 0, "text"), out);
        delta(a, "text_delta", "text", r->text, r->len, out);
    }
}

static void on_call(void *ctx, int k, const char *name, const char *args, size_t len, sbuf *out) {
    a_gen *a = ctx;
    if (name) open_block(a, OPEN_TOOL, tool_block(a, k, name, cJSON_CreateObject()), out);
    else if (len) delta(a, "input_json_delta", "partial_json", args, len, out);
}

static unsigned on_end(void *ctx, const http_gen_report *r, bool stream, sbuf *out) {
    a_gen *a = ctx;
    const char *msg = r->error ? r->error : "the generation failed";
    if (!stream) {
        if (r->finish == FINISH_ERROR) {
            error_body(out, MHD_HTTP_INTERNAL_SERVER_ERROR, msg);
            return MHD_HTTP_INTERNAL_SERVER_ERROR;
        }
        cJSON *o = message_json(a, r);
        char *txt = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (txt) sb_str(out, txt);
        else out->oom = true;
        free(txt);
        return MHD_HTTP_OK;
    }
    close_block(a, out);
    if (r->finish == FINISH_ERROR) { /* Anthropic's error event: the SDKs raise it */
        cJSON *o = ev("error"), *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "type", "api_error");
        cJSON_AddStringToObject(e, "message", msg);
        emit(out, o);
        return MHD_HTTP_OK;
    }
    cJSON *o = ev("message_delta"), *d = cJSON_AddObjectToObject(o, "delta");
    cJSON_AddStringToObject(d, "stop_reason", stop_reason(a, r));
    cJSON_AddNullToObject(d, "stop_sequence");
    cJSON_AddItemToObject(o, "usage", usage(r->prompt_tokens, r->n_tokens));
    emit(out, o);
    emit(out, ev("message_stop"));
    return MHD_HTTP_OK;
}

static const http_format anthropic_format = {
    .stream_type = "text/event-stream",
    .begin = on_begin,
    .piece = on_piece,
    .call = on_call,
    .end = on_end,
    .error = srv_anthropic_error,
    .free_ctx = free,
};

/* On the server thread: the read request refused, counted or run. */
static enum MHD_Result a_start(srv *s, struct MHD_Connection *mc, void *ready, http_pending *pending) {
    a_read *r = ready;
    if (!r) return MHD_NO;
    enum MHD_Result ret;
    a_gen *a = NULL;
    if (r->status) ret = srv_anthropic_error(mc, r->status, r->error);
    else if (r->count) {
        char body[48];
        int n = snprintf(body, sizeof body, "{\"input_tokens\":%d}", r->g.req.n_prompt);
        ret = srv_http_json(mc, MHD_HTTP_OK, body, (size_t)n);
    } else if (!(a = calloc(1, sizeof *a))) ret = MHD_NO;
    else {
        snprintf(a->id, sizeof a->id, "msg_%llx%05x", (long long)time(NULL), g_counter++ & 0xFFFFF);
        snprintf(a->model, sizeof a->model, "%s", s->m.name);
        a->stop_sequences = r->stop_sequences;
        ret = srv_http_generate_as(s, mc, &anthropic_format, a, &r->g, r->stream, &pending->gen); /* takes g */
    }
    a_discard(r);
    return ret;
}

const http_prep srv_anthropic_prep = {a_prepare, a_start, a_discard};

int srv_anthropic_which(const char *url) { return !strcmp(url, "/v1/messages/count_tokens") ? A_COUNT : A_MESSAGES; }
