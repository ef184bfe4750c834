/* sampler.h — picking the next token of one sequence from a row of logits:
 * penalties, temperature, top-k / top-p / min-p truncation, a seeded per-sequence
 * RNG, log-probabilities, and the helpers speculative decoding and beam search need.
 *
 * The chain, in this order (the same order as vLLM and HF transformers; note that
 * llama.cpp's default chain applies temperature *last*, after top-p/min-p):
 *   1. penalties on a private copy of the logits (the caller's row is never written):
 *        repeat:    for each token seen in the last `repeat_last_n` tokens of the
 *                   history (prompt + generated, see sampler_accept_prompt), a
 *                   positive logit is divided by repeat_penalty, a non-positive one
 *                   multiplied by it (llama.cpp semantics);
 *        frequency/presence: for each token generated c > 0 times within the last
 *                   `freq_last_n` *generated* tokens (prompt tokens never count),
 *                   logit -= c * frequency_penalty + presence_penalty (OpenAI).
 *      NaN logits count as -inf and are never chosen; +inf counts as the largest
 *      float (it wins).
 *      The history holds what sampler_accept_prompt / sampler_accept recorded.
 *   2. temperature <= 0: greedy — the argmax of the penalised logits, ties to the
 *      lowest id; no random number is drawn and steps 3-7 are skipped.
 *   3. top-k (top_k > 0): keep the k largest logits (ties broken toward lower ids).
 *   4. temperature: logit / temperature.
 *   5. softmax over what is left.
 *   6. top-p (top_p < 1): keep the smallest set of most probable tokens whose
 *      cumulative probability is >= top_p.
 *   7. min-p (min_p > 0): drop tokens with p < min_p * p_max.
 *   8. draw one token from what is left (renormalised) with exactly one uniform
 *      draw from the sequence's RNG.
 * Cost is O(n_vocab) per call and the row is not sorted: top-k (and greedy) keep a
 * heap of the k best in one pass over the row, then sort those k best first (so
 * the same candidates in the same order come from a backend's top list:
 * sampler_sample_top; quickselect when k > 1024), top-p
 * is a histogram of the weights plus a quickselect on probability mass inside the
 * bucket where the cut falls, min-p a filter against the best. Penalties touch only
 * the tokens in their windows. Scratch per sampler: k candidates with top-k or
 * greedy, else ~16 bytes per vocabulary entry (4 MiB at 256k).
 *
 * Log-probabilities (n_logprobs > 0) are those of the *model*: log_softmax of the
 * caller's raw logits — before penalties, temperature and truncation, as the OpenAI
 * API reports them — so they do not change with the sampling settings.
 *
 * Determinism: the RNG is xoshiro256** seeded through splitmix64, and softmax uses
 * the sampler's own exp (no libm, no FMA), so a seed gives the same tokens on every
 * machine and compiler for the same logits. sampler_sample draws exactly one
 * uniform per call when temperature > 0 and none when greedy.
 * A sampler is used by one thread at a time. */
#ifndef LLC_SAMPLER_H
#define LLC_SAMPLER_H

#include "kernels/common.h"

#define SAMPLER_MAX_LOGPROBS 20
/* The default seed: fixed, so runs are reproducible unless a seed is chosen. */
#define SAMPLER_SEED_DEFAULT 0x5EEDULL
/* Seed value meaning "draw a seed from the OS at sampler_create"; sampler_seed()
 * then tells which seed was used, so the run can be repeated. */
#define SAMPLER_SEED_RANDOM UINT64_MAX
/* How many of the latest generated tokens sampler_rollback can always take back,
 * whatever the windows (more than any draft length). */
#define SAMPLER_MAX_ROLLBACK 64

typedef struct sampler_params {
    float temperature;       /* <= 0: greedy; must be finite. default 0.8 */
    int top_k;               /* 0 = off; >= 0. default 40 */
    float top_p;             /* 1 = off; in (0, 1]. default 0.95 */
    float min_p;             /* 0 = off; in [0, 1]. default 0.05 */
    float repeat_penalty;    /* 1 = off; > 0. default 1.0 */
    int repeat_last_n;       /* tokens of history (prompt + generated) the repeat penalty
                                sees; 0 = none, -1 = all. default 64 */
    float frequency_penalty; /* 0 = off; in [-2, 2]. default 0 */
    float presence_penalty;  /* 0 = off; in [-2, 2]. default 0 */
    int freq_last_n;         /* generated tokens frequency/presence count over;
                                0 = none, -1 = all generated (OpenAI). default -1 */
    uint64_t seed;           /* SAMPLER_SEED_DEFAULT, SAMPLER_SEED_RANDOM, or any value */
    int n_logprobs;          /* 0 = off; 1..20: report the chosen token's logprob
                                and the top n_logprobs alternatives. default 0 */
} sampler_params;

typedef struct sample_logprob {
    int32_t id;
    float logprob; /* natural log of the model probability */
} sample_logprob;

typedef struct sample_result {
    int32_t token;   /* the chosen token id */
    float logprob;   /* its model log-probability; 0 when n_logprobs == 0 */
    int n_top;       /* entries filled in top[] (<= n_logprobs; only finite ones) */
    sample_logprob top[SAMPLER_MAX_LOGPROBS]; /* best first; ties to the lower id */
} sample_result;

typedef struct sampler sampler;

sampler_params sampler_params_default(void);
/* 0 if p is valid; else LLC_ERR_RANGE with one line naming the parameter. */
int sampler_params_check(const sampler_params *p, llc_err *err);

/* Validates p (as sampler_params_check) and creates a sampler with an empty history. */
int sampler_create(const sampler_params *p, sampler **out, llc_err *err);
void sampler_free(sampler *s);
/* A copy with the same params and history. stream 0: the same RNG state, so the
 * copy draws exactly what the original would. Any other stream: an RNG state
 * derived from (the original's state, stream) — distinct streams for parallel
 * samples / beams, reproducible for the same seed. The original is not changed. */
int sampler_clone(const sampler *s, uint64_t stream, sampler **out);
/* Replaces the params (e.g. a request changing its settings); the history is kept
 * and the RNG continues unless p->seed differs from the current params' seed, in
 * which case it is reseeded. */
int sampler_set_params(sampler *s, const sampler_params *p, llc_err *err);
const sampler_params *sampler_get_params(const sampler *s);
/* The seed actually in use (the drawn one for SAMPLER_SEED_RANDOM). */
uint64_t sampler_seed(const sampler *s);

/* Records prompt/context tokens: seen by the repeat penalty, not by
 * frequency/presence. Call with the prompt before the first sample, and with each
 * later user turn, as llama.cpp's penalty_last_n covers prompt + generated. */
int sampler_accept_prompt(sampler *s, const int32_t *tokens, int n);
/* Records one generated token (sampler_sample does not record what it returns).
 * Both return 0 or LLC_ERR_NOMEM; ids outside [0, n_vocab) are kept but ignored. */
int sampler_accept(sampler *s, int32_t token);
/* Takes back the last n generated tokens (draft tokens accepted to get the
 * penalties of later draft positions right, then rejected). They must be the latest
 * accepted tokens (no prompt tokens after them). Always works for
 * n <= SAMPLER_MAX_ROLLBACK while the windows stay as they were; LLC_ERR_RANGE if
 * the history can no longer tell (it keeps only window + SAMPLER_MAX_ROLLBACK). */
int sampler_rollback(sampler *s, int n);
/* Forgets the whole history (the RNG continues). */
void sampler_reset(sampler *s);

/* Runs the chain over logits[0..n_vocab) and returns the chosen token id (>= 0),
 * filling *out (may be NULL) with it and, if n_logprobs > 0, its log-probabilities.
 * Negative on error: LLC_ERR_RANGE if n_vocab < 1 or no token has a finite logit,
 * LLC_ERR_NOMEM. Does not write logits and does not record the token. */
int sampler_sample(sampler *s, const float *logits, int n_vocab, sample_result *out);
/* How many of the row's best entries (topk.h's order) the next sampler_sample
 * reads: 1 when greedy, top_k with top-k on; 0 when it needs the whole row
 * (top-k off, a penalty with tokens in its window, log-probabilities). */
int sampler_top_need(const sampler *s);
/* sampler_sample from the row's best entries alone (ids[0..n_top), vals, as
 * topk_row gives them; an id of -1 ends the list early): the same token, the
 * same draw, as sampler_sample on the whole row, when sampler_top_need(s) is
 * 1..n_top. LLC_ERR_RANGE when it is not (or no entry can be chosen). */
int sampler_sample_top(sampler *s, const int32_t *ids, const float *vals, int n_top, int n_vocab,
                       sample_result *out);

/* The final distribution the chain would sample from (after penalties, top-k,
 * temperature, top-p and min-p): probs_out[0..n_vocab) sums to 1 and is 0 outside
 * the kept set; one-hot at the argmax when greedy. Draws nothing from the RNG.
 * For speculative decoding: accept a draft token x with min(1, p(x)/q(x)). */
int sampler_probs(sampler *s, const float *logits, int n_vocab, float *probs_out);
/* Draws an index from probs[0..n) (non-negative weights, normalised here by their
 * sum; negative, NaN or infinite weights count as 0) with the sequence's RNG: one
 * uniform draw. LLC_ERR_RANGE if no weight is positive. For the residual
 * max(0, p - q) after a rejected draft token. */
int sampler_sample_from_probs(sampler *s, const float *probs, int n);
/* One uniform draw in [0, 1) from the sequence's RNG (the accept test above). */
double sampler_uniform(sampler *s);

/* The n best tokens of log_softmax(logits) (raw logits, no penalties), best first,
 * ties to the lower id; NaN counts as -inf and -inf tokens are not reported.
 * Returns how many were written (<= n), or LLC_ERR_RANGE if n_vocab < 1 or n < 0.
 * For beam search: candidates and their scores in one O(n_vocab) pass. */
int sampler_log_softmax_topn(const float *logits, int n_vocab, int n, int32_t *ids_out,
                             float *lp_out);

#endif
