import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Headers } from '@app/contracts';
import { PRODUCE } from './support/kafka-fault-proxy';
import { OutboxDb } from './support/outbox-db';
import { firstCopiesByKey, relayBehindAFaultProxy } from './support/relay-behind-a-fault-proxy';
import { searchSettings, searchTimeout } from './support/search';
import { eventually } from './support/eventually';

const BATCH = 40;
const TENANT = `t-unanswered-${randomUUID().slice(0, 8)}-`;
/** kafkajs sends a request this many times in all before the relay hears of its failure (orderedProducer's retries: 3). */
const SENDS_PER_FAILURE = 4;

/** Rows keep coming while the answers to some Produce requests are lost after the broker wrote them. */
interface Plan {
  keys: number;
  /** Rows committed per key, one transaction per round of keys, `pauseMs` apart. */
  perKey: number;
  pauseMs: number;
  /** The `nthProduce`-th Produce request of the run, and the ones after it, until `lost` answers were lost. */
  nthProduce: number;
  lost: number;
}

const plans: fc.Arbitrary<Plan> = fc.record({
  keys: fc.integer({ min: 4, max: 10 }),
  perKey: fc.integer({ min: 20, max: 40 }),
  pauseMs: fc.integer({ min: 5, max: 40 }),
  nthProduce: fc.integer({ min: 1, max: 4 }),
  lost: fc.integer({ min: 1, max: 3 * SENDS_PER_FAILURE }),
});

/**
 * The answer to a Produce request can be lost after the broker wrote the batch (a connection reset, a
 * load balancer's idle cut, a broker that fails over right after the write). kafkajs then sends the
 * request again; when every try is lost the relay hears of the failure, and kafkajs has rolled back
 * the producer's sequence numbers though the broker holds the batch. The relay claims again, and the
 * batch it sends now holds more rows (they kept coming): a producer that went on would send them
 * under sequence numbers the broker already took, which it refuses (OUT_OF_ORDER_SEQUENCE_NUMBER) or,
 * were a batch the same size, acknowledges as a duplicate without writing it. What must hold for any
 * stream of commits and any run of lost answers: every row reaches Kafka (copies allowed: consumers
 * dedupe), each key's first copies in order, and the relay publishing again once answers come back.
 *
 * The broker advertises a proxy's port, so every connection of the relay passes through it; the proxy
 * forwards the chosen Produce requests and kills their connection when the broker's answer comes.
 * Reproduce a failure with the seed and path fast-check prints: FC_SEED=… FC_PATH=… npx jest test/relay-survives-answers
 */
describe('answers to Produce requests lost after the broker wrote them', () => {
  const stack = relayBehindAFaultProxy('relayunanswered', {
    brokerPort: 29_780,
    tenantPrefix: TENANT,
    env: {
      RELAY_BATCH_SIZE: String(BATCH),
    },
  });

  async function check(plan: Plan): Promise<void> {
    const { keys, perKey, pauseMs, nthProduce, lost } = plan;
    const { proxy, outbox, read } = stack();
    const tenantId = `${TENANT}${randomUUID().slice(0, 8)}`;
    const ids = new Map<string, { key: number; n: number }>();

    let produced = 0;
    const fault = proxy.loseProduceAnswers(({ apiKey }) => apiKey === PRODUCE && ++produced === nthProduce, lost);
    for (let n = 1; n <= perKey; n++) {
      await outbox.dataSource.transaction(async (manager) => {
        for (let k = 0; k < keys; k++) {
          const [id] = await OutboxDb.add(manager, tenantId, [[`${tenantId}-${k}`, n]]);
          ids.set(id, { key: k, n });
        }
      });
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
    // Rows stopped coming: if the chosen request is still to come, it comes with the relay's next batches or never.
    const notYet = setTimeout(() => proxy.disarm(), 20_000);
    const struck = await fault;
    clearTimeout(notYet);
    expect({ plan, struck }).toEqual({ plan, struck: true });
    await eventually(
      () => outbox.unpublished(tenantId),
      (waiting) => waiting === 0,
      { timeoutMs: 30_000, what: `the relay publishing every row of ${JSON.stringify(plan)}` },
    );

    const mine = () => read.messages.filter((m) => m.headers[Headers.tenantId] === tenantId);
    await read.until(() => new Set(mine().map((m) => m.headers[Headers.messageId])).size === ids.size);
    const { disordered } = firstCopiesByKey(mine(), ids);
    expect({ plan, disordered }).toEqual({ plan, disordered: [] });
  }

  it(
    'every row reaches Kafka, each key in order, however many answers in a row are lost',
    async () => {
      await fc.assert(fc.asyncProperty(plans, check), searchSettings({ fast: 4, long: 40 }));
    },
    searchTimeout(300_000),
  );
});
