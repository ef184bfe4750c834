/* spec_policy.c — the per-sequence speculation rule (see spec_policy.h). */
#include "engine/sched/spec_policy.h"

#define SPEC_PRIOR 0.5f
#define SPEC_WEIGHT 0.3f
#define SPEC_FLOOR 0.25f

void spec_policy_init(spec_policy *p, int draft_max) {
    p->k = draft_max;
    p->rate = SPEC_PRIOR;
    p->pause = 0;
    p->strikes = 0;
}

int spec_policy_budget(spec_policy *p) {
    if (p->pause > 0) {
        p->pause--;
        return 0;
    }
    return p->k;
}

void spec_policy_update(spec_policy *p, int k, int accepted, int draft_min, int draft_max) {
    if (k <= 0) return;
    p->rate = (1 - SPEC_WEIGHT) * p->rate + SPEC_WEIGHT * (float)accepted / (float)k;
    if (accepted > 0) p->strikes = 0;
    if (p->rate < SPEC_FLOOR) {
        p->pause = SPEC_PAUSE_STEPS << (p->strikes < 2 ? p->strikes : 2);
        p->strikes++;
        p->rate = SPEC_PRIOR;
    }
    int next = accepted == k ? k + 2 : accepted + 1;
    if (next < draft_min) next = draft_min;
    p->k = next > draft_max ? draft_max : next;
}
