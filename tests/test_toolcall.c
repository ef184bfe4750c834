/* test_toolcall.c — engine/toolcall: format detection from real chat
 * templates, the incremental reader of tool calls (every sample fed in two
 * pieces at every split point, and a byte at a time: the same calls, the same
 * content, never a byte of markup as content), and the generic tools prompt. */
#include "engine/template/toolcall.h"

#include <stdio.h>
#include <stdlib.h>

#include "tests/test.h"

/* ---- a sink that records the stream ---- */

typedef struct rec {
    char content[4096];
    size_t n_content;
    char names[8][64];
    char args[8][1024];
    int n_calls;
    int n_arg_pieces;
    bool args_before_call; /* an args piece for a call not announced yet */
    bool bad_index;        /* a call index that is not the next one */
} rec;

static void app(char *dst, size_t cap, size_t *len, const char *s, size_t n) {
    if (*len + n >= cap) n = cap - 1 - *len;
    memcpy(dst + *len, s, n);
    *len += n;
    dst[*len] = 0;
}

static void on_content(void *ud, const char *s, size_t n) {
    rec *r = ud;
    app(r->content, sizeof r->content, &r->n_content, s, n);
}

static void on_call(void *ud, int i, const char *name) {
    rec *r = ud;
    if (i != r->n_calls || i >= 8) {
        r->bad_index = true;
        return;
    }
    snprintf(r->names[i], sizeof r->names[i], "%s", name);
    r->n_calls++;
}

static void on_args(void *ud, int i, const char *s, size_t n) {
    rec *r = ud;
    if (i < 0 || i >= r->n_calls) {
        r->args_before_call = true;
        return;
    }
    size_t len = strlen(r->args[i]);
    app(r->args[i], sizeof r->args[i], &len, s, n);
    r->n_arg_pieces++;
}

typedef struct expect_call {
    const char *name, *args;
} expect_call;

typedef struct sample {
    toolcall_format fmt;
    const char *text;
    const char *content;
    expect_call calls[4];
} sample;

static cJSON *tools_json(void) {
    return cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"
                       "{\"type\":\"object\",\"properties\":{\"location\":{\"type\":\"string\"},\"days\":{\"type\":"
                       "\"integer\"},\"metric\":{\"type\":\"boolean\"}}}}},"
                       "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}]");
}

/* Feeds text in the pieces cut at cuts[0..n_cuts) and checks the outcome. */
static bool run_sample(const sample *s, const size_t *cuts, int n_cuts, rec *r) {
    memset(r, 0, sizeof *r);
    toolcall_sink sink = {r, on_content, on_call, on_args};
    cJSON *tools = tools_json();
    toolcall_parser *p = NULL;
    if (toolcall_parser_create(s->fmt, tools, &sink, &p)) return false;
    cJSON_Delete(tools);
    size_t at = 0, len = strlen(s->text);
    for (int i = 0; i <= n_cuts; i++) {
        size_t to = i < n_cuts ? cuts[i] : len;
        if (toolcall_feed(p, s->text + at, to - at)) return false;
        at = to;
    }
    bool ok = toolcall_finish(p) == 0;
    int n_exp = 0;
    while (n_exp < 4 && s->calls[n_exp].name) n_exp++;
    ok = ok && !r->bad_index && !r->args_before_call;
    ok = ok && strcmp(r->content, s->content) == 0;
    size_t clen;
    ok = ok && strcmp(toolcall_content(p, &clen), s->content) == 0 && clen == strlen(s->content);
    ok = ok && r->n_calls == n_exp && toolcall_count(p) == n_exp;
    for (int i = 0; ok && i < n_exp; i++) {
        ok = strcmp(r->names[i], s->calls[i].name) == 0 && strcmp(r->args[i], s->calls[i].args) == 0 &&
             strcmp(toolcall_name(p, i), s->calls[i].name) == 0 &&
             strcmp(toolcall_arguments(p, i), s->calls[i].args) == 0;
    }
    toolcall_parser_free(p);
    return ok;
}

static const sample SAMPLES[] = {
    /* Hermes / Qwen */
    {TOOLCALL_HERMES,
     "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"unit\": "
     "\"celsius\"}}\n</tool_call>",
     "Let me check.",
     {{"get_weather", "{\"location\": \"Paris\", \"unit\": \"celsius\"}"}}},
    {TOOLCALL_HERMES,
     "<tool_call>\n{\"name\":\"a\",\"arguments\":{\"x\":1}}\n</tool_call>\n<tool_call>\n{\"arguments\": {\"y\": "
     "\"}{\\\"<tool_call>\"}, \"name\": \"b\"}\n</tool_call>",
     "",
     {{"a", "{\"x\":1}"}, {"b", "{\"y\": \"}{\\\"<tool_call>\"}"}}},
    {TOOLCALL_HERMES, "1 < 2 and <tool is fine>\n", "1 < 2 and <tool is fine>\n", {{0}}},
    {TOOLCALL_HERMES, "Hi <tool_call>oops</tool_call> ok", "Hi <tool_call>oops</tool_call> ok", {{0}}},
    {TOOLCALL_HERMES, "<tool_call>{\"arguments\": {}}</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>",
     {{0}}},
    {TOOLCALL_HERMES, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, {\"y\"", "",
     {{"a", "{\"x\": [1, {\"y\""}}},
    {TOOLCALL_HERMES, "<tool_call>{\"name\": \"now\"}</tool_call>", "", {{"now", "{}"}}},
    {TOOLCALL_HERMES, "<tool_call>{\"name\":\"a\",\"arguments\":\"{\\\"x\\\":1}\"}</tool_call>", "",
     {{"a", "{\"x\":1}"}}},
    {TOOLCALL_HERMES, "<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>\n\nDone.", "Done.",
     {{"now", "{}"}}},
    {TOOLCALL_GENERIC, "Caf\xc3\xa9 <tool_call>{\"name\": \"caf\\u00e9\", \"arguments\": {\"s\": \"\xc3\xa9\"}}",
     "Caf\xc3\xa9", {{"caf\xc3\xa9", "{\"s\": \"\xc3\xa9\"}"}}},
    /* Llama 3.x */
    {TOOLCALL_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}", "",
     {{"get_weather", "{\"location\": \"Paris\"}"}}},
    {TOOLCALL_LLAMA3, "  {\"type\": \"function\", \"name\": \"now\", \"parameters\": {}}", "", {{"now", "{}"}}},
    {TOOLCALL_LLAMA3, "{\"name\": \"Bob\", \"age\": 3}", "{\"name\": \"Bob\", \"age\": 3}", {{0}}},
    {TOOLCALL_LLAMA3, "{\"a\": 1} is JSON", "{\"a\": 1} is JSON", {{0}}},
    {TOOLCALL_LLAMA3, "Sure: {\"name\": \"now\"}", "Sure: {\"name\": \"now\"}", {{0}}},
    {TOOLCALL_LLAMA3, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Oslo\"}}", "",
     {{"get_weather", "{\"location\": \"Oslo\"}"}}},
    {TOOLCALL_LLAMA3, "<|python_tag|>print(\"hi\")\n", "", {{"python", "{\"code\": \"print(\\\"hi\\\")\\n\"}"}}},
    {TOOLCALL_LLAMA3,
     "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"A\"}}; {\"name\": \"get_weather\", "
     "\"parameters\": {\"location\": \"B\"}}",
     "",
     {{"get_weather", "{\"location\": \"A\"}"}, {"get_weather", "{\"location\": \"B\"}"}}},
    /* Mistral */
    {TOOLCALL_MISTRAL,
     "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}, \"id\": \"abc123def\"}]",
     "",
     {{"get_weather", "{\"location\": \"Paris\"}"}}},
    {TOOLCALL_MISTRAL, "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {}}, {\"name\": \"b\", \"arguments\": {\"k\": [1, 2]}}]",
     "",
     {{"a", "{}"}, {"b", "{\"k\": [1, 2]}"}}},
    {TOOLCALL_MISTRAL, "[TOOL_CALLS]get_weather[ARGS]{\"location\": \"Paris\"}[TOOL_CALLS]now[ARGS]{}", "",
     {{"get_weather", "{\"location\": \"Paris\"}"}, {"now", "{}"}}},
    {TOOLCALL_MISTRAL, "OK.[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{\"location\": \"Rome\"}", "OK.",
     {{"get_weather", "{\"location\": \"Rome\"}"}}},
    {TOOLCALL_MISTRAL, "See [1] and [TOOL", "See [1] and [TOOL", {{0}}},
    {TOOLCALL_MISTRAL, "Hmm [TOOL_CALLS] not json", "Hmm [TOOL_CALLS] not json", {{0}}},
    /* gpt-oss (harmony), as the reasoning parser hands it on: from "to=" */
    {TOOLCALL_HARMONY, "to=functions.get_weather <|constrain|>json<|message|>{\"location\": \"Paris\"}<|call|>", "",
     {{"get_weather", "{\"location\": \"Paris\"}"}}},
    {TOOLCALL_HARMONY, "to=functions.now<|channel|>commentary json<|message|>{}<|call|>", "", {{"now", "{}"}}},
    {TOOLCALL_HARMONY,
     "Checking.to=functions.a <|constrain|>json<|message|>{\"x\": 1}<|call|>to=functions.b<|message|>{}<|call|>",
     "Checking.", {{"a", "{\"x\": 1}"}, {"b", "{}"}}},
    {TOOLCALL_HARMONY, "set x to=functions of y", "set x to=functions of y", {{0}}},
    /* Qwen3-Coder: raw values, typed by the schema (location: string, days: integer) */
    {TOOLCALL_QWEN3_CODER,
     "Let me check.\n<tool_call>\n<function=get_weather>\n<parameter=location>\nParis, \"FR\"\n</parameter>\n"
     "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
     "Let me check.",
     {{"get_weather", "{\"location\": \"Paris, \\\"FR\\\"\", \"days\": 3}"}}},
    {TOOLCALL_QWEN3_CODER,
     "<tool_call>\n<function=now>\n</function>\n</tool_call>\n<tool_call>\n<function=get_weather>\n"
     "<parameter=location>\na\n</para\n\nb <x>\n</parameter>\n<parameter=days>\nsoon\n</parameter>\n"
     "<parameter=opts>\n{\"k\": [1, true]}\n</parameter>\n</function>\n</tool_call>\n\nDone.",
     "Done.",
     {{"now", "{}"}, {"get_weather", "{\"location\": \"a\\n</para\\n\\nb <x>\", \"days\": \"soon\", \"opts\": {\"k\":[1,true]}}"}}},
    {TOOLCALL_QWEN3_CODER, "a <tool_call> b <function=x", "a <tool_call> b <function=x", {{0}}},
    {TOOLCALL_QWEN3_CODER, "<tool_call>\n<function=get_weather>\n<parameter=location>\nPar", "",
     {{"get_weather", "{\"location\": \"Par\"}"}}},
    /* GLM 4.5 / 4.6 */
    {TOOLCALL_GLM,
     "I'll look.\n<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Paris</arg_value>\n"
     "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
     "I'll look.",
     {{"get_weather", "{\"location\": \"Paris\", \"days\": 3}"}}},
    {TOOLCALL_GLM,
     "<tool_call>now\n</tool_call>\n<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>\nOslo\n"
     "</arg_value>\n<arg_key>metric</arg_key>\n<arg_value>false</arg_value>\n</tool_call>\nDone.",
     "Done.",
     {{"now", "{}"}, {"get_weather", "{\"location\": \"\\nOslo\\n\", \"metric\": false}"}}},
    {TOOLCALL_GLM, "<tool_call></tool_call> x", "<tool_call></tool_call> x", {{0}}},
    /* as GLM-4.5-Air was seen to write it: spaces for newlines; a tool not offered: values untyped */
    {TOOLCALL_GLM, "See: <tool_call>ls <arg_key>dir</arg_key> <arg_value>backend</arg_value> </tool_call>", "See:",
     {{"ls", "{\"dir\": \"backend\"}"}}},
    /* MiniMax-M2: several invokes in one block */
    {TOOLCALL_MINIMAX,
     "Sure.<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"location\">Rome</parameter>\n"
     "<parameter name=\"metric\">true</parameter>\n</invoke>\n<invoke name=\"now\">\n</invoke>\n"
     "</minimax:tool_call>",
     "Sure.",
     {{"get_weather", "{\"location\": \"Rome\", \"metric\": true}"}, {"now", "{}"}}},
    {TOOLCALL_MINIMAX, "x <minimax:tool_call> <invoke nam", "x <minimax:tool_call> <invoke nam", {{0}}},
    /* MiniMax-M1: JSON objects one per line in <tool_calls>; an array of them */
    {TOOLCALL_MINIMAX_M1,
     "Let me check.\n<tool_calls>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n"
     "{\"name\": \"now\", \"arguments\": {}}\n</tool_calls>",
     "Let me check.",
     {{"get_weather", "{\"location\": \"Paris\"}"}, {"now", "{}"}}},
    {TOOLCALL_MINIMAX_M1, "<tool_calls>[{\"name\": \"now\", \"arguments\": {}}]</tool_calls> ok", "ok", {{"now", "{}"}}},
    {TOOLCALL_MINIMAX_M1, "a <tool_calls> b", "a <tool_calls> b", {{0}}},
    {TOOLCALL_MINIMAX_M1, "a <tool_calls>\n</tool_calls>", "a <tool_calls>\n</tool_calls>", {{0}}},
    /* MiniMax-M3: every tag namespaced by a token string; nested values */
    {TOOLCALL_MINIMAX_M3,
     "Sure.]<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name=\"get_weather\">]<]minimax[>[<location>Paris]<]minimax[>["
     "</location>]<]minimax[>[<days>3]<]minimax[>[</days>]<]minimax[>[</invoke>\n]<]minimax[>[<invoke name=\"now\">"
     "]<]minimax[>[</invoke>\n]<]minimax[>[</tool_call>",
     "Sure.",
     {{"get_weather", "{\"location\": \"Paris\", \"days\": 3}"}, {"now", "{}"}}},
    {TOOLCALL_MINIMAX_M3,
     "]<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name=\"get_weather\">]<]minimax[>[<opts>]<]minimax[>[<k>"
     "]<]minimax[>[<item>1]<]minimax[>[</item>]<]minimax[>[<item>true]<]minimax[>[</item>]<]minimax[>[</k>"
     "]<]minimax[>[<opts>x]<]minimax[>[</opts>]<]minimax[>[</opts>]<]minimax[>[<metric>false]<]minimax[>[</metric>"
     "]<]minimax[>[</invoke>\n]<]minimax[>[</tool_call>",
     "",
     {{"get_weather", "{\"opts\": {\"k\":[1,true],\"opts\":\"x\"}, \"metric\": false}"}}},
    {TOOLCALL_MINIMAX_M3, "x ]<]minimax[>[<tool_call> ]<]minimax[>[<invo", "x ]<]minimax[>[<tool_call> ]<]minimax[>[<invo",
     {{0}}},
    /* Apriel: a JSON array in <tool_calls> (MINIMAX_M1's reader), after the reasoning parser took
       [BEGIN FINAL RESPONSE] */
    {TOOLCALL_MINIMAX_M1,
     "<tool_calls>[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}, "
     "{\"name\": \"now\", \"arguments\": {}}]</tool_calls>",
     "",
     {{"get_weather", "{\"location\": \"Paris\"}"}, {"now", "{}"}}},
    /* tencent Hy3: GLM's markup, every tag suffixed */
    {TOOLCALL_HUNYUAN,
     "Checking.<tool_calls:opensource>\n<tool_call:opensource>get_weather<tool_sep:opensource>\n"
     "<arg_key:opensource>location</arg_key:opensource>\n<arg_value:opensource>Paris</arg_value:opensource>\n"
     "<arg_key:opensource>days</arg_key:opensource>\n<arg_value:opensource>3</arg_value:opensource>\n"
     "</tool_call:opensource>\n<tool_call:opensource>now<tool_sep:opensource>\n</tool_call:opensource>\n"
     "</tool_calls:opensource>",
     "Checking.",
     {{"get_weather", "{\"location\": \"Paris\", \"days\": 3}"}, {"now", "{}"}}},
    {TOOLCALL_HUNYUAN, "a <tool_calls:opensource> <tool_c", "a <tool_calls:opensource> <tool_c", {{0}}},
    /* Kimi K2: "functions." and the call index are not the name */
    {TOOLCALL_KIMI_K2,
     "On it.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
     "{\"location\": \"Paris\"}<|tool_call_end|><|tool_call_begin|>functions.now:1<|tool_call_argument_begin|>{}"
     "<|tool_call_end|><|tool_calls_section_end|>",
     "On it.",
     {{"get_weather", "{\"location\": \"Paris\"}"}, {"now", "{}"}}},
    {TOOLCALL_KIMI_K2, "a <|tool_calls_section_begin|> b", "a <|tool_calls_section_begin|> b", {{0}}},
    {TOOLCALL_KIMI_K2, "a <|tool_calls_section_begin|><|tool_call_begin|>x y<|tool_call_argument_begin|>{}",
     "a <|tool_calls_section_begin|><|tool_call_begin|>x y<|tool_call_argument_begin|>{}", {{0}}},
    /* Solar Open: an id, then the name */
    {TOOLCALL_SOLAR,
     "<|tool_calls|><|tool_call:begin|>call1<|tool_call:name|>get_weather<|tool_call:args|>{\"days\": 2}"
     "<|tool_call:end|><|calls|>",
     "",
     {{"get_weather", "{\"days\": 2}"}}},
    {TOOLCALL_SOLAR, "x <|tool_calls|><|tool_call:beg", "x <|tool_calls|><|tool_call:beg", {{0}}},
    /* Command-A: a JSON array of tool_name/parameters objects */
    {TOOLCALL_COMMAND_A,
     "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"get_weather\", \"parameters\": "
     "{\"location\": \"Oslo\"}},\n    {\"tool_call_id\": \"1\", \"tool_name\": \"now\", \"parameters\": {}}\n]"
     "<|END_ACTION|>",
     "",
     {{"get_weather", "{\"location\": \"Oslo\"}"}, {"now", "{}"}}},
    {TOOLCALL_COMMAND_A, "a <|START_ACTION|> b", "a <|START_ACTION|> b", {{0}}},
    /* Gemma 4: bare keys, <|"|>-quoted strings, made JSON */
    {TOOLCALL_GEMMA4,
     "Sure.<|tool_call>call:get_weather{location:<|\"|>Paris, \"FR\" {x}<|\"|>,days:3,metric:true,"
     "opts:{k:[1,<|\"|>a<|\"|>],w:cloudy}}<tool_call|><|tool_call>call:now{}<tool_call|>",
     "Sure.",
     {{"get_weather", "{\"location\":\"Paris, \\\"FR\\\" {x}\",\"days\":3,\"metric\":true,"
                      "\"opts\":{\"k\":[1,\"a\"],\"w\":\"cloudy\"}}"},
      {"now", "{}"}}},
    {TOOLCALL_GEMMA4, "a <|tool_call>call:x y{}", "a <|tool_call>call:x y{}", {{0}}},
    /* Kimi K3: attributes after the name and each key; type="string" types a value no schema
       does ("note"), the schema wins where it says ("days") */
    {TOOLCALL_KIMI_K3,
     "Let me look.<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|>"
     "<|open|>argument key=\"location\" type=\"string\"<|sep|>Paris <b>FR</b><|close|>argument<|sep|>"
     "<|open|>argument key=\"days\" type=\"number\"<|sep|>3<|close|>argument<|sep|>"
     "<|open|>argument key=\"note\" type=\"string\"<|sep|>42<|close|>argument<|sep|>"
     "<|open|>argument key=\"opts\" type=\"object\"<|sep|>{\"k\": [1, 2]}<|close|>argument<|sep|>"
     "<|close|>call<|sep|><|open|>call tool=\"now\" index=\"2\"<|sep|><|close|>call<|sep|><|close|>tools<|sep|>",
     "Let me look.",
     {{"get_weather", "{\"location\": \"Paris <b>FR</b>\", \"days\": 3, \"note\": \"42\", \"opts\": {\"k\":[1,2]}}"},
      {"now", "{}"}}},
    /* a call stands once named; what breaks its attributes is text */
    {TOOLCALL_KIMI_K3, "a <|open|>tools<|sep|><|open|>call tool=\"x\" <oops>", "a <oops>", {{"x", "{}"}}},
    {TOOLCALL_KIMI_K3, "a <|open|>tools<|sep|><|open|>cal", "a <|open|>tools<|sep|><|open|>cal", {{0}}},
    /* the arguments as one JSON object (its template's form for arguments sent as a
     * string); names and keys with attribute escapes */
    {TOOLCALL_KIMI_K3,
     "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|><|open|>json type=\"object\"<|sep|>"
     "{\"location\": \"Paris <|x\", \"days\": [3, 4]}<|close|>json<|sep|><|close|>call<|sep|>"
     "<|open|>call tool=\"a&amp;b&quot;\" index=\"2\"<|sep|>"
     "<|open|>argument key=\"k&lt;&quot;\" type=\"number\"<|sep|>1<|close|>argument<|sep|><|close|>call<|sep|>"
     "<|close|>tools<|sep|> ok",
     "ok",
     {{"get_weather", "{\"location\":\"Paris <|x\",\"days\":[3,4]}"}, {"a&b\"", "{\"k<\\\"\": 1}"}}},
    /* a JSON block that is no object: the call ends before it, the block is text */
    {TOOLCALL_KIMI_K3,
     "<|open|>tools<|sep|><|open|>call tool=\"x\"<|sep|><|open|>json<|sep|>[1]<|close|>json<|sep|>",
     "<|open|>json<|sep|>[1]<|close|>json<|sep|>", {{"x", "{}"}}},
};

static void test_every_split_point(void) {
    for (size_t k = 0; k < LLC_ARRAY_LEN(SAMPLES); k++) {
        const sample *s = &SAMPLES[k];
        size_t len = strlen(s->text);
        rec r;
        for (size_t cut = 0; cut <= len; cut++) {
            bool ok = run_sample(s, &cut, 1, &r);
            CHECKF(ok, "sample %zu (%s) cut at %zu: content '%s', %d calls, first '%s' '%s'", k,
                   toolcall_format_name(s->fmt), cut, r.content, r.n_calls, r.names[0], r.args[0]);
            if (!ok) break;
        }
        for (size_t a = 1; a < len; a += 3) { /* three pieces */
            size_t cuts[2] = {a, a + (len - a) / 2};
            bool ok = run_sample(s, cuts, 2, &r);
            CHECKF(ok, "sample %zu cut at %zu and %zu", k, cuts[0], cuts[1]);
            if (!ok) break;
        }
    }
}

static void test_byte_at_a_time_streams_arguments(void) {
    for (size_t k = 0; k < LLC_ARRAY_LEN(SAMPLES); k++) {
        const sample *s = &SAMPLES[k];
        size_t len = strlen(s->text);
        size_t *cuts = malloc(len * sizeof *cuts);
        for (size_t i = 0; i < len; i++) cuts[i] = i + 1;
        rec r;
        CHECKF(run_sample(s, cuts, (int)len - 1, &r), "sample %zu a byte at a time: content '%s'", k, r.content);
        free(cuts);
    }
    /* the first sample's arguments arrive in many pieces, not at the end */
    const sample *s = &SAMPLES[0];
    size_t len = strlen(s->text), cuts[256];
    for (size_t i = 0; i + 1 < len; i++) cuts[i] = i + 1;
    rec r;
    CHECK(run_sample(s, cuts, (int)len - 1, &r));
    CHECKF(r.n_arg_pieces > 20, "%d pieces", r.n_arg_pieces);
}

static void test_held_text_is_released(void) {
    rec r = {0};
    toolcall_sink sink = {&r, on_content, on_call, on_args};
    toolcall_parser *p;
    CHECK(toolcall_parser_create(TOOLCALL_HERMES, NULL, &sink, &p) == 0);
    CHECK(toolcall_feed(p, "a <tool_c", 9) == 0);
    CHECKF(strcmp(r.content, "a") == 0, "'%s'", r.content); /* " <tool_c" may be markup: held */
    CHECK(toolcall_feed(p, "ar", 2) == 0);
    CHECKF(strcmp(r.content, "a <tool_car") == 0, "'%s'", r.content);
    CHECK(toolcall_feed(p, " <tool_call>{\"name\": \"now\"", 26) == 0);
    CHECK(r.n_calls == 1 && strcmp(r.names[0], "now") == 0); /* announced once the name is whole */
    CHECK(toolcall_finish(p) == 0);
    CHECK(strcmp(r.args[0], "{}") == 0);
    CHECK(strcmp(r.content, "a <tool_car") == 0);
    toolcall_parser_free(p);
}

static char *read_template(const char *name) {
    char path[256];
    snprintf(path, sizeof path, "%s/reference/templates/%s.jinja", t_shared(), name);
    return t_read_file(path, NULL);
}

static void test_detect_real_templates(void) {
    static const struct {
        const char *file;
        toolcall_format fmt;
    } cases[] = {
        {"Qwen-Qwen2.5-7B-Instruct", TOOLCALL_HERMES},
        {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", TOOLCALL_HERMES},
        {"ibm-granite-granite-4.1", TOOLCALL_HERMES},
        {"meta-llama-Llama-3.1-8B-Instruct", TOOLCALL_LLAMA3},
        {"meta-llama-Llama-3.3-70B-Instruct", TOOLCALL_LLAMA3},
        {"mistralai-Mistral-Nemo-Instruct-2407", TOOLCALL_MISTRAL},
        {"mistralai-Ministral-3-14B-Reasoning-2512", TOOLCALL_MISTRAL},
        {"openai-gpt-oss-120b", TOOLCALL_HARMONY},
        {"Qwen3-Coder", TOOLCALL_QWEN3_CODER},
        {"GLM-4.6", TOOLCALL_GLM},
        {"MiniMax-M1", TOOLCALL_MINIMAX_M1}, /* JSON lines in <tool_calls> */
        {"MiniMax-M3", TOOLCALL_MINIMAX_M3}, /* markup namespaced by a token string */
        {"Apriel-1.6-15b-Thinker-fixed", TOOLCALL_MINIMAX_M1}, /* a JSON array in <tool_calls> */
        {"tencent-Hy3", TOOLCALL_HUNYUAN},
        {"Kimi-K2-Instruct", TOOLCALL_KIMI_K2},
        {"upstage-Solar-Open-100B", TOOLCALL_SOLAR},
        {"Cohere2MoE", TOOLCALL_COMMAND_A},
        {"google-gemma-4-31B-it-interleaved", TOOLCALL_GEMMA4},
        {"Kimi-K3", TOOLCALL_KIMI_K3},
        {"CohereForAI-c4ai-command-r-plus-tool_use", TOOLCALL_GENERIC}, /* "Action: ```json": not read */
        {"meetkai-functionary-medium-v3.1", TOOLCALL_GENERIC},
        {"google-gemma-2-2b-it", TOOLCALL_GENERIC}, /* no tools at all */
    };
    for (size_t i = 0; i < LLC_ARRAY_LEN(cases); i++) {
        char *src = read_template(cases[i].file);
        CHECKF(src != NULL, "%s", cases[i].file);
        if (!src) continue;
        toolcall_format f = toolcall_detect(src);
        CHECKF(f == cases[i].fmt, "%s: %s", cases[i].file, toolcall_format_name(f));
        free(src);
    }
    CHECK(toolcall_detect(NULL) == TOOLCALL_GENERIC);
    /* MiniMax-M2's markup (its template is not among the references) */
    CHECK(toolcall_detect("{% if tools %}<minimax:tool_call>\n<invoke name=\"{{ name }}\">{% endif %}") ==
          TOOLCALL_MINIMAX);
}

static void test_xml_string_values_stream(void) {
    /* a string value goes out as it comes, never a byte of its closing markup */
    static const char text[] = "<tool_call>\n<function=get_weather>\n<parameter=location>\n"
                               "The quick brown fox jumps over the lazy dog\n</parameter>\n</function>\n</tool_call>";
    const sample s = {TOOLCALL_QWEN3_CODER, text, "",
                      {{"get_weather", "{\"location\": \"The quick brown fox jumps over the lazy dog\"}"}}};
    size_t len = strlen(text), cuts[256];
    for (size_t i = 0; i + 1 < len; i++) cuts[i] = i + 1;
    rec r;
    CHECK(run_sample(&s, cuts, (int)len - 1, &r));
    CHECKF(r.n_arg_pieces > 30, "%d pieces", r.n_arg_pieces);
}

static void test_generic_messages(void) {
    cJSON *msgs = cJSON_Parse(
        "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Weather?\"},"
        "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":"
        "{\"name\":\"get_weather\",\"arguments\":\"{\\\"location\\\": \\\"Paris\\\"}\"}},{\"id\":\"c2\",\"type\":"
        "\"function\",\"function\":{\"name\":\"now\",\"arguments\":{}}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"18C\"},{\"role\":\"tool\",\"tool_call_id\":\"c2\","
        "\"content\":\"noon\"}]");
    cJSON *tools = tools_json(), *out = NULL;
    llc_err err = {{0}};
    CHECK(toolcall_generic_messages(msgs, tools, true, &out, &err) == 0);
    CHECK(cJSON_GetArraySize(out) == 4);
    const char *sys = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 0), "content"));
    CHECK(sys && strncmp(sys, "Be brief.\n\n# Tools\n", 19) == 0);
    CHECK(sys && strstr(sys, "\"name\":\"get_weather\"") && strstr(sys, "<tool_call>") &&
          strstr(sys, "Call at least one function"));
    const char *asst = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 2), "content"));
    CHECKF(asst && strcmp(asst, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n"
                                "</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>") == 0,
           "%s", asst);
    cJSON *u = cJSON_GetArrayItem(out, 3);
    CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(u, "role")), "user") == 0);
    CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(u, "content")),
                 "<tool_response>\n18C\n</tool_response>\n<tool_response>\nnoon\n</tool_response>") == 0);
    cJSON_Delete(out);
    /* no system message and no tools: messages only rewritten */
    cJSON *plain = cJSON_Parse("[{\"role\":\"user\",\"content\":\"Hi\"}]");
    CHECK(toolcall_generic_messages(plain, NULL, false, &out, &err) == 0);
    CHECK(cJSON_GetArraySize(out) == 1);
    cJSON_Delete(out);
    CHECK(toolcall_generic_messages(plain, tools, false, &out, &err) == 0);
    CHECK(cJSON_GetArraySize(out) == 2);
    CHECK(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 0), "role")), "system") == 0);
    cJSON_Delete(out);
    cJSON_Delete(plain);
    cJSON_Delete(tools);
    cJSON_Delete(msgs);
}

static void test_generic_markup_reads_back(void) {
    /* the assistant text the generic prompt writes for a call parses into that call */
    cJSON *msgs = cJSON_Parse("[{\"role\":\"assistant\",\"content\":\"Checking.\",\"tool_calls\":[{\"id\":\"c1\","
                              "\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
                              "\"{\\\"location\\\": \\\"Paris\\\"}\"}}]}]");
    cJSON *out = NULL;
    llc_err err = {{0}};
    CHECK(toolcall_generic_messages(msgs, NULL, false, &out, &err) == 0);
    const char *text = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(out, 0), "content"));
    sample s = {TOOLCALL_GENERIC, text, "Checking.", {{"get_weather", "{\"location\": \"Paris\"}"}}};
    rec r;
    size_t cut = text ? strlen(text) / 2 : 0;
    CHECK(text && run_sample(&s, &cut, 1, &r));
    cJSON_Delete(out);
    cJSON_Delete(msgs);
}

int main(void) {
    RUN(test_every_split_point);
    RUN(test_byte_at_a_time_streams_arguments);
    RUN(test_held_text_is_released);
    RUN(test_xml_string_values_stream);
    RUN(test_detect_real_templates);
    RUN(test_generic_messages);
    RUN(test_generic_markup_reads_back);
    return t_summary();
}
