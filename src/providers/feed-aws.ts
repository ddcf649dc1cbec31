/**
 * What the AWS clients of the feed providers (SES v2, End User Messaging SMS, SQS) share: how
 * they are built, how one call is bounded, and how their errors are classified.
 *
 * - `maxAttempts: 1` on every client: the SDK's own retry strategy resends on 5xx, throttling
 *   and timeouts, which for a send in doubt would be a second email or SMS. Herald retries.
 * - Each call is bounded by `timeoutMs` through an abort signal (the request handler's
 *   `requestTimeout` only warns unless told to throw, and does not cover the whole call).
 * - The request handler builds each client's own keep-alive agents from Herald's agent options
 *   (transport.ts: sockets per host, idle sockets closed after a few seconds); `destroy()` on the
 *   client closes them.
 */
import { fromHttpStatus, fromTransportError } from './classify.js';
import { parseRetryAfter } from './http-trace.js';
import { keepAliveAgentOptions } from './transport.js';
import { ProviderError, type ProviderErrorKind } from './types.js';

export interface AwsClientOptions {
  region: string;
  /** Static credentials; undefined: the SDK's default credential chain. */
  credentials: { accessKeyId: string; secretAccessKey: string } | undefined;
  /** The service endpoint (an emulator, a proxy, or the region's endpoint). */
  endpoint: string;
  timeoutMs: number;
}

/** The configuration every AWS client of Herald is built with. */
export function awsClientConfig(opts: AwsClientOptions) {
  return {
    region: opts.region,
    endpoint: opts.endpoint,
    // A copy: the SDK marks the credentials it resolves, and the configuration's are frozen.
    ...(opts.credentials ? { credentials: { ...opts.credentials } } : {}),
    maxAttempts: 1,
    requestHandler: {
      requestTimeout: opts.timeoutMs,
      connectionTimeout: opts.timeoutMs,
      throwOnRequestTimeout: true,
      httpAgent: keepAliveAgentOptions(),
      httpsAgent: keepAliveAgentOptions(),
    },
  };
}

/** Error names that mean "slow down": never about the message. */
const THROTTLING = new Set([
  'ThrottlingException',
  'TooManyRequestsException',
  'Throttling',
  'ThrottledException',
  'RequestThrottled',
  'RequestLimitExceeded',
  'SlowDown',
]);

/** Error names that blame Herald's account or set-up, not the message: retrying after the operator fixes it works. */
const ACCOUNT_PROBLEMS = new Set([
  'AccessDeniedException',
  'AccountSuspendedException',
  'SendingPausedException',
  'MailFromDomainNotVerifiedException',
  'NotFoundException',
  'ResourceNotFoundException',
  'ServiceQuotaExceededException',
  'UnrecognizedClientException',
  'InvalidClientTokenId',
  'SignatureDoesNotMatch',
  'ExpiredTokenException',
  'QueueDoesNotExist',
  'AWS.SimpleQueueService.NonExistentQueue',
]);

/** AWS End User Messaging SMS: the number said STOP. */
const OPTED_OUT_REASON = 'DESTINATION_PHONE_NUMBER_OPTED_OUT';

interface AwsErrorFields {
  name?: unknown;
  message?: unknown;
  Reason?: unknown;
  $metadata?: { httpStatusCode?: number };
  $response?: { headers?: Record<string, string | undefined> };
}

/** Classifies anything thrown by a call through an AWS SDK client. */
export function classifyAwsError(provider: string, error: unknown): ProviderError {
  if (error instanceof ProviderError) return error;
  const fields = (typeof error === 'object' && error !== null ? error : {}) as AwsErrorFields;
  const status = fields.$metadata?.httpStatusCode;
  const name = typeof fields.name === 'string' ? fields.name : 'Error';
  if (typeof status === 'number' && status >= 300) {
    let kindOverride: ProviderErrorKind | undefined;
    if (THROTTLING.has(name)) kindOverride = 'rate_limited';
    else if (ACCOUNT_PROBLEMS.has(name)) kindOverride = 'server_error';
    const reason = typeof fields.Reason === 'string' ? fields.Reason : undefined;
    return fromHttpStatus(provider, status, {
      message: `${name}${reason ? ` (${reason})` : ''}: ${typeof fields.message === 'string' ? fields.message : ''}`,
      providerCode: undefined,
      kindOverride,
      suppressed: name === 'ConflictException' && reason === OPTED_OUT_REASON,
      retryAfterMs: parseRetryAfter(fields.$response?.headers?.['retry-after']),
      cause: error,
    });
  }
  return fromTransportError(provider, error, error);
}

/** Runs one AWS call bounded by `timeoutMs`; whatever it throws becomes a ProviderError. */
export async function awsCall<T>(provider: string, timeoutMs: number, call: (abortSignal: AbortSignal) => Promise<T>): Promise<T> {
  try {
    return await call(AbortSignal.timeout(Math.ceil(timeoutMs)));
  } catch (error) {
    throw classifyAwsError(provider, error);
  }
}
