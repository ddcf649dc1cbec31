/**
 * The client's hand-written types, as a caller sees them (the package's emitted `.d.ts`), held
 * equal to the API's own: the TypeBox schemas its routes validate and answer with, and the
 * decision log's vocabulary. Not run: compiled by tsc (test/pure/client-package.test.ts), so
 * that a field added, removed or retyped on either side fails the build of this file.
 */
import type { Static } from 'typebox';
import type * as Client from '@herald/client';
import type {
  AcceptedResponse,
  BatchNoticeItem,
  BatchNoticesResponse,
  CreatedEventEndpoint,
  CreateEventEndpointBody,
  CreateNoticeBody,
  DeliveryList,
  ErrorResponse,
  EventEndpointView,
  EventsResponse,
  NoticeListQuery,
  NoticeListResponse,
  NoticeViewSchema,
  PolicyVersionResponse,
  RecipientPolicyBody,
  RecipientPolicyResponse,
} from '../../src/http/schemas.js';
import type { StatsResponse } from '../../src/http/stats.js';
import type { SuppressionBody, SuppressionResponse } from '../../src/http/suppressions.js';
import type { StoredEntry } from '../../src/notice/entries.js';
import type { FALLBACK_REASONS, STATES } from '../../src/notice/states.js';

/** `true` when each of A and B is assignable to the other. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Assignable<A, B> = [A] extends [B] ? true : false;
/** Every key of every member of a union. */
type KeysOf<U> = U extends unknown ? keyof U : never;
const holds = <T extends true>(): T => true as T;

// The values a notice and its fallback take.
holds<Same<Client.NoticeState, (typeof STATES)[number]>>();
holds<Same<Client.FallbackReason, (typeof FALLBACK_REASONS)[number]>>();

// Requests: what the client lets a caller send is what the API validates.
holds<Same<Client.CreateNoticeBody, Static<typeof CreateNoticeBody>>>();
holds<Same<Client.BatchNotice, Static<typeof BatchNoticeItem>>>();
holds<Same<Client.NewSuppression, Static<typeof SuppressionBody>>>();
holds<Same<Client.RecipientPolicyBody, Static<typeof RecipientPolicyBody>>>();
holds<Same<Client.NewEventEndpoint, Static<typeof CreateEventEndpointBody>>>();
// Every filter of GET /v1/notices, and nothing it does not take (limit and cursor are the page's).
holds<Same<keyof Client.NoticeFilters | 'limit' | 'cursor', keyof Static<typeof NoticeListQuery>>>();

// Answers: what the API answers is what the client says it resolves with.
holds<Same<Client.Accepted, Static<typeof AcceptedResponse>>>();
holds<Same<Client.NoticeView, Static<typeof NoticeViewSchema>>>();
holds<Same<Client.NoticePage, Static<typeof NoticeListResponse>>>();
holds<Same<Client.NoticeEvent, StoredEntry>>();
holds<Assignable<Client.NoticeEvent, Static<typeof EventsResponse>['events'][number]>>();
holds<Same<Client.Suppression, Static<typeof SuppressionResponse>>>();
holds<Same<{ version: number }, Static<typeof PolicyVersionResponse>>>();
holds<Same<Client.RecipientPolicy, Static<typeof RecipientPolicyResponse>>>();
holds<Same<Client.Stats, Static<typeof StatsResponse>>>();
holds<Same<Client.EventEndpoint, Static<typeof EventEndpointView>>>();
holds<Same<Client.CreatedEventEndpoint, Static<typeof CreatedEventEndpoint>>>();
holds<Same<Client.EventDelivery, Static<typeof DeliveryList>['deliveries'][number]>>();
holds<Same<Client.ApiErrorBody, Static<typeof ErrorResponse>['error']>>();

// createNotice: a first create is the 202 answer, a replay carries the 200 answer (the view).
holds<
  Same<Omit<Extract<Client.CreateNoticeResult, { replayed: false }>, 'replayed' | 'idempotencyKey'>, Static<typeof AcceptedResponse>>
>();
holds<Same<Extract<Client.CreateNoticeResult, { replayed: true }>['notice'], Static<typeof NoticeViewSchema>>>();

// A batch's results: each outcome, without what the client adds, is one item of the answer, and
// the answer has no field the outcomes leave out.
type BatchAnswerItem = Static<typeof BatchNoticesResponse>['results'][number];
type WithoutClientFields<U> = U extends unknown ? Omit<U, 'outcome' | 'idempotencyKey'> : never;
holds<Assignable<WithoutClientFields<Client.BatchItemResult>, BatchAnswerItem>>();
holds<Same<Exclude<keyof BatchAnswerItem, KeysOf<Client.BatchItemResult>>, never>>();

// The checks above can fail: a type that lost a field, or that has one too many, is not the same.
// @ts-expect-error a view without its SMS part is not the API's view
holds<Same<Omit<Client.NoticeView, 'sms'>, Static<typeof NoticeViewSchema>>>();
// @ts-expect-error nor is one with a field the API does not answer
holds<Same<Client.NoticeView & { extra: string }, Static<typeof NoticeViewSchema>>>();
// @ts-expect-error a state the API does not have
holds<Same<Client.NoticeState | 'sms_bounced', (typeof STATES)[number]>>();
