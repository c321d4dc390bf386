import { Client } from 'pg';
import { ApiClientSession, commandApiFixture } from './support/command-api';
import { RunningApp, startApp } from './support/apps';
import { HttpResult } from './support/http';
import { sample, scrape } from './support/observe';
import { OrdersDb } from './support/orders-db';
import { testEnv } from './support/test-env';

const ORDER = { sku: 'SKU-1', quantity: 2 };

/** What a client compares between two answers to one key: everything but the replay marker. */
function answer(reply: HttpResult) {
  const { location, 'idempotency-expires': expires } = reply.headers;
  return { status: reply.status, location, expires, body: reply.body };
}

async function cacheHits(api: RunningApp, operation: string): Promise<number> {
  return sample((await scrape(api)).text, 'idempotency_replay_cache_hits_total', { operation });
}

describe('a retry of a committed command is answered from the receipts the process holds (ReplayCache)', () => {
  const db = new OrdersDb();
  afterAll(() => db.close());

  it('a retry gets its stored answer, and a reused key its 422, without the database: at once while a transaction holds the receipt', async () => {
    const api = await startApp('command-api', { IDEMPOTENCY_LOCK_TIMEOUT_MS: '500' });
    const uncached = await startApp('command-api', { IDEMPOTENCY_LOCK_TIMEOUT_MS: '500', IDEMPOTENCY_REPLAY_CACHE_SECONDS: '0' });
    const holder = new Client({ connectionString: testEnv.ordersUrl });
    await holder.connect();
    try {
      const { tenantId, apiKey } = await db.tenant();
      const client = new ApiClientSession(api.url, apiKey);
      const placed = await client.createOrder('place', ORDER);
      expect(placed.status).toBe(201);
      const cancelled = await client.cancelOrder(placed.body.id, 'cancel', { reason: 'customer asked' });
      expect(cancelled.status).toBe(200);
      // The other process answers the same key from the database.
      expect((await new ApiClientSession(uncached.url, apiKey).createOrder('place', ORDER)).headers['idempotent-replayed']).toBe('true');

      // An uncommitted change to both receipts: a claim of either key waits for it (up to the lock timeout, then 409).
      await holder.query('BEGIN');
      await holder.query('UPDATE idempotency_receipts SET region = region WHERE tenant_id = $1', [tenantId]);
      const started = Date.now();
      const replayed = await client.createOrder('place', ORDER);
      expect(replayed.headers['idempotent-replayed']).toBe('true');
      expect(answer(replayed)).toEqual(answer(placed));
      const cancelReplayed = await client.cancelOrder(placed.body.id, 'cancel', { reason: 'customer asked' });
      expect(cancelReplayed.headers['idempotent-replayed']).toBe('true');
      expect(answer(cancelReplayed)).toEqual(answer(cancelled));
      const reused = await client.createOrder('place', { ...ORDER, quantity: 3 });
      expect(reused.status).toBe(422);
      expect(reused.body).toMatchObject({ code: 'IDEMPOTENCY.KEY_REUSED' });
      expect(Date.now() - started).toBeLessThan(450); // none of them waited for the lock
      expect(await cacheHits(api, 'orders.create')).toBe(2);
      expect(await cacheHits(api, 'orders.cancel')).toBe(1);

      // A process that does not hold the receipt asks the database, and waits like any duplicate.
      const waited = await new ApiClientSession(uncached.url, apiKey).createOrder('place', ORDER);
      expect(waited.status).toBe(409);
      expect(waited.body).toMatchObject({ code: 'IDEMPOTENCY.IN_PROGRESS' });
      expect(await cacheHits(uncached, 'orders.create')).toBe(0);
      await holder.query('ROLLBACK');
      expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 2, outbox: 2 });
    } finally {
      await holder.end();
      await Promise.all([api.stop(), uncached.stop()]);
    }
  });

  describe('never past the receipt expiry', () => {
    const suite = commandApiFixture({ IDEMPOTENCY_RETENTION_SECONDS: '2', RECEIPT_SWEEP_INTERVAL_SECONDS: '0' });

    it('retries hammering one key across its expiry see the first order, then one new order, and never the first again', async () => {
      const { tenantId, apiKey } = await suite.db.tenant();
      const client = new ApiClientSession(suite.api.url, apiKey);
      const first = await client.createOrder('hammered', ORDER);
      expect(first.status).toBe(201);
      const hitsBefore = await cacheHits(suite.api, 'orders.create');
      const until = Date.parse(first.body.createdAt) + 3_000;
      const replies: { sent: number; received: number; id: string; status: number }[] = [];
      await Promise.all(
        Array.from({ length: 6 }, async () => {
          while (Date.now() < until) {
            const sent = performance.now();
            const reply = await client.createOrder('hammered', ORDER);
            replies.push({ sent, received: performance.now(), id: reply.body.id, status: reply.status });
          }
        }),
      );
      expect(replies.filter((reply) => reply.status !== 201)).toEqual([]);
      const ids = new Set(replies.map((reply) => reply.id));
      expect(ids.size).toBe(2);
      expect(ids.has(first.body.id)).toBe(true);
      // Once a reply showed the new order, no request sent after it may see the first one.
      const firstNewSeen = Math.min(...replies.filter((reply) => reply.id !== first.body.id).map((reply) => reply.received));
      expect(replies.filter((reply) => reply.id === first.body.id && reply.sent > firstNewSeen)).toEqual([]);
      expect(await suite.db.counts(tenantId)).toEqual({ orders: 2, receipts: 1, outbox: 2 });
      // The cache was in play on both sides of the boundary.
      expect((await cacheHits(suite.api, 'orders.create')) - hitsBefore).toBeGreaterThan(replies.length / 2);
    });
  });

  describe('a receipt changed by hand', () => {
    const suite = commandApiFixture({ IDEMPOTENCY_REPLAY_CACHE_SECONDS: '1' });

    it('goes unseen by a process holding it for at most IDEMPOTENCY_REPLAY_CACHE_SECONDS', async () => {
      const { tenantId, apiKey } = await suite.db.tenant();
      const client = new ApiClientSession(suite.api.url, apiKey);
      const sent = Date.now();
      const first = await client.createOrder('edited', ORDER);
      await suite.db.pool.query(`DELETE FROM idempotency_receipts WHERE tenant_id = $1 AND idempotency_key = 'edited'`, [tenantId]);
      const held = await client.createOrder('edited', ORDER);
      expect(held.status).toBe(201);
      // Held from after `sent` for 1 s: a retry answered before then is the deleted receipt's replay (the documented bound).
      if (Date.now() < sent + 1_000) expect(held.body.id).toBe(first.body.id);

      await new Promise((resolve) => setTimeout(resolve, 1_100));
      const afterBound = await client.createOrder('edited', ORDER);
      expect(afterBound.status).toBe(201);
      expect(afterBound.headers['idempotent-replayed']).toBeUndefined();
      expect(afterBound.body.id).not.toBe(first.body.id);
    });
  });
});
