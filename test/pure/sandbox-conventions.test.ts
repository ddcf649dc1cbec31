/**
 * The product holds what its sandbox mode relies on of the emulators in a module of its own, so
 * that it never imports them: the emulators must state the same.
 */
import { describe, expect, it } from 'vitest';
import * as product from '../../src/providers/sandbox-conventions.js';
import { WEBHOOK_PROVIDERS } from '../../src/webhooks/types.js';
import * as emulator from '@herald/sandbox';

describe("the sandbox's conventions", () => {
  it('name the same account, events queues and topics in the product and in the emulators', () => {
    expect(product.SANDBOX_ACCOUNT_ID).toBe(emulator.SANDBOX_ACCOUNT_ID);
    expect(product.SANDBOX_QUEUE_NAMES).toEqual(emulator.SANDBOX_QUEUE_NAMES);
    expect(product.SANDBOX_TOPIC_ARNS).toEqual(emulator.SANDBOX_TOPIC_ARNS);
  });

  it('push webhooks for exactly the providers whose webhooks Herald takes', () => {
    expect([...emulator.WEBHOOK_PROVIDERS].sort()).toEqual([...WEBHOOK_PROVIDERS].sort());
  });
});
