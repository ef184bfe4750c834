/* spec_policy.h — how much one sequence speculates: the draft length it proposes
 * next and whether it pauses, from how its proposals fared. Apart from the
 * engine so the rule can be tested on its own.
 *
 * The acceptance rate is an exponential average (weight 0.3 per verify) that
 * starts from a prior of 0.5, so one unlucky first verify does not stop a good
 * draft. Below 0.25 the sequence decodes plainly for SPEC_PAUSE_STEPS steps and
 * then starts again from the prior; each further pause with nothing accepted in
 * between is twice as long, up to 4×, so a draft that never agrees costs little.
 * The next draft length is one more than the proposals accepted (two more after a
 * clean sweep), within [min, max]. */
#ifndef LLC_SPEC_POLICY_H
#define LLC_SPEC_POLICY_H

#define SPEC_PAUSE_STEPS 16

typedef struct spec_policy {
    int k;      /* proposals next time */
    float rate; /* running acceptance rate */
    int pause;  /* plain steps left before speculating again */
    int strikes; /* pauses since a proposal was last accepted */
} spec_policy;

void spec_policy_init(spec_policy *p, int draft_max);

/* Proposals for this step: 0 while paused (counting the pause down), else p->k. */
int spec_policy_budget(spec_policy *p);

/* After a verify of k proposals of which `accepted` were taken. */
void spec_policy_update(spec_policy *p, int k, int accepted, int draft_min, int draft_max);

#endif
