/**
 * The hash fields of a notice as tests store it straight through `NoticeStore.create`, when
 * they need one without going through the API: accepted, one recipient, a deadline
 * `deadlineInMs` after `now`.
 */
export function storedNoticeFields(
  id: string,
  now: number,
  opts: { recipientId?: string; deadlineInMs?: number } = {},
): Record<string, string | number> {
  return {
    state: 'accepted',
    category: 'c',
    recipientId: opts.recipientId ?? 'r',
    email: 'a@example.com',
    createdAt: now,
    deadline: now + (opts.deadlineInMs ?? 600_000),
    providerTimeoutMs: 5000,
    pollFirstMs: 60_000,
    pollIntervalMs: 60_000,
    metadata: '{}',
  };
}
