import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

function sources(dir: string): { path: string; text: string }[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .map((file) => ({ path: relative(ROOT, join(ROOT, dir, file)), text: readFileSync(join(ROOT, dir, file), 'utf8') }));
}

const OUTSIDE_STORE = [...sources('src'), ...sources('queues')].filter((file) => !file.path.startsWith(join('src', 'store')));

// Commands Herald sends on its own keys: a call of one is a Redis call, and so is get/set/del on a connection (not on a Map).
const REDIS_COMMAND =
  /\bredis\.(get|set|del)\(|\.(hget|hgetall|hmget|hset|hdel|hexists|hscan|hincrby|zadd|zrem|zrange|zrangebyscore|zremrangebyscore|zscore|zcard|zcount|zscan|xadd|xrange|xrevrange|xgroup|xack|xtrim|xreadgroup|lrange|rpush|pttl|pexpire|incr|exists|multi|pipeline|evalsha|defineCommand)\(/;
// Pieces of Herald's key names: they are spelled in src/store/keys.ts only.
const KEY_FRAGMENT =
  /[:{](s\$\{|sup\}|rl\}|adm\}|r:\$\{)|:(notice|content|events|lease|due|retire|stats|metrics|mirror-batches|archive-chain):/;

describe('the store boundary', () => {
  it('leaves no Redis command on Herald keys to code outside src/store/', () => {
    const offenders = OUTSIDE_STORE.flatMap(({ path, text }) =>
      text.split('\n').flatMap((line, i) => (REDIS_COMMAND.test(line) ? [`${path}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(offenders).toEqual([]);
  });

  it('spells key names nowhere but in src/store/', () => {
    const offenders = OUTSIDE_STORE.flatMap(({ path, text }) =>
      text
        .split('\n')
        .flatMap((line, i) => (KEY_FRAGMENT.test(line) && !/^\s*(\*|\/\/)/.test(line) ? [`${path}:${i + 1}: ${line.trim()}`] : [])),
    );
    expect(offenders).toEqual([]);
  });

  it('defines Lua scripts in one registry', () => {
    const registries = [...sources('src'), ...sources('queues')].filter(({ text }) => text.includes('.defineCommand('));
    expect(registries.map((file) => file.path)).toEqual([join('src', 'store', 'scripts.ts')]);
  });
});
