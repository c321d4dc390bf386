import fc from 'fast-check';
import { ApiClientSession, commandApiFixture } from './support/command-api';
import { searchSettings } from './support/search';

/** The reference experiment's first finding, over HTTP and PostgreSQL: racing duplicates make one effect. */
describe('racing duplicates of one command', () => {
  const suite = commandApiFixture({ DATABASE_POOL_SIZE: '70' });
  const { db } = suite;

  it.each([8, 64])('%i concurrent identical requests, each on its own connection: 1 created, the rest replayed', async (n) => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);

    const responses = await Promise.all(Array.from({ length: n }, () => client.createOrder('intent-a', { sku: 'SKU-1', quantity: 2 })));

    expect(responses.map((r) => r.status)).toEqual(Array(n).fill(201));
    const created = responses.filter((r) => r.headers['idempotent-replayed'] === undefined);
    const replayed = responses.filter((r) => r.headers['idempotent-replayed'] === 'true');
    expect(created).toHaveLength(1);
    expect(replayed).toHaveLength(n - 1);
    expect(new Set(responses.map((r) => r.text))).toEqual(new Set([created[0].text]));
    expect(new Set(responses.map((r) => r.headers.location))).toEqual(new Set([`/v1/orders/${created[0].body.id}`]));
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
  });

  /**
   * Different keys are different actions, so each is executed; the order is what they race for. One
   * cancel changes it and emits OrderCancelled, every other one finds it cancelled (409): never two
   * events for one cancellation, whichever cancels reached the order before the first committed.
   */
  it('racing cancels of one order under different keys: one cancels it, the others find it cancelled', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 2, max: 12 }), fc.boolean(), async (n, sameReason) => {
        const placed = await client.createOrder(`place-${n}-${Math.random()}`, { sku: 'SKU-1', quantity: 1 });
        expect(placed.status).toBe(201);
        const id: string = placed.body.id;
        const cancels = await Promise.all(
          Array.from({ length: n }, (_, i) =>
            client.cancelOrder(id, `cancel-${id}-${i}`, { reason: sameReason ? 'racing' : `racing ${i}` }),
          ),
        );
        const statuses = cancels.map((r) => r.status).sort();
        expect(statuses).toEqual([200, ...Array(n - 1).fill(409)]);
        for (const refused of cancels.filter((r) => r.status === 409)) expect(refused.body.code).toBe('ORDER.ALREADY_CANCELLED');
        const { rows } = await db.pool.query(
          /* sql */ `SELECT event_type, count(*)::int AS n FROM outbox_messages WHERE tenant_id = $1 AND message_key = $2 GROUP BY 1 ORDER BY 1`,
          [tenantId, id],
        );
        expect(rows).toEqual([
          { event_type: 'OrderCancelled', n: 1 },
          { event_type: 'OrderPlaced', n: 1 },
        ]);
      }),
      searchSettings({ fast: 10, long: 100 }),
    );
  });
});
