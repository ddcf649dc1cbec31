/*
 * Herald before the fix of the in-doubt race (model/README.md, "Status"): an SMS attempt settled
 * in doubt (a timeout, a 5xx) was searched for at once on its retry instead of after the settle
 * margin. `npm run model-check` must fail on it: SPIN finds two SMS.
 */
#define SEARCH_AT_ONCE
#include "herald.pml"
