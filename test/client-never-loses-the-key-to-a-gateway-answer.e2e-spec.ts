import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Order, OrdersClient } from '@app/client';
import { commandApiFixture } from './support/command-api';
import { Fault, FaultProxy } from './support/fault-proxy';
import { searchSettings } from './support/search';

/** Calls a caller makes for one action before the test calls it lost (every fault schedule needs fewer). */
const CALLS = 8;

/** A gateway's own text/plain answer: from a load balancer draining a deploy or a proxy's limit, or after an upstream reset. */
const gatewayAnswer = fc.oneof(
  fc.record({
    kind: fc.constant('gateway-answer' as const),
    status: fc.constantFrom(503, 429, 408, 500),
    forwarded: fc.constant(false),
    retryAfterSeconds: fc.constantFrom(undefined, 0),
  }),
  fc.record({ kind: fc.constant('gateway-answer' as const), status: fc.constantFrom(500, 502, 503), forwarded: fc.constant(true) }),
);
const postFault = fc.oneof(
  fc.constantFrom<Fault>(
    { kind: 'reset' },
    { kind: 'drop-reply' },
    { kind: 'gateway-timeout' },
    { kind: 'unavailable', retryAfterSeconds: 0 },
  ),
  gatewayAnswer,
);
const lookupFault = fc.oneof(
  fc.constantFrom<Fault>({ kind: 'reset' }, { kind: 'drop-reply' }, { kind: 'unavailable', retryAfterSeconds: 0 }),
  gatewayAnswer,
);
/** One logical action: the faults its requests meet in order, over all of its caller's calls (then every request passes). */
const action = fc.record({
  post: fc.array(postFault, { minLength: 1, maxLength: 4 }),
  lookup: fc.array(lookupFault, { maxLength: 2 }),
});

/** The key a rejection hands its caller (`key`, or `replay.key` of a problem), if it names one. */
function keyCarriedBy(error: unknown): string | undefined {
  const { key, replay } = error as { key?: string; replay?: { key?: string } };
  return key ?? replay?.key;
}

/**
 * A gateway between the client and the service answers for itself: a plain-text 503 or 429 while a
 * deploy drains, 408, or a 500/502/503 after the request reached the service and its reply was lost.
 * None of it is a problem document. The caller here does what the client's README asks: when a call
 * is rejected it sends the action again with the key the rejection carries, and only a rejection
 * without a key is a new action. Through random schedules of such answers, lost replies and problem
 * answers, each action makes one order, and a rejection without a key is one that applied nothing.
 * 20 runs in `npm test`, 200 in `npm run test:faults`. Replay a failure: FC_SEED=… FC_PATH=…
 */
describe('the client keeps the key through gateway answers (real API and PostgreSQL behind a fault proxy)', () => {
  const suite = commandApiFixture();
  const { db } = suite;
  const schedules = new Map<string, { post: Fault[]; lookup: Fault[] }>();
  let proxy: FaultProxy;

  beforeAll(async () => {
    proxy = await FaultProxy.start(suite.api.url, ({ method, key }) => {
      // Keys are `<action>.<call>`: the faults belong to the action, whichever call meets them.
      const schedule = key === undefined ? undefined : schedules.get(key.split('.')[0]);
      return (method === 'POST' ? schedule?.post.shift() : schedule?.lookup.shift()) ?? { kind: 'pass' };
    });
  });
  afterAll(async () => {
    await proxy.stop();
  });

  it('one order per action, and every rejection either carries the key or applied nothing', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(action, { minLength: 1, maxLength: 5 }), async (actions) => {
        const { tenantId, apiKey } = await db.tenant();
        const rejections: { sku: string; sentWith: string; carried?: string; error: string }[] = [];

        /** The caller of one action: its own client, whose fresh keys the test can tell apart. */
        const place = async (sku: string, faults: { post: Fault[]; lookup: Fault[] }): Promise<Order | undefined> => {
          const id = randomUUID();
          schedules.set(id, { post: [...faults.post], lookup: [...faults.lookup] });
          let made = 0;
          const orders = new OrdersClient({
            baseUrl: proxy.url,
            apiKey,
            newKey: () => `${id}.${++made}`,
            retry: { attemptTimeoutMs: 2_000, baseDelayMs: 5, maxDelayMs: 50, deadlineMs: 10_000 },
          });
          let key: string | undefined;
          for (let call = 0; call < CALLS; call++) {
            try {
              return (await orders.createOrder({ sku, quantity: 1 }, { key })).value;
            } catch (error) {
              const sentWith = key ?? `${id}.${made}`;
              key = keyCarriedBy(error);
              rejections.push({ sku, sentWith, carried: key, error: String(error) });
            }
          }
          return undefined;
        };
        const skus = actions.map((_, i) => `A${i}`);
        const placed = await Promise.all(actions.map((faults, i) => place(skus[i], faults)));

        const { rows } = await db.pool.query<{ sku: string; n: number }>(
          /* sql */ `SELECT sku, count(*)::int AS n FROM orders WHERE tenant_id = $1 GROUP BY sku ORDER BY sku`,
          [tenantId],
        );
        expect(Object.fromEntries(rows.map((row) => [row.sku, row.n]))).toEqual(Object.fromEntries(skus.map((sku) => [sku, 1])));
        expect(placed.map((order) => order?.sku)).toEqual(skus);

        const { rows: applied } = await db.pool.query<{ key: string }>(
          /* sql */ `SELECT idempotency_key AS key FROM idempotency_receipts WHERE tenant_id = $1`,
          [tenantId],
        );
        const appliedKeys = new Set(applied.map((row) => row.key));
        expect(rejections.filter((r) => r.carried === undefined && appliedKeys.has(r.sentWith))).toEqual([]);
        expect(rejections.filter((r) => r.carried !== undefined && r.carried !== r.sentWith)).toEqual([]);
        // Only an answer that is not the API's and not "try again later" ends a call: a gateway's 500.
        expect(rejections.filter((r) => !/\b500\b/.test(r.error))).toEqual([]);
      }),
      searchSettings({ fast: 20, long: 200 }),
    );
  });
});
