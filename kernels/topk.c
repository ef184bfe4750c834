/* topk.c — topk_row: a heap of the k best in one pass over the row, then sorted. */
#include "kernels/topk.h"

#include <float.h>
#include <math.h>

#include "kernels/common.h"

static inline float sanitized(float v) { return v == INFINITY ? FLT_MAX : v; }

/* a better than b: larger value, ties to the lower id */
static inline int better(float va, int32_t ia, float vb, int32_t ib) { return va > vb || (va == vb && ia < ib); }

static void swap_at(int32_t *ids, float *vals, int i, int j) {
    const int32_t ti = ids[i];
    const float tv = vals[i];
    ids[i] = ids[j], vals[i] = vals[j];
    ids[j] = ti, vals[j] = tv;
}

/* min-heap by "better": the root is the worst kept entry */
static void sift_down(int32_t *ids, float *vals, int n, int i) {
    for (;;) {
        int w = i;
        const int l = 2 * i + 1, r = l + 1;
        if (l < n && better(vals[w], ids[w], vals[l], ids[l])) w = l;
        if (r < n && better(vals[w], ids[w], vals[r], ids[r])) w = r;
        if (w == i) return;
        swap_at(ids, vals, i, w);
        i = w;
    }
}

int topk_row(const float *x, int n, int k, int32_t *ids, float *vals) {
    LLC_ASSERT(k >= 1);
    int nk = 0;
    for (int i = 0; i < n; i++) {
        const float v = x[i];
        if (!(v > -INFINITY)) continue; /* NaN, -inf */
        if (nk < k) { /* sift up */
            int j = nk++;
            ids[j] = i, vals[j] = sanitized(v);
            while (j > 0 && better(vals[(j - 1) / 2], ids[(j - 1) / 2], vals[j], ids[j])) {
                swap_at(ids, vals, j, (j - 1) / 2);
                j = (j - 1) / 2;
            }
        } else if (sanitized(v) > vals[0]) { /* (a later id never wins a tie) */
            ids[0] = i, vals[0] = sanitized(v);
            sift_down(ids, vals, nk, 0);
        }
    }
    /* heap sort: the worst goes to the end each time, so the row ends best first */
    for (int end = nk - 1; end > 0; end--) {
        swap_at(ids, vals, 0, end);
        sift_down(ids, vals, end, 0);
    }
    for (int j = nk; j < k; j++) ids[j] = -1, vals[j] = -INFINITY;
    return nk;
}
