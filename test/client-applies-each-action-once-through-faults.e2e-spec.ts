import fc from 'fast-check';
import {
  IdempotencyKeyExpiredError,
  IdempotencyKeyReusedError,
  OrdersClient,
  OutcomeExpiredError,
  OutcomeUnknownError,
  CommandOutcome,
  Order,
  OrderAlreadyCancelledError,
} from '@app/client';
import { checkContract } from '@app/client';
import { commandApiFixture } from './support/command-api';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { http } from './support/http';

const run = promisify(execFile);
import { Fault, FaultProxy } from './support/fault-proxy';
import { searchSettings } from './support/search';

/** Faults on the way to the service and back. Those that reach the service leave the outcome unknown to the client. */
const REACHES_SERVICE = new Set<Fault['kind']>(['pass', 'drop-reply', 'delay-reply', 'gateway-timeout']);
/**
 * Long enough that an answer the proxy passes is never cut short on a loaded machine (which would make an
 * unplanned unknown outcome, and the expected replayed flags wrong); delay-reply holds its answer past it.
 */
const ATTEMPT_TIMEOUT_MS = 2_000;

const postFault = fc.constantFrom<Fault>(
  { kind: 'reset' },
  { kind: 'drop-reply' },
  { kind: 'delay-reply', delayMs: ATTEMPT_TIMEOUT_MS + 500 },
  { kind: 'gateway-timeout' },
  { kind: 'unavailable', retryAfterSeconds: 0 },
);
const lookupFault = fc.constantFrom<Fault>({ kind: 'reset' }, { kind: 'drop-reply' }, { kind: 'unavailable', retryAfterSeconds: 0 });
/** One logical action: the faults its requests meet in order (then every request passes). */
const action = fc.record({
  sku: fc.stringMatching(/^[A-Z0-9]{1,8}$/),
  quantity: fc.integer({ min: 1, max: 10_000 }),
  createFaults: fc.array(postFault, { maxLength: 3 }),
  cancelFaults: fc.array(postFault, { maxLength: 3 }),
  lookupFaults: fc.array(lookupFault, { maxLength: 2 }),
});

/** Whether the first request of a schedule that reached the service lost its reply: then the answer the client reports is a replay. */
function firstExecutionLostItsReply(faults: Fault[]): boolean {
  const first = faults.find((fault) => REACHES_SERVICE.has(fault.kind));
  return first !== undefined;
}

describe('the upstream client (libs/client) against the real API, through a proxy that loses, resets and delays', () => {
  const suite = commandApiFixture();
  const { db } = suite;
  const schedules = new Map<string, { post: Fault[]; lookup: Fault[] }>();
  let proxy: FaultProxy;

  beforeAll(async () => {
    proxy = await FaultProxy.start(suite.api.url, ({ method, key }) => {
      const schedule = key === undefined ? undefined : schedules.get(key);
      if (!schedule) return { kind: 'pass' };
      return (method === 'POST' ? schedule.post.shift() : schedule.lookup.shift()) ?? { kind: 'pass' };
    });
  });
  afterAll(async () => {
    await proxy.stop();
  });

  const client = (apiKey: string, deadlineMs = 20_000) =>
    new OrdersClient({
      baseUrl: proxy.url,
      apiKey,
      retry: { attemptTimeoutMs: ATTEMPT_TIMEOUT_MS, baseDelayMs: 10, maxDelayMs: 100, deadlineMs },
    });
  const postsSeen = (key: string) => proxy.seen.filter((seen) => seen.method === 'POST' && seen.key === key).length;

  it('N actions sent through random faults make exactly N orders and N cancellations, each outcome reported as it happened', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(action, { minLength: 1, maxLength: 6 }), async (actions) => {
        const { tenantId, apiKey } = await db.tenant();
        const orders = client(apiKey);
        const keys = actions.map(() => crypto.randomUUID());
        actions.forEach((a, i) => schedules.set(keys[i], { post: [...a.createFaults], lookup: [...a.lookupFaults] }));

        const created = await Promise.all(
          actions.map((a, i) => orders.createOrder({ sku: a.sku, quantity: a.quantity }, { key: keys[i] })),
        );

        const { rows: receipts } = await db.pool.query<{ key: string; effect_id: string; expires_at: Date }>(
          `SELECT idempotency_key AS key, effect_id, expires_at FROM idempotency_receipts WHERE tenant_id = $1 AND operation = 'orders.create'`,
          [tenantId],
        );
        const receiptOf = new Map(receipts.map((receipt) => [receipt.key, receipt]));
        actions.forEach((a, i) => {
          const outcome = created[i];
          const lostReply = firstExecutionLostItsReply(a.createFaults);
          expect(outcome).toMatchObject({ status: 201, key: keys[i], value: { sku: a.sku, quantity: a.quantity, status: 'placed' } });
          expect({ replayed: outcome.replayed, resolvedFromReceipt: outcome.resolvedFromReceipt }).toEqual({
            replayed: lostReply,
            resolvedFromReceipt: lostReply,
          });
          expect(outcome.attempts).toBe(postsSeen(keys[i]));
          expect(outcome.value.id).toBe(receiptOf.get(keys[i])?.effect_id);
          expect(Math.abs(outcome.expiresAt!.getTime() - receiptOf.get(keys[i])!.expires_at.getTime())).toBeLessThan(1_000);
        });
        expect(new Set(created.map((outcome) => outcome.value.id)).size).toBe(actions.length);
        expect(await db.counts(tenantId)).toEqual({ orders: actions.length, receipts: actions.length, outbox: actions.length });

        const cancelKeys = actions.map(() => crypto.randomUUID());
        actions.forEach((a, i) => schedules.set(cancelKeys[i], { post: [...a.cancelFaults], lookup: [...a.lookupFaults] }));
        const cancelled = await Promise.all(
          created.map((outcome, i) => orders.cancelOrder(outcome.value.id, 'changed', { key: cancelKeys[i] })),
        );
        actions.forEach((a, i) => {
          const lostReply = firstExecutionLostItsReply(a.cancelFaults);
          expect(cancelled[i]).toMatchObject({
            status: 200,
            replayed: lostReply,
            resolvedFromReceipt: lostReply,
            value: { status: 'cancelled' },
          });
          expect(cancelled[i].attempts).toBe(postsSeen(cancelKeys[i]));
        });
        expect(await db.counts(tenantId)).toEqual({ orders: actions.length, receipts: 2 * actions.length, outbox: 2 * actions.length });
      }),
      searchSettings({ fast: 6, long: 40 }),
    );
  });

  it('never retries a 422 or a stored domain outcome, and says which answers were replays', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const orders = client(apiKey);
    const first = await orders.createOrder({ sku: 'SKU-1', quantity: 1 });
    const reused = await orders.createOrder({ sku: 'SKU-1', quantity: 2 }, { key: first.key }).catch((error) => error);
    expect(reused).toBeInstanceOf(IdempotencyKeyReusedError);
    expect(reused).toMatchObject({ status: 422, attempts: 1, type: '/problems/idempotency-key-reused' });
    expect(postsSeen(first.key)).toBe(2);

    const cancelKey = crypto.randomUUID();
    await orders.cancelOrder(first.value.id, 'first', { key: cancelKey });
    const again = await orders.cancelOrder(first.value.id, 'second').catch((error) => error);
    expect(again).toBeInstanceOf(OrderAlreadyCancelledError);
    expect(again).toMatchObject({ status: 409, attempts: 1, replay: { replayed: false } });
    expect(postsSeen(again.replay.key)).toBe(1);
    const replayed: CommandOutcome<Order> = await orders.cancelOrder(first.value.id, 'first', { key: cancelKey });
    expect(replayed).toMatchObject({ replayed: true, attempts: 1, value: { status: 'cancelled', cancelReason: 'first' } });
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 3, outbox: 2 });
  });

  it("waits what the service's Retry-After asks before sending again", async () => {
    const { apiKey } = await db.tenant();
    const key = crypto.randomUUID();
    schedules.set(key, { post: [{ kind: 'unavailable', retryAfterSeconds: 1 }], lookup: [] });
    const outcome = await client(apiKey).createOrder({ sku: 'SKU-2', quantity: 1 }, { key });
    const posts = proxy.seen.filter((seen) => seen.method === 'POST' && seen.key === key);
    expect(outcome).toMatchObject({ status: 201, attempts: 2, replayed: false });
    expect(posts[1].at - posts[0].at).toBeGreaterThanOrEqual(1_000);
  });

  it('gives up at its deadline with OutcomeUnknownError when every reply is lost; the same key later replays the one order', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const key = crypto.randomUUID();
    const lost: Fault = { kind: 'drop-reply' };
    schedules.set(key, { post: Array(50).fill(lost), lookup: Array(50).fill(lost) });
    const error = await client(apiKey, 3_000)
      .createOrder({ sku: 'SKU-3', quantity: 3 }, { key })
      .catch((failure) => failure);
    expect(error).toBeInstanceOf(OutcomeUnknownError);
    expect(error.key).toBe(key);
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });

    schedules.delete(key);
    const later = await client(apiKey).createOrder({ sku: 'SKU-3', quantity: 3 }, { key });
    expect(later).toMatchObject({ replayed: true, attempts: 1 });
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
  });

  it('does not resend when the receipt says the lost attempt was applied and its key has expired since', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const key = crypto.randomUUID();
    // The first reply is lost; while the client asks, the receipt's expiry comes (moved to now on the database clock).
    const expire = async () => {
      await db.pool.query(`UPDATE idempotency_receipts SET expires_at = now() WHERE tenant_id = $1 AND idempotency_key = $2`, [
        tenantId,
        key,
      ]);
    };
    schedules.set(key, { post: [{ kind: 'drop-reply' }], lookup: [{ kind: 'hold-request', delayMs: 0, before: expire }] });
    const error = await client(apiKey)
      .createOrder({ sku: 'SKU-4', quantity: 4 }, { key })
      .catch((failure) => failure);
    expect(error).toBeInstanceOf(OutcomeExpiredError);
    expect(error.receipt).toMatchObject({ status: 'expired', responseStatus: 201, effect: { type: 'order' } });
    expect(postsSeen(key)).toBe(1);
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
  });

  it("agrees with the service's OpenAPI document: operations, fields, the Idempotency-Key, every problem type and its status", async () => {
    const doc = await http(`${suite.api.managementUrl}/docs-json`);
    expect(doc.status).toBe(200);
    expect(checkContract(doc.body)).toEqual([]);
    // The check itself sees drift: a field the client does not know, a problem type it does not type.
    const drifted = structuredClone(doc.body);
    drifted.components.schemas.OrderResponse.properties.giftWrap = { type: 'boolean' };
    drifted['x-problem-types']['/problems/payment-required'] = { status: 402, title: 'Payment required' };
    expect(checkContract(drifted)).toEqual([
      expect.stringContaining('giftWrap'),
      expect.stringContaining('giftWrap'),
      expect.stringContaining('giftWrap'),
      expect.stringContaining('/problems/payment-required'),
    ]);
  });

  it('is a package of its own: npm pack, install it in an empty project, and plain Node creates an order with it', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const dir = mkdtempSync(join(tmpdir(), 'client-package-'));
    try {
      const packed = await run('npm', ['pack', '--pack-destination', dir, '--json'], { cwd: join(__dirname, '..', 'libs', 'client') });
      const [{ filename, files }] = JSON.parse(packed.stdout);
      expect(files.map((file: { path: string }) => file.path)).toEqual(
        expect.arrayContaining(['README.md', 'dist/index.js', 'dist/index.d.ts']),
      );
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'upstream', private: true }));
      await run('npm', ['install', '--offline', '--no-audit', '--no-fund', join(dir, filename)], { cwd: dir });
      const script = `
        const { OrdersClient } = require('@idempotent-commands/client');
        const client = new OrdersClient({ baseUrl: process.argv[1], apiKey: process.argv[2] });
        client.createOrder({ sku: 'PKG-1', quantity: 1 }).then((outcome) => console.log(JSON.stringify(outcome)));`;
      const { stdout } = await run(process.execPath, ['-e', script, suite.api.url, apiKey], { cwd: dir });
      expect(JSON.parse(stdout)).toMatchObject({ status: 201, replayed: false, attempts: 1, value: { sku: 'PKG-1' } });
      expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the upstream client against an API whose orders.create keeps a tombstone after expiry', () => {
  // A retention of 1 s that really passes: the API also holds the receipt in memory until just before it expires.
  const suite = commandApiFixture({
    IDEMPOTENCY_RETENTION_SECONDS_ORDERS_CREATE: '1',
    IDEMPOTENCY_TOMBSTONE_SECONDS_ORDERS_CREATE: '3600',
  });
  const { db } = suite;

  it('a late retry of an expired key is IdempotencyKeyExpiredError, sent once, and creates nothing', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const orders = new OrdersClient({ baseUrl: suite.api.url, apiKey });
    const first = await orders.createOrder({ sku: 'SKU-5', quantity: 5 });
    const expiresAt = Date.parse((await orders.getReceipt('orders.create', first.key))!.expiresAt);
    // The receipt expires on the database clock; a little slack covers the distance between the two clocks.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAt - Date.now()) + 200));
    const late = await orders.createOrder({ sku: 'SKU-5', quantity: 5 }, { key: first.key }).catch((failure) => failure);
    expect(late).toBeInstanceOf(IdempotencyKeyExpiredError);
    expect(late).toMatchObject({
      status: 422,
      attempts: 1,
      problem: { expiredAt: expect.any(String), tombstoneUntil: expect.any(String) },
    });
    const receipt = await orders.getReceipt('orders.create', first.key);
    expect(receipt).toMatchObject({
      status: 'expired',
      effect: { type: 'order', id: first.value.id },
      tombstoneUntil: late.problem.tombstoneUntil,
    });
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
  });
});
