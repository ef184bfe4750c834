/* beam.h — the bookkeeping of one beam search, apart from the model and the KV
 * cache: live beams with their cumulative log-probabilities, the candidates each
 * beam proposes once its logits are known, the selection of the next beams, and
 * the finished hypotheses ranked by length-normalized score.
 *
 * The engine maps live beam i to a sequence. When every live beam has set its
 * candidates, beam_advance picks the next live beams as (parent beam, token)
 * pairs; the engine continues the first child of a parent in the parent's own
 * sequence and forks the others (copy-on-write KV), and frees parents with no
 * child.
 *
 * Selection: all candidates (parent cumulative score + token log-prob) are ranked;
 * walking down the ranking, an end-of-generation token among the first `width`
 * ranks finishes a hypothesis, any other token opens a live beam until `width`
 * are open. A beam that reaches max_tokens finishes. The search ends when
 * `width` hypotheses are finished or no beam is live. Score of a finished
 * hypothesis = sum of log-probs / length (tokens including the end token). */
#ifndef LLC_BEAM_H
#define LLC_BEAM_H

#include <stdbool.h>
#include <stdint.h>

#define BEAM_MAX_WIDTH 16

typedef struct beam_search beam_search;

typedef struct beam_cand {
    int32_t token;
    float logp;   /* log-probability of token after this beam */
    bool eog;     /* the token ends generation */
} beam_cand;

/* One beam to start with (the prompt). width 1..BEAM_MAX_WIDTH, max_tokens >= 1. */
int beam_search_create(int width, int max_tokens, beam_search **out);
void beam_search_free(beam_search *b);

/* Candidates a live beam should propose (2 * width: enough to fill every slot
 * even when up to `width` of them end generation). */
int beam_n_candidates(const beam_search *b);
int beam_live(const beam_search *b);
/* Stores live beam i's candidates (best first, copied, at most
 * beam_n_candidates). 0 or LLC_ERR_RANGE. */
int beam_set_candidates(beam_search *b, int beam, const beam_cand *c, int n);
/* True when every live beam has its candidates. */
bool beam_ready(const beam_search *b);

/* Selects the next live beams: writes parent[k] (index of the live beam it
 * continues) and token[k] for k < return value (<= width), ordered by parent.
 * Returns the number of new live beams (0 when the search is over), or a
 * negative code. Requires beam_ready. */
int beam_advance(beam_search *b, int *parent, int32_t *token);
bool beam_done(const beam_search *b);
/* Ends the search now: live beams become hypotheses (as if cut at max_tokens). */
void beam_finish_now(beam_search *b);

/* Finished hypotheses, best first. tokens (owned by b) exclude the end token;
 * *ended_by_eog tells whether it had one. Returns LLC_ERR_RANGE past the end. */
int beam_n_results(const beam_search *b);
int beam_result(const beam_search *b, int rank, const int32_t **tokens, int *n_tokens,
                double *score, bool *ended_by_eog);
/* Tokens generated so far by live beam i (for the engine's own checks). */
int beam_live_len(const beam_search *b, int beam);

#endif
