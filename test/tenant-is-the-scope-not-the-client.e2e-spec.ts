import { Operations } from '@app/contracts';
import { ApiClientSession, commandApiFixture } from './support/command-api';

/**
 * An idempotency key belongs to the tenant, not to the credential that sent it (docs/idempotency.md,
 * "Whose key is it"): a tenant's service that rotates its API key, or runs several clients, must have
 * its retries replayed. What a client may see still depends on its own permissions.
 */
describe('the tenant is the scope, not the client', () => {
  const suite = commandApiFixture();
  const { db } = suite;

  it("another client of the same tenant replays the first one's action, and a different request with its key is a 422", async () => {
    const { tenantId, apiKey } = await db.tenant();
    const rotated = await db.client(tenantId, [Operations.createOrder]);
    const first = new ApiClientSession(suite.api.url, apiKey);
    const second = new ApiClientSession(suite.api.url, rotated.apiKey);

    const created = await first.createOrder('shared-key', { sku: 'SKU-1', quantity: 2 });
    const replayed = await second.createOrder('shared-key', { quantity: 2, sku: 'SKU-1' });
    expect(created.status).toBe(201);
    expect(replayed).toMatchObject({ status: 201, headers: { 'idempotent-replayed': 'true', location: created.headers.location } });
    expect(replayed.body).toEqual(created.body);
    const changed = await second.createOrder('shared-key', { sku: 'SKU-1', quantity: 3 });
    expect(changed).toMatchObject({ status: 422, body: { code: 'IDEMPOTENCY.KEY_REUSED' } });
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
  });

  it('a client without orders.read learns no order id from a taken customerRef, first time or replayed; a reader does', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const reader = new ApiClientSession(suite.api.url, apiKey);
    const writer = new ApiClientSession(suite.api.url, (await db.client(tenantId, [Operations.createOrder])).apiKey);
    const existing = await reader.createOrder('first', { sku: 'SKU-1', quantity: 1, customerRef: 'po-4711' });

    for (const attempt of [1, 2]) {
      const refused = await writer.createOrder('second', { sku: 'SKU-1', quantity: 1, customerRef: 'po-4711' });
      expect(refused).toMatchObject({ status: 409, body: { code: 'ORDER.CUSTOMER_REF_USED' } });
      expect(refused.headers['idempotent-replayed']).toBe(attempt === 2 ? 'true' : undefined);
      expect(refused.body).not.toHaveProperty('orderId');
      expect(refused.text).not.toContain(existing.body.id);
    }
    // The stored answer is whole: a client that may read orders, replaying the same key, sees the id.
    const replayedToReader = await reader.createOrder('second', { sku: 'SKU-1', quantity: 1, customerRef: 'po-4711' });
    expect(replayedToReader).toMatchObject({ status: 409, body: { orderId: existing.body.id } });
  });

  it("a client allowed to cancel but not to read learns no order's fields from an already-cancelled answer", async () => {
    const { tenantId, apiKey } = await db.tenant();
    const reader = new ApiClientSession(suite.api.url, apiKey);
    const canceller = new ApiClientSession(suite.api.url, (await db.client(tenantId, [Operations.cancelOrder])).apiKey);
    const order = (await reader.createOrder('place', { sku: 'SKU-SECRET', quantity: 7, customerRef: 'po-secret' })).body;
    expect((await reader.cancelOrder(order.id, 'cancel-1', { reason: 'first' })).status).toBe(200);

    const again = await canceller.cancelOrder(order.id, 'cancel-2', { reason: 'second' });
    expect(again).toMatchObject({ status: 409, body: { code: 'ORDER.ALREADY_CANCELLED' } });
    expect(again.body).not.toHaveProperty('order');
    expect(again.text).not.toMatch(/SKU-SECRET|po-secret|"quantity"/);
    const asReader = await reader.cancelOrder(order.id, 'cancel-2', { reason: 'second' });
    expect(asReader).toMatchObject({ status: 409, body: { order: { id: order.id, sku: 'SKU-SECRET' } } });
  });
});
