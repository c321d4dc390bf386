import { randomBytes, randomUUID } from 'node:crypto';
import { ApiClientSession, commandApiFixture } from './support/command-api';
import { HttpResult } from './support/http';
import { CANONICAL_UUID_PATTERN } from '@app/contracts';

const PROBLEM_JSON = /^application\/problem\+json/;
const UUID = CANONICAL_UUID_PATTERN;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/;

/**
 * The rest of the command contract over HTTP and PostgreSQL: cancelling (once, replayed, refused as
 * already cancelled or unknown, both stored and replayed), tenant-scoped reads, the customerRef rule,
 * the receipt endpoint, and the outbox rows each command commits with its effect.
 */
describe('cancelling and reading orders', () => {
  const suite = commandApiFixture();
  const { db } = suite;

  async function placedOrder(client: ApiClientSession, body: object = { sku: 'SKU-1', quantity: 2 }): Promise<HttpResult> {
    const placed = await client.createOrder(`place-${randomUUID()}`, body);
    expect(placed.status).toBe(201);
    return placed;
  }

  function outboxRows(tenantId: string) {
    return db.pool
      .query(
        `SELECT topic, message_key, event_type, event_version, tenant_id, payload, headers
         FROM outbox_messages WHERE tenant_id = $1 ORDER BY sequence`,
        [tenantId],
      )
      .then((result) => result.rows);
  }

  function expectStoredProblem(response: HttpResult, status: number, type: string, code: string) {
    expect(response.status).toBe(status);
    expect(response.headers['content-type']).toMatch(PROBLEM_JSON);
    expect(response.body).toMatchObject({ type, status, code, title: expect.any(String) });
    expect(response.headers['idempotency-expires']).toEqual(expect.any(String));
  }

  it('cancels once: 200 with the cancelled order and one OrderCancelled event; the same key replays it', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const placed = await placedOrder(client);
    const orderId: string = placed.body.id;

    const cancelled = await client.cancelOrder(orderId, 'cancel-1', { reason: 'customer changed their mind' });
    expect(cancelled.status).toBe(200);
    expect(cancelled.headers['content-type']).toMatch(/^application\/json/);
    expect(cancelled.headers['idempotent-replayed']).toBeUndefined();
    expect(new Date(cancelled.headers['idempotency-expires'] as string).getTime()).toBeGreaterThan(Date.now());
    expect(cancelled.body).toEqual({
      ...placed.body,
      status: 'cancelled',
      cancelledAt: expect.stringMatching(ISO),
      cancelReason: 'customer changed their mind',
    });

    const replayed = await client.cancelOrder(orderId, 'cancel-1', { reason: 'customer changed their mind' });
    expect(replayed.status).toBe(200);
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.text).toBe(cancelled.text);
    expect(replayed.headers['idempotency-expires']).toBe(cancelled.headers['idempotency-expires']);

    expect((await client.get(`/v1/orders/${orderId}`)).body).toEqual(cancelled.body);
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 2, outbox: 2 });
    const [, event] = await outboxRows(tenantId);
    expect(event).toMatchObject({
      topic: 'orders.order-events.v1',
      event_type: 'OrderCancelled',
      event_version: 1,
      message_key: orderId,
      tenant_id: tenantId,
      payload: { orderId, tenantId, reason: 'customer changed their mind', cancelledAt: cancelled.body.cancelledAt },
      headers: { traceparent: expect.stringMatching(TRACEPARENT) },
    });
  });

  it('a second cancel with a new key is 409 order-already-cancelled, stored and replayed; no second event', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const orderId: string = (await placedOrder(client)).body.id;
    const first = await client.cancelOrder(orderId, 'cancel-1', { reason: 'first' });
    expect(first.status).toBe(200);

    const again = await client.cancelOrder(orderId, 'cancel-2', { reason: 'second' });
    expectStoredProblem(again, 409, '/problems/order-already-cancelled', 'ORDER.ALREADY_CANCELLED');
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.body.order).toEqual(first.body);

    const replayed = await client.cancelOrder(orderId, 'cancel-2', { reason: 'second' });
    expectStoredProblem(replayed, 409, '/problems/order-already-cancelled', 'ORDER.ALREADY_CANCELLED');
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.text).toBe(again.text);

    // The same key with another reason is another request: 422, nothing changes.
    const reused = await client.cancelOrder(orderId, 'cancel-2', { reason: 'third' });
    expect(reused.status).toBe(422);
    expect(reused.body).toMatchObject({ type: '/problems/idempotency-key-reused' });

    expect((await client.get(`/v1/orders/${orderId}`)).body).toMatchObject({ status: 'cancelled', cancelReason: 'first' });
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 3, outbox: 2 });
    expect((await outboxRows(tenantId)).map((row) => row.event_type)).toEqual(['OrderPlaced', 'OrderCancelled']);

    const receipt = await client.get('/v1/idempotency-receipts/orders.cancel/cancel-2');
    expect(receipt.body).toMatchObject({ status: 'completed', responseStatus: 409, effect: null });
  });

  it('cancelling an unknown order is 404, stored and replayed, with a receipt that shows it', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const unknown = randomUUID();

    const missing = await client.cancelOrder(unknown, 'cancel-unknown', { reason: 'no such order' });
    expectStoredProblem(missing, 404, '/problems/order-not-found', 'ORDER.NOT_FOUND');
    expect(missing.headers['idempotent-replayed']).toBeUndefined();

    const replayed = await client.cancelOrder(unknown, 'cancel-unknown', { reason: 'no such order' });
    expectStoredProblem(replayed, 404, '/problems/order-not-found', 'ORDER.NOT_FOUND');
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.text).toBe(missing.text);

    expect(await db.counts(tenantId)).toEqual({ orders: 0, receipts: 1, outbox: 0 });
    const receipt = await client.get('/v1/idempotency-receipts/orders.cancel/cancel-unknown');
    expect(receipt.status).toBe(200);
    expect(receipt.body).toMatchObject({
      operation: 'orders.cancel',
      key: 'cancel-unknown',
      status: 'completed',
      responseStatus: 404,
      effect: null,
    });
    // Kept IDEMPOTENCY_RETENTION_SECONDS_NOT_FOUND (60 s by default), not the operation's day: computed again
    // it is the same answer, and a flood of made-up ids must not leave day-long receipts.
    const keptMs = Date.parse(receipt.body.expiresAt) - Date.parse(receipt.body.createdAt);
    expect(keptMs).toBeGreaterThan(55_000);
    expect(keptMs).toBeLessThanOrEqual(60_000);
  });

  it("cancelling another tenant's order is the same 404, and that order stays placed", async () => {
    const owner = await db.tenant();
    const intruder = await db.tenant();
    const ownerClient = new ApiClientSession(suite.api.url, owner.apiKey);
    const intruderClient = new ApiClientSession(suite.api.url, intruder.apiKey);
    const placed = await placedOrder(ownerClient);
    const orderId: string = placed.body.id;

    const refused = await intruderClient.cancelOrder(orderId, 'cancel-theirs', { reason: 'not mine' });
    expectStoredProblem(refused, 404, '/problems/order-not-found', 'ORDER.NOT_FOUND');
    const unknown = await intruderClient.cancelOrder(randomUUID(), 'cancel-nothing', { reason: 'not mine' });
    // Indistinguishable from an order that does not exist, apart from the id it names.
    const masked = (body: Record<string, string>) => ({ ...body, detail: body.detail.replace(UUID_IN_TEXT, '<id>') });
    expect(masked(refused.body)).toEqual(masked(unknown.body));

    const replayed = await intruderClient.cancelOrder(orderId, 'cancel-theirs', { reason: 'not mine' });
    expect(replayed.status).toBe(404);
    expect(replayed.headers['idempotent-replayed']).toBe('true');

    expect((await ownerClient.get(`/v1/orders/${orderId}`)).body).toEqual(placed.body);
    expect(await db.counts(owner.tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
    expect(await db.counts(intruder.tenantId)).toEqual({ orders: 0, receipts: 2, outbox: 0 });

    // The owner can still cancel it.
    const cancelled = await ownerClient.cancelOrder(orderId, 'cancel-theirs', { reason: 'mine' });
    expect(cancelled.status).toBe(200);
    expect(cancelled.headers['idempotent-replayed']).toBeUndefined();
  });

  it('the reply, the stored order and its event agree, with or without a customerRef (without one the order is written with the receipt)', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    for (const body of [
      { sku: 'SKU-A', quantity: 3 },
      { sku: 'SKU-B', quantity: 5, customerRef: `po-${randomUUID()}` },
    ]) {
      const key = `agree-${randomUUID()}`;
      const placed = await client.createOrder(key, body);
      expect(placed.status).toBe(201);
      expect((await client.get(`/v1/orders/${placed.body.id}`)).body).toEqual(placed.body);

      const { rows } = await db.pool.query(
        `SELECT o.created_at <= r.created_at AND r.created_at < o.created_at + interval '1 second' AS placed_as_claimed,
                to_json(o.created_at) #>> '{}' AS created_at,
                m.payload ->> 'placedAt' AS placed_at, r.effect_id
         FROM orders o
         JOIN idempotency_receipts r ON r.tenant_id = o.tenant_id AND r.operation = 'orders.create' AND r.idempotency_key = $2
         JOIN outbox_messages m ON m.message_key = o.id::text AND m.event_type = 'OrderPlaced'
         WHERE o.id = $1`,
        [placed.body.id, key],
      );
      // created_at is when the command-api placed the order, just before the transaction that claimed its
      // receipt began (one clock on this machine); the reply, the stored order and the event show the same millisecond.
      expect(rows).toEqual([
        { placed_as_claimed: true, created_at: expect.any(String), placed_at: placed.body.createdAt, effect_id: placed.body.id },
      ]);
      expect(Date.parse(rows[0].created_at)).toBe(Date.parse(placed.body.createdAt));
    }
    const { rows: counts } = await db.pool.query(`SELECT count(*)::int AS n FROM orders WHERE tenant_id = $1`, [tenantId]);
    expect(counts[0].n).toBe(2);
  });

  it("GET /v1/orders/{id}: 200 for your own order, 404 for another tenant's or an unknown one", async () => {
    const owner = await db.tenant();
    const other = await db.tenant();
    const ownerClient = new ApiClientSession(suite.api.url, owner.apiKey);
    const otherClient = new ApiClientSession(suite.api.url, other.apiKey);
    const placed = await placedOrder(ownerClient, { sku: 'SKU-7', quantity: 7, customerRef: 'po-7' });

    const own = await ownerClient.get(`/v1/orders/${placed.body.id}`);
    expect(own.status).toBe(200);
    expect(own.body).toEqual({
      id: expect.stringMatching(UUID),
      sku: 'SKU-7',
      quantity: 7,
      customerRef: 'po-7',
      status: 'placed',
      createdAt: expect.stringMatching(ISO),
      cancelledAt: null,
      cancelReason: null,
    });
    expect(own.body).toEqual(placed.body);

    const theirs = await otherClient.get(`/v1/orders/${placed.body.id}`);
    const unknown = await otherClient.get(`/v1/orders/${randomUUID()}`);
    for (const response of [theirs, unknown]) {
      expect(response.status).toBe(404);
      expect(response.headers['content-type']).toMatch(PROBLEM_JSON);
      expect(response.body).toMatchObject({ type: '/problems/order-not-found', code: 'ORDER.NOT_FOUND' });
    }
    expect(JSON.stringify(theirs.body)).not.toContain('SKU-7');

    const malformed = await ownerClient.get('/v1/orders/not-a-uuid');
    expect(malformed.status).toBe(400);
    expect(malformed.body).toMatchObject({ type: '/problems/invalid-request' });
  });

  it('customerRef is unique per tenant: a second create is 409 naming the order, stored and replayed; other tenants may use it', async () => {
    const a = await db.tenant();
    const b = await db.tenant();
    const alice = new ApiClientSession(suite.api.url, a.apiKey);
    const bob = new ApiClientSession(suite.api.url, b.apiKey);

    const first = await alice.createOrder('order-1', { sku: 'SKU-1', quantity: 1, customerRef: 'PO-1' });
    expect(first.status).toBe(201);

    const duplicate = await alice.createOrder('order-2', { sku: 'SKU-2', quantity: 5, customerRef: 'PO-1' });
    expectStoredProblem(duplicate, 409, '/problems/customer-ref-already-used', 'ORDER.CUSTOMER_REF_USED');
    expect(duplicate.body.orderId).toBe(first.body.id);
    expect(duplicate.headers.location).toBeUndefined();
    expect(duplicate.headers['idempotent-replayed']).toBeUndefined();

    const replayed = await alice.createOrder('order-2', { sku: 'SKU-2', quantity: 5, customerRef: 'PO-1' });
    expect(replayed.status).toBe(409);
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    expect(replayed.text).toBe(duplicate.text);

    // Still refused after the first order is cancelled: the rule is forever, not "while placed".
    expect((await alice.cancelOrder(first.body.id, 'cancel-1', { reason: 'r' })).status).toBe(200);
    const afterCancel = await alice.createOrder('order-3', { sku: 'SKU-1', quantity: 1, customerRef: 'PO-1' });
    expect(afterCancel.status).toBe(409);
    expect(afterCancel.body.orderId).toBe(first.body.id);

    const elsewhere = await bob.createOrder('order-2', { sku: 'SKU-2', quantity: 5, customerRef: 'PO-1' });
    expect(elsewhere.status).toBe(201);
    expect(elsewhere.body).toMatchObject({ customerRef: 'PO-1' });

    const receipt = await alice.get('/v1/idempotency-receipts/orders.create/order-2');
    expect(receipt.body).toMatchObject({ responseStatus: 409, effect: null });
    expect(await db.counts(a.tenantId)).toEqual({ orders: 1, receipts: 4, outbox: 2 });
    expect(await db.counts(b.tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
  });

  it('racing creates with different keys and one customerRef: one order, every other request 409 naming it', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const responses = await Promise.all(
      Array.from({ length: 10 }, (_, i) => client.createOrder(`race-${i}`, { sku: 'SKU-1', quantity: 1, customerRef: 'PO-RACE' })),
    );
    const created = responses.filter((r) => r.status === 201);
    const refused = responses.filter((r) => r.status === 409);
    expect(created).toHaveLength(1);
    expect(refused).toHaveLength(9);
    for (const response of refused) {
      expect(response.body).toMatchObject({ type: '/problems/customer-ref-already-used', orderId: created[0].body.id });
    }
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 10, outbox: 1 });
  });

  it('GET /v1/idempotency-receipts/{operation}/{key} shows what is remembered, and 404 / 400 otherwise', async () => {
    const { apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    // Any key in 0x21-0x7E, including characters a path must percent-encode.
    const key = 'receipt:#1?x=%/y';
    const created = await client.createOrder(key, { sku: 'SKU-1', quantity: 3 });
    expect(created.status).toBe(201);

    const receipt = await client.get(`/v1/idempotency-receipts/orders.create/${encodeURIComponent(key)}`);
    expect(receipt.status).toBe(200);
    expect(receipt.body).toEqual({
      operation: 'orders.create',
      key,
      status: 'completed',
      responseStatus: 201,
      effect: { type: 'order', id: created.body.id },
      region: 'local',
      fingerprintVersion: 1,
      createdAt: expect.stringMatching(ISO),
      completedAt: expect.stringMatching(ISO),
      expiresAt: expect.stringMatching(ISO),
      // No IDEMPOTENCY_TOMBSTONE_SECONDS_ORDERS_CREATE: after expiresAt the key is a new request.
      tombstoneUntil: null,
    });
    // The header the client got and the receipt name the same instant (the header has whole seconds).
    expect(new Date(created.headers['idempotency-expires'] as string).toUTCString()).toBe(new Date(receipt.body.expiresAt).toUTCString());
    const retention = Date.parse(receipt.body.expiresAt) - Date.parse(receipt.body.createdAt);
    expect(retention).toBe(24 * 3600 * 1000);

    const notFound = await client.get('/v1/idempotency-receipts/orders.create/never-used');
    expect(notFound.status).toBe(404);
    expect(notFound.headers['content-type']).toMatch(PROBLEM_JSON);
    expect(notFound.body).toMatchObject({ type: '/problems/receipt-not-found', code: 'RECEIPT.NOT_FOUND' });

    // The same key under the other operation is another scope, and there is nothing there.
    expect((await client.get(`/v1/idempotency-receipts/orders.cancel/${key}`)).status).toBe(404);

    for (const operation of ['orders.delete', 'orders.read']) {
      const unknown = await client.get(`/v1/idempotency-receipts/${operation}/${key}`);
      expect(unknown.status).toBe(400);
      expect(unknown.body).toMatchObject({ type: '/problems/invalid-request' });
    }
  });

  it('the OrderPlaced outbox row carries the order, the event contract and the caller trace', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const traceId = randomBytes(16).toString('hex');
    const callerSpan = randomBytes(8).toString('hex');

    const traced = await client.createOrder(
      'traced',
      { sku: 'SKU-T', quantity: 4, customerRef: 'trace-1' },
      {
        traceparent: `00-${traceId}-${callerSpan}-01`,
      },
    );
    const untraced = await client.createOrder('untraced', { sku: 'SKU-U', quantity: 1 });
    expect(traced.status).toBe(201);
    expect(untraced.status).toBe(201);

    const [tracedRow, untracedRow] = await outboxRows(tenantId);
    expect(tracedRow).toEqual({
      topic: 'orders.order-events.v1',
      message_key: traced.body.id,
      event_type: 'OrderPlaced',
      event_version: 1,
      tenant_id: tenantId,
      payload: {
        orderId: traced.body.id,
        tenantId,
        sku: 'SKU-T',
        quantity: 4,
        customerRef: 'trace-1',
        placedAt: traced.body.createdAt,
      },
      headers: { traceparent: expect.stringMatching(TRACEPARENT) },
    });
    // A child span of the caller's trace: same trace id, a span of its own.
    const [, storedTrace, storedSpan] = TRACEPARENT.exec(tracedRow.headers.traceparent)!;
    expect(storedTrace).toBe(traceId);
    expect(storedSpan).not.toBe(callerSpan);

    // Without a caller trace, a new one is started (never the all-zero id).
    expect(untracedRow).toMatchObject({
      event_type: 'OrderPlaced',
      message_key: untraced.body.id,
      payload: { orderId: untraced.body.id, customerRef: null, sku: 'SKU-U', quantity: 1 },
      headers: { traceparent: expect.stringMatching(TRACEPARENT) },
    });
    const [, newTrace] = TRACEPARENT.exec(untracedRow.headers.traceparent)!;
    expect(newTrace).not.toMatch(/^0+$/);
    expect(newTrace).not.toBe(traceId);

    // The cancel's event continues the cancel request's trace the same way.
    const cancelTrace = randomBytes(16).toString('hex');
    await client.cancelOrder(traced.body.id, 'cancel-traced', { reason: 'r' }, { traceparent: `00-${cancelTrace}-${callerSpan}-01` });
    const cancelRow = (await outboxRows(tenantId))[2];
    expect(cancelRow).toMatchObject({ event_type: 'OrderCancelled', message_key: traced.body.id });
    expect(TRACEPARENT.exec(cancelRow.headers.traceparent)![1]).toBe(cancelTrace);
  });
});

const UUID_IN_TEXT = new RegExp(CANONICAL_UUID_PATTERN.source.slice(1, -1), 'g');
