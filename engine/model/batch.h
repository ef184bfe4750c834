/* batch.h — building the flattened varlen batch (bk_batch) of one forward step
 * from per-sequence pieces: tokens, their start position, and the block table
 * that says where the sequence's KV lives. Slots are derived from the block
 * table, so callers never compute them by hand. */
#ifndef LLC_BATCH_H
#define LLC_BATCH_H

#include "kernels/backend.h"

typedef enum batch_out {
    BATCH_OUT_NONE, /* no logits for this piece */
    BATCH_OUT_LAST, /* logits for its last token */
    BATCH_OUT_ALL,  /* logits for every token (perplexity, speculative verify) */
    BATCH_OUT_HIDDEN, /* no logits; the final-norm hidden state of every token (embeddings) */
} batch_out;

typedef struct batch batch;

/* max_blocks: the longest block table any sequence will have. */
int batch_create(int max_blocks, int block_size, batch **out);
void batch_free(batch *b);
void batch_clear(batch *b);
/* Appends n tokens at positions start_pos.. of a sequence whose first
 * ceil((start_pos+n)/block_size) KV blocks are blocks[0..n_blocks). Returns the
 * index of its first logits row among the batch's outputs (or the count so far
 * when out is NONE; with HIDDEN, of its first row among the hidden-state rows),
 * or a negative code. */
int batch_add(batch *b, const int32_t *tokens, int n, int start_pos, const int32_t *blocks,
              int n_blocks, batch_out out);
/* Names the recurrent-state slot of the sequence batch_add added last (hybrid
 * models: model.h); a sequence without one uses its index in the batch. */
void batch_set_state_slot(batch *b, int slot);
/* The step description for model_forward; valid until the next batch_add/clear. */
const bk_batch *batch_view(batch *b);

#endif
