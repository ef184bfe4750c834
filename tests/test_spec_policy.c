/* test_spec_policy.c — the per-sequence speculation rule: the draft length follows
 * acceptance within [min, max]; one bad verify does not pause a sequence, a run of
 * them does, for SPEC_PAUSE_STEPS steps, after which it starts again; pauses with
 * nothing accepted in between grow to 4×. */
#include "engine/sched/spec_policy.h"
#include "tests/test.h"

static void test_length_follows_acceptance(void) {
    spec_policy p;
    spec_policy_init(&p, 8);
    CHECK(spec_policy_budget(&p) == 8);
    spec_policy_update(&p, 8, 3, 1, 8); /* 3 of 8: next time 4 */
    CHECK(p.k == 4);
    spec_policy_update(&p, 4, 4, 1, 8); /* all: two more */
    CHECK(p.k == 6);
    spec_policy_update(&p, 6, 6, 1, 8); /* capped at max */
    CHECK(p.k == 8);
    spec_policy_update(&p, 8, 0, 2, 8); /* floored at min */
    CHECK(p.k == 2);
    CHECK(spec_policy_budget(&p) == 2);
}

static void test_one_bad_verify_does_not_pause(void) {
    spec_policy p;
    spec_policy_init(&p, 8);
    spec_policy_update(&p, 8, 0, 1, 8); /* an unlucky first verify */
    CHECK(p.pause == 0);
    CHECK(spec_policy_budget(&p) == 1);
    spec_policy_update(&p, 1, 1, 1, 8);
    CHECK(p.pause == 0);
    CHECK(spec_policy_budget(&p) == 3);
}

static void test_failing_draft_pauses_then_retries(void) {
    spec_policy p;
    spec_policy_init(&p, 8);
    spec_policy_update(&p, 8, 0, 1, 8);
    spec_policy_update(&p, 1, 0, 1, 8); /* second miss: rate 0.245 */
    CHECK(p.pause == SPEC_PAUSE_STEPS);
    for (int i = 0; i < SPEC_PAUSE_STEPS; i++) CHECK(spec_policy_budget(&p) == 0);
    CHECK(spec_policy_budget(&p) == 1); /* tries again, from the prior */
    spec_policy_update(&p, 1, 0, 1, 8);
    CHECK(p.pause == 0);
    spec_policy_update(&p, 1, 0, 1, 8); /* still nothing: a pause twice as long */
    CHECK(p.pause == 2 * SPEC_PAUSE_STEPS);
    p.pause = 0;
    spec_policy_update(&p, 1, 0, 1, 8);
    spec_policy_update(&p, 1, 0, 1, 8);
    CHECK(p.pause == 4 * SPEC_PAUSE_STEPS); /* and no longer than 4x */
    p.pause = 0;
    spec_policy_update(&p, 1, 0, 1, 8);
    spec_policy_update(&p, 1, 0, 1, 8);
    CHECK(p.pause == 4 * SPEC_PAUSE_STEPS);
    p.pause = 0;
    spec_policy_update(&p, 1, 1, 1, 8); /* one accepted: back to the short pause */
    spec_policy_update(&p, 2, 0, 1, 8);
    spec_policy_update(&p, 1, 0, 1, 8);
    spec_policy_update(&p, 1, 0, 1, 8);
    CHECK(p.pause == SPEC_PAUSE_STEPS);
}

static void test_mostly_accepted_never_pauses(void) {
    spec_policy p;
    spec_policy_init(&p, 8);
    int paused = 0;
    for (int i = 0; i < 200; i++) {
        int k = spec_policy_budget(&p);
        if (k == 0) {
            paused++;
            continue;
        }
        spec_policy_update(&p, k, i % 4 == 3 ? 0 : k / 2 + 1, 1, 8); /* every 4th verify fails */
    }
    CHECK(paused == 0);
}

int main(void) {
    RUN(test_length_follows_acceptance);
    RUN(test_one_bad_verify_does_not_pause);
    RUN(test_failing_draft_pauses_then_retries);
    RUN(test_mostly_accepted_never_pauses);
    return t_summary();
}
