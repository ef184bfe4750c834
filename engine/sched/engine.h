/* engine.h — the one inference engine every conversation shares.
 *
 * A dedicated engine thread owns the model, the backend and the KV cache. Any
 * thread submits requests and cancels them; results come back as events on the
 * submitting client's queue, whose wake fd becomes readable when events wait.
 * The sender allocates a message and the receiver frees it. Every engine step is
 * one forward pass over all running sequences (continuous batching): decode rows
 * first, then prefill chunks up to a token budget. Prompts reuse cached KV blocks
 * of earlier requests with the same prefix. */
#ifndef LLC_ENGINE_H
#define LLC_ENGINE_H

#include "engine/grammar/grammar.h"
#include "engine/model/model.h"
#include "engine/sched/sampler.h"
#include "engine/tokenizer/tokenizer.h"

typedef struct engine engine;
typedef struct engine_client engine_client;

typedef struct engine_params {
    int n_blocks;          /* KV blocks (of block_size tokens) */
    int block_size;        /* default 16 */
    int max_step_tokens;   /* token budget of one step (default 512) */
    int max_running;       /* sequences in one step at most (default 256) */
    uint32_t kv_type;      /* K/V element type: QT_F32 (0, the default), QT_F16 or QT_Q8_0 */
    /* speculative decoding: a draft model on the same backend and vocabulary
     * proposes tokens the main model checks in the same step as everything else */
    model *draft;          /* NULL: none (the caller keeps it alive) */
    bool ngram;            /* or, without a draft model: n-gram lookup in the text so far */
    int draft_max;         /* most tokens proposed per step (default 8) */
    int draft_min;         /* fewest (default 1); the length adapts in between */
    float draft_p_min;     /* the draft stops when its best token is less likely (default 0.5) */
    int spec_max_seqs;     /* speculate only while at most this many sequences decode (default 4):
                              a bigger batch is compute-bound already */
    int max_snapshots;     /* hybrid models: recurrent states kept at block ends for prefix
                              reuse, the newest first (0: ENGINE_MAX_SNAPSHOTS; -1: none) */
    bool warmup;           /* engine_create runs one short forward pass (ENGINE_WARMUP_TOKENS
                              tokens, of the draft model too) before it returns, so the first
                              answer does not pay for paging in the mmapped weights and sizing
                              buffers. It leaves nothing behind: its KV blocks are freed
                              uncached and it counts in no metric */
} engine_params;

#define ENGINE_WARMUP_TOKENS 8
#define ENGINE_MAX_SNAPSHOTS 64

typedef struct gen_request {
    const int32_t *prompt; /* copied */
    int n_prompt;
    sampler_params sampling;
    int n;                 /* parallel samples (>= 1); sample i uses seed + i.
                              With beam search: the n best beams (n <= beam_width) */
    int beam_width;        /* 0: sample. 1..16: beam search on the raw model
                              log-probs (sampling params ignored); the
                              result streams once the search ends */
    int max_tokens;        /* >= 1 */
    const char *const *stop; /* stop strings (copied), n_stop of them */
    int n_stop;
    int priority;          /* higher runs first; FCFS within a priority */
    const char *grammar;   /* GBNF text (copied) the output must match, or NULL (see
                              engine/grammar/grammar.h): disallowed tokens are masked at every
                              step, an end token only once the grammar is complete,
                              and the sample stops when nothing more may follow.
                              Not with beam search */
    grammar *parsed_grammar; /* or the grammar already parsed (a server reads it on
                              a worker): used instead of `grammar`; the engine
                              takes a reference (grammar_ref), the caller keeps its own */
    bool continues_prompt; /* the output continues the prompt's text (completion,
                              infill): its first token keeps its SentencePiece
                              leading space (" was" after "..., there"). false
                              (chat): the answer is a text of its own, so that
                              space is dropped, as at the start of any text */
    bool special_text;     /* the text of control tokens is part of the answer
                              (tool-call markers such as [TOOL_CALLS] and
                              <|python_tag|>); end-of-generation tokens still end it */
} gen_request;

/* An embeddings request: each input runs through the model as a sequence of its
 * own, batched with everything else, and yields the mean over its positions of
 * the final-norm hidden state (before the output projection), L2-normalised.
 * Inputs use no cached prefix (every position's hidden state is needed, and the
 * cache holds K/V only) and leave nothing cached behind (kv_seq_free_uncached). */
typedef struct embed_request {
    const int32_t *const *inputs; /* [n_inputs] token lists (copied) */
    const int *n_tokens;          /* [n_inputs] each 1..the context */
    int n_inputs;                 /* 1..ENGINE_MAX_EMBED_INPUTS */
    int priority;
} embed_request;

#define ENGINE_MAX_EMBED_INPUTS 4096

typedef enum engine_finish {
    FINISH_NONE, FINISH_STOP, FINISH_LENGTH, FINISH_CANCELLED, FINISH_ERROR,
} engine_finish;

/* An embeddings request sends, per input, EV_EMBEDDING and then EV_DONE. */
typedef enum engine_event_kind { EV_TOKEN, EV_DONE, EV_ERROR, EV_EMBEDDING } engine_event_kind;

typedef struct engine_event {
    engine_event_kind kind;
    int64_t request_id;
    int seq_index;          /* which of the n samples */
    /* EV_TOKEN */
    int32_t token;
    char *text;             /* NUL-terminated piece safe to show (may be empty) */
    size_t text_len;
    sample_result lp;       /* when sampling.n_logprobs > 0 */
    /* EV_DONE (one per sample) */
    engine_finish finish;
    int32_t end_token;      /* the end-of-generation token that ended it (not sent as
                               EV_TOKEN: it has no text), or -1 */
    sample_result end_lp;   /* end_token's log-probabilities (sampling.n_logprobs > 0) */
    uint64_t seed;          /* the seed its sampler used (the drawn one for a random seed) */
    int prompt_tokens, cached_tokens, completion_tokens;
    double queue_ms, ttft_ms, tpot_ms;
    int drafted_tokens, accepted_tokens; /* speculative decoding */
    /* EV_ERROR: why; the samples it ended then get their EV_DONE (FINISH_ERROR).
       seq_index: the sample, when one sample alone failed */
    char message[256];
    /* EV_EMBEDDING (seq_index = the input; prompt_tokens set too) */
    float *embedding;       /* [n_embd], norm 1; freed with the event */
    int n_embd;
} engine_event;

#define ENGINE_LAT_BUCKETS 14 /* see engine_latency_bounds_ms */

typedef struct engine_metrics {
    int running, waiting;
    int kv_used, kv_cached, kv_free, kv_total;
    int64_t prompt_tokens, cached_tokens, computed_tokens, generated_tokens;
    int64_t steps, preemptions;
    int64_t steps_top; /* steps whose rows came back as their best entries alone (model_forward_top) */
    int peak_kv_used;
    /* over the last 256 finished samples (0 until one finishes) */
    double ttft_ms_p50, ttft_ms_p90, ttft_ms_p99;
    double tpot_ms_p50, tpot_ms_p90, tpot_ms_p99;
    double gen_tokens_per_s; /* over roughly the last second of work */
    /* speculative decoding */
    int64_t spec_drafted, spec_accepted, spec_verifies; /* tokens proposed, accepted; checks */
    double draft_ms, step_ms;  /* time drafting, and in steps overall */
    int max_running;           /* engine_params.max_running: sequences one step takes at most */
    int block_size;            /* tokens per KV block */
    /* every sample finished since the start (with at least one token): time to
     * first token and time per output token (samples of 2+ tokens), counted per
     * bucket of engine_latency_bounds_ms (not cumulative), with their sums */
    int64_t ttft_buckets[ENGINE_LAT_BUCKETS], tpot_buckets[ENGINE_LAT_BUCKETS];
    int64_t ttft_count, tpot_count;
    double ttft_sum_ms, tpot_sum_ms;
} engine_metrics;

/* The engine's latency histogram buckets: upper bounds in ms, ascending; the
 * last is +infinity. */
extern const double engine_latency_bounds_ms[ENGINE_LAT_BUCKETS];

/* A live sequence as engine_get_slots reports it. */
typedef struct engine_slot {
    int64_t request_id;
    int index;             /* which sample (or beam) of the request */
    bool running;          /* in the running set; false: waiting (queued or preempted) */
    int n_prompt;          /* prompt tokens */
    int n_cached;          /* of those, found in the prefix cache (once admitted) */
    int n_decoded;         /* tokens generated so far */
    int max_tokens, n, beam_width, priority;
    sampler_params sampling;
} engine_slot;

/* Starts the engine thread on a loaded model. m, tok stay the caller's and must
 * outlive the engine.
 *
 * Out of memory inside a step (activation buffers that cannot grow for a bigger
 * batch, a backend allocation that fails) ends the request the step is blamed on
 * (the one with the most rows in it) with an EV_ERROR saying so and its done
 * events; the step's other sequences are preempted and run again, and later
 * requests are served as usual. Tests make it happen with kernels/fault.h;
 * LLC_FAULT_ALLOC=N in the environment makes the Nth backend allocation after
 * engine_create fail. */
int engine_create(model *m, const tokenizer *tok, const engine_params *p, engine **out,
                  llc_err *err);
void engine_destroy(engine *e);

int engine_client_create(engine *e, engine_client **out);
/* Cancels the client's requests and frees it and its pending events. */
void engine_client_free(engine_client *c);
/* Readable while events wait; read it (eventfd) or just poll the queue. */
int engine_client_fd(const engine_client *c);
/* The next event, or NULL; free it with engine_event_free. */
engine_event *engine_client_next(engine_client *c);
/* Blocks until an event is there (or timeout_ms passes; -1 = forever). */
engine_event *engine_client_wait(engine_client *c, int timeout_ms);
void engine_event_free(engine_event *ev);

/* Queues a request; returns its id (> 0) or a negative code with err set for
 * requests that can never run (bad params, prompt longer than the context or the
 * whole KV cache). */
int64_t engine_submit(engine *e, engine_client *c, const gen_request *r, llc_err *err);
/* Queues an embeddings request (see embed_request); returns its id (> 0) or a
 * negative code with err set (no inputs, an empty or too long input, a token
 * outside the vocabulary, an input needing more KV blocks than the cache has). */
int64_t engine_submit_embed(engine *e, engine_client *c, const embed_request *r, llc_err *err);
/* Cancels a request: its blocks are freed at the next step and each of its
 * samples ends with FINISH_CANCELLED. */
void engine_cancel(engine *e, int64_t request_id);

void engine_get_metrics(engine *e, engine_metrics *out);
/* The live sequences as of the engine's last step (running ones first, in
 * admission order, then waiting ones). *out is malloc'd (NULL when there are
 * none); returns the count, or LLC_ERR_NOMEM. Safe from any thread. */
int engine_get_slots(engine *e, engine_slot **out);

#endif
