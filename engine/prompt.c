/* prompt.c — chat messages to prompt tokens within a budget (see prompt.h). */
#include "engine/prompt.h"

#include <stdlib.h>
#include <string.h>

/* Renders and tokenizes msgs; *ids malloc'd. */
static int render_tokens(const tokenizer *tok, chat_tmpl t, const chat_msg *msgs, int n,
                         int32_t **ids, int *n_ids, llc_err *err) {
    char *text = NULL;
    int rc = chat_render(t, msgs, n, true, &text, err);
    if (rc) return rc;
    size_t len = strlen(text);
    if (len > (size_t)1 << 29) {
        free(text);
        return llc_fail(err, LLC_ERR_RANGE, "the conversation is too long to tokenize");
    }
    int cap = 2 * (int)len + 4; /* enough for every vocabulary we load; retried if not */
    int32_t *buf = malloc((size_t)cap * sizeof *buf);
    int got = buf ? tok_encode(tok, text, len, tok_add_bos(tok), true, buf, cap) : LLC_ERR_NOMEM;
    if (got > cap) {
        int32_t *nb = realloc(buf, (size_t)got * sizeof *nb);
        got = nb ? tok_encode(tok, text, len, tok_add_bos(tok), true, buf = nb, got) : LLC_ERR_NOMEM;
    }
    free(text);
    if (got < 0) {
        free(buf);
        return llc_fail(err, got, "the conversation could not be tokenized");
    }
    *ids = buf;
    *n_ids = got;
    return 0;
}

int prompt_build(const tokenizer *tok, chat_tmpl t, const chat_msg *msgs, int n, int budget,
                 prompt *out, llc_err *err) {
    memset(out, 0, sizeof *out);
    if (n < 1) return llc_fail(err, LLC_ERR_RANGE, "the conversation is empty");
    chat_msg *kept = malloc((size_t)n * sizeof *kept);
    if (!kept) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    int has_system = msgs[0].role == CHAT_SYSTEM;
    int first = has_system; /* index in msgs of the oldest turn still kept */
    for (;;) {
        int k = 0;
        if (has_system) kept[k++] = msgs[0];
        for (int i = first; i < n; i++) kept[k++] = msgs[i];
        int32_t *ids = NULL;
        int n_ids = 0;
        int rc = render_tokens(tok, t, kept, k, &ids, &n_ids, err);
        if (rc) {
            free(kept);
            return rc;
        }
        if (n_ids <= budget) {
            out->ids = ids;
            out->n_ids = n_ids;
            out->n_dropped = first - has_system;
            free(kept);
            return 0;
        }
        free(ids);
        if (first >= n - 1) {
            free(kept);
            return llc_fail(err, LLC_ERR_RANGE,
                            "the message is %d tokens with the system prompt; at most %d fit", n_ids,
                            budget);
        }
        /* leave out the oldest turn: a user message with the answer after it */
        first++;
        if (first < n - 1 && msgs[first - 1].role == CHAT_USER && msgs[first].role == CHAT_ASSISTANT)
            first++;
    }
}
