import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '@herald/sandbox';
import { testEnv, testPrefix, waitFor } from '../helpers/env.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { RedisServer } from '../helpers/redis-server.js';
import { WorkerProcess } from '../helpers/stack.js';
import { WebProcess } from '../helpers/web-process.js';

/**
 * ioredis 6 says HELLO 3 unless told otherwise; Herald keeps every connection on RESP2, the
 * protocol BullMQ's and Herald's scripts and reply parsing were written for
 * (src/store/redis.ts). Each case runs the compiled web and worker processes on a Redis of its
 * own and reads `CLIENT LIST` there: every connection they opened, BullMQ's own included,
 * speaks RESP2.
 */

/** The clients a server lists, but the connection asking: name and protocol of each. */
async function clientsOn(port: number): Promise<{ name: string; resp: string }[]> {
  const probe = new Redis(port, '127.0.0.1', { protocol: 2, lazyConnect: true, maxRetriesPerRequest: 0 });
  try {
    await probe.connect();
    const askingId = String(await probe.client('ID'));
    return String(await probe.client('LIST'))
      .trim()
      .split('\n')
      .map((line) => Object.fromEntries(line.split(' ').map((field) => field.split('=', 2) as [string, string])))
      .filter((client) => client.id !== askingId)
      .map((client) => ({ name: client.name ?? '', resp: client.resp ?? '' }));
  } finally {
    probe.disconnect();
  }
}

/** Waits until the worker runs and its BullMQ workers have opened their blocking connections. */
async function settledClients(
  list: () => Promise<{ name: string; resp: string }[]>,
  worker: WorkerProcess,
): Promise<{ name: string; resp: string }[]> {
  await waitFor(async () => worker.ready, 60_000, 'the worker to run');
  let previous = -1;
  return waitFor(
    async () => {
      const clients = await list();
      const stable = clients.length === previous;
      previous = clients.length;
      return stable && clients.length > 0 ? clients : undefined;
    },
    30_000,
    'the connections to settle',
  );
}

describe('every connection of the web and the worker speaks RESP2', () => {
  let sandbox: Sandbox;
  const archives: string[] = [];

  beforeAll(async () => {
    sandbox = await startSandbox({ port: 0 });
  });
  afterAll(async () => {
    await sandbox?.close();
    for (const dir of archives) rmSync(dir, { recursive: true, force: true });
  });

  function envFor(label: string, redis: Record<string, string>): Record<string, string> {
    const env = testEnv(testPrefix(label), {
      ...redis,
      POSTMARK_API_URL: sandbox.url,
      TWILIO_API_URL: sandbox.url,
      LOG_LEVEL: 'info',
    });
    archives.push(fileURLToPath(env.HERALD_ARCHIVE_URL!));
    return env;
  }

  describe('when Herald runs on one Redis node', () => {
    let server: RedisServer;
    let web: WebProcess | undefined;
    let worker: WorkerProcess | undefined;

    beforeAll(async () => {
      server = await RedisServer.start();
    });
    afterAll(async () => {
      await worker?.stop('SIGKILL');
      await web?.stop();
      await server?.stop();
    });

    it('lists only RESP2 clients, the web and the worker included', async () => {
      const env = envFor('resp2', { REDIS_URL: server.url });
      web = await new WebProcess(env).start();
      worker = new WorkerProcess(env).start();
      const clients = await settledClients(() => clientsOn(server.port), worker);
      expect(clients.map((c) => c.name)).toEqual(expect.arrayContaining([expect.stringMatching(/^herald-/)]));
      expect(clients.filter((c) => c.resp !== '2')).toEqual([]);
      // The web's and the worker's connections, BullMQ's blocking ones among them.
      expect(clients.length).toBeGreaterThan(4);
    }, 120_000);
  });

  describe('when Herald runs on a Redis Cluster', () => {
    let cluster: RedisCluster;
    let worker: WorkerProcess | undefined;

    beforeAll(async () => {
      cluster = await RedisCluster.start({ masters: 3, replicasPerMaster: 0 });
    }, 120_000);
    afterAll(async () => {
      await worker?.stop('SIGKILL');
      await cluster?.stop();
    });

    it("lists only RESP2 clients on every master, the worker's connections to each included", async () => {
      worker = new WorkerProcess(envFor('resp2-cluster', { REDIS_CLUSTER_NODES: cluster.seeds, HERALD_QUEUE_PARTITIONS: '3' })).start();
      const masters = await cluster.masters();
      expect(masters).toHaveLength(3);
      const perMaster = async () => Promise.all(masters.map((node) => clientsOn(node.port)));
      await settledClients(async () => (await perMaster()).flat(), worker);
      const lists = await perMaster();
      for (const clients of lists) {
        expect(clients.length).toBeGreaterThan(0);
        expect(clients.filter((c) => c.resp !== '2')).toEqual([]);
      }
    }, 180_000);
  });
});
