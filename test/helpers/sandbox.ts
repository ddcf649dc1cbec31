/** Helpers for tests that talk to the sandbox over raw HTTP. */

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** An account SID the Twilio emulator accepts (any `AC…` works when it matches the auth user). */
export const ACCOUNT_SID = `AC${'0123456789abcdef'.repeat(2)}`;
export const AUTH_TOKEN = 'sandbox-auth-token';

export interface HttpAnswer {
  status: number;
  headers: Headers;
  body: any;
}

async function answer(response: Response): Promise<HttpAnswer> {
  const text = await response.text();
  let body: unknown = text;
  try {
    body = text === '' ? null : JSON.parse(text);
  } catch {
    // Not JSON: keep the text.
  }
  return { status: response.status, headers: response.headers, body };
}

/** A Postmark API call with a server token. */
export async function postmark(
  baseUrl: string,
  method: string,
  path: string,
  body?: unknown,
  token: string | null = 'sandbox-server-token',
): Promise<HttpAnswer> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (token !== null) headers['x-postmark-server-token'] = token;
  if (body !== undefined) headers['content-type'] = 'application/json';
  return answer(await fetch(baseUrl + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) }));
}

/** A Twilio API call with basic auth; `path` is below `/2010-04-01/Accounts/{sid}`. */
export async function twilioApi(
  baseUrl: string,
  method: string,
  path: string,
  form?: Record<string, string>,
  auth: { user: string; password: string } = { user: ACCOUNT_SID, password: AUTH_TOKEN },
  accountSid: string = ACCOUNT_SID,
): Promise<HttpAnswer> {
  const headers: Record<string, string> = {
    accept: 'application/json',
    authorization: `Basic ${Buffer.from(`${auth.user}:${auth.password}`).toString('base64')}`,
  };
  if (form) headers['content-type'] = 'application/x-www-form-urlencoded';
  const url = path.startsWith('/2010-04-01/') ? baseUrl + path : `${baseUrl}/2010-04-01/Accounts/${accountSid}${path}`;
  return answer(await fetch(url, { method, headers, body: form ? new URLSearchParams(form).toString() : undefined }));
}

/** Waits until early in a wall-clock second, so that second-precision timestamps line up. */
export async function startOfSecond(): Promise<void> {
  await sleep(1000 - (Date.now() % 1000) + 20);
}
