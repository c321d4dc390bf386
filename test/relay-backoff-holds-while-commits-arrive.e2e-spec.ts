import { randomUUID } from 'node:crypto';
import { RunningApp, startApp } from './support/apps';
import { sample, scrape } from './support/observe';
import { OutboxDb } from './support/outbox-db';
import { privateDatabases } from './support/private-stack';
import { TestBroker } from './support/test-broker';
import { eventually } from './support/eventually';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const BACKOFF_MS = 2_000;
const OUTAGE_MS = 10_000;

async function kafkaFailures(relay: RunningApp): Promise<number> {
  return sample((await scrape(relay)).text, 'outbox_publish_failures_total', { cause: 'kafka' });
}

describe('a broker outage while commands keep committing', () => {
  const broker = new TestBroker(29_500);
  let outbox: OutboxDb;
  let relay: RunningApp;

  beforeAll(async () => {
    await broker.start();
    const dbs = await privateDatabases('relaybackoff');
    outbox = await new OutboxDb(dbs.ordersUrl).init();
    relay = await startApp('outbox-relay', {
      ORDERS_DATABASE_URL: dbs.ordersUrl,
      KAFKA_BROKERS: broker.brokers,
      RELAY_POLL_INTERVAL_MS: '100',
      // A fixed backoff makes the number of attempts in a window known: at most one per BACKOFF_MS.
      RELAY_BACKOFF_MIN_MS: String(BACKOFF_MS),
      RELAY_BACKOFF_MAX_MS: String(BACKOFF_MS),
    });
  }, 120_000);
  afterAll(async () => {
    await relay?.stop();
    await outbox?.close();
    await broker.destroy();
  });

  const unpublished = (tenantId: string) => outbox.unpublished(tenantId);

  it('keeps its backoff (a NOTIFY per commit does not cut it short), keeps every row, and drains when the broker returns', async () => {
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    await outbox.commit(tenantId, [['warm-up', 0]]);
    await eventually(
      () => unpublished(tenantId),
      (n) => n === 0,
      { timeoutMs: 10_000, what: 'the warm-up row published' },
    );

    await broker.stop();
    let n = 0;
    const commitFor = async (ms: number) => {
      for (const end = Date.now() + ms; Date.now() < end; await pause(25)) await outbox.commit(tenantId, [[`key-${n % 7}`, n++]]);
    };
    // Wait for the first failed attempt, so the window below sees only the backoff's pace.
    for (let i = 0; i < 200 && (await kafkaFailures(relay)) === 0; i++) await commitFor(100);
    const before = await kafkaFailures(relay);
    expect(before).toBeGreaterThan(0);
    await commitFor(OUTAGE_MS);
    const attempts = (await kafkaFailures(relay)) - before;
    // Hundreds of NOTIFYs arrived; the relay still tried no more often than its backoff allows (+1 in flight).
    expect(n).toBeGreaterThan(100);
    expect(attempts).toBeGreaterThanOrEqual(1);
    expect(attempts).toBeLessThanOrEqual(OUTAGE_MS / BACKOFF_MS + 1);
    expect(await unpublished(tenantId)).toBe(n);

    await broker.start({ keepData: true });
    await eventually(
      () => unpublished(tenantId),
      (left) => left === 0,
      { timeoutMs: 60_000, what: 'every row published after the outage' },
    );
  });
});
