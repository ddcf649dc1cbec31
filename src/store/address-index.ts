import { addressMembers, type AddressLookup } from '../notice/address-lookup.js';
import { shardOfNoticeId } from '../notice/ids.js';
import type { Keys } from './keys.js';
import { forEachNoticeBatch, goneOf } from './notice-index.js';
import { execAll, type RedisClient } from './redis.js';

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
  let added = 0;
  await forEachNoticeBatch(redis, keys, async (ids) => {
    const addresses = await execAll(
      redis,
      ids.map((id) => ['hmget', keys.notice(id), 'email', 'phone']),
    );
    const members = new Map(
      ids.map((id, i) => {
        const [email, phone] = (addresses[i]?.[1] ?? []) as (string | null)[];
        return [id, addressMembers(lookup, id, { email: email ?? undefined, phone: phone ?? undefined })] as const;
      }),
    );
    const indexed = ids.filter((id) => members.get(id)!.length > 0);
    const adds = await execAll(
      redis,
      indexed.map((id) => ['zadd', keys.addresses(shardOfNoticeId(id)!), 'NX', ...members.get(id)!.flatMap((m) => [0, m])]),
    );
    added += adds.reduce((sum, [, n]) => sum + Number(n ?? 0), 0);
    const gone = await goneOf(redis, keys, indexed);
    await execAll(
      redis,
      gone.map((id) => ['zrem', keys.addresses(shardOfNoticeId(id)!), ...members.get(id)!]),
    );
  });
  await redis.set(keys.addressesIndexed, new Date(now).toISOString());
  return added;
}
