/** `herald keys create|list|revoke`: API keys limited to a tenant and to scopes, their secrets shown once. */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { iso } from '../clock.js';
import { composeCli } from '../compose.js';
import { loadConfig } from '../config.js';
import { SECRET_PREFIX, secretSha256 } from '../http/auth.js';
import { SCOPES, type Scope } from '../store/api-keys.js';
import { UsageError, type CliCommand, type CliIo } from './command.js';
import { writeLines } from './output.js';

/** A tenant's name: what its notices, lists and endpoints are kept under. */
export const TENANT_NAME = /^[a-z0-9][a-z0-9-]{0,31}$/;

export const keysCommand: CliCommand = {
  name: 'keys',
  summary: 'makes, lists and revokes API keys of a tenant, limited to scopes',
  usage: `herald keys create --tenant T --scopes send,read,manage [--name N]
    Makes an API key of tenant T (lower-case letters, digits and "-", 32 at most) that may do
    what its scopes say: send (create, batch, cancel notices), read (view them, their events,
    lists, stats), manage (recipient policies, suppressions, event endpoints). Prints its secret
    once: Herald keeps only its SHA-256.

  herald keys list [--json]
      Every key made: ID, tenant, scopes, name, created, last used, revoked. Never a secret.

  herald keys revoke <key id>
      Refuses the key from now on: every web process within a second.
`,
  run: keys,
};

async function keys(args: string[], io: CliIo): Promise<number> {
  const config = loadConfig(io.env);
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { tenant: { type: 'string' }, scopes: { type: 'string' }, name: { type: 'string' }, json: { type: 'boolean' } },
  });
  const action = positionals[0];
  const parts = composeCli(config, { clock: { now: io.now } });
  try {
    if (action === 'create' && positionals.length === 1) {
      const tenant = values.tenant ?? '';
      if (!TENANT_NAME.test(tenant)) throw new UsageError('--tenant must be lower-case letters, digits and "-", 32 at most');
      const scopes = (values.scopes ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      if (scopes.length === 0 || scopes.some((s) => !(SCOPES as readonly string[]).includes(s))) {
        throw new UsageError(`--scopes must list some of ${SCOPES.join(', ')}`);
      }
      const name = (values.name ?? '').slice(0, 100);
      await parts.ready();
      const id = `key_${randomBytes(9).toString('base64url')}`;
      const secret = `${SECRET_PREFIX}${randomBytes(32).toString('base64url')}`;
      await parts.stores().apiKeys.create({
        id,
        tenant,
        scopes: [...new Set(scopes)] as Scope[],
        name,
        secretSha256: secretSha256(secret),
        createdAt: io.now(),
        revokedAt: undefined,
        lastUsedAt: undefined,
      });
      io.stderr.write(`Made key ${id} of tenant ${tenant} (${[...new Set(scopes)].join(', ')}). Its secret, shown this once:\n`);
      await writeLines(io.stdout, [secret]);
      return 0;
    }
    if (action === 'list' && positionals.length === 1) {
      await parts.ready();
      const all = await parts.stores().apiKeys.list();
      const when = (ms: number | undefined) => (ms === undefined ? '-' : iso(ms));
      await writeLines(
        io.stdout,
        all.map((k) =>
          values.json
            ? JSON.stringify({
                id: k.id,
                tenant: k.tenant,
                scopes: k.scopes,
                name: k.name,
                createdAt: when(k.createdAt),
                lastUsedAt: k.lastUsedAt === undefined ? null : iso(k.lastUsedAt),
                revokedAt: k.revokedAt === undefined ? null : iso(k.revokedAt),
              })
            : [
                k.id,
                k.tenant,
                k.scopes.join(','),
                JSON.stringify(k.name),
                `created ${when(k.createdAt)}`,
                `last used ${when(k.lastUsedAt)}`,
                k.revokedAt === undefined ? 'active' : `revoked ${when(k.revokedAt)}`,
              ].join('  '),
        ),
      );
      return 0;
    }
    if (action === 'revoke' && positionals.length === 2) {
      await parts.ready();
      const id = positionals[1]!;
      if (!(await parts.stores().apiKeys.revoke(id, io.now()))) {
        io.stderr.write(`herald: no key ${id}\n`);
        return 1;
      }
      io.stderr.write(`Revoked ${id}: every web process refuses it within a second.\n`);
      return 0;
    }
    throw new UsageError('keys takes create, list, or revoke <key id>');
  } finally {
    await parts.close();
  }
}
