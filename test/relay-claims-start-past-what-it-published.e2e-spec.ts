import { randomUUID } from 'node:crypto';
import { DataSource, QueryRunner } from 'typeorm';
import { Topics } from '@app/contracts';
import { keyHash } from '@app/outbox';
import { postgresOptions } from '@app/platform';
import { startApp } from './support/apps';
import { eventually } from './support/eventually';
import { insertProbes, ordersUrlOfItsOwn, outboxOfItsOwn } from './support/outbox-of-its-own';
import { PrivatePostgres } from './support/private-postgres';
import { LONG_RUN } from './support/search';

/** Runs `work` on a connection of its own to `url`, closed afterwards: its backend's statistics are then flushed. */
async function onItsOwnConnection<T>(url: string, work: (dataSource: DataSource) => Promise<T>): Promise<T> {
  const dataSource = await new DataSource(postgresOptions({ url, applicationName: 'e2e-claimfloor', poolSize: 2 })).initialize();
  try {
    return await work(dataSource);
  } finally {
    await dataSource.destroy();
  }
}

/**
 * Buffers read through the unpublished index by every backend that has ended (a backend flushes its
 * statistics when it exits): read until two reads half a second apart agree.
 */
async function unpublishedIndexBuffers(dataSource: DataSource): Promise<number> {
  const read = async () =>
    Number(
      (
        await dataSource.query(/* sql */ `
          SELECT idx_blks_hit + idx_blks_read AS n FROM pg_statio_user_indexes WHERE indexrelname = 'outbox_messages_unpublished_idx'`)
      )[0].n,
    );
  let last = await read();
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    const now = await read();
    if (now === last) return now;
    last = now;
  }
}

/** Waits until the row `id` is published (looked up by its primary key, never through the unpublished index). */
function published(dataSource: DataSource, ids: string[], timeoutMs = 10_000): Promise<unknown> {
  return eventually(
    async () =>
      (
        await dataSource.query(`SELECT count(*)::int AS n FROM outbox_messages WHERE id = ANY($1::uuid[]) AND published_at IS NULL`, [ids])
      )[0].n,
    (unpublished: number) => unpublished === 0,
    { timeoutMs, intervalMs: 20, what: `${ids.length} rows published` },
  );
}

/** One probe row committed on its own; its id. */
async function commitOne(dataSource: DataSource | QueryRunner['manager'], tenantId: string, type = 'RelayProbe'): Promise<string> {
  const key = `key-${randomUUID().slice(0, 8)}`;
  const [{ id }] = await dataSource.query(
    /* sql */ `
    INSERT INTO outbox_messages (id, topic, message_key, key_hash, event_type, event_version, tenant_id, payload, headers)
    VALUES (gen_random_uuid(), $1, $2, $3, $4, 1, $5, '{}', '{}') RETURNING id`,
    [Topics.orderEvents, key, keyHash(key), type, tenantId],
  );
  return id;
}

/**
 * A published row's entry in the unpublished index stays until a vacuum cleans the indexes, and after
 * a backlog (a broker outage's) that can be hours away on a table keeping days of rows. Every claim
 * used to walk all those entries from the start of the index: 1.3 ms per claim at 100,000 rows, paid
 * at a trickle once per commit. The relay now starts its claims at a floor below which every row is
 * published (or was never committed), so they read only the index's live end.
 * Counted in buffers, not milliseconds: the same on a loaded machine.
 */
describe('the relay after draining a backlog, before any vacuum', () => {
  // On a server of its own: a transaction open anywhere on a server holds every relay's floor there
  // (docs/outbox.md), and the other jest workers' suites open theirs on the shared one at any moment
  // (one held open on another database made this 336 buffers per commit). Where this machine cannot
  // run one (PostgreSQL in Docker: no initdb here), on the shared server, saying so: then it counts
  // right when it runs alone (TEST_WORKERS=1).
  const postgres = new PrivatePostgres(29_730);
  const unavailable = postgres.unavailable();
  const url = unavailable ? ordersUrlOfItsOwn('claimfloor') : postgres.url('orders_claimfloor_test');
  beforeAll(async () => {
    if (!unavailable) return postgres.start();
    console.log(`claim floor on the shared server, where other suites' transactions can hold it: ${unavailable}`);
  }, 120_000);
  const tenantId = `t-${randomUUID().slice(0, 12)}`;
  const db = outboxOfItsOwn(
    'claimfloor',
    async () => {
      await onItsOwnConnection(url, (dataSource) => insertProbes(dataSource, 60_000, { topic: Topics.orderEvents, tenantId }));
    },
    undefined,
    url,
  );
  afterAll(() => postgres.destroy()); // after the hooks above (jest runs them in order): its sessions first; a no-op if never started

  it("does not walk the backlog's index entries on every claim", async () => {
    const first = await startApp('outbox-relay', { ORDERS_DATABASE_URL: url });
    await onItsOwnConnection(url, (dataSource) =>
      eventually(
        async () => (await dataSource.query(`SELECT count(*) FILTER (WHERE published_at IS NULL)::int AS n FROM outbox_messages`))[0].n,
        (unpublished: number) => unpublished === 0,
        { timeoutMs: 60_000, what: 'the 60,000-row backlog drained' },
      ),
    );
    await first.stop();
    const before = await unpublishedIndexBuffers(db());

    // The relay starts its claims from the bottom once a heartbeat (three walks each time): counted per
    // claim here, so a heartbeat longer than the test.
    const commits = 100;
    const relay = await startApp('outbox-relay', { ORDERS_DATABASE_URL: url, RELAY_HEARTBEAT_MS: '60000' });
    await onItsOwnConnection(url, async (dataSource) => {
      for (let i = 0; i < commits; i++) await published(dataSource, [await commitOne(dataSource, tenantId)]);
    });
    await relay.stop();
    const perCommit = ((await unpublishedIndexBuffers(db())) - before) / commits;
    // Every claim walking the 60,000 dead entries reads their ~170 index pages: 170 per commit on the code
    // before. From the floor a claim reads a page or two; the relay's first claims walk from the bottom.
    expect(perCommit).toBeLessThan(25);
  }, 120_000);

  it('does not walk them at every poll while nothing is committed either', async () => {
    // The backlog drained by the case above; nothing committed since. A relay that finds nothing to claim
    // polls (every 50 ms here, 1 s by default) and looks at its floor each time: with nothing unpublished
    // to see, its floor stayed at the bottom and every poll walked the ~170 pages of dead entries twice
    // (the look and the claim), until the next commit or vacuum. Heartbeat as above: longer than the test.
    const before = await unpublishedIndexBuffers(db());
    const relay = await startApp('outbox-relay', { ORDERS_DATABASE_URL: url, RELAY_HEARTBEAT_MS: '60000', RELAY_POLL_INTERVAL_MS: '50' });
    await new Promise((resolve) => setTimeout(resolve, 3_000)); // some 60 polls
    await relay.stop();
    const idle = (await unpublishedIndexBuffers(db())) - before;
    // The relay's first looks and claims walk from the bottom (about 170 pages each) until two looks agree on
    // a floor; after that, a page or two per poll. Walking at every poll: ~340 pages per poll, ~20,000 in all.
    expect(idle).toBeLessThan(2_000);
  }, 60_000);
});

/**
 * The floor may pass a row only once it is published or can never be committed. A transaction that
 * drew a lower sequence and commits after later rows were published is common (every concurrent
 * writer), and the floor must wait for it; so must a statement that drew its sequence before its
 * transaction had an id (the moment between the draw and the row's write), which no snapshot shows
 * as running. Writers hold transactions open for random times, roll some back, and insert some rows
 * through a trigger that sleeps between the draw and the write; the relay's heartbeat, which also
 * starts its claims from the bottom again, is a minute: every committed row must still be published
 * within seconds. Writers for six seconds in `npm test`, a minute in `npm run test:faults`.
 */
describe('the relay floor and rows that commit late', () => {
  const url = ordersUrlOfItsOwn('latefloor');
  const db = outboxOfItsOwn('latefloor', async (dataSource) => {
    // Test-only: a row of type SlowInsert is written 0.3 s after its sequence was drawn (a BEFORE ROW
    // trigger runs after the column defaults, before the row is written).
    await dataSource.query(/* sql */ `
      CREATE FUNCTION e2e_slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_sleep(0.3); RETURN NEW; END $$`);
    await dataSource.query(/* sql */ `
      CREATE TRIGGER e2e_slow_insert BEFORE INSERT ON outbox_messages
      FOR EACH ROW WHEN (NEW.event_type = 'SlowInsert') EXECUTE FUNCTION e2e_slow_insert()`);
  });

  it('has the transaction id of an inserting statement before it draws a sequence', async () => {
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    await onItsOwnConnection(url, async (dataSource) => {
      const runner = dataSource.createQueryRunner();
      try {
        const [{ pid }] = await runner.query(`SELECT pg_backend_pid() AS pid`);
        const seq = `SELECT last_value || '/' || is_called AS v FROM outbox_messages_sequence_seq`;
        // A draw that writes the sequence to the WAL (one in 32, and the first) takes a transaction id of
        // its own accord: draw one first, so that the statement's draw is one of the others.
        await dataSource.query(`SELECT nextval('outbox_messages_sequence_seq')`);
        const drawnBefore = (await dataSource.query(seq))[0].v;
        const inserting = commitOne(runner.manager, tenantId, 'SlowInsert'); // its own transaction, this its first write
        // While the trigger sleeps, the row's sequence is drawn and the row not yet written.
        await eventually(
          async () => (await dataSource.query(seq))[0].v,
          (v: string) => v !== drawnBefore,
          {
            intervalMs: 10,
            what: 'the sequence drawn',
          },
        );
        const [{ xid }] = await dataSource.query(`SELECT backend_xid::text AS xid FROM pg_stat_activity WHERE pid = $1`, [pid]);
        await inserting;
        expect(xid).not.toBeNull();
      } finally {
        await runner.release();
      }
    });
  });

  it('takes no transaction id for a statement that inserts no outbox row (a replayed command stays read-only)', async () => {
    await onItsOwnConnection(url, async (dataSource) => {
      const runner = dataSource.createQueryRunner();
      try {
        await runner.startTransaction();
        // A decided command's carried write, when the receipt was already there: its condition holds for no row.
        await runner.query(/* sql */ `
          INSERT INTO outbox_messages (id, topic, message_key, key_hash, event_type, event_version, tenant_id, payload, headers)
          SELECT gen_random_uuid(), 'e2e.claim', 'k', 1, 'RelayProbe', 1, 't', '{}', '{}' WHERE false`);
        const [{ xid }] = await runner.query(`SELECT pg_current_xact_id_if_assigned()::text AS xid`);
        // With an id its commit would write a commit record and wait for the WAL flush, on every replay.
        expect(xid).toBeNull();
      } finally {
        await runner.rollbackTransaction();
        await runner.release();
      }
    });
  });

  /**
   * Idle, the relay's floor settles just past the highest row (nothing of its shards is unpublished),
   * and the next row drawn is numbered right there: it must be claimed at once, not at the next
   * heartbeat's reset (a minute here). Rows come one at a time after pauses of every length, so that
   * the floor has settled before some of them and not before others.
   */
  it('publishes a row committed after an idle spell at once, whatever the spell', async () => {
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    const relay = await startApp('outbox-relay', { ORDERS_DATABASE_URL: url, RELAY_HEARTBEAT_MS: '60000', RELAY_POLL_INTERVAL_MS: '50' });
    try {
      await published(db(), [await commitOne(db(), tenantId)]);
      for (const idleMs of [0, 30, 120, 400, 1_000, 2_000]) {
        await new Promise((resolve) => setTimeout(resolve, idleMs));
        const id = await commitOne(db(), tenantId);
        await published(db(), [id], 3_000).catch((error: Error) => {
          throw new Error(`after ${idleMs} ms idle: ${error.message}`);
        });
      }
    } finally {
      await relay.stop();
    }
  }, 60_000);

  it('publishes every committed row within seconds while writers commit late and roll back at random', async () => {
    const tenantId = `t-${randomUUID().slice(0, 12)}`;
    const relay = await startApp('outbox-relay', { ORDERS_DATABASE_URL: url, RELAY_HEARTBEAT_MS: '60000' });
    try {
      const committed: string[] = [];
      let rolledBack = 0;
      const writers = await new DataSource(postgresOptions({ url, applicationName: 'e2e-writers', poolSize: 6 })).initialize();
      try {
        const until = Date.now() + (LONG_RUN ? 60_000 : 6_000);
        const writer = async () => {
          while (Date.now() < until) {
            const runner = writers.createQueryRunner();
            try {
              await runner.startTransaction();
              const ids: string[] = [];
              for (let n = 1 + Math.floor(Math.random() * 3); n > 0; n--) {
                ids.push(await commitOne(runner.manager, tenantId, Math.random() < 0.2 ? 'SlowInsert' : 'RelayProbe'));
              }
              await new Promise((resolve) => setTimeout(resolve, Math.random() * 300));
              if (Math.random() < 0.2) {
                await runner.rollbackTransaction();
                rolledBack += ids.length;
              } else {
                await runner.commitTransaction();
                committed.push(...ids);
              }
            } finally {
              await runner.release();
            }
          }
        };
        await Promise.all(Array.from({ length: 6 }, writer));
      } finally {
        await writers.destroy();
      }
      expect(committed.length).toBeGreaterThan(50);
      expect(rolledBack).toBeGreaterThan(0);
      await published(db(), committed, 15_000);
      const [{ rows }] = await db().query(`SELECT count(*)::int AS rows FROM outbox_messages WHERE tenant_id = $1`, [tenantId]);
      expect(rows).toBe(committed.length);
    } finally {
      await relay.stop();
    }
  }, 150_000);
});
