/*
 * Herald's exactly-once fallback, as implemented: one notice, its guarded transitions, the
 * worker processes that run its steps (jobs and reconciler sweeps under the lease), and the
 * world around them (the clock, Postmark, Twilio, crashes, lease expiry, an API cancel, lost
 * content). model/README.md maps every part to the code and says what the bounds cover.
 *
 * Each `inline` named like a key of TRANSITIONS (src/notice/transitions.ts) is one run of
 * src/store/lua/transition-8.lua (createNotice-10.lua for `accept`): it checks the state and the
 * field guards, changes the state and appends the entry, as one atomic step.
 *
 * Atomic steps of the model (the reduction, argued in model/README.md): a step's reads (the
 * notice, its content, a provider search or status) and the guarded transition that follows
 * them are one atomic step when the transition's guards re-check what was read: a step of
 * another process in between either changes a guarded field (then the transition fails and the
 * step changes nothing, as if it had not run) or touches other variables (then it commutes).
 * A provider call and the transition that records its answer are never one step: the notice
 * may move on in between, and that is where the races are. A process may die before each of
 * its steps (CRASH) and between starting an SMS attempt and sending its request.
 */
#ifdef NO_ATTEMPT_GUARD
#define SPLIT_READS     /* the reduction relies on the guard: without it, the read is a step of its own */
#endif
#ifndef JOB_WORKERS
#define JOB_WORKERS 1   /* worker processes that run jobs (any step, any time) and reconciler sweeps */
#endif
#ifndef RECONCILERS
#define RECONCILERS 1   /* worker processes that run only reconciler sweeps (steps/drive.ts) */
#endif
#ifndef MAXCRASH
#define MAXCRASH 1      /* process deaths in all, each at any point of any step */
#endif
#ifndef MAXERR
#define MAXERR 1        /* provider faults in all: lost answers, lost requests, 429s, refusals, failed searches */
#endif
#define MAXATT (MAXCRASH + MAXERR + 1)  /* SMS attempts: each one after the first costs a crash or a fault */
#define MAXEMAIL 2                      /* email attempts (email duplicates are not a property) */

mtype = { accepted, email_sending, email_sent, email_delivered, sms_pending, sms_sending,
          sms_sent, sms_delivered, sms_failed, blocked, canceled, failed };
/* why the fallback is decided: the deadline, or early (a bounce, a refusal of the email) */
mtype = { deadline_elapsed, early };

mtype state;
mtype logged;          /* the state the log's latest marking entry records */

bool dl;               /* the deadline has passed (time only moves forward) */
bool contentGone;      /* the notice's content is gone (expired, purged, unreadable) */
bool confirmed;        /* Herald recorded a confirmed email delivery */
byte decisions;        /* fallback decisions recorded (decided or blocked) */
byte smsHanded;        /* SMS the provider accepted for this notice */
byte crashes;
byte errors;
byte lease;            /* the reconciler lease on the notice: 0 free, else the owner's number */

/* email channel: fields of the notice hash, and what Postmark holds */
byte eAtt;             /* email attemptId (0: none) */
bool eKnown;           /* providerMessageId recorded */
byte eMsg;             /* Postmark: 0 no message, 1 accepted, 2 delivered, 3 bounced */

/* SMS channel: fields of the notice hash, and what Twilio holds, per attempt */
byte sAtt;             /* SMS attemptId (0: none) */
bool sSettled, sInDoubt;
byte age[MAXATT + 1];  /* time since the attempt started: 0, 1 past the provider timeout, 2 past timeout + SETTLE_MARGIN_MS */
bool inAir[MAXATT + 1];/* the attempt's request has left and Twilio has not yet dealt with it */
bool acc[MAXATT + 1];  /* Twilio accepted (created) the attempt's message */
bool vis[MAXATT + 1];  /* Twilio's message list shows it (index lag until then) */

#define UNDECIDED(x) ((x) == accepted || (x) == email_sending || (x) == email_sent)
/* an entry that changes no state: the log grows, the model's state does not */
#define LOG skip
#define MOVE(to) state = to; logged = to; LOG

/* ---- the transitions, named as in TRANSITIONS ------------------------------------------ */

inline accept() { MOVE(accepted) }

inline startEmailAttempt(s, a, ok) {
  if
  :: state == s && (s == accepted || s == email_sending) && eAtt == a ->
     eAtt++; MOVE(email_sending); ok = 1
  :: else -> ok = 0
  fi
}
inline recordEmailAccepted(a) {
  if
  :: state == email_sending && eAtt == a -> eKnown = 1; MOVE(email_sent)
  :: else -> eKnown = 1; annotate()   /* accepted after the notice moved on: recorded late */
  fi
}
inline settleEmailAttempt(a) {
  if :: state == email_sending && eAtt == a -> LOG :: else -> skip fi
}
inline observeEmail() { LOG }
inline confirmEmailDelivered() { assert(UNDECIDED(state)); confirmed = 1; MOVE(email_delivered) }
inline cancelSmsForLateDelivery() {
  /* the SMS has not left Herald: no attempt was ever started */
  assert(state == sms_pending && sAtt == 0 && smsHanded == 0); confirmed = 1; MOVE(email_delivered)
}
inline decideFallback(reason) {
  assert(!confirmed);                          /* never a decision while the email is confirmed delivered */
  assert(reason != deadline_elapsed || dl);    /* never a decision on the deadline before it */
  decisions++; assert(decisions == 1);         /* at most one decision */
  MOVE(sms_pending)
}
inline blockFallback(reason) {
  assert(!confirmed); assert(reason != deadline_elapsed || dl);
  decisions++; assert(decisions == 1);
  MOVE(blocked)
}
inline startSmsAttempt(s, a, ok) {
  if
#ifdef NO_ATTEMPT_GUARD
  :: state == s && (s == sms_pending || s == sms_sending) ->
#else
  :: state == s && (s == sms_pending || s == sms_sending) && sAtt == a ->
#endif
     assert(sAtt < MAXATT);                   /* the bound never cuts a behaviour off */
     sAtt++; a = sAtt; sSettled = 0; sInDoubt = 1; MOVE(sms_sending); ok = 1
  :: else -> ok = 0
  fi
}
inline recordSmsAccepted(a) {
  if
  :: state == sms_sending && sAtt == a -> sSettled = 1; sInDoubt = 0; MOVE(sms_sent)
  :: else -> annotate()   /* accepted after another attempt started: recorded late */
  fi
}
inline settleSmsAttempt(a, doubt) {
  if :: state == sms_sending && sAtt == a -> sSettled = 1; sInDoubt = doubt; LOG :: else -> skip fi
}
/* The search for an SMS in doubt ended unanswered at its bound (a provider that cannot tell, as
   AWS SMS's feed): nothing sent, nothing searched any more. Not taken in this model, whose
   Twilio list answers once the settle margin has passed and whose failed searches stop after
   MAXERR faults: no search is still failing at the bound. It sends nothing, so it cannot break
   the at-most-one-SMS assertion. */
inline leaveSmsInDoubt(a) {
  if :: state == sms_sending && sAtt == a -> sSettled = 1; sInDoubt = 1; LOG :: else -> skip fi
}
inline rejectSms(a) {
  if :: state == sms_sending && sAtt == a -> sSettled = 1; sInDoubt = 0; MOVE(sms_failed) :: else -> skip fi
}
inline observeSms() { LOG }
inline confirmSmsDelivered() { MOVE(sms_delivered) }
inline failSms() { MOVE(sms_failed) }
inline cancel() { MOVE(canceled) }
inline fail(s, a, sms) {
  if
  :: state == s && (s == accepted || s == email_sending || s == sms_pending || s == sms_sending) &&
     ((sms && sAtt == a) || (!sms && eAtt == a)) -> MOVE(failed)
  :: else -> skip
  fi
}
inline annotate() { LOG }

/* ---- the steps (src/notice/steps/*.ts) and the processes that run them ------------------ */

/* Locals hold nothing between steps: every step starts from the notice alone. */
#define RESET s = 0; reason = 0; a = 0; p = 0; ok = 0; final = 0; d = 0
/* The step is over: a sweep releases its lease, a job's process takes its next job. */
#define END_STEP if :: rec -> RESET; goto release :: else -> RESET; goto end_idle fi
/* The process dies here: its lease stays until it expires; its job, or a sweep, runs again. */
#define CRASH :: crashes < MAXCRASH -> crashes++; rec = 0; RESET; goto end_idle

#ifndef SEARCH_AT_ONCE
/* An attempt in flight or in doubt: retry at settleBy (send.ts, the code since the race found) */
#define WAITS ((!sSettled || sInDoubt) && age[sAtt] < 2)
#else
/* The code before: only an attempt never settled waited; SPIN finds two SMS (model/README.md) */
#define WAITS (!sSettled && age[sAtt] < 2)
#endif
#define SMS_SEND_READY (state == sms_pending || (state == sms_sending && !WAITS))

/* sendEmail (steps/send.ts): the notice read; from email_sending the search by Herald's key
   (it may miss a message: email duplicates are not a property); the content read;
   startEmailAttempt; the call to Postmark. Its answer is recorded in a later step. */
inline sendEmail() {
  s = state; a = eAtt;
  if
  :: s == accepted -> reason = early; decide()          /* emailPolicy suppressed or no consent: the fallback at once */
  :: s == email_sending && eMsg != 0 -> recordEmailAccepted(a); END_STEP     /* found */
  :: contentGone -> fail(s, a, 0); END_STEP                                  /* contentUnavailable */
  :: !contentGone && eAtt >= MAXEMAIL -> END_STEP                            /* the bound */
  :: !contentGone && eAtt < MAXEMAIL ->
     startEmailAttempt(s, a, ok);
     if :: !ok -> END_STEP :: else -> a = eAtt; s = 0 fi;
     if                                                    /* the call to Postmark */
     :: eMsg == 0 -> eMsg = 1; ok = 1                     /* accepted */
     :: eMsg != 0 -> ok = 1                               /* a second copy: accepted too */
     :: ok = 0                                            /* timeout / 5xx, nothing sent */
     :: eMsg == 0 -> eMsg = 1; ok = 0                     /* accepted, answer lost */
     :: eMsg == 0 -> p = 3; ok = 0                        /* refused (an inactive recipient) */
     fi;
     goto emailAnswer
  fi
}

/* runDeadline (steps/deadline.ts): never before the deadline; the last status read, then the
   decision. With no providerMessageId the read is an entry only, and the decision follows. */
inline runDeadline() {
  final = 1;
  if
  :: eKnown -> if :: p = eMsg :: p = 1 fi; goto observe  /* 1: not final yet, or the read failed */
  :: else -> observeEmail(); reason = deadline_elapsed; decide()
  fi
}

/* pollEmail (steps/observe.ts): a planned status check, from email_sent or, after the
   decision, from sms_pending while the SMS has not left. A read with nothing final is an entry. */
inline pollEmail() {
  if
  :: eMsg >= 2 -> p = eMsg; goto observe
  :: else -> observeEmail(); END_STEP
  fi
}

/* decideFallback (steps/decide.ts): the notice and the SMS policy read, then one transition
   guarded by the undecided states and, for the deadline, `reached: deadline`. */
inline decide() {
  if
  :: UNDECIDED(state) && (reason != deadline_elapsed || dl) ->
     if :: decideFallback(reason) :: blockFallback(reason) fi     /* the policy allows SMS, or not */
  :: else -> skip
  fi;
  END_STEP
}

/* sendSms (steps/send.ts): the notice read (a send that must wait until settleBy is not
   offered: it would only ask to be run again); past settleBy an attempt in flight or in doubt
   is searched for (content first); then the content read, startSmsAttempt and the request. */
inline sendSms() {
  s = state; a = sAtt; d = (s == sms_sending && (!sSettled || sInDoubt));
#ifdef SPLIT_READS
  goto smsRead       /* without the reduction: the notice read is a step of its own */
#else
  sendSmsAfterRead()
#endif
}
inline sendSmsAfterRead() {
  if
  :: d && contentGone -> fail(s, a, 1); END_STEP
  :: d && !contentGone && vis[a] -> recordSmsAccepted(a); END_STEP          /* found: resolvedBy provider_search */
  :: d && !contentGone && errors < MAXERR -> errors++; settleSmsAttempt(a, 1); END_STEP  /* the search failed */
  :: d && !contentGone && !vis[a] -> skip                                  /* nothing found: a new attempt */
  :: !d -> skip
  fi;
  smsStart()
}
inline smsStart() {
  if
  :: contentGone -> fail(s, a, 1); END_STEP
  :: else ->
     startSmsAttempt(s, a, ok);
     if :: !ok -> END_STEP :: else -> s = 0 fi;
     if
     :: inAir[a] = 1; goto smsAnswer                        /* the request leaves */
     CRASH                                                   /* the sender dies before it leaves */
     fi
  fi
}

/* pollSms (steps/observe.ts): the status read and its transition. */
inline pollSms() {
  if :: confirmSmsDelivered() :: failSms() :: observeSms() fi;
  END_STEP
}

/* drive (steps/drive.ts): the step the state needs; polls it only queues (jobs run them). A
   sweep leases only a notice whose step is overdue: one that waits (until settleBy, for its
   poll) is not, and a sweep with nothing to do would change nothing but the lease. */
#define DRIVE_HAS_WORK (UNDECIDED(state) && (dl || state != email_sent) || SMS_SEND_READY)
#define DRIVE \
  if \
  :: (state == accepted || state == email_sending) && !dl -> kind = 1 \
  :: UNDECIDED(state) && dl -> kind = 3 \
  :: SMS_SEND_READY -> kind = 4 \
  :: else -> RESET; goto release                          /* nothing to do now */ \
  fi

proctype Herald(byte me; bool jobs) {
  mtype s = 0, reason = 0;
  byte a = 0, p = 0, kind = 0;
  bool ok = 0, final = 0, rec = 0, d = 0;

end_idle:
  atomic {
    if
    /* a job of any queue, at any time: a duplicate, a rerun after a lost lock, one run late */
    :: jobs && (state == accepted || state == email_sending) -> kind = 1   /* email-send */
    :: jobs && (state == email_sent || (state == sms_pending && eKnown)) -> kind = 2   /* email-poll */
    :: jobs && UNDECIDED(state) && dl -> kind = 3                          /* deadline */
    :: jobs && SMS_SEND_READY -> kind = 4                                  /* sms-send */
    :: jobs && state == sms_sent -> kind = 5                               /* sms-poll */
    /* a reconciler sweep (reconciler.ts reconcileOnce): tryLease, then drive */
    :: lease == 0 && DRIVE_HAS_WORK -> lease = me; rec = 1; DRIVE
    fi;
    if
    :: kind == 1 -> kind = 0; sendEmail()
    :: kind == 2 -> kind = 0; pollEmail()
    :: kind == 3 -> kind = 0; runDeadline()
    :: kind == 4 -> kind = 0; sendSms()
    :: kind == 5 -> kind = 0; pollSms()
    fi
  }

emailAnswer:  /* Postmark's answer recorded (accepted), or the attempt settled (providerFailure) */
  atomic {
    if
    CRASH
    :: ok -> recordEmailAccepted(a); END_STEP
    :: !ok && p != 3 -> settleEmailAttempt(a); END_STEP
    :: !ok && p == 3 -> settleEmailAttempt(a); p = 0; reason = early; decide()   /* then decideFallback(email_rejected) */
    fi
  }

observe:      /* observeEmail (steps/observe.ts): the transition for the status read (p) */
  atomic {
    if
    CRASH
    :: UNDECIDED(state) && p == 2 -> confirmEmailDelivered(); END_STEP
    :: state == sms_pending && p == 2 -> cancelSmsForLateDelivery(); END_STEP
    :: UNDECIDED(state) && p == 3 -> observeEmail(); reason = early; decide()    /* bounced */
    :: UNDECIDED(state) && p == 1 && final -> observeEmail(); reason = deadline_elapsed; decide()
    :: !(UNDECIDED(state) && (p != 1 || final)) && !(state == sms_pending && p == 2) ->
       observeEmail(); END_STEP                             /* nothing final, or a late observation: an entry */
    fi
  }

smsAnswer:    /* Twilio's answer to the request of attempt a, and the transition for it */
  atomic {
    if
    CRASH                                                   /* dies with the request in the air, or before recording */
    :: acc[a] -> recordSmsAccepted(a)                       /* accepted */
    :: acc[a] && errors < MAXERR -> errors++; settleSmsAttempt(a, 1)   /* accepted, the answer lost (5xx, reset) */
    :: age[a] >= 1 -> settleSmsAttempt(a, 1)               /* the SDK's timeout: in doubt */
    :: !acc[a] && inAir[a] && errors < MAXERR -> errors++; inAir[a] = 0; settleSmsAttempt(a, 0)  /* 429: not processed */
    :: !acc[a] && inAir[a] && errors < MAXERR -> errors++; inAir[a] = 0; rejectSms(a)           /* refused (21610, invalid) */
    fi;
    END_STEP
  }

#ifdef SPLIT_READS
smsRead:      /* sendSms after its notice read (the model without the reduction only) */
  atomic { sendSmsAfterRead() }
#endif

release:      /* releaseLease (store/notices.ts, releaseLease-1.lua): DEL only if it still names this process, one step */
  atomic {
    if
    CRASH
    :: lease == me -> lease = 0
    :: else -> skip
    fi;
    rec = 0; RESET; goto end_idle
  }
}

/* The world: time, the providers, the API client, content loss. Each event one step. */
#define SMS_ATTEMPT(i) \
  :: i <= sAtt && age[i] < 2 && (i == 1 || age[i - 1] > age[i]) && (age[i] == 0 || !inAir[i]) -> \
     age[i]++; if :: age[i] == 2 -> vis[i] = acc[i] :: else -> skip fi \
  :: inAir[i] -> acc[i] = 1; inAir[i] = 0; smsHanded++; \
     assert(smsHanded <= 1)   /* never two SMS handed to the provider for one notice */ \
  :: inAir[i] && errors < MAXERR -> errors++; inAir[i] = 0   /* the request is lost */ \
  :: acc[i] && !vis[i] -> vis[i] = 1

active proctype World() {
end_world:
  do
  :: atomic { !dl -> dl = 1 }
  :: atomic { eMsg == 1 -> eMsg = 2 }          /* delivered: before, at or after the deadline */
  :: atomic { eMsg == 1 -> eMsg = 3 }          /* bounced */
  :: atomic { !contentGone -> contentGone = 1 }
  :: atomic { state == accepted -> cancel() }  /* POST /v1/notices/:id/cancel */
#if MAXATT == 2
  :: atomic { if SMS_ATTEMPT(1) SMS_ATTEMPT(2) fi }
#elif MAXATT == 3
  :: atomic { if SMS_ATTEMPT(1) SMS_ATTEMPT(2) SMS_ATTEMPT(3) fi }
#else
  :: atomic { if SMS_ATTEMPT(1) SMS_ATTEMPT(2) SMS_ATTEMPT(3) SMS_ATTEMPT(4) fi }
#endif
  od
}

/* A lease expires: its holder died, or stalls past leaseMs. */
active proctype Leases() {
end_leases:
  do :: atomic { lease != 0 -> lease = 0 } od
}

init {
  byte i = 0;
  atomic {
    accept();
    do
    :: i < JOB_WORKERS -> i++; run Herald(i, 1)
    :: i >= JOB_WORKERS && i < JOB_WORKERS + RECONCILERS -> i++; run Herald(i, 0)
    :: else -> break
    od;
    i = 0
  }
}

/* every state change has its log entry: the log's latest marking entry names the state */
ltl log_matches_state { [] (logged == state) }
/* every notice that needs an SMS gets one (weak fairness; crashes and faults are bounded) */
ltl sms_when_needed { [] ((state == sms_pending) -> <> (state == sms_sent || state == sms_delivered || state == email_delivered || state == sms_failed || state == failed)) }
