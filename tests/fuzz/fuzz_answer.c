/* fuzz_answer.c — libFuzzer target for the readers of a model's answer: the
 * reasoning parser (engine/template/reasoning) feeding the tool-call reader
 * (engine/template/toolcall), as the server runs them. The first byte picks the
 * reasoning format, whether the prompt opened the block and the tool-call
 * format; the second where the text is cut into pieces. Checks, beyond "no
 * crash": the outputs do not depend on how the text was cut (whole vs pieces;
 * a call's arguments when they are JSON),
 * reasoning plus content never hold more bytes than came in, and with no
 * reasoning format and no tools the content is the input exactly. Built by
 * `make fuzz`. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/template/reasoning.h"
#include "engine/template/toolcall.h"
#include "kernels/sbuf.h"

typedef struct outs {
    sbuf reasoning, content;
    toolcall_parser *tc;
} outs;

static void on_reasoning(void *ud, const char *s, size_t n) { sb_add(&((outs *)ud)->reasoning, s, n); }
static void on_content(void *ud, const char *s, size_t n) {
    outs *o = ud;
    if (o->tc) toolcall_feed(o->tc, s, n);
    else sb_add(&o->content, s, n);
}

/* Runs text through both readers, cut every `step` bytes (0: whole). */
static void run(reasoning_format rf, bool opened, toolcall_format tf, bool tools, const char *text, size_t len,
                size_t step, outs *o) {
    memset(o, 0, sizeof *o);
    cJSON *t = tools ? cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]") : NULL;
    if (tools && toolcall_parser_create(tf, t, NULL, &o->tc)) abort();
    reasoning_sink sink = {o, on_reasoning, on_content};
    reasoning_parser *p;
    if (reasoning_parser_create(rf, opened, &sink, &p)) abort();
    for (size_t at = 0; at < len;) {
        size_t n = step && len - at > step ? step : len - at;
        if (reasoning_feed(p, text + at, n)) abort();
        at += n;
    }
    if (reasoning_finish(p)) abort();
    reasoning_parser_free(p);
    if (o->tc) {
        if (toolcall_finish(o->tc)) abort();
        size_t n = 0;
        const char *c = toolcall_content(o->tc, &n);
        sb_add(&o->content, c, n);
    }
    cJSON_Delete(t);
}

/* A control character (JSON allows none unescaped; cJSON takes them anyway). */
static bool has_control(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 && s[i] != '\n' && s[i] != '\t' && s[i] != '\r') return true;
    return false;
}

static bool same(const sbuf *a, const sbuf *b) { return a->len == b->len && (!a->len || !memcmp(a->p, b->p, a->len)); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    /* none, think, harmony, minimax by the low bits; the others by the step byte's high bits */
    const reasoning_format rf = (reasoning_format)(((data[0] & 3) + 4 * (data[1] >> 4)) % REASONING_N_FORMATS);
    const bool opened = data[0] & 4, tools = data[0] & 8;
    const toolcall_format tf = (toolcall_format)((data[0] >> 4) % TOOLCALL_N_FORMATS);
    const size_t step = 1 + data[1] % 16;
    const char *text = (const char *)data + 2;
    const size_t len = size - 2;
    outs whole, cut;
    run(rf, opened, tf, tools, text, len, 0, &whole);
    run(rf, opened, tf, tools, text, len, step, &cut);
    if (!same(&whole.reasoning, &cut.reasoning) || !same(&whole.content, &cut.content)) {
        fprintf(stderr, "fuzz_answer: the outputs depend on where the text was cut (every %zu bytes)\n", step);
        abort();
    }
    if (whole.reasoning.len + whole.content.len > len + 1) abort(); /* (+1: a newline between harmony messages) */
    if (rf == REASONING_NONE && !tools && (whole.content.len != len || (len && memcmp(whole.content.p, text, len))))
        abort();
    if (whole.tc) {
        int n = toolcall_count(whole.tc);
        if (n != toolcall_count(cut.tc)) abort();
        for (int i = 0; i < n; i++) {
            if (strcmp(toolcall_name(whole.tc, i), toolcall_name(cut.tc, i))) abort();
            /* arguments that are JSON are the same however they came; malformed ones
               are streamed while they still look valid, so their pieces may differ */
            cJSON *a = cJSON_Parse(toolcall_arguments(whole.tc, i)), *b = cJSON_Parse(toolcall_arguments(cut.tc, i));
            if (a && b && !has_control(text, len) && strcmp(toolcall_arguments(whole.tc, i), toolcall_arguments(cut.tc, i)))
                abort();
            cJSON_Delete(a), cJSON_Delete(b);
        }
    }
    toolcall_parser_free(whole.tc), toolcall_parser_free(cut.tc);
    sb_free(&whole.reasoning), sb_free(&whole.content), sb_free(&cut.reasoning), sb_free(&cut.content);
    return 0;
}
