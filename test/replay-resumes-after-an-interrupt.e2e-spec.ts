import { randomUUID } from 'node:crypto';
import { Headers } from '@app/contracts';
import { FulfillmentDb } from './support/fulfillment-db';
import { testKafka, uniqueTopic } from './support/kafka';
import { json, ops, startOps } from './support/ops-cli';
import { OrdersDb } from './support/orders-db';
import { OutboxDb } from './support/outbox-db';
import { TopicReader } from './support/topic-reader';

/**
 * A slow (--rate) replay interrupted by Ctrl-C finishes the batch in flight, records how far Kafka
 * acknowledged, and tells the operator how to go on; `--resume` completes it from there, with the
 * stored range and filters. Rows on a topic of this suite's own.
 */
describe('outbox:replay can be interrupted and resumed', () => {
  const orders = new OrdersDb();
  const outbox = new OutboxDb();
  const fulfillment = new FulfillmentDb();
  const kafka = testKafka('e2e-replay-resume');
  const topic = uniqueTopic('replay-resume');
  const tenantId = `t-resume-${randomUUID().slice(0, 8)}`;
  /** The guard wants a declared retention: a consumer of this suite's own that remembers a day. */
  const consumer = `e2e-resume-${randomUUID().slice(0, 8)}`;
  let ids: string[];

  beforeAll(async () => {
    await outbox.init();
    const events: [string, number][] = [];
    for (let n = 1; n <= 10; n++) events.push(['k1', n], ['k2', n], ['k3', n]);
    ids = await outbox.commitPublished(topic, tenantId, events);
    await fulfillment.pool.query(`INSERT INTO inbox_consumers (consumer, retention_seconds) VALUES ($1, 86400)`, [consumer]);
  });
  afterAll(async () => {
    await fulfillment.pool.query(`DELETE FROM inbox_consumers WHERE consumer = $1`, [consumer]);
    await Promise.all([orders.close(), outbox.close(), fulfillment.close()]);
  });

  const stored = async (id: string) => (await orders.pool.query('SELECT * FROM outbox_replays WHERE id = $1', [id])).rows[0];

  it('stops on SIGINT after the batch in flight, and --resume publishes the rest', async () => {
    const first = startOps(['outbox:replay', '--from', '1', '--topic', topic, '--rate', '5', '--json']);
    // Interrupt once the first batch is acknowledged and recorded.
    const deadline = Date.now() + 60_000;
    let started: { id: string } | undefined;
    while (!started) {
      if (Date.now() > deadline || first.process.exitCode !== null) throw new Error(`no progress recorded: ${(await first.result).stderr}`);
      const { rows } = await orders.pool.query('SELECT id FROM outbox_replays WHERE topic = $1 AND published > 0', [topic]);
      started = rows[0];
      if (!started) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    first.process.kill('SIGINT');
    const interrupted = await first.result;

    expect(interrupted.status).toBe(1);
    expect(interrupted.stderr).toContain(`ops: SIGINT: finishing the batch in flight`);
    expect(interrupted.stderr).toContain(`npm run ops -- outbox:replay --resume ${started.id}`);
    const partial = JSON.parse(interrupted.stdout);
    expect(partial).toMatchObject({ replayId: started.id, finished: false, selected: 30 });
    expect(partial.published).toBeGreaterThan(0);
    expect(partial.published).toBeLessThan(30);
    const afterInterrupt = await stored(started.id);
    expect(afterInterrupt).toMatchObject({ published: partial.published, finished_at: null, topic, forced: false });
    const { rows: lastDone } = await orders.pool.query('SELECT sequence FROM outbox_messages WHERE id = $1', [ids[partial.published - 1]]);
    expect(afterInterrupt.last_sequence).toBe(lastDone[0].sequence);

    const resumed = json(await ops(['outbox:replay', '--resume', started.id, '--rate', '10', '--json']));
    const remaining = 30 - partial.published;
    expect(resumed).toMatchObject({
      replayId: started.id,
      resumed: true,
      finished: true,
      selected: remaining,
      published: remaining,
      totalPublished: 30,
    });
    const done = await stored(started.id);
    expect(done).toMatchObject({ published: 30, selected: 30 });
    expect(done.finished_at).not.toBeNull();

    // Every selected row at least once, each key in outbox order.
    const reader = new TopicReader(kafka, tenantId, topic);
    await reader.start();
    try {
      const read = await reader.until((messages) => new Set(messages.map((m) => m.headers[Headers.messageId])).size >= 30);
      expect(new Set(read.map((m) => m.headers[Headers.messageId]))).toEqual(new Set(ids));
      expect(read.every((m) => m.headers[Headers.replayId] === started!.id)).toBe(true);
      // At most 10 per second: the resumed rows went out over at least one second per batch after the first.
      const times = read.filter((m) => ids.indexOf(m.headers[Headers.messageId]) >= partial.published).map((m) => m.timestamp);
      expect(Math.max(...times) - Math.min(...times)).toBeGreaterThanOrEqual((Math.ceil(remaining / 10) - 1) * 1000 - 300);
      for (const key of ['k1', 'k2', 'k3']) {
        const ns = read.filter((m) => m.key === key).map((m) => m.value.n as number);
        expect(ns).toEqual([...ns].sort((a, b) => a - b));
      }
    } finally {
      await reader.stop();
    }

    const again = await ops(['outbox:replay', '--resume', started.id]);
    expect(again.status).toBe(1);
    expect(again.stderr).toMatch(new RegExp(`replay ${started.id} finished at .*nothing to resume`));
  }, 180_000);
});
