/* recurrent.c — recurrent ops of the CPU backend (recurrent.h). */
#include "kernels/cpu/recurrent.h"

#include <math.h>
#include <string.h>

typedef struct conv_job {
    const bk_batch *b;
    const float *x, *w, *bias;
    float *const *states;
    float *out;
    int channels, k;
    bool silu;
} conv_job;

/* One sequence: each row's window is the state's k-1 rows then the row itself. */
static void conv_seq(const conv_job *j, int s) {
    const int C = j->channels, K = j->k;
    float *st = j->states[s]; /* [K-1][C], oldest first */
    for (int r = j->b->seq_start[s]; r < j->b->seq_start[s + 1]; r++) {
        const float *xr = j->x + (size_t)r * C;
        float *o = j->out + (size_t)r * C;
        for (int c = 0; c < C; c++) {
            const float *wc = j->w + (size_t)c * K;
            float acc = 0.0f;
            for (int t = 0; t < K - 1; t++) acc += st[(size_t)t * C + c] * wc[t];
            acc += xr[c] * wc[K - 1];
            if (j->bias) acc += j->bias[c];
            if (j->silu) acc = acc / (1.0f + expf(-acc));
            o[c] = acc;
        }
        if (K > 1) { /* slide the window: drop the oldest row, append this one */
            memmove(st, st + C, (size_t)(K - 2) * C * sizeof *st);
            memcpy(st + (size_t)(K - 2) * C, xr, (size_t)C * sizeof *st);
        }
    }
}

static void conv_task(void *arg, int tid, int n_threads) {
    const conv_job *j = arg;
    for (int s = tid; s < j->b->n_seqs; s += n_threads) conv_seq(j, s);
}

void cpu_conv1d_state_run(cpu_pool *pool, const bk_batch *b, const float *x, int channels, const float *w, int k,
                          const float *bias, float *const *states, bool silu, float *out) {
    conv_job j = {.b = b, .x = x, .w = w, .bias = bias, .states = states, .out = out, .channels = channels,
                  .k = k, .silu = silu};
    if (b->n_seqs == 1) conv_task(&j, 0, 1);
    else cpu_pool_run(pool, conv_task, &j);
}
