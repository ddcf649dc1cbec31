/** The URL with any user name and password replaced, for messages that name it. */
export function withoutCredentials(raw: string): string {
  return raw.replace(/^([a-z][a-z0-9+.-]*:\/\/)?.*@/i, (_, scheme: string | undefined) => `${scheme ?? ''}[credentials]@`);
}
