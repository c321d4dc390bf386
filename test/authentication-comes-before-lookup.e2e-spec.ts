import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { entryArgs } from './support/apps';
import { ApiClientSession, commandApiFixture } from './support/command-api';
import { http, HttpResult } from './support/http';
import { testEnv } from './support/test-env';

const root = join(__dirname, '..');
const PROBLEM_JSON = /^application\/problem\+json/;

/** Revokes a client the way an operator does: the ops CLI, from source, against orders_test. */
function revokeWithOpsCli(clientId: string): void {
  const run = spawnSync(process.execPath, [...entryArgs('apps/ops/src/main.ts'), 'clients:revoke', clientId, '--json'], {
    cwd: root,
    env: { ...process.env, ORDERS_DATABASE_URL: testEnv.ordersUrl },
    encoding: 'utf8',
  });
  if (run.status !== 0) throw new Error(`clients:revoke exited ${run.status}: ${run.stderr}`);
}

/** A key of the right shape that no client holds. */
const neverIssuedKey = `ik_${'A'.repeat(43)}`;

/**
 * Authentication and authorisation finish before the body is read and before any receipt is looked
 * up: a caller without a valid credential learns nothing about what exists, and a tenant's scope is
 * reachable only with that tenant's key.
 */
describe('authentication comes before any lookup', () => {
  const suite = commandApiFixture();
  const { db } = suite;

  function expectUnauthenticated(response: HttpResult) {
    expect(response.status).toBe(401);
    expect(response.headers['content-type']).toMatch(PROBLEM_JSON);
    expect(response.headers['www-authenticate']).toBe('Bearer');
    expect(response.body).toMatchObject({ type: '/problems/unauthenticated', status: 401, code: 'AUTH.UNAUTHENTICATED' });
    for (const header of ['location', 'idempotency-expires', 'idempotent-replayed']) {
      expect(response.headers[header]).toBeUndefined();
    }
  }

  /** The 401 with `instance` (the request path) taken out: what the caller could compare. */
  const withoutInstance = ({ instance: _, ...rest }: Record<string, unknown>) => rest;

  function post(path: string, headers: Record<string, string | string[]>, body: unknown) {
    return http(`${suite.api.url}${path}`, { method: 'POST', headers, body });
  }

  it('no credential, a malformed one, an unknown key and a revoked key are all the same 401, and nothing is learned', async () => {
    // Tenant A has an order made with key "intent-a"; every anonymous caller below aims at exactly that scope.
    const a = await db.tenant();
    const owner = new ApiClientSession(suite.api.url, a.apiKey);
    const body = { sku: 'SKU-1', quantity: 2, customerRef: 'ref-a' };
    const placed = await owner.createOrder('intent-a', body);
    expect(placed.status).toBe(201);
    const orderId: string = placed.body.id;

    const revoked = await db.client(a.tenantId);
    revokeWithOpsCli(revoked.clientId);

    const credentials: [string, Record<string, string | string[]>][] = [
      ['no Authorization header', {}],
      ['an empty Authorization header', { Authorization: '' }],
      ['Basic instead of Bearer', { Authorization: `Basic ${Buffer.from(`a:${a.apiKey}`).toString('base64')}` }],
      ['a bare key without "Bearer"', { Authorization: a.apiKey }],
      ['a malformed bearer token', { Authorization: 'Bearer not-a-key' }],
      ['the key with a trailing junk character', { Authorization: `Bearer ${a.apiKey}x` }],
      ['a well-formed key nobody was issued', { Authorization: `Bearer ${neverIssuedKey}` }],
      ['a revoked key of the same tenant', { Authorization: `Bearer ${revoked.apiKey}` }],
      // Authorization is a singleton field (RFC 9110): Node keeps the first of two and drops the rest, and a
      // proxy in front may have judged the other one. Two are no credential, in either order.
      ["A's key, then a key nobody was issued", { Authorization: [`Bearer ${a.apiKey}`, `Bearer ${neverIssuedKey}`] }],
      ["a key nobody was issued, then A's key", { Authorization: [`Bearer ${neverIssuedKey}`, `Bearer ${a.apiKey}`] }],
      ["A's key twice", { Authorization: [`Bearer ${a.apiKey}`, `Bearer ${a.apiKey}`] }],
    ];
    const neverUsed = `intent-${randomUUID()}`;
    const probes: [string, (auth: Record<string, string | string[]>) => Promise<HttpResult>, () => Promise<HttpResult>][] = [
      [
        "replay of A's create",
        (auth) => post('/v1/orders', { ...auth, 'Idempotency-Key': 'intent-a' }, body),
        () => post('/v1/orders', { 'Idempotency-Key': neverUsed }, { sku: 'SKU-2', quantity: 9 }),
      ],
      [
        "cancel of A's order",
        (auth) => post(`/v1/orders/${orderId}/cancel`, { ...auth, 'Idempotency-Key': 'cancel-a' }, { reason: 'x' }),
        () => post(`/v1/orders/${randomUUID()}/cancel`, { 'Idempotency-Key': neverUsed }, { reason: 'x' }),
      ],
      [
        "read of A's order",
        (auth) => http(`${suite.api.url}/v1/orders/${orderId}`, { headers: auth }),
        () => http(`${suite.api.url}/v1/orders/${randomUUID()}`),
      ],
      [
        "A's receipt",
        (auth) => http(`${suite.api.url}/v1/idempotency-receipts/orders.create/intent-a`, { headers: auth }),
        () => http(`${suite.api.url}/v1/idempotency-receipts/orders.create/${neverUsed}`),
      ],
    ];

    for (const [probeName, probe, baseline] of probes) {
      const reference = await baseline();
      expectUnauthenticated(reference);
      for (const [credentialName, auth] of credentials) {
        const response = await probe(auth);
        try {
          expectUnauthenticated(response);
          // Byte for byte the answer about nothing at all, apart from the path it names.
          expect(withoutInstance(response.body)).toEqual(withoutInstance(reference.body));
          expect(response.headers['content-length']).toBe(
            String(Number(reference.headers['content-length']) - reference.body.instance.length + response.body.instance.length),
          );
        } catch (error) {
          throw new Error(`${probeName} with ${credentialName}: ${(error as Error).message}`);
        }
      }
    }

    // Nothing happened to A: one order, still placed; one receipt; one event.
    expect(await db.counts(a.tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
    expect((await owner.get(`/v1/orders/${orderId}`)).body).toMatchObject({ status: 'placed' });
  });

  it('a revoked key is refused from the next request on; the scope it tried stays unused for the tenant', async () => {
    const { tenantId, apiKey, clientId } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    expect((await client.createOrder('before-revocation', { sku: 'SKU-1', quantity: 1 })).status).toBe(201);

    revokeWithOpsCli(clientId);
    expectUnauthenticated(await client.createOrder('after-revocation', { sku: 'SKU-1', quantity: 1 }));
    expectUnauthenticated(await client.get('/v1/idempotency-receipts/orders.create/before-revocation'));
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });

    // A new client of the same tenant finds "after-revocation" unused: the 401 stored nothing.
    const successor = new ApiClientSession(suite.api.url, (await db.client(tenantId)).apiKey);
    const created = await successor.createOrder('after-revocation', { sku: 'SKU-1', quantity: 1 });
    expect(created.status).toBe(201);
    expect(created.headers['idempotent-replayed']).toBeUndefined();
    expect(await db.counts(tenantId)).toEqual({ orders: 2, receipts: 2, outbox: 2 });
  });

  it.each<[string, Record<string, string>, string]>([
    ['an oversized body', { 'Content-Type': 'application/json' }, JSON.stringify({ pad: 'x'.repeat(64 * 1024) })],
    ['a non-JSON body', { 'Content-Type': 'application/json' }, '{"sku": oops'],
    ['a body of the wrong media type', { 'Content-Type': 'text/plain' }, 'hello'],
    ['a JSON array', { 'Content-Type': 'application/json' }, '[]'],
  ])('%s without credentials is 401, not 413/415/400: the body is never read', async (_, headers, body) => {
    const { tenantId } = await db.tenant();
    const key = `anon-${randomUUID()}`;
    expectUnauthenticated(await post('/v1/orders', { ...headers, 'Idempotency-Key': key }, body));
    expectUnauthenticated(await post(`/v1/orders/${randomUUID()}/cancel`, { ...headers, 'Idempotency-Key': key }, body));
    // Nor is the key: a missing or malformed key is judged only after authentication.
    expectUnauthenticated(await post('/v1/orders', { ...headers, 'Idempotency-Key': 'bad key' }, body));
    expectUnauthenticated(await post('/v1/orders', headers, body));
    expect(await db.counts(tenantId)).toEqual({ orders: 0, receipts: 0, outbox: 0 });
  });

  it('a client allowed only orders.create gets 403 everywhere else, before its body is read, and stores nothing', async () => {
    const { tenantId, apiKey } = await db.tenant(['orders.create']);
    const creator = new ApiClientSession(suite.api.url, apiKey);
    const placed = await creator.createOrder('place', { sku: 'SKU-1', quantity: 1 });
    expect(placed.status).toBe(201);
    const orderId: string = placed.body.id;

    const forbidden = [
      await creator.cancelOrder(orderId, 'cancel-1', { reason: 'not allowed' }),
      // The body is not even read: an oversized or non-JSON one is still 403, not 413/400.
      await creator.cancelOrder(orderId, 'cancel-1', JSON.stringify({ reason: 'r'.repeat(64 * 1024) }), {
        'Content-Type': 'application/json',
      }),
      await creator.cancelOrder(orderId, 'cancel-1', 'not json', { 'Content-Type': 'application/json' }),
      await creator.get(`/v1/orders/${orderId}`),
      await creator.get('/v1/idempotency-receipts/orders.cancel/x'),
      await creator.get('/v1/idempotency-receipts/orders.cancel/cancel-1'),
    ];
    for (const response of forbidden) {
      expect(response.status).toBe(403);
      expect(response.headers['content-type']).toMatch(PROBLEM_JSON);
      expect(response.body).toMatchObject({ type: '/problems/forbidden', status: 403, code: 'AUTH.FORBIDDEN' });
      expect(response.headers['idempotent-replayed']).toBeUndefined();
    }
    // It may read receipts of the operation it is allowed.
    const ownReceipt = await creator.get('/v1/idempotency-receipts/orders.create/place');
    expect(ownReceipt.status).toBe(200);
    expect(ownReceipt.body).toMatchObject({ operation: 'orders.create', effect: { type: 'order', id: orderId } });
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });

    // The 403 stored nothing under "cancel-1": a client of the tenant that may cancel uses it afresh.
    const canceller = new ApiClientSession(suite.api.url, (await db.client(tenantId, ['orders.cancel', 'orders.read'])).apiKey);
    const cancelled = await canceller.cancelOrder(orderId, 'cancel-1', { reason: 'allowed now' });
    expect(cancelled.status).toBe(200);
    expect(cancelled.headers['idempotent-replayed']).toBeUndefined();
    expect(cancelled.body).toMatchObject({ id: orderId, status: 'cancelled' });
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 2, outbox: 2 });
  });

  it("tenant B sending tenant A's key and body gets its own new order, never A's response", async () => {
    const a = await db.tenant();
    const b = await db.tenant();
    const alice = new ApiClientSession(suite.api.url, a.apiKey);
    const bob = new ApiClientSession(suite.api.url, b.apiKey);
    const body = { sku: 'SKU-1', quantity: 2, customerRef: 'shared-ref' };

    const first = await alice.createOrder('intent-a', body);
    const copied = await bob.createOrder('intent-a', body);
    const copiedAgain = await bob.createOrder('intent-a', body);

    expect(first.status).toBe(201);
    expect(copied.status).toBe(201);
    expect(copied.headers['idempotent-replayed']).toBeUndefined();
    expect(copied.body.id).not.toBe(first.body.id);
    expect(copied.text).not.toBe(first.text);
    expect(copied.headers.location).toBe(`/v1/orders/${copied.body.id}`);
    // B's own retry replays B's order, still not A's.
    expect(copiedAgain.headers['idempotent-replayed']).toBe('true');
    expect(copiedAgain.text).toBe(copied.text);

    // Each sees only its own order and its own receipt.
    expect((await bob.get(`/v1/orders/${first.body.id}`)).status).toBe(404);
    expect((await alice.get(`/v1/orders/${copied.body.id}`)).status).toBe(404);
    expect((await bob.get('/v1/idempotency-receipts/orders.create/intent-a')).body.effect).toEqual({ type: 'order', id: copied.body.id });
    expect((await alice.get('/v1/idempotency-receipts/orders.create/intent-a')).body.effect).toEqual({ type: 'order', id: first.body.id });

    expect(await db.counts(a.tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
    expect(await db.counts(b.tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
    const { rows } = await db.pool.query('SELECT tenant_id FROM orders WHERE id = $1', [copied.body.id]);
    expect(rows).toEqual([{ tenant_id: b.tenantId }]);
  });
});
