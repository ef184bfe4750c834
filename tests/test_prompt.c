/* test_prompt.c — conversations to prompt tokens: the whole conversation when it
 * fits (same tokens as tokenizing the rendered template), oldest turns left out
 * in user+answer pairs when it does not, the system message always kept, and a
 * clear error when the last message alone is too long. */
#include "engine/gguf.h"
#include "engine/prompt.h"
#include "tests/test.h"

static tokenizer *g_tok;
static gguf *g_file;

static void test_fits_whole(void) {
    chat_msg m[] = {{CHAT_SYSTEM, "Be kind."}, {CHAT_USER, "Hi there"}, {CHAT_ASSISTANT, "Hello!"},
                    {CHAT_USER, "Tell me a story"}};
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
    chat_msg m[9] = {{CHAT_SYSTEM, "You tell short stories about cats."}};
    char buf[8][64];
    for (int i = 0; i < 8; i++) {
        snprintf(buf[i], sizeof buf[i], "%s number %d was about a dog and a ball", i % 2 ? "Answer" : "Question", i);
        m[1 + i] = (chat_msg){i % 2 ? CHAT_ASSISTANT : CHAT_USER, buf[i]};
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
    tok_free(g_tok);
    gguf_free(g_file);
    return t_summary();
}
