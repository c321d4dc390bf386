import { spawnSync } from 'node:child_process';
import { ApiClientSession, commandApiFixture } from './support/command-api';
import { entryArgs, startApp } from './support/apps';
import { OrdersDb } from './support/orders-db';

const INJECT = { 'X-Fault-Injection': 'before-commit' };

describe('a failure after the effect, its event and the receipt were written, before COMMIT', () => {
  const suite = commandApiFixture({ FAULT_INJECTION: 'true' });
  const { db } = suite;

  it('rolls back the order, its event and the receipt together; the retry then creates exactly one', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);

    const failed = await client.createOrder('rolled-back', { sku: 'SKU-1', quantity: 1 }, INJECT);
    expect(failed.status).toBe(500);
    expect(failed.body).toMatchObject({ type: '/problems/injected-fault', code: 'FAULT.INJECTED' });
    expect(await db.counts(tenantId)).toEqual({ orders: 0, receipts: 0, outbox: 0 });

    const retried = await client.createOrder('rolled-back', { sku: 'SKU-1', quantity: 1 });
    expect(retried.status).toBe(201);
    expect(retried.headers['idempotent-replayed']).toBeUndefined();
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
  });

  it('rolls back a cancellation the same way', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const order = (await client.createOrder('place', { sku: 'SKU-1', quantity: 1 })).body;

    const failed = await client.cancelOrder(order.id, 'cancel', { reason: 'changed mind' }, INJECT);
    expect(failed.status).toBe(500);
    expect((await client.get(`/v1/orders/${order.id}`)).body.status).toBe('placed');
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });

    const retried = await client.cancelOrder(order.id, 'cancel', { reason: 'changed mind' });
    expect(retried).toMatchObject({ status: 200, body: { status: 'cancelled' } });
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 2, outbox: 2 });
  });
});

describe('the fault injection switch', () => {
  const db = new OrdersDb();
  afterAll(() => db.close());

  it.each(['production', 'development'])('cannot be turned on with NODE_ENV=%s: only tests may ask for it', (nodeEnv) => {
    const result = spawnSync(process.execPath, entryArgs('apps/command-api/src/main.ts'), {
      env: { ...process.env, NODE_ENV: nodeEnv, FAULT_INJECTION: 'true' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/FAULT_INJECTION: is a test-only switch .*: it needs NODE_ENV=test/);
  });

  it('is off by default: the header is ignored and the command commits', async () => {
    const api = await startApp('command-api');
    try {
      const { tenantId, apiKey } = await db.tenant();
      const response = await new ApiClientSession(api.url, apiKey).createOrder('k', { sku: 'A', quantity: 1 }, INJECT);
      expect(response.status).toBe(201);
      expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
    } finally {
      await api.stop();
    }
  });
});
