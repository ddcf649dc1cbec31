import { readFileSync } from 'node:fs';
import type { RedisClient } from './redis.js';

const LUA_DIR = new URL('./lua/', import.meta.url);
const INCLUDE = /^-- @include (\S+)\s*$/gm;

/** Reads a script and splices in its `-- @include name` lines from lua/includes/. */
export function loadScript(name: string): string {
  const source = readFileSync(new URL(`${name}.lua`, LUA_DIR), 'utf8');
  return source.replace(INCLUDE, (_, include: string) => readFileSync(new URL(`includes/${include}.lua`, LUA_DIR), 'utf8'));
}

/** Every script Herald defines on a connection (the one registry), with its key count from its name. */
export const SCRIPTS = [
  'createNotice-10',
  'transition-8',
  'putRecipientPolicy-1',
  'retireNotice-8',
  'backfillStats-3',
  'addSuppression-1',
  'nextMirrorBatch-3',
  'takeMirrorBatch-3',
  'ackMirrorBatch-2',
  'trimMirroredLog-2',
  'mirrorBacklog-2',
  'recordFeedEvent-1',
  'releaseLease-1',
  'holdLease-1',
] as const;

export interface HeraldScripts {
  createNotice(...args: (string | number)[]): Promise<unknown[]>;
  transition(...args: (string | number)[]): Promise<unknown[]>;
  putRecipientPolicy(...args: (string | number)[]): Promise<number>;
  retireNotice(...args: (string | number)[]): Promise<number>;
  backfillStats(...args: (string | number)[]): Promise<number>;
  addSuppression(...args: (string | number)[]): Promise<number>;
  nextMirrorBatch(
    ...args: (string | number)[]
  ): Promise<['own' | 'claimed', string, string, number, string, string] | ['new', string, string]>;
  takeMirrorBatch(...args: (string | number)[]): Promise<['taken', string, string] | ['moved', string]>;
  ackMirrorBatch(...args: (string | number)[]): Promise<number>;
  trimMirroredLog(...args: (string | number)[]): Promise<[number, string]>;
  mirrorBacklog(...args: (string | number)[]): Promise<[number, number, string]>;
  recordFeedEvent(...args: (string | number)[]): Promise<number>;
  releaseLease(...args: (string | number)[]): Promise<number>;
  holdLease(...args: (string | number)[]): Promise<number>;
}

/** A pipeline of a connection with Herald's scripts: each script is a command of it too. */
export type ScriptPipeline = ReturnType<RedisClient['pipeline']> & {
  [name in keyof HeraldScripts]: (...args: (string | number)[]) => unknown;
};

/** Defines Herald's scripts as commands on an ioredis connection (EVALSHA with EVAL fallback). */
export function defineScripts(redis: RedisClient): RedisClient & HeraldScripts {
  for (const file of SCRIPTS) {
    const [name, keys] = file.split('-') as [string, string];
    if (!(name in redis)) redis.defineCommand(name, { numberOfKeys: Number(keys), lua: loadScript(file) });
  }
  return redis as RedisClient & HeraldScripts;
}
