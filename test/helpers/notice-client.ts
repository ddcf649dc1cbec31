import type { Sandbox } from '@herald/sandbox';
import type { AnyEntry as StoredEntry } from './entries.js';
import { waitFor } from './env.js';

/** One API call, whichever way a stack reaches its web (in-process `inject`, or HTTP to a process). */
export type ApiCall = (
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
  headers?: Record<string, string>,
) => Promise<{ status: number; json: any; text: string }>;

/** What a test does with notices through the API, and what the emulators received. */
export interface NoticeClient {
  /** Creates a notice through the API and returns its ID. */
  createNotice(body: Record<string, unknown>, headers?: Record<string, string>): Promise<string>;
  view(id: string): Promise<any>;
  events(id: string): Promise<StoredEntry[]>;
  /** Waits until the notice is in one of `states`. */
  waitForState(id: string, states: string[], timeoutMs?: number): Promise<any>;
  /** SMS the emulator received for a phone number. */
  smsTo(phone: string): number;
}

/** The notice client of a stack whose web answers `call` and whose emulators are `sandbox`. */
export function noticeClient(call: ApiCall, sandbox: Sandbox, defaultTimeoutMs: number): NoticeClient {
  const client: NoticeClient = {
    async createNotice(body, headers) {
      const res = await call('POST', '/v1/notices', body, headers);
      if (res.status !== 202) throw new Error(`create answered ${res.status}: ${res.text}`);
      return res.json.id as string;
    },
    async view(id) {
      return (await call('GET', `/v1/notices/${id}`)).json;
    },
    async events(id) {
      return (await call('GET', `/v1/notices/${id}/events`)).json.events as StoredEntry[];
    },
    async waitForState(id, states, timeoutMs = defaultTimeoutMs) {
      return waitFor(
        async () => {
          const view = await client.view(id);
          return states.includes(view.state) ? view : undefined;
        },
        timeoutMs,
        `notice ${id} to reach ${states.join('|')}`,
      );
    },
    smsTo(phone) {
      return sandbox.sms().filter((m) => m.to === phone).length;
    },
  };
  return client;
}
