import { ApiClientSession, commandApiFixture } from './support/command-api';

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
});
