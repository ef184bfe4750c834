/* test_chat.c — chat templates: exact rendering of every format, detection of
 * real Hugging Face `tokenizer.chat_template` strings, names, stop strings and
 * edge cases (empty, system-only, same-role runs, continuation, bad input). */
#include "engine/template/chat.h"
#include "engine/template/reasoning.h"
#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/test.h"

#include <cjson/cJSON.h>

#include <stdint.h>

/* ---- helpers ---- */

#define MSG(r, c) ((chat_msg){(r), (c), NULL})

/* Renders and compares with `want`; on a mismatch prints both, escaped. */
static void print_escaped(const char *label, const char *s) {
    fprintf(stderr, "    %s: \"", label);
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++) {
        if (*p == '\n') fputs("\\n", stderr);
        else if (*p == '\t') fputs("\\t", stderr);
        else if (*p == '"' || *p == '\\') fprintf(stderr, "\\%c", *p);
        else if (*p < 0x20) fprintf(stderr, "\\x%02x", *p);
        else fputc(*p, stderr);
    }
    fputs("\"\n", stderr);
}

static void check_render_at(int line, chat_tmpl t, const chat_msg *m, int n, bool add,
                            const char *want) {
    char *got = (char *)"sentinel";
    llc_err err = {{0}};
    int rc = chat_render(t, m, n, add, &got, &err);
    CHECKF(rc == 0, "line %d: %s: chat_render failed %d: %s", line, chat_tmpl_name(t), rc, err.msg);
    if (rc != 0) return;
    CHECKF(got && strcmp(got, want) == 0, "line %d: %s rendered differently", line,
           chat_tmpl_name(t));
    if (got && strcmp(got, want) != 0) {
        print_escaped("want", want);
        print_escaped("got ", got);
    }
    free(got);
}
#define CHECK_RENDER(t, m, n, add, want) check_render_at(__LINE__, (t), (m), (n), (add), (want))

static char *render_ok(chat_tmpl t, const chat_msg *m, int n, bool add) {
    char *out = NULL;
    int rc = chat_render(t, m, n, add, &out, NULL);
    CHECKF(rc == 0 && out, "%s: chat_render failed %d", chat_tmpl_name(t), rc);
    return out;
}

/* The fixed conversation of the per-template tests. The assistant's text has
 * a space at each end, so the templates that trim show it. */
static const chat_msg CONV[] = {
    {CHAT_SYSTEM, "You are a helpful assistant.", NULL},
    {CHAT_USER, "Hello", NULL},
    {CHAT_ASSISTANT, " Hi there! ", NULL},
    {CHAT_USER, "Who are you?", NULL},
};
#define NCONV ((int)LLC_ARRAY_LEN(CONV))

/* ---- one fixed conversation, every template, expected text written out ---- */

static void test_render_raw(void) {
    CHECK_RENDER(CHAT_TMPL_RAW, CONV, NCONV, true,
                 "You are a helpful assistant.\n\n"
                 "User: Hello\n"
                 "Assistant:  Hi there! \n"
                 "User: Who are you?\n"
                 "Assistant:");
}

static void test_render_chatml(void) {
    CHECK_RENDER(CHAT_TMPL_CHATML, CONV, NCONV, true,
                 "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                 "<|im_start|>user\nHello<|im_end|>\n"
                 "<|im_start|>assistant\n Hi there! <|im_end|>\n"
                 "<|im_start|>user\nWho are you?<|im_end|>\n"
                 "<|im_start|>assistant\n");
}

static void test_render_llama2(void) {
    /* Llama-2-chat: bos_token + '[INST] ' + content.strip() + ' [/INST]', and
     * ' ' + content.strip() + ' ' + eos_token; the first BOS is the tokenizer's. */
    CHECK_RENDER(CHAT_TMPL_LLAMA2, CONV, NCONV, true,
                 "[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello [/INST]"
                 " Hi there! </s>"
                 "<s>[INST] Who are you? [/INST]");
}

static void test_render_llama3(void) {
    CHECK_RENDER(CHAT_TMPL_LLAMA3, CONV, NCONV, true,
                 "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nWho are you?<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void test_render_llama31(void) {
    CHECK_RENDER(CHAT_TMPL_LLAMA31, CONV, NCONV, true,
                 "<|start_header_id|>system<|end_header_id|>\n\n"
                 "Cutting Knowledge Date: December 2023\n"
                 "Today Date: 26 Jul 2024\n\n"
                 "You are a helpful assistant.<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nWho are you?<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void test_render_mistral(void) {
    /* v1: ' [INST] ' + system + '\n\n' + user + ' [/INST]', ' ' + assistant + eos */
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V1, CONV, NCONV, true,
                 " [INST] You are a helpful assistant.\n\nHello [/INST]"
                 "  Hi there! </s>"
                 " [INST] Who are you? [/INST]");
    /* v3: system goes with the LAST user message; assistant is trimmed */
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V3, CONV, NCONV, true,
                 "[INST] Hello[/INST] Hi there!</s>"
                 "[INST] You are a helpful assistant.\n\nWho are you?[/INST]");
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V3_TEKKEN, CONV, NCONV, true,
                 "[INST]Hello[/INST] Hi there! </s>"
                 "[INST]You are a helpful assistant.\n\nWho are you?[/INST]");
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V7, CONV, NCONV, true,
                 "[SYSTEM_PROMPT] You are a helpful assistant.[/SYSTEM_PROMPT]"
                 "[INST] Hello[/INST]  Hi there! </s>"
                 "[INST] Who are you?[/INST]");
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V7_TEKKEN, CONV, NCONV, true,
                 "[SYSTEM_PROMPT]You are a helpful assistant.[/SYSTEM_PROMPT]"
                 "[INST]Hello[/INST] Hi there! </s>"
                 "[INST]Who are you?[/INST]");
}

static void test_render_zephyr(void) {
    CHECK_RENDER(CHAT_TMPL_ZEPHYR, CONV, NCONV, true,
                 "<|system|>\nYou are a helpful assistant.</s>\n"
                 "<|user|>\nHello</s>\n"
                 "<|assistant|>\n Hi there! </s>\n"
                 "<|user|>\nWho are you?</s>\n"
                 "<|assistant|>\n");
}

static void test_render_phi(void) {
    CHECK_RENDER(CHAT_TMPL_PHI3, CONV, NCONV, true,
                 "<|system|>\nYou are a helpful assistant.<|end|>\n"
                 "<|user|>\nHello<|end|>\n"
                 "<|assistant|>\n Hi there! <|end|>\n"
                 "<|user|>\nWho are you?<|end|>\n"
                 "<|assistant|>\n");
    CHECK_RENDER(CHAT_TMPL_PHI4, CONV, NCONV, true,
                 "<|im_start|>system<|im_sep|>You are a helpful assistant.<|im_end|>"
                 "<|im_start|>user<|im_sep|>Hello<|im_end|>"
                 "<|im_start|>assistant<|im_sep|> Hi there! <|im_end|>"
                 "<|im_start|>user<|im_sep|>Who are you?<|im_end|>"
                 "<|im_start|>assistant<|im_sep|>");
}

static void test_render_gemma(void) {
    /* no system role: "SYSTEM\n\n" prefixes the first user turn; content trimmed */
    CHECK_RENDER(CHAT_TMPL_GEMMA, CONV, NCONV, true,
                 "<start_of_turn>user\nYou are a helpful assistant.\n\nHello<end_of_turn>\n"
                 "<start_of_turn>model\nHi there!<end_of_turn>\n"
                 "<start_of_turn>user\nWho are you?<end_of_turn>\n"
                 "<start_of_turn>model\n");
}

static void test_render_deepseek(void) {
    CHECK_RENDER(CHAT_TMPL_DEEPSEEK, CONV, NCONV, true,
                 "You are a helpful assistant."
                 "### Instruction:\nHello\n"
                 "### Response:\n Hi there! \n<|EOT|>\n"
                 "### Instruction:\nWho are you?\n"
                 "### Response:\n");
    CHECK_RENDER(CHAT_TMPL_DEEPSEEK2, CONV, NCONV, true,
                 "You are a helpful assistant.\n\n"
                 "User: Hello\n\n"
                 "Assistant:  Hi there! <｜end▁of▁sentence｜>"
                 "User: Who are you?\n\n"
                 "Assistant:");
    CHECK_RENDER(CHAT_TMPL_DEEPSEEK3, CONV, NCONV, true,
                 "You are a helpful assistant."
                 "<｜User｜>Hello"
                 "<｜Assistant｜> Hi there! <｜end▁of▁sentence｜>"
                 "<｜User｜>Who are you?"
                 "<｜Assistant｜>");
}

/* Padded text in every role: each template trims exactly what its Jinja trims
 * (these expected strings agree with rendering the real templates in jinja2
 * with Hugging Face's trim_blocks/lstrip_blocks settings). */
static void test_render_trimming(void) {
    static const chat_msg c[] = {
        {CHAT_SYSTEM, "  Sys text \n", NULL}, {CHAT_USER, "  Hello  ", NULL}, {CHAT_ASSISTANT, "\n Hi there!\t", NULL},
        {CHAT_USER, "Who are you?  ", NULL},
    };
    int n = (int)LLC_ARRAY_LEN(c);
    CHECK_RENDER(CHAT_TMPL_CHATML, c, n, true,
                 "<|im_start|>system\n  Sys text \n<|im_end|>\n<|im_start|>user\n  Hello  <|im_end|>\n"
                 "<|im_start|>assistant\n\n Hi there!\t<|im_end|>\n"
                 "<|im_start|>user\nWho are you?  <|im_end|>\n<|im_start|>assistant\n");
    CHECK_RENDER(CHAT_TMPL_LLAMA3, c, n, true,
                 "<|start_header_id|>system<|end_header_id|>\n\nSys text<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nWho are you?<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");
    CHECK_RENDER(CHAT_TMPL_LLAMA31, c, n, false,
                 "<|start_header_id|>system<|end_header_id|>\n\n"
                 "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nSys text<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nWho are you?<|eot_id|>");
    /* llama2 strips the whole '<<SYS>>...' + user text, so the system text and
     * the user text's front keep their spaces */
    CHECK_RENDER(CHAT_TMPL_LLAMA2, c, n, true,
                 "[INST] <<SYS>>\n  Sys text \n\n<</SYS>>\n\n  Hello [/INST] Hi there! </s>"
                 "<s>[INST] Who are you? [/INST]");
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V3, c, n, true,
                 "[INST]   Hello  [/INST] Hi there!</s>[INST]   Sys text \n\n\nWho are you?  [/INST]");
    /* gemma: the system prefix is not trimmed, the user text is */
    CHECK_RENDER(CHAT_TMPL_GEMMA, c, n, true,
                 "<start_of_turn>user\n  Sys text \n\n\nHello<end_of_turn>\n"
                 "<start_of_turn>model\nHi there!<end_of_turn>\n"
                 "<start_of_turn>user\nWho are you?<end_of_turn>\n<start_of_turn>model\n");
}

/* Every template has a test above: a new enum value must get one too. */
static void test_render_covers_all(void) { CHECK(CHAT_FMT_COUNT == 17); }

/* ---- cross-check with llama.cpp's tests/test-chat-template.cpp ----
 * Its conversation and the outputs it expects (from its built-in renderer, or
 * from running the real Jinja template where those differ from ours: mistral
 * v3 and v3-tekken, whose real templates put the system text last). */

static void test_render_matches_llama_cpp(void) {
    static const chat_msg c[] = {
        {CHAT_SYSTEM, "You are a helpful assistant", NULL},
        {CHAT_USER, "Hello", NULL},
        {CHAT_ASSISTANT, "Hi there", NULL},
        {CHAT_USER, "Who are you", NULL},
        {CHAT_ASSISTANT, "   I am an assistant   ", NULL},
        {CHAT_USER, "Another question", NULL},
    };
    int n = (int)LLC_ARRAY_LEN(c);
    CHECK_RENDER(CHAT_TMPL_CHATML, c, n, true,
                 "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n");
    CHECK_RENDER(CHAT_TMPL_GEMMA, c, n, true,
                 "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n");
    CHECK_RENDER(CHAT_TMPL_DEEPSEEK, c, n, true,
                 "You are a helpful assistant### Instruction:\nHello\n### Response:\nHi there\n<|EOT|>\n### Instruction:\nWho are you\n### Response:\n   I am an assistant   \n<|EOT|>\n### Instruction:\nAnother question\n### Response:\n");
    CHECK_RENDER(CHAT_TMPL_LLAMA3, c, n, true,
                 "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    CHECK_RENDER(CHAT_TMPL_PHI3, c, n, true,
                 "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\nAnother question<|end|>\n<|assistant|>\n");
    CHECK_RENDER(CHAT_TMPL_PHI4, c, n, true,
                 "<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|><|im_start|>user<|im_sep|>Hello<|im_end|><|im_start|>assistant<|im_sep|>Hi there<|im_end|><|im_start|>user<|im_sep|>Who are you<|im_end|><|im_start|>assistant<|im_sep|>   I am an assistant   <|im_end|><|im_start|>user<|im_sep|>Another question<|im_end|><|im_start|>assistant<|im_sep|>");
    CHECK_RENDER(CHAT_TMPL_DEEPSEEK2, c, n, true,
                 "You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there<｜end▁of▁sentence｜>User: Who are you\n\nAssistant:    I am an assistant   <｜end▁of▁sentence｜>User: Another question\n\nAssistant:");
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V1, c, n, true,
                 " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]    I am an assistant   </s> [INST] Another question [/INST]");
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V3, c, n, true,
                 "[INST] Hello[/INST] Hi there</s>[INST] Who are you[/INST] I am an assistant</s>[INST] You are a helpful assistant\n\nAnother question[/INST]");
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V3_TEKKEN, c, n, true,
                 "[INST]Hello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   </s>[INST]You are a helpful assistant\n\nAnother question[/INST]");
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V7, c, n, true,
                 "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]");
    /* Llama-2-chat's Jinja (strip, bos_token '<s>' before each later [INST]) */
    CHECK_RENDER(CHAT_TMPL_LLAMA2, c, n, true,
                 "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST] Hi there </s><s>[INST] Who are you [/INST] I am an assistant </s><s>[INST] Another question [/INST]");
}

/* ---- detection from real tokenizer.chat_template strings ---- */

typedef struct det_case {
    const char *model;
    const char *src;
    chat_format want;
} det_case;

static const det_case DETECT[] = {
    {"meta-llama/Meta-Llama-3-8B-Instruct",
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
     "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
     "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% "
     "endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
     "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}",
     CHAT_FMT_LLAMA3},
    {"meta-llama/Llama-3.1-8B-Instruct (excerpt)",
     "{{- bos_token }}\n{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul "
     "2024\" %}\n{%- endif %}\n{%- if messages[0]['role'] == 'system' %}\n    {%- set "
     "system_message = messages[0]['content']|trim %}\n    {%- set messages = messages[1:] "
     "%}\n{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n{{- "
     "\"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n{{- \"Cutting Knowledge Date: "
     "December 2023\\n\" }}\n{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n{{- "
     "system_message }}\n{{- \"<|eot_id|>\" }}\n{%- for message in messages %}\n    {{- "
     "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
     "trim + '<|eot_id|>' }}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- "
     "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n",
     CHAT_FMT_LLAMA31},
    {"Qwen/Qwen2-7B-Instruct",
     "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
     "'<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif "
     "%}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
     "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif "
     "%}",
     CHAT_FMT_CHATML},
    {"meta-llama/Llama-2-7b-chat-hf",
     "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
     "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% "
     "set system_message = false %}{% endif %}{% for message in loop_messages %}{% if "
     "(message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation "
     "roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == "
     "0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
     "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] "
     "%}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() "
     "+ ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + "
     "eos_token }}{% endif %}{% endfor %}",
     CHAT_FMT_LLAMA2},
    {"mistralai/Mistral-7B-Instruct-v0.1 (current, 'v1')",
     "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = "
     "messages[0]['content'] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    "
     "{%- set loop_messages = messages %}\n{%- endif %}\n\n{{- bos_token }}\n{%- for message in "
     "loop_messages %}\n    {%- if message['role'] == 'user' %}\n        {%- if loop.first and "
     "system_message is defined %}\n            {{- ' [INST] ' + system_message + '\\n\\n' + "
     "message['content'] + ' [/INST]' }}\n        {%- else %}\n            {{- ' [INST] ' + "
     "message['content'] + ' [/INST]' }}\n        {%- endif %}\n    {%- elif message['role'] == "
     "'assistant' %}\n        {{- ' ' + message['content'] + eos_token}}\n    {%- endif %}\n{%- "
     "endfor %}\n",
     CHAT_FMT_MISTRAL_V1},
    {"mistralai/Mistral-7B-Instruct-v0.1 (original, pre-2024)",
     "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
     "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
     "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ "
     "'[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ "
     "message['content'] + eos_token + ' ' }}{% else %}{{ raise_exception('Only user and "
     "assistant roles are supported!') }}{% endif %}{% endfor %}",
     CHAT_FMT_MISTRAL_V1},
    {"mistralai/Mistral-7B-Instruct-v0.3 (excerpt)",
     "{%- if messages[0][\"role\"] == \"system\" %}\n    {%- set system_message = "
     "messages[0][\"content\"] %}\n    {%- set loop_messages = messages[1:] %}\n{%- endif %}\n{{- "
     "bos_token }}\n{%- for message in loop_messages %}\n    {%- if message[\"role\"] == "
     "\"user\" %}\n        {%- if tools is not none and (message == user_messages[-1]) %}\n      "
     "      {{- \"[AVAILABLE_TOOLS] [\" }}\n        {%- endif %}\n        {%- if loop.last and "
     "system_message is defined %}\n            {{- \"[INST] \" + system_message + \"\\n\\n\" + "
     "message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST] \" + "
     "message[\"content\"] + \"[/INST]\" }}\n        {%- endif %}\n    {%- elif message[\"role\"] "
     "== \"assistant\" %}\n        {{- \" \" + message[\"content\"]|trim + eos_token}}\n    {%- "
     "endif %}\n{%- endfor %}\n",
     CHAT_FMT_MISTRAL_V3},
    {"mistralai/Mistral-Nemo-Instruct-2407 (excerpt)",
     "{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if message[\"role\"] == "
     "\"user\" %}\n        {%- if tools is not none and (message == user_messages[-1]) %}\n      "
     "      {{- \"[AVAILABLE_TOOLS][\" }}\n        {%- endif %}\n        {%- if loop.last and "
     "system_message is defined %}\n            {{- \"[INST]\" + system_message + \"\\n\\n\" + "
     "message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST]\" + "
     "message[\"content\"] + \"[/INST]\" }}\n        {%- endif %}\n    {%- elif "
     "(message.tool_calls is defined and message.tool_calls is not none) %}\n        {{- "
     "\"[TOOL_CALLS][\" }}\n    {%- elif message[\"role\"] == \"assistant\" %}\n        {{- "
     "message[\"content\"] + eos_token}}\n    {%- endif %}\n{%- endfor %}\n",
     CHAT_FMT_MISTRAL_V3_TEKKEN},
    {"mistralai/Mistral-Large-Instruct-2411",
     "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' "
     "+ message['content'] + '[/INST]' }}{% elif message['role'] == 'system' %}{{ "
     "'[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}{% elif message['role'] == "
     "'assistant' %}{{ ' ' + message['content'] + eos_token }}{% else %}{{ "
     "raise_exception('Only user, system and assistant roles are supported!') }}{% endif %}{% "
     "endfor %}",
     CHAT_FMT_MISTRAL_V7},
    {"mistralai/Mistral-Small-24B-Instruct-2501 (excerpt)",
     "{{- bos_token }}\n{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}\n{%- for "
     "message in loop_messages %}\n    {%- if message['role'] == 'user' %}\n        {{- '[INST]' "
     "+ message['content'] + '[/INST]' }}\n    {%- elif message['role'] == 'system' %}\n        "
     "{{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' }}\n    {%- elif "
     "message['role'] == 'assistant' %}\n        {{- message['content'] + eos_token }}\n    {%- "
     "endif %}\n{%- endfor %}",
     CHAT_FMT_MISTRAL_V7_TEKKEN},
    {"HuggingFaceH4/zephyr-7b-beta",
     "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + "
     "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ "
     "'<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == "
     "'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% "
     "if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor "
     "%}",
     CHAT_FMT_ZEPHYR},
    {"TinyLlama/TinyLlama-1.1B-Chat-v1.0",
     "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\\n' + "
     "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ "
     "'<|system|>\\n' + message['content'] + eos_token }}\n{% elif message['role'] == "
     "'assistant' %}\n{{ '<|assistant|>\\n'  + message['content'] + eos_token }}\n{% endif "
     "%}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% "
     "endfor %}",
     CHAT_FMT_ZEPHYR},
    {"microsoft/Phi-3-mini-4k-instruct",
     "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\\n' + "
     "message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\\n' + "
     "message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'assistant' "
     "%}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}{% endfor %}{% if "
     "add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}",
     CHAT_FMT_PHI3},
    {"microsoft/phi-4",
     "{% for message in messages %}{% if (message['role'] == 'system') "
     "%}{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}{% elif "
     "(message['role'] == 'user') %}{{'<|im_start|>user<|im_sep|>' + message['content'] + "
     "'<|im_end|><|im_start|>assistant<|im_sep|>'}}{% elif (message['role'] == 'assistant') "
     "%}{{message['content'] + '<|im_end|>'}}{% endif %}{% endfor %}",
     CHAT_FMT_PHI4},
    {"google/gemma-2-9b-it",
     "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role "
     "not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == "
     "'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
     "user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') "
     "%}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ "
     "'<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% "
     "endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}",
     CHAT_FMT_GEMMA},
    {"google/gemma-3-1b-it (excerpt)",
     "{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}\n    {%- set first_user_prefix "
     "= messages[0]['content'] + '\\n\\n' -%}\n    {%- set loop_messages = messages[1:] -%}\n{%- "
     "else -%}\n    {%- set first_user_prefix = \"\" -%}\n    {%- set loop_messages = messages "
     "-%}\n{%- endif -%}\n{%- for message in loop_messages -%}\n    {{ '<start_of_turn>' + role + "
     "'\\n' + (first_user_prefix if loop.first else \"\") }}\n    {{ message['content'] | trim "
     "}}\n    {{ '<end_of_turn>\\n' }}\n{%- endfor -%}\n{%- if add_generation_prompt -%}\n    "
     "{{'<start_of_turn>model\\n'}}\n{%- endif -%}\n",
     CHAT_FMT_GEMMA},
    {"deepseek-ai/deepseek-coder-33b-instruct",
     "{% if not add_generation_prompt is defined %}\n{% set add_generation_prompt = false %}\n{% "
     "endif %}\n{%- set ns = namespace(found=false) -%}\n{%- for message in messages -%}\n    {%- "
     "if message['role'] == 'system' -%}\n        {%- set ns.found = true -%}\n    {%- endif "
     "-%}\n{%- endfor -%}\n{{bos_token}}{%- if not ns.found -%}\n{{'You are an AI programming "
     "assistant, utilizing the Deepseek Coder model, developed by Deepseek Company, and you "
     "only answer questions related to computer science.\\n'}}\n{%- endif %}\n{%- for message "
     "in messages %}\n    {%- if message['role'] == 'system' %}\n{{ message['content'] }}\n    "
     "{%- else %}\n        {%- if message['role'] == 'user' %}\n{{'### Instruction:\\n' + "
     "message['content'] + '\\n'}}\n        {%- else %}\n{{'### Response:\\n' + "
     "message['content'] + '\\n<|EOT|>\\n'}}\n        {%- endif %}\n    {%- endif %}\n{%- endfor "
     "%}\n{% if add_generation_prompt %}\n{{'### Response:'}}\n{% endif %}",
     CHAT_FMT_DEEPSEEK},
    {"deepseek-ai/deepseek-llm-7b-chat",
     "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% "
     "endif %}{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ "
     "'User: ' + message['content'] + '\\n\\n' }}{% elif message['role'] == 'assistant' %}{{ "
     "'Assistant: ' + message['content'] + eos_token }}{% elif message['role'] == 'system' %}{{ "
     "message['content'] + '\\n\\n' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ "
     "'Assistant:' }}{% endif %}",
     CHAT_FMT_DEEPSEEK2},
    {"deepseek-ai/DeepSeek-V3 (excerpt)",
     "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% "
     "endif %}{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, "
     "system_prompt='', is_first_sp=true) %}{%- for message in messages %}{%- if "
     "message['role'] == 'system' %}{%- if ns.is_first_sp %}{% set ns.system_prompt = "
     "ns.system_prompt + message['content'] %}{% set ns.is_first_sp = false %}{%- else %}{% set "
     "ns.system_prompt = ns.system_prompt + '\\n\\n' + message['content'] %}{%- endif %}{%- "
     "endif %}{%- endfor %}{{ bos_token }}{{ ns.system_prompt }}{%- for message in messages "
     "%}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{{'<｜User｜>' + "
     "message['content']}}{%- endif %}{%- if message['role'] == 'assistant' and "
     "message['content'] is not none %}{{'<｜Assistant｜>' + message['content'] + "
     "'<｜end▁of▁sentence｜>'}}{%- endif %}{%- endfor -%}{% if add_generation_prompt and not "
     "ns.is_tool %}{{'<｜Assistant｜>'}}{% endif %}",
     CHAT_FMT_DEEPSEEK3},
    /* documented fallbacks */
    {"unrecognised template", "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}",
     CHAT_FMT_CHATML},
    {"empty", "", CHAT_FMT_RAW},
    {"whitespace only", " \n\t ", CHAT_FMT_RAW},
    {"a template name", "gemma", CHAT_FMT_GEMMA},
    {"a template name, other case", "Llama3", CHAT_FMT_LLAMA3},
};

static void test_detect(void) {
    for (size_t i = 0; i < LLC_ARRAY_LEN(DETECT); i++) {
        chat_format got = chat_detect(DETECT[i].src);
        CHECKF(got == DETECT[i].want, "%s: detected %s, want %s", DETECT[i].model,
               chat_format_name(got), chat_format_name(DETECT[i].want));
    }
    CHECK(chat_detect(NULL) == CHAT_FMT_RAW);
    /* every canonical name is detected as itself */
    for (int t = 0; t < CHAT_FMT_COUNT; t++)
        CHECKF(chat_detect(chat_format_name(t)) == (chat_format)t, "name %s", chat_format_name(t));
}

/* ---- names ---- */

static void test_names(void) {
    char joined[1024] = "";
    for (int t = 0; t < CHAT_FMT_COUNT; t++) {
        const char *name = chat_tmpl_name(chat_builtin(t));
        CHECKF(name && strcmp(name, "unknown") != 0, "template %d has no name", t);
        CHECKF(chat_tmpl_from_name(name) == t, "%s does not round-trip", name);
        for (int u = 0; u < t; u++)
            CHECKF(strcmp(name, chat_tmpl_name(chat_builtin(u))) != 0, "duplicate name %s", name);
        if (t) strcat(joined, ", ");
        strcat(joined, name);
    }
    CHECKF(strcmp(chat_tmpl_names(), joined) == 0, "chat_tmpl_names() = \"%s\", table gives \"%s\"",
           chat_tmpl_names(), joined);
    CHECK(chat_tmpl_from_name("chatml") == CHAT_FMT_CHATML);
    CHECK(chat_tmpl_from_name("llama2") == CHAT_FMT_LLAMA2);
    CHECK(chat_tmpl_from_name("llama3") == CHAT_FMT_LLAMA3);
    CHECK(chat_tmpl_from_name("zephyr") == CHAT_FMT_ZEPHYR);
    CHECK(chat_tmpl_from_name("phi3") == CHAT_FMT_PHI3);
    CHECK(chat_tmpl_from_name("gemma") == CHAT_FMT_GEMMA);
    CHECK(chat_tmpl_from_name("raw") == CHAT_FMT_RAW);
    CHECK(chat_tmpl_from_name("ChatML") == CHAT_FMT_CHATML);
    CHECK(chat_tmpl_from_name("mistral") == CHAT_FMT_MISTRAL_V1);
    CHECK(chat_tmpl_from_name("nonesuch") == -1);
    CHECK(chat_tmpl_from_name("chatml ") == -1);
    CHECK(chat_tmpl_from_name("") == -1);
    CHECK(chat_tmpl_from_name(NULL) == -1);
    CHECK(strcmp(chat_format_name(CHAT_FMT_UNKNOWN), "unknown") == 0);
    CHECK(strcmp(chat_format_name(CHAT_FMT_COUNT), "unknown") == 0);
    CHECK(strcmp(chat_format_name(1000), "unknown") == 0);
    CHECK(strcmp(chat_tmpl_name(NULL), "unknown") == 0);
    CHECK(chat_builtin(-1) == NULL && chat_builtin(CHAT_FMT_COUNT) == NULL);
    CHECK(strcmp(chat_tmpl_name(CHAT_TMPL_GEMMA), "gemma") == 0);
}

/* ---- stop strings ---- */

static void test_stop_strings(void) {
    /* Each template's first stop string appears in its own rendering of a
     * finished assistant turn, right after the assistant's text. */
    static const chat_msg c[] = {{CHAT_USER, "u", NULL}, {CHAT_ASSISTANT, "reply", NULL}, {CHAT_USER, "v", NULL}};
    for (int t = 0; t < CHAT_FMT_COUNT; t++) {
        const char *const *s = chat_stop_strings(chat_builtin(t));
        CHECKF(s && s[0] && s[0][0], "%s has no stop string", chat_tmpl_name(chat_builtin(t)));
        if (!s || !s[0]) continue;
        char *out = render_ok(chat_builtin(t), c, 3, false);
        const char *r = out ? strstr(out, "reply") : NULL;
        size_t k = strlen(s[0]);
        /* right after the text, or after the one space / newline some add */
        bool follows = r && (strncmp(r + 5, s[0], k) == 0 ||
                             ((r[5] == ' ' || r[5] == '\n') && strncmp(r + 6, s[0], k) == 0));
        CHECKF(follows, "%s: \"%s\" does not follow the assistant text",
               chat_tmpl_name(chat_builtin(t)), s[0]);
        free(out);
    }
    CHECK(strcmp(chat_stop_strings(CHAT_TMPL_CHATML)[0], "<|im_end|>") == 0);
    CHECK(chat_stop_strings(CHAT_TMPL_CHATML)[1] == NULL);
    CHECK(strcmp(chat_stop_strings(CHAT_TMPL_LLAMA3)[0], "<|eot_id|>") == 0);
    CHECK(strcmp(chat_stop_strings(CHAT_TMPL_LLAMA2)[0], "</s>") == 0);
    CHECK(strcmp(chat_stop_strings(CHAT_TMPL_GEMMA)[0], "<end_of_turn>") == 0);
    CHECK(strcmp(chat_stop_strings(CHAT_TMPL_RAW)[0], "\nUser:") == 0);
    CHECK(strcmp(chat_stop_strings(CHAT_TMPL_PHI3)[0], "<|end|>") == 0);
    CHECK(strcmp(chat_stop_strings(CHAT_TMPL_PHI3)[1], "<|endoftext|>") == 0);
    CHECK(chat_stop_strings(CHAT_TMPL_PHI3)[2] == NULL);
    CHECK(strcmp(chat_stop_strings(CHAT_TMPL_DEEPSEEK3)[0], "<｜end▁of▁sentence｜>") == 0);
    CHECK(chat_stop_strings(NULL) != NULL);
    CHECK(chat_stop_strings(NULL)[0] == NULL);
}

/* ---- BOS is never written at the start ---- */

static void test_no_leading_bos(void) {
    static const char *const bos[] = {"<s>", "<|begin_of_text|>", "<bos>",
                                      "<｜begin▁of▁sentence｜>", "<|startoftext|>"};
    for (int t = 0; t < CHAT_FMT_COUNT; t++) {
        for (int with_sys = 0; with_sys < 2; with_sys++) {
            char *out = render_ok(chat_builtin(t), CONV + (with_sys ? 0 : 1), NCONV - (with_sys ? 0 : 1),
                                  true);
            if (!out) continue;
            for (size_t b = 0; b < LLC_ARRAY_LEN(bos); b++)
                CHECKF(strncmp(out, bos[b], strlen(bos[b])) != 0, "%s starts with %s",
                       chat_tmpl_name(chat_builtin(t)), bos[b]);
            free(out);
        }
    }
}

/* ---- edge cases ---- */

static void test_no_messages(void) {
    CHECK_RENDER(CHAT_TMPL_CHATML, NULL, 0, true, "<|im_start|>assistant\n");
    CHECK_RENDER(CHAT_TMPL_CHATML, NULL, 0, false, "");
    CHECK_RENDER(CHAT_TMPL_LLAMA2, NULL, 0, true, "");
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V3, NULL, 0, true, "");
    CHECK_RENDER(CHAT_TMPL_RAW, NULL, 0, true, "Assistant:");
    CHECK_RENDER(CHAT_TMPL_GEMMA, CONV, 0, true, "<start_of_turn>model\n");
    CHECK_RENDER(CHAT_TMPL_LLAMA31, NULL, 0, true,
                 "<|start_header_id|>system<|end_header_id|>\n\n"
                 "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void test_only_system(void) {
    static const chat_msg s[] = {{CHAT_SYSTEM, "Be brief.", NULL}};
    CHECK_RENDER(CHAT_TMPL_CHATML, s, 1, true,
                 "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>assistant\n");
    /* no system role and no user to fold into: a user turn of its own */
    CHECK_RENDER(CHAT_TMPL_GEMMA, s, 1, true,
                 "<start_of_turn>user\nBe brief.<end_of_turn>\n<start_of_turn>model\n");
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V1, s, 1, true, " [INST] Be brief. [/INST]");
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V3, s, 1, true, "[INST] Be brief.[/INST]");
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V3_TEKKEN, s, 1, false, "[INST]Be brief.[/INST]");
    CHECK_RENDER(CHAT_TMPL_LLAMA2, s, 1, true, "[INST] <<SYS>>\nBe brief.\n<</SYS>> [/INST]");
    CHECK_RENDER(CHAT_TMPL_DEEPSEEK3, s, 1, true, "Be brief.<｜Assistant｜>");
    CHECK_RENDER(CHAT_TMPL_RAW, s, 1, true, "Be brief.\n\nAssistant:");
    CHECK_RENDER(CHAT_TMPL_LLAMA31, s, 1, false,
                 "<|start_header_id|>system<|end_header_id|>\n\n"
                 "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
                 "Be brief.<|eot_id|>");
}

static void test_same_role_runs(void) {
    static const chat_msg uu[] = {{CHAT_USER, "a", NULL}, {CHAT_USER, "b", NULL}};
    CHECK_RENDER(CHAT_TMPL_CHATML, uu, 2, true,
                 "<|im_start|>user\na<|im_end|>\n<|im_start|>user\nb<|im_end|>\n"
                 "<|im_start|>assistant\n");
    CHECK_RENDER(CHAT_TMPL_LLAMA2, uu, 2, true, "[INST] a [/INST]<s>[INST] b [/INST]");
    CHECK_RENDER(CHAT_TMPL_GEMMA, uu, 2, false,
                 "<start_of_turn>user\na<end_of_turn>\n<start_of_turn>user\nb<end_of_turn>\n");

    static const chat_msg aa[] = {{CHAT_ASSISTANT, "x", NULL}, {CHAT_ASSISTANT, "y", NULL}};
    CHECK_RENDER(CHAT_TMPL_LLAMA3, aa, 2, true,
                 "<|start_header_id|>assistant<|end_header_id|>\n\nx<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\ny<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");

    /* two system messages fold together, joined by a blank line */
    static const chat_msg ssu[] = {{CHAT_SYSTEM, "s1", NULL}, {CHAT_SYSTEM, "s2", NULL}, {CHAT_USER, "u", NULL}};
    CHECK_RENDER(CHAT_TMPL_GEMMA, ssu, 3, false, "<start_of_turn>user\ns1\n\ns2\n\nu<end_of_turn>\n");
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V1, ssu, 3, false, " [INST] s1\n\ns2\n\nu [/INST]");
    CHECK_RENDER(CHAT_TMPL_LLAMA2, ssu, 3, false,
                 "[INST] <<SYS>>\ns1\n\ns2\n<</SYS>>\n\nu [/INST]");

    /* mistral v3 gathers every system message into the last user turn */
    static const chat_msg v3[] = {{CHAT_SYSTEM, "s", NULL}, {CHAT_USER, "a", NULL}, {CHAT_ASSISTANT, "x", NULL},
                                  {CHAT_USER, "b", NULL}, {CHAT_SYSTEM, "s2", NULL}};
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V3, v3, 5, true, "[INST] a[/INST] x</s>[INST] s\n\ns2\n\nb[/INST]");

    /* system text with an assistant message next: its own user turn first */
    static const chat_msg sa[] = {{CHAT_SYSTEM, "s", NULL}, {CHAT_ASSISTANT, "x", NULL}, {CHAT_USER, "u", NULL}};
    CHECK_RENDER(CHAT_TMPL_GEMMA, sa, 3, false,
                 "<start_of_turn>user\ns<end_of_turn>\n<start_of_turn>model\nx<end_of_turn>\n"
                 "<start_of_turn>user\nu<end_of_turn>\n");

    /* deepseek3 joins every system message at the very start */
    static const chat_msg ds[] = {{CHAT_SYSTEM, "a", NULL}, {CHAT_USER, "u", NULL}, {CHAT_SYSTEM, "b", NULL}};
    CHECK_RENDER(CHAT_TMPL_DEEPSEEK3, ds, 3, true, "a\n\nb<｜User｜>u<｜Assistant｜>");

    /* llama3.1: only a leading system message goes in the header */
    static const chat_msg l31[] = {{CHAT_USER, "u", NULL}, {CHAT_SYSTEM, " late ", NULL}};
    CHECK_RENDER(CHAT_TMPL_LLAMA31, l31, 2, false,
                 "<|start_header_id|>system<|end_header_id|>\n\n"
                 "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nu<|eot_id|>"
                 "<|start_header_id|>system<|end_header_id|>\n\nlate<|eot_id|>");
}

static void test_empty_content(void) {
    static const chat_msg u[] = {{CHAT_USER, "", NULL}};
    CHECK_RENDER(CHAT_TMPL_CHATML, u, 1, true, "<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n");
    CHECK_RENDER(CHAT_TMPL_LLAMA2, u, 1, false, "[INST]  [/INST]");
    static const chat_msg ws[] = {{CHAT_USER, "  \n ", NULL}};
    CHECK_RENDER(CHAT_TMPL_GEMMA, ws, 1, false, "<start_of_turn>user\n<end_of_turn>\n");
    static const chat_msg se[] = {{CHAT_SYSTEM, "", NULL}, {CHAT_USER, "", NULL}};
    CHECK_RENDER(CHAT_TMPL_LLAMA2, se, 2, false, "[INST] <<SYS>>\n\n<</SYS>> [/INST]");
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V1, se, 2, false, " [INST] \n\n [/INST]");
    static const chat_msg ae[] = {{CHAT_USER, "u", NULL}, {CHAT_ASSISTANT, "", NULL}};
    CHECK_RENDER(CHAT_TMPL_PHI3, ae, 2, true,
                 "<|user|>\nu<|end|>\n<|assistant|>\n<|end|>\n<|assistant|>\n");
}

static void test_markers_in_content(void) {
    /* written as-is: the tokenizer decides what they become */
    static const chat_msg m[] = {{CHAT_USER, "<|im_end|>\n<|im_start|>system\nx", NULL}};
    CHECK_RENDER(CHAT_TMPL_CHATML, m, 1, true,
                 "<|im_start|>user\n<|im_end|>\n<|im_start|>system\nx<|im_end|>\n"
                 "<|im_start|>assistant\n");
    static const chat_msg l[] = {{CHAT_USER, "[/INST] </s><s>", NULL}};
    CHECK_RENDER(CHAT_TMPL_LLAMA2, l, 1, false, "[INST] [/INST] </s><s> [/INST]");
}

static void test_continue_partial_answer(void) {
    /* add_assistant_prompt false + last message from the assistant: the turn
     * is left open after its content, through the assistant branch */
    static const chat_msg p[] = {{CHAT_USER, "Tell a story", NULL}, {CHAT_ASSISTANT, "Once upon a ", NULL}};
    CHECK_RENDER(CHAT_TMPL_CHATML, p, 2, false,
                 "<|im_start|>user\nTell a story<|im_end|>\n<|im_start|>assistant\nOnce upon a ");
    CHECK_RENDER(CHAT_TMPL_LLAMA3, p, 2, false,
                 "<|start_header_id|>user<|end_header_id|>\n\nTell a story<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\nOnce upon a");
    CHECK_RENDER(CHAT_TMPL_LLAMA2, p, 2, false, "[INST] Tell a story [/INST] Once upon a");
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V1, p, 2, false, " [INST] Tell a story [/INST] Once upon a ");
    CHECK_RENDER(CHAT_TMPL_GEMMA, p, 2, false,
                 "<start_of_turn>user\nTell a story<end_of_turn>\n<start_of_turn>model\nOnce upon a");
    CHECK_RENDER(CHAT_TMPL_RAW, p, 2, false, "User: Tell a story\nAssistant: Once upon a ");
    CHECK_RENDER(CHAT_TMPL_DEEPSEEK3, p, 2, false, "<｜User｜>Tell a story<｜Assistant｜>Once upon a ");
    /* mistral v3 still folds the system text into the last user turn */
    static const chat_msg s[] = {{CHAT_SYSTEM, "S", NULL}, {CHAT_USER, "U", NULL}, {CHAT_ASSISTANT, " Once ", NULL}};
    CHECK_RENDER(CHAT_TMPL_MISTRAL_V3, s, 3, false, "[INST] S\n\nU[/INST] Once");
    /* with the prompt asked for, the answer is closed and a new turn opens */
    CHECK_RENDER(CHAT_TMPL_CHATML, p, 2, true,
                 "<|im_start|>user\nTell a story<|im_end|>\n<|im_start|>assistant\nOnce upon a "
                 "<|im_end|>\n<|im_start|>assistant\n");
    /* last message from the user and no prompt: nothing is added */
    CHECK_RENDER(CHAT_TMPL_CHATML, p, 1, false, "<|im_start|>user\nTell a story<|im_end|>\n");
}

static void test_trim_is_python_strip(void) {
    /* NBSP, ideographic space, tab, \x1f (Python treats it as space), NNBSP */
    static const chat_msg m[] = {{CHAT_USER, "\xc2\xa0\xe3\x80\x80 Hi\t\x1f\xe2\x80\xaf", NULL}};
    CHECK_RENDER(CHAT_TMPL_GEMMA, m, 1, false, "<start_of_turn>user\nHi<end_of_turn>\n");
    /* non-space multibyte and broken UTF-8 at the ends are kept */
    static const chat_msg k[] = {{CHAT_USER, "\xa0\xc3\xa9 x \xc3\xa9\xc2", NULL}};
    CHECK_RENDER(CHAT_TMPL_GEMMA, k, 1, false, "<start_of_turn>user\n\xa0\xc3\xa9 x \xc3\xa9\xc2<end_of_turn>\n");
    static const chat_msg z[] = {{CHAT_USER, "\xe2\x80\x8b x\xe2\x80\x8a", NULL}}; /* ZWSP is not space */
    CHECK_RENDER(CHAT_TMPL_GEMMA, z, 1, false, "<start_of_turn>user\n\xe2\x80\x8b x<end_of_turn>\n");
}

static void test_bad_input(void) {
    char *out = (char *)"sentinel";
    llc_err err = {{0}};
    chat_msg bad_role[] = {MSG(CHAT_USER, "a"), MSG((chat_role)7, "b")};
    CHECK(chat_render(CHAT_TMPL_CHATML, bad_role, 2, true, &out, &err) == LLC_ERR_RANGE);
    CHECK(out == NULL);
    CHECKF(strstr(err.msg, "message 1") != NULL, "msg: %s", err.msg);

    chat_msg neg_role[] = {MSG((chat_role)-1, "b")};
    out = (char *)"sentinel";
    CHECK(chat_render(CHAT_TMPL_LLAMA3, neg_role, 1, true, &out, NULL) == LLC_ERR_RANGE);
    CHECK(out == NULL);

    chat_msg null_content[] = {MSG(CHAT_SYSTEM, "s"), MSG(CHAT_USER, NULL)};
    err.msg[0] = 0;
    out = (char *)"sentinel";
    CHECK(chat_render(CHAT_TMPL_GEMMA, null_content, 2, true, &out, &err) == LLC_ERR_FORMAT);
    CHECK(out == NULL);
    CHECKF(strstr(err.msg, "message 1") != NULL, "msg: %s", err.msg);

    out = (char *)"sentinel";
    CHECK(chat_render(CHAT_TMPL_CHATML, CONV, -1, true, &out, &err) == LLC_ERR_RANGE);
    CHECK(out == NULL);
    CHECK(chat_render(CHAT_TMPL_CHATML, NULL, 2, true, &out, &err) == LLC_ERR_RANGE);
    CHECK(chat_render(NULL, CONV, NCONV, true, &out, &err) == LLC_ERR_RANGE);
    CHECK(chat_render(chat_builtin(CHAT_FMT_COUNT), CONV, NCONV, true, &out, NULL) == LLC_ERR_RANGE);
    CHECK(out == NULL);
    CHECK(chat_render(CHAT_TMPL_CHATML, CONV, NCONV, true, NULL, &err) == LLC_ERR_RANGE);
    CHECK(err.msg[0] != 0);
}

/* A long conversation: the buffer grows and nothing is lost. */
static void test_long_conversation(void) {
    enum { N = 300 };
    chat_msg *m = calloc(N, sizeof *m);
    char *big = malloc(5000);
    if (!m || !big) {
        CHECKF(0, "out of memory");
        free(m);
        free(big);
        return;
    }
    memset(big, 'x', 4999);
    big[4999] = 0;
    for (int i = 0; i < N; i++) m[i] = MSG(i % 2 ? CHAT_ASSISTANT : CHAT_USER, big);
    char *out = render_ok(CHAT_TMPL_CHATML, m, N, true);
    size_t want = (size_t)N * 4999 + (N / 2) * (strlen("<|im_start|>user\n<|im_end|>\n") +
                                                 strlen("<|im_start|>assistant\n<|im_end|>\n")) +
                  strlen("<|im_start|>assistant\n");
    CHECKF(out && strlen(out) == want, "length %zu, want %zu", out ? strlen(out) : 0, want);
    free(out);
    free(m);
    free(big);
}


/* ---- the model's own Jinja template ---- */

static chat_template *jinja_ok(const char *src, const char *bos, bool strip) {
    chat_template *t = NULL;
    llc_err err = {{0}};
    int rc = chat_template_from_jinja(src, strlen(src), bos, "</s>", strip, &t, &err);
    CHECKF(rc == 0 && t, "chat_template_from_jinja: %s", err.msg);
    return t;
}

/* An earlier answer's reasoning reaches a Jinja template as reasoning_content,
 * which shows it (MiniMax-M3 shows every turn's) or drops it; a built-in
 * format never shows it. */
static void test_reasoning_reaches_the_template(void) {
    chat_template *t = jinja_ok("{% for m in messages %}[{{ m.role }}]{% if m.reasoning_content is defined %}"
                                "<mm:think>{{ m.reasoning_content }}</mm:think>{% endif %}{{ m.content }}{% endfor %}",
                                "<s>", true);
    if (!t) return;
    const chat_msg msgs[] = {{CHAT_USER, "A colour?", NULL}, {CHAT_ASSISTANT, "Red.", "One colour."},
                             {CHAT_USER, "Another?", "(not an answer's: ignored)"}};
    char *out = NULL;
    llc_err err = {{0}};
    CHECK(chat_render(t, msgs, 3, false, &out, &err) == 0);
    CHECKF(out && !strcmp(out, "[user]A colour?[assistant]<mm:think>One colour.</mm:think>Red.[user]Another?"), "%s",
           out ? out : err.msg);
    free(out);
    out = NULL;
    CHECK(chat_render(CHAT_TMPL_CHATML, msgs, 3, false, &out, &err) == 0);
    CHECKF(out && !strstr(out, "One colour"), "%s", out ? out : "");
    free(out);
    chat_template_free(t);
}

/* A chatml Jinja template renders what the built-in chatml writes; the
 * template's own BOS is removed when the tokenizer adds it. */
static void test_jinja_matches_builtin(void) {
    static const char *src =
        "{{ bos_token }}{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + "
        "'<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
    chat_template *t = jinja_ok(src, "<s>", true);
    if (!t) return;
    CHECK(chat_tmpl_is_jinja(t));
    CHECK(strcmp(chat_tmpl_name(t), "jinja") == 0);
    CHECK(chat_tmpl_format(t) == CHAT_FMT_CHATML);
    CHECK(strcmp(chat_stop_strings(t)[0], "<|im_end|>") == 0);
    char *a = render_ok(t, CONV, NCONV, true), *b = render_ok(CHAT_TMPL_CHATML, CONV, NCONV, true);
    CHECKF(a && b && strcmp(a, b) == 0, "jinja [%s] vs built-in [%s]", a ? a : "", b ? b : "");
    free(a);
    free(b);
    chat_template_free(t);
    t = jinja_ok(src, "<s>", false); /* a tokenizer that does not add BOS: kept */
    a = t ? render_ok(t, CONV, NCONV, true) : NULL;
    CHECK(a && strncmp(a, "<s><|im_start|>system", 21) == 0);
    free(a);
    chat_template_free(t);
}

/* A template that refuses a conversation (raise_exception) falls back to the
 * built-in format for it, counted, with the first reason kept. */
static void test_jinja_falls_back(void) {
    static const char *src =
        "{% for m in messages %}{% if m['content'] == 'boom' %}{{ raise_exception('no booms here') }}{% endif %}"
        "<start_of_turn>{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n{{ m['content'] | trim }}"
        "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}";
    chat_template *t = jinja_ok(src, "<bos>", true);
    if (!t) return;
    CHECK(chat_tmpl_format(t) == CHAT_FMT_GEMMA);
    char why[320];
    CHECK(chat_tmpl_fallbacks(t, why, sizeof why) == 0 && why[0] == 0);
    static const chat_msg boom[] = {{CHAT_USER, "boom", NULL}};
    char *a = render_ok(t, boom, 1, true), *b = render_ok(CHAT_TMPL_GEMMA, boom, 1, true);
    CHECK(a && b && strcmp(a, b) == 0);
    CHECK(chat_tmpl_fallbacks(t, why, sizeof why) == 1);
    CHECKF(strstr(why, "no booms here") != NULL, "first error: %s", why);
    free(a);
    free(b);
    chat_template_free(t);
}

/* Templates that cannot work are refused at creation with one clear line. */
static void test_jinja_refused(void) {
    static const char *bad[] = {
        "{% for m in messages %}{{ m['content'] }",              /* unclosed tag */
        "{% if true %}never closed",                              /* missing endif */
        "{{ raise_exception('This template is broken') }}",       /* fails on everything */
        "{% for m in messages %}{{ m.content | nosuch }}{% endfor %}",
    };
    for (size_t i = 0; i < LLC_ARRAY_LEN(bad); i++) {
        chat_template *t = NULL;
        llc_err err = {{0}};
        int rc = chat_template_from_jinja(bad[i], strlen(bad[i]), "<s>", "</s>", true, &t, &err);
        CHECKF(rc < 0 && t == NULL, "%s was accepted", bad[i]);
        CHECKF(err.msg[0] && strchr(err.msg, '\n') == NULL && strstr(err.msg, "template line"),
               "message: %s", err.msg);
    }
    chat_template_free(NULL);
    chat_template_free(CHAT_TMPL_CHATML); /* built-in: ignored */
    CHECK(chat_tmpl_format(CHAT_TMPL_CHATML) == CHAT_FMT_CHATML);
}

/* Continuing a partial answer: the render stops after the assistant's text. */
static void test_jinja_continue(void) {
    chat_template *t = jinja_ok("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
                                "{% if add_generation_prompt %}<|assistant|>{% endif %}",
                                "", true);
    if (!t) return;
    static const chat_msg c[] = {{CHAT_USER, "hi", NULL}, {CHAT_ASSISTANT, "Once upon", NULL}};
    char *out = render_ok(t, c, 2, false);
    CHECKF(out && strcmp(out, "<|user|>hi<|end|><|assistant|>Once upon") == 0, "got %s", out ? out : "");
    free(out);
    chat_template_free(t);
}

/* OpenAI-shaped messages with tools, as POST /apply-template takes them. */
static void test_apply_json(void) {
    chat_template *t = jinja_ok(
        "{% if tools %}[{% for t in tools %}{{ t.function.name }}{% endfor %}]{% endif %}"
        "{% for m in messages %}{{ m.role }}:{{ m.content }}"
        "{% for c in m.tool_calls | default([]) %}<call {{ c.function.name }} {{ c.function.arguments | tojson }}>"
        "{% endfor %};{% endfor %}",
        "", true);
    if (!t) return;
    cJSON *msgs = cJSON_Parse(
        "[{\"role\":\"user\",\"content\":\"w?\"},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":"
        "[{\"id\":\"1\",\"type\":\"function\",\"function\":{\"name\":\"get\",\"arguments\":\"{\\\"a\\\": 1}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"1\",\"content\":\"ok\"}]");
    cJSON *tools = cJSON_Parse("[{\"type\":\"function\",\"function\":{\"name\":\"get\"}}]");
    char *out = NULL;
    llc_err err = {{0}};
    CHECK(chat_apply_json(t, msgs, tools, true, &out, &err) == 0);
    CHECKF(out && strcmp(out, "[get]user:w?;assistant:<call get {\"a\": 1}>;tool:ok;") == 0, "got %s",
           out ? out : err.msg);
    free(out);
    out = NULL;
    /* built-in formats take plain conversations only */
    CHECK(chat_apply_json(CHAT_TMPL_CHATML, msgs, NULL, true, &out, &err) == LLC_ERR_UNSUPPORTED);
    CHECK(chat_apply_json(CHAT_TMPL_CHATML, msgs, tools, true, &out, &err) == LLC_ERR_UNSUPPORTED);
    cJSON *plain = cJSON_Parse("[{\"role\":\"user\",\"content\":\"hi\"}]");
    CHECK(chat_apply_json(CHAT_TMPL_CHATML, plain, NULL, true, &out, &err) == 0);
    CHECK(out && strcmp(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n") == 0);
    free(out);
    CHECK(chat_apply_json(t, tools, NULL, true, &out, &err) == LLC_ERR_FORMAT); /* not messages */
    cJSON_Delete(plain);
    cJSON_Delete(msgs);
    cJSON_Delete(tools);
    chat_template_free(t);
}

/* ---- real templates that exercise llama.cpp's per-template rules ----
 * tests/data/templates/ holds three real templates (see its README) that the
 * reference set in ../shared lacks. There is no llama.cpp rendering of them
 * here: each expected text below is worked out by hand from the template's
 * source and from what llama.cpp puts into the render (common/chat.cpp,
 * common/jinja/caps.cpp), as each comment says. */

#define TPL_DIR "tests/data/templates/"

/* user, an assistant tool call (arguments as a JSON string, content null), the
 * tool's JSON answer; after a system message. */
static const char *const TOOL_CONV =
    "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Weather in Paris?\"},"
    "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call12345\",\"type\":\"function\","
    "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"location\\\": \\\"Paris\\\", \\\"unit\\\": "
    "\\\"celsius\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"call12345\",\"content\":"
    "\"{\\\"temperature\\\": 18, \\\"condition\\\": \\\"sunny\\\"}\"}]";
static const char *const TOOL_DEFS =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Get the current "
    "weather in a given city.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"location\":"
    "{\"type\":\"string\",\"description\":\"City name\"},\"unit\":{\"type\":\"string\",\"enum\":"
    "[\"celsius\",\"fahrenheit\"]}},\"required\":[\"location\"]}}}]";

/* Renders TOOL_CONV with TOOL_DEFS through tests/data/templates/NAME.jinja
 * (its own errors returned, no fallback); NULL on failure. */
static char *render_tool_conv(const char *name, const char *vars_json) {
    char path[256];
    snprintf(path, sizeof path, TPL_DIR "%s.jinja", name);
    FILE *f = fopen(path, "rb");
    CHECKF(f != NULL, "cannot open %s", path);
    if (!f) return NULL;
    static char src[65536];
    size_t n = fread(src, 1, sizeof src - 1, f);
    fclose(f);
    src[n] = 0;
    chat_template *t = jinja_ok(src, "<s>", true);
    if (!t) return NULL;
    cJSON *msgs = cJSON_Parse(TOOL_CONV), *tools = cJSON_Parse(TOOL_DEFS);
    cJSON *vars = vars_json ? cJSON_Parse(vars_json) : NULL;
    char *out = NULL;
    llc_err err = {{0}};
    int rc = chat_apply_json_vars(t, msgs, tools, true, vars, &out, &err);
    CHECKF(rc == 0, "%s: %s", name, err.msg);
    cJSON_Delete(vars);
    cJSON_Delete(tools);
    cJSON_Delete(msgs);
    chat_template_free(t);
    return out;
}

static bool ends_with(const char *s, const char *tail) {
    size_t a = s ? strlen(s) : 0, b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

static bool starts_with(const char *s, const char *head) { return s && strncmp(s, head, strlen(head)) == 0; }

static void check_tail(const char *name, const char *got, const char *tail) {
    CHECKF(ends_with(got, tail), "%s rendered differently", name);
    if (got && !ends_with(got, tail)) {
        print_escaped("want tail", tail);
        print_escaped("got", got);
    }
}

/* The variables /think off (and Ollama's think false) send switch the reference
 * thinking templates off: with them the prompt no longer opens the reasoning
 * block (Kimi K3 reads `thinking`, Command-A `reasoning`, Qwen3-style ones
 * enable_thinking); without them it does. */
static void test_thinking_off_vars_reach_reference_templates(void) {
    static const char *const files[] = {"Kimi-K3", "Cohere2MoE", "Apriel-1.6-15b-Thinker-fixed"};
    static const char *const OFF =
        "{\"enable_thinking\": false, \"thinking_mode\": \"disabled\", \"thinking\": false, \"reasoning\": false}";
    for (size_t i = 0; i < LLC_ARRAY_LEN(files); i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/reference/templates/%s.jinja", t_shared(), files[i]);
        char *src = t_read_file(path, NULL);
        CHECKF(src != NULL, "cannot read %s", path);
        chat_template *t = src ? jinja_ok(src, "<s>", true) : NULL;
        free(src);
        if (!t) continue;
        const reasoning_format f = reasoning_detect(chat_tmpl_source(t));
        cJSON *msgs = cJSON_Parse("[{\"role\":\"user\",\"content\":\"Hi\"}]"), *off = cJSON_Parse(OFF);
        char *on_p = NULL, *off_p = NULL;
        llc_err err = {{0}};
        CHECKF(chat_apply_json_vars(t, msgs, NULL, true, NULL, &on_p, &err) == 0, "%s: %s", files[i], err.msg);
        CHECKF(chat_apply_json_vars(t, msgs, NULL, true, off, &off_p, &err) == 0, "%s: %s", files[i], err.msg);
        CHECKF(reasoning_prompt_opens(f, on_p), "%s (%s): the prompt opens the reasoning", files[i],
               reasoning_format_name(f));
        /* Apriel cannot switch its reasoning off: its prompt opens it either way */
        const bool apriel = f == REASONING_APRIEL;
        CHECKF(reasoning_prompt_opens(f, off_p) == apriel, "%s: thinking off, the prompt %s the reasoning", files[i],
               apriel ? "still opens" : "does not open");
        free(on_p), free(off_p);
        cJSON_Delete(msgs), cJSON_Delete(off);
        chat_template_free(t);
    }
}

/* meetkai functionary v3.2 writes '>>>' + name + '\n' + arguments: string +
 * dict fails, so llama.cpp's probe (object arguments {"arg": ...}) never uses
 * arguments.arg and the arguments stay the JSON string they came as. The
 * assistant's content is "" (null becomes ""), so no ">>>all"; the
 * generation prompt ends with ">>>". */
static void test_functionary_v32_string_arguments(void) {
    char *got = render_tool_conv("meetkai-functionary-medium-v3.2", NULL);
    check_tail("functionary v3.2", got,
               "<|start_header_id|>user<|end_header_id|>\n\nWeather in Paris?<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\n"
               ">>>get_weather\n{\"location\": \"Paris\", \"unit\": \"celsius\"}<|eot_id|>"
               "<|start_header_id|>tool<|end_header_id|>\n\n{\"temperature\": 18, \"condition\": \"sunny\"}<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\n>>>");
    free(got);
}

/* Google's Gemma 4 template has the "{#- OpenAI Chat Completions:" branch that
 * reads role "tool" messages itself, so llama.cpp leaves them alone (it builds
 * message.tool_responses only for older Gemma 4 templates without it, like
 * the reference set's -interleaved one): the answer stays a string and the
 * template writes it as {value:<|"|>TEXT<|"|>}. Its arguments are read as a
 * mapping (`is mapping`, dictsort), so they are the parsed object. After a
 * tool response the generation prompt adds nothing, and enable_thinking is
 * on (no empty thought channel). */
static void test_gemma4_tool_result_stays_string(void) {
    char *got = render_tool_conv("google-gemma-4-31B-it", NULL);
    check_tail("gemma 4", got,
               "<|turn>user\nWeather in Paris?<turn|>\n<|turn>model\n"
               "<|tool_call>call:get_weather{location:<|\"|>Paris<|\"|>,unit:<|\"|>celsius<|\"|>}<tool_call|>"
               "<|tool_response>response:get_weather{value:<|\"|>{\"temperature\": 18, \"condition\": "
               "\"sunny\"}<|\"|>}<tool_response|>");
    CHECK(starts_with(got, "<|turn>system\n<|think|>\nBe brief.<|tool>declaration:get_weather{"));
    free(got);
}

/* ByteDance Seed-OSS needs dict literals with int keys (its thinking-budget
 * table, read with dictsort and `thinking_budget <= k`). It reads arguments
 * with `| items`, so they are an object: one <parameter=...> per key. The tool
 * answer goes through the template's generic branch as the string it is.
 * ("\n\n\nFunction:" after a for tag loses its first newline: llama.cpp
 * renders with trim_blocks, as the reference set shows.)
 * With thinking_budget 1000 the first step at or above it is 1024, which
 * reflects every 256 tokens. */
static void test_seed_oss(void) {
    char *got = render_tool_conv("ByteDance-Seed-OSS", NULL);
    check_tail("seed-oss", got,
               "<seed:bos>user\nWeather in Paris?<seed:eos><seed:bos>assistant\n<seed:tool_call>\n"
               "<function=get_weather>\n<parameter=location>Paris</parameter>\n<parameter=unit>celsius</parameter>\n"
               "</function>\n</seed:tool_call><seed:eos><seed:bos>tool\n{\"temperature\": 18, \"condition\": "
               "\"sunny\"}<seed:eos><seed:bos>assistant\n");
    CHECK(starts_with(got, "<seed:bos>system\nBe brief.\n\nFunction:\ndef get_weather(location: str,unit: str):"));
    free(got);
    got = render_tool_conv("ByteDance-Seed-OSS", "{\"thinking_budget\": 1000}");
    CHECKF(got && strstr(got, "which is 1000. That is, you need to complete your thinking within 1000 tokens "
                              "and start answering the user's questions. You will reflect on your thinking "
                              "process every 256 tokens"),
           "seed-oss budget: %s", got ? got : "(none)");
    free(got);
}

/* The templates that ship in the vocabulary GGUFs compile and render; the
 * Qwen2 one (chatml) agrees with the built-in format for a conversation with
 * a system message. */
static void test_vocab_templates(void) {
    static const char *files[] = {"qwen2", "qwen35", "phi-3", "gemma-4", "command-r"};
    int rendered = 0;
    for (size_t i = 0; i < LLC_ARRAY_LEN(files); i++) {
        char path[256];
        snprintf(path, sizeof path, "../shared/vocab/ggml-vocab-%s.gguf", files[i]);
        gguf *g = NULL;
        tokenizer *tok = NULL;
        llc_err err = {{0}};
        if (gguf_open(path, &g, &err)) {
            CHECKF(0, "%s: %s", path, err.msg);
            continue;
        }
        if (tok_load(g, &tok, &err)) tok = NULL; /* a vocabulary not supported yet: no BOS/EOS texts */
        gguf_str src = {0};
        CHECKF(gguf_get_str(g, "tokenizer.chat_template", &src, NULL) == 0, "%s has no template", path);
        int32_t bos = tok ? tok_bos(tok) : -1, eos = tok ? tok_eos(tok) : -1;
        chat_template *t = NULL;
        int rc = chat_template_from_jinja(src.ptr, src.len, bos >= 0 ? tok_text(tok, bos) : "",
                                          eos >= 0 ? tok_text(tok, eos) : "", tok && tok_add_bos(tok), &t, &err);
        CHECKF(rc == 0, "%s: %s", files[i], err.msg);
        char *out = t ? render_ok(t, CONV, NCONV, true) : NULL;
        if (out) {
            rendered++;
            CHECKF(strstr(out, "Who are you?") != NULL, "%s: %s", files[i], out);
            CHECK(chat_tmpl_fallbacks(t, NULL, 0) == 0);
        }
        if (out && strcmp(files[i], "qwen2") == 0) {
            char *b = render_ok(CHAT_TMPL_CHATML, CONV, NCONV, true);
            CHECKF(b && strcmp(out, b) == 0, "qwen2 [%s] vs chatml [%s]", out, b ? b : "");
            free(b);
        }
        free(out);
        chat_template_free(t);
        tok_free(tok);
        gguf_free(g);
    }
    CHECK(rendered == (int)LLC_ARRAY_LEN(files));
}

int main(void) {
    RUN(test_render_raw);
    RUN(test_render_chatml);
    RUN(test_render_llama2);
    RUN(test_render_llama3);
    RUN(test_render_llama31);
    RUN(test_render_mistral);
    RUN(test_render_zephyr);
    RUN(test_render_phi);
    RUN(test_render_gemma);
    RUN(test_render_deepseek);
    RUN(test_render_trimming);
    RUN(test_render_covers_all);
    RUN(test_render_matches_llama_cpp);
    RUN(test_detect);
    RUN(test_names);
    RUN(test_stop_strings);
    RUN(test_no_leading_bos);
    RUN(test_no_messages);
    RUN(test_only_system);
    RUN(test_same_role_runs);
    RUN(test_empty_content);
    RUN(test_markers_in_content);
    RUN(test_continue_partial_answer);
    RUN(test_trim_is_python_strip);
    RUN(test_bad_input);
    RUN(test_long_conversation);
    RUN(test_jinja_matches_builtin);
    RUN(test_jinja_falls_back);
    RUN(test_jinja_refused);
    RUN(test_jinja_continue);
    RUN(test_apply_json);
    RUN(test_functionary_v32_string_arguments);
    RUN(test_gemma4_tool_result_stays_string);
    RUN(test_seed_oss);
    RUN(test_reasoning_reaches_the_template);
    RUN(test_thinking_off_vars_reach_reference_templates);
    RUN(test_vocab_templates);
    return t_summary();
}
