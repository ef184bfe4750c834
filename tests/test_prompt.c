/* test_prompt.c — conversations to prompt tokens: the whole conversation when it
 * fits (same tokens as tokenizing the rendered template), oldest turns left out
 * in user+answer pairs when it does not, the system message always kept, and a
 * clear error when the last message alone is too long. */
#include "engine/gguf/gguf.h"
#include "engine/template/prompt.h"

#include <cjson/cJSON.h>
#include "tests/test.h"

static tokenizer *g_tok;
static gguf *g_file;

static void test_fits_whole(void) {
    chat_msg m[] = {{CHAT_SYSTEM, "Be kind.", NULL}, {CHAT_USER, "Hi there", NULL}, {CHAT_ASSISTANT, "Hello!", NULL},
                    {CHAT_USER, "Tell me a story", NULL}};
    prompt p;
    llc_err err;
    CHECK(prompt_build(g_tok, CHAT_TMPL_CHATML, m, 4, 4096, &p, &err) == 0);
    char *text;
    chat_render(CHAT_TMPL_CHATML, m, 4, true, &text, &err);
    int32_t want[1024];
    int n = tok_encode(g_tok, text, strlen(text), tok_add_bos(g_tok), true, want, 1024);
    CHECK(p.n_dropped == 0 && p.n_ids == n && !memcmp(p.ids, want, sizeof(int32_t) * n));
    free(text);
    free(p.ids);
}

static void test_drops_oldest_pairs(void) {
    chat_msg m[9] = {{CHAT_SYSTEM, "You tell short stories about cats.", NULL}};
    char buf[8][64];
    for (int i = 0; i < 8; i++) {
        snprintf(buf[i], sizeof buf[i], "%s number %d was about a dog and a ball", i % 2 ? "Answer" : "Question", i);
        m[1 + i] = (chat_msg){i % 2 ? CHAT_ASSISTANT : CHAT_USER, buf[i], NULL};
    }
    m[8].role = CHAT_USER; /* last: the user's new message */
    m[7].role = CHAT_ASSISTANT;
    prompt full, cut, sys_last;
    llc_err err;
    CHECK(prompt_build(g_tok, CHAT_TMPL_CHATML, m, 9, 100000, &full, &err) == 0);
    /* just under the whole: the first user+answer pair goes, nothing else */
    CHECK(prompt_build(g_tok, CHAT_TMPL_CHATML, m, 9, full.n_ids - 1, &cut, &err) == 0);
    CHECK(cut.n_dropped == 2 && cut.n_ids < full.n_ids);
    /* the system message and the last one: the smallest prompt there is */
    chat_msg two[] = {m[0], m[8]};
    CHECK(prompt_build(g_tok, CHAT_TMPL_CHATML, two, 2, 100000, &sys_last, &err) == 0);
    prompt tight;
    CHECK(prompt_build(g_tok, CHAT_TMPL_CHATML, m, 9, sys_last.n_ids, &tight, &err) == 0);
    CHECK(tight.n_dropped == 7 && tight.n_ids == sys_last.n_ids &&
          !memcmp(tight.ids, sys_last.ids, sizeof(int32_t) * tight.n_ids));
    /* not even that fits */
    prompt none;
    CHECK(prompt_build(g_tok, CHAT_TMPL_CHATML, m, 9, sys_last.n_ids - 1, &none, &err) == LLC_ERR_RANGE);
    CHECK(strstr(err.msg, "tokens") != NULL && none.ids == NULL);
    free(full.ids), free(cut.ids), free(sys_last.ids), free(tight.ids);
}

/* A long conversation (120 turns of differing lengths): for every budget the
 * bisection keeps the most turns that fit — the prompt fits, and keeping one
 * more pair would not. */
static void test_long_conversation_keeps_the_most_that_fit(void) {
    enum { N = 242 }; /* system, 120 pairs, the last question */
    chat_msg m[N];
    static char buf[N][96];
    m[0] = (chat_msg){CHAT_SYSTEM, "You answer briefly.", NULL};
    for (int i = 1; i < N; i++) {
        snprintf(buf[i], sizeof buf[i], "%s %d:%.*s", i % 2 ? "question" : "answer", i, 1 + (i * 37) % 60,
                 "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incid");
        m[i] = (chat_msg){i % 2 ? CHAT_USER : CHAT_ASSISTANT, buf[i], NULL};
    }
    prompt full, sys_last;
    llc_err err;
    CHECK(prompt_build(g_tok, CHAT_TMPL_CHATML, m, N, 1 << 30, &full, &err) == 0 && full.n_dropped == 0);
    chat_msg two[] = {m[0], m[N - 1]};
    CHECK(prompt_build(g_tok, CHAT_TMPL_CHATML, two, 2, 1 << 30, &sys_last, &err) == 0);
    for (int budget = sys_last.n_ids; budget < full.n_ids; budget += (full.n_ids - sys_last.n_ids) / 23 + 1) {
        prompt p;
        CHECKF(prompt_build(g_tok, CHAT_TMPL_CHATML, m, N, budget, &p, &err) == 0, "budget %d: %s", budget, err.msg);
        CHECK(p.n_ids <= budget && p.n_dropped % 2 == 0);
        if (p.n_dropped >= 2) { /* one more pair kept is over the budget */
            chat_msg more[N];
            more[0] = m[0];
            int k = 1;
            for (int i = 1 + p.n_dropped - 2; i < N; i++) more[k++] = m[i];
            prompt bigger;
            CHECK(prompt_build(g_tok, CHAT_TMPL_CHATML, more, k, 1 << 30, &bigger, &err) == 0);
            CHECKF(bigger.n_ids > budget, "budget %d: %d dropped, but %d tokens with 2 fewer fit", budget,
                   p.n_dropped, bigger.n_ids);
            free(bigger.ids);
        }
        free(p.ids);
    }
    free(full.ids), free(sys_last.ids);
}

/* OpenAI-shaped messages: a tool answer goes together with the call it answers
 * (dropping runs to the next user message). */
static void test_json_drops_to_next_user(void) {
    static const char src[] =
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
        "{% if m.tool_calls %}{{ m.tool_calls[0].function.name }}{% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    chat_template *t = NULL;
    llc_err err;
    CHECK(chat_template_from_jinja(src, sizeof src - 1, "<s>", "</s>", true, &t, &err) == 0);
    cJSON *m = cJSON_Parse(
        "[{\"role\":\"system\",\"content\":\"Use tools.\"},{\"role\":\"user\",\"content\":\"What time is it?\"},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\","
        "\"function\":{\"name\":\"now\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"a\","
        "\"content\":\"noon\"},{\"role\":\"assistant\",\"content\":\"It is noon.\"},"
        "{\"role\":\"user\",\"content\":\"Thanks, and the date?\"}]");
    cJSON *two = cJSON_CreateArray();
    cJSON_AddItemToArray(two, cJSON_Duplicate(cJSON_GetArrayItem(m, 0), true));
    cJSON_AddItemToArray(two, cJSON_Duplicate(cJSON_GetArrayItem(m, 5), true));
    prompt full, cut, small;
    CHECK(prompt_build_json(g_tok, t, m, NULL, NULL, 100000, &full, &err) == 0 && full.n_dropped == 0);
    CHECK(prompt_build_json(g_tok, t, two, NULL, NULL, 100000, &small, &err) == 0);
    /* one token short: the whole exchange before the last user message goes */
    CHECK(prompt_build_json(g_tok, t, m, NULL, NULL, full.n_ids - 1, &cut, &err) == 0);
    CHECK(cut.n_dropped == 4 && cut.n_ids == small.n_ids && !memcmp(cut.ids, small.ids, sizeof(int32_t) * cut.n_ids));
    prompt none;
    CHECK(prompt_build_json(g_tok, t, m, NULL, NULL, small.n_ids - 1, &none, &err) == LLC_ERR_RANGE && none.ids == NULL);
    free(full.ids), free(cut.ids), free(small.ids);
    cJSON_Delete(two);
    cJSON_Delete(m);
    chat_template_free(t);
}

int main(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/models/stories260K.gguf", t_shared());
    llc_err err;
    if (gguf_open(path, &g_file, &err) || tok_load(g_file, &g_tok, &err)) {
        fprintf(stderr, "setup: %s\n", err.msg);
        printf("0 passed, 1 failed\n");
        return 1;
    }
    RUN(test_fits_whole);
    RUN(test_drops_oldest_pairs);
    RUN(test_long_conversation_keeps_the_most_that_fit);
    RUN(test_json_drops_to_next_user);
    tok_free(g_tok);
    gguf_free(g_file);
    return t_summary();
}
