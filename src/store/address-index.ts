import { addressMembers, type AddressLookup } from '../notice/address-lookup.js';
import { shardOfNoticeId } from '../notice/ids.js';
import type { Keys } from './keys.js';
import { execAll, masterNodes, type RedisClient } from './redis.js';

/**
 * The address lookup's index of live notices (src/notice/address-lookup.ts): each shard's
 * `addresses` zset holds `<hmac>:<noticeId>` for the email address and the phone of each of its
 * notices, all scored 0, so that one address's notices are one lexicographic range, by creation
 * (a notice ID sorts by creation within its shard). createNotice-10.lua adds a notice's
 * members with it, retireNotice-8.lua removes them as it retires; after that the archive's
 * recipient index finds it (src/archive/recipient-index.ts).
 */

/**
 * Adds to the index the live notices that versions before it created: every notice hash Redis
 * holds (SCAN on each master), then drops the members of any whose hash went meanwhile (a
 * notice that retires never comes back, and retireNotice-8.lua removes its members from then
 * on). Runs once; the `addresses-indexed` marker holds when. Returns how many members it added,
 * or null when it had run.
 */
export async function indexAddressesOnce(redis: RedisClient, keys: Keys, lookup: AddressLookup, now: number): Promise<number | null> {
  if ((await redis.exists(keys.addressesIndexed)) === 1) return null;
  const pattern = `${keys.prefix}:{s*}:notice:ntc_*`;
  let added = 0;
  for (const node of masterNodes(redis)) {
    let cursor = '0';
    do {
      const [next, found] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      const ids = found.map((key) => key.slice(key.lastIndexOf(':') + 1)).filter((id) => shardOfNoticeId(id) !== undefined);
      if (ids.length === 0) continue;
      const addresses = await execAll(
        redis,
        ids.map((id) => ['hmget', keys.notice(id), 'email', 'phone']),
      );
      const members = ids.map((id, i) => {
        const [email, phone] = (addresses[i]?.[1] ?? []) as (string | null)[];
        return addressMembers(lookup, id, { email: email ?? undefined, phone: phone ?? undefined });
      });
      const adds = await execAll(
        redis,
        ids.flatMap((id, i) =>
          members[i]!.length === 0 ? [] : [['zadd', keys.addresses(shardOfNoticeId(id)!), 'NX', ...members[i]!.flatMap((m) => [0, m])]],
        ),
      );
      added += adds.reduce((sum, [, n]) => sum + Number(n ?? 0), 0);
      const exists = await execAll(
        redis,
        ids.map((id) => ['exists', keys.notice(id)]),
      );
      const gone = ids.flatMap((id, i) =>
        Number(exists[i]?.[1] ?? 0) === 0 && members[i]!.length > 0 ? [[id, members[i]!] as const] : [],
      );
      await execAll(
        redis,
        gone.map(([id, dropped]) => ['zrem', keys.addresses(shardOfNoticeId(id)!), ...dropped]),
      );
    } while (cursor !== '0');
  }
  await redis.set(keys.addressesIndexed, new Date(now).toISOString());
  return added;
}
