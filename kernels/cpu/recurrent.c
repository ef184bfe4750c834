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

typedef struct delta_job {
    const bk_batch *b;
    const float *qkv, *alpha, *beta, *dt_bias, *a;
    float *const *states;
    const bk_delta *d;
    float *out;
} delta_job;

/* x / max(|x|, eps) * scale into out[n] */
static void l2_normed(const float *x, int n, float eps, float scale, float *out) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) sum += x[i] * x[i];
    const float norm = sqrtf(sum), inv = scale / (norm > eps ? norm : eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * inv;
}

/* One (sequence, value head): its rows in order through its state. */
static void delta_seq_head(const delta_job *j, int s, int h) {
    const bk_delta *d = j->d;
    const int dk = d->head_k, dv = d->head_v, nk = d->n_k_heads, nv = d->n_v_heads, kh = h % nk;
    const size_t row = (size_t)2 * nk * dk + (size_t)nv * dv;
    float *S = j->states[s] + (size_t)h * dv * dk; /* [dv][dk] */
    float q[256], k[256]; /* head_k <= 256 (checked at load) */
    const float q_scale = 1.0f / sqrtf((float)dk);
    for (int r = j->b->seq_start[s]; r < j->b->seq_start[s + 1]; r++) {
        const float *x = j->qkv + (size_t)r * row;
        l2_normed(x + (size_t)kh * dk, dk, d->eps, q_scale, q);
        l2_normed(x + (size_t)nk * dk + (size_t)kh * dk, dk, d->eps, 1.0f, k);
        const float *v = x + (size_t)2 * nk * dk + (size_t)h * dv;
        float sp = j->alpha[(size_t)r * nv + h] + j->dt_bias[h];
        sp = sp > 20.0f ? sp : log1pf(expf(sp)); /* softplus */
        const float decay = expf(sp * j->a[h]);
        const float beta = 1.0f / (1.0f + expf(-j->beta[(size_t)r * nv + h]));
        float *o = j->out + (size_t)r * nv * dv + (size_t)h * dv;
        for (int i = 0; i < dv; i++) {
            float *Si = S + (size_t)i * dk, sk = 0.0f;
            for (int t = 0; t < dk; t++) {
                Si[t] *= decay;
                sk += Si[t] * k[t];
            }
            const float delta = beta * (v[i] - sk);
            float oi = 0.0f;
            for (int t = 0; t < dk; t++) {
                Si[t] += delta * k[t];
                oi += Si[t] * q[t];
            }
            o[i] = oi;
        }
    }
}

static void delta_task(void *arg, int tid, int n_threads) {
    const delta_job *j = arg;
    const int nv = j->d->n_v_heads, n = j->b->n_seqs * nv;
    for (int i = tid; i < n; i += n_threads) delta_seq_head(j, i / nv, i % nv);
}

void cpu_delta_net_run(cpu_pool *pool, const bk_batch *b, const float *qkv, const float *alpha, const float *beta,
                       const float *dt_bias, const float *a, float *const *states, const bk_delta *d, float *out) {
    delta_job j = {.b = b, .qkv = qkv, .alpha = alpha, .beta = beta, .dt_bias = dt_bias, .a = a, .states = states,
                   .d = d, .out = out};
    cpu_pool_run(pool, delta_task, &j);
}

typedef struct ssm_job {
    const bk_batch *b;
    const float *xbc, *dt, *dt_bias, *a, *d;
    float *const *states;
    const bk_ssm *g;
    float *out;
} ssm_job;

/* One (sequence, head): its rows in order through its state. */
static void ssm_seq_head(const ssm_job *j, int s, int h) {
    const bk_ssm *g = j->g;
    const int P = g->head_dim, N = g->d_state, H = g->n_heads, G = g->n_groups, grp = h / (H / G);
    const size_t row = (size_t)H * P + (size_t)2 * G * N;
    float *S = j->states[s] + (size_t)h * P * N; /* [P][N] */
    for (int r = j->b->seq_start[s]; r < j->b->seq_start[s + 1]; r++) {
        const float *x = j->xbc + (size_t)r * row + (size_t)h * P;
        const float *B = j->xbc + (size_t)r * row + (size_t)H * P + (size_t)grp * N;
        const float *C = B + (size_t)G * N;
        float dt = j->dt[(size_t)r * H + h] + j->dt_bias[h];
        dt = dt > 20.0f ? dt : log1pf(expf(dt)); /* softplus */
        const float dA = expf(dt * j->a[h]);
        float *y = j->out + (size_t)r * H * P + (size_t)h * P;
        for (int i = 0; i < P; i++) {
            float *Si = S + (size_t)i * N, acc = 0.0f;
            const float xdt = x[i] * dt;
            for (int n = 0; n < N; n++) {
                Si[n] = Si[n] * dA + B[n] * xdt;
                acc += Si[n] * C[n];
            }
            y[i] = acc + j->d[h] * x[i];
        }
    }
}

static void ssm_task(void *arg, int tid, int n_threads) {
    const ssm_job *j = arg;
    const int H = j->g->n_heads, n = j->b->n_seqs * H;
    for (int i = tid; i < n; i += n_threads) ssm_seq_head(j, i / H, i % H);
}

void cpu_ssm_scan_run(cpu_pool *pool, const bk_batch *b, const float *xbc, const float *dt, const float *dt_bias,
                      const float *a, const float *d, float *const *states, const bk_ssm *g, float *out) {
    ssm_job j = {.b = b, .xbc = xbc, .dt = dt, .dt_bias = dt_bias, .a = a, .d = d, .states = states, .g = g,
                 .out = out};
    cpu_pool_run(pool, ssm_task, &j);
}
