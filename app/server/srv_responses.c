/* srv_responses.c — OpenAI's Responses API on llmchat's server: POST
 * /v1/responses, answered with one Response object or streamed as the
 * Responses events (response.created ... response.completed). A request is
 * read on a worker into a srv_gen: `input` (a string, or items: messages with
 * text parts, function_call and function_call_output) and `instructions`
 * become the chat messages srv_gen_chat takes, the flat function tools
 * OpenAI's chat tools for srv_gen_tools, text.format a JSON grammar; the
 * generation runs through srv_http_gen.c (srv_http_generate_as) with this
 * file's http_format writing the output items: reasoning (a thinking model's),
 * message, function_call. previous_response_id continues a conversation the
 * server still remembers (srv_memo.c). Errors are OpenAI's shape. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>

#include "app/server/srv_http.h"

static const cJSON *field(const cJSON *j, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, name);
    return cJSON_IsNull(f) ? NULL : f;
}

static const char *str_of(const cJSON *j, const char *name) {
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, name));
}

static enum MHD_Result refuse(struct MHD_Connection *mc, unsigned status, const char *msg) {
    return srv_http_error(mc, status, status >= 500 ? "server_error" : "invalid_request_error", msg);
}

/* ---- input items into OpenAI's chat messages ---- */

/* A message item's content: a string, or parts of type input_text / output_text, joined. */
static int content_text(const cJSON *c, int i, sbuf *out, llc_err *err) {
    if (cJSON_IsString(c)) {
        sb_str(out, c->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(c)) return llc_fail(err, LLC_ERR_TYPE, "input[%d].content must be a string or an array of parts", i);
    int k = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, c) {
        const char *type = str_of(p, "type"), *text = str_of(p, "text");
        if (type && strcmp(type, "input_text") && strcmp(type, "output_text"))
            return llc_fail(err, LLC_ERR_TYPE, "input[%d].content[%d]: parts of type '%.40s' are not supported "
                            "(the model reads text only)", i, k, type);
        if (!type || !text)
            return llc_fail(err, LLC_ERR_TYPE, "input[%d].content[%d] must be {\"type\": \"input_text\", \"text\": string}", i, k);
        sb_str(out, text);
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

static int read_message(const cJSON *it, int i, cJSON *out, llc_err *err) {
    const char *role = str_of(it, "role");
    if (!role || (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system") && strcmp(role, "developer")))
        return llc_fail(err, LLC_ERR_TYPE, "input[%d].role must be user, assistant, system or developer", i);
    sbuf t = {0};
    sb_add(&t, "", 0);
    int rc = content_text(cJSON_GetObjectItemCaseSensitive(it, "content"), i, &t, err);
    if (!rc && t.oom) rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    if (!rc) chat_message(out, !strcmp(role, "developer") ? "system" : role, t.p);
    sb_free(&t);
    return rc;
}

/* A function_call item: a call of the assistant turn before it (or of a new one). */
static int read_call(const cJSON *it, int i, cJSON *out, llc_err *err) {
    const char *id = str_of(it, "call_id"), *name = str_of(it, "name"), *args = str_of(it, "arguments");
    if (!id || !name || !*name || !args)
        return llc_fail(err, LLC_ERR_TYPE, "input[%d]: a function_call is {\"call_id\", \"name\", \"arguments\"} (strings)", i);
    cJSON *last = cJSON_GetArrayItem(out, cJSON_GetArraySize(out) - 1);
    const char *role = str_of(last, "role");
    if (!role || strcmp(role, "assistant")) last = chat_message(out, "assistant", "");
    cJSON *calls = cJSON_GetObjectItemCaseSensitive(last, "tool_calls");
    if (!calls) calls = cJSON_AddArrayToObject(last, "tool_calls");
    cJSON *c = cJSON_CreateObject(), *f = cJSON_AddObjectToObject(c, "function");
    cJSON_AddStringToObject(c, "id", id);
    cJSON_AddStringToObject(c, "type", "function");
    cJSON_AddStringToObject(f, "name", name);
    cJSON_AddStringToObject(f, "arguments", args);
    cJSON_AddItemToArray(calls, c);
    return 0;
}

/* A function_call_output item: the tool's answer. */
static int read_call_output(const cJSON *it, int i, cJSON *out, llc_err *err) {
    const char *id = str_of(it, "call_id");
    if (!id) return llc_fail(err, LLC_ERR_TYPE, "input[%d].call_id must be a string", i);
    sbuf t = {0};
    sb_add(&t, "", 0);
    int rc = content_text(cJSON_GetObjectItemCaseSensitive(it, "output"), i, &t, err);
    if (!rc && t.oom) rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    if (!rc) cJSON_AddStringToObject(chat_message(out, "tool", t.p), "tool_call_id", id);
    sb_free(&t);
    return rc;
}

/* `input` (a string or an array of items) appended to out as chat messages;
 * reasoning items are left out. */
static int input_items(const cJSON *input, cJSON *out, llc_err *err) {
    if (cJSON_IsString(input)) {
        chat_message(out, "user", input->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(input) || cJSON_GetArraySize(input) == 0)
        return llc_fail(err, LLC_ERR_TYPE, "'input' must be a string or a non-empty array of items");
    int i = 0, rc = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, input) {
        const char *type = str_of(it, "type");
        if (!cJSON_IsObject(it)) rc = llc_fail(err, LLC_ERR_TYPE, "input[%d] must be an object", i);
        else if (!type || !strcmp(type, "message")) rc = read_message(it, i, out, err);
        else if (!strcmp(type, "function_call")) rc = read_call(it, i, out, err);
        else if (!strcmp(type, "function_call_output")) rc = read_call_output(it, i, out, err);
        else if (strcmp(type, "reasoning"))
            rc = llc_fail(err, LLC_ERR_TYPE, "input[%d]: items of type '%.40s' are not supported (message, "
                          "function_call, function_call_output, reasoning are)", i, type);
        if (rc) return rc;
        i++;
    }
    return 0;
}

/* ---- tools, text.format, sampling ---- */

/* The flat function tools ({type: "function", name, description, parameters})
 * and tool_choice, in chat's shapes into req. */
static int convert_tools(const cJSON *j, cJSON *req, llc_err *err) {
    const cJSON *tools = field(j, "tools"), *choice = field(j, "tool_choice"), *t;
    if (tools && !cJSON_IsArray(tools))
        return llc_fail(err, LLC_ERR_TYPE, "'tools' must be an array of {type: \"function\", name, parameters}");
    cJSON *ot = cJSON_AddArrayToObject(req, "tools");
    int i = 0;
    cJSON_ArrayForEach(t, tools) {
        const char *type = str_of(t, "type");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name"), *params = field(t, "parameters");
        const cJSON *desc = field(t, "description");
        if (!type || strcmp(type, "function"))
            return llc_fail(err, LLC_ERR_TYPE, "tools[%d]: only function tools are supported, not '%.40s'", i,
                            type ? type : "(no type)");
        if (!cJSON_IsString(name) || !*name->valuestring)
            return llc_fail(err, LLC_ERR_TYPE, "tools[%d].name must be a non-empty string", i);
        if (params && !cJSON_IsObject(params))
            return llc_fail(err, LLC_ERR_TYPE, "tools[%d].parameters must be a JSON schema object", i);
        if (desc && !cJSON_IsString(desc)) return llc_fail(err, LLC_ERR_TYPE, "tools[%d].description must be a string", i);
        cJSON *o = cJSON_CreateObject(), *f = cJSON_AddObjectToObject(o, "function");
        cJSON_AddStringToObject(o, "type", "function");
        cJSON_AddStringToObject(f, "name", name->valuestring);
        if (desc) cJSON_AddStringToObject(f, "description", desc->valuestring);
        if (params) cJSON_AddItemToObject(f, "parameters", cJSON_Duplicate(params, true));
        cJSON_AddItemToArray(ot, o);
        i++;
    }
    if (cJSON_IsString(choice)) return cJSON_AddItemToObject(req, "tool_choice", cJSON_Duplicate(choice, true)), 0;
    if (!choice) return 0;
    const char *type = str_of(choice, "type"), *name = str_of(choice, "name");
    if (!type || strcmp(type, "function") || !name)
        return llc_fail(err, LLC_ERR_TYPE, "'tool_choice' must be \"none\", \"auto\", \"required\" or "
                        "{\"type\": \"function\", \"name\": ...}");
    cJSON *c = cJSON_AddObjectToObject(req, "tool_choice");
    cJSON_AddStringToObject(c, "type", "function");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(c, "function"), "name", name);
    return 0;
}

/* text.format: text (the default), json_object, or json_schema {name, schema, strict}. */
static int text_format(const cJSON *j, srv_gen *g, llc_err *err) {
    const cJSON *text = field(j, "text"), *format = field(text, "format");
    if (text && !cJSON_IsObject(text)) return llc_fail(err, LLC_ERR_TYPE, "'text' must be an object");
    if (!format) return 0;
    const char *type = str_of(format, "type");
    if (type && !strcmp(type, "text")) return 0;
    if (type && !strcmp(type, "json_object")) return srv_gen_json_grammar(NULL, "text.format", g, err);
    if (type && !strcmp(type, "json_schema")) {
        const cJSON *schema = field(format, "schema");
        return srv_gen_json_grammar(schema, "text.format.schema", g, err);
    }
    return llc_fail(err, LLC_ERR_TYPE, "'text.format.type' must be text, json_object or json_schema");
}

/* temperature, top_p and max_output_tokens, in the Ollama dialect's names for srv_gen_params. */
static int sampling(const srv_model *m, const cJSON *j, srv_gen *g, llc_err *err) {
    const cJSON *max = field(j, "max_output_tokens");
    if (max && (!cJSON_IsNumber(max) || max->valuedouble < 1 || max->valuedouble > (1 << 24) ||
                max->valuedouble != floor(max->valuedouble)))
        return llc_fail(err, LLC_ERR_RANGE, "'max_output_tokens' must be a positive integer");
    cJSON *p = cJSON_CreateObject();
    if (!p) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    static const char *const names[] = {"temperature", "top_p"};
    for (size_t i = 0; i < LLC_ARRAY_LEN(names); i++)
        if (field(j, names[i])) cJSON_AddItemToObject(p, names[i], cJSON_Duplicate(field(j, names[i]), true));
    if (max) cJSON_AddNumberToObject(p, "num_predict", max->valuedouble);
    int rc = srv_gen_params(m, SRV_OLLAMA, p, g, err);
    cJSON_Delete(p);
    return rc;
}

/* reasoning.effort: the template variable (gpt-oss's levels). */
static int reasoning_effort(const cJSON *j, srv_gen *g, llc_err *err) {
    const cJSON *r = field(j, "reasoning"), *effort = field(r, "effort");
    if (r && !cJSON_IsObject(r)) return llc_fail(err, LLC_ERR_TYPE, "'reasoning' must be an object");
    if (!effort) return 0;
    if (!cJSON_IsString(effort)) return llc_fail(err, LLC_ERR_TYPE, "'reasoning.effort' must be low, medium or high");
    return srv_gen_reasoning_effort(effort->valuestring, g, err);
}

/* ---- the request ---- */

typedef struct r_read {
    bool stream;
    unsigned status;    /* an error answer (0: none) */
    char error[512];
    srv_gen g;
    cJSON *conv;        /* the conversation to remember with the answer (NULL: store false) */
    cJSON *echo;        /* the request's fields a Response object repeats */
} r_read;

static void r_fail(r_read *r, int rc, unsigned status, const char *msg) {
    snprintf(r->error, sizeof r->error, "%s", msg);
    r->status = status ? status : srv_http_status_of(rc);
}

/* The conversation so far: what previous_response_id remembers (or []). */
static int previous(const srv_model *m, const cJSON *j, cJSON **out, llc_err *err) {
    const cJSON *prev = field(j, "previous_response_id");
    if (!prev) return (*out = cJSON_CreateArray()) ? 0 : llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    if (!cJSON_IsString(prev)) return llc_fail(err, LLC_ERR_TYPE, "'previous_response_id' must be a string");
    char *text = srv_memo_get(m->memo, prev->valuestring);
    *out = text ? cJSON_Parse(text) : NULL;
    free(text);
    if (!*out)
        return llc_fail(err, LLC_ERR_NOTFOUND, "previous_response_id: no response '%.64s' in the server's memory "
                        "(it keeps the last %d)", prev->valuestring, SRV_MEMO_ENTRIES);
    return 0;
}

/* The Response object's fields that repeat the request. */
static cJSON *echo_fields(const cJSON *j) {
    cJSON *e = cJSON_CreateObject();
    static const char *const names[] = {"instructions", "max_output_tokens", "previous_response_id",
                                        "temperature", "top_p", "tool_choice", "tools", "metadata"};
    for (size_t i = 0; i < LLC_ARRAY_LEN(names); i++) {
        const cJSON *f = field(j, names[i]);
        cJSON_AddItemToObject(e, names[i], f ? cJSON_Duplicate(f, true) : cJSON_CreateNull());
    }
    if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(e, "tool_choice")))
        cJSON_ReplaceItemInObjectCaseSensitive(e, "tool_choice", cJSON_CreateString("auto"));
    if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(e, "tools")))
        cJSON_ReplaceItemInObjectCaseSensitive(e, "tools", cJSON_CreateArray());
    const cJSON *text = field(j, "text");
    cJSON_AddItemToObject(e, "text", text ? cJSON_Duplicate(text, true) : cJSON_Parse("{\"format\":{\"type\":\"text\"}}"));
    return e;
}

/* On a worker: request j into r. */
static void read_request(const srv_model *m, const cJSON *j, r_read *r) {
    llc_err err = {{0}};
    if (!cJSON_IsObject(j)) return r_fail(r, LLC_ERR_TYPE, 0, "the request must be a JSON object");
    const cJSON *stream = field(j, "stream"), *store = field(j, "store"), *instr = field(j, "instructions");
    if (stream && !cJSON_IsBool(stream)) return r_fail(r, LLC_ERR_TYPE, 0, "'stream' must be true or false");
    if (store && !cJSON_IsBool(store)) return r_fail(r, LLC_ERR_TYPE, 0, "'store' must be true or false");
    if (instr && !cJSON_IsString(instr)) return r_fail(r, LLC_ERR_TYPE, 0, "'instructions' must be a string");
    if (!field(j, "input")) return r_fail(r, LLC_ERR_TYPE, 0, "'input' is required");
    r->stream = cJSON_IsTrue(stream);
    cJSON *req = cJSON_CreateObject(), *turns = NULL, *msgs = cJSON_CreateArray();
    int rc = req && msgs ? 0 : llc_fail(&err, LLC_ERR_NOMEM, "out of memory");
    if (!rc) rc = sampling(m, j, &r->g, &err);
    if (!rc) rc = text_format(j, &r->g, &err);
    if (!rc) rc = reasoning_effort(j, &r->g, &err);
    if (!rc) rc = convert_tools(j, req, &err);
    if (!rc) rc = srv_gen_tools(req, &r->g, &err);
    if (!rc && (rc = previous(m, j, &turns, &err)) == LLC_ERR_NOTFOUND) {
        cJSON_Delete(req);
        cJSON_Delete(msgs);
        return r_fail(r, rc, MHD_HTTP_NOT_FOUND, err.msg);
    }
    if (!rc) rc = input_items(field(j, "input"), turns, &err);
    if (!rc && instr) chat_message(msgs, "system", instr->valuestring); /* (not remembered: OpenAI's rule) */
    for (const cJSON *c = turns ? turns->child : NULL; !rc && c; c = c->next) cJSON_AddItemToArray(msgs, cJSON_Duplicate(c, true));
    if (!rc) rc = srv_gen_chat(m, msgs, &r->g, &err);
    if (!rc) rc = srv_gen_reasoning(m, j, &r->g, &err);
    cJSON_Delete(req);
    cJSON_Delete(msgs);
    if (rc) {
        cJSON_Delete(turns);
        return r_fail(r, rc, 0, err.msg);
    }
    r->conv = cJSON_IsFalse(store) ? (cJSON_Delete(turns), NULL) : turns;
    r->echo = echo_fields(j);
    cJSON_AddBoolToObject(r->echo, "store", !cJSON_IsFalse(store));
}

static void *r_prepare(const srv_model *m, int which, const char *body, size_t len) {
    (void)which;
    r_read *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    srv_gen_init(&r->g);
    cJSON *j = NULL;
    if (!srv_utf8_valid(body, len)) r_fail(r, LLC_ERR_TYPE, 0, "the body is not valid UTF-8");
    else if (srv_json_has_nul(body, len)) r_fail(r, LLC_ERR_TYPE, 0, NUL_REFUSED);
    else if (!(j = cJSON_ParseWithLength(body, len))) r_fail(r, LLC_ERR_TYPE, 0, "the body is not valid JSON");
    else read_request(m, j, r);
    cJSON_Delete(j);
    return r;
}

static void r_discard(void *ready) {
    r_read *r = ready;
    srv_gen_free(&r->g);
    cJSON_Delete(r->conv);
    cJSON_Delete(r->echo);
    free(r);
}

/* ---- the answer ---- */

enum { OPEN_NONE, OPEN_REASONING, OPEN_MESSAGE, OPEN_CALL };

/* A Response being written: its output items (a stream: those closed so far)
 * and the item open. */
typedef struct r_gen {
    char id[48], model[128];
    long long created;
    cJSON *echo;      /* the request's fields it repeats (taken) */
    cJSON *conv;      /* the conversation to remember with the answer, or NULL */
    srv_memo *memo;
    cJSON *output;    /* the output items */
    int seq;          /* the next event's sequence_number */
    int open;         /* OPEN_*: the item at index cJSON_GetArraySize(output), if any */
    sbuf text;        /* the open item's text or arguments so far */
    char item_id[96], call_id[96], name[260];
} r_gen;

static unsigned g_counter;

static void r_gen_free(void *ctx) {
    r_gen *a = ctx;
    cJSON_Delete(a->echo);
    cJSON_Delete(a->conv);
    cJSON_Delete(a->output);
    sb_free(&a->text);
    free(a);
}

static cJSON *ev(r_gen *a, const char *type) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", type);
    cJSON_AddNumberToObject(o, "sequence_number", a->seq++);
    return o;
}

/* Writes `event: TYPE` and `data: o` (o taken). */
static void emit(sbuf *out, cJSON *o) {
    const char *type = str_of(o, "type");
    char *txt = type ? cJSON_PrintUnformatted(o) : NULL;
    if (txt) sb_printf(out, "event: %s\ndata: %s\n\n", type, txt);
    else out->oom = true;
    free(txt);
    cJSON_Delete(o);
}

static cJSON *string_of(const char *p, size_t n) {
    sbuf t = {0};
    sb_add(&t, p ? p : "", p ? n : 0);
    cJSON *s = cJSON_CreateString(t.p ? t.p : "");
    sb_free(&t);
    return s;
}

static cJSON *reasoning_item(const char *id, const char *text, size_t len) {
    cJSON *it = cJSON_CreateObject(), *c = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "type", "reasoning");
    cJSON_AddArrayToObject(it, "summary");
    cJSON_AddStringToObject(c, "type", "reasoning_text");
    cJSON_AddItemToObject(c, "text", string_of(text, len));
    cJSON_AddItemToArray(cJSON_AddArrayToObject(it, "content"), c);
    return it;
}

static cJSON *text_part(const char *text, size_t len) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "type", "output_text");
    cJSON_AddItemToObject(p, "text", string_of(text, len));
    cJSON_AddArrayToObject(p, "annotations");
    return p;
}

/* A message item; text NULL: in progress, no content yet. */
static cJSON *message_item(const char *id, const char *text, size_t len) {
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "type", "message");
    cJSON_AddStringToObject(it, "status", text ? "completed" : "in_progress");
    cJSON_AddStringToObject(it, "role", "assistant");
    cJSON *c = cJSON_AddArrayToObject(it, "content");
    if (text) cJSON_AddItemToArray(c, text_part(text, len));
    return it;
}

static cJSON *call_item(const char *id, const char *call_id, const char *name, const char *args, size_t len, bool done) {
    cJSON *it = cJSON_CreateObject();
    cJSON_AddStringToObject(it, "id", id);
    cJSON_AddStringToObject(it, "type", "function_call");
    cJSON_AddStringToObject(it, "status", done ? "completed" : "in_progress");
    cJSON_AddStringToObject(it, "call_id", call_id);
    cJSON_AddStringToObject(it, "name", name);
    cJSON_AddItemToObject(it, "arguments", string_of(args, len));
    return it;
}

/* Item ids: kind, the response's id, its output index. */
static void item_id(const r_gen *a, const char *kind, char *buf, size_t n) {
    snprintf(buf, n, "%s_%s_%d", kind, a->id + 5, cJSON_GetArraySize(a->output)); /* after "resp_" */
}

static void call_ids(const r_gen *a, int k, char *item, char *call, size_t n) {
    item_id(a, "fc", item, n);
    snprintf(call, n, "call_%s_%d", a->id + 5, k);
}

/* The Response object: status from the report (NULL: in progress), the output so far. */
static cJSON *response(const r_gen *a, const http_gen_report *r) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", a->id);
    cJSON_AddStringToObject(o, "object", "response");
    cJSON_AddNumberToObject(o, "created_at", (double)a->created);
    const char *status = !r                            ? "in_progress"
                         : r->finish == FINISH_ERROR   ? "failed"
                         : r->finish == FINISH_LENGTH  ? "incomplete"
                         : r->finish == FINISH_CANCELLED ? "cancelled" : "completed";
    cJSON_AddStringToObject(o, "status", status);
    if (r && r->finish == FINISH_ERROR) {
        cJSON *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "code", "server_error");
        cJSON_AddStringToObject(e, "message", r->error ? r->error : "the generation failed");
    } else cJSON_AddNullToObject(o, "error");
    if (r && r->finish == FINISH_LENGTH)
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "incomplete_details"), "reason", "max_output_tokens");
    else cJSON_AddNullToObject(o, "incomplete_details");
    cJSON_AddStringToObject(o, "model", a->model);
    cJSON_AddItemToObject(o, "output", cJSON_Duplicate(a->output, true));
    cJSON_AddBoolToObject(o, "parallel_tool_calls", true);
    for (const cJSON *f = a->echo->child; f; f = f->next) cJSON_AddItemToObject(o, f->string, cJSON_Duplicate(f, true));
    if (!r) {
        cJSON_AddNullToObject(o, "usage");
        return o;
    }
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "input_tokens", r->prompt_tokens);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "input_tokens_details"), "cached_tokens", r->cached_tokens);
    cJSON_AddNumberToObject(u, "output_tokens", r->n_tokens);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(u, "output_tokens_details"), "reasoning_tokens", 0);
    cJSON_AddNumberToObject(u, "total_tokens", r->prompt_tokens + r->n_tokens);
    return o;
}

/* Remembers the conversation with this answer (its text and calls as one assistant turn). */
static void remember(r_gen *a) {
    if (!a->conv || !a->memo) return;
    sbuf text = {0};
    sb_add(&text, "", 0);
    cJSON *calls = cJSON_CreateArray();
    const cJSON *it;
    cJSON_ArrayForEach(it, a->output) {
        const char *type = str_of(it, "type");
        if (!strcmp(type, "message")) sb_str(&text, str_of(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(it, "content"), 0), "text"));
        if (strcmp(type, "function_call")) continue;
        cJSON *c = cJSON_CreateObject(), *f = cJSON_AddObjectToObject(c, "function");
        cJSON_AddStringToObject(c, "id", str_of(it, "call_id"));
        cJSON_AddStringToObject(c, "type", "function");
        cJSON_AddStringToObject(f, "name", str_of(it, "name"));
        cJSON_AddStringToObject(f, "arguments", str_of(it, "arguments"));
        cJSON_AddItemToArray(calls, c);
    }
    cJSON *m = chat_message(a->conv, "assistant", text.p);
    if (cJSON_GetArraySize(calls) > 0) cJSON_AddItemToObject(m, "tool_calls", calls);
    else cJSON_Delete(calls);
    sb_free(&text);
    char *txt = cJSON_PrintUnformatted(a->conv);
    if (txt) srv_memo_put(a->memo, a->id, txt); /* (best effort: too big, and it is not remembered) */
    free(txt);
}

/* ---- streaming ---- */

static void item_event(r_gen *a, const char *type, cJSON *item, sbuf *out) {
    cJSON *o = ev(a, type);
    cJSON_AddNumberToObject(o, "output_index", cJSON_GetArraySize(a->output));
    cJSON_AddItemToObject(o, "item", item);
    emit(out, o);
}

/* An event about the open item: item_id, output_index (and content_index). */
static cJSON *open_event(r_gen *a, const char *type, bool content) {
    cJSON *o = ev(a, type);
    cJSON_AddStringToObject(o, "item_id", a->item_id);
    cJSON_AddNumberToObject(o, "output_index", cJSON_GetArraySize(a->output));
    if (content) cJSON_AddNumberToObject(o, "content_index", 0);
    return o;
}

/* Closes the open item: its .done events, then it joins the output. */
static void close_item(r_gen *a, sbuf *out) {
    if (a->open == OPEN_NONE) return;
    const char *t = a->text.p ? a->text.p : "";
    cJSON *item = NULL, *o;
    if (a->open == OPEN_REASONING) {
        o = open_event(a, "response.reasoning_text.done", true);
        cJSON_AddStringToObject(o, "text", t);
        emit(out, o);
        item = reasoning_item(a->item_id, t, a->text.len);
    } else if (a->open == OPEN_MESSAGE) {
        o = open_event(a, "response.output_text.done", true);
        cJSON_AddStringToObject(o, "text", t);
        emit(out, o);
        o = open_event(a, "response.content_part.done", true);
        cJSON_AddItemToObject(o, "part", text_part(t, a->text.len));
        emit(out, o);
        item = message_item(a->item_id, t, a->text.len);
    } else {
        o = open_event(a, "response.function_call_arguments.done", false);
        cJSON_AddStringToObject(o, "arguments", t);
        emit(out, o);
        item = call_item(a->item_id, a->call_id, a->name, t, a->text.len, true);
    }
    item_event(a, "response.output_item.done", cJSON_Duplicate(item, true), out);
    cJSON_AddItemToArray(a->output, item);
    a->open = OPEN_NONE;
    a->text.len = 0;
}

/* Opens a reasoning or message item unless one of that kind is open. */
static void open_item(r_gen *a, int kind, sbuf *out) {
    if (a->open == kind) return;
    close_item(a, out);
    item_id(a, kind == OPEN_REASONING ? "rs" : "msg", a->item_id, sizeof a->item_id);
    if (kind == OPEN_REASONING) {
        cJSON *it = reasoning_item(a->item_id, "", 0);
        cJSON_ReplaceItemInObjectCaseSensitive(it, "content", cJSON_CreateArray());
        item_event(a, "response.output_item.added", it, out);
    } else {
        item_event(a, "response.output_item.added", message_item(a->item_id, NULL, 0), out);
        cJSON *o = open_event(a, "response.content_part.added", true);
        cJSON_AddItemToObject(o, "part", text_part("", 0));
        emit(out, o);
    }
    a->open = kind;
}

static void delta(r_gen *a, const char *type, bool content, const char *text, size_t len, sbuf *out) {
    cJSON *o = open_event(a, type, content);
    cJSON_AddItemToObject(o, "delta", string_of(text, len));
    emit(out, o);
    sb_add(&a->text, text, len);
}

static void on_begin(void *ctx, const http_gen_report *r, sbuf *out) {
    r_gen *a = ctx;
    static const char *const kinds[] = {"response.created", "response.in_progress"};
    for (int i = 0; i < 2; i++) {
        cJSON *o = ev(a, kinds[i]);
        cJSON_AddItemToObject(o, "response", response(a, NULL));
        emit(out, o);
    }
}

static void on_piece(void *ctx, const http_gen_report *r, sbuf *out) {
    r_gen *a = ctx;
    if (r->thinking_len) {
        open_item(a, OPEN_REASONING, out);
        delta(a, "response.reasoning_text.delta", true, r->thinking, r->thinking_len, out);
    }
    if (r->len) {
        open_item(a, OPEN_MESSAGE, out);
        delta(a, "response.output_text.delta", true, r->text, r->len, out);
    }
}

static void on_call(void *ctx, int k, const char *name, const char *args, size_t len, sbuf *out) {
    r_gen *a = ctx;
    if (name) {
        close_item(a, out);
        call_ids(a, k, a->item_id, a->call_id, sizeof a->item_id);
        snprintf(a->name, sizeof a->name, "%s", name);
        item_event(a, "response.output_item.added", call_item(a->item_id, a->call_id, name, "", 0, false), out);
        a->open = OPEN_CALL;
    } else if (len && a->open == OPEN_CALL) {
        delta(a, "response.function_call_arguments.delta", false, args, len, out);
    }
}

/* A one-piece answer's output items, from the report. */
static void output_of(r_gen *a, const http_gen_report *r) {
    char id[96], call[96];
    int n_calls = r->calls ? toolcall_count(r->calls) : 0;
    if (r->thinking_len) {
        item_id(a, "rs", id, sizeof id);
        cJSON_AddItemToArray(a->output, reasoning_item(id, r->thinking, r->thinking_len));
    }
    if (r->len || !n_calls) {
        item_id(a, "msg", id, sizeof id);
        cJSON_AddItemToArray(a->output, message_item(id, r->text, r->len));
    }
    for (int k = 0; k < n_calls; k++) {
        call_ids(a, k, id, call, sizeof id);
        const char *args = toolcall_arguments(r->calls, k);
        cJSON_AddItemToArray(a->output, call_item(id, call, toolcall_name(r->calls, k), args, strlen(args), true));
    }
}

static unsigned on_end(void *ctx, const http_gen_report *r, bool stream, sbuf *out) {
    r_gen *a = ctx;
    if (stream) close_item(a, out);
    else output_of(a, r);
    if (r->finish != FINISH_ERROR) remember(a);
    cJSON *resp = response(a, r);
    if (stream) {
        const char *kind = r->finish == FINISH_ERROR    ? "response.failed"
                           : r->finish == FINISH_LENGTH ? "response.incomplete" : "response.completed";
        cJSON *o = ev(a, kind);
        cJSON_AddItemToObject(o, "response", resp);
        emit(out, o);
        return MHD_HTTP_OK;
    }
    if (r->finish == FINISH_ERROR) {
        cJSON_Delete(resp);
        const char *msg = r->error ? r->error : "the generation failed";
        sb_str(out, "{\"error\":{\"code\":500,\"message\":");
        sb_json_str(out, msg, strlen(msg));
        sb_str(out, ",\"type\":\"server_error\"}}");
        return MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
    char *txt = cJSON_PrintUnformatted(resp);
    cJSON_Delete(resp);
    if (txt) sb_str(out, txt);
    else out->oom = true;
    free(txt);
    return MHD_HTTP_OK;
}

static const http_format responses_format = {
    .stream_type = "text/event-stream",
    .begin = on_begin,
    .piece = on_piece,
    .call = on_call,
    .end = on_end,
    .error = refuse,
    .free_ctx = r_gen_free,
};

/* On the server thread: the read request refused or run. */
static enum MHD_Result r_start(srv *s, struct MHD_Connection *mc, void *ready, http_pending *pending) {
    r_read *r = ready;
    if (!r) return MHD_NO;
    enum MHD_Result ret;
    r_gen *a = NULL;
    if (r->status) ret = refuse(mc, r->status, r->error);
    else if (!(a = calloc(1, sizeof *a)) || !(a->output = cJSON_CreateArray())) {
        free(a);
        ret = MHD_NO;
    } else {
        a->created = (long long)time(NULL);
        uint64_t salt = 0; /* ids name remembered conversations: not guessable */
        if (getrandom(&salt, sizeof salt, GRND_NONBLOCK) != (ssize_t)sizeof salt) salt ^= (uint64_t)(uintptr_t)a;
        snprintf(a->id, sizeof a->id, "resp_%llx%05x%016llx", a->created, g_counter++ & 0xFFFFF,
                 (unsigned long long)salt);
        snprintf(a->model, sizeof a->model, "%s", s->m.name);
        a->echo = r->echo, r->echo = NULL;
        a->conv = r->conv, r->conv = NULL;
        a->memo = s->m.memo;
        ret = srv_http_generate_as(s, mc, &responses_format, a, &r->g, r->stream, &pending->gen); /* takes g */
    }
    r_discard(r);
    return ret;
}

const http_prep srv_responses_prep = {r_prepare, r_start, r_discard};
