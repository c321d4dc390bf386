import fc from 'fast-check';
import { Client } from 'pg';
import { ApiClientSession } from './support/command-api';
import { RunningApp, startApp } from './support/apps';
import { eventually } from './support/eventually';
import { HttpResult } from './support/http';
import { OrdersDb } from './support/orders-db';
import { testEnv } from './support/test-env';
import { searchSettings } from './support/search';

/**
 * An order without a customerRef is a decided command: its claim, receipt, order and OrderPlaced row
 * are one statement, the order and the event written only if that statement claimed the key
 * (CommandRunner, claimDecided). Here every retry reaches the database (two processes, replay cache
 * off), so that statement meets keys in every state: new, committed, in flight on the other process,
 * reused with other fields. Whatever the interleaving: one order and one event per key, every other
 * answer the winner's replay or a 422, and a replay wakes no relay (no NOTIFY for an insert of no rows).
 */
describe('decided commands write only what they claim', () => {
  const db = new OrdersDb();
  const listener = new Client({ connectionString: testEnv.ordersUrl });
  let notifications = 0;
  let apis: RunningApp[] = [];

  beforeAll(async () => {
    const env = { IDEMPOTENCY_REPLAY_CACHE_SECONDS: '0' };
    apis = await Promise.all([startApp('command-api', env), startApp('command-api', env)]);
    await listener.connect();
    listener.on('notification', () => notifications++);
    await listener.query('LISTEN outbox_messages');
  });
  afterAll(async () => {
    await listener.end();
    await Promise.all(apis.map((api) => api.stop()));
    await db.close();
  });

  const request = fc.record({ key: fc.constantFrom('k0', 'k1', 'k2'), quantity: fc.constantFrom(1, 2), api: fc.constantFrom(0, 1) });
  /** Rounds of 1-6 requests sent at once. */
  const rounds = fc.array(fc.array(request, { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 5 });

  it('one order and one event per key, the rest replays or 422s, whatever the interleaving', async () => {
    await fc.assert(
      fc.asyncProperty(rounds, async (plan) => {
        const { tenantId, apiKey } = await db.tenant();
        const sessions = apis.map((api) => new ApiClientSession(api.url, apiKey));
        const winners = new Map<string, { quantity: number; reply: HttpResult }>();
        for (const round of plan) {
          const replies = await Promise.all(round.map((r) => sessions[r.api].createOrder(r.key, { sku: 'SKU-1', quantity: r.quantity })));
          // The round's one new execution per key, if the key was new: read off the answers.
          round.forEach((r, i) => {
            const reply = replies[i];
            if (reply.status === 201 && reply.headers['idempotent-replayed'] === undefined) {
              expect(winners.has(r.key)).toBe(false);
              winners.set(r.key, { quantity: r.quantity, reply });
            }
          });
          round.forEach((r, i) => {
            const reply = replies[i];
            const winner = winners.get(r.key);
            expect(winner).toBeDefined();
            if (reply === winner!.reply) return;
            if (r.quantity === winner!.quantity) {
              expect(reply.status).toBe(201);
              expect(reply.headers['idempotent-replayed']).toBe('true');
              expect(reply.body).toEqual(winner!.reply.body);
              expect(reply.headers.location).toBe(winner!.reply.headers.location);
            } else {
              expect(reply.status).toBe(422);
              expect(reply.body).toMatchObject({ code: 'IDEMPOTENCY.KEY_REUSED' });
            }
          });
        }
        const keys = winners.size;
        expect(await db.counts(tenantId)).toEqual({ orders: keys, receipts: keys, outbox: keys });
      }),
      searchSettings({ fast: 15, long: 100 }),
    );
  });

  it('a replay answered by the claiming statement notifies no relay; a new order does', async () => {
    const { apiKey } = await db.tenant();
    const session = new ApiClientSession(apis[0].url, apiKey);
    const start = notifications; // the search above notified too
    expect((await session.createOrder('once', { sku: 'SKU-1', quantity: 1 })).status).toBe(201);
    await eventually(
      () => notifications,
      (n) => n > start,
      { what: 'the NOTIFY of the first order' },
    );
    await new Promise((resolve) => setTimeout(resolve, 200)); // any notification still on its way arrives
    const before = notifications;
    for (let i = 0; i < 5; i++) {
      const reply = await session.createOrder('once', { sku: 'SKU-1', quantity: 1 });
      expect(reply.headers['idempotent-replayed']).toBe('true');
    }
    const reused = await session.createOrder('once', { sku: 'SKU-1', quantity: 2 });
    expect(reused.status).toBe(422);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(notifications).toBe(before);

    expect((await session.createOrder('another', { sku: 'SKU-1', quantity: 1 })).status).toBe(201);
    await eventually(
      () => notifications,
      (n) => n > before,
      { what: 'the NOTIFY of the second order' },
    );
  });
});
