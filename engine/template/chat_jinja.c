/* chat_jinja.c — rendering a model's Jinja chat template with llama-server's
 * conventions: capability probes, message normalisation, the variables a
 * template expects (see chat_jinja.h). */
#include "engine/template/chat_jinja.h"

#include <stdlib.h>
#include <string.h>

#include "engine/template/jinja.h"

struct chat_jinja {
    jinja_tpl *tpl;
    char *bos, *eos;
    bool system_role;  /* the template shows a system message's text */
    bool object_args;    /* the template reads tool-call arguments as a mapping (probed) */
    bool tool_responses; /* an older Gemma 4 template: tool answers go on the assistant turn */
    bool thinking_off;   /* Apertus: llama.cpp renders it with enable_thinking = false */
    bool keep_thinking;  /* DeepSeek V4: llama.cpp keeps earlier reasoning (drop_thinking = false) */
};

static const char *SYS_NEEDLE = "<System Needle>";
static const char *USER_NEEDLE = "<User Needle>";
static const char *ARG_NEEDLE = "argument_needle_value";

static cJSON *msg(const char *role, const char *content) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    if (content) cJSON_AddStringToObject(m, "content", content);
    else cJSON_AddNullToObject(m, "content");
    return m;
}

/* Renders without normalisation (the probes build their messages in final
 * shape); NULL on any error. */
static char *raw_render(const chat_jinja *cj, cJSON *messages, cJSON *tools, bool add_gen) {
    cJSON *vars = cJSON_CreateObject();
    if (!vars) return NULL;
    cJSON_AddItemReferenceToObject(vars, "messages", messages);
    if (tools) cJSON_AddItemReferenceToObject(vars, "tools", tools);
    cJSON_AddBoolToObject(vars, "add_generation_prompt", add_gen);
    cJSON_AddStringToObject(vars, "bos_token", cj->bos);
    cJSON_AddStringToObject(vars, "eos_token", cj->eos);
    cJSON_AddBoolToObject(vars, "enable_thinking", true);
    char *out = NULL;
    jinja_opts o = {.max_steps = 2000000};
    if (jinja_render(cj->tpl, vars, &o, &out, NULL, NULL) != 0) out = NULL;
    cJSON_Delete(vars);
    return out;
}

static bool render_contains(const chat_jinja *cj, cJSON *messages, const char *needle,
                            const char *needle2) {
    char *out = raw_render(cj, messages, NULL, false);
    bool yes = out && (strstr(out, needle) || (needle2 && strstr(out, needle2)));
    free(out);
    return yes;
}

/* Whether the template shows a system message's text (llama.cpp's
 * supports_system_role). */
static bool probe_system_role(const chat_jinja *cj) {
    cJSON *m = cJSON_CreateArray();
    cJSON_AddItemToArray(m, msg("system", SYS_NEEDLE));
    cJSON_AddItemToArray(m, msg("user", USER_NEEDLE));
    bool yes = render_contains(cj, m, SYS_NEEDLE, NULL);
    cJSON_Delete(m);
    return yes;
}

/* llama.cpp's probe conversation for tool calls (common/jinja/caps.cpp): a
 * user turn, an assistant turn calling tool1 with object arguments
 * {"arg": ARG_NEEDLE}, the tool's answer, an assistant answer, a user turn. */
static cJSON *tool_probe_messages(void) {
    cJSON *m = cJSON_CreateArray();
    cJSON_AddItemToArray(m, msg("user", "User message"));
    cJSON *a = msg("assistant", "");
    cJSON *call = cJSON_CreateObject();
    cJSON_AddStringToObject(call, "id", "call00001");
    cJSON_AddStringToObject(call, "type", "function");
    cJSON *fn = cJSON_AddObjectToObject(call, "function");
    cJSON_AddStringToObject(fn, "name", "tool1");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(fn, "arguments"), "arg", ARG_NEEDLE);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(a, "tool_calls"), call);
    cJSON_AddItemToArray(m, a);
    cJSON *t = msg("tool", "Tool response");
    cJSON_AddStringToObject(t, "tool_call_id", "call00001");
    cJSON_AddItemToArray(m, t);
    cJSON_AddItemToArray(m, msg("assistant", "The tool response was 'tool response'"));
    cJSON_AddItemToArray(m, msg("user", "User message"));
    return m;
}

static const char *const TOOL_PROBE_TOOLS =
    "[{\"name\":\"tool\",\"type\":\"function\",\"function\":{\"name\":\"tool1\","
    "\"description\":\"Tool description\",\"parameters\":{\"type\":\"object\",\"properties\":"
    "{\"arg\":{\"type\":\"string\",\"description\":\"Arg description\"}},\"required\":[\"arg\"]}}}]";

/* Whether the template reads tool-call arguments as a mapping (llama.cpp's
 * supports_object_arguments): llama.cpp renders the probe conversation with
 * object arguments and asks whether arguments.arg was used. Here: whether the
 * value reaches the output, which it does through arguments.arg, a loop over
 * arguments.items() or arguments|tojson — the ways llama.cpp counts as a use.
 * A template that fails on object arguments (string + dict) wants strings. */
static bool probe_object_args(const chat_jinja *cj) {
    cJSON *m = tool_probe_messages(), *tools = cJSON_Parse(TOOL_PROBE_TOOLS);
    char *out = raw_render(cj, m, tools, true);
    bool yes = out && strstr(out, ARG_NEEDLE);
    free(out);
    cJSON_Delete(tools);
    cJSON_Delete(m);
    return yes;
}

int chat_jinja_create(const char *src, size_t len, const char *bos, const char *eos,
                      chat_jinja **out, llc_err *err) {
    *out = NULL;
    chat_jinja *cj = calloc(1, sizeof *cj);
    if (!cj) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    cj->bos = strdup(bos ? bos : "");
    cj->eos = strdup(eos ? eos : "");
    if (!cj->bos || !cj->eos) {
        chat_jinja_free(cj);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    int rc = jinja_parse(src, len, &cj->tpl, err);
    if (rc) {
        chat_jinja_free(cj);
        return rc;
    }
    cj->system_role = probe_system_role(cj);
    cj->object_args = probe_object_args(cj);
    /* Families llama.cpp renders with their own variables or message
     * rewrites (its per-format handlers), recognised by their markers as
     * llama.cpp recognises them. Gemma 4 templates without Google's "OpenAI
     * Chat Completions" branch read tool answers only from
     * message.tool_responses, which llama.cpp builds for them. */
    cj->tool_responses = memmem(src, len, "'<|tool_call>call:'", 19) &&
                         !memmem(src, len, "{#- OpenAI Chat Completions:", 28);
    cj->thinking_off = memmem(src, len, "<|developer_start|>", 19) && memmem(src, len, "Deliberation: ", 14);
    cj->keep_thinking = memmem(src, len, "drop_thinking", 13) && memmem(src, len, "DSML", 4);
    *out = cj;
    return 0;
}

void chat_jinja_free(chat_jinja *cj) {
    if (!cj) return;
    jinja_free(cj->tpl);
    free(cj->bos);
    free(cj->eos);
    free(cj);
}


/* ---- normalising messages ---- */

static cJSON *dup_or_null(const cJSON *v) { return v ? cJSON_Duplicate(v, true) : cJSON_CreateNull(); }

/* One message in OpenAI shape; NULL with err set when it is malformed. */
static cJSON *normalize(const chat_jinja *cj, const cJSON *m, int i, llc_err *err) {
    if (!cJSON_IsObject(m)) {
        llc_fail(err, LLC_ERR_FORMAT, "message %d is not an object", i);
        return NULL;
    }
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!cJSON_IsString(role)) {
        llc_fail(err, LLC_ERR_FORMAT, "message %d has no role", i);
        return NULL;
    }
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    cJSON *o = cJSON_CreateObject();
    const char *r = strcmp(role->valuestring, "developer") == 0 ? "system" : role->valuestring;
    cJSON_AddStringToObject(o, "role", r);
    if (!content || cJSON_IsNull(content)) cJSON_AddStringToObject(o, "content", "");
    else cJSON_AddItemToObject(o, "content", cJSON_Duplicate(content, true));
    static const char *const extra[] = {"name", "tool_call_id", "reasoning_content"};
    for (size_t k = 0; k < LLC_ARRAY_LEN(extra); k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, extra[k]);
        if (v && !cJSON_IsNull(v)) cJSON_AddItemToObject(o, extra[k], cJSON_Duplicate(v, true));
    }
    if (cJSON_IsArray(calls) && cJSON_GetArraySize(calls) > 0) {
        cJSON *arr = cJSON_AddArrayToObject(o, "tool_calls");
        const cJSON *c;
        cJSON_ArrayForEach(c, calls) {
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function");
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "type");
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
            cJSON *nc = cJSON_CreateObject();
            cJSON_AddStringToObject(nc, "type", cJSON_IsString(type) ? type->valuestring : "function");
            cJSON *nf = cJSON_AddObjectToObject(nc, "function");
            cJSON_AddItemToObject(nf, "name", dup_or_null(cJSON_GetObjectItemCaseSensitive(f, "name")));
            /* Arguments in a JSON string become the object for templates that
             * read them as a mapping (as llama.cpp does), remembering their
             * text: printed as a whole they are that string again (see
             * jinja.h). Other templates get the string. */
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(f, "arguments");
            cJSON *na = NULL;
            if (cj->object_args && cJSON_IsString(args) && (na = cJSON_Parse(args->valuestring)) != NULL) {
                if (cJSON_IsObject(na)) {
                    na->valuestring = strdup(args->valuestring);
                } else {
                    cJSON_Delete(na);
                    na = NULL;
                }
            }
            cJSON_AddItemToObject(nf, "arguments", na ? na : dup_or_null(args));
            if (id) cJSON_AddItemToObject(nc, "id", cJSON_Duplicate(id, true));
            cJSON_AddItemToArray(arr, nc);
        }
    }
    return o;
}

/* For older Gemma 4 templates (see chat_jinja_create): each run of tool
 * messages after an assistant turn with tool_calls moves onto that turn as
 * tool_responses [{name, response}], the response parsed when it is JSON. */
static void fold_tool_responses(cJSON *msgs) {
    cJSON *last_asst = NULL;
    int k = 0;
    for (cJSON *m = msgs->child; m;) {
        cJSON *next = m->next;
        const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role"));
        if (role && strcmp(role, "assistant") == 0 && cJSON_GetObjectItemCaseSensitive(m, "tool_calls")) {
            last_asst = m;
            k = 0;
        } else if (role && strcmp(role, "tool") == 0 && last_asst) {
            cJSON *calls = cJSON_GetObjectItemCaseSensitive(last_asst, "tool_calls");
            const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "tool_call_id"));
            const cJSON *call = NULL, *c;
            cJSON_ArrayForEach(c, calls) {
                const char *cid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "id"));
                if (id && cid && strcmp(id, cid) == 0) call = c;
            }
            if (!call) call = cJSON_GetArrayItem(calls, k);
            k++;
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
            const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "name"));
            cJSON *resps = cJSON_GetObjectItemCaseSensitive(last_asst, "tool_responses");
            if (!resps) resps = cJSON_AddArrayToObject(last_asst, "tool_responses");
            cJSON *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "name", name ? name : "unknown");
            const char *content = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "content"));
            cJSON *parsed = content ? cJSON_Parse(content) : NULL;
            cJSON_AddItemToObject(r, "response", parsed ? parsed : cJSON_CreateString(content ? content : ""));
            cJSON_AddItemToArray(resps, r);
            cJSON_Delete(cJSON_DetachItemViaPointer(msgs, m));
        } else {
            last_asst = NULL;
        }
        m = next;
    }
}

static cJSON *build_messages(const chat_jinja *cj, const cJSON *messages, llc_err *err) {
    if (!cJSON_IsArray(messages)) {
        llc_fail(err, LLC_ERR_FORMAT, "messages must be an array");
        return NULL;
    }
    cJSON *out = cJSON_CreateArray();
    char *pending = NULL; /* system text waiting for the next user message */
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, messages) {
        cJSON *n = normalize(cj, m, i++, err);
        if (!n) {
            free(pending);
            cJSON_Delete(out);
            return NULL;
        }
        const char *role = cJSON_GetObjectItemCaseSensitive(n, "role")->valuestring;
        cJSON *content = cJSON_GetObjectItemCaseSensitive(n, "content");
        if (!cj->system_role && cJSON_IsString(content)) {
            if (strcmp(role, "system") == 0) {
                size_t a = pending ? strlen(pending) : 0, b = strlen(content->valuestring);
                char *p = realloc(pending, a + b + 2);
                if (!p) break;
                if (a) p[a++] = '\n';
                memcpy(p + a, content->valuestring, b + 1);
                pending = p;
                cJSON_Delete(n);
                continue;
            }
            if (pending && strcmp(role, "user") == 0) {
                size_t a = strlen(pending), b = strlen(content->valuestring);
                char *p = malloc(a + b + 2);
                if (p) {
                    memcpy(p, pending, a);
                    if (b) p[a++] = '\n';
                    memcpy(p + a, content->valuestring, b + 1);
                    cJSON_ReplaceItemInObjectCaseSensitive(n, "content", cJSON_CreateString(p));
                    free(p);
                }
                free(pending);
                pending = NULL;
            } else if (pending) {
                cJSON_AddItemToArray(out, msg("user", pending));
                free(pending);
                pending = NULL;
            }
        }
        cJSON_AddItemToArray(out, n);
    }
    if (pending) cJSON_AddItemToArray(out, msg("user", pending));
    free(pending);
    if (cj->tool_responses) fold_tool_responses(out);
    return out;
}

int chat_jinja_apply(const chat_jinja *cj, const cJSON *messages, const cJSON *tools,
                     bool add_generation_prompt, bool strip_bos, time_t now, const cJSON *extra,
                     char **out, llc_err *err) {
    *out = NULL;
    cJSON *msgs = build_messages(cj, messages, err);
    if (!msgs) return LLC_ERR_FORMAT;
    if (!now) now = time(NULL);
    cJSON *vars = cJSON_CreateObject();
    cJSON_AddItemToObject(vars, "messages", msgs);
    if (tools && !cJSON_IsNull(tools)) cJSON_AddItemToObject(vars, "tools", cJSON_Duplicate(tools, true));
    cJSON_AddBoolToObject(vars, "add_generation_prompt", add_generation_prompt);
    cJSON_AddStringToObject(vars, "bos_token", cj->bos);
    cJSON_AddStringToObject(vars, "eos_token", cj->eos);
    cJSON_AddBoolToObject(vars, "enable_thinking", !cj->thinking_off);
    if (cj->keep_thinking) cJSON_AddBoolToObject(vars, "drop_thinking", false);
    struct tm tm;
    localtime_r(&now, &tm);
    char buf[64];
    strftime(buf, sizeof buf, "%d %b %Y", &tm);
    cJSON_AddStringToObject(vars, "date_string", buf);
    strftime(buf, sizeof buf, "%b %d %Y", &tm);
    cJSON_AddStringToObject(vars, "datetime", buf);
    for (const cJSON *kv = cJSON_IsObject(extra) ? extra->child : NULL; kv; kv = kv->next) {
        /* the caller's variables (chat_template_kwargs) over these */
        if (!kv->string || !strcmp(kv->string, "messages")) continue;
        cJSON_DeleteItemFromObjectCaseSensitive(vars, kv->string);
        cJSON_AddItemToObject(vars, kv->string, cJSON_Duplicate(kv, true));
    }
    jinja_opts o = {.now = now};
    size_t len = 0;
    int rc = jinja_render(cj->tpl, vars, &o, out, &len, err);
    cJSON_Delete(vars);
    if (rc) return rc;
    size_t bl = strlen(cj->bos);
    if (strip_bos && bl && len >= bl && memcmp(*out, cj->bos, bl) == 0) memmove(*out, *out + bl, len - bl + 1);
    return 0;
}
