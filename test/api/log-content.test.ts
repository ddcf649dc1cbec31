import { Writable } from 'node:stream';
import { fastFormats, fullFormats } from 'ajv-formats/dist/formats.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, scrub } from '../../src/logger.js';
import { SHARD_COUNT } from '../../src/notice/ids.js';
import { cleanUp, noticeBody, startWebUnderTest, type WebUnderTest } from '../helpers/herald.js';
import { plainRedis, testConfig, testPrefix } from '../helpers/env.js';

/** A logger whose JSON lines the test reads back. */
function capturedLogger() {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  return { logger: createLogger('herald-test', 'info', stream), text: () => lines.join('\n') };
}

describe('when a Redis script fails while a notice is stored', () => {
  const prefix = testPrefix('logc');
  const config = testConfig(prefix);
  const captured = capturedLogger();
  let web: WebUnderTest;

  beforeAll(async () => {
    web = await startWebUnderTest(config, undefined, captured.logger);
    // A metrics key of the wrong type makes the create script fail half-way (WRONGTYPE), the
    // way a full or broken Redis would, with the whole request in the command's arguments.
    const redis = plainRedis();
    for (let shard = 0; shard < SHARD_COUNT; shard += 1) await redis.set(web.store.keys.metrics(shard), 'not a hash');
    await redis.quit();
  });

  afterAll(async () => {
    await web.close();
    await cleanUp(prefix);
  });

  it('answers 500 and logs the error without the message body, the addresses or the command arguments', async () => {
    const body = noticeBody({
      recipient: { id: 'player-7', email: "o'brien+winter@mail.example", phone: '+12025550123' },
      content: { subject: 'Secret subject line', text: 'Secret body text', sms: 'Secret SMS text' },
    });
    const answer = await web.call('POST', '/v1/notices', body);
    expect(answer.statusCode).toBe(500);
    expect(answer.json().error.code).toBe('internal_error');

    const log = captured.text();
    expect(log).toMatch(/WRONGTYPE/);
    // At info, each request leaves its one line, errors too.
    expect(log).toMatch(/"url":"\/v1\/notices","status":500.*"msg":"request"/);
    expect(log).toMatch(/"command":"eval(sha)?"/);
    for (const secret of ['Secret subject line', 'Secret body text', 'Secret SMS text', 'brien+winter', '2025550123', 'player-7']) {
      expect(log).not.toContain(secret);
    }
  });
});

describe('the address scrubber', () => {
  const accepted = (address: string) => fastFormats.email.test(address) || fullFormats.email.test(address);

  it('replaces every email address the API validator accepts', () => {
    fc.assert(
      fc.property(
        fc.emailAddress().filter(accepted),
        fc.constantFrom('', 'to ', '"', '<', 'To=', '['),
        fc.constantFrom('', ' failed', '"', '>', ',', ']'),
        (address, before, after) => {
          const scrubbed = scrub(`${before}${address}${after}`);
          expect(scrubbed).toContain('[email]');
          // What is left once the placeholder is taken out came from around the address (the
          // scrubber may take a neighbouring `To=` with it: more is hidden, never less).
          const rest = scrubbed.replaceAll('[email]', '');
          expect(rest).not.toContain('@');
          expect(`${before}${after}`).toContain(rest);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('replaces the edge cases: quotes and slashes in the local part, dotless domains, percent-encoding', () => {
    for (const address of ["o'brien@example.com", 'a/b=c?d@example.com', 'ops@localhost', '{x}|~@mail', 'a+b@x.io']) {
      expect(accepted(address), address).toBe(true);
      expect(scrub(`Invalid 'To' address: ${address}.`)).toBe("Invalid 'To' address: [email].");
    }
    expect(scrub('/messages/outbound?recipient=p42%40example.com&count=5')).not.toContain('p42');
  });

  it('replaces E.164 numbers of every length, written or percent-encoded', () => {
    for (const phone of ['+2901234', '+12025550100', '+819012345678', '+447700900123456'.slice(0, 16)]) {
      expect(scrub(`The 'To' number ${phone} is not valid`)).toBe("The 'To' number [phone] is not valid");
    }
    expect(scrub('Messages.json?To=%2B12025550100&PageSize=20')).not.toContain('2025550100');
  });
});
