/* elementwise.h — the CPU backend's element-wise ops over whole activation
 * buffers: SwiGLU's gate (silu(g)·u), GeGLU's (gelu(g)·u), the residual add and
 * scaling. Vectorized at the
 * matmul's SIMD level (AVX-512, AVX2+FMA, or plain C) and split over the pool
 * when the buffer is large; each element's arithmetic does not depend on the
 * split, so results do not depend on the thread count. */
#ifndef LLC_CPU_ELEMENTWISE_H
#define LLC_CPU_ELEMENTWISE_H

#include <stddef.h>

#include "kernels/cpu/pool.h"

/* gate[i] = gate[i] / (1 + e^-gate[i]) · up[i], i < n */
void cpu_silu_mul_run(cpu_pool *pool, float *gate, const float *up, size_t n);

/* gate[i] = gelu_tanh(gate[i]) · up[i], i < n (computed as x / (1 + e^(-2u))) */
void cpu_gelu_mul_run(cpu_pool *pool, float *gate, const float *up, size_t n);

/* gpt-oss's clamped SwiGLU (backend.h's swiglu_oai), one thread: its inputs are
 * the few rows routed to one expert */
void cpu_swiglu_oai_run(float *gate, const float *up, size_t n, float alpha, float limit);

/* x[i] *= s, i < n */
void cpu_scale_run(float *x, float s, size_t n);

/* x[i] += y[i], i < n */
void cpu_add_run(cpu_pool *pool, float *x, const float *y, size_t n);

#endif
