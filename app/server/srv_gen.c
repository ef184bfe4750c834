/* srv_gen.c — turning a JSON request into an engine request: sampling and
 * length parameters in each dialect (llmchat protocol, OpenAI, llama-server),
 * and the prompt of a conversation, a raw text or a fill-in-the-middle request.
 * Shared by the NDJSON protocol and the HTTP endpoints. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/server/srv_internal.h"
#include "engine/grammar/grammar.h"
#include "engine/grammar/json_schema.h"
#include "engine/template/prompt.h"
#include "engine/template/toolcall_xml.h"

void srv_gen_init(srv_gen *g) {
    memset(g, 0, sizeof *g);
    g->req.sampling = sampler_params_default();
    g->req.n = 1;
}

void srv_gen_free(srv_gen *g) {
    free(g->ids);
    for (int i = 0; i < g->n_stops; i++) free(g->stops[i]);
    free(g->stops);
    cJSON_Delete(g->tools);
    cJSON_Delete(g->template_vars);
    grammar_free(g->grammar);
    memset(g, 0, sizeof *g);
}

const char *srv_finish_name(engine_finish f) {
    switch (f) {
    case FINISH_STOP: return "stop";
    case FINISH_LENGTH: return "length";
    case FINISH_CANCELLED: return "cancelled";
    case FINISH_ERROR: return "error";
    default: return "stop";
    }
}

/* ---- fields ---- */

static const cJSON *field(const cJSON *j, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, name);
    return cJSON_IsNull(f) ? NULL : f;
}

/* A number field within [lo, hi]: 0 and *set when present, 0 when absent,
 * negative with err when of the wrong type or out of range. */
static int get_num(const cJSON *j, const char *name, double lo, double hi, bool integer,
                   double *out, bool *set, llc_err *err) {
    const cJSON *f = field(j, name);
    if (set) *set = false;
    if (!f) return 0;
    if (!cJSON_IsNumber(f))
        return llc_fail(err, LLC_ERR_TYPE, "'%s' must be a number", name);
    double v = f->valuedouble;
    if (!isfinite(v) || (integer && v != floor(v)))
        return llc_fail(err, LLC_ERR_TYPE, "'%s' must be an integer", name);
    if (v < lo || v > hi)
        return llc_fail(err, LLC_ERR_RANGE, "'%s' is %g; it must be within %g..%g", name, v, lo, hi);
    *out = v;
    if (set) *set = true;
    return 0;
}

static int get_float(const cJSON *j, const char *name, double lo, double hi, float *dst, llc_err *err) {
    double v;
    bool set;
    int rc = get_num(j, name, lo, hi, false, &v, &set, err);
    if (!rc && set) *dst = (float)v;
    return rc;
}

static int get_int(const cJSON *j, const char *name, double lo, double hi, int *dst, llc_err *err) {
    double v;
    bool set;
    int rc = get_num(j, name, lo, hi, true, &v, &set, err);
    if (!rc && set) *dst = (int)v;
    return rc;
}

static int get_bool(const cJSON *j, const char *name, bool *dst, llc_err *err) {
    const cJSON *f = field(j, name);
    if (!f) return 0;
    if (!cJSON_IsBool(f)) return llc_fail(err, LLC_ERR_TYPE, "'%s' must be true or false", name);
    *dst = cJSON_IsTrue(f);
    return 0;
}

static int add_stop(srv_gen *g, const char *s, size_t len) {
    if (len == 0) return 0;
    char **p = realloc(g->stops, (size_t)(g->n_stops + 1) * sizeof *p);
    if (!p) return LLC_ERR_NOMEM;
    g->stops = p;
    if (!(p[g->n_stops] = strndup(s, len))) return LLC_ERR_NOMEM;
    g->n_stops++;
    return 0;
}

static int get_stops(const cJSON *j, srv_gen *g, llc_err *err) {
    const cJSON *f = field(j, "stop");
    if (!f) return 0;
    if (cJSON_IsString(f)) {
        if (strlen(f->valuestring) > SRV_MAX_STOP_LEN)
            return llc_fail(err, LLC_ERR_RANGE, "a stop string is longer than %d bytes", SRV_MAX_STOP_LEN);
        return add_stop(g, f->valuestring, strlen(f->valuestring))
                   ? llc_fail(err, LLC_ERR_NOMEM, "out of memory") : 0;
    }
    if (!cJSON_IsArray(f)) return llc_fail(err, LLC_ERR_TYPE, "'stop' must be a string or an array of strings");
    if (cJSON_GetArraySize(f) > SRV_MAX_STOPS)
        return llc_fail(err, LLC_ERR_RANGE, "at most %d stop strings", SRV_MAX_STOPS);
    const cJSON *e;
    cJSON_ArrayForEach(e, f) {
        if (!cJSON_IsString(e)) return llc_fail(err, LLC_ERR_TYPE, "'stop' must be a string or an array of strings");
        if (strlen(e->valuestring) > SRV_MAX_STOP_LEN)
            return llc_fail(err, LLC_ERR_RANGE, "a stop string is longer than %d bytes", SRV_MAX_STOP_LEN);
        if (add_stop(g, e->valuestring, strlen(e->valuestring))) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    return 0;
}

/* llama-server's "samplers": the truncation steps not named are off, and
 * without "temperature" the distribution is sampled at temperature 1. */
static int get_samplers(const cJSON *j, sampler_params *sp, llc_err *err) {
    const cJSON *f = field(j, "samplers");
    if (!f) return 0;
    if (!cJSON_IsArray(f)) return llc_fail(err, LLC_ERR_TYPE, "'samplers' must be an array of names");
    bool k = false, p = false, minp = false, temp = false;
    const cJSON *e;
    cJSON_ArrayForEach(e, f) {
        if (!cJSON_IsString(e)) return llc_fail(err, LLC_ERR_TYPE, "'samplers' must be an array of names");
        const char *n = e->valuestring;
        k |= !strcmp(n, "top_k");
        p |= !strcmp(n, "top_p");
        minp |= !strcmp(n, "min_p");
        temp |= !strcmp(n, "temperature") || !strcmp(n, "temp");
    }
    if (!k) sp->top_k = 0;
    if (!p) sp->top_p = 1;
    if (!minp) sp->min_p = 0;
    if (!temp && sp->temperature > 0) sp->temperature = 1;
    return 0;
}

int srv_gen_params(const srv_model *m, srv_dialect d, const cJSON *j, srv_gen *g, llc_err *err) {
    sampler_params *sp = &g->req.sampling;
    if (g->req.max_tokens <= 0) g->req.max_tokens = m->n_ctx; /* unless the caller set a default */
    if (!cJSON_IsObject(j)) return llc_fail(err, LLC_ERR_TYPE, "the request must be a JSON object");
    int rc = 0;
    double v;
    bool set;
    if (!rc) rc = get_float(j, "temperature", 0, 100, &sp->temperature, err);
    if (!rc) rc = get_float(j, "top_p", 0, 1, &sp->top_p, err);
    if (!rc) rc = get_int(j, "top_k", 0, 1 << 30, &sp->top_k, err);
    if (!rc) rc = get_float(j, "min_p", 0, 1, &sp->min_p, err);
    if (!rc) rc = get_float(j, "repeat_penalty", 0.01, 100, &sp->repeat_penalty, err);
    if (!rc) rc = get_int(j, "repeat_last_n", -1, 1 << 30, &sp->repeat_last_n, err);
    if (!rc) rc = get_float(j, "frequency_penalty", -2, 2, &sp->frequency_penalty, err);
    if (!rc) rc = get_float(j, "presence_penalty", -2, 2, &sp->presence_penalty, err);
    if (d != SRV_NDJSON) sp->seed = SAMPLER_SEED_RANDOM; /* as OpenAI and llama-server */
    if (!rc) rc = get_num(j, "seed", -1, 1.8e19, true, &v, &set, err);
    if (!rc && set) sp->seed = v < 0 ? SAMPLER_SEED_RANDOM : (uint64_t)v;
    if (!rc) rc = get_int(j, "n", 1, 64, &g->req.n, err);
    if (!rc && d == SRV_NDJSON) rc = get_int(j, "beam_width", 0, 16, &g->req.beam_width, err);
    if (!rc && d == SRV_NDJSON) rc = get_int(j, "priority", -1000, 1000, &g->req.priority, err);
    if (!rc && d == SRV_NDJSON) rc = get_bool(j, "return_prompt", &g->echo_prompt, err);
    if (!rc) rc = get_stops(j, g, err);
    if (rc) return rc;
    /* length */
    if (d == SRV_LLAMA) {
        if ((rc = get_num(j, "n_predict", -1e9, 1 << 24, true, &v, &set, err))) return rc;
        if (set && v == 0) g->warm_only = true, g->req.max_tokens = 1;
        else if (set && v > 0) g->req.max_tokens = (int)v;
        if ((rc = get_num(j, "t_max_predict_ms", -1e12, 1e12, false, &v, &set, err))) return rc;
        if (set && v > 0) g->t_max_predict_ms = v;
        if ((rc = get_samplers(j, sp, err))) return rc;
    } else if (d == SRV_OLLAMA) {
        /* Ollama's num_predict: a positive count; -1 (unlimited), -2 (fill the
           context) and 0 (Ollama's runner: no limit) run up to the context */
        if ((rc = get_num(j, "num_predict", -2, 1 << 24, true, &v, &set, err))) return rc;
        if (set && v > 0) g->req.max_tokens = (int)v;
    } else {
        /* 0 over HTTP: a warm-up (editor plugins send it to fill the cache):
           answered at once with no text */
        int lo = d == SRV_NDJSON ? 1 : 0;
        if ((rc = get_int(j, "max_tokens", lo, 1 << 24, &g->req.max_tokens, err))) return rc;
        if (d == SRV_OPENAI_CHAT &&
            (rc = get_int(j, "max_completion_tokens", lo, 1 << 24, &g->req.max_tokens, err)))
            return rc;
        if (g->req.max_tokens == 0) g->warm_only = true, g->req.max_tokens = 1;
    }
    /* log-probabilities */
    int top = 0;
    bool want = false;
    const cJSON *lp = field(j, "logprobs");
    if (d == SRV_LLAMA) {
        if ((rc = get_int(j, "n_probs", 0, SAMPLER_MAX_LOGPROBS, &top, err))) return rc;
        want = top > 0;
    } else if (d == SRV_OPENAI_CHAT) {
        if ((rc = get_bool(j, "logprobs", &want, err))) return rc;
        if ((rc = get_int(j, "top_logprobs", 0, SAMPLER_MAX_LOGPROBS, &top, err))) return rc;
        if (!want) top = 0;
    } else if (d == SRV_OLLAMA) {
        /* no log-probabilities in Ollama's options */
    } else if (cJSON_IsBool(lp)) { /* NDJSON and /v1/completions */
        want = cJSON_IsTrue(lp);
    } else if (lp) {
        if ((rc = get_int(j, "logprobs", 0, SAMPLER_MAX_LOGPROBS, &top, err))) return rc;
        /* NDJSON: 0 is off, as in the engine; OpenAI reports the chosen token always */
        want = d != SRV_NDJSON || top > 0;
    }
    g->logprobs = want;
    g->n_logprobs = top;
    sp->n_logprobs = want ? (top > 0 ? top : 1) : 0;
    if (g->req.beam_width > 0 && g->req.n > g->req.beam_width)
        return llc_fail(err, LLC_ERR_RANGE, "'n' (%d) cannot exceed 'beam_width' (%d)", g->req.n,
                        g->req.beam_width);
    if ((rc = srv_gen_grammar(j, g, err))) return rc;
    if (g->grammar && g->req.beam_width > 0)
        return llc_fail(err, LLC_ERR_RANGE, "structured output (grammar, json_schema, response_format) cannot be used with 'beam_width'");
    return sampler_params_check(sp, err);
}

/* ---- structured output ---- */

/* Parses GBNF text (taken) into g's grammar, replacing any: a bad grammar is
 * the request's fault, named by `what` ("'grammar': line 1, column 3: ..."). The
 * engine gets it parsed (req.parsed_grammar), so it is parsed once, here, and
 * off the server thread when the request is read on a worker. */
static int use_grammar(srv_gen *g, char *text, const char *what, llc_err *err) {
    grammar_free(g->grammar);
    g->grammar = NULL;
    g->req.parsed_grammar = NULL;
    if (!text) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    llc_err e2;
    int rc = grammar_parse(text, strlen(text), &g->grammar, &e2);
    free(text);
    if (rc == LLC_ERR_NOMEM) return llc_fail(err, rc, "out of memory");
    if (rc) return llc_fail(err, LLC_ERR_FORMAT, "%s: %s", what, e2.msg);
    g->req.parsed_grammar = g->grammar;
    return 0;
}

int srv_gen_json_grammar(const cJSON *schema, const char *field, srv_gen *g, llc_err *err) {
    char *gbnf = NULL, what[160];
    snprintf(what, sizeof what, "'%s'", field);
    if (!schema) return use_grammar(g, strdup(json_object_gbnf()), what, err);
    llc_err e2;
    if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema))
        return llc_fail(err, LLC_ERR_TYPE, "'%s' must be a JSON schema (an object)", field);
    int rc = json_schema_to_gbnf(schema, &gbnf, &e2);
    if (rc == LLC_ERR_NOMEM) return llc_fail(err, rc, "out of memory");
    if (rc) return llc_fail(err, LLC_ERR_FORMAT, "'%s': %s", field, e2.msg);
    return use_grammar(g, gbnf, what, err);
}

int srv_gen_grammar(const cJSON *j, srv_gen *g, llc_err *err) {
    const cJSON *gr = field(j, "grammar"), *js = field(j, "json_schema"), *rf = field(j, "response_format");
    const cJSON *type = rf ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
    if (rf && (!cJSON_IsObject(rf) || !cJSON_IsString(type)))
        return llc_fail(err, LLC_ERR_TYPE, "'response_format' must be an object with a string 'type'");
    if (rf && !strcmp(type->valuestring, "text")) rf = NULL; /* the default */
    if ((gr != NULL) + (js != NULL) + (rf != NULL) > 1)
        return llc_fail(err, LLC_ERR_RANGE, "give only one of 'grammar', 'json_schema' and 'response_format'");
    int rc = 0;
    if (gr) {
        if (!cJSON_IsString(gr)) return llc_fail(err, LLC_ERR_TYPE, "'grammar' must be a string (GBNF)");
        if (!gr->valuestring[0]) return 0; /* llama-server's "no grammar" */
        rc = use_grammar(g, strdup(gr->valuestring), "'grammar'", err);
    } else if (js) {
        rc = srv_gen_json_grammar(js, "json_schema", g, err);
    } else if (rf && !strcmp(type->valuestring, "json_object")) { /* a "schema" in it: llama-server's form */
        rc = srv_gen_json_grammar(field(rf, "schema"), "response_format.schema", g, err);
    } else if (rf && !strcmp(type->valuestring, "json_schema")) {
        const cJSON *spec = field(rf, "json_schema");
        const cJSON *schema = cJSON_IsObject(spec) ? field(spec, "schema") : NULL;
        if (!cJSON_IsObject(spec)) return llc_fail(err, LLC_ERR_TYPE, "'response_format.json_schema' must be an object");
        const cJSON *strict = field(spec, "strict");
        if (strict && !cJSON_IsBool(strict))
            return llc_fail(err, LLC_ERR_TYPE, "'response_format.json_schema.strict' must be true or false");
        /* OpenAI: a schema is optional; then any JSON object */
        rc = srv_gen_json_grammar(schema, "response_format.json_schema.schema", g, err);
    } else if (rf) {
        return llc_fail(err, LLC_ERR_RANGE, "'response_format.type' must be text, json_object or json_schema, not '%s'",
                        type->valuestring);
    }
    return rc;
}

/* ---- prompts ---- */

static void finalize(srv_gen *g, int n_ids) {
    g->req.prompt = g->ids;
    g->req.n_prompt = n_ids;
    g->req.stop = (const char *const *)g->stops;
    g->req.n_stop = g->n_stops;
}

static int budget_of(const srv_model *m, const srv_gen *g) {
    return prompt_budget(m->n_ctx, g->req.max_tokens);
}

/* The built prompt into g, with the template's stop strings. */
static int take_prompt(const srv_model *m, prompt *p, srv_gen *g, llc_err *err) {
    free(g->ids);
    g->ids = p->ids;
    g->n_dropped = p->n_dropped;
    for (const char *const *s = chat_stop_strings(m->tmpl); *s; s++)
        if (add_stop(g, *s, strlen(*s))) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    finalize(g, p->n_ids);
    return 0;
}

int srv_gen_chat_msgs(const srv_model *m, const chat_msg *msgs, int n, srv_gen *g, llc_err *err) {
    prompt p;
    int rc = prompt_build(m->tok, m->tmpl, msgs, n, budget_of(m, g), &p, err);
    return rc ? rc : take_prompt(m, &p, g, err);
}

/* The text of a message's content: a string, or OpenAI's array of parts
 * ({"type": "text", "text": ...}). *owned is set when the text was joined. */
static int content_text(const cJSON *c, int i, bool null_ok, const char **out, char **owned, llc_err *err) {
    *owned = NULL;
    if (cJSON_IsString(c)) {
        *out = c->valuestring;
        return 0;
    }
    if ((!c || cJSON_IsNull(c)) && null_ok) {
        *out = "";
        return 0;
    }
    if (!cJSON_IsArray(c))
        return llc_fail(err, LLC_ERR_TYPE, "messages[%d].content must be a string", i);
    sbuf b = {0};
    sb_add(&b, "", 0);
    const cJSON *part;
    int k = 0;
    cJSON_ArrayForEach(part, c) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        /* a 400, not a 501: a request with an image is wrong for this server
           whenever it is sent, and clients retry 5xx answers */
        if (cJSON_IsString(type) && strcmp(type->valuestring, "text")) {
            sb_free(&b);
            return llc_fail(err, LLC_ERR_TYPE, "messages[%d].content[%d]: content parts of type '%.40s' are not "
                            "supported (the model reads text only)", i, k, type->valuestring);
        }
        if (!cJSON_IsString(type) || !cJSON_IsString(text)) {
            sb_free(&b);
            return llc_fail(err, LLC_ERR_TYPE, "messages[%d].content[%d] must be {\"type\": \"text\", \"text\": string}", i, k);
        }
        sb_str(&b, text->valuestring);
        k++;
    }
    if (b.oom) {
        sb_free(&b);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    *out = *owned = b.p;
    return 0;
}

/* A conversation of system / user / assistant messages with text content. */
static int chat_plain(const srv_model *m, const cJSON *messages, srv_gen *g, llc_err *err) {
    int n = cJSON_GetArraySize(messages);
    if (n > 100000) return llc_fail(err, LLC_ERR_RANGE, "too many messages");
    chat_msg *msgs = calloc((size_t)n, sizeof *msgs);
    char **owned = calloc((size_t)n, sizeof *owned);
    int rc = msgs && owned ? 0 : llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, messages) {
        if (rc) break;
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(e, "role");
        if (!cJSON_IsObject(e) || !cJSON_IsString(role)) {
            rc = llc_fail(err, LLC_ERR_TYPE, "messages[%d] must be an object with a 'role' string", i);
            break;
        }
        const char *r = role->valuestring;
        if (!strcmp(r, "system") || !strcmp(r, "developer")) msgs[i].role = CHAT_SYSTEM;
        else if (!strcmp(r, "user")) msgs[i].role = CHAT_USER;
        else if (!strcmp(r, "assistant")) msgs[i].role = CHAT_ASSISTANT;
        else {
            rc = llc_fail(err, LLC_ERR_RANGE, "messages[%d].role '%.40s' is not system, user, assistant or tool", i, r);
            break;
        }
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        rc = content_text(content, i, msgs[i].role == CHAT_ASSISTANT, &msgs[i].content, &owned[i], err);
        i++;
    }
    if (!rc) rc = srv_gen_chat_msgs(m, msgs, n, g, err);
    for (int k = 0; owned && k < n; k++) free(owned[k]);
    free(owned);
    free(msgs);
    return rc;
}

/* ---- tools (OpenAI function calling) ---- */

static const char TOOL_CHOICE_SHAPE[] =
    "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";

static const char *tool_name(const cJSON *tool) {
    return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tool, "function"), "name"));
}

int srv_gen_tools(const cJSON *j, srv_gen *g, llc_err *err) {
    const cJSON *tools = field(j, "tools"), *choice = field(j, "tool_choice");
    cJSON_Delete(g->tools);
    g->tools = NULL;
    g->tools_required = false;
    if (tools && !cJSON_IsArray(tools))
        return llc_fail(err, LLC_ERR_TYPE,
                        "'tools' must be an array of {type: \"function\", function: {name, description, parameters}}");
    if (cJSON_GetArraySize(tools) > 256) return llc_fail(err, LLC_ERR_RANGE, "at most 256 tools");
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *desc = field(fn, "description"), *params = field(fn, "parameters");
        if (!cJSON_IsObject(t) || (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))))
            return llc_fail(err, LLC_ERR_TYPE, "tools[%d].type must be \"function\"", i);
        if (!cJSON_IsObject(fn)) return llc_fail(err, LLC_ERR_TYPE, "tools[%d].function must be an object", i);
        if (!cJSON_IsString(name) || !name->valuestring[0] || strlen(name->valuestring) > 256)
            return llc_fail(err, LLC_ERR_TYPE, "tools[%d].function.name must be a non-empty string", i);
        if (desc && !cJSON_IsString(desc))
            return llc_fail(err, LLC_ERR_TYPE, "tools[%d].function.description must be a string", i);
        if (params && !cJSON_IsObject(params))
            return llc_fail(err, LLC_ERR_TYPE, "tools[%d].function.parameters must be a JSON schema object", i);
        i++;
    }
    bool have = i > 0;
    const char *only = NULL; /* a named function */
    if (cJSON_IsString(choice)) {
        const char *c = choice->valuestring;
        if (strcmp(c, "none") && strcmp(c, "auto") && strcmp(c, "required"))
            return llc_fail(err, LLC_ERR_RANGE, "%s", TOOL_CHOICE_SHAPE);
        if (!strcmp(c, "none")) return 0; /* tools are not offered */
        g->tools_required = !strcmp(c, "required");
    } else if (choice) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(choice, "function");
        only = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "name"));
        if (!cJSON_IsObject(choice) || !only)
            return llc_fail(err, LLC_ERR_TYPE, "%s", TOOL_CHOICE_SHAPE);
        g->tools_required = true;
    }
    if (g->tools_required && !have) return llc_fail(err, LLC_ERR_RANGE, "'tool_choice' needs 'tools'");
    if (!have) return 0;
    g->tools = cJSON_CreateArray();
    if (!g->tools) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    cJSON_ArrayForEach(t, tools) {
        if (only && strcmp(tool_name(t), only)) continue;
        cJSON_AddItemToArray(g->tools, cJSON_Duplicate(t, true));
    }
    if (only && cJSON_GetArraySize(g->tools) == 0)
        return llc_fail(err, LLC_ERR_RANGE, "tool_choice names '%.64s', which is not one of 'tools'", only);
    return 0;
}

/* A tool call of an assistant message, checked and in OpenAI's shape. */
static cJSON *sane_call(const cJSON *c, int i, int k, llc_err *err) {
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    const cJSON *args = field(fn, "arguments"), *id = field(c, "id");
    if (!cJSON_IsObject(fn) || !cJSON_IsString(name) || !name->valuestring[0]) {
        llc_fail(err, LLC_ERR_TYPE, "messages[%d].tool_calls[%d].function.name must be a non-empty string", i, k);
        return NULL;
    }
    if (args && !cJSON_IsString(args) && !cJSON_IsObject(args)) {
        llc_fail(err, LLC_ERR_TYPE, "messages[%d].tool_calls[%d].function.arguments must be a JSON string", i, k);
        return NULL;
    }
    if (id && !cJSON_IsString(id)) {
        llc_fail(err, LLC_ERR_TYPE, "messages[%d].tool_calls[%d].id must be a string", i, k);
        return NULL;
    }
    cJSON *o = cJSON_CreateObject();
    if (id) cJSON_AddStringToObject(o, "id", id->valuestring);
    cJSON_AddStringToObject(o, "type", "function");
    cJSON *f = cJSON_AddObjectToObject(o, "function");
    cJSON_AddStringToObject(f, "name", name->valuestring);
    if (cJSON_IsObject(args)) {
        char *txt = cJSON_PrintUnformatted(args);
        cJSON_AddStringToObject(f, "arguments", txt ? txt : "{}");
        free(txt);
    } else {
        cJSON_AddStringToObject(f, "arguments", args ? args->valuestring : "{}");
    }
    return o;
}

/* The messages checked and rebuilt with string content (text parts joined);
 * *uses_tools when one is a tool answer or has tool_calls. */
static int sane_messages(const cJSON *messages, cJSON **out, bool *uses_tools, bool *has_reasoning, llc_err *err) {
    *out = NULL;
    *uses_tools = *has_reasoning = false;
    cJSON *a = cJSON_CreateArray();
    if (!a) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    int i = 0, rc = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, messages) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(e, "role");
        if (!cJSON_IsObject(e) || !cJSON_IsString(role)) {
            rc = llc_fail(err, LLC_ERR_TYPE, "messages[%d] must be an object with a 'role' string", i);
            break;
        }
        const char *r = role->valuestring;
        if (!strcmp(r, "developer")) r = "system";
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool")) {
            rc = llc_fail(err, LLC_ERR_RANGE, "messages[%d].role '%.40s' is not system, user, assistant or tool", i, r);
            break;
        }
        const cJSON *calls = field(e, "tool_calls");
        if (calls && (!cJSON_IsArray(calls) || strcmp(r, "assistant"))) {
            rc = llc_fail(err, LLC_ERR_TYPE, "messages[%d].tool_calls must be an array (of an assistant message)", i);
            break;
        }
        const char *text;
        char *owned;
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        rc = content_text(content, i, !strcmp(r, "assistant"), &text, &owned, err);
        if (rc) break;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(a, o);
        cJSON_AddStringToObject(o, "role", r);
        cJSON_AddStringToObject(o, "content", text);
        free(owned);
        const cJSON *id = field(e, "tool_call_id"), *name = field(e, "name");
        if ((id && !cJSON_IsString(id)) || (name && !cJSON_IsString(name))) {
            rc = llc_fail(err, LLC_ERR_TYPE, "messages[%d].%s must be a string", i,
                          id && !cJSON_IsString(id) ? "tool_call_id" : "name");
            break;
        }
        if (id) cJSON_AddStringToObject(o, "tool_call_id", id->valuestring);
        if (name) cJSON_AddStringToObject(o, "name", name->valuestring);
        /* an earlier answer's reasoning, for the template to show or drop (as llama-server passes it) */
        const cJSON *thought = field(e, "reasoning_content");
        if (thought && !cJSON_IsString(thought)) {
            rc = llc_fail(err, LLC_ERR_TYPE, "messages[%d].reasoning_content must be a string", i);
            break;
        }
        if (thought && thought->valuestring[0] && !strcmp(r, "assistant")) {
            cJSON_AddStringToObject(o, "reasoning_content", thought->valuestring);
            *has_reasoning = true;
        }
        if (!strcmp(r, "tool")) *uses_tools = true;
        if (cJSON_GetArraySize(calls) > 0) {
            *uses_tools = true;
            cJSON *oc = cJSON_AddArrayToObject(o, "tool_calls");
            int k = 0;
            const cJSON *c;
            cJSON_ArrayForEach(c, calls) {
                cJSON *sc = sane_call(c, i, k++, err);
                if (!sc) {
                    rc = LLC_ERR_TYPE;
                    break;
                }
                cJSON_AddItemToArray(oc, sc);
            }
            if (rc) break;
        }
        i++;
    }
    if (rc) {
        cJSON_Delete(a);
        return rc;
    }
    *out = a;
    return 0;
}

/* tool_choice "required" (or a named function) as constrained decoding: the
 * answer must be one call, in the format's markup, of an offered tool with
 * arguments valid against its parameters schema; a schema the converter
 * cannot enforce is a 400 naming the tool (never a looser grammar). HERMES and
 * GENERIC answers are <tool_call>{"name", "arguments"}</tool_call>, LLAMA3 a
 * bare {"name", "parameters"}; the XML formats (Qwen3-Coder, GLM, MiniMax)
 * their own markup (srv_tools_xml.c); MISTRAL's markers are control tokens:
 * only the prompt asks. */
static int tools_grammar(srv_gen *g, llc_err *err) {
    /* not forced: Mistral's, the formats whose name is markup outside the JSON (Kimi K2's, Solar's),
       and Kimi K3's attributes */
    if (g->tool_format == TOOLCALL_MISTRAL || g->tool_format == TOOLCALL_KIMI_K2 || g->tool_format == TOOLCALL_SOLAR ||
        g->tool_format == TOOLCALL_GEMMA4 || /* (Gemma 4's values are not JSON) */
        g->tool_format == TOOLCALL_KIMI_K3)  /* (its markup is control tokens with attributes) */
        return 0;
    if (g->grammar)
        return llc_fail(err, LLC_ERR_RANGE, "'tool_choice' \"required\" (or a named function) cannot be combined "
                                            "with 'response_format', 'grammar' or 'json_schema'");
    if (toolcall_xml_format(g->tool_format)) {
        char *gbnf = NULL;
        int rc = srv_xml_tools_grammar(g->tool_format, g->tools, &gbnf, err);
        return rc ? rc : use_grammar(g, gbnf, "the tools' grammar", err);
    }
    const bool cmd_a = g->tool_format == TOOLCALL_COMMAND_A; /* [{"tool_name": N, "parameters": {...}}] */
    const char *args_key = g->tool_format == TOOLCALL_LLAMA3 || cmd_a ? "parameters" : "arguments";
    const char *name_key = cmd_a ? "tool_name" : "name";
    cJSON *schema = cJSON_CreateObject(), *any = cJSON_AddArrayToObject(schema, "anyOf");
    const cJSON *t;
    cJSON_ArrayForEach(t, g->tools) {
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"),
                                                               "parameters");
        char *one = NULL;
        llc_err e2;
        int rc = params ? json_schema_to_gbnf(params, &one, &e2) : 0; /* each alone: the error names its tool */
        free(one);
        if (rc) {
            cJSON_Delete(schema);
            return rc == LLC_ERR_NOMEM ? llc_fail(err, rc, "out of memory")
                                       : llc_fail(err, LLC_ERR_FORMAT, "tool '%s': 'parameters': %s (tool_choice "
                                                  "\"required\" enforces it)", tool_name(t), e2.msg);
        }
        cJSON *alt = cJSON_CreateObject(), *props = cJSON_AddObjectToObject(alt, "properties");
        cJSON_AddStringToObject(alt, "type", "object");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(props, name_key), "const", tool_name(t));
        cJSON *a = params ? cJSON_Duplicate(params, true) : NULL;
        if (!a) { /* no parameters: any object */
            a = cJSON_CreateObject();
            cJSON_AddStringToObject(a, "type", "object");
            cJSON_AddTrueToObject(a, "additionalProperties");
        }
        cJSON_AddItemToObject(props, args_key, a);
        cJSON *req = cJSON_AddArrayToObject(alt, "required");
        cJSON_AddItemToArray(req, cJSON_CreateString(name_key));
        cJSON_AddItemToArray(req, cJSON_CreateString(args_key));
        cJSON_AddItemToArray(any, alt);
    }
    char *gbnf = NULL;
    llc_err e2;
    int rc = json_schema_to_gbnf(schema, &gbnf, &e2);
    cJSON_Delete(schema);
    if (rc == LLC_ERR_NOMEM) return llc_fail(err, rc, "out of memory");
    if (rc) return llc_fail(err, LLC_ERR_FORMAT, "the tools' parameters cannot be turned into a grammar: %s", e2.msg);
    if (g->tool_format == TOOLCALL_LLAMA3) return use_grammar(g, gbnf, "the tools' grammar", err);
    /* wrap the converter's root rule (its first line) in the markup */
    const char *rhs = strncmp(gbnf, "root ::= ", 9) ? NULL : gbnf + 9, *eol = rhs ? strchr(rhs, '\n') : NULL;
    size_t n = strlen(gbnf) + 64;
    char *w = eol ? malloc(n) : NULL;
    const char *tag = g->tool_format == TOOLCALL_MINIMAX_M1 ? "tool_calls" : "tool_call"; /* M1's block */
    if (w && cmd_a)
        snprintf(w, n, "root ::= \"<|START_ACTION|>[\" ( %.*s ) \"]<|END_ACTION|>\"%s", (int)(eol - rhs), rhs, eol);
    else if (w)
        snprintf(w, n, "root ::= \"<%s>\\n\" ( %.*s ) \"\\n</%s>\"%s", tag, (int)(eol - rhs), rhs, tag, eol);
    free(gbnf);
    return use_grammar(g, w, "the tools' grammar", err);
}

/* reasoning_effort as the model's template names its levels (Hy3's template
 * raises on "medium", the level OpenAI's clients send by default). */
static int effort_in_template_words(const srv_model *m, srv_gen *g, llc_err *err) {
    cJSON *effort = cJSON_GetObjectItemCaseSensitive(g->template_vars, "reasoning_effort");
    if (!cJSON_IsString(effort)) return 0;
    const char *word = reasoning_effort_word(m->tmpl_reasoning, effort->valuestring);
    if (word == effort->valuestring) return 0;
    return cJSON_ReplaceItemInObjectCaseSensitive(g->template_vars, "reasoning_effort", cJSON_CreateString(word))
               ? 0 : llc_fail(err, LLC_ERR_NOMEM, "out of memory");
}

int srv_gen_chat(const srv_model *m, const cJSON *messages, srv_gen *g, llc_err *err) {
    if (!cJSON_IsArray(messages) || cJSON_GetArraySize(messages) == 0)
        return llc_fail(err, LLC_ERR_TYPE, "'messages' must be a non-empty array of {role, content}");
    if (cJSON_GetArraySize(messages) > 100000) return llc_fail(err, LLC_ERR_RANGE, "too many messages");
    cJSON *msgs;
    bool uses_tools, has_reasoning;
    int rc = sane_messages(messages, &msgs, &uses_tools, &has_reasoning, err);
    if (rc) return rc;
    if (!uses_tools && !has_reasoning && !g->tools && !g->template_vars) { /* the plain path, as before tools */
        cJSON_Delete(msgs);
        return chat_plain(m, messages, g, err);
    }
    /* a Jinja template renders the JSON itself: with its own tool format, or
     * with variables from the request or earlier answers' reasoning (then also
     * without tools) */
    bool native = chat_tmpl_is_jinja(m->tmpl) &&
                  (m->tool_format != TOOLCALL_GENERIC || ((g->template_vars || has_reasoning) && !uses_tools && !g->tools));
    g->tool_format = native ? m->tool_format : TOOLCALL_GENERIC;
    /* the markers of these formats are control tokens: the answer must show them
     * (GLM's <tool_call>/<arg_key> and MiniMax's <minimax:tool_call> may be, by
     * tokenizer: llama.cpp preserves them; Qwen3-Coder's are plain added tokens) */
    g->req.special_text = native && g->tools &&
                          (m->tool_format == TOOLCALL_MISTRAL || m->tool_format == TOOLCALL_LLAMA3 ||
                           m->tool_format == TOOLCALL_GLM || m->tool_format == TOOLCALL_MINIMAX ||
                           m->tool_format == TOOLCALL_MINIMAX_M3 || m->tool_format == TOOLCALL_HUNYUAN ||
                           m->tool_format == TOOLCALL_KIMI_K2 || m->tool_format == TOOLCALL_SOLAR ||
                           m->tool_format == TOOLCALL_COMMAND_A || m->tool_format == TOOLCALL_GEMMA4 ||
                           m->tool_format == TOOLCALL_KIMI_K3);
    if (g->tools_required && (rc = tools_grammar(g, err))) {
        cJSON_Delete(msgs);
        return rc;
    }
    if (native) {
        prompt p;
        rc = effort_in_template_words(m, g, err);
        if (!rc) rc = prompt_build_json(m->tok, m->tmpl, msgs, g->tools, g->template_vars, budget_of(m, g), &p, err);
        if (!rc) rc = take_prompt(m, &p, g, err);
    } else {
        cJSON *plain = NULL;
        rc = toolcall_generic_messages(msgs, g->tools, g->tools_required, &plain, err);
        if (!rc) rc = chat_plain(m, plain, g, err);
        cJSON_Delete(plain);
    }
    cJSON_Delete(msgs);
    return rc;
}

int srv_gen_reasoning_effort(const char *effort, srv_gen *g, llc_err *err) {
    if (strcmp(effort, "low") && strcmp(effort, "medium") && strcmp(effort, "high"))
        return llc_fail(err, LLC_ERR_TYPE, "'reasoning_effort' must be low, medium or high");
    if (!g->template_vars && !(g->template_vars = cJSON_CreateObject()))
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    if (cJSON_GetObjectItemCaseSensitive(g->template_vars, "reasoning_effort")) return 0; /* kwargs say */
    return cJSON_AddStringToObject(g->template_vars, "reasoning_effort", effort)
               ? 0 : llc_fail(err, LLC_ERR_NOMEM, "out of memory");
}

int srv_gen_thinking_off(srv_gen *g, llc_err *err) {
    if (!g->template_vars && !(g->template_vars = cJSON_CreateObject()))
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    cJSON_DeleteItemFromObjectCaseSensitive(g->template_vars, "enable_thinking");
    cJSON_DeleteItemFromObjectCaseSensitive(g->template_vars, "thinking_mode");
    cJSON_DeleteItemFromObjectCaseSensitive(g->template_vars, "thinking");
    cJSON_DeleteItemFromObjectCaseSensitive(g->template_vars, "reasoning");
    return cJSON_AddFalseToObject(g->template_vars, "enable_thinking") &&
                   cJSON_AddStringToObject(g->template_vars, "thinking_mode", "disabled") && /* MiniMax-M3's */
                   cJSON_AddFalseToObject(g->template_vars, "thinking") &&  /* Kimi K3's, DeepSeek V3.1's */
                   cJSON_AddFalseToObject(g->template_vars, "reasoning")    /* Command-A's */
               ? 0 : llc_fail(err, LLC_ERR_NOMEM, "out of memory");
}

int srv_gen_template_vars(const cJSON *j, srv_gen *g, llc_err *err) {
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(j, "chat_template_kwargs");
    if (kw && !cJSON_IsNull(kw)) {
        if (!cJSON_IsObject(kw)) return llc_fail(err, LLC_ERR_TYPE, "'chat_template_kwargs' must be an object");
        cJSON_Delete(g->template_vars);
        if (!(g->template_vars = cJSON_Duplicate(kw, true))) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    const cJSON *effort = cJSON_GetObjectItemCaseSensitive(j, "reasoning_effort");
    if (!effort || cJSON_IsNull(effort)) return 0;
    if (!cJSON_IsString(effort)) return llc_fail(err, LLC_ERR_TYPE, "'reasoning_effort' must be low, medium or high");
    return srv_gen_reasoning_effort(effort->valuestring, g, err);
}

int srv_gen_reasoning(const srv_model *m, const cJSON *j, srv_gen *g, llc_err *err) {
    g->reasoning = m->reasoning;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "reasoning_format");
    if (f && !cJSON_IsNull(f)) {
        static const char *const known[] = {"auto", "deepseek", "deepseek-legacy", "none"};
        bool ok = false;
        for (size_t i = 0; cJSON_IsString(f) && i < LLC_ARRAY_LEN(known); i++) ok |= !strcmp(f->valuestring, known[i]);
        if (!ok) return llc_fail(err, LLC_ERR_TYPE, "'reasoning_format' must be one of auto, deepseek, deepseek-legacy, none");
        if (!strcmp(f->valuestring, "none")) g->reasoning = REASONING_NONE;
    }
    if (g->reasoning == REASONING_NONE) return 0;
    /* harmony's markers (Command-A's, Gemma 4's, ...) are control tokens: the answer must show them */
    if (reasoning_special_text(g->reasoning)) g->req.special_text = true;
    /* a template that opens the block itself: the prompt's last tokens say so; but
     * a call forced by the tools' grammar (tool_choice "required") begins the
     * answer, so it is never reasoning (Apriel's, QwQ's prompts open the block) */
    g->in_reasoning = !(g->tools_required && g->grammar) &&
                      reasoning_prompt_ids_open(g->reasoning, m->tok, g->req.prompt, g->req.n_prompt);
    return 0;
}

static bool prompt_list(const cJSON *p) {
    const cJSON *first = cJSON_IsArray(p) ? cJSON_GetArrayItem(p, 0) : NULL;
    return cJSON_IsString(first) || cJSON_IsArray(first);
}

int srv_prompt_count(const cJSON *p) { return prompt_list(p) ? cJSON_GetArraySize(p) : 1; }

const cJSON *srv_prompt_at(const cJSON *p, int k) { return prompt_list(p) ? cJSON_GetArrayItem(p, k) : p; }

int srv_gen_text(const srv_model *m, const cJSON *p, srv_gen *g, llc_err *err) {
    if (prompt_list(p) && cJSON_GetArraySize(p) > 1)
        return llc_fail(err, LLC_ERR_RANGE, "'prompt' is a list of %d prompts; this endpoint takes one",
                        cJSON_GetArraySize(p));
    if (prompt_list(p)) p = cJSON_GetArrayItem(p, 0); /* OpenAI's list of one prompt */
    int n;
    free(g->ids);
    g->ids = NULL;
    if (cJSON_IsString(p)) {
        const char *s = p->valuestring;
        n = llm_tokenize(m->tok, s, strlen(s), tok_add_bos(m->tok), true, &g->ids);
        if (n < 0) return llc_fail(err, n, "the prompt cannot be tokenized");
    } else if (cJSON_IsArray(p)) {
        n = cJSON_GetArraySize(p);
        if (n > m->n_ctx) return llc_fail(err, LLC_ERR_RANGE, "the prompt is %d tokens; the context is %d", n, m->n_ctx);
        g->ids = malloc((size_t)(n ? n : 1) * sizeof *g->ids);
        if (!g->ids) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, p) {
            if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 ||
                e->valuedouble >= m->n_vocab)
                return llc_fail(err, LLC_ERR_RANGE, "prompt[%d] is not a token id of this model (0..%d)", i,
                                m->n_vocab - 1);
            g->ids[i++] = (int32_t)e->valuedouble;
        }
    } else {
        return llc_fail(err, LLC_ERR_TYPE, "'prompt' must be a string or an array of token ids");
    }
    if (n == 0) return llc_fail(err, LLC_ERR_RANGE, "the prompt is empty");
    finalize(g, n);
    g->req.continues_prompt = true; /* the answer continues the text: " was", not "was" */
    return 0;
}

/* ---- fill in the middle ---- */

typedef struct ivec {
    int32_t *v;
    int n, cap;
    bool oom;
} ivec;

static void iv_push(ivec *a, const int32_t *ids, int n) {
    if (a->oom || n <= 0) return;
    if (a->n + n > a->cap) {
        int cap = a->cap ? a->cap : 256;
        while (cap < a->n + n) cap *= 2;
        int32_t *p = realloc(a->v, (size_t)cap * sizeof *p);
        if (!p) {
            a->oom = true;
            return;
        }
        a->v = p;
        a->cap = cap;
    }
    memcpy(a->v + a->n, ids, (size_t)n * sizeof *ids);
    a->n += n;
}

static void iv_text(ivec *a, const tokenizer *tok, const char *s, size_t len) {
    int32_t *ids = NULL;
    int n = llm_tokenize(tok, s, len, false, false, &ids);
    if (n < 0) a->oom = true;
    else iv_push(a, ids, n);
    free(ids);
}

int srv_gen_infill(const srv_model *m, const char *prefix, const char *suffix, const cJSON *extra,
                   const char *middle, srv_gen *g, llc_err *err) {
    const tokenizer *tok = m->tok;
    int32_t pre = tok_special(tok, TOK_SPECIAL_FIM_PRE), suf = tok_special(tok, TOK_SPECIAL_FIM_SUF),
            mid = tok_special(tok, TOK_SPECIAL_FIM_MID), rep = tok_special(tok, TOK_SPECIAL_FIM_REP),
            sep = tok_special(tok, TOK_SPECIAL_FIM_SEP), bos = tok_bos(tok);
    if (pre < 0 || suf < 0 || mid < 0)
        return llc_fail(err, LLC_ERR_UNSUPPORTED,
                        "infill is not supported by this model: its vocabulary has no fill-in-the-middle "
                        "tokens (FIM prefix, suffix and middle)");
    if (extra && !cJSON_IsArray(extra))
        return llc_fail(err, LLC_ERR_TYPE, "'input_extra' must be an array of {filename, text}");
    ivec ex = {0}, tp = {0}, ts = {0}, tm = {0}, out = {0};
    /* extra context first, as llama-server lays it out */
    if (rep >= 0) {
        iv_push(&ex, &rep, 1);
        iv_text(&ex, tok, "myproject\n", 10);
    }
    const cJSON *chunk;
    int rc = 0, i = 0;
    cJSON_ArrayForEach(chunk, extra) {
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(chunk, "text");
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(chunk, "filename");
        if (!cJSON_IsObject(chunk) || (text && !cJSON_IsString(text)) || (file && !cJSON_IsString(file))) {
            rc = llc_fail(err, LLC_ERR_TYPE, "input_extra[%d] must be {\"filename\": string, \"text\": string}", i);
            break;
        }
        if (sep >= 0) {
            const char *fn = file ? file->valuestring : "tmp";
            iv_push(&ex, &sep, 1);
            iv_text(&ex, tok, fn, strlen(fn));
            iv_text(&ex, tok, "\n", 1);
        } else {
            static const char k_snippet[] = "\n\n--- snippet ---\n\n";
            iv_text(&ex, tok, k_snippet, sizeof k_snippet - 1);
        }
        if (text) iv_text(&ex, tok, text->valuestring, strlen(text->valuestring));
        i++;
    }
    if (!rc && sep >= 0) {
        iv_push(&ex, &sep, 1);
        iv_text(&ex, tok, "filename\n", 9);
    }
    iv_text(&tp, tok, prefix ? prefix : "", prefix ? strlen(prefix) : 0);
    iv_text(&ts, tok, suffix ? suffix : "", suffix ? strlen(suffix) : 0);
    iv_text(&tm, tok, middle ? middle : "", middle ? strlen(middle) : 0);
    if (!rc && (ex.oom || tp.oom || ts.oom || tm.oom)) rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    /* 3/4 of the room for the end of the prefix, the rest for the start of the
       suffix, extra context in what the context has left */
    int avail = budget_of(m, g) - 4;
    if (!rc && avail < 8) rc = llc_fail(err, LLC_ERR_RANGE, "the context is too small for infill");
    if (!rc) {
        int core = avail < 2048 ? avail : 2048;
        int n_pre = tp.n < 3 * (core / 4) ? tp.n : 3 * (core / 4);
        int room_suf = core / 4 - (2 + tm.n);
        int n_suf = ts.n < room_suf ? ts.n : (room_suf > 0 ? room_suf : 0);
        int room_ex = avail - n_pre - n_suf - tm.n;
        int n_ex = ex.n < room_ex ? ex.n : (room_ex > 0 ? room_ex : 0);
        if (n_ex) iv_push(&out, ex.v + ex.n - n_ex, n_ex); /* ex.v is NULL when empty */
        if (tok_add_bos(tok) && bos >= 0) iv_push(&out, &bos, 1);
        iv_push(&out, &pre, 1);
        if (n_pre) iv_push(&out, tp.v + tp.n - n_pre, n_pre);
        iv_push(&out, tm.v, tm.n);
        iv_push(&out, &suf, 1);
        iv_push(&out, ts.v, n_suf);
        iv_push(&out, &mid, 1);
        if (out.oom) rc = llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    free(ex.v), free(tp.v), free(ts.v), free(tm.v);
    if (rc) {
        free(out.v);
        return rc;
    }
    free(g->ids);
    g->ids = out.v;
    finalize(g, out.n);
    g->req.continues_prompt = true; /* the middle continues the prefix */
    return 0;
}
