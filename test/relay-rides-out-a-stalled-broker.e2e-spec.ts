import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Headers } from '@app/contracts';
import { RunningApp } from './support/apps';
import { PRODUCE } from './support/kafka-fault-proxy';
import { OutboxDb } from './support/outbox-db';
import { firstCopiesByKey, relayBehindAFaultProxy } from './support/relay-behind-a-fault-proxy';
import { searchSettings, searchTimeout } from './support/search';
import { eventually } from './support/eventually';

const BATCH = 40;
/** The relay's DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS here: a stall longer than it is cheap to wait out. */
const IDLE_IN_TRANSACTION_MS = 2_500;
const TENANT = `t-stall-${randomUUID().slice(0, 8)}-`;

/** One backlog (3 to 8 batches), and which of its Produce requests the broker answers late, and how late. */
interface Plan {
  keys: number;
  perKey: number;
  /** The `nthProduce`-th Produce request of the drain is held back */
  nthProduce: number;
  /** for this long (longer than the relay's session may sit idle in a transaction). */
  stallMs: number;
}

const plans: fc.Arbitrary<Plan> = fc.record({
  keys: fc.integer({ min: 8, max: 12 }),
  perKey: fc.integer({ min: 15, max: 25 }),
  nthProduce: fc.integer({ min: 1, max: 3 }),
  stallMs: fc.integer({ min: Math.round(IDLE_IN_TRANSACTION_MS * 1.2), max: IDLE_IN_TRANSACTION_MS * 3 }),
});

async function metric(app: RunningApp, name: string): Promise<number> {
  const text = await (await fetch(`${app.managementUrl}/metrics`)).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith(name))
    .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
}

/**
 * A broker that stalls (answers a Produce request seconds late, its connections alive) is slow, not
 * down, and not a database failure. While a batch is in flight the relay holds the next one claimed in
 * an open transaction; PostgreSQL ends a session idle in a transaction for longer than
 * `idle_in_transaction_session_timeout`. What must hold for any backlog, stalled request and stall:
 * the relay keeps its session (no database failure counted), every row reaches Kafka exactly once (a
 * session lost under a batch in flight republishes it), and each key's events arrive in order.
 *
 * The broker advertises a proxy's port, so every connection of the relay passes through it; the proxy
 * holds back the chosen Produce request. Reproduce a failure with the seed and path fast-check prints:
 * FC_SEED=… FC_PATH=… npx jest test/relay-rides-out-a-stalled-broker
 */
describe('a broker that stalls while the relay drains a backlog', () => {
  const stack = relayBehindAFaultProxy('relaystall', {
    brokerPort: 29_680,
    tenantPrefix: TENANT,
    env: {
      DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS: String(IDLE_IN_TRANSACTION_MS),
      RELAY_BATCH_SIZE: String(BATCH),
    },
  });

  async function check(plan: Plan): Promise<void> {
    const { keys, perKey, nthProduce, stallMs } = plan;
    const { proxy, outbox, relay, read } = stack();
    const tenantId = `${TENANT}${randomUUID().slice(0, 8)}`;
    const ids = new Map<string, { key: number; n: number }>();
    const failuresBefore = await metric(relay, 'outbox_publish_failures_total');

    let produced = 0;
    const stall = proxy.delayRequest(({ apiKey }) => apiKey === PRODUCE && ++produced === nthProduce, stallMs);
    // One transaction, event n of every key before event n + 1 of any: a backlog of several batches.
    await outbox.dataSource.transaction(async (manager) => {
      for (let n = 1; n <= perKey; n++) {
        for (let k = 0; k < keys; k++) {
          const [id] = await OutboxDb.add(manager, tenantId, [[`${tenantId}-${k}`, n]]);
          ids.set(id, { key: k, n });
        }
      }
    });
    await stall;
    await eventually(
      () => outbox.unpublished(tenantId),
      (waiting) => waiting === 0,
      { timeoutMs: 30_000, what: 'the relay publishing the whole backlog' },
    );

    const mine = () => read.messages.filter((m) => m.headers[Headers.tenantId] === tenantId);
    await read.until(() => new Set(mine().map((m) => m.headers[Headers.messageId])).size === ids.size);
    const { duplicated, disordered } = firstCopiesByKey(mine(), ids);
    expect({ plan, duplicated, disordered, failures: (await metric(relay, 'outbox_publish_failures_total')) - failuresBefore }).toEqual({
      plan,
      duplicated: 0,
      disordered: [],
      failures: 0,
    });
  }

  it(
    'keeps its session: every row once and in key order, whichever request stalls and for how long',
    async () => {
      await fc.assert(fc.asyncProperty(plans, check), searchSettings({ fast: 3, long: 40 }));
    },
    searchTimeout(300_000),
  );
});
