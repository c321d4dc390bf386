import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Pool } from 'pg';
import { ApiClientSession, commandApiFixture } from './support/command-api';
import { HttpResult } from './support/http';
import { searchSettings, searchTimeout } from './support/search';
import { testEnv } from './support/test-env';

/** Creates sent three times at once, among the burst's. */
const RACED = 4;

/**
 * A database session that dies under a request (pg_terminate_backend, a failover, a restarted
 * pooler) is not an outage: the next connection works. Since every command runs in one transaction
 * under its idempotency key, the API runs it again on a fresh connection (if the first attempt did
 * commit, the second one finds the receipt and replays it), so the client gets its answer, never a
 * 5xx. A real outage (test/database-trouble-is-never-not-found) still ends in a 503 to retry.
 *
 * Each run sends a burst of creates (a few of them three times at once), cancels and reads while
 * every session of the command API is terminated at random moments; the checker then counts, per
 * key, the orders and receipts.
 * 6 bursts in `npm test`, 60 in `npm run test:faults`. Replay a failure: FC_SEED=… FC_PATH=…
 */
describe('a database session lost under a request', () => {
  const fixture = commandApiFixture();
  const db = fixture.db;
  // A pool: the faults of one burst fire concurrently, and one client would queue their queries (deprecated in pg).
  const observer = new Pool({ connectionString: testEnv.ordersUrl, application_name: 'lost-session-test', max: 4 });
  afterAll(() => observer.end());

  /**
   * Terminates every session the command API has open now; how many it ended that were busy: running a
   * statement or inside a transaction, a request's (idle ones, and the key cache's LISTEN, are ended too).
   */
  async function terminateApiSessions(): Promise<number> {
    const { rows } = await observer.query<{ busy: number }>(/* sql */ `
      SELECT count(*) FILTER (WHERE ended AND state <> 'idle')::int AS busy
      FROM (SELECT state, pg_terminate_backend(pid) AS ended FROM pg_stat_activity
            WHERE datname = current_database() AND application_name = 'command-api') AS sessions`);
    return rows[0].busy;
  }

  it(
    'is retried on a fresh connection: every request answered without a 5xx, one order per key',
    async () => {
      let busyTerminated = 0;

      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.integer({ min: 0, max: 60 }), { minLength: 1, maxLength: 4 }), // when the sessions die, ms into the burst
          fc.integer({ min: 20, max: 40 }), // creates in the burst
          async (faultAt, creates) => {
            const { tenantId, apiKey } = await db.tenant();
            const client = new ApiClientSession(fixture.api.url, apiKey);
            const placed = await client.createOrder(`seed-${randomUUID()}`, { sku: 'SEED', quantity: 1 });
            expect(placed.status).toBe(201);
            const orderId = placed.body.id as string;

            const keys = Array.from({ length: creates }, () => `k-${randomUUID()}`);
            const cancelKey = `c-${randomUUID()}`;
            const create = async (key: string, i: number) =>
              [key, await client.createOrder(key, { sku: `SKU-${i}`, quantity: 1 + (i % 5) })] as [string, HttpResult];
            const requests: Promise<[string, HttpResult]>[] = [
              ...keys.map(create),
              // Racing duplicates of the first keys: each waits for the first request's receipt, then reads it.
              ...keys.slice(0, RACED).flatMap((key, i) => [create(key, i), create(key, i)]),
              ...[0, 1, 2].map(
                async () => [cancelKey, await client.cancelOrder(orderId, cancelKey, { reason: 'lost sessions' })] as [string, HttpResult],
              ),
              ...[0, 1, 2].map(async () => ['read', await client.get(`/v1/orders/${orderId}`)] as [string, HttpResult]),
            ];
            const faults = faultAt.map(
              (ms) => new Promise<number>((resolve, reject) => setTimeout(() => terminateApiSessions().then(resolve, reject), ms)),
            );
            const answers = await Promise.all(requests);
            busyTerminated += (await Promise.all(faults)).reduce((a, b) => a + b, 0);

            const serverErrors = answers.filter(([, r]) => r.status >= 500).map(([key, r]) => `${key}: ${r.status} ${r.body?.type ?? ''}`);
            expect(serverErrors).toEqual([]);
            for (const [key, result] of answers) {
              if (key === 'read') expect(result.status).toBe(200);
              else if (key === cancelKey) expect(result.status).toBe(200);
              else expect(result.status).toBe(201);
            }

            // One order, one receipt and one event per create key; the cancel once, its three answers alike.
            const { rows } = await observer.query<{ key: string; orders: number }>(
              /* sql */ `SELECT r.idempotency_key AS key, count(o.id)::int AS orders
             FROM idempotency_receipts r LEFT JOIN orders o ON o.tenant_id = r.tenant_id AND o.id::text = r.effect_id
             WHERE r.tenant_id = $1 AND r.operation = 'orders.create' AND r.completed_at IS NOT NULL GROUP BY 1`,
              [tenantId],
            );
            expect(rows.length).toBe(creates + 1);
            expect(rows.filter((row) => row.orders !== 1)).toEqual([]);
            expect(await db.counts(tenantId)).toEqual({ orders: creates + 1, receipts: creates + 2, outbox: creates + 2 });
            const cancels = answers.filter(([key]) => key === cancelKey).map(([, r]) => JSON.stringify(r.body));
            expect(new Set(cancels).size).toBe(1);
            for (const key of keys.slice(0, RACED)) {
              const orders = answers.filter(([sent]) => sent === key).map(([, r]) => r.body.id);
              expect(orders).toHaveLength(3);
              expect(new Set(orders).size).toBe(1);
            }
          },
        ),
        searchSettings({ fast: 6, long: 60 }),
      );
      // The faults hit requests in flight, not only idle connections.
      expect(busyTerminated).toBeGreaterThan(0);
    },
    searchTimeout(180_000),
  );
});
