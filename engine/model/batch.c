/* batch.c — growable arrays behind a bk_batch. */
#include "engine/model/batch.h"

#include <stdlib.h>
#include <string.h>

struct batch {
    int max_blocks, block_size;
    int n_tokens, cap_tokens;
    int n_seqs, cap_seqs;
    int n_out, n_hidden;
    int32_t *tokens, *positions, *slots, *out_rows, *hidden_rows; /* [cap_tokens] */
    int32_t *seq_start, *kv_len, *block_table, *state_slots; /* per sequence */
    bk_batch view;
};

int batch_create(int max_blocks, int block_size, batch **out) {
    *out = NULL;
    if (max_blocks < 1 || block_size < 1) return LLC_ERR_RANGE;
    batch *b = calloc(1, sizeof *b);
    if (!b) return LLC_ERR_NOMEM;
    b->max_blocks = max_blocks;
    b->block_size = block_size;
    b->seq_start = calloc(1, sizeof *b->seq_start);
    if (!b->seq_start) {
        free(b);
        return LLC_ERR_NOMEM;
    }
    *out = b;
    return 0;
}

void batch_free(batch *b) {
    if (!b) return;
    free(b->tokens);
    free(b->positions);
    free(b->slots);
    free(b->out_rows);
    free(b->hidden_rows);
    free(b->seq_start);
    free(b->kv_len);
    free(b->block_table);
    free(b->state_slots);
    free(b);
}

void batch_clear(batch *b) { b->n_tokens = b->n_seqs = b->n_out = b->n_hidden = 0; }

static bool grow(void **p, size_t elem, int cap) {
    void *np = realloc(*p, elem * (size_t)cap);
    if (!np) return false;
    *p = np;
    return true;
}

int batch_add(batch *b, const int32_t *tokens, int n, int start_pos, const int32_t *blocks,
              int n_blocks, batch_out out) {
    if (n < 1 || start_pos < 0) return LLC_ERR_RANGE;
    int64_t end = (int64_t)start_pos + n;
    int needed = (int)((end + b->block_size - 1) / b->block_size);
    if (needed > n_blocks || needed > b->max_blocks) return LLC_ERR_RANGE;
    if (b->n_tokens + n > b->cap_tokens) {
        int cap = b->cap_tokens ? b->cap_tokens : 64;
        while (cap < b->n_tokens + n) cap *= 2;
        if (!grow((void **)&b->tokens, 4, cap) || !grow((void **)&b->positions, 4, cap) ||
            !grow((void **)&b->slots, 4, cap) || !grow((void **)&b->out_rows, 4, cap) ||
            !grow((void **)&b->hidden_rows, 4, cap))
            return LLC_ERR_NOMEM;
        b->cap_tokens = cap;
    }
    if (b->n_seqs + 1 > b->cap_seqs) {
        int cap = b->cap_seqs ? b->cap_seqs * 2 : 8;
        if (!grow((void **)&b->seq_start, 4, cap + 1) || !grow((void **)&b->kv_len, 4, cap) ||
            !grow((void **)&b->block_table, 4 * (size_t)b->max_blocks, cap) ||
            !grow((void **)&b->state_slots, 4, cap))
            return LLC_ERR_NOMEM;
        b->cap_seqs = cap;
    }
    int s = b->n_seqs++;
    int first_out = out == BATCH_OUT_HIDDEN ? b->n_hidden : b->n_out;
    for (int i = 0; i < n; i++) {
        int r = b->n_tokens + i, pos = start_pos + i;
        b->tokens[r] = tokens[i];
        b->positions[r] = pos;
        b->slots[r] = blocks[pos / b->block_size] * b->block_size + pos % b->block_size;
        if (out == BATCH_OUT_ALL || (out == BATCH_OUT_LAST && i == n - 1)) b->out_rows[b->n_out++] = r;
        if (out == BATCH_OUT_HIDDEN) b->hidden_rows[b->n_hidden++] = r;
    }
    b->n_tokens += n;
    b->seq_start[s + 1] = b->n_tokens;
    b->kv_len[s] = (int)end;
    b->state_slots[s] = s;
    int32_t *bt = b->block_table + (size_t)s * b->max_blocks;
    memcpy(bt, blocks, (size_t)needed * sizeof *bt);
    memset(bt + needed, 0, (size_t)(b->max_blocks - needed) * sizeof *bt);
    return first_out;
}

void batch_set_state_slot(batch *b, int slot) {
    if (b->n_seqs > 0) b->state_slots[b->n_seqs - 1] = slot;
}

const bk_batch *batch_view(batch *b) {
    b->view = (bk_batch){
        .n_tokens = b->n_tokens, .tokens = b->tokens, .positions = b->positions,
        .n_seqs = b->n_seqs, .seq_start = b->seq_start, .kv_len = b->kv_len,
        .block_table = b->block_table, .max_blocks = b->max_blocks, .slots = b->slots,
        .n_out = b->n_out, .out_rows = b->out_rows, .n_hidden = b->n_hidden,
        .hidden_rows = b->hidden_rows, .state_slots = b->state_slots,
    };
    return &b->view;
}
