import fc from 'fast-check';
import { sweepExpiredReceipts } from '@app/idempotency';
import { RunningApp, startApp } from './support/apps';
import { ApiClientSession, commandApiFixture } from './support/command-api';
import { eventually } from './support/eventually';
import { HttpResult } from './support/http';
import { json, ops } from './support/ops-cli';
import { OrdersDb } from './support/orders-db';
import { searchSettings, searchTimeout } from './support/search';

const RETENTION_SECONDS = 1;
/**
 * Long enough for ten late retries, a lookup and an ops CLI process (started cold) to finish inside the
 * tombstone on a loaded machine: at 4 s a full npm test once ran past it, which this suite refuses as
 * a run that proves nothing.
 */
const TOMBSTONE_SECONDS = 8;

const KEY_EXPIRED = '/problems/idempotency-key-expired';

interface Fields {
  sku: string;
  quantity: number;
}

/** The scope's receipt as the lookup reports it (status 200 required). */
async function lookup(client: ApiClientSession, key: string, operation = 'orders.create'): Promise<Record<string, any>> {
  const response = await client.get(`/v1/idempotency-receipts/${operation}/${key}`);
  expect({ key, status: response.status }).toEqual({ key, status: 200 });
  return response.body;
}

/**
 * The database clock (receipts expire on it) relative to this process's: `offset` ms ahead, known to
 * within `slack` ms. On one machine both are the same clock; a remote test database may differ a little.
 */
async function databaseClock(db: OrdersDb): Promise<{ offset: number; slack: number }> {
  let best = { offset: 0, slack: Infinity };
  for (let i = 0; i < 5; i++) {
    const before = Date.now();
    const { rows } = await db.pool.query('SELECT extract(epoch FROM clock_timestamp()) * 1000 AS now');
    const after = Date.now();
    // +2: the lookup's ISO times are cut to whole milliseconds, and so is Date.now().
    const slack = (after - before) / 2 + 2;
    if (slack < best.slack) best = { offset: Number(rows[0].now) - (before + after) / 2, slack };
  }
  return best;
}

/** Resolves once this process's clock reaches `at`. */
const until = (at: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, at - Date.now())));

/** The problem a late retry gets while the tombstone lasts, naming the receipt's own times. */
function expectKeyExpired(response: HttpResult, receipt: Record<string, any>): void {
  expect({ status: response.status, contentType: response.headers['content-type'], body: response.body }).toEqual({
    status: 422,
    contentType: expect.stringMatching(/^application\/problem\+json/),
    body: {
      type: KEY_EXPIRED,
      title: 'Idempotency key expired',
      status: 422,
      code: 'IDEMPOTENCY.KEY_EXPIRED',
      detail: expect.stringMatching(new RegExp(`expired at ${receipt.expiresAt}.*refused until ${receipt.tombstoneUntil}`)),
      expiredAt: receipt.expiresAt,
      tombstoneUntil: receipt.tombstoneUntil,
      instance: expect.any(String),
    },
  });
  expect(response.headers['idempotent-replayed']).toBeUndefined();
}

/** The receipt row as stored, for what a sweep did to it. */
async function storedReceipt(db: OrdersDb, tenantId: string, key: string) {
  const { rows } = await db.pool.query(
    /* sql */ `
    SELECT response_status, response_headers, response_body, effect_type, effect_id, fingerprint, expires_at
    FROM idempotency_receipts WHERE tenant_id = $1 AND operation = 'orders.create' AND idempotency_key = $2`,
    [tenantId, key],
  );
  return rows[0];
}

describe('after expiry, by default the same key is a new request', () => {
  const suite = commandApiFixture({
    IDEMPOTENCY_RETENTION_SECONDS: String(RETENTION_SECONDS),
    RECEIPT_SWEEP_INTERVAL_SECONDS: '0',
  });
  const { db } = suite;

  it('keeps no tombstone: the late retry creates a new order', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const first = await client.createOrder('late', { sku: 'SKU-1', quantity: 1 });
    expect(first.status).toBe(201);
    const receipt = await lookup(client, 'late');
    expect(receipt).toMatchObject({ status: 'completed', tombstoneUntil: null });

    await until(Date.parse(receipt.expiresAt) + 200);
    const late = await client.createOrder('late', { sku: 'SKU-1', quantity: 1 });
    expect(late.status).toBe(201);
    expect(late.headers['idempotent-replayed']).toBeUndefined();
    expect(late.body.id).not.toBe(first.body.id);
    expect(await db.counts(tenantId)).toEqual({ orders: 2, receipts: 1, outbox: 2 });
  });
});

describe('with IDEMPOTENCY_TOMBSTONE_SECONDS_<OPERATION>, an expired key is refused until its tombstone ends', () => {
  const suite = commandApiFixture({
    IDEMPOTENCY_RETENTION_SECONDS: String(RETENTION_SECONDS),
    IDEMPOTENCY_TOMBSTONE_SECONDS_ORDERS_CREATE: String(TOMBSTONE_SECONDS),
    IDEMPOTENCY_TOMBSTONE_SECONDS_ORDERS_CANCEL: String(TOMBSTONE_SECONDS),
    IDEMPOTENCY_RETENTION_SECONDS_NOT_FOUND: '1',
    // Sweeps run where the tests say (ops receipts:sweep, the library function), not in the background.
    RECEIPT_SWEEP_INTERVAL_SECONDS: '0',
    DATABASE_POOL_SIZE: '20',
  });
  const { db } = suite;
  let clock: { offset: number; slack: number };
  beforeAll(async () => {
    clock = await databaseClock(db);
  });

  it('refuses every late retry (same or other fields, ten at once) with 422, changes nothing; a sweep compacts, then deletes; then the key runs anew once', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const fields = { sku: 'SKU-1', quantity: 2 };
    const first = await client.createOrder('intent', fields);
    expect(first.status).toBe(201);

    const live = await lookup(client, 'intent');
    expect(live.status).toBe('completed');
    expect(Date.parse(live.tombstoneUntil) - Date.parse(live.expiresAt)).toBe(TOMBSTONE_SECONDS * 1000);
    const before = await storedReceipt(db, tenantId, 'intent');

    await until(Date.parse(live.expiresAt) - clock.offset + clock.slack + 20);
    const late = await Promise.all(
      Array.from({ length: 10 }, (_, i) => client.createOrder('intent', i % 2 ? { sku: 'SKU-2', quantity: 9 } : fields)),
    );
    for (const response of late) expectKeyExpired(response, live);
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 1, outbox: 1 });
    expect(await lookup(client, 'intent')).toEqual({ ...live, status: 'expired' });

    // The sweep compacts the tombstone (the stored response goes) and keeps the row.
    const compacting = json(await ops(['receipts:sweep', '--json']));
    expect(Date.now() + clock.offset).toBeLessThan(Date.parse(live.tombstoneUntil) - clock.slack); // or this run proves nothing
    expect(compacting).toEqual({ deleted: expect.any(Number), compacted: expect.any(Number) });
    expect(compacting.compacted).toBeGreaterThanOrEqual(1);
    expect(await storedReceipt(db, tenantId, 'intent')).toEqual({ ...before, response_headers: null, response_body: null });
    expect(await lookup(client, 'intent')).toEqual({ ...live, status: 'expired' });
    expectKeyExpired(await client.createOrder('intent', fields), live);

    // Once the tombstone is over the next sweep deletes the row, and the key is a new request: one execution.
    await until(Date.parse(live.tombstoneUntil) - clock.offset + clock.slack + 20);
    const deleting = json(await ops(['receipts:sweep', '--json']));
    expect(deleting.deleted).toBeGreaterThanOrEqual(1);
    expect(await storedReceipt(db, tenantId, 'intent')).toBeUndefined();
    const anew = await Promise.all(Array.from({ length: 10 }, () => client.createOrder('intent', fields)));
    expect(anew.map((r) => r.status)).toEqual(Array(10).fill(201));
    const executed = anew.filter((r) => r.headers['idempotent-replayed'] === undefined);
    expect(executed).toHaveLength(1);
    expect(new Set(anew.map((r) => r.body.id))).toEqual(new Set([executed[0].body.id]));
    expect(executed[0].body.id).not.toBe(first.body.id);
    expect(await db.counts(tenantId)).toEqual({ orders: 2, receipts: 1, outbox: 2 });
  });

  it('holds for orders.cancel too; a 404 for an order that does not exist keeps no tombstone (the same answer computed again)', async () => {
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(suite.api.url, apiKey);
    const order = await client.createOrder('to-cancel', { sku: 'SKU-1', quantity: 1 });
    const cancelled = await client.cancelOrder(order.body.id, 'cancel', { reason: 'changed my mind' });
    expect(cancelled.status).toBe(200);
    const unknown = '00000000-0000-4000-8000-000000000000';
    expect((await client.cancelOrder(unknown, 'cancel-unknown', { reason: 'typo' })).status).toBe(404);

    const receipt = await lookup(client, 'cancel', 'orders.cancel');
    expect(Date.parse(receipt.tombstoneUntil) - Date.parse(receipt.expiresAt)).toBe(TOMBSTONE_SECONDS * 1000);
    const notFound = await lookup(client, 'cancel-unknown', 'orders.cancel');
    expect(notFound.tombstoneUntil).toBeNull();

    await until(Math.max(Date.parse(receipt.expiresAt), Date.parse(notFound.expiresAt)) - clock.offset + clock.slack + 20);
    expectKeyExpired(await client.cancelOrder(order.body.id, 'cancel', { reason: 'changed my mind' }), receipt);
    expectKeyExpired(await client.cancelOrder(order.body.id, 'cancel', { reason: 'another reason' }), receipt);
    const again = await client.cancelOrder(unknown, 'cancel-unknown', { reason: 'typo' });
    expect({ status: again.status, replayed: again.headers['idempotent-replayed'] }).toEqual({ status: 404, replayed: undefined });
    // One order, its OrderPlaced and one OrderCancelled; receipts: the create, the cancel, the 404.
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 3, outbox: 2 });
  });

  /**
   * A search over timings and fields: per run 1-3 keys, each retried late at random moments inside its
   * tombstone with the same or other fields, then a burst of racing retries at a random moment around the
   * tombstone's end, with sweeps (compacting, deleting) at random moments or none. Each answer is checked
   * against when it was sent and received: refused only if sent before the tombstone ended, refused
   * always if answered before it ended; after it, at most one execution (exactly one if any retry was
   * sent after the end) and every other answer a replay of it or a 422 for other fields.
   */
  it(
    'random late retries, racing bursts and sweeps: refused until the tombstone ends, then exactly one new execution',
    async () => {
      const fieldsArb = fc.record({ sku: fc.constantFrom('A', 'B'), quantity: fc.integer({ min: 1, max: 3 }) });
      const scenario = fc.record({
        fields: fieldsArb,
        /** Late retries: when inside the tombstone (0 = its start, 1 = its end), and whether with the first fields. */
        during: fc.array(fc.record({ at: fc.double({ min: 0, max: 1, noNaN: true }), same: fc.boolean() }), { minLength: 1, maxLength: 4 }),
        /** The burst: ms from the tombstone's end (negative: just before), and per retry whether with the first fields. */
        burst: fc.record({ offsetMs: fc.integer({ min: -150, max: 400 }), same: fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }) }),
      });
      const run = fc.record({
        keys: fc.array(scenario, { minLength: 1, maxLength: 3 }),
        /** Sweeps in the tombstone and after it: the first compacts, the second deletes (the burst then inserts, not reclaims). */
        sweeps: fc.record({
          during: fc.option(fc.double({ min: 0, max: 1, noNaN: true })),
          afterMs: fc.option(fc.integer({ min: 0, max: 300 })),
        }),
      });
      const other = (f: Fields): Fields => ({ sku: f.sku, quantity: f.quantity + 10 });

      await fc.assert(
        fc.asyncProperty(run, async ({ keys, sweeps }) => {
          const { tenantId, apiKey } = await db.tenant();
          const client = new ApiClientSession(suite.api.url, apiKey);
          const firsts = await Promise.all(keys.map((k, i) => client.createOrder(`k${i}`, k.fields)));
          expect(firsts.map((r) => r.status)).toEqual(keys.map(() => 201));
          const receipts = await Promise.all(keys.map((_, i) => lookup(client, `k${i}`)));
          // Local times: the receipt's database times moved to this process's clock.
          const local = receipts.map((r) => ({
            expiresAt: Date.parse(r.expiresAt) - clock.offset,
            ends: Date.parse(r.tombstoneUntil) - clock.offset,
          }));
          const windowStart = Math.max(...local.map((t) => t.expiresAt)) + clock.slack + 20;
          const windowEnd = Math.min(...local.map((t) => t.ends)) - clock.slack - 300;
          const lastEnd = Math.max(...local.map((t) => t.ends));

          type Sent = { fields: Fields; sentAt: number; receivedAt: number; response: HttpResult };
          const send = async (key: number, fields: Fields, at: number): Promise<Sent> => {
            await until(at);
            const sentAt = Date.now();
            const response = await client.createOrder(`k${key}`, fields);
            return { fields, sentAt, receivedAt: Date.now(), response };
          };
          const sweptAt: number[] = [];
          const sweepAt = async (at: number) => {
            await until(at);
            const connection = await db.pool.connect();
            try {
              await sweepExpiredReceipts(connection);
            } finally {
              connection.release();
            }
            const finishedAt = Date.now();
            sweptAt.push(finishedAt);
            // A sweep that ended inside every tombstone compacted each row and deleted none.
            if (finishedAt < windowEnd) {
              for (const [i, first] of firsts.entries()) {
                const row = await storedReceipt(db, tenantId, `k${i}`);
                expect({ key: i, row }).toEqual({
                  key: i,
                  row: expect.objectContaining({
                    response_status: 201,
                    response_body: null,
                    response_headers: null,
                    effect_id: first.body.id,
                  }),
                });
              }
            }
          };

          // Sweeps run beside the retries, at their own moments.
          const sweeping = Promise.all([
            sweeps.during === null ? undefined : sweepAt(windowStart + sweeps.during * (windowEnd - windowStart)),
            sweeps.afterMs === null ? undefined : sweepAt(lastEnd + clock.slack + sweeps.afterMs),
          ]);
          const sent = await Promise.all(
            keys.map(async (k, i) => {
              const during = k.during.map((d) =>
                send(i, d.same ? k.fields : other(k.fields), windowStart + d.at * (windowEnd - windowStart)),
              );
              const burst = k.burst.same.map((same) => send(i, same ? k.fields : other(k.fields), local[i].ends + k.burst.offsetMs));
              return Promise.all([...during, ...burst]);
            }),
          );
          await sweeping;

          let executions = 0;
          let stored = 0;
          for (const i of keys.keys()) {
            const ends = local[i].ends;
            const answers = sent[i];
            const show = () =>
              answers
                .map(
                  (s) =>
                    `${s.sentAt - ends}ms..${s.receivedAt - ends}ms ${JSON.stringify(s.fields)} -> ${s.response.status} ${s.response.text}`,
                )
                .join('\n');
            const executed = answers.filter((s) => s.response.status === 201 && s.response.headers['idempotent-replayed'] === undefined);
            if (executed.length > 1) throw new Error(`k${i} executed ${executed.length} times after its tombstone:\n${show()}`);
            const execution = executed[0];
            for (const s of answers) {
              const why = `k${i}: ${s.sentAt - ends}ms..${s.receivedAt - ends}ms from the tombstone's end -> ${s.response.status} ${s.response.text}\n${show()}`;
              if (s.response.body?.type === KEY_EXPIRED) {
                if (s.sentAt >= ends + clock.slack) throw new Error(`refused although sent after the tombstone ended: ${why}`);
                expectKeyExpired(s.response, receipts[i]);
              } else if (s.receivedAt < ends - clock.slack) {
                throw new Error(`not refused although answered inside the tombstone: ${why}`);
              } else if (s === execution) {
                expect(s.response.body).toMatchObject({ ...s.fields, status: 'placed' });
                expect(s.response.body.id).not.toBe(firsts[i].body.id);
              } else if (s.response.status === 201) {
                if (
                  !execution ||
                  s.response.body.id !== execution.response.body.id ||
                  JSON.stringify(s.fields) !== JSON.stringify(execution.fields)
                ) {
                  throw new Error(`a replay of something other than the one new execution: ${why}`);
                }
              } else if (s.response.status !== 422 || s.response.body?.type !== '/problems/idempotency-key-reused' || !execution) {
                throw new Error(`unexpected answer: ${why}`);
              }
            }
            if (answers.some((s) => s.sentAt >= ends + clock.slack) && !execution)
              throw new Error(`sent after the tombstone, yet nothing executed:\n${show()}`);
            executions += executed.length;

            // The receipt: the new execution's; or, without one, the first's, unless a sweep after the tombstone deleted it.
            const row = await storedReceipt(db, tenantId, `k${i}`);
            if (execution) expect({ key: i, effect: row?.effect_id }).toEqual({ key: i, effect: execution.response.body.id });
            else if (row) expect({ key: i, effect: row.effect_id }).toEqual({ key: i, effect: firsts[i].body.id });
            else if (!sweptAt.some((at) => at >= ends - clock.slack))
              throw new Error(`k${i}'s receipt is gone, yet no sweep ran after its tombstone`);
            if (row) stored++;
          }
          expect(await db.counts(tenantId)).toEqual({
            orders: keys.length + executions,
            receipts: stored,
            outbox: keys.length + executions,
          });
        }),
        {
          ...searchSettings({ fast: 3, long: 20 }),
        },
      );
    },
    searchTimeout(120_000),
  );
});

describe("the API's receipt sweeper with tombstones", () => {
  const db = new OrdersDb();
  let api: RunningApp | undefined;
  afterAll(async () => {
    await api?.stop();
    await db.close();
  });

  it('compacts an expired receipt during its tombstone and deletes it after, leaving the order', async () => {
    api = await startApp('command-api', {
      IDEMPOTENCY_RETENTION_SECONDS: '1',
      IDEMPOTENCY_TOMBSTONE_SECONDS_ORDERS_CREATE: '4',
      RECEIPT_SWEEP_INTERVAL_SECONDS: '1',
    });
    const { tenantId, apiKey } = await db.tenant();
    const client = new ApiClientSession(api.url, apiKey);
    const first = await client.createOrder('swept', { sku: 'SKU-1', quantity: 1 });
    const receipt = await lookup(client, 'swept');

    const compacted = await eventually(
      () => storedReceipt(db, tenantId, 'swept'),
      (row) => row?.response_body === null,
      { timeoutMs: 10_000, intervalMs: 100, what: 'the sweeper compacting the expired receipt' },
    );
    expect(compacted).toMatchObject({ response_status: 201, response_headers: null, effect_id: first.body.id });
    expect(Date.now()).toBeLessThan(Date.parse(receipt.tombstoneUntil) - 200);
    expectKeyExpired(await client.createOrder('swept', { sku: 'SKU-1', quantity: 1 }), receipt);

    await eventually(
      () => storedReceipt(db, tenantId, 'swept'),
      (row) => row === undefined,
      { timeoutMs: 15_000, intervalMs: 200, what: 'the sweeper deleting the receipt once its tombstone ended' },
    );
    // Not before the tombstone ended (200 ms: the distance between this clock and the database's).
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(receipt.tombstoneUntil) - 200);
    expect(await db.counts(tenantId)).toEqual({ orders: 1, receipts: 0, outbox: 1 });
  });
});
