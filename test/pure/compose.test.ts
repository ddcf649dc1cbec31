import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (name: string) => readFileSync(`${ROOT}${name}`, 'utf8');

interface Service {
  image?: string;
  entrypoint?: string[];
  depends_on?: Record<string, { condition: string }>;
  build?: unknown;
  command?: string[];
  ports?: string[];
  volumes?: string[];
  environment?: Record<string, string>;
  profiles?: string[];
  healthcheck?: { disable?: boolean; test?: string[] };
}
const compose = parse(read('docker-compose.yml'), { merge: true }) as { services: Record<string, Service> };
const services = compose.services;
const heraldEnv = services.web!.environment!;

/** The variables `${NAME…}` an environment value takes from .env, and whether it has a default. */
function interpolations(value: string): { name: string; required: boolean; fallback: string | undefined }[] {
  return [...value.matchAll(/\$\{([A-Z0-9_]+)(?:(:?[-?])([^}]*))?\}/g)].map(([, name, op, rest]) => ({
    name: name!,
    required: op?.endsWith('?') ?? false,
    fallback: op?.endsWith('-') ? rest : undefined,
  }));
}

/** The key=value lines of .env.example. */
const example = Object.fromEntries(
  read('.env.example')
    .split('\n')
    .filter((line) => /^[A-Z0-9_]+=/.test(line))
    .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
);

describe('docker-compose.yml as shipped', () => {
  it('has no default API key, admin token, archive key or S3 secret: .env must give them', () => {
    for (const name of ['HERALD_API_KEYS', 'HERALD_ARCHIVE_KEY', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY']) {
      const [ref] = interpolations(heraldEnv[name]!);
      expect(ref, name).toMatchObject({ required: true, fallback: undefined });
    }
    expect(interpolations(heraldEnv.HERALD_ADMIN_TOKEN!)).toEqual([{ name: 'HERALD_ADMIN_TOKEN', required: false, fallback: '' }]);
    for (const name of ['HERALD_S3_ACCESS_KEY', 'HERALD_S3_SECRET_KEY']) {
      expect(interpolations(services.s3!.environment![name]!)[0], name).toMatchObject({ name, required: true });
    }
    // .env.example leaves every secret for the user to fill in.
    for (const name of ['HERALD_API_KEYS', 'HERALD_ADMIN_TOKEN', 'HERALD_ARCHIVE_KEY', 'HERALD_S3_SECRET_KEY'])
      expect(example[name], name).toBe('');
  });

  it('pins a maintained S3 server by its release, and no MinIO image is left', () => {
    expect(services.s3!.image).toMatch(/^chrislusf\/seaweedfs:\d+\.\d+$/);
    for (const [name, service] of Object.entries(services)) expect(service.image ?? '', name).not.toMatch(/minio/i);
    expect(heraldEnv.S3_ENDPOINT).toBe('http://s3:8333');
    expect(services.s3!.ports).toEqual(['127.0.0.1:8333:8333']);
    // Herald starts once the server answers, and the server makes the bucket itself.
    expect(JSON.stringify(services.s3!.healthcheck?.test)).toContain('/healthz');
    expect(JSON.stringify(services.s3!.entrypoint)).toContain('-bucket=herald-archive');
    for (const name of ['web', 'worker']) expect(services[name]!.depends_on?.s3, name).toEqual({ condition: 'service_healthy' });
  });

  it('publishes ports on 127.0.0.1 only', () => {
    const ports = Object.values(services).flatMap((s) => s.ports ?? []);
    expect(ports.length).toBeGreaterThan(0);
    for (const port of ports) expect(port).toMatch(/^127\.0\.0\.1:\d+:\d+$/);
  });

  it('leaves the provider URLs unset unless .env points them at the sandbox', () => {
    for (const name of ['POSTMARK_API_URL', 'TWILIO_API_URL']) {
      expect(interpolations(heraldEnv[name]!), name).toEqual([{ name, required: false, fallback: '' }]);
      expect(example[name]).toBe('http://sandbox:4010');
    }
    expect(services.sandbox!.profiles).toEqual(['sandbox']);
    expect(example.COMPOSE_PROFILES).toBe('sandbox');
  });

  it('runs Herald from the Dockerfile image, not from the source mounted into a bare node image', () => {
    for (const name of ['web', 'worker', 'sandbox']) {
      const service = services[name]!;
      expect(service.image, name).toBeUndefined();
      expect(service.volumes ?? [], name).toEqual([]);
    }
    for (const name of ['web', 'worker']) {
      expect(services[name]!.build, name).toEqual({ context: '.', target: 'herald' });
      expect(services[name]!.command?.[1], name).toMatch(/^dist\/src\//);
    }
    expect(heraldEnv).toBe(services.worker!.environment);
  });

  it("checks the worker's health on its own listener (HERALD_WORKER_METRICS_PORT)", () => {
    const port = heraldEnv.HERALD_WORKER_METRICS_PORT;
    expect(port).toBe('9464');
    expect(services.worker!.healthcheck?.test?.join(' ')).toContain(`http://127.0.0.1:${port}/healthz`);
  });

  it("runs the emulators from the Dockerfile's sandbox target, never from Herald's image", () => {
    expect(services.sandbox!.build).toEqual({ context: '.', target: 'sandbox' });
    expect(services.sandbox!.command).toEqual(['node', 'packages/sandbox/dist/main.js']);
    // None of Herald's variables: the emulators take any credentials.
    expect(services.sandbox!.environment).toEqual({ PORT: '4010', HOST: '0.0.0.0' });
  });
});

describe('docker-compose.yml gives Herald no more than it needs', () => {
  it('runs Herald with NODE_ENV=production unless .env says otherwise, and the sandbox lines of .env.example do', () => {
    expect(interpolations(heraldEnv.NODE_ENV!)).toEqual([{ name: 'NODE_ENV', required: false, fallback: 'production' }]);
    expect(example.NODE_ENV).toBe('development');
    expect(example.HERALD_PROVIDERS).toBe('sandbox');
  });

  it("reaches the archive as the S3 server's one identity, allowed the archive bucket alone", () => {
    const [id] = interpolations(heraldEnv.AWS_ACCESS_KEY_ID!);
    const [secret] = interpolations(heraldEnv.AWS_SECRET_ACCESS_KEY!);
    expect(id!.name).toBe('HERALD_S3_ACCESS_KEY');
    expect(secret!.name).toBe('HERALD_S3_SECRET_KEY');
    // The identities file the s3 service writes at start-up, as the shell will see it.
    const script = services.s3!.entrypoint!.at(-1)!;
    const json = /<<JSON\n([\s\S]*?)\nJSON\n/.exec(script)?.[1];
    const identities = JSON.parse(json!.replace('$$HERALD_S3_ACCESS_KEY', 'access').replace('$$HERALD_S3_SECRET_KEY', 'secret')) as {
      identities: { name: string; credentials: unknown[]; actions: string[] }[];
    };
    expect(identities.identities).toEqual([
      {
        name: 'herald',
        credentials: [{ accessKey: 'access', secretKey: 'secret' }],
        actions: ['Read:herald-archive', 'Write:herald-archive', 'List:herald-archive'],
      },
    ]);
    expect(script).toMatch(/-s3\.config=\/etc\/seaweedfs\/s3\.json/);
    expect(example.HERALD_S3_SECRET_KEY).toBe('');
  });
});
