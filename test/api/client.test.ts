import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noticeBody } from '../helpers/herald.js';
import { TEST_API_KEY, testPrefix } from '../helpers/env.js';
import { startStack, type Stack } from '../helpers/stack.js';

// Imported by the package's own name, as a caller would: `exports["./client"]` of package.json.
const { createHeraldClient, HeraldApiError, HeraldTimeoutError } = await import('herald/client');

describe('the typed client (herald/client) against a running Herald', () => {
  let stack: Stack;
  let baseUrl: string;
  let herald: ReturnType<typeof createHeraldClient>;

  beforeAll(async () => {
    stack = await startStack({ prefix: testPrefix('client') });
    baseUrl = await stack.web.app.listen({ port: 0, host: '127.0.0.1' });
    herald = createHeraldClient({ baseUrl, apiKey: TEST_API_KEY });
  });
  afterAll(() => stack.close());

  it('creates a notice, replays it by its idempotency key, and waits for it to end', async () => {
    const body = noticeBody({ recipient: { id: 'client-1', email: 'delivered+300ms@example.com', phone: '+12025550100' }, deadlineInSeconds: 30 });
    const created = await herald.createNotice(body as never, { idempotencyKey: 'client-test-1' });
    expect(created).toMatchObject({ state: 'accepted', replayed: false });
    expect(created.plannedChecks.length).toBeGreaterThan(0);
    const again = await herald.createNotice(body as never, { idempotencyKey: 'client-test-1' });
    expect(again).toMatchObject({ id: created.id, replayed: true });

    const done = await herald.waitFor(created.id, { terminal: true, timeoutMs: 20_000, intervalMs: 100 });
    expect(done.state).toBe('email_delivered');
    const events = await herald.getEvents(created.id);
    expect(events.map((e) => e.type)).toContain('notice.completed');
    const completed = events.find((e) => e.type === 'notice.completed');
    expect(completed?.type === 'notice.completed' && completed.state).toBe('email_delivered');
  });

  it('cancels a notice, and reports a refused cancel as a typed error with its stable code', async () => {
    const { id } = await herald.createNotice(noticeBody({ deadlineInSeconds: 600 }) as never);
    // The in-process worker may take the send first; either way the answer is typed.
    const canceled = await herald.cancelNotice(id).catch((error: unknown) => error);
    if (canceled instanceof HeraldApiError) {
      expect(canceled).toMatchObject({ status: 409, code: 'invalid_state' });
    } else {
      expect((canceled as { state: string }).state).toBe('canceled');
      const second = await herald.cancelNotice(id).catch((error: unknown) => error);
      expect(second).toBeInstanceOf(HeraldApiError);
      expect(second).toMatchObject({ status: 409, code: 'invalid_state', details: { state: 'canceled' } });
    }
  });

  it('throws HeraldApiError for bad input, unknown notices and a wrong key', async () => {
    const bad = await herald.createNotice({ recipient: {} } as never).catch((error: unknown) => error);
    expect(bad).toBeInstanceOf(HeraldApiError);
    expect(bad).toMatchObject({ status: 400, code: 'validation_failed' });
    expect((bad as InstanceType<typeof HeraldApiError>).details).toEqual(expect.arrayContaining([expect.objectContaining({ path: expect.any(String) })]));

    await expect(herald.getNotice('ntc_00aaaaaaaaaaaaaaaaaaaaaaaaaa')).rejects.toMatchObject({ status: 404, code: 'not_found' });
    const stranger = createHeraldClient({ baseUrl, apiKey: 'not-a-key-of-this-herald' });
    await expect(stranger.stats()).rejects.toMatchObject({ status: 401, code: 'unauthorized' });
  });

  it('gives up waiting with the notice as last read', async () => {
    const { id } = await herald.createNotice(noticeBody({ recipient: { id: 'client-3', email: 'never@example.com' }, deadlineInSeconds: 600 }) as never);
    const timedOut = await herald.waitFor(id, { state: 'sms_delivered', timeoutMs: 300, intervalMs: 100 }).catch((error: unknown) => error);
    expect(timedOut).toBeInstanceOf(HeraldTimeoutError);
    expect((timedOut as InstanceType<typeof HeraldTimeoutError>).last.id).toBe(id);
  });

  it('manages suppressions, recipient policies and reads stats', async () => {
    const added = await herald.suppressions.add({ channel: 'email', address: 'Client.Suppressed@Example.com', reason: 'asked by the player' });
    expect(added).toMatchObject({ channel: 'email', address: 'client.suppressed@example.com', source: 'manual' });
    expect(await herald.suppressions.get('email', 'client.suppressed@example.com')).toMatchObject({ reason: 'asked by the player' });
    await herald.suppressions.remove('email', 'client.suppressed@example.com');
    await expect(herald.suppressions.get('email', 'client.suppressed@example.com')).rejects.toMatchObject({ status: 404 });

    const { version } = await herald.putRecipientPolicy('client-policy', { consent: { email: true, sms: false }, region: 'JP' });
    expect(version).toBe(1);
    expect(await herald.getRecipientPolicy('client-policy')).toMatchObject({ version: 1, consent: { email: true, sms: false }, region: 'JP' });

    const stats = await herald.stats({ from: new Date(Date.now() - 3_600_000), to: new Date() });
    expect(stats.notices).toBeGreaterThanOrEqual(3);
    expect(stats.window.from <= stats.from).toBe(true);
  });
});
