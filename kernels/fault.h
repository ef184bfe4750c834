/* fault.h — fault injection for tests: makes a chosen backend allocation fail,
 * as running out of host or device memory would, so the paths that handle it
 * (an engine step whose activation buffers cannot grow) can be tested. Off
 * unless armed: by a test calling llc_fault_fail_alloc, or by the environment
 * (LLC_FAULT_ALLOC=N, armed by the engine once it is ready: see engine.h). */
#ifndef LLC_FAULT_H
#define LLC_FAULT_H

#include <stdbool.h>

/* The nth backend allocation from now (1 = the next one) fails, once; 0 disarms. */
void llc_fault_fail_alloc(int nth);
/* Arms llc_fault_fail_alloc from $LLC_FAULT_ALLOC when it is set to N >= 1. */
void llc_fault_arm_from_env(void);
/* Called by every backend's alloc: true when this allocation must fail. */
bool llc_fault_alloc_fails(void);
/* While on, every event-queue node the engine allocates fails (engine_client.c):
 * what a client receives when memory runs out mid-answer. */
void llc_fault_fail_events(bool on);
bool llc_fault_event_fails(void);
/* While on, the text of every token the engine streams cannot be kept
 * (engine_request.c): what a sample does when memory runs out for its text. */
void llc_fault_fail_text(bool on);
bool llc_fault_text_fails(void);

#endif
