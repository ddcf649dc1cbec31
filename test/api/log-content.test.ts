import { Writable } from 'node:stream';
import { fastFormats, fullFormats } from 'ajv-formats/dist/formats.js';
import fc from 'fast-check';
import { getCountries, getExampleNumber } from 'libphonenumber-js';
import examples from 'libphonenumber-js/mobile/examples';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, scrub } from '../../src/logger.js';
import { newNoticeId, SHARD_COUNT } from '../../src/notice/ids.js';
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
  // ajv-formats types a format as a string, a RegExp or a definition; its `email` formats are RegExps.
  const pattern = (format: unknown): RegExp => {
    if (format instanceof RegExp) return format;
    throw new Error('the email format is not a RegExp');
  };
  const [fastEmail, fullEmail] = [pattern(fastFormats.email), pattern(fullFormats.email)];
  const accepted = (address: string) => fastEmail.test(address) || fullEmail.test(address);

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

  it('replaces quoted local parts, address-literal domains and a full-width at sign', () => {
    for (const address of [
      '"john doe"@example.com',
      '"a,b@c"@example.com',
      'ops@[192.0.2.10]',
      'ops@[IPv6:2001:db8::1]',
      'p42＠example.com',
      'ｐ４２＠ｅｘａｍｐｌｅ．ｃｏｍ',
      'p42﹫example.com',
    ]) {
      expect(scrub(`Invalid 'To' address: ${address}.`), address).toBe("Invalid 'To' address: [email].");
    }
  });

  describe('phone numbers without a +', () => {
    const must = [
      ['E.164 without its +', '12025550100'],
      ['E.164 without its +, Japan', '819012345678'],
      ['after the 00 international prefix', '00447700900123'],
      ['a national number of 10 digits', '2025550100'],
      ['parenthesized area code', '(202) 555-0100'],
      ['dotted', '202.555.0100'],
      ['dotted, with +', '+1.202.555.0100'],
      ['dashed', '090-1234-5678'],
      ['spaced', '202 555 0100'],
      ['in pairs', '01.23.45.67.89'],
      ['spaced, with +', '+81 90 1234 5678'],
    ];
    it.each(must)('are replaced: %s (%s)', (_, phone) => {
      for (const text of [phone, `The 'To' number ${phone} is not valid`, `Messages.json?To=${phone}&PageSize=20`, `tel:${phone}`]) {
        const scrubbed = scrub(text);
        expect(scrubbed, text).toContain('[phone]');
        expect(scrubbed.replace(/\D/g, ''), text).not.toContain(phone.replace(/\D/g, '').slice(-7));
      }
    });

    const mustNot = [
      ['a time in ms', 'at 1733100000000'],
      ['a time in s', 'expires 1733100000'],
      ['a stream ID', 'entry 1733100000000-0 of 1733100000000-12'],
      ['a notice ID and its job', 'ntc_0b00mx5nfeukkl4wf9vx9c04luac-deadline'],
      ['an attempt ID', 'att_12345678901'],
      ['a UUID', '123e4567-e89b-12d3-a456-426614174000'],
      ['an address and port', 'redis://10.20.30.40:6379 and 192.168.100.200:65535'],
      ['a duration', 'waited 1500ms, 12345678 ms in all'],
      ['a byte count', 'body of 16777216 bytes'],
      ['an ISO time', '2026-11-29T14:10:00.000Z'],
      ['a date and time', '2026-11-29 14:10:00, 29.11.2026'],
      ['a version', 'Node v20.20.2, Redis 7.0.15'],
      ['a price', '0.0079 USD'],
      ['a count of 8 digits', 'checks 12345678'],
    ];
    it.each(mustNot)('are not taken for: %s (%s)', (_, text) => {
      expect(scrub(text)).toBe(text);
    });

    it('leave times, stream IDs, notice IDs, ports and durations alone, whatever their digits', () => {
      // Times within five years of now, in ms and in s (a time as far from now may be taken for a number).
      const years = 5 * 365 * 86_400_000 - 60_000;
      const ms = fc.integer({ min: Date.now() - years, max: Date.now() + years });
      const seconds = ms.map((t) => Math.floor(t / 1000));
      fc.assert(
        fc.property(
          ms,
          seconds,
          fc.nat({ max: 99 }),
          fc.integer({ min: 1, max: 65_535 }),
          fc.nat({ max: 15 }),
          (at, s, seq, port, shard) => {
            const texts = [
              `at ${at}`,
              `expires ${s}`,
              `entry ${at}-${seq}`,
              `${at}-${seq}`,
              new Date(at).toISOString(),
              newNoticeId(shard, at),
              `${newNoticeId(shard, at)}-email-poll`,
              `redis://127.0.0.1:${port}`,
              `10.0.${seq}.${port % 256}:${port}`,
              `${at}ms`,
              `${s}s`,
            ];
            for (const text of texts) expect(scrub(text), text).toBe(text);
          },
        ),
        { numRuns: 500 },
      );
    });

    it('replace the example number of every country, with its + left out or written in groups', () => {
      for (const country of getCountries()) {
        const number = getExampleNumber(country, examples);
        if (!number) continue;
        const digits = number.number.slice(1);
        // Without its +, a number needs 8 digits or more to be told from a count (+290 8999 has 7).
        const forms = [number.number, number.formatInternational(), ...(digits.length >= 8 ? [digits, `00${digits}`] : [])];
        for (const text of [...forms, number.formatInternational().replaceAll(' ', '.')]) {
          expect(scrub(`number ${text} refused`), `${country} ${text}`).toBe('number [phone] refused');
        }
      }
    });
  });
});
