/*
 * Herald's exactly-once fallback, as implemented: one notice, its guarded transitions, the
 * workers and reconcilers that run its steps, and the world around them (the clock, the
 * providers, crashes, lease expiry, an API cancel, lost content).
 *
 * Each `inline` named like a key of TRANSITIONS (src/notice/transitions.ts) is one run of
 * src/store/lua/transition-6.lua (or createNotice-9.lua for `accept`): one atomic step that
 * checks the state and field guards, changes the state and appends the log entry. Everything
 * else a step does (reading the notice, calling a provider) is a separate step, and a process
 * may die between any two of them (CRASH). See model/README.md for the mapping.
 *
 * Bounds (change them here; model/README.md says what they cover):
 */
#ifndef JOB_WORKERS
#define JOB_WORKERS 1   /* processes running jobs: any step, any time, again and again */
#endif
#ifndef RECONCILERS
#define RECONCILERS 1   /* processes running reconciler sweeps under the lease */
#endif
#ifndef MAXCRASH
#define MAXCRASH 1      /* process deaths, at any point of any step */
#endif
#ifndef MAXERR
#define MAXERR 1        /* provider faults: lost answers, lost requests, 429s, refusals */
#endif
#define MAXATT (MAXCRASH + MAXERR + 1)  /* SMS attempts: each extra one costs a crash or a fault */

mtype = { accepted, email_sending, email_sent, email_delivered, sms_pending, sms_sending,
          sms_sent, sms_delivered, sms_failed, blocked, canceled, failed };
/* what a step was asked to do (a job of some queue, or the reconciler's drive) */
mtype = { EMAIL_SEND, EMAIL_POLL, DEADLINE, SMS_SEND, SMS_POLL };
/* why the fallback is decided */
mtype = { deadline_elapsed, bounced };

mtype state;
mtype logged;          /* the state the log's latest marking entry records */

bool dl;               /* the deadline has passed (time only moves forward) */
bool contentGone;      /* the notice's content is gone (purged, lost, unreadable) */
bool apiCanceled;      /* the API client sent its cancel */
bool confirmed;        /* Herald recorded a confirmed email delivery */
byte decisions;        /* fallback decisions recorded (decided or blocked) */
byte smsHanded;        /* SMS the provider accepted for this notice */
byte crashes;
byte errors;
byte lease;            /* reconciler lease: 0 free, else the owner's pid + 1 */

/* email channel: fields of the notice hash, and what Postmark holds */
byte eAtt;             /* email attemptId (0: none) */
bool eSettled, eKnown; /* eKnown: providerMessageId recorded */
byte eMsg;             /* Postmark: 0 no message, 1 accepted, 2 delivered, 3 bounced */

/* SMS channel: fields of the notice hash, and what Twilio holds, per attempt */
byte sAtt;             /* SMS attemptId (0: none) */
bool sSettled, sInDoubt;
byte age[MAXATT + 1];  /* 0 just started, 1 past the provider timeout, 2 past timeout + SETTLE_MARGIN */
bool inAir[MAXATT + 1];/* the attempt's request has left and the provider has not yet dealt with it */
bool acc[MAXATT + 1];  /* the provider accepted (created) the attempt's message */
bool vis[MAXATT + 1];  /* the provider's message list shows it (index lag until then) */

#define UNDECIDED(s) ((s) == accepted || (s) == email_sending || (s) == email_sent)
/* an entry that changes no state: the log grows, the model's state does not */
#define LOG skip
#define MOVE(to) state = to; logged = to; LOG
#define CRASH if :: crashes < MAXCRASH -> crashes++; goto crashed :: true -> skip fi

/* ---- the transitions, named as in TRANSITIONS ------------------------------------------ */

inline accept() { MOVE(accepted) }

inline startEmailAttempt(s, a, ok) {
  atomic {
    if
    :: state == s && (s == accepted || s == email_sending) && eAtt == a && eAtt < 2 ->
       eAtt++; eSettled = 0; MOVE(email_sending); ok = 1
    :: else -> ok = 0
    fi
  }
}
inline recordEmailAccepted(a) {
  atomic {
    if
    :: state == email_sending && eAtt == a -> eSettled = 1; eKnown = 1; MOVE(email_sent)
    :: else -> eKnown = 1; annotate()   /* accepted after the notice moved on: recorded late */
    fi
  }
}
inline settleEmailAttempt(a) {
  atomic { if :: state == email_sending && eAtt == a -> eSettled = 1; LOG :: else -> skip fi }
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
  atomic {
    if
#ifdef NO_ATTEMPT_GUARD
    :: state == s && (s == sms_pending || s == sms_sending) ->
#else
    :: state == s && (s == sms_pending || s == sms_sending) && sAtt == a ->
#endif
       assert(sAtt < MAXATT);                   /* the bound never cuts a behaviour off */
       sAtt++; a = sAtt; sSettled = 0; sInDoubt = 1; age[a] = 0; MOVE(sms_sending); ok = 1;
       if :: inAir[a] = 1 :: crashes < MAXCRASH -> crashes++; ok = 0 fi   /* the request leaves, or its sender dies */
    :: else -> ok = 0
    fi
  }
}
inline recordSmsAccepted(a) {
  atomic {
    if
    :: state == sms_sending && sAtt == a -> sSettled = 1; sInDoubt = 0; MOVE(sms_sent)
    :: else -> annotate()
    fi
  }
}
inline settleSmsAttempt(a, doubt) {
  atomic { if :: state == sms_sending && sAtt == a -> sSettled = 1; sInDoubt = doubt; LOG :: else -> skip fi }
}
inline rejectSms(a) {
  atomic { if :: state == sms_sending && sAtt == a -> sSettled = 1; sInDoubt = 0; MOVE(sms_failed) :: else -> skip fi }
}
inline observeSms() { LOG }
inline confirmSmsDelivered() { MOVE(sms_delivered) }
inline failSms() { MOVE(sms_failed) }
inline cancel() { MOVE(canceled) }
inline fail(s, a, sms) {
  atomic {
    if
    :: state == s && (s == accepted || s == email_sending || s == sms_pending || s == sms_sending) &&
       ((sms && sAtt == a) || (!sms && eAtt == a)) -> MOVE(failed)
    :: else -> skip
    fi
  }
}
inline annotate() { LOG }

/* ---- the steps (src/notice/steps/*.ts), run by jobs and by the reconciler's drive ------- */

proctype Herald(bool reconciler) {
  mtype s, kind, reason;
  byte a, p;
  bool set, doubt, ok, final, isSms, found, allowed;

top:
  /* a step starts from nothing but the notice: no local survives it */
  atomic { s = 0; kind = 0; reason = 0; a = 0; p = 0; set = 0; doubt = 0; ok = 0; final = 0; isSms = 0; found = 0; allowed = 0 }
  if
  :: !reconciler ->
     /* a job of any queue, at any time, possibly a duplicate or a rerun after a lost lock */
     if :: kind = EMAIL_SEND :: kind = EMAIL_POLL :: kind = DEADLINE :: kind = SMS_SEND :: kind = SMS_POLL fi
  :: reconciler ->
     /* reconcileOnce: tryLease, then drive (steps/drive.ts) by the state read */
     atomic { lease == 0 -> lease = _pid + 1 }
     atomic {
       s = state;
       if
       :: s == accepted || s == email_sending -> kind = (dl -> DEADLINE : EMAIL_SEND)
       :: s == email_sent -> kind = (dl -> DEADLINE : EMAIL_POLL)
       :: s == sms_pending || s == sms_sending -> kind = SMS_SEND
       :: s == sms_sent -> kind = SMS_POLL
       :: else -> kind = 0
       fi
     }
     if :: kind == 0 -> annotate(); goto finish :: else -> skip fi
  fi;
  if
  :: kind == EMAIL_SEND -> goto sendEmail
  :: kind == EMAIL_POLL -> goto pollEmail
  :: kind == DEADLINE -> goto runDeadline
  :: kind == SMS_SEND -> goto sendSms
  :: kind == SMS_POLL -> goto pollSms
  fi;

sendEmail:   /* steps/send.ts sendEmail */
  atomic { s = state; a = eAtt }
  if
  :: s == accepted -> goto emailStart
  :: s == email_sending ->
     /* past settleBy, or settled in doubt: the metadata search (email duplicates are not a
        property here, so the search may see the message or not) */
     if :: eMsg != 0 -> recordEmailAccepted(a); goto finish
        :: true -> skip fi;
     goto emailStart
  :: else -> goto finish
  fi;
emailStart:
  if :: contentGone -> isSms = 0; fail(s, a, isSms); goto finish :: else -> skip fi;
  startEmailAttempt(s, a, ok);
  if :: !ok -> goto finish :: else -> a = eAtt fi;
  /* a death on the email path only ends the step early, which the paths to finish cover */
  atomic {                                                          /* the call to Postmark */
    if
    :: eMsg == 0 -> eMsg = 1; ok = 1                                /* accepted */
    :: eMsg != 0 -> ok = 1                                          /* a second copy: accepted too */
    :: ok = 0                                                       /* timeout / 5xx, sent or not */
    :: eMsg == 0 -> eMsg = 1; ok = 0                                /* accepted, answer lost */
    fi
  }
  if :: ok -> recordEmailAccepted(a) :: else -> settleEmailAttempt(a) fi;
  goto finish;

pollEmail:   /* steps/observe.ts pollEmail */
  atomic { s = state }
  if :: s == email_sent || (s == sms_pending && eKnown) -> skip :: else -> goto finish fi;
observe:     /* steps/observe.ts observeEmail: a provider read, then one transition */
  if
  :: p = eMsg
  :: p = 0; observeEmail(); goto afterObserve                      /* provider.error */
  fi;
  atomic {
    /* the transition is tried against the state as it is now (the race loop re-reads it) */
    s = state;
    if
    :: UNDECIDED(s) && p == 2 -> confirmEmailDelivered()
    :: s == sms_pending && p == 2 -> cancelSmsForLateDelivery()
    :: else -> observeEmail()
    fi
  }
  if :: UNDECIDED(s) && p == 3 -> reason = bounced; goto decide :: else -> skip fi;
afterObserve:
  if :: final -> reason = deadline_elapsed; goto decide :: else -> goto finish fi;

runDeadline: /* steps/deadline.ts runDeadline */
  atomic { s = state }
  if :: UNDECIDED(s) && dl -> skip :: else -> goto finish fi;       /* early: retry at the deadline */
  final = 1;
  if
  :: eKnown -> goto observe
  :: else -> atomic { if :: UNDECIDED(state) -> observeEmail() :: else -> skip fi }
  fi;
  reason = deadline_elapsed;

decide:      /* steps/decide.ts decideFallback */
  CRASH;
  atomic { s = state }
  if :: UNDECIDED(s) && (reason != deadline_elapsed || dl) -> skip :: else -> goto finish fi;
  if :: allowed = 1 :: allowed = 0 fi;                                /* the SMS policy read */
  CRASH;
  atomic {
    if
    :: UNDECIDED(state) && (reason != deadline_elapsed || dl) ->    /* from + `reached: deadline` */
       if :: allowed -> decideFallback(reason) :: else -> blockFallback(reason) fi
    :: else -> skip
    fi
  }
  goto finish;

sendSms:     /* steps/send.ts sendSms */
  atomic { s = state; a = sAtt; set = sSettled; doubt = sInDoubt }
  if
  :: s == sms_pending -> goto smsStart
  :: s == sms_sending -> skip
  :: else -> goto finish
  fi;
#ifndef SEARCH_AT_ONCE
  /* in flight or in doubt: retry at settleBy (the code since the race below was found) */
  if :: (!set || doubt) && age[a] < 2 -> goto finish :: else -> skip fi;
#else
  /* the code before: only an attempt never settled waited; SPIN finds two SMS (model/README.md) */
  if :: !set && age[a] < 2 -> goto finish :: else -> skip fi;
#endif
  if
  :: !set || doubt ->
     if :: contentGone -> isSms = 1; fail(s, a, isSms); goto finish :: else -> skip fi;
     CRASH;
     /* listing messages to the number since the attempt started: sees what is indexed */
     atomic { found = vis[1] || vis[2] || vis[3] || vis[MAXATT] }
     if :: found -> goto smsRecord :: else -> skip fi
  :: else -> skip
  fi;
smsStart:
  if :: contentGone -> isSms = 1; fail(s, a, isSms); goto finish :: else -> skip fi;
  /* The start and the request leaving are one step of the model: assumed, the request leaves
     before the attempt's provider timeout has run out (no stall of that length in between).
     A death in between leaves an attempt that sent nothing. */
  startSmsAttempt(s, a, ok);
  if :: !ok -> goto finish :: else -> skip fi;
  CRASH;                                                            /* while it is in the air */
  if
  :: acc[a] -> skip                                                 /* Twilio answers: accepted */
  :: acc[a] && errors < MAXERR -> errors++; settleSmsAttempt(a, 1); goto finish  /* answer lost */
  :: age[a] >= 1 -> settleSmsAttempt(a, 1); goto finish             /* the SDK's timeout */
  :: atomic { !acc[a] && inAir[a] && errors < MAXERR -> errors++; inAir[a] = 0 };
     settleSmsAttempt(a, 0); goto finish                            /* 429: not processed */
  :: atomic { !acc[a] && inAir[a] && errors < MAXERR -> errors++; inAir[a] = 0 };
     rejectSms(a); goto finish                                      /* refused (21610, invalid) */
  fi;
smsRecord:
  CRASH;
  recordSmsAccepted(a);
  goto finish;

pollSms:     /* steps/observe.ts pollSms */
  atomic { s = state }
  if :: s == sms_sent -> skip :: else -> goto finish fi;
  atomic {
    if
    :: state == sms_sent ->
       if :: confirmSmsDelivered() :: failSms() :: observeSms() fi
    :: else -> skip
    fi
  }
  goto finish;

finish:
  if
  :: reconciler ->
     /* recordRepair (notice.reconciled, an annotate) changes no state; then releaseLease */
     atomic { if :: lease == _pid + 1 -> lease = 0 :: else -> skip fi }
  :: else -> skip
  fi;
  goto top;

crashed:
  /* the process is gone; its lease stays until it expires, its job runs again */
  goto top
}

/* The world: time, the providers, lease expiry, the API client, content loss. */
#define SMS_ATTEMPT(i) \
  :: i <= sAtt && age[i] == 0 -> age[i] = 1 \
  :: inAir[i] && age[i] < 2 -> acc[i] = 1; inAir[i] = 0; smsHanded++; \
     assert(smsHanded <= 1)   /* never two SMS handed to the provider for one notice */ \
  :: inAir[i] && errors < MAXERR -> errors++; inAir[i] = 0 \
  :: acc[i] && !vis[i] -> vis[i] = 1 \
  :: age[i] == 1 && !inAir[i] -> age[i] = 2; vis[i] = acc[i]

active proctype World() {
  do
  :: atomic { !dl -> dl = 1 }
  :: atomic { eMsg == 1 -> eMsg = 2 }          /* delivered: before, at or after the deadline */
  :: atomic { eMsg == 1 -> eMsg = 3 }          /* bounced */
  :: atomic { lease != 0 -> lease = 0 }        /* the holder's lease expires */
  :: atomic { !contentGone -> contentGone = 1 }
  :: atomic { state == accepted && !apiCanceled -> apiCanceled = 1; cancel() }
  :: atomic { if SMS_ATTEMPT(1) SMS_ATTEMPT(2) SMS_ATTEMPT(3) fi }
  od
}

init {
  byte i = 0;
  atomic {
    accept();
    do
    :: i < JOB_WORKERS -> run Herald(0); i++
    :: i >= JOB_WORKERS && i < JOB_WORKERS + RECONCILERS -> run Herald(1); i++
    :: else -> break
    od
  }
}

#define ENDED (state == sms_sent || state == sms_delivered || state == sms_failed || \
               state == email_delivered || state == blocked || state == canceled || state == failed)

/* every state change has its log entry: the log's latest marking entry names the state */
ltl log_matches_state { [] (logged == state) }
/* every notice that needs an SMS gets one (weak fairness; crashes and faults are bounded) */
ltl sms_when_needed { [] ((state == sms_pending) -> <> (state == sms_sent || state == sms_delivered || state == email_delivered || state == sms_failed || state == failed)) }
/* and every notice ends: delivered, or its SMS handed over, or blocked, canceled, failed */
ltl every_notice_ends { <> ENDED }
