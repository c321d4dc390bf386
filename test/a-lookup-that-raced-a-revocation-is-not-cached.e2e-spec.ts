import fc from 'fast-check';
import { Client } from 'pg';
import { PinoLogger } from 'nestjs-pino';
import { DataSource, QueryRunner } from 'typeorm';
import { ApiClient } from '@app/api-clients';
import { postgresOptions } from '@app/platform';
import { API_CLIENTS_CHANNEL, ApiClientCache } from '../apps/command-api/src/auth/api-client-cache';
import { OrdersDb } from './support/orders-db';
import { searchSettings } from './support/search';
import { testEnv } from './support/test-env';

/** How long a NOTIFY takes from the commit to a listener of the same server, at most (as in revoked-keys-stop-at-once). */
const SETTLE_MS = 250;

/**
 * The command API's key cache empties itself on each api_clients NOTIFY, but a lookup can be in flight
 * across one: it read the key as active, the revocation committed and its NOTIFY emptied the cache,
 * and only then did the lookup's answer come back. Cached then, the revoked key would be served from
 * memory for API_KEY_CACHE_SECONDS (10 minutes here). The request that began before the revocation may
 * be let in; no later one may. Here the cache runs on a real database and listens for real, and the
 * lookups' answers are held back after PostgreSQL gave them (the only thing the test changes: when
 * the answer reaches the cache). Searched: how many lookups are in flight, and whether the revocation
 * comes while they are held or after they came back.
 */
describe('a key lookup that raced its revocation is never cached', () => {
  const db = new OrdersDb();
  const dataSource = new DataSource(
    postgresOptions({ url: testEnv.ordersUrl, applicationName: 'e2e-key-race', entities: [ApiClient], poolSize: 6 }),
  );
  const listener = new Client({ connectionString: testEnv.ordersUrl });
  const silent = { setContext: () => undefined, info: () => undefined, warn: () => undefined } as unknown as PinoLogger;
  /** API_KEY_CACHE_SECONDS: 10 minutes, so only the NOTIFY can empty the cache within a run. */
  const config = { get: () => 600 } as unknown as ConstructorParameters<typeof ApiClientCache>[2];
  let cache: ApiClientCache;
  /** While set, a lookup's answer waits for it after PostgreSQL gave it. */
  let held: Promise<void> | undefined;

  beforeAll(async () => {
    await dataSource.initialize();
    const createRunner = dataSource.createQueryRunner.bind(dataSource);
    dataSource.createQueryRunner = (...args: Parameters<DataSource['createQueryRunner']>): QueryRunner => {
      const runner = createRunner(...args);
      const query = runner.query.bind(runner);
      runner.query = (async (sql: string, ...rest: unknown[]) => {
        const answer = await (query as (...all: unknown[]) => Promise<unknown>)(sql, ...rest);
        if (held && sql.includes('FROM api_clients')) await held;
        return answer;
      }) as QueryRunner['query'];
      return runner;
    };
    cache = new ApiClientCache(dataSource, silent, config);
    await cache.onApplicationBootstrap();
    await listener.connect();
    await listener.query(`LISTEN ${API_CLIENTS_CHANNEL}`);
  });
  afterAll(async () => {
    await cache.beforeApplicationShutdown();
    await listener.end();
    await dataSource.destroy();
    await db.close();
  });

  /** Resolves once the revocation's NOTIFY reached a listener, and a moment later (it reached the cache's too). */
  function notified(): Promise<void> {
    return new Promise<void>((resolve) => listener.once('notification', () => resolve())).then(
      () => new Promise((resolve) => setTimeout(resolve, SETTLE_MS)),
    );
  }

  it('the requests that began before the revocation may get in; every later one is refused', async () => {
    const plans = fc.record({ inFlight: fc.integer({ min: 1, max: 4 }), revokeWhileHeld: fc.boolean() });
    await fc.assert(
      fc.asyncProperty(plans, async ({ inFlight, revokeWhileHeld }) => {
        const { tenantId, apiKey, clientId } = await db.tenant();
        let release!: () => void;
        held = new Promise<void>((resolve) => (release = resolve));
        try {
          const lookups = Array.from({ length: inFlight }, () => cache.find(apiKey));
          if (revokeWhileHeld) {
            // Their queries are answered (the key active), their answers held: give them the time to get there.
            await new Promise((resolve) => setTimeout(resolve, 100));
          } else {
            release();
            for (const found of await Promise.all(lookups)) expect(found?.tenantId).toBe(tenantId);
          }
          const revoked = notified();
          await db.pool.query('UPDATE api_clients SET revoked_at = now() WHERE id = $1', [clientId]);
          await revoked;
          release();
          // Begun before the revocation: either answer is right.
          for (const found of await Promise.all(lookups)) expect([tenantId, undefined]).toContain(found?.tenantId);
        } finally {
          release();
          held = undefined;
        }
        expect(await cache.find(apiKey)).toBeNull();
      }),
      searchSettings({ fast: 10, long: 100 }),
    );
  });
});
