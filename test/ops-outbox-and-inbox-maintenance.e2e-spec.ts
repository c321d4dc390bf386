import { randomUUID } from 'node:crypto';
import { Topics } from '@app/contracts';
import { FulfillmentDb } from './support/fulfillment-db';
import { NotifierDb } from './support/notifier-db';
import { json, ops, OpsRun } from './support/ops-cli';
import { OrdersDb } from './support/orders-db';
import { OutboxDb } from './support/outbox-db';

/**
 * outbox:status, outbox:cleanup and inbox:sweep against real PostgreSQL (orders_test and the two
 * consumer databases), through the real CLI. Every row here belongs to a tenant, relay instance or
 * consumer of this suite's own and is removed afterwards, so other suites' rows are never counted
 * exactly and never left changed.
 */

const DAY = 24 * 3600;
const tenant = (purpose: string) => `t-ops-${purpose}-${randomUUID().slice(0, 8)}`;

describe('ops keeps the outbox and the inboxes in bounds', () => {
  const orders = new OrdersDb();
  const fulfillment = new FulfillmentDb();
  const notifier = new NotifierDb();
  let outbox: OutboxDb;
  const tenants: string[] = [];
  const relayIds: string[] = [];
  const consumers: string[] = [];

  /** Outbox rows of a fresh tenant, aged and marked as the relay would have left them. */
  async function outboxRows(purpose: string, rows: { published?: number; parked?: number; created?: number }[]): Promise<string[]> {
    const tenantId = tenant(purpose);
    tenants.push(tenantId);
    const ids = await outbox.commit(
      tenantId,
      rows.map((_, i) => [`${purpose}-key-${i}`, i] as [string, number]),
    );
    for (const [i, row] of rows.entries()) {
      await orders.pool.query(
        `UPDATE outbox_messages
         SET created_at = now() - make_interval(secs => $2),
             published_at = now() - make_interval(secs => $3),
             parked_at = now() - make_interval(secs => $4),
             attempts = CASE WHEN $3::float8 IS NULL AND $4::float8 IS NULL THEN 0 ELSE 1 END,
             last_error = CASE WHEN $4::float8 IS NULL THEN NULL ELSE 'MESSAGE_TOO_LARGE: The request included a message larger than the max message size the server will accept' END
         WHERE id = $1`,
        [ids[i], row.created ?? Math.max(row.published ?? 0, row.parked ?? 0), row.published ?? null, row.parked ?? null],
      );
    }
    return ids;
  }

  async function remaining(ids: string[]): Promise<string[]> {
    const { rows } = await orders.pool.query('SELECT id FROM outbox_messages WHERE id = ANY($1::uuid[])', [ids]);
    return rows.map((row) => row.id).sort();
  }

  beforeAll(async () => {
    outbox = await new OutboxDb().init();
  });
  afterAll(async () => {
    await orders.pool.query('DELETE FROM outbox_messages WHERE tenant_id = ANY($1)', [tenants]);
    await orders.pool.query('DELETE FROM outbox_relay_instances WHERE instance_id = ANY($1)', [relayIds]);
    for (const db of [fulfillment.pool, notifier.pool]) {
      await db.query('DELETE FROM inbox_messages WHERE consumer = ANY($1)', [consumers]);
      await db.query('DELETE FROM inbox_consumers WHERE consumer = ANY($1)', [consumers]);
    }
    await outbox.close();
    await Promise.all([orders.close(), fulfillment.close(), notifier.close()]);
  });

  it('outbox:status reports backlog, parked rows with their error, relay owners (stale ones marked) and the last publish', async () => {
    const startedAt = Date.now();
    const [oldest, , parked] = await outboxRows('status', [
      { created: 7200 },
      { created: 60 },
      { created: 3600, parked: 1800 },
      { published: 1 },
    ]);
    const [live, stale] = [`h1-relay-live-${randomUUID().slice(0, 8)}`, `h1-relay-stale-${randomUUID().slice(0, 8)}`];
    relayIds.push(live, stale);
    // Relays of earlier suites were stopped (some with SIGKILL, which leaves their row with a recent
    // heartbeat); none runs now. Their rows would own shards here, so only ours may be listed.
    await orders.pool.query('DELETE FROM outbox_relay_instances');
    await orders.pool.query(
      `INSERT INTO outbox_relay_instances (instance_id, started_at, heartbeat_at, shards, last_publish_at) VALUES
         ($1, now() - interval '10 minutes', now(), '{2,0,1}', now() - interval '5 seconds'),
         ($2, now() - interval '20 minutes', now() - interval '5 minutes', '{3}', now() - interval '6 minutes')`,
      [live, stale],
    );

    // As the relays are configured: 4 shards, a heartbeat every 30 s, so silent for 90 s means gone.
    const env = { RELAY_SHARDS: '4', RELAY_HEARTBEAT_MS: '30000' };
    const [asJson, asText] = await Promise.all([ops(['outbox:status', '--json'], env), ops(['outbox:status'], env)]);
    const status = json(asJson);
    expect(Object.keys(status).sort()).toEqual(['backlog', 'lastPublishAt', 'parked', 'relays', 'staleAfterSeconds', 'unownedShards']);
    // At least ours: three unpublished (one of them parked), the oldest two hours old.
    expect(status.backlog.unpublished).toBeGreaterThanOrEqual(3);
    expect(status.backlog.parked).toBeGreaterThanOrEqual(1);
    expect(status.backlog.oldestUnpublishedAgeSeconds).toBeGreaterThanOrEqual(7200);
    expect(Date.parse(status.lastPublishAt)).toBeGreaterThanOrEqual(startedAt - 5_000);
    expect(status.staleAfterSeconds).toBe(90);

    const relays = Object.fromEntries(status.relays.map((relay: { instanceId: string }) => [relay.instanceId, relay]));
    expect(relays[live]).toEqual({
      instanceId: live,
      shards: [0, 1, 2],
      heartbeatAgeSeconds: expect.any(Number),
      stale: false,
      startedAt: expect.any(String),
      lastPublishAt: expect.any(String),
    });
    expect(relays[live].heartbeatAgeSeconds).toBeLessThan(90);
    expect(relays[stale]).toMatchObject({ shards: [3], stale: true });
    expect(relays[stale].heartbeatAgeSeconds).toBeGreaterThanOrEqual(300);
    // Shard 3 is listed only by a relay that stopped answering: nobody publishes it.
    expect(status.unownedShards).toContain(3);
    for (const shard of [0, 1, 2]) expect(status.unownedShards).not.toContain(shard);

    const parkedRow = status.parked.find((row: { id: string }) => row.id === parked);
    expect(parkedRow).toEqual({
      id: parked,
      topic: Topics.orderEvents,
      key: 'status-key-2',
      eventType: 'RelayProbe',
      tenantId: expect.stringMatching(/^t-ops-status-/),
      createdAt: expect.any(String),
      parkedAt: expect.any(String),
      attempts: 1,
      lastError: expect.stringMatching(/^MESSAGE_TOO_LARGE/),
    });
    expect(status.parked.some((row: { id: string }) => row.id === oldest)).toBe(false);

    expect(asText.status).toBe(0);
    expect(asText.stderr).toBe('');
    expect(asText.stdout).toMatch(/^Backlog: \d+ unpublished \(\d+ parked\), oldest \d+[dh].* old$/m);
    expect(asText.stdout).toContain(`${live}  shards 0,1,2  heartbeat`);
    expect(asText.stdout).toMatch(new RegExp(`${stale}  shards 3 .*STALE$`, 'm'));
    expect(asText.stdout).toContain(`${parked}  ${Topics.orderEvents}  key status-key-2  RelayProbe`);
  });

  it('outbox:cleanup deletes only published rows past the retention, in batches; --dry-run and the unpublished and parked rows stay', async () => {
    const old = await outboxRows('cleanup-old', [{ published: 8 * DAY }, { published: 9 * DAY }, { published: 10 * DAY }]);
    const [recent, fresh] = await outboxRows('cleanup-recent', [{ published: 2 * 3600 }, { published: 0 }]);
    const [unpublished, parked] = await outboxRows('cleanup-kept', [{ created: 30 * DAY }, { created: 30 * DAY, parked: 29 * DAY }]);
    const all = [...old, recent, fresh, unpublished, parked];

    const dry = json(await ops(['outbox:cleanup', '--dry-run', '--json']));
    expect(dry).toEqual({ olderThanSeconds: 7 * DAY, dryRun: true, eligible: expect.any(Number), deleted: 0 });
    expect(dry.eligible).toBeGreaterThanOrEqual(3);
    expect(await remaining(all)).toEqual([...all].sort());

    const cleaned = json(await ops(['outbox:cleanup', '--batch-size', '2', '--json']));
    expect(cleaned).toMatchObject({ olderThanSeconds: 7 * DAY, dryRun: false });
    expect(cleaned.deleted).toBeGreaterThanOrEqual(3);
    expect(await remaining(all)).toEqual([recent, fresh, unpublished, parked].sort());

    const text = await ops(['outbox:cleanup', '--older-than', '3600']);
    expect(text.status).toBe(0);
    expect(text.stdout).toMatch(/^Deleted \d+ published outbox row\(s\) published more than 1h ago\.\n$/);
    expect(await remaining(all)).toEqual([fresh, unpublished, parked].sort());
  });

  it("inbox:sweep deletes only rows older than each consumer's own declared retention", async () => {
    const [short, long] = [`h1-sweep-short-${randomUUID().slice(0, 6)}`, `h1-sweep-long-${randomUUID().slice(0, 6)}`];
    // Beside `short` in its database, with a longer retention: a sweep of `short` must not touch its rows.
    const beside = `h1-sweep-beside-${randomUUID().slice(0, 6)}`;
    consumers.push(short, long, beside);
    await fulfillment.pool.query('INSERT INTO inbox_consumers (consumer, retention_seconds) VALUES ($1, 3600), ($2, 7200)', [
      short,
      beside,
    ]);
    await notifier.pool.query('INSERT INTO inbox_consumers (consumer, retention_seconds) VALUES ($1, 7200)', [long]);
    const insert = async (pool: FulfillmentDb['pool'], consumer: string, ageSeconds: number[]) => {
      const ids = ageSeconds.map(() => randomUUID());
      for (const [i, age] of ageSeconds.entries()) {
        await pool.query(
          `INSERT INTO inbox_messages (consumer, message_id, topic, kafka_partition, kafka_offset, outcome, received_at)
           VALUES ($1, $2, $3, 0, $4, 'applied', now() - make_interval(secs => $5))`,
          [consumer, ids[i], Topics.orderEvents, i, age],
        );
      }
      return ids;
    };
    // 90 minutes is past the short retention but inside the long one: the long consumer keeps it.
    const shortRows = await insert(fulfillment.pool, short, [7200, 7300, 7400, 1800]);
    const longRows = await insert(notifier.pool, long, [3 * 3600, 4 * 3600, 5400]);
    const besideRows = await insert(fulfillment.pool, beside, [9000, 5400]);
    const left = async () => ({
      short: (
        await fulfillment.pool.query('SELECT message_id FROM inbox_messages WHERE consumer = $1 ORDER BY kafka_offset', [short])
      ).rows.map((r) => r.message_id),
      beside: (
        await fulfillment.pool.query('SELECT message_id FROM inbox_messages WHERE consumer = $1 ORDER BY kafka_offset', [beside])
      ).rows.map((r) => r.message_id),
      long: (await notifier.pool.query('SELECT message_id FROM inbox_messages WHERE consumer = $1 ORDER BY kafka_offset', [long])).rows.map(
        (r) => r.message_id,
      ),
    });

    const dry = json(await ops(['inbox:sweep', '--dry-run', '--json']));
    expect(dry.dryRun).toBe(true);
    expect(dry.consumers).toEqual(
      expect.arrayContaining([
        { database: 'fulfillment', consumer: short, retentionSeconds: 3600, eligible: 3, deleted: 0 },
        { database: 'fulfillment', consumer: beside, retentionSeconds: 7200, eligible: 1, deleted: 0 },
        { database: 'notifier', consumer: long, retentionSeconds: 7200, eligible: 2, deleted: 0 },
      ]),
    );
    expect(await left()).toEqual({ short: shortRows, beside: besideRows, long: longRows });

    const one = json(await ops(['inbox:sweep', '--consumer', short, '--json']));
    expect(one).toEqual({
      dryRun: false,
      consumers: [{ database: 'fulfillment', consumer: short, retentionSeconds: 3600, eligible: 3, deleted: 3 }],
    });
    expect(await left()).toEqual({ short: shortRows.slice(3), beside: besideRows, long: longRows });

    const every = await ops(['inbox:sweep']);
    expect(every.status).toBe(0);
    expect(every.stdout).toContain(`${long} (database notifier, retention 2h): deleted 2 inbox row(s)`);
    expect(every.stdout).toContain(`${short} (database fulfillment, retention 1h): deleted 0 inbox row(s)`);
    expect(await left()).toEqual({ short: shortRows.slice(3), beside: besideRows.slice(1), long: longRows.slice(2) });
  });
});

/** Bad usage: [name, args, what the single stderr line says]. Every one exits 2 and changes nothing. */
const badUsage: [string, string[], RegExp][] = [
  ['outbox:status with an unknown flag', ['outbox:status', '--shard', '3'], /unknown option '--shard'/],
  [
    'outbox:cleanup --older-than below a minute',
    ['outbox:cleanup', '--older-than', '10'],
    /--older-than must be an integer 60-31536000 seconds/,
  ],
  ['outbox:cleanup --older-than not a number', ['outbox:cleanup', '--older-than', '7d'], /--older-than/],
  ['outbox:cleanup --batch-size 0', ['outbox:cleanup', '--batch-size', '0', '--json'], /--batch-size must be an integer 1-100000/],
  [
    'inbox:sweep of an unknown consumer',
    ['inbox:sweep', '--consumer', 'no-such-consumer', '--json'],
    /unknown consumer "no-such-consumer" \(known: .+\)/,
  ],
  ['inbox:sweep sooner than the declared retention', ['inbox:sweep', '--older-than', '60'], /unknown option '--older-than'/],
  ['dlq:list --limit 0', ['dlq:list', '--limit', '0'], /--limit must be an integer 1-1000/],
  ['dlq:list --since not a time', ['dlq:list', '--since', 'yesterday'], /--since must be an ISO 8601 time/],
  ['dlq:list of an unknown consumer', ['dlq:list', '--consumer', 'no-such-consumer'], /unknown consumer "no-such-consumer"/],
  ['dlq:redrive with nothing named', ['dlq:redrive', '--json'], /name the message-ids to re-drive .* or give --all/],
  ['dlq:redrive with ids and --all', ['dlq:redrive', '--all', randomUUID()], /not both/],
  ['dlq:redrive of a non-UUID', ['dlq:redrive', 'order-7781'], /not a message-id \(UUID\): order-7781/],
  ['dlq:redrive --all of an unknown consumer', ['dlq:redrive', '--all', '--consumer', 'no-such-consumer'], /unknown consumer/],
];

describe('ops refuses bad usage', () => {
  const orders = new OrdersDb();
  const fulfillment = new FulfillmentDb();
  const notifier = new NotifierDb();
  const consumer = `h1-usage-${randomUUID().slice(0, 6)}`;
  let runs: Map<string, Promise<OpsRun>>;
  let before: unknown;

  /** What any of these commands could change, summed up. */
  async function state() {
    const one = async (pool: OrdersDb['pool'], sql: string) => (await pool.query(sql)).rows[0];
    const consumerTables = `SELECT (SELECT count(*) FROM inbox_messages)::int AS inbox,
                                   (SELECT count(*) FROM dead_letters WHERE redriven_at IS NULL)::int AS open_dead_letters`;
    return {
      outbox: await one(orders.pool, `SELECT count(*)::int AS rows, count(published_at)::int AS published FROM outbox_messages`),
      fulfillment: await one(fulfillment.pool, consumerTables),
      notifier: await one(notifier.pool, consumerTables),
    };
  }

  beforeAll(async () => {
    // Something every command would act on: an old published outbox row, a consumer with old inbox rows.
    const tenantId = tenant('usage');
    await orders.pool.query(
      `INSERT INTO outbox_messages (id, topic, message_key, key_hash, event_type, event_version, tenant_id, payload, published_at)
       VALUES ($1, $2, 'k', 0, 'RelayProbe', 1, $3, '{}', now() - interval '30 days')`,
      [randomUUID(), Topics.orderEvents, tenantId],
    );
    await fulfillment.pool.query('INSERT INTO inbox_consumers (consumer, retention_seconds) VALUES ($1, 60)', [consumer]);
    await fulfillment.pool.query(
      `INSERT INTO inbox_messages (consumer, message_id, topic, kafka_partition, kafka_offset, outcome, received_at)
       VALUES ($1, $2, $3, 0, 0, 'applied', now() - interval '1 day')`,
      [consumer, randomUUID(), Topics.orderEvents],
    );
    before = await state();
    // A few at a time: each run boots Nest, and a machine with two cores chokes on thirteen at once.
    runs = new Map();
    for (let i = 0; i < badUsage.length; i += 4) {
      const batch = badUsage.slice(i, i + 4).map(([name, args]) => [name, ops(args)] as const);
      for (const [name, run] of batch) runs.set(name, run);
      await Promise.allSettled(batch.map(([, run]) => run));
    }
  }, 180_000);
  afterAll(async () => {
    await orders.pool.query(`DELETE FROM outbox_messages WHERE tenant_id LIKE 't-ops-usage-%'`);
    await fulfillment.pool.query('DELETE FROM inbox_messages WHERE consumer = $1', [consumer]);
    await fulfillment.pool.query('DELETE FROM inbox_consumers WHERE consumer = $1', [consumer]);
    await Promise.all([orders.close(), fulfillment.close(), notifier.close()]);
  });

  it.each(badUsage.map(([name, , message]) => [name, message] as const))(
    '%s: exit 2, one line on stderr, nothing on stdout',
    async (name, message) => {
      const run = await runs.get(name)!;
      expect({ status: run.status, stdout: run.stdout }).toEqual({ status: 2, stdout: '' });
      const lines = run.stderr.split('\n').filter(Boolean);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(message);
    },
  );

  it('and none of them changed anything', async () => {
    expect(await state()).toEqual(before);
  });
});
