/*
 * A deliberately broken Herald: startSmsAttempt without its attempt-ID guard (the `eq` on
 * smsAttemptId), so two workers that both found no message for an attempt in doubt may both
 * start a new one and both hand an SMS to the provider. `npm run model-check` must fail on it.
 */
#define NO_ATTEMPT_GUARD
#include "herald.pml"
