import { randomUUID } from 'node:crypto';
import { Headers } from '@app/contracts';
import { FulfillmentDb } from './support/fulfillment-db';
import { testKafka, uniqueTopic } from './support/kafka';
import { NotifierDb } from './support/notifier-db';
import { json, ops } from './support/ops-cli';
import { OrdersDb } from './support/orders-db';
import { OutboxDb } from './support/outbox-db';
import { TopicReader } from './support/topic-reader';

/**
 * The replay guard: a consumer deduplicates only what its inbox still remembers (its declared
 * retention), so a range reaching past it is refused, unless forced; a dry run shows the counts and
 * the verdict. Rows on a topic of this suite's own, already published, some of them hours ago.
 */
describe('outbox:replay refuses rows older than a consumer remembers', () => {
  const orders = new OrdersDb();
  const outbox = new OutboxDb();
  const fulfillment = new FulfillmentDb();
  const notifier = new NotifierDb();
  const kafka = testKafka('e2e-replay-guard');
  const topic = uniqueTopic('replay-guard');
  const tenantId = `t-replay-${randomUUID().slice(0, 8)}`;
  /** A consumer of this suite's own, declaring a one-hour retention beside the real ones. */
  const forgetful = `e2e-forgetful-${randomUUID().slice(0, 8)}`;
  let old: string[];
  let recent: string[];

  beforeAll(async () => {
    await outbox.init();
    old = await outbox.commitPublished(
      topic,
      tenantId,
      [
        ['a', 1],
        ['b', 1],
        ['a', 2],
      ],
      2 * 3600,
    );
    recent = await outbox.commitPublished(
      topic,
      tenantId,
      [
        ['a', 3],
        ['b', 2],
      ],
      0,
    );
    await fulfillment.pool.query(`INSERT INTO inbox_consumers (consumer, retention_seconds) VALUES ($1, 3600)`, [forgetful]);
  });
  afterAll(async () => {
    await fulfillment.pool.query(`DELETE FROM inbox_consumers WHERE consumer = $1`, [forgetful]);
    await Promise.all([orders.close(), outbox.close(), fulfillment.close(), notifier.close()]);
  });

  const replays = async () =>
    (await orders.pool.query(`SELECT id, forced, published, finished_at FROM outbox_replays WHERE topic = $1`, [topic])).rows;

  it('refuses, naming the consumer, its retention and the cut-off, and publishes nothing; a dry run says the same', async () => {
    const [dryRun, refused] = await Promise.all([
      ops(['outbox:replay', '--from', '1', '--topic', topic, '--dry-run', '--json']),
      ops(['outbox:replay', '--from', '1', '--topic', topic]),
    ]);

    expect(dryRun.status).toBe(1);
    const verdict = JSON.parse(dryRun.stdout);
    expect(verdict).toMatchObject({
      dryRun: true,
      replayId: null,
      selected: 5,
      published: 0,
      byTopic: { [topic]: 5 },
      byTenant: { [tenantId]: 5 },
    });
    expect(verdict.guard.verdict).toBe('refused');
    const mine = verdict.guard.consumers.find((c: { consumer: string }) => c.consumer === forgetful);
    expect(mine).toMatchObject({ database: 'fulfillment', retentionSeconds: 3600, pastRetention: 3 });
    expect(Date.now() - Date.parse(mine.cutoff)).toBeGreaterThan(3_500_000);

    expect(refused.status).toBe(1);
    expect(refused.stdout).toBe('');
    const reason = refused.stderr.trim().split('\n');
    expect(reason).toHaveLength(1);
    const named = reason[0].match(
      /consumer "([^"]+)" \(inbox retention 3600 s\) forgets message-ids received before (\S+), and 3 selected row\(s\) were committed before it/,
    );
    expect(named?.[1]).toBe(forgetful);
    expect(Math.abs(Date.parse(named![2]) - Date.parse(mine.cutoff))).toBeLessThan(60_000);
    expect(dryRun.stderr).toContain(`consumer "${forgetful}"`);

    expect(await replays()).toEqual([]);
    const admin = kafka.admin();
    await admin.connect();
    try {
      expect(await admin.listTopics()).not.toContain(topic);
    } finally {
      await admin.disconnect();
    }
  }, 120_000);

  it('judges a row by when it was committed, not by when the relay marked it published', async () => {
    // The state a relay leaves when it sent a row, died before marking it, and marked it on its return
    // two hours later (or when an outage lost the broker's acknowledgement): consumers may have received
    // the first copy two hours ago and forgotten it since, though `published_at` is recent.
    const lateTopic = uniqueTopic('replay-guard-late');
    const [late] = await outbox.commitPublished(lateTopic, tenantId, [['c', 1]], 0);
    await outbox.dataSource.query(`UPDATE outbox_messages SET created_at = now() - interval '2 hours' WHERE id = $1`, [late]);
    const from = new Date(Date.now() - 60_000).toISOString();

    const run = await ops(['outbox:replay', '--from', from, '--topic', lateTopic, '--dry-run', '--json']);

    expect(run.status).toBe(1);
    const verdict = JSON.parse(run.stdout);
    expect(verdict).toMatchObject({ selected: 1, guard: { verdict: 'refused' } });
    const mine = verdict.guard.consumers.find((c: { consumer: string }) => c.consumer === forgetful);
    expect(mine).toMatchObject({ retentionSeconds: 3600, pastRetention: 1 });
    expect(run.stderr).toContain(`consumer "${forgetful}"`);
  }, 120_000);

  it('replays a range inside every retention, and warns when --from reaches past the outbox retention', async () => {
    const from = new Date(Date.now() - 3600 * 1000 + 60_000).toISOString();
    const run = await ops(['outbox:replay', '--from', from, '--topic', topic, '--dry-run', '--json']);
    expect(json(run)).toMatchObject({ selected: 2, byTenant: { [tenantId]: 2 }, guard: { verdict: 'ok' } });

    const reachesBack = await ops(
      ['outbox:replay', '--from', '2000-01-01', '--topic', topic, '--tenant', tenantId, '--dry-run', '--force'],
      {
        OUTBOX_RETENTION_SECONDS: '3600',
      },
    );
    expect(reachesBack.status).toBe(0);
    expect(reachesBack.stdout).toMatch(/Dry run: 5 published outbox row\(s\) selected/);
    expect(reachesBack.stdout).toContain(`tenant  ${tenantId}  5`);
    expect(reachesBack.stderr).toMatch(/warning: --from 2000-01-01T00:00:00.000Z reaches back past OUTBOX_RETENTION_SECONDS \(1h\)/);
    expect(reachesBack.stderr).toMatch(/WARNING: --force/);
  }, 120_000);

  it('refuses when no consumer declares a retention at all', async () => {
    const saved = [
      (await fulfillment.pool.query(`DELETE FROM inbox_consumers RETURNING consumer, retention_seconds`)).rows,
      (await notifier.pool.query(`DELETE FROM inbox_consumers RETURNING consumer, retention_seconds`)).rows,
    ];
    let run;
    try {
      run = await ops(['outbox:replay', '--from', '1', '--topic', topic, '--dry-run']);
    } finally {
      for (const [pool, rows] of [
        [fulfillment.pool, saved[0]],
        [notifier.pool, saved[1]],
      ] as const) {
        for (const row of rows) {
          await pool.query(`INSERT INTO inbox_consumers (consumer, retention_seconds) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [
            row.consumer,
            row.retention_seconds,
          ]);
        }
      }
    }
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/no consumer declares an inbox retention/);
  }, 120_000);

  it('publishes them with --force, records the replay as forced, and creates the missing topic', async () => {
    const run = await ops(['outbox:replay', '--from', '1', '--topic', topic, '--force', '--json'], { KAFKA_TOPIC_PARTITIONS: '3' });
    const result = json(run);
    expect(result).toMatchObject({
      dryRun: false,
      forced: true,
      finished: true,
      published: 5,
      byTopic: { [topic]: 5 },
      createdTopics: [topic],
    });
    expect(run.stderr).toMatch(new RegExp(`WARNING: --force .*consumer "${forgetful}"`));
    expect(await replays()).toEqual([{ id: result.replayId, forced: true, published: 5, finished_at: expect.any(Date) }]);

    const admin = kafka.admin();
    await admin.connect();
    try {
      const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
      expect(topics[0].partitions).toHaveLength(3);
    } finally {
      await admin.disconnect();
    }
    const reader = new TopicReader(kafka, tenantId, topic);
    await reader.start();
    try {
      const read = await reader.until((messages) => messages.length >= 5);
      expect(read.map((m) => m.headers[Headers.messageId]).sort()).toEqual([...old, ...recent].sort());
      expect(read.every((m) => m.headers[Headers.replayId] === result.replayId)).toBe(true);
      // Per key, in outbox order: a's three events, b's two.
      expect(read.filter((m) => m.key === 'a').map((m) => m.value.n)).toEqual([1, 2, 3]);
      expect(read.filter((m) => m.key === 'b').map((m) => m.value.n)).toEqual([1, 2]);
    } finally {
      await reader.stop();
    }
  }, 120_000);

  /**
   * The guard judges the rows when the replay starts; a paced replay takes time, and rows that were
   * inside every retention then may not be when their batch goes. Each batch is judged again on the
   * database clock: the replay stops at the first row a consumer has forgotten since, saying so.
   */
  it('stops a paced replay at the first batch whose rows a consumer forgot while it ran', async () => {
    const pacedTopic = uniqueTopic('replay-guard-paced');
    const rows = 30;
    // 3,590 s old: 10 s inside the forgetful consumer's hour when the replay starts, which at 2 rows/s needs 15 s.
    await outbox.commitPublished(
      pacedTopic,
      tenantId,
      Array.from({ length: rows }, (_, i): [string, number] => [`k${i % 3}`, i]),
      3_590,
    );

    const run = await ops(['outbox:replay', '--from', '1', '--topic', pacedTopic, '--rate', '2']);

    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/^ops: stopped at the dedupe window: replay \S+ stopped after sequence \d+;/m);
    const { rows: stored } = await orders.pool.query(`SELECT published, finished_at FROM outbox_replays WHERE topic = $1`, [pacedTopic]);
    expect(stored).toHaveLength(1);
    expect(stored[0].finished_at).toBeNull();
    expect(stored[0].published).toBeGreaterThan(0);
    expect(stored[0].published).toBeLessThan(rows);
  }, 120_000);
});
