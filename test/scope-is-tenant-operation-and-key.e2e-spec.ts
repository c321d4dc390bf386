import { ApiClientSession, commandApiFixture } from './support/command-api';

/** The reference experiment's second finding: meaning conflicts; tenant, operation and key each separate scopes. */
describe('the scope of an idempotency key', () => {
  const suite = commandApiFixture();
  const { db } = suite;

  it('the same key with a changed quantity is a declared conflict and changes nothing', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    await client.createOrder('intent-a', { sku: 'SKU-1', quantity: 2 });

    const changed = await client.createOrder('intent-a', { sku: 'SKU-1', quantity: 3 });
    expect(changed.status).toBe(422);
    expect(changed.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(changed.body).toMatchObject({ type: '/problems/idempotency-key-reused', code: 'IDEMPOTENCY.KEY_REUSED' });
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
  });

  it('whitespace and field order are not meaning: a reformatted body replays', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const first = await client.createOrder('intent-a', '{"sku":"SKU-1","quantity":2}', { 'Content-Type': 'application/json' });
    const reformatted = await client.createOrder('intent-a', '{ "quantity" : 2,\n "sku": "SKU-1", "customerRef": null }', {
      'Content-Type': 'application/json',
    });
    expect(reformatted.status).toBe(201);
    expect(reformatted.headers['idempotent-replayed']).toBe('true');
    expect(reformatted.text).toBe(first.text);
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
  });

  it('a different tenant, operation or key is a separate scope with its own effect', async () => {
    const north = await db.tenant();
    const south = await db.tenant();
    const northClient = new ApiClientSession(suite.api.url, north.apiKey);
    const southClient = new ApiClientSession(suite.api.url, south.apiKey);

    const original = await northClient.createOrder('intent-a', { sku: 'SKU-1', quantity: 2 });
    const otherTenant = await southClient.createOrder('intent-a', { sku: 'SKU-1', quantity: 2 });
    const otherKey = await northClient.createOrder('intent-b', { sku: 'SKU-1', quantity: 2 });
    const otherOperation = await northClient.cancelOrder(original.body.id, 'intent-a', { reason: 'same key, other operation' });

    for (const response of [original, otherTenant, otherKey]) {
      expect(response.status).toBe(201);
      expect(response.headers['idempotent-replayed']).toBeUndefined();
    }
    expect(new Set([original.body.id, otherTenant.body.id, otherKey.body.id]).size).toBe(3);
    expect(otherOperation).toMatchObject({ status: 200, body: { id: original.body.id, status: 'cancelled' } });
    expect(otherOperation.headers['idempotent-replayed']).toBeUndefined();

    expect(await db.counts(north.tenantId)).toEqual({ orders: 2, receipts: 3, outbox: 3 });
    expect(await db.counts(south.tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
    const { rows } = await db.pool.query(
      'SELECT tenant_id, operation, idempotency_key, region FROM idempotency_receipts WHERE tenant_id = ANY($1)',
      [[north.tenantId, south.tenantId]],
    );
    const byScope = (a: Record<string, string>, b: Record<string, string>) =>
      `${a.tenant_id}|${a.operation}|${a.idempotency_key}` < `${b.tenant_id}|${b.operation}|${b.idempotency_key}` ? -1 : 1;
    expect(rows.sort(byScope)).toEqual(
      [
        { tenant_id: north.tenantId, operation: 'orders.cancel', idempotency_key: 'intent-a', region: 'local' },
        { tenant_id: north.tenantId, operation: 'orders.create', idempotency_key: 'intent-a', region: 'local' },
        { tenant_id: north.tenantId, operation: 'orders.create', idempotency_key: 'intent-b', region: 'local' },
        { tenant_id: south.tenantId, operation: 'orders.create', idempotency_key: 'intent-a', region: 'local' },
      ].sort(byScope),
    );
  });
});
