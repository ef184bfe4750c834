/* prompt.c — chat messages to prompt tokens within a budget (see prompt.h). */
#include "engine/template/prompt.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

/* Tokenizes a rendered conversation (and frees it); *ids malloc'd. */
static int tokenize_text(const tokenizer *tok, char *text, int32_t **ids, int *n_ids, llc_err *err) {
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

/* Renders and tokenizes msgs; *ids malloc'd. */
static int render_tokens(const tokenizer *tok, chat_tmpl t, const chat_msg *msgs, int n,
                         int32_t **ids, int *n_ids, llc_err *err) {
    char *text = NULL;
    int rc = chat_render(t, msgs, n, true, &text, err);
    return rc ? rc : tokenize_text(tok, text, ids, n_ids, err);
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

static const char *role_of(const cJSON *m) {
    const char *r = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role"));
    return r ? r : "";
}

int prompt_build_json(const tokenizer *tok, chat_tmpl t, const cJSON *messages, const cJSON *tools,
                      const cJSON *vars, int budget, prompt *out, llc_err *err) {
    memset(out, 0, sizeof *out);
    int n = cJSON_GetArraySize(messages);
    if (!cJSON_IsArray(messages) || n < 1) return llc_fail(err, LLC_ERR_RANGE, "the conversation is empty");
    const cJSON *first_msg = cJSON_GetArrayItem(messages, 0);
    bool has_system = !strcmp(role_of(first_msg), "system") || !strcmp(role_of(first_msg), "developer");
    int first = has_system; /* index of the oldest turn still kept */
    for (;;) {
        cJSON *kept = cJSON_CreateArray();
        if (!kept) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
        int i = 0;
        const cJSON *m;
        cJSON_ArrayForEach(m, messages) {
            if ((i == 0 && has_system) || i >= first) cJSON_AddItemReferenceToArray(kept, (cJSON *)m);
            i++;
        }
        char *text = NULL;
        int32_t *ids = NULL;
        int n_ids = 0;
        int rc = chat_apply_json_vars(t, kept, tools, true, vars, &text, err);
        cJSON_Delete(kept); /* references only */
        if (!rc) rc = tokenize_text(tok, text, &ids, &n_ids, err);
        if (rc) return rc;
        if (n_ids <= budget) {
            out->ids = ids;
            out->n_ids = n_ids;
            out->n_dropped = first - has_system;
            return 0;
        }
        free(ids);
        /* leave out the oldest turn: up to the next user message */
        int next = first + 1;
        while (next < n - 1 && strcmp(role_of(cJSON_GetArrayItem(messages, next)), "user") != 0) next++;
        if (next >= n)
            return llc_fail(err, LLC_ERR_RANGE, "the message is %d tokens with the system prompt; at most %d fit",
                            n_ids, budget);
        first = next;
    }
}
