/* srv_ollama.c — Ollama's HTTP API on llmchat's server, so Ollama's clients
 * work unchanged: the probe ("/"), /api/version, /api/tags, /api/ps,
 * /api/show, and /api/chat and /api/generate, streamed as NDJSON (one JSON
 * object a line, Ollama's default) or answered in one object. This file reads
 * Ollama's requests into a srv_gen and writes Ollama's answers; the generation
 * itself runs through srv_http_gen.c (srv_http_generate_as). Any model name is
 * accepted (Ollama clients often send a fixed one, as llama-server allows) and
 * the loaded model's own name is reported. /api/chat takes OpenAI's tools
 * and answers Ollama's message.tool_calls (arguments as objects). Errors are
 * Ollama's {"error": "..."} on every /api/ path (model management — pull,
 * push, create, copy, delete, blobs — is a 400 saying why); an error during a
 * stream is its last line. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "app/server/srv_http.h"
#include "kernels/quant.h"

/* The Ollama version /api/version reports: the API level answered here. */
#define OLLAMA_API_VERSION "0.9.0"
/* model_info arrays longer than this are null unless "verbose" (as Ollama
 * does for the tokenizer's lists) */
#define OLLAMA_SHORT_ARRAY 64

/* ---- small helpers ---- */

enum MHD_Result srv_ollama_error(struct MHD_Connection *mc, unsigned status, const char *msg) {
    sbuf b = {0};
    sb_str(&b, "{\"error\":");
    sb_json_str(&b, msg, strlen(msg));
    sb_str(&b, "}");
    enum MHD_Result ret = b.oom ? MHD_NO : srv_http_json(mc, status, b.p, b.len);
    sb_free(&b);
    return ret;
}

static enum MHD_Result o_errorf(struct MHD_Connection *mc, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result o_errorf(struct MHD_Connection *mc, unsigned status, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return srv_ollama_error(mc, status, msg);
}

/* RFC 3339 in UTC, with nanoseconds as Ollama writes it. */
static void iso_time(struct timespec ts, char *buf, size_t n) {
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t k = strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + k, n - k, ".%09ldZ", ts.tv_nsec);
}

static void now_iso(char *buf, size_t n) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    iso_time(ts, buf, n);
}

/* A JSON string of n bytes that may hold invalid UTF-8 (GGUF strings). */
static cJSON *json_string(const char *p, size_t n) {
    sbuf b = {0};
    sb_json_str(&b, p, n);
    cJSON *s = b.p && !b.oom ? cJSON_ParseWithLength(b.p, b.len) : NULL;
    sb_free(&b);
    return s ? s : cJSON_CreateString("");
}

static const cJSON *field(const cJSON *j, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, name);
    return cJSON_IsNull(f) ? NULL : f;
}

/* ---- the model as Ollama describes it ---- */

static void gguf_string(const gguf *f, const char *key, char *out, size_t n, const char *dflt) {
    gguf_str v = {0};
    if (f && gguf_get_str(f, key, &v, NULL) == 0 && v.len > 0)
        snprintf(out, n, "%.*s", (int)(v.len < n - 1 ? v.len : n - 1), v.ptr);
    else snprintf(out, n, "%s", dflt);
}

static uint64_t param_count(const gguf *f) {
    uint64_t n = 0;
    for (int64_t i = 0; f && i < gguf_n_tensors(f); i++) n += (uint64_t)gguf_tensor_n_elems(gguf_tensor_at(f, i));
    return n;
}

/* Ollama's "parameter_size": 8.0B, 137.00M, 292K. */
static void human_number(uint64_t n, char *buf, size_t cap) {
    double v = (double)n;
    if (n >= 1000000000ull) snprintf(buf, cap, v / 1e9 == floor(v / 1e9) ? "%.0fB" : "%.1fB", v / 1e9);
    else if (n >= 1000000ull) snprintf(buf, cap, v / 1e6 == floor(v / 1e6) ? "%.0fM" : "%.2fM", v / 1e6);
    else if (n >= 1000ull) snprintf(buf, cap, "%.0fK", v / 1e3);
    else snprintf(buf, cap, "%llu", (unsigned long long)n);
}

/* Ollama's "quantization_level": general.file_type by llama.cpp's names, or
 * else the element type of the largest tensor. */
static void quant_level(const gguf *f, char *buf, size_t n) {
    static const char *const names[] = {
        [0] = "F32",     [1] = "F16",     [2] = "Q4_0",    [3] = "Q4_1",    [7] = "Q8_0",
        [8] = "Q5_0",    [9] = "Q5_1",    [10] = "Q2_K",   [11] = "Q3_K_S", [12] = "Q3_K_M",
        [13] = "Q3_K_L", [14] = "Q4_K_S", [15] = "Q4_K_M", [16] = "Q5_K_S", [17] = "Q5_K_M",
        [18] = "Q6_K",   [19] = "IQ2_XXS", [20] = "IQ2_XS", [21] = "Q2_K_S", [22] = "IQ3_XS",
        [23] = "IQ3_XXS", [24] = "IQ1_S", [25] = "IQ4_NL", [26] = "IQ3_S",  [27] = "IQ3_M",
        [28] = "IQ2_S",  [29] = "IQ2_M",  [30] = "IQ4_XS", [31] = "IQ1_M",  [32] = "BF16",
        [36] = "TQ1_0",  [37] = "TQ2_0",
    };
    uint32_t ft;
    if (f && gguf_get_u32(f, "general.file_type", &ft, NULL) == 0 && ft < sizeof names / sizeof names[0] &&
        names[ft]) {
        snprintf(buf, n, "%s", names[ft]);
        return;
    }
    const gguf_tensor *big = NULL;
    for (int64_t i = 0; f && i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        if (!big || gguf_tensor_n_elems(t) > gguf_tensor_n_elems(big)) big = t;
    }
    const char *q = big ? qtype_name(big->type) : NULL;
    snprintf(buf, n, "%s", q ? q : "unknown");
}

/* Not Ollama's sha256 of the blob (that would read the whole file): an
 * xxh3-128 of the file's metadata, tensor table and size, 32 hex digits. */
static void digest_of(const gguf *f, char out[33]) {
    XXH3_state_t *h = XXH3_createState();
    if (!h) {
        snprintf(out, 33, "%032d", 0);
        return;
    }
    XXH3_128bits_reset(h);
    uint64_t size = f ? gguf_file_size(f) : 0;
    XXH3_128bits_update(h, &size, sizeof size);
    for (int64_t i = 0; f && i < gguf_n_kv(f); i++) {
        const char *k = gguf_kv_key(f, i);
        const gguf_value *v = gguf_kv_value(f, i);
        XXH3_128bits_update(h, k, strlen(k) + 1);
        if (v->type == GGUF_TYPE_STRING) XXH3_128bits_update(h, v->v.str.ptr, (size_t)v->v.str.len);
        else if (v->type != GGUF_TYPE_ARRAY) XXH3_128bits_update(h, &v->v, sizeof v->v.u64);
        else XXH3_128bits_update(h, &v->v.arr.n, sizeof v->v.arr.n);
    }
    for (int64_t i = 0; f && i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        XXH3_128bits_update(h, t->name, strlen(t->name) + 1);
        XXH3_128bits_update(h, t->ne, sizeof t->ne);
        XXH3_128bits_update(h, &t->type, sizeof t->type);
    }
    XXH128_hash_t d = XXH3_128bits_digest(h);
    XXH3_freeState(h);
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)d.high64, (unsigned long long)d.low64);
}

static cJSON *details_json(const srv_model *m) {
    char arch[64], size[32], quant[32];
    gguf_string(m->file, "general.architecture", arch, sizeof arch, "unknown");
    human_number(param_count(m->file), size, sizeof size);
    quant_level(m->file, quant, sizeof quant);
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "parent_model", "");
    cJSON_AddStringToObject(d, "format", "gguf");
    cJSON_AddStringToObject(d, "family", arch);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(d, "families"), cJSON_CreateString(arch));
    cJSON_AddStringToObject(d, "parameter_size", size);
    cJSON_AddStringToObject(d, "quantization_level", quant);
    return d;
}

static void loaded_iso(const srv_model *m, char *buf, size_t n) {
    iso_time((struct timespec){.tv_sec = (time_t)m->loaded_at}, buf, n);
}

/* One entry of /api/tags (running: of /api/ps). */
static cJSON *model_entry(const srv_model *m, bool running) {
    char when[64], digest[33];
    digest_of(m->file, digest);
    double size = m->file ? (double)gguf_file_size(m->file) : 0;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", m->name);
    cJSON_AddStringToObject(o, "model", m->name);
    if (!running) {
        loaded_iso(m, when, sizeof when);
        cJSON_AddStringToObject(o, "modified_at", when);
    }
    cJSON_AddNumberToObject(o, "size", size);
    cJSON_AddStringToObject(o, "digest", digest);
    cJSON_AddItemToObject(o, "details", details_json(m));
    if (running) { /* kept loaded for good: Ollama's far-future expiry (keep_alive -1) */
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        tm.tm_year += 292;
        char buf[64];
        strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
        cJSON_AddStringToObject(o, "expires_at", buf);
        cJSON_AddNumberToObject(o, "size_vram", m->gpu ? size : 0);
        cJSON_AddNumberToObject(o, "context_length", m->n_ctx);
    }
    return o;
}

static enum MHD_Result model_list(srv *s, struct MHD_Connection *mc, bool running) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "models"), model_entry(&s->m, running));
    return srv_http_send_json(mc, o);
}

/* A GGUF value in model_info; long arrays are null unless verbose. */
static cJSON *kv_json(const gguf_value *v, bool verbose) {
    switch (v->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        return cJSON_CreateNumber((double)v->v.u64);
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        return cJSON_CreateNumber((double)v->v.i64);
    case GGUF_TYPE_FLOAT32: case GGUF_TYPE_FLOAT64:
        return isfinite(v->v.f64) ? cJSON_CreateNumber(v->v.f64) : cJSON_CreateNull();
    case GGUF_TYPE_BOOL: return cJSON_CreateBool(v->v.u64 != 0);
    case GGUF_TYPE_STRING: return json_string(v->v.str.ptr, (size_t)v->v.str.len);
    case GGUF_TYPE_ARRAY: {
        const gguf_array *a = &v->v.arr;
        if ((!verbose && a->n > OLLAMA_SHORT_ARRAY) || a->elem_type == GGUF_TYPE_ARRAY) return cJSON_CreateNull();
        cJSON *arr = cJSON_CreateArray();
        for (uint64_t i = 0; i < a->n; i++) {
            cJSON *e;
            if (a->elem_type == GGUF_TYPE_STRING) e = json_string(a->strs[i].ptr, (size_t)a->strs[i].len);
            else if (a->elem_type == GGUF_TYPE_FLOAT32 || a->elem_type == GGUF_TYPE_FLOAT64)
                e = isfinite(gguf_arr_f32(a, i)) ? cJSON_CreateNumber(gguf_arr_f32(a, i)) : cJSON_CreateNull();
            else if (a->elem_type == GGUF_TYPE_BOOL) e = cJSON_CreateBool(gguf_arr_int(a, i) != 0);
            else e = cJSON_CreateNumber((double)gguf_arr_int(a, i));
            cJSON_AddItemToArray(arr, e);
        }
        return arr;
    }
    default: return cJSON_CreateNull();
    }
}

static enum MHD_Result show(srv *s, struct MHD_Connection *mc, const cJSON *j) {
    const srv_model *m = &s->m;
    const cJSON *name = field(j, "model") ? field(j, "model") : field(j, "name");
    if (!cJSON_IsString(name) || !*name->valuestring) return srv_ollama_error(mc, MHD_HTTP_BAD_REQUEST, "model is required");
    bool verbose = cJSON_IsTrue(field(j, "verbose"));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "license", "");
    sbuf params = {0};
    sb_add(&params, "", 0);
    for (const char *const *st = chat_stop_strings(m->tmpl); *st; st++) {
        sb_str(&params, "stop \"");
        sb_str(&params, *st);
        sb_str(&params, "\"\n");
    }
    sbuf mf = {0};
    sb_printf(&mf, "# Modelfile generated by llmchat\nFROM %s\n", m->name);
    for (const char *const *st = chat_stop_strings(m->tmpl); *st; st++) sb_printf(&mf, "PARAMETER stop \"%s\"\n", *st);
    cJSON_AddItemToObject(o, "modelfile", json_string(mf.p ? mf.p : "", mf.len));
    cJSON_AddItemToObject(o, "parameters", json_string(params.p ? params.p : "", params.len));
    sb_free(&mf);
    sb_free(&params);
    /* the model's own Jinja template (Ollama's are Go templates) */
    gguf_str tmpl = {0};
    if (m->file && gguf_get_str(m->file, "tokenizer.chat_template", &tmpl, NULL) == 0)
        cJSON_AddItemToObject(o, "template", json_string(tmpl.ptr, (size_t)tmpl.len));
    else cJSON_AddStringToObject(o, "template", "{{ .Prompt }}");
    cJSON_AddItemToObject(o, "details", details_json(m));
    cJSON *info = cJSON_AddObjectToObject(o, "model_info");
    for (int64_t i = 0; m->file && i < gguf_n_kv(m->file); i++)
        cJSON_AddItemToObject(info, gguf_kv_key(m->file, i), kv_json(gguf_kv_value(m->file, i), verbose));
    if (!cJSON_GetObjectItemCaseSensitive(info, "general.parameter_count"))
        cJSON_AddNumberToObject(info, "general.parameter_count", (double)param_count(m->file));
    cJSON *caps = cJSON_AddArrayToObject(o, "capabilities");
    cJSON_AddItemToArray(caps, cJSON_CreateString("completion"));
    if (m->has_fim) cJSON_AddItemToArray(caps, cJSON_CreateString("insert"));
    char when[64];
    loaded_iso(m, when, sizeof when);
    cJSON_AddStringToObject(o, "modified_at", when);
    return srv_http_send_json(mc, o);
}

/* ---- /api/chat and /api/generate: the answers ---- */

typedef struct o_gen {
    bool chat;
    char model[128];
} o_gen;

/* Ollama's "tool_calls": [{"function": {"name", "arguments": {…}}}], the
 * arguments an object (as the model wrote them; their text when they are not
 * JSON, e.g. cut off by num_predict). */
static void tool_calls_json(sbuf *out, const toolcall_parser *tc) {
    sb_str(out, ",\"tool_calls\":[");
    for (int k = 0; k < toolcall_count(tc); k++) {
        const char *name = toolcall_name(tc, k), *args = toolcall_arguments(tc, k);
        sb_str(out, k ? ",{\"function\":{\"name\":" : "{\"function\":{\"name\":");
        sb_json_str(out, name, strlen(name));
        sb_str(out, ",\"arguments\":");
        cJSON *a = cJSON_Parse(args);
        char *one_line = cJSON_IsObject(a) ? cJSON_PrintUnformatted(a) : NULL; /* NDJSON: no newlines */
        if (one_line) sb_str(out, one_line);
        else sb_json_str(out, args, strlen(args));
        free(one_line);
        cJSON_Delete(a);
        sb_str(out, "}}");
    }
    sb_str(out, "]");
}

/* {"model":..,"created_at":..,"message":{"role":"assistant","content":TEXT,
 * "thinking":REASONING,"tool_calls":[…]} (or "response":TEXT,"thinking":..),
 * without the closing brace; "thinking" and "tool_calls" only when there are some. */
static void head(const o_gen *o, sbuf *out, const char *text, size_t len, const char *thinking, size_t t_len,
                 const toolcall_parser *calls) {
    char when[64];
    now_iso(when, sizeof when);
    sb_str(out, "{\"model\":");
    sb_json_str(out, o->model, strlen(o->model));
    sb_printf(out, ",\"created_at\":\"%s\",", when);
    sb_str(out, o->chat ? "\"message\":{\"role\":\"assistant\",\"content\":" : "\"response\":");
    sb_json_str(out, text, len);
    if (t_len) {
        sb_str(out, ",\"thinking\":");
        sb_json_str(out, thinking, t_len);
    }
    if (calls && toolcall_count(calls) > 0) tool_calls_json(out, calls);
    if (o->chat) sb_str(out, "}");
}

static void on_piece(void *ctx, const http_gen_report *r, sbuf *out) {
    head(ctx, out, r->text, r->len, r->thinking, r->thinking_len, NULL);
    sb_str(out, ",\"done\":false}\n");
}

static long long ns(double ms) { return ms > 0 ? (long long)llround(ms * 1e6) : 0; }

static unsigned on_end(void *ctx, const http_gen_report *r, bool stream, sbuf *out) {
    if (r->finish == FINISH_ERROR) {
        const char *msg = r->error ? r->error : "the generation failed";
        sb_str(out, "{\"error\":");
        sb_json_str(out, msg, strlen(msg));
        sb_str(out, stream ? "}\n" : "}");
        return MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
    /* total: since the request came; prompt: the engine's prefill; eval: the
       tokens, from the first one's arrival (plus its own step) to now, within
       what the total leaves */
    double now = llc_now_ms(), total_ms = now - r->t_start_ms;
    double prompt_ms = r->ttft_ms - r->queue_ms;
    if (prompt_ms > total_ms) prompt_ms = total_ms;
    double eval_ms = r->t_first_ms > 0 ? now - r->t_first_ms + r->tpot_ms : 0;
    if (eval_ms > total_ms - prompt_ms) eval_ms = total_ms - prompt_ms;
    long long eval_ns = ns(eval_ms);
    if (r->n_tokens > 0 && eval_ns < 1) eval_ns = 1; /* clients divide by it */
    if (stream && r->calls && toolcall_count(r->calls) > 0) { /* the calls, as Ollama streams them: a piece of their own */
        head(ctx, out, "", 0, NULL, 0, r->calls);
        sb_str(out, ",\"done\":false}\n");
    }
    head(ctx, out, stream ? "" : r->text, stream ? 0 : r->len, r->thinking, stream ? 0 : r->thinking_len,
         stream ? NULL : r->calls);
    sb_str(out, ",\"done\":true,\"done_reason\":\"");
    sb_str(out, srv_finish_name(r->finish));
    sb_printf(out, "\",\"total_duration\":%lld,\"load_duration\":0,\"prompt_eval_count\":%d,"
                   "\"prompt_eval_duration\":%lld,\"eval_count\":%d,\"eval_duration\":%lld}",
              ns(total_ms), r->prompt_tokens, ns(prompt_ms), r->n_tokens, eval_ns);
    if (stream) sb_str(out, "\n");
    return MHD_HTTP_OK;
}

static const http_format ollama_format = {
    .stream_type = "application/x-ndjson",
    .piece = on_piece,
    .end = on_end,
    .error = srv_ollama_error,
    .free_ctx = free,
};

/* ---- /api/chat and /api/generate: the requests ---- */

/* keep_alive 0 ("0", "0s", "0m"...): an unload request when nothing is asked. */
static bool keep_alive_zero(const cJSON *k) {
    if (cJSON_IsNumber(k)) return k->valuedouble == 0;
    if (!cJSON_IsString(k)) return false;
    char *end;
    double v = strtod(k->valuestring, &end);
    return end != k->valuestring && v == 0 && strspn(end, "nsmuh") == strlen(end);
}

/* Ollama's answer to a request with no prompt: the model is loaded ("load"),
 * or, with keep_alive 0, would be unloaded ("unload"; it stays loaded here). */
static enum MHD_Result load_answer(srv *s, struct MHD_Connection *mc, bool chat, bool unload) {
    o_gen o = {.chat = chat};
    snprintf(o.model, sizeof o.model, "%s", s->m.name);
    sbuf b = {0};
    head(&o, &b, "", 0, NULL, 0, NULL);
    sb_printf(&b, ",\"done_reason\":\"%s\",\"done\":true}", unload ? "unload" : "load");
    enum MHD_Result ret = b.oom ? MHD_NO : srv_http_json(mc, MHD_HTTP_OK, b.p, b.len);
    sb_free(&b);
    return ret;
}

static bool has_images(const cJSON *o) {
    const cJSON *im = field(o, "images");
    return im && (!cJSON_IsArray(im) || cJSON_GetArraySize(im) > 0);
}

/* The prompt of /api/generate: raw text, fill-in-the-middle with a suffix, or
 * the prompt (and system) through the chat template. */
static int generate_prompt(const srv_model *m, const cJSON *j, srv_gen *g, llc_err *err) {
    const cJSON *prompt = field(j, "prompt"), *suffix = field(j, "suffix"), *system = field(j, "system");
    const char *p = cJSON_IsString(prompt) ? prompt->valuestring : "";
    if (cJSON_IsString(suffix) && *suffix->valuestring) {
        if (!m->has_fim)
            return llc_fail(err, LLC_ERR_UNSUPPORTED, "'%s' does not support insert ('suffix')", m->name);
        return srv_gen_infill(m, p, suffix->valuestring, NULL, "", g, err);
    }
    if (cJSON_IsTrue(field(j, "raw"))) return srv_gen_text(m, prompt, g, err);
    chat_msg turns[2]; /* the template's render of system + prompt */
    int n = 0;
    if (cJSON_IsString(system) && *system->valuestring)
        turns[n++] = (chat_msg){.role = CHAT_SYSTEM, .content = system->valuestring};
    turns[n++] = (chat_msg){.role = CHAT_USER, .content = p};
    cJSON *msgs = chat_msgs_to_json(turns, n);
    int rc = msgs ? srv_gen_chat(m, msgs, g, err) : llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    cJSON_Delete(msgs);
    return rc < 0 ? rc : srv_gen_reasoning(m, j, g, err);
}

/* Ollama's "think": false switches a thinking template off (enable_thinking);
 * true, a level ("low", "medium", "high") or nothing reads the reasoning out into
 * "thinking". */
static int think_param(const cJSON *j, srv_gen *g, llc_err *err) {
    const cJSON *think = field(j, "think");
    if (cJSON_IsString(think)) return srv_gen_reasoning_effort(think->valuestring, g, err); /* gpt-oss's levels */
    if (!think || cJSON_IsNull(think) || cJSON_IsTrue(think)) return 0;
    if (!cJSON_IsFalse(think)) return llc_fail(err, LLC_ERR_TYPE, "'think' must be true, false or a level");
    return srv_gen_thinking_off(g, err);
}

/* Ollama's "format": "json" (any JSON object) or a JSON schema, enforced by
 * constrained decoding as the OpenAI endpoints' response_format is. */
static int format_grammar(const cJSON *format, srv_gen *g, llc_err *err) {
    if (cJSON_IsString(format) && !strcmp(format->valuestring, "json")) return srv_gen_json_grammar(NULL, "format", g, err);
    if (!cJSON_IsObject(format)) return 0; /* "" : none */
    return srv_gen_json_grammar(format, "format", g, err);
}

/* /api/chat or /api/generate as read on a worker (read_generation): an error
 * answer, Ollama's "load" answer (no prompt), or a generation to run. */
typedef struct o_read {
    bool chat, stream;
    bool load, unload;  /* no prompt: the model is "loaded" (or would be unloaded) */
    unsigned status;    /* an error answer (0: none) */
    char error[512];
    srv_gen g;
} o_read;

static void o_fail(o_read *r, unsigned status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void o_fail(o_read *r, unsigned status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
    r->status = status;
}

/* On a worker: request j of /api/chat or /api/generate (r->chat) into r. */
static void read_generation(const srv_model *m, const cJSON *j, o_read *r) {
    const bool chat = r->chat;
    if (!cJSON_IsObject(j)) return o_fail(r, MHD_HTTP_BAD_REQUEST, "the request must be a JSON object");
    const cJSON *name = field(j, "model") ? field(j, "model") : field(j, "name");
    if (!cJSON_IsString(name) || !*name->valuestring) return o_fail(r, MHD_HTTP_BAD_REQUEST, "model is required");
    const cJSON *stream = field(j, "stream");
    if (stream && !cJSON_IsBool(stream)) return o_fail(r, MHD_HTTP_BAD_REQUEST, "'stream' must be true or false");
    const cJSON *opts = field(j, "options");
    if (opts && !cJSON_IsObject(opts)) return o_fail(r, MHD_HTTP_BAD_REQUEST, "'options' must be an object");
    const cJSON *num_ctx = field(opts, "num_ctx");
    if (num_ctx && (!cJSON_IsNumber(num_ctx) || num_ctx->valuedouble < 1 ||
                    num_ctx->valuedouble != floor(num_ctx->valuedouble)))
        return o_fail(r, MHD_HTTP_BAD_REQUEST, "'num_ctx' must be a positive integer");
    const cJSON *format = field(j, "format");
    if (format && !cJSON_IsObject(format) && !(cJSON_IsString(format) && (!*format->valuestring ||
                                                                          !strcmp(format->valuestring, "json"))))
        return o_fail(r, MHD_HTTP_BAD_REQUEST, "'format' must be \"json\" or a JSON schema (an object)");
    const cJSON *tools = field(j, "tools");
    if (!chat && tools && (!cJSON_IsArray(tools) || cJSON_GetArraySize(tools) > 0))
        return o_fail(r, MHD_HTTP_BAD_REQUEST, "'tools' are for /api/chat; /api/generate takes none");
    bool unload = keep_alive_zero(field(j, "keep_alive"));
    if (chat) {
        const cJSON *msgs = field(j, "messages"), *msg;
        if (msgs && !cJSON_IsArray(msgs))
            return o_fail(r, MHD_HTTP_BAD_REQUEST, "'messages' must be an array of {role, content}");
        int i = 0;
        cJSON_ArrayForEach(msg, msgs) {
            if (has_images(msg))
                return o_fail(r, MHD_HTTP_BAD_REQUEST,
                                "messages[%d].images: images are not supported ('%.100s' has no vision)", i,
                                m->name);
            i++;
        }
        if (i == 0) { /* no messages: Ollama's "load" */
            r->load = true;
            r->unload = unload;
            return;
        }
    } else {
        const cJSON *prompt = field(j, "prompt"), *suffix = field(j, "suffix"), *tmpl = field(j, "template");
        if (prompt && !cJSON_IsString(prompt)) return o_fail(r, MHD_HTTP_BAD_REQUEST, "'prompt' must be a string");
        if (suffix && !cJSON_IsString(suffix)) return o_fail(r, MHD_HTTP_BAD_REQUEST, "'suffix' must be a string");
        const cJSON *system = field(j, "system");
        if (system && !cJSON_IsString(system)) return o_fail(r, MHD_HTTP_BAD_REQUEST, "'system' must be a string");
        const cJSON *raw = field(j, "raw");
        if (raw && !cJSON_IsBool(raw)) return o_fail(r, MHD_HTTP_BAD_REQUEST, "'raw' must be true or false");
        if (has_images(j))
            return o_fail(r, MHD_HTTP_BAD_REQUEST, "images are not supported ('%.100s' has no vision)", m->name);
        if (tmpl && !(cJSON_IsString(tmpl) && !*tmpl->valuestring))
            return o_fail(r, MHD_HTTP_BAD_REQUEST,
                           "'template' is not supported: the model's own chat template is used "
                           "(send a formatted prompt with \"raw\": true instead)");
        if ((!prompt || !*prompt->valuestring) && (!suffix || !*suffix->valuestring))
        { /* no prompt: Ollama's "load" */
            r->load = true;
            r->unload = unload;
            return;
        }
    }
    srv_gen *g = &r->g;
    llc_err err = {{0}};
    cJSON *empty = opts ? NULL : cJSON_CreateObject();
    int rc = srv_gen_params(m, SRV_OLLAMA, opts ? opts : empty, g, &err);
    cJSON_Delete(empty);
    bool params_done = !rc;
    if (!rc) rc = format_grammar(format, g, &err);
    if (!rc) rc = think_param(j, g, &err);
    if (!rc && chat) rc = srv_gen_tools(j, g, &err); /* OpenAI's tools; tool_choice too (an llmchat extension) */
    if (!rc && chat && !(rc = srv_gen_chat(m, field(j, "messages"), g, &err))) rc = srv_gen_reasoning(m, j, g, &err);
    else if (!rc && !chat) rc = generate_prompt(m, j, g, &err);
    if (rc) return o_fail(r, srv_http_status_of(rc), "%s%s", params_done ? "" : "options: ", err.msg);
    r->stream = !stream || cJSON_IsTrue(stream);
}

static void *gen_prepare(const srv_model *m, int which, const char *body, size_t len) {
    o_read *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    srv_gen_init(&r->g);
    r->chat = which;
    cJSON *j = NULL;
    if (!srv_utf8_valid(body, len)) o_fail(r, MHD_HTTP_BAD_REQUEST, "the body is not valid UTF-8");
    else if (srv_json_has_nul(body, len)) o_fail(r, MHD_HTTP_BAD_REQUEST, NUL_REFUSED);
    else if (!(j = cJSON_ParseWithLength(body, len))) o_fail(r, MHD_HTTP_BAD_REQUEST, "the body is not valid JSON");
    else read_generation(m, j, r);
    cJSON_Delete(j);
    return r;
}

static void gen_discard(void *ready) {
    o_read *r = ready;
    srv_gen_free(&r->g);
    free(r);
}

/* On the server thread: the read request refused, answered ("load") or run. */
static enum MHD_Result gen_start(srv *s, struct MHD_Connection *mc, void *ready, http_pending *pending) {
    o_read *r = ready;
    if (!r) return MHD_NO;
    enum MHD_Result ret;
    o_gen *o = NULL;
    if (r->status) ret = srv_ollama_error(mc, r->status, r->error);
    else if (r->load) ret = load_answer(s, mc, r->chat, r->unload);
    else if (!(o = calloc(1, sizeof *o))) ret = MHD_NO;
    else {
        o->chat = r->chat;
        snprintf(o->model, sizeof o->model, "%s", s->m.name);
        ret = srv_http_generate_as(s, mc, &ollama_format, o, &r->g, r->stream, &pending->gen); /* takes g */
    }
    gen_discard(r);
    return ret;
}

static const http_prep gen_prep = {gen_prepare, gen_start, gen_discard};

/* ---- routing ---- */

static const char *const paths[] = {"/", "/api/version", "/api/tags", "/api/ps", "/api/show", "/api/chat",
                                    "/api/generate"};

bool srv_ollama_path(const char *url) {
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (!strcmp(url, paths[i])) return true;
    /* any other /api/ path but the embeddings' (srv_embed.c) gets Ollama's error shape here */
    return !strncmp(url, "/api/", 5) && strcmp(url, "/api/embed") && strcmp(url, "/api/embeddings");
}

/* Ollama's model management: there is one model, a GGUF file given at start.
 * A 400 (not a 5xx, which clients retry) that says so, or a 404 for a path
 * Ollama does not have. */
static enum MHD_Result model_management(srv *s, struct MHD_Connection *mc, const char *url) {
    static const struct { const char *path, *what; } routes[] = {
        {"/api/pull", "pull is not supported: download the GGUF file and pass it with --model"},
        {"/api/push", "push is not supported: the model is a GGUF file on this machine"},
        {"/api/create", "create is not supported: pass a GGUF file with --model (and a chat template with "
                        "--chat-template-file)"},
        {"/api/copy", "copy is not supported: the server has one model and answers to any name"},
        {"/api/delete", "delete is not supported: the model is a GGUF file given with --model"},
        {"/api/blobs/", "blobs are not supported: pass a GGUF file with --model"},
    };
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        size_t n = strlen(routes[i].path);
        if (strncmp(url, routes[i].path, n) || (routes[i].path[n - 1] != '/' && url[n])) continue;
        return o_errorf(mc, MHD_HTTP_BAD_REQUEST, "models here are GGUF files ('%.100s' is loaded); %s", s->m.name,
                        routes[i].what);
    }
    return o_errorf(mc, MHD_HTTP_NOT_FOUND, "'%.100s' is not part of Ollama's API here", url);
}

enum MHD_Result srv_ollama_route(srv *s, struct MHD_Connection *mc, const char *url, const char *method,
                                 const char *body, size_t len) {
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/")) { /* clients probe it (HEAD /): Ollama's answer, as text */
        if (!get) return srv_ollama_error(mc, MHD_HTTP_METHOD_NOT_ALLOWED, "use GET or HEAD");
        static const char running[] = "Ollama is running";
        struct MHD_Response *r =
            MHD_create_response_from_buffer(sizeof running - 1, (void *)running, MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
        MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
        enum MHD_Result ret = srv_http_queue(mc, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ret;
    }
    if (!strcmp(url, "/api/version") || !strcmp(url, "/api/tags") || !strcmp(url, "/api/ps")) {
        if (!get) return srv_ollama_error(mc, MHD_HTTP_METHOD_NOT_ALLOWED, "use GET");
        if (!strcmp(url, "/api/version")) {
            static const char v[] = "{\"version\":\"" OLLAMA_API_VERSION "\"}";
            return srv_http_json(mc, MHD_HTTP_OK, v, sizeof v - 1);
        }
        return model_list(s, mc, !strcmp(url, "/api/ps"));
    }
    bool known = false;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) known |= !strcmp(url, paths[i]);
    if (!known) return model_management(s, mc, url);
    if (!post) return srv_ollama_error(mc, MHD_HTTP_METHOD_NOT_ALLOWED, "use POST");
    if (!srv_utf8_valid(body, len)) return srv_ollama_error(mc, MHD_HTTP_BAD_REQUEST, "the body is not valid UTF-8");
    if (srv_json_has_nul(body, len)) return srv_ollama_error(mc, MHD_HTTP_BAD_REQUEST, NUL_REFUSED);
    cJSON *j = cJSON_ParseWithLength(body, len);
    if (!j) return srv_ollama_error(mc, MHD_HTTP_BAD_REQUEST, "the body is not valid JSON");
    enum MHD_Result ret = show(s, mc, j); /* (/api/chat and /api/generate: srv_ollama_prep) */
    cJSON_Delete(j);
    return ret;
}

const http_prep *srv_ollama_prep(const char *url, const char *method, int *which) {
    if (strcmp(method, "POST")) return NULL;
    if (strcmp(url, "/api/chat") && strcmp(url, "/api/generate")) return NULL;
    *which = !strcmp(url, "/api/chat");
    return &gen_prep;
}
