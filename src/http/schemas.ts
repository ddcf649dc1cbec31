import { Type, type Static, type TSchemaOptions, type TUnsafe } from 'typebox';
import { METADATA_LIMITS, METADATA_NAME } from '../notice/accept.js';
import { MAX_HORIZON_MS } from '../notice/planner.js';
import { FALLBACK_REASONS, STATES } from '../notice/states.js';

/** Recipient IDs become part of Redis keys: no braces (hash tags) and no spaces. */
const RecipientId = Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._:@-]+$' });
const MAX_HORIZON_SECONDS = MAX_HORIZON_MS / 1000;
/** An ISO 8601 date-time; how far ahead it may be is checked against the clock in acceptNotice. */
const DateTime = Type.String({ format: 'date-time', maxLength: 64 });

/**
 * `metadata`: at most 20 string fields, names of 1–64 characters from `[A-Za-z0-9_.:-]`, values
 * of at most 256. The names go through `propertyNames`, anchored at both ends, so that no
 * line terminator (`\n`, U+2028, U+2029) can slip past the pattern; TypeBox's `Record` would
 * turn the key schema into `patternProperties` and let every other name through.
 */
const Metadata = Type.Unsafe<Record<string, string>>({
  type: 'object',
  maxProperties: METADATA_LIMITS.fields,
  propertyNames: { type: 'string', pattern: METADATA_NAME.source, minLength: 1, maxLength: 64 },
  additionalProperties: { type: 'string', maxLength: METADATA_LIMITS.valueLength },
  description: 'At most 20 string fields; names of 1–64 characters from [A-Za-z0-9_.:-], values of at most 256 characters.',
});

const Region = Type.String({ pattern: '^([A-Z]{2}|\\*)$', description: 'ISO 3166-1 alpha-2 region code' });

export const CreateNoticeBody = Type.Object(
  {
    recipient: Type.Object(
      {
        id: RecipientId,
        email: Type.String({ format: 'email', maxLength: 254 }),
        phone: Type.Optional(Type.String({ maxLength: 32, description: 'E.164, e.g. +819012345678' })),
        region: Type.Optional(Region),
      },
      { additionalProperties: false },
    ),
    category: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9._-]+$' }),
    content: Type.Object(
      {
        subject: Type.String({ minLength: 1, maxLength: 998 }),
        text: Type.Optional(Type.String({ maxLength: 500_000 })),
        html: Type.Optional(Type.String({ maxLength: 500_000 })),
        sms: Type.Optional(Type.String({ minLength: 1, maxLength: 1600 })),
      },
      { additionalProperties: false },
    ),
    deadline: Type.Optional(DateTime),
    deadlineInSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_HORIZON_SECONDS })),
    complianceDeadline: Type.Optional(DateTime),
    policy: Type.Optional(
      Type.Object(
        {
          firstCheckAfterSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_HORIZON_SECONDS })),
          minCheckIntervalSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_HORIZON_SECONDS })),
        },
        { additionalProperties: false },
      ),
    ),
    metadata: Type.Optional(Metadata),
  },
  { additionalProperties: false },
);
export type CreateNoticeBody = Static<typeof CreateNoticeBody>;

export const NoticeParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
export type NoticeParams = Static<typeof NoticeParams>;

export const RecipientParams = Type.Object({ id: RecipientId });
export type RecipientParams = Static<typeof RecipientParams>;

export const RecipientPolicyBody = Type.Object(
  {
    consent: Type.Object({ email: Type.Boolean(), sms: Type.Boolean() }, { additionalProperties: false }),
    region: Type.Optional(Region),
  },
  { additionalProperties: false },
);
export type RecipientPolicyBody = Static<typeof RecipientPolicyBody>;

export const ErrorResponse = Type.Object({
  error: Type.Object({ code: Type.String(), message: Type.String(), details: Type.Optional(Type.Unknown()) }),
});

const Time = Type.String({ format: 'date-time' });
const NullableTime = Type.Union([Time, Type.Null()]);

export const AcceptedResponse = Type.Object({
  id: Type.String({ examples: ['ntc_0d00mx1l4t4jmyryn45sd718zk6o'] }),
  state: Type.Literal('accepted'),
  deadline: Time,
  plannedChecks: Type.Array(Time, { description: 'Planned email status checks; the last is the deadline itself.' }),
});

/**
 * One `const` per value, in an `anyOf`, typed as the union of the values: TypeBox resolves a
 * union's static type from a tuple of its members, and `values.map` makes an array of them.
 */
function literalUnion<Value extends string>(values: readonly Value[], options?: TSchemaOptions): TUnsafe<Value> {
  return Type.Unsafe<Value>(
    Type.Union(
      values.map((value) => Type.Literal(value)),
      options,
    ),
  );
}

/** A notice's state, as the API and the log spell it. */
export const NoticeStateSchema = literalUnion(STATES, { description: "The notice state machine's state" });
/** Why the fallback to SMS was decided. */
export const FallbackReasonSchema = literalUnion(FALLBACK_REASONS);

export const NoticeViewSchema = Type.Object({
  id: Type.String(),
  tenant: Type.Optional(Type.String({ description: 'The tenant of the key that created it' })),
  state: NoticeStateSchema,
  category: Type.String(),
  recipientId: Type.String(),
  createdAt: Time,
  deadline: Time,
  policyVersion: Type.Integer(),
  plannedChecks: Type.Array(Time),
  email: Type.Object({
    status: Type.Union([Type.String(), Type.Null()]),
    providerMessageId: Type.Union([Type.String(), Type.Null()]),
    lastObservedAt: NullableTime,
    nextCheckAt: NullableTime,
  }),
  fallback: Type.Union([Type.Object({ reason: FallbackReasonSchema, decidedAt: NullableTime }), Type.Null()]),
  sms: Type.Union([
    Type.Object({ status: Type.Union([Type.String(), Type.Null()]), providerMessageId: Type.Union([Type.String(), Type.Null()]) }),
    Type.Null(),
  ]),
});

export const EventsResponse = Type.Object({
  events: Type.Array(
    Type.Object(
      { id: Type.String(), seq: Type.Integer(), type: Type.String(), noticeId: Type.String(), at: Time },
      { additionalProperties: true, description: 'One decision-log entry: its type-specific fields are flat on the entry.' },
    ),
  ),
});

export const PolicyVersionResponse = Type.Object({ version: Type.Integer({ minimum: 1 }) });

export const RecipientPolicyResponse = Type.Object({
  version: Type.Integer({ minimum: 0 }),
  consent: Type.Object({ email: Type.Boolean(), sms: Type.Boolean() }),
  region: Type.Optional(Type.String()),
  updatedAt: Type.Optional(Type.String({ format: 'date-time' })),
});

const CallerEventTypeSchema = Type.Union([
  Type.Literal('notice.completed'),
  Type.Literal('fallback.decided'),
  Type.Literal('notice.failed'),
]);

export const CreateEventEndpointBody = Type.Object(
  {
    url: Type.String({
      minLength: 1,
      maxLength: 2048,
      description: 'https:// in production; no loopback, link-local or private address unless HERALD_ALLOW_PRIVATE_EVENT_URLS=1',
    }),
    events: Type.Array(CallerEventTypeSchema, { minItems: 1, maxItems: 3, uniqueItems: true }),
  },
  { additionalProperties: false },
);
export type CreateEventEndpointBody = Static<typeof CreateEventEndpointBody>;

export const EventEndpointParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
export type EventEndpointParams = Static<typeof EventEndpointParams>;

export const EventEndpointView = Type.Object({
  id: Type.String(),
  url: Type.String(),
  events: Type.Array(CallerEventTypeSchema),
  createdAt: Time,
  disabled: Type.Union([Type.Object({ reason: Type.String(), at: Time }), Type.Null()]),
  lastDeliveredAt: NullableTime,
  failingSince: NullableTime,
});

// `type: 'object'` beside the `allOf`, as the document had it before TypeBox 1 left it out.
export const CreatedEventEndpoint = Type.Intersect(
  [
    EventEndpointView,
    Type.Object({ secret: Type.String({ description: 'whsec_…: shown once; verify deliveries with it (Standard Webhooks)' }) }),
  ],
  { type: 'object' },
);

export const EventEndpointList = Type.Object({ endpoints: Type.Array(EventEndpointView) });

export const DeliveryList = Type.Object({
  deliveries: Type.Array(
    Type.Object({
      eventId: Type.String(),
      type: CallerEventTypeSchema,
      noticeId: Type.String(),
      outcome: Type.Union([
        Type.Literal('delivered'),
        Type.Literal('failed'),
        Type.Literal('gone'),
        Type.Literal('given_up'),
        Type.Literal('dropped'),
      ]),
      status: Type.Union([Type.Integer(), Type.Null()]),
      attempts: Type.Integer(),
      error: Type.Union([Type.String(), Type.Null()]),
      at: Time,
    }),
  ),
});

/** One notice of a batch: the body of `POST /v1/notices`, and the Idempotency-Key it would have carried. */
export const BatchNoticeItem = Type.Object(
  {
    ...CreateNoticeBody.properties,
    idempotencyKey: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' })),
  },
  { additionalProperties: false },
);

export const BatchNoticesBody = Type.Object(
  {
    notices: Type.Array(Type.Unknown(), {
      minItems: 1,
      description: 'At most HERALD_BATCH_MAX (default 1000) notices, each as POST /v1/notices takes it, with an optional idempotencyKey.',
    }),
  },
  { additionalProperties: false },
);
export type BatchNoticesBody = Static<typeof BatchNoticesBody>;

export const BatchNoticesResponse = Type.Object({
  results: Type.Array(
    Type.Object({
      index: Type.Integer({ minimum: 0 }),
      status: Type.Integer({
        description: '202 accepted, 200 an idempotent replay, else the error status the notice would have had alone',
      }),
      id: Type.Optional(Type.String()),
      state: Type.Optional(Type.String()),
      deadline: Type.Optional(Time),
      plannedChecks: Type.Optional(Type.Array(Time)),
      error: Type.Optional(ErrorResponse.properties.error),
    }),
  ),
});

/** The filters of `GET /v1/notices` (the same query as /admin/notices; src/notice/search.ts checks them). */
export const NoticeListQuery = Type.Object(
  {
    state: Type.Optional(Type.String({ maxLength: 32 })),
    reason: Type.Optional(Type.String({ maxLength: 64 })),
    category: Type.Optional(Type.String({ maxLength: 64 })),
    recipientId: Type.Optional(Type.String({ maxLength: 128 })),
    email: Type.Optional(
      Type.String({ maxLength: 254, description: "the recipient's email address (any case): found through its HMAC, for support" }),
    ),
    phone: Type.Optional(Type.String({ maxLength: 16, description: "the recipient's phone, E.164: found through its HMAC, for support" })),
    id: Type.Optional(Type.String({ maxLength: 64 })),
    from: Type.Optional(Type.String({ maxLength: 64, description: 'ISO 8601, inclusive' })),
    to: Type.Optional(Type.String({ maxLength: 64, description: 'ISO 8601, exclusive' })),
    view: Type.Optional(Type.Union([Type.Literal('late'), Type.Literal('in_doubt')])),
    limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,4}$', description: 'at most 200; default 50' })),
    cursor: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
);
export type NoticeListQuery = Static<typeof NoticeListQuery>;

export const NoticeListResponse = Type.Object({
  notices: Type.Array(NoticeViewSchema),
  nextCursor: Type.Union([Type.String(), Type.Null()]),
});
