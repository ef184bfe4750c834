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

/* ---- fitting: which oldest turns to leave out ---- */

/* Renders and tokenizes the conversation kept from turn start `first` on. */
typedef int (*render_from_fn)(void *ctx, int first, int32_t **ids, int *n_ids, llc_err *err);

/* The first of the candidate starts firsts[0..m) (increasing: each leaves out
 * more turns) whose prompt fits the budget, found by bisection: a prompt only
 * shrinks as turns go, so this renders about 2 + log2(m) times instead of once
 * per dropped turn (4000 messages: a dozen renders, not thousands). *out gets
 * that prompt, its n_dropped the start's index into firsts. */
static int fit(render_from_fn render, void *ctx, const int *firsts, int m, int budget, prompt *out, llc_err *err) {
    int32_t *ids = NULL;
    int n_ids = 0, rc = render(ctx, firsts[0], &ids, &n_ids, err);
    if (rc) return rc;
    int best = 0;
    if (n_ids > budget) { /* the whole conversation does not fit: the least left out that does */
        free(ids);
        ids = NULL;
        if ((rc = render(ctx, firsts[m - 1], &ids, &n_ids, err))) return rc;
        if (n_ids > budget) {
            free(ids);
            return llc_fail(err, LLC_ERR_RANGE, "the message is %d tokens with the system prompt; at most %d fit",
                            n_ids, budget);
        }
        int lo = 0, hi = m - 1; /* firsts[lo] does not fit, firsts[hi] does (ids: its prompt) */
        while (hi - lo > 1) {
            const int mid = lo + (hi - lo) / 2;
            int32_t *mid_ids = NULL;
            int mid_n = 0;
            if ((rc = render(ctx, firsts[mid], &mid_ids, &mid_n, err))) {
                free(ids);
                return rc;
            }
            if (mid_n <= budget) {
                free(ids);
                ids = mid_ids, n_ids = mid_n, hi = mid;
            } else {
                free(mid_ids);
                lo = mid;
            }
        }
        best = hi;
    }
    out->ids = ids;
    out->n_ids = n_ids;
    out->n_dropped = best;
    return 0;
}

typedef struct msgs_ctx {
    const tokenizer *tok;
    chat_tmpl t;
    const chat_msg *msgs;
    int n, has_system;
    chat_msg *kept;
} msgs_ctx;

static int render_msgs_from(void *ctx, int first, int32_t **ids, int *n_ids, llc_err *err) {
    msgs_ctx *c = ctx;
    int k = 0;
    if (c->has_system) c->kept[k++] = c->msgs[0];
    for (int i = first; i < c->n; i++) c->kept[k++] = c->msgs[i];
    return render_tokens(c->tok, c->t, c->kept, k, ids, n_ids, err);
}

int prompt_build(const tokenizer *tok, chat_tmpl t, const chat_msg *msgs, int n, int budget,
                 prompt *out, llc_err *err) {
    memset(out, 0, sizeof *out);
    if (n < 1) return llc_fail(err, LLC_ERR_RANGE, "the conversation is empty");
    msgs_ctx c = {tok, t, msgs, n, msgs[0].role == CHAT_SYSTEM, malloc((size_t)n * sizeof(chat_msg))};
    int *firsts = malloc((size_t)n * sizeof *firsts);
    if (!c.kept || !firsts) {
        free(c.kept), free(firsts);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    /* the starts: each leaves out one more turn, a user message with the answer after it */
    int m = 0;
    for (int first = c.has_system;;) {
        firsts[m++] = first;
        if (first >= n - 1) break;
        first++;
        if (first < n - 1 && msgs[first - 1].role == CHAT_USER && msgs[first].role == CHAT_ASSISTANT) first++;
    }
    int rc = fit(render_msgs_from, &c, firsts, m, budget, out, err);
    if (!rc) out->n_dropped = firsts[out->n_dropped] - c.has_system;
    free(c.kept);
    free(firsts);
    return rc;
}

static const char *role_of(const cJSON *m) {
    const char *r = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "role"));
    return r ? r : "";
}

typedef struct json_ctx {
    const tokenizer *tok;
    chat_tmpl t;
    const cJSON *messages, *tools, *vars;
    int has_system;
} json_ctx;

static int render_json_from(void *ctx, int first, int32_t **ids, int *n_ids, llc_err *err) {
    json_ctx *c = ctx;
    cJSON *kept = cJSON_CreateArray();
    if (!kept) return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, c->messages) {
        if ((i == 0 && c->has_system) || i >= first) cJSON_AddItemReferenceToArray(kept, (cJSON *)m);
        i++;
    }
    char *text = NULL;
    int rc = chat_apply_json_vars(c->t, kept, c->tools, true, c->vars, &text, err);
    cJSON_Delete(kept); /* references only */
    return rc ? rc : tokenize_text(c->tok, text, ids, n_ids, err);
}

int prompt_build_json(const tokenizer *tok, chat_tmpl t, const cJSON *messages, const cJSON *tools,
                      const cJSON *vars, int budget, prompt *out, llc_err *err) {
    memset(out, 0, sizeof *out);
    int n = cJSON_GetArraySize(messages);
    if (!cJSON_IsArray(messages) || n < 1) return llc_fail(err, LLC_ERR_RANGE, "the conversation is empty");
    const cJSON *first_msg = cJSON_GetArrayItem(messages, 0);
    json_ctx c = {tok, t, messages, tools, vars,
                  !strcmp(role_of(first_msg), "system") || !strcmp(role_of(first_msg), "developer")};
    /* the starts: each leaves out the oldest turn, up to the next user message
     * (a tool answer never loses the call it answers) */
    const char **roles = malloc((size_t)n * sizeof *roles);
    int *firsts = malloc((size_t)n * sizeof *firsts);
    if (!roles || !firsts) {
        free(roles), free(firsts);
        return llc_fail(err, LLC_ERR_NOMEM, "out of memory");
    }
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, messages) roles[i++] = role_of(m);
    int k = 0;
    for (int first = c.has_system;;) {
        firsts[k++] = first;
        int next = first + 1;
        while (next < n - 1 && strcmp(roles[next], "user") != 0) next++;
        if (next >= n || first >= n - 1) break;
        first = next;
    }
    int rc = fit(render_json_from, &c, firsts, k, budget, out, err);
    if (!rc) out->n_dropped = firsts[out->n_dropped] - c.has_system;
    free(roles);
    free(firsts);
    return rc;
}
