/* recurrent.h — the CPU backend's recurrent ops (hybrid models): scalar
 * reference loops, each walking one sequence's rows in order with its carried
 * state (backend.h describes the ops). The sequences of a batch are split over
 * the worker pool; a sequence's arithmetic does not depend on the split. */
#ifndef LLC_CPU_RECURRENT_H
#define LLC_CPU_RECURRENT_H

#include <stdbool.h>

#include "kernels/backend.h"
#include "kernels/cpu/pool.h"

/* backend.h's conv1d_state over the sequences of b; w is [channels][k] F32,
 * bias [channels] or NULL. */
void cpu_conv1d_state_run(cpu_pool *pool, const bk_batch *b, const float *x, int channels, const float *w, int k,
                          const float *bias, float *const *states, bool silu, float *out);

/* backend.h's delta_net over the sequences of b (dt_bias, a: [n_v_heads]). */
void cpu_delta_net_run(cpu_pool *pool, const bk_batch *b, const float *qkv, const float *alpha, const float *beta,
                       const float *dt_bias, const float *a, float *const *states, const bk_delta *d, float *out);

/* backend.h's ssm_scan over the sequences of b (dt_bias, a, d: [n_heads]). */
void cpu_ssm_scan_run(cpu_pool *pool, const bk_batch *b, const float *xbc, const float *dt, const float *dt_bias,
                      const float *a, const float *d, float *const *states, const bk_ssm *g, float *out);

#endif
