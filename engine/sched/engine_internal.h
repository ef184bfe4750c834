/* engine_internal.h — the engine thread's own types (requests, sequences, the
 * engine) and the functions the engine_*.c files of engine/sched/ share (engine.c:
 * thread and step runner; engine_sched.c: scheduler; engine_request.c: request
 * and sequence lifecycles; engine_client.c: event queues; beams, speculation,
 * grammars, embeddings). Private to engine/sched/ (make check-layers). */
#ifndef LLC_ENGINE_INTERNAL_H
#define LLC_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "engine/model/batch.h"
#include "engine/sched/beam.h"
#include "engine/sched/engine.h"
#include "engine/grammar/grammar.h"
#include "engine/sched/kvcache.h"
#include "engine/sched/spec_policy.h"
#include "engine/sched/stopstr.h"

/* ---- events and clients ---- */

typedef struct ev_node {
    engine_event ev;
    struct ev_node *next;
} ev_node;

struct engine_client {
    engine *e;
    pthread_mutex_t mu;
    ev_node *head, *tail;
    int efd;
    atomic_bool closed; /* the owner called engine_client_free (read by the engine thread without the lock) */
    int active;    /* requests not yet finished (guarded by the engine's mutex) */
};

typedef enum seq_state { SEQ_WAITING, SEQ_RUNNING, SEQ_DONE } seq_state;

typedef struct request request;

typedef struct seq {
    request *req;
    int index;
    seq_state state;
    kv_seq *kv;
    sampler *smp;
    tok_stream *ts;
    stopstr *ss;
    int32_t *tokens; /* prompt + generated */
    int n_tokens, cap_tokens;
    int n_gen;
    int cached;      /* prompt tokens found in the prefix cache at first admission */
    bool admitted_once;
    int64_t admit_order; /* newest admitted is preempted first */
    double t_first, t_last;
    int32_t end_token;       /* the end-of-generation token that ended it, or -1 */
    sample_result end_lp;    /* its log-probabilities */
    int rows;        /* rows in the current step */
    int out_row;     /* index of its logits row in the current step, or -1 */
    /* speculative decoding (engine_spec.c) */
    int n_draft;     /* proposals at the end of tokens, verified this step */
    spec_policy spec; /* draft length and pause, from its acceptance so far */
    kv_seq *dkv;     /* the draft model's KV for this sequence, or NULL */
    sampler *dsmp;   /* the draft's sampler (same params, own RNG stream) */
    float *q;        /* [draft_max][n_vocab]: the draft's distributions (sampling) */
    int64_t drafted, accepted; /* totals, reported in its done event */
    /* hybrid models: the recurrent state cannot be cut back like the KV, so a
     * verify step keeps the state from before it (spec_slot, after spec_c0
     * computed tokens) and a rejection restores it, the accepted tokens then
     * computed again with the next step; a hybrid draft the same with its own
     * pair of slots (dslot: 2·dslot working, 2·dslot+1 the state after dbak_len
     * tokens, kept before its first proposal) */
    int spec_slot, spec_c0;
    int dslot, dbak_len;
    /* embeddings (engine_embed.c) */
    double *embd_sum; /* [dim] sum of its rows' final-norm hidden states so far */
    int hid_row;      /* index of its first hidden-state row in the current step */
    grammar_state *gst; /* where its text stands in the request's grammar, or NULL */
    int state_slot;  /* hybrid models: its recurrent-state slot in the KV store while
                        running (in step with kv_seq_computed), else -1 */
    int snap_from;   /* at admission: the snapshot slot its prefix hit starts from, or -1 */
} seq;

struct request {
    int64_t id;
    engine_client *client;
    int32_t *prompt;
    int n_prompt;
    sampler_params sp;
    int n, max_tokens, priority;
    bool continues_prompt; /* gen_request.continues_prompt */
    bool special_text;     /* gen_request.special_text */
    bool embed;      /* an embeddings request: seqs[i] is input i (no sampling) */
    int *input_start; /* embed: input i is prompt[input_start[i] .. input_start[i+1]) */
    grammar *grammar;  /* gen_request.grammar parsed, or NULL */
    int n_slots;     /* entries of seqs: n, or the beam width */
    beam_search *bs; /* beam search state, or NULL when sampling */
    double t_first_beam; /* first beam step (ms) */
    bool beam_ended;  /* its results went out; reap_requests may free it */
    char **stop;
    int n_stop;
    double t_submit, t_admit;
    bool cancelled;
    bool forked;     /* the n samples exist (after the prompt) */
    int n_live;
    seq **seqs;      /* [n_slots]; only seqs[0] until the prompt is done; with
                        beam search, seqs[i] is live beam i */
    ev_node **done_nodes; /* [n_done_nodes]: sample i's EV_DONE node, NULL once used */
    int n_done_nodes;
    request *next;   /* in the engine's request list */
};

typedef struct inbox_msg {
    enum { MSG_SUBMIT, MSG_CANCEL, MSG_CLIENT_GONE } kind;
    request *req;
    int64_t id;
    engine_client *client;
    struct inbox_msg *next;
} inbox_msg;

struct engine {
    model *m;
    const tokenizer *tok;
    engine_params p;
    int n_vocab, n_ctx, max_blocks_per_seq;
    model_kv *kv_store;
    kv_pool *pool;
    batch *batch;
    float *logits;
    int cap_logits;
    /* a step whose every sampled row reads only its best entries gets those
     * alone from the backend (model_forward_top): [cap_top][TOPK_MAX] each */
    int32_t *top_ids;
    float *top_vals;
    int cap_top;
    bool no_top; /* LLC_TOP_K=0: whole rows of logits always (for comparison) */
    /* speculative decoding: the draft model's own KV, batch and logits */
    model *draft;
    model_kv *dkv_store;
    kv_pool *dpool;
    batch *dbatch;
    float *dlogits;
    int cap_dlogits;
    float *probs, *resid;  /* [n_vocab] scratch for verification */
    float *hidden;         /* [cap_hidden][dim] final-norm hidden states of the step (embeddings) */
    int cap_hidden;
    /* constrained decoding (engine_grammar.c), made at the first grammar request */
    grammar_vocab *gvocab; /* the vocabulary's texts for grammars */
    bool gstrip;           /* the tokenizer prefixes a space the output drops (SPM) */
    float *grow;           /* [n_vocab] a logits row with disallowed tokens at -inf */
    uint8_t *gallowed;     /* [n_vocab] */

    pthread_t thread;
    pthread_mutex_t mu; /* inbox, metrics, client refcounts */
    pthread_cond_t cv;
    inbox_msg *inbox_head, *inbox_tail;
    bool stop;
    int64_t next_id;
    engine_metrics metrics; /* the published copy, guarded by mu */
    engine_slot *slots;     /* the published live sequences (n_slots_pub), guarded by mu */
    int n_slots_pub, cap_slots_pub;

    /* engine-thread state */
    engine_metrics stats;  /* the engine thread's working copy of the metrics */
    engine_slot *slots_work; /* the next snapshot of the live sequences, swapped with slots */
    int cap_slots_work;
    double ttft_hist[256], tpot_hist[256]; /* ring of the latest finished samples */
    int hist_n, hist_pos;
    double rate_t;        /* start of the current tokens/s window (ms) */
    int64_t rate_tokens;  /* generated_tokens at rate_t */
    request *requests; /* all live requests */
    seq **running;
    int n_running, cap_running;
    int64_t admit_counter;
    /* hybrid models (recurrent layers): each running sequence holds a state
     * slot of kv_store; the slots given back, and how many were ever made */
    bool recurrent;
    int *free_states;
    int n_free_states, n_states;
    /* state snapshots: block id -> the slot holding the state after that block's
     * last token (-1: none) and the hash of the prefix it ends; the blocks that
     * have one, oldest first (a ring of ENGINE_MAX_SNAPSHOTS) */
    int32_t *snap_slot;
    uint64_t *snap_key;
    int32_t snap_ring[ENGINE_MAX_SNAPSHOTS];
    int n_snaps, snap_head, max_snaps; /* max_snaps: engine_params.max_snapshots resolved */
    /* a hybrid draft model: pairs of state slots of dkv_store given back, and
     * how many pairs were ever made */
    bool drecurrent;
    int *dfree_pairs;
    int n_dfree_pairs, n_dpairs;
};


/* engine_client.c */
/* Appends a copy of ev to c's queue and wakes its fd (the queue owns ev.text and
 * ev.embedding). Out of memory, the event is dropped and what it owned freed:
 * false (a sample whose token was dropped ends with an error, eng_emit_token). */
bool eng_client_push(engine_client *c, const engine_event *ev);
/* Pushes a sample's EV_DONE through the node its request reserved at submit
 * (eng_request_reserve_done), so the one EV_DONE per sample arrives even when
 * memory runs out and other events are dropped. */
void eng_client_push_done(request *r, const engine_event *ev);
/* Reserves r's n EV_DONE nodes (seq_index 0..n-1); LLC_ERR_NOMEM if it cannot. */
int eng_request_reserve_done(request *r, int n);
/* Frees c and the events still queued. */
void eng_client_destroy(engine_client *c);
/* One request of c has ended; frees c if its owner let it go. */
void eng_client_release(engine *e, engine_client *c);

/* engine_request.c */
/* Queues a message for the engine thread and wakes it. */
void eng_inbox_post(engine *e, inbox_msg *msg);
/* Takes the inbox: submits join the request list, cancels (and clients gone)
 * end their requests; *stop reports engine_destroy. */
void eng_drain_inbox(engine *e, bool *stop);
void eng_request_free(request *r);
/* Hands a filled request to the engine thread: gives it its client, submit
 * time and id, counts it on the client and posts msg (MSG_SUBMIT). Returns the id. */
int64_t eng_request_post(engine *e, engine_client *c, request *r, inbox_msg *msg);
/* Ends one sample: done event, blocks back to the pool (full ones stay cached). */
void eng_seq_finish(engine *e, seq *s, engine_finish finish);
/* Sends an error event for sample s alone (seq_index set) and ends it. */
void eng_seq_error(engine *e, seq *s, const char *msg);
/* Sends an error event and ends every sample of r. */
void eng_request_error(engine *e, request *r, const char *msg);
/* Ends every sample of r with FINISH_CANCELLED. */
void eng_cancel_request(engine *e, request *r);
/* Frees finished requests (and clients let go whose last request ended). */
void eng_reap_requests(engine *e);
/* After the prompt of a request with n > 1: forks samples 1..n-1 off sample 0. */
int eng_fork_samples(engine *e, request *r);
/* A sequence of request r; copies from's tokens (or the prompt when from is
 * NULL). Sampling requests get a sampler (seed + index), detokenizer and stop
 * matcher; beam requests need none. */
int eng_seq_create(engine *e, request *r, int index, const seq *from, seq **out);
void eng_seq_free(seq *s);
int eng_seq_push_token(seq *s, int32_t tok);

/* The text token `tok` adds to a stream: the detokenizer's piece through the
 * stop matcher, and at_end also what they still hold, in *text (malloc'd) and
 * *len. Returns 1 when a stop string matched, 0 while the text goes on, and
 * LLC_ERR_NOMEM when memory ran out (*text NULL: the caller ends the sample
 * with an error rather than stream an answer with a hole in it). */
int eng_token_text(tok_stream *ts, stopstr *ss, int32_t tok, bool at_end, char **text, size_t *len);
/* Streams one sampled token (false while the sample goes on). */
bool eng_emit_token(engine *e, seq *s, const sample_result *res);

/* Releases s's KV (and the draft's); an embedding input's blocks are not cached. */
void eng_seq_drop_kv(seq *s);

/* engine_embed.c */
/* Creates the sequences of embeddings request r (one per input, waiting). */
int eng_embed_seqs(engine *e, request *r);
/* After the forward pass: adds s's rows of hidden (from s->hid_row) to its sum;
 * once its whole input is computed, sends the embedding and ends it. */
void eng_embed_take(engine *e, seq *s, int rows, const float *hidden);

/* engine_sched.c */
/* The running list (admission order is kept for preemption). Joining it gives
 * a hybrid model's sequence a state slot, leaving it gives the slot back (its
 * state is then lost: a sequence that runs again computes from position 0). */
int eng_running_add(engine *e, seq *s);
void eng_running_remove(engine *e, seq *s);
/* A state slot of kv_store for a running sequence: one given back, or a new
 * one (negative when out of memory); eng_state_give returns it. */
int eng_state_take(engine *e);
void eng_state_give(engine *e, int slot);
/* A fork's recurrent state: child's slot = parent's (both running). */
int eng_state_fork(engine *e, const seq *parent, seq *child);
/* After s's step is committed: when its computed tokens end at a block
 * boundary, the state there is kept as that block's snapshot. */
void eng_state_snapshot(engine *e, seq *s);
/* Preempts running sequence s: drops its draft tokens and KV blocks (full ones stay
 * cached) and puts it back to waiting, to be computed again. */
void eng_seq_requeue(engine *e, seq *s);
/* The next waiting sequence: highest priority, then oldest request; or NULL. */
seq *eng_next_waiting(engine *e);
/* Chooses this step's rows (decode first, then prefill chunks within the token
 * budget; admits waiting sequences; preempts when blocks run out) and lays out
 * the batch. Returns the number of rows, or a negative code. */
int eng_plan_step(engine *e);

/* engine_spec.c */
/* Before planning a step: proposes draft tokens for the sequences in decode that
 * speculate (draft model passes, batched, or n-gram lookup) and appends them to
 * their tokens (n_draft). */
void eng_spec_propose(engine *e);
/* Takes a sequence's proposals back (when it gets no rows, or is preempted). */
void eng_spec_drop(engine *e, seq *s);
/* Whether s is decoding, as speculation counts it: one token pending (beyond
 * its proposals) or, on a hybrid model, up to draft_max more generated tokens
 * that rejections left to compute again. */
bool eng_spec_decoding(const engine *e, const seq *s);
/* Hybrid models, once the step is planned: keeps the state of each sequence
 * that verifies proposals in its spec_slot (drops the proposals, and the rows
 * they took, of one whose copy fails). */
void eng_spec_keep_states(engine *e);
/* Leaving the running set: gives back s's spec slot and draft state slots
 * (the draft's KV goes with them). */
void eng_spec_release(engine *e, seq *s);
/* After the forward pass: checks s's proposals against the model's rows
 * logits[0..n_draft] (accept / resample), streams what is accepted, rolls back
 * both KV caches. Returns 0, or negative when it cannot go on. */
int eng_spec_verify(engine *e, seq *s, const float *logits);
int eng_spec_init(engine *e, llc_err *err);
void eng_spec_free(engine *e);
void eng_spec_seq_free(seq *s);

/* engine_grammar.c */
/* A sequence's grammar state (when its request has a grammar): a copy of
 * from's, or a fresh one. Builds the engine's grammar vocabulary on first use. */
int eng_grammar_seq_init(engine *e, seq *s, const seq *from);
/* The row to sample s from: logits itself without a grammar, else a copy with
 * the tokens the grammar refuses at -inf. NULL when no token is allowed. */
const float *eng_grammar_row(engine *e, seq *s, const float *logits);
/* sampler_sample under s's grammar: with no log-probabilities asked for, the
 * unmasked choice is kept when the grammar allows it (the mask is only built
 * when it does not). Negative when nothing can be sampled. */
int eng_sample(engine *e, seq *s, const float *logits, sample_result *res);
void eng_grammar_free(engine *e);

/* engine_beam.c */
/* Stores the candidates of beam s from its logits row. */
int eng_beam_take_logits(engine *e, seq *s, const float *logits);
/* Advances every beam request whose live beams all have candidates. */
void eng_beam_advance_ready(engine *e);
/* Ends a beam request: FINISH_NONE streams the best n hypotheses (cutting the
 * search short if it is still going); CANCELLED/ERROR just end each result. */
void eng_beam_end(engine *e, request *r, engine_finish finish);

#endif
