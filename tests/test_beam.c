/* test_beam.c — the beam selection rule on hand-made candidates: ranking by
 * cumulative log-prob, end tokens finishing hypotheses only within the first
 * `width` ranks, the length limit, length-normalized results, width 1 = greedy. */
#include "engine/sched/beam.h"
#include "kernels/common.h"
#include "tests/test.h"

enum { EOG = 2 };

static beam_cand C(int32_t tok, float lp) { return (beam_cand){tok, lp, tok == EOG}; }

static void test_two_beams_by_hand(void) {
    beam_search *b;
    CHECK(beam_search_create(2, 10, &b) == 0);
    CHECK(beam_live(b) == 1 && beam_n_candidates(b) == 4 && !beam_ready(b));
    beam_cand c0[] = {C(10, -0.1f), C(11, -0.5f), C(EOG, -1.0f), C(12, -2.0f)};
    CHECK(beam_set_candidates(b, 0, c0, 4) == 0 && beam_ready(b));
    int parent[16];
    int32_t tok[16];
    /* the end token is rank 2 of width 2: not taken */
    CHECK(beam_advance(b, parent, tok) == 2);
    CHECK(parent[0] == 0 && tok[0] == 10 && parent[1] == 0 && tok[1] == 11);
    CHECK(beam_n_results(b) == 0 && beam_live_len(b, 0) == 1);
    /* beam 0 = [10] (-0.1), beam 1 = [11] (-0.5) */
    beam_cand a[] = {C(EOG, -0.2f), C(20, -0.3f), C(21, -3.0f)};
    beam_cand c[] = {C(30, -0.05f), C(31, -0.9f)};
    CHECK(beam_set_candidates(b, 1, c, 2) == 0 && !beam_ready(b));
    CHECK(beam_set_candidates(b, 0, a, 3) == 0 && beam_ready(b));
    /* totals: [10,EOG] -0.3 (rank 0: finishes), [10,20] -0.4, [11,30] -0.55 */
    CHECK(beam_advance(b, parent, tok) == 2);
    CHECK(parent[0] == 0 && tok[0] == 20 && parent[1] == 1 && tok[1] == 30);
    CHECK(beam_n_results(b) == 1);
    const int32_t *t;
    int n;
    double score;
    bool eog;
    CHECK(beam_result(b, 0, &t, &n, &score, &eog) == 0);
    CHECK(n == 1 && t[0] == 10 && eog);
    CHECK_NEAR(score, -0.3 / 2, 1e-6);
    /* both beams end: [10,20,EOG] = -0.5/3, [11,30,EOG] = -0.65/3 */
    beam_cand e0[] = {C(EOG, -0.1f), C(40, -5.0f)};
    beam_cand e1[] = {C(EOG, -0.1f), C(41, -6.0f)};
    beam_set_candidates(b, 0, e0, 2);
    beam_set_candidates(b, 1, e1, 2);
    CHECK(beam_advance(b, parent, tok) == 0);
    CHECK(beam_done(b) && beam_live(b) == 0 && beam_n_results(b) == 2);
    /* best two of three, best first: -0.15, -0.1667 */
    beam_result(b, 0, &t, &n, &score, &eog);
    CHECK(n == 1 && t[0] == 10);
    beam_result(b, 1, &t, &n, &score, &eog);
    CHECK(n == 2 && t[0] == 10 && t[1] == 20 && eog);
    CHECK_NEAR(score, -0.5 / 3, 1e-6);
    CHECK(beam_result(b, 2, &t, &n, &score, &eog) == LLC_ERR_RANGE);
    beam_search_free(b);
}

static void test_length_limit(void) {
    beam_search *b;
    CHECK(beam_search_create(3, 2, &b) == 0);
    beam_cand c0[] = {C(5, -1.0f), C(6, -1.5f), C(7, -2.0f), C(8, -9.0f)};
    beam_set_candidates(b, 0, c0, 4);
    int parent[16];
    int32_t tok[16];
    CHECK(beam_advance(b, parent, tok) == 3);
    beam_cand x[] = {C(9, -0.1f), C(EOG, -0.2f)};
    for (int i = 0; i < 3; i++) beam_set_candidates(b, i, x, 2);
    /* every continuation reaches max_tokens: the best three finish, search over */
    CHECK(beam_advance(b, parent, tok) == 0 && beam_done(b));
    CHECK(beam_n_results(b) == 3);
    const int32_t *t;
    int n;
    double s0, s1;
    bool eog;
    beam_result(b, 0, &t, &n, &s0, &eog);
    CHECK(n == 2 && t[0] == 5 && t[1] == 9 && !eog);
    CHECK_NEAR(s0, -1.1 / 2, 1e-6);
    beam_result(b, 1, &t, &n, &s1, &eog);
    CHECK(n == 1 && t[0] == 5 && eog && s1 <= s0);
    beam_search_free(b);
}

static void test_width_one_is_greedy(void) {
    beam_search *b;
    CHECK(beam_search_create(1, 100, &b) == 0);
    int parent[16];
    int32_t tok[16];
    int32_t want[] = {7, 3, 9};
    for (int step = 0; step < 3; step++) {
        beam_cand c[] = {C(want[step], -0.5f), C(EOG, -0.6f)};
        beam_set_candidates(b, 0, c, 2);
        CHECK(beam_advance(b, parent, tok) == 1 && tok[0] == want[step] && parent[0] == 0);
    }
    beam_cand end[] = {C(EOG, -0.1f), C(4, -2.0f)};
    beam_set_candidates(b, 0, end, 2);
    CHECK(beam_advance(b, parent, tok) == 0 && beam_n_results(b) == 1);
    const int32_t *t;
    int n;
    beam_result(b, 0, &t, &n, NULL, NULL);
    CHECK(n == 3 && !memcmp(t, want, sizeof want));
    beam_search_free(b);
}

static void test_finish_now_and_misuse(void) {
    beam_search *b;
    CHECK(beam_search_create(0, 5, &b) == LLC_ERR_RANGE);
    CHECK(beam_search_create(BEAM_MAX_WIDTH + 1, 5, &b) == LLC_ERR_RANGE);
    CHECK(beam_search_create(2, 0, &b) == LLC_ERR_RANGE);
    CHECK(beam_search_create(2, 5, &b) == 0);
    int parent[16];
    int32_t tok[16];
    CHECK(beam_advance(b, parent, tok) == LLC_ERR_RANGE); /* not ready */
    beam_cand c[] = {C(5, -1.0f), C(6, -2.0f)};
    CHECK(beam_set_candidates(b, 1, c, 2) == LLC_ERR_RANGE);
    CHECK(beam_set_candidates(b, 0, c, 5) == LLC_ERR_RANGE);
    beam_set_candidates(b, 0, c, 2);
    CHECK(beam_advance(b, parent, tok) == 2);
    beam_finish_now(b);
    CHECK(beam_done(b) && beam_n_results(b) == 2);
    const int32_t *t;
    int n;
    double score;
    beam_result(b, 0, &t, &n, &score, NULL);
    CHECK(n == 1 && t[0] == 5);
    CHECK_NEAR(score, -1.0, 1e-6);
    beam_search_free(b);
    beam_search_free(NULL);
}

int main(void) {
    RUN(test_two_beams_by_hand);
    RUN(test_length_limit);
    RUN(test_width_one_is_greedy);
    RUN(test_finish_now_and_misuse);
    return t_summary();
}
