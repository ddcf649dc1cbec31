import { describe, expect, it } from 'vitest';
import {
  postmarkBounceIds,
  postmarkNotIndexedObservation,
  postmarkObservation,
  twilioObservation,
  twilioStatus,
  type PostmarkEvent,
} from '../../src/providers/normalize.js';

const at = (second: number) => `2026-11-29T14:00:${String(second).padStart(2, '0')}Z`;
const details = (...events: PostmarkEvent[]) => ({ Status: 'Sent', MessageEvents: events });
const bounced = (second: number, id: number): PostmarkEvent => ({
  Type: 'Bounced',
  ReceivedAt: at(second),
  Details: { BounceID: String(id) },
});

describe('Postmark details → observation', () => {
  it('is pending with no events, and when the message is not indexed yet (701)', () => {
    expect(postmarkObservation(details())).toEqual({ providerStatus: 'Sent', status: 'pending', engagement: [] });
    expect(postmarkNotIndexedObservation()).toMatchObject({ status: 'pending', providerStatus: 'NotFound(701)' });
  });

  it('is delivered on a Delivered event, whatever came before', () => {
    const observation = postmarkObservation(details({ Type: 'Transient', ReceivedAt: at(1) }, { Type: 'Delivered', ReceivedAt: at(2) }));
    expect(observation).toMatchObject({ status: 'delivered', providerStatus: 'Sent+Transient+Delivered' });
  });

  it('is deferred on Transient events only', () => {
    const observation = postmarkObservation(details({ Type: 'Transient', ReceivedAt: at(1) }, { Type: 'Transient', ReceivedAt: at(5) }));
    expect(observation).toMatchObject({ status: 'deferred', providerStatus: 'Sent+Transient' });
  });

  it('is bounced and suppressed on a hard bounce, deferred on a soft one', () => {
    const hard = postmarkObservation(details(bounced(1, 7)), new Map([['7', { Type: 'HardBounce', Inactive: true }]]));
    expect(hard).toEqual({
      providerStatus: 'Sent+Bounced(HardBounce)',
      status: 'bounced',
      engagement: [],
      bounceType: 'HardBounce',
      suppressed: true,
    });
    const soft = postmarkObservation(details(bounced(1, 8)), new Map([['8', { Type: 'SoftBounce', Inactive: false }]]));
    expect(soft).toMatchObject({ status: 'deferred', bounceType: 'SoftBounce' });
    expect(soft.suppressed).toBeUndefined();
  });

  it('counts a bounce whose type could not be looked up as soft', () => {
    expect(postmarkObservation(details(bounced(1, 9)))).toMatchObject({ status: 'deferred', bounceType: 'Unknown' });
  });

  it('lets a later hard bounce override an earlier delivery, but not a soft one', () => {
    const bounces = new Map([
      ['1', { Type: 'HardBounce' }],
      ['2', { Type: 'SoftBounce' }],
    ]);
    expect(postmarkObservation(details({ Type: 'Delivered', ReceivedAt: at(1) }, bounced(2, 1)), bounces).status).toBe('bounced');
    expect(postmarkObservation(details({ Type: 'Delivered', ReceivedAt: at(1) }, bounced(2, 2)), bounces).status).toBe('delivered');
  });

  it('reads events in time order even when listed out of order', () => {
    const bounces = new Map([['1', { Type: 'HardBounce' }]]);
    expect(postmarkObservation(details(bounced(5, 1), { Type: 'Delivered', ReceivedAt: at(1) }), bounces).status).toBe('bounced');
  });

  it('is failed and suppressed on SubscriptionChanged with SuppressSending', () => {
    const observation = postmarkObservation(
      details({ Type: 'SubscriptionChanged', ReceivedAt: at(1), Details: { SuppressSending: true, Origin: 'Recipient' } }),
    );
    expect(observation).toMatchObject({ status: 'failed', suppressed: true, providerStatus: 'Sent+SubscriptionChanged' });
    const afterDelivery = postmarkObservation(
      details(
        { Type: 'Delivered', ReceivedAt: at(1) },
        { Type: 'SubscriptionChanged', ReceivedAt: at(2), Details: { SuppressSending: true } },
      ),
    );
    expect(afterDelivery).toMatchObject({ status: 'delivered', suppressed: true });
  });

  it('records opens and clicks as engagement only', () => {
    const observation = postmarkObservation(details({ Type: 'Opened', ReceivedAt: at(1) }, { Type: 'LinkClicked', ReceivedAt: at(2) }));
    expect(observation).toEqual({ providerStatus: 'Sent+Opened+LinkClicked', status: 'pending', engagement: ['opened', 'clicked'] });
  });

  it('lists the bounce IDs to look up, once each', () => {
    expect(postmarkBounceIds(details(bounced(1, 3), bounced(2, 3), bounced(3, 4), { Type: 'Delivered' }))).toEqual(['3', '4']);
  });
});

describe('Twilio status → normalized', () => {
  it.each([
    ['accepted', 'pending'],
    ['queued', 'pending'],
    ['scheduled', 'pending'],
    ['sending', 'pending'],
    ['sent', 'pending'],
    ['delivered', 'delivered'],
    ['read', 'delivered'],
    ['undelivered', 'failed'],
    ['failed', 'failed'],
    ['canceled', 'failed'],
    ['partially_delivered', 'unknown'],
    ['receiving', 'unknown'],
  ])('%s → %s', (status, normalized) => {
    expect(twilioStatus(status)).toBe(normalized);
  });

  it('carries the error code, and marks opt-outs as suppressed', () => {
    expect(twilioObservation({ status: 'undelivered', errorCode: 30003 })).toEqual({
      providerStatus: 'undelivered',
      status: 'failed',
      engagement: [],
      errorCode: 30003,
    });
    expect(twilioObservation({ status: 'failed', errorCode: 21610 })).toMatchObject({ suppressed: true });
    expect(twilioObservation({ status: 'sent', errorCode: null })).toEqual({ providerStatus: 'sent', status: 'pending', engagement: [] });
  });
});
