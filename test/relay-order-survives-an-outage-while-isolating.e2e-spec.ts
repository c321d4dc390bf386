import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Headers } from '@app/contracts';
import { PRODUCE } from './support/kafka-fault-proxy';
import { OutboxDb } from './support/outbox-db';
import { firstCopiesByKey, relayBehindAFaultProxy } from './support/relay-behind-a-fault-proxy';
import { searchSettings, searchTimeout } from './support/search';
import { eventually } from './support/eventually';

const HUGE = { filler: 'x'.repeat(1536 * 1024) }; // over the broker's 1 MiB message.max.bytes
const BATCH = 40;
const TENANT = `t-cut-${randomUUID().slice(0, 8)}-`;

/** One backlog, and where the network dies while the relay searches a refused request. */
interface Plan {
  keys: number;
  perKey: number;
  /** The refused row: key `refusedKey`'s event `refusedN` (in the first batch). */
  refusedKey: number;
  refusedN: number;
  /** The `nthProduce`-th Produce request after the refused one fails, */
  nthProduce: number;
  /** and so do the Produce requests after it (the relay's retries among them) until `failures` have. */
  failures: number;
}

const plans: fc.Arbitrary<Plan> = fc
  .record({ keys: fc.integer({ min: 8, max: 16 }), perKey: fc.integer({ min: 6, max: 10 }) })
  .chain(({ keys, perKey }) =>
    fc.record({
      keys: fc.constant(keys),
      perKey: fc.constant(perKey),
      refusedKey: fc.integer({ min: 0, max: keys - 1 }),
      refusedN: fc.integer({ min: 1, max: 2 }),
      nthProduce: fc.integer({ min: 1, max: 3 }),
      failures: fc.integer({ min: 2, max: 8 }),
    }),
  );

/**
 * A request Kafka refused in part makes the relay resend the batch partition by partition to find the
 * refused row. If the broker becomes unreachable during that search, the batch is only partly
 * published, and the batch the relay claimed ahead meanwhile holds later events of the keys not yet
 * sent. What must hold for any backlog, refused row, failing request and number of failures in a row:
 * per key, each event first reaches Kafka after the ones before it; nothing of the refused key after
 * the refused row is ever sent; the refused row is parked and every other row arrives.
 *
 * The broker advertises a proxy's port, so every connection of the relay passes through it; the proxy
 * drops the connections that carry the chosen Produce requests. Reproduce a failure with the seed and
 * path fast-check prints: FC_SEED=… FC_PATH=… npx jest test/relay-order-survives
 */
describe('an outage while the relay isolates a refused row', () => {
  const stack = relayBehindAFaultProxy('relayisolationcut', {
    brokerPort: 29_660,
    tenantPrefix: TENANT,
    env: {
      RELAY_BATCH_SIZE: String(BATCH),
    },
  });

  async function check(plan: Plan): Promise<void> {
    const { keys, perKey, refusedKey, refusedN, nthProduce, failures } = plan;
    const { proxy, outbox, read } = stack();
    const tenantId = `${TENANT}${randomUUID().slice(0, 8)}`;
    const key = (k: number) => `${tenantId}-${k}`;
    const ids = new Map<string, { key: number; n: number }>();

    let produced = 0;
    let refusedSeen = false;
    const outage = proxy.failProduce(({ apiKey, size }) => {
      if (apiKey !== PRODUCE) return false;
      if (size > 1024 * 1024) {
        refusedSeen = true; // the refused request, and the search's resends of it, pass
        return false;
      }
      return refusedSeen && ++produced === nthProduce;
    }, failures);
    // One transaction, event n of every key before event n + 1 of any: the first batch holds the
    // refused row and the first events of every key; the batch claimed ahead holds later ones.
    await outbox.dataSource.transaction(async (manager) => {
      for (let n = 1; n <= perKey; n++) {
        for (let k = 0; k < keys; k++) {
          const refused = k === refusedKey && n === refusedN;
          const [id] = await OutboxDb.add(manager, tenantId, [[key(k), n]], refused ? HUGE : {});
          ids.set(id, { key: k, n });
        }
      }
    });
    const expected = [...ids].filter(([, e]) => e.key !== refusedKey || e.n < refusedN).map(([id]) => id);
    const parked = async (): Promise<string[]> =>
      (await outbox.dataSource.query('SELECT id FROM outbox_messages WHERE tenant_id = $1 AND parked_at IS NOT NULL', [tenantId])).map(
        (r: { id: string }) => r.id,
      );
    /** Rows neither published nor parked: of the refused key, and of the others. */
    const waiting = async (): Promise<{ refused: number; others: number }> => {
      const rows: { refused: boolean; n: string }[] = await outbox.dataSource.query(
        `SELECT message_key = $2 AS refused, count(*) AS n FROM outbox_messages
         WHERE tenant_id = $1 AND published_at IS NULL AND parked_at IS NULL GROUP BY 1`,
        [tenantId, key(refusedKey)],
      );
      const count = (refused: boolean) => Number(rows.find((row) => row.refused === refused)?.n ?? 0);
      return { refused: count(true), others: count(false) };
    };
    // Settled: the refused row parked and every row of the other keys published.
    await eventually(
      async () => ({ parked: (await parked()).length, ...(await waiting()) }),
      (seen) => seen.parked === 1 && seen.others === 0,
      { timeoutMs: 30_000, what: 'the relay settling the backlog' },
    );
    proxy.disarm();
    await outage;

    const mine = () => read.messages.filter((m) => m.headers[Headers.tenantId] === tenantId);
    await read.until(() => {
      const arrived = new Set(mine().map((m) => m.headers[Headers.messageId]));
      return expected.every((id) => arrived.has(id));
    });
    // Each key's events in the order of their first copies (copies after an outage are allowed: consumers dedupe).
    const { order, disordered } = firstCopiesByKey(mine(), ids);
    expect({ plan, disordered }).toEqual({ plan, disordered: [] });
    // Nothing of the refused key after its refused row went out: all of it still waits behind the parked row.
    expect({ plan, waiting: (await waiting()).refused }).toEqual({ plan, waiting: perKey - refusedN });
    expect(order.get(refusedKey) ?? []).toEqual(Array.from({ length: refusedN - 1 }, (_, i) => i + 1));
    expect(await parked()).toEqual([[...ids].find(([, e]) => e.key === refusedKey && e.n === refusedN)![0]]);
  }

  it(
    'keeps every key in order and the refused key behind its parked row, whichever requests fail',
    async () => {
      await fc.assert(fc.asyncProperty(plans, check), searchSettings({ fast: 12, long: 80 }));
    },
    searchTimeout(300_000),
  );
});
