/* topk.h — the k best entries of a row of logits, the one definition the
 * backends' top_k ops and the sampler's log-probabilities share.
 *
 * "Best" is the sampler's order: larger value first, ties to the lower id. NaN
 * and -inf are left out (they can never be chosen), +inf counts as FLT_MAX (the
 * sampler's sanitizing), and -0.0 equals +0.0. The entries come out sorted in
 * that order, so the first j of the k best are the j best. */
#ifndef LLC_TOPK_H
#define LLC_TOPK_H

#include <stdint.h>

/* The most entries a backend's top_k op returns per row (the engine asks for
 * this many: enough for greedy and for the usual top-k of 40 or 50). */
#define TOPK_MAX 64

/* ids[0..k) and vals[0..k) = the k best entries of x[0..n) in order; where x has
 * fewer than k entries that can be chosen, the rest are id -1, value -inf.
 * Returns how many were found. k >= 1 (the backends' top_k ops take at most
 * TOPK_MAX; the sampler's log-probabilities and beams ask for their own n). */
int topk_row(const float *x, int n, int k, int32_t *ids, float *vals);

#endif
