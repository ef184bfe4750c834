/* test_reasoning.c — engine/template/reasoning: the format from real chat
 * templates, and the incremental split of an answer into reasoning and content
 * (every sample fed in two pieces at every split point, and a byte at a time:
 * the same reasoning, the same content, never a byte of markup in either). */
#include "engine/template/reasoning.h"

#include <stdio.h>
#include <stdlib.h>

#include "tests/test.h"

typedef struct out {
    char reasoning[2048], content[2048];
    size_t n_r, n_c;
} out;

static void app(char *dst, size_t cap, size_t *len, const char *s, size_t n) {
    if (*len + n >= cap) n = cap - 1 - *len;
    memcpy(dst + *len, s, n);
    *len += n;
    dst[*len] = 0;
}

static void on_reasoning(void *ud, const char *s, size_t n) {
    out *o = ud;
    app(o->reasoning, sizeof o->reasoning, &o->n_r, s, n);
}

static void on_content(void *ud, const char *s, size_t n) {
    out *o = ud;
    app(o->content, sizeof o->content, &o->n_c, s, n);
}

/* Feeds text cut at the given points (sorted, ending with len) and finishes. */
static void run_cuts(reasoning_format f, bool in_reasoning, const char *text, const size_t *cuts, int n_cuts,
                     out *o) {
    memset(o, 0, sizeof *o);
    reasoning_sink sink = {o, on_reasoning, on_content};
    reasoning_parser *p;
    CHECK(reasoning_parser_create(f, in_reasoning, &sink, &p) == 0);
    size_t at = 0;
    for (int i = 0; i < n_cuts; i++) {
        CHECK(reasoning_feed(p, text + at, cuts[i] - at) == 0);
        at = cuts[i];
    }
    CHECK(reasoning_finish(p) == 0);
    reasoning_parser_free(p);
}

static void check(reasoning_format f, bool in_reasoning, const char *text, const char *want_r, const char *want_c) {
    const size_t len = strlen(text);
    out o;
    size_t whole[1] = {len};
    run_cuts(f, in_reasoning, text, whole, 1, &o);
    CHECKF(!strcmp(o.reasoning, want_r) && !strcmp(o.content, want_c),
           "%s '%s' whole: reasoning '%s' (want '%s'), content '%s' (want '%s')", reasoning_format_name(f), text,
           o.reasoning, want_r, o.content, want_c);
    for (size_t i = 1; i < len; i++) { /* two pieces */
        size_t cuts[2] = {i, len};
        run_cuts(f, in_reasoning, text, cuts, 2, &o);
        CHECKF(!strcmp(o.reasoning, want_r) && !strcmp(o.content, want_c),
               "%s '%s' cut at %zu: reasoning '%s', content '%s'", reasoning_format_name(f), text, i, o.reasoning,
               o.content);
    }
    size_t *bytes = malloc((len ? len : 1) * sizeof *bytes); /* a byte at a time */
    for (size_t i = 0; i < len; i++) bytes[i] = i + 1;
    run_cuts(f, in_reasoning, text, bytes, (int)len, &o);
    CHECKF(!strcmp(o.reasoning, want_r) && !strcmp(o.content, want_c),
           "%s '%s' by bytes: reasoning '%s', content '%s'", reasoning_format_name(f), text, o.reasoning, o.content);
    free(bytes);
}

static void test_think(void) {
    const reasoning_format T = REASONING_THINK;
    check(T, false, "<think>\nI plan.\n</think>\n\nHello there.", "I plan.", "Hello there.");
    check(T, true, "I plan.\n</think>\n\nHello there.", "I plan.", "Hello there."); /* the prompt opened it */
    check(T, false, "Hello there.", "", "Hello there.");
    check(T, false, "\n<think>a  b</think>c", "a  b", "c");
    check(T, false, "<think>\nstill thinking \n", "still thinking", ""); /* cut off by the length limit */
    check(T, false, "<thinking>x", "", "<thinking>x");
    check(T, false, "<think>a</think>b</think>c", "a", "b</think>c");
    check(T, false, "<think>a </thinx b</think>c", "a </thinx b", "c");
    check(T, false, "<think>\n\n</think>\n\nHi", "", "Hi"); /* thinking switched off */
    check(T, false, "Hi <think>x</think>", "", "Hi <think>x</think>");
    check(T, false, "<think>one\n\ntwo</think>", "one\n\ntwo", "");
    check(T, false, "  ", "", "  ");
    check(T, false, "", "", "");
    check(T, true, "</think>answer", "", "answer");
}

static void test_harmony(void) {
    const reasoning_format H = REASONING_HARMONY;
    check(H, false,
          "<|channel|>analysis<|message|>I plan.<|end|><|start|>assistant<|channel|>final<|message|>Hello there.",
          "I plan.", "Hello there.");
    check(H, false, "<|channel|>final<|message|>Hi<|return|>", "", "Hi");
    check(H, false, "Hello.", "", "Hello.");
    check(H, false,
          "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis<|message|>b<|end|>"
          "<|start|>assistant<|channel|>final<|message|>c",
          "a\nb", "c");
    check(H, false, "<|channel|>analysis<|message|>thinking", "thinking", "");
    check(H, false, "<|channel|>commentary<|message|>x<|end|>", "", "x");
    check(H, false, "<|channel|>final<|message|>a <|en b<|end|>", "", "a <|en b");
    /* a message to a function goes on, from "to=" through its <|call|>, for the tool-call reader */
    check(H, false,
          "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
          "to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Paris\"}<|call|>",
          "Need weather.", "to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Paris\"}<|call|>");
    check(H, false, "<|start|>assistant to=functions.now<|channel|>commentary json<|message|>{}<|call|>", "",
          "to=functions.now<|channel|>commentary json<|message|>{}<|call|>");
    /* the length limit cut the next header: no markup shows */
    check(H, false, "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>fin", "a", "");
}

static void test_minimax(void) {
    const reasoning_format M = REASONING_MINIMAX;
    check(M, false, "<mm:think>I plan.</mm:think>Hello there.", "I plan.", "Hello there.");
    check(M, false, "</mm:think>Hello there.", "", "Hello there."); /* no thinking: the bare end marker */
    check(M, true, "I plan.\n</mm:think>\n\nHello there.", "I plan.", "Hello there."); /* the prompt opened it */
    check(M, false, "Hello <mm:think>x</mm:think>", "", "Hello <mm:think>x</mm:think>");
    check(M, false, "<mm:thinker>x", "", "<mm:thinker>x");
    check(M, false, "<think>x</think>y", "", "<think>x</think>y"); /* another model's markers are text */
    check(M, false, "<mm:think>cut off", "cut off", "");
    /* MiniMax-M3's "enabled" mode ends the prompt with the opening marker */
    CHECK(reasoning_prompt_opens(M, "]~b]ai\n<mm:think>"));
    CHECK(!reasoning_prompt_opens(M, "]~b]ai\n</mm:think>"));
    CHECK(!reasoning_prompt_opens(REASONING_THINK, "]~b]ai\n<mm:think>"));
}

/* The other templates' blocks: their markers, the prompt that opens the block,
 * and the answer's wrapper markup dropped (tool-call markup after it kept). */
static void test_block_formats(void) {
    check(REASONING_GRANITE, false, "<think>I plan.</think><response>Hello there.</response>", "I plan.", "Hello there.");
    check(REASONING_GRANITE, false, "Hello there.", "", "Hello there.");
    check(REASONING_MISTRAL, false, "[THINK]I plan.[/THINK]Hello there.", "I plan.", "Hello there.");
    check(REASONING_MISTRAL, false, "<think>x</think>[THINK", "", "<think>x</think>[THINK");
    const reasoning_format C = REASONING_COMMAND_A;
    check(C, true, "I plan.<|END_THINKING|><|START_RESPONSE|>Hello there.<|END_RESPONSE|>", "I plan.", "Hello there.");
    check(C, false, "<|START_RESPONSE|>Hi<|END_RESPONSE|>", "", "Hi"); /* thinking off: the prompt closed it */
    check(C, true, "Need it.<|END_THINKING|><|START_ACTION|>[{\"tool_name\": \"f\"}]<|END_ACTION|>", "Need it.",
          "<|START_ACTION|>[{\"tool_name\": \"f\"}]<|END_ACTION|>");
    check(C, false, "<|START_TEXT|>a <|START_RESP b<|END_TEXT|>", "", "a <|START_RESP b");
    const reasoning_format G = REASONING_GEMMA4;
    check(G, false, "<|channel>thought\nI plan.<channel|>Hello there.", "I plan.", "Hello there.");
    check(G, false, "Hello there.", "", "Hello there.");
    check(G, false, "<|channel>thought\nI plan.<channel|><|tool_call>call:f{}<tool_call|>", "I plan.",
          "<|tool_call>call:f{}<tool_call|>");
    const reasoning_format K = REASONING_KIMI_K3;
    check(K, true, "I plan.<|close|>think<|sep|><|open|>response<|sep|>Hello there.<|close|>response<|sep|>", "I plan.",
          "Hello there.");
    check(K, false, "Hi<|close|>response<|sep|><|close|>message<|sep|>", "", "Hi"); /* the prompt opened response */
    check(K, true, "a<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|><|open|>tools<|sep|>x", "a",
          "<|open|>tools<|sep|>x");
    check(REASONING_HUNYUAN, false, "<think:opensource>\nI plan.\n</think:opensource>\nHello there.", "I plan.",
          "Hello there.");
    check(REASONING_HUNYUAN, false, "<think:opensource></think:opensource>Hi", "", "Hi");
    const reasoning_format S = REASONING_SOLAR;
    check(S, false, "<|think|>I plan.<|end|><|begin|>assistant<|content|>Hello there.<|end|>", "I plan.", "Hello there.");
    check(S, false, "<|content|>Hi", "", "Hi");
    check(REASONING_APERTUS, false, "<|inner_prefix|>I plan.<|inner_suffix|>Hello there.", "I plan.", "Hello there.");
    const reasoning_format A = REASONING_APRIEL;
    check(A, true, "I plan.\n[BEGIN FINAL RESPONSE]\nHello there.\n[END FINAL RESPONSE]\n", "I plan.", "Hello there.");
    check(A, true, "Need it.\n[BEGIN FINAL RESPONSE]\n<tool_calls>[{\"name\": \"f\", \"arguments\": {}}]</tool_calls>",
          "Need it.", "<tool_calls>[{\"name\": \"f\", \"arguments\": {}}]</tool_calls>");
    check(A, true, "cut off [BEGIN FINAL", "cut off [BEGIN FINAL", "");
    check(A, false, "Hello [END FINAL RESPONSE]", "", "Hello");
    CHECK(reasoning_prompt_opens(A, "<|begin_assistant|>\nHere are my reasoning steps:\n"));
    CHECK(reasoning_prompt_opens(C, "<|CHATBOT_TOKEN|><|START_THINKING|>"));
    CHECK(!reasoning_prompt_opens(C, "<|CHATBOT_TOKEN|><|START_THINKING|><|END_THINKING|>"));
    CHECK(reasoning_prompt_opens(K, "<|open|>message role=\"assistant\"<|sep|><|open|>think<|sep|>"));
    CHECK(!reasoning_prompt_opens(K, "<|open|>message role=\"assistant\"<|sep|><|open|>response<|sep|>"));
    CHECK(!reasoning_prompt_opens(G, "<|turn>model\n<|channel>thought\n<channel|>"));
    CHECK(reasoning_special_text(C) && reasoning_special_text(REASONING_HARMONY) && !reasoning_special_text(A) &&
          !reasoning_special_text(REASONING_THINK));
}

/* reasoning_pieces: the pieces fed inside the reasoning, its markers included,
 * whether the prompt opened it or the answer did. */
static void test_pieces(void) {
    static const struct {
        reasoning_format f;
        bool in_reasoning;
        const char *pieces[8];
        int want;
    } cases[] = {
        {REASONING_THINK, false, {"<think>", "\n", "I", " plan", ".", "\n</think>", "\n\nHello", " there."}, 6},
        {REASONING_THINK, true, {"I", " plan", "</think>", "Hi"}, 3},
        {REASONING_THINK, false, {"Hello", " there."}, 0},
        {REASONING_MINIMAX, false, {"</mm:think>", "Hi"}, 0},
        {REASONING_MINIMAX, false, {"<mm:", "think>", "a", "</mm:think>", "b"}, 3},
        {REASONING_HARMONY, false, {"<|channel|>analysis<|message|>", "a", "<|end|>", "<|start|>assistant", "<|channel|>final<|message|>", "b"}, 3},
    };
    for (size_t i = 0; i < LLC_ARRAY_LEN(cases); i++) {
        reasoning_parser *p;
        CHECK(reasoning_parser_create(cases[i].f, cases[i].in_reasoning, NULL, &p) == 0);
        for (int k = 0; k < 8 && cases[i].pieces[k]; k++)
            CHECK(reasoning_feed(p, cases[i].pieces[k], strlen(cases[i].pieces[k])) == 0);
        CHECK(reasoning_finish(p) == 0);
        CHECKF(reasoning_pieces(p) == cases[i].want, "case %zu: %d pieces, want %d", i, reasoning_pieces(p), cases[i].want);
        reasoning_parser_free(p);
    }
}

static void test_none_passes_everything(void) {
    check(REASONING_NONE, false, "<think>a</think>b", "", "<think>a</think>b");
}

/* Real templates name their format; the ones that open the block in the prompt
 * are told apart by the rendered prompt. */
static void test_detect(void) {
    static const struct {
        const char *file;
        reasoning_format want;
    } cases[] = {
        {"Qwen-QwQ-32B.jinja", REASONING_THINK},
        {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", REASONING_THINK},
        {"HuggingFaceTB-SmolLM3-3B.jinja", REASONING_THINK},
        {"openai-gpt-oss-120b.jinja", REASONING_HARMONY},
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", REASONING_NONE},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", REASONING_NONE},
        {"MiniMax-M1.jinja", REASONING_THINK},   /* its model writes <think>; the template never shows it */
        {"MiniMax-M3.jinja", REASONING_MINIMAX}, /* <mm:think> */
        {"ibm-granite-granite-3.3-2B-Instruct.jinja", REASONING_GRANITE},
        {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", REASONING_MISTRAL},
        {"Cohere2MoE.jinja", REASONING_COMMAND_A},
        {"google-gemma-4-31B-it-interleaved.jinja", REASONING_GEMMA4},
        {"Kimi-K3.jinja", REASONING_KIMI_K3},
        {"tencent-Hy3.jinja", REASONING_HUNYUAN},
        {"upstage-Solar-Open-100B.jinja", REASONING_SOLAR},
        {"Apertus-8B-Instruct.jinja", REASONING_APERTUS},
        {"Apriel-1.6-15b-Thinker-fixed.jinja", REASONING_APRIEL},
        /* no reasoning markers: Kimi K2 Instruct, Command R+, GigaChat 3, LFM2 */
        {"Kimi-K2-Instruct.jinja", REASONING_NONE},
        {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", REASONING_NONE},
        {"GigaChat3-10B-A1.8B.jinja", REASONING_NONE},
        {"LFM2-8B-A1B.jinja", REASONING_NONE},
    };
    for (size_t i = 0; i < LLC_ARRAY_LEN(cases); i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/reference/templates/%s", t_shared(), cases[i].file);
        char *src = t_read_file(path, NULL);
        CHECKF(src, "cannot read %s", path);
        if (!src) continue;
        CHECKF(reasoning_detect(src) == cases[i].want, "%s: %s", cases[i].file, reasoning_format_name(reasoning_detect(src)));
        free(src);
    }
    CHECK(reasoning_detect(NULL) == REASONING_NONE);
    CHECK(reasoning_prompt_opens(REASONING_THINK, "<|im_start|>assistant\n<think>\n"));
    CHECK(!reasoning_prompt_opens(REASONING_THINK, "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    CHECK(!reasoning_prompt_opens(REASONING_HARMONY, "<think>"));
    CHECK(!reasoning_prompt_opens(REASONING_THINK, ""));
}

int main(void) {
    RUN(test_think);
    RUN(test_harmony);
    RUN(test_minimax);
    RUN(test_block_formats);
    RUN(test_pieces);
    RUN(test_none_passes_everything);
    RUN(test_detect);
    return t_summary();
}
