import { DataSource } from 'typeorm';
import { CLAIM, claimBatch, prepareRelaySession } from '@app/outbox';
import { DedicatedSession } from '@app/platform';
import { insertProbes, outboxOfItsOwn, publishAsTheRelayDoes } from './support/outbox-of-its-own';
import { explainPrepared, preparedOnSession } from './support/prepared-plans';

/** The buffers one claim on the relay's session touched (EXPLAIN ANALYZE runs it; rolled back). */
async function claimBuffers(runner: ReturnType<DataSource['createQueryRunner']>): Promise<number> {
  await runner.startTransaction();
  try {
    const [{ 'QUERY PLAN': plan }] = await runner.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${CLAIM}`, [
      16,
      Array.from({ length: 16 }, (_, i) => i),
      500,
      [],
      0,
    ]);
    return plan[0].Plan['Shared Hit Blocks'] + plan[0].Plan['Shared Read Blocks'];
  } finally {
    await runner.rollbackTransaction();
  }
}

/**
 * A backlog arrives faster than autovacuum analyzes: right after a burst of commits the planner still
 * believes there are almost no unpublished rows. The claim must not pick a plan that is only good for
 * an empty queue (the parked-key check scanning every unpublished row once per claimed row: seconds
 * per batch at 20,000 rows).
 */
describe('the relay claim with statistics from before a burst', () => {
  const db = outboxOfItsOwn('claimstats', async (dataSource) => {
    await insertProbes(dataSource, 200, { published: true });
    await dataSource.query(/* sql */ `ANALYZE outbox_messages`);
    await insertProbes(dataSource, 20_000);
  });

  it('claims a full batch of a 20,000-row burst in well under a second', async () => {
    const shards = Array.from({ length: 16 }, (_, i) => i);
    const runner = db().createQueryRunner();
    await prepareRelaySession(runner.manager); // as the relay's session runs it
    await runner.startTransaction();
    try {
      const started = performance.now();
      const rows = await claimBatch(runner.manager, { shards, shardCount: 16, limit: 500 });
      const ms = performance.now() - started;
      expect(rows).toHaveLength(500);
      expect(rows.map((row) => Number(row.sequence))).toEqual([...rows.map((row) => Number(row.sequence))].sort((a, b) => a - b));
      expect(ms).toBeLessThan(300);
    } finally {
      await runner.rollbackTransaction();
      await runner.release();
    }
  });
});

/**
 * At a steady trickle (a row or two per claim) every claim used to re-read every row published since
 * the last vacuum: a published row's entry in the unpublished index stays until vacuum, and a bitmap
 * scan visits it in the heap each time without ever marking it dead. 200 commands/s made the relay's
 * session one of the busiest processes on the machine. On the relay's session the claim takes an
 * index scan, which marks the entries it found dead (kill_prior_tuple) so the next claims skip them.
 * Counted in buffers, not milliseconds: the same on a loaded machine.
 */
describe('the relay claim after many rows were published since the last vacuum', () => {
  const db = outboxOfItsOwn(
    'claimdead',
    async (dataSource) => {
      // Committed unpublished, then marked published as the relay marks them: 5,000 dead entries in the unpublished index.
      // Never analyzed, as in a new deployment's first minutes (the benchmark's plan): a bitmap scan then.
      await insertProbes(dataSource, 5000);
      await publishAsTheRelayDoes(dataSource);
    },
    60_000,
  );

  it('pays for the dead entries once, not on every claim', async () => {
    const dataSource = db();
    const runner = dataSource.createQueryRunner();
    try {
      await prepareRelaySession(runner.manager);
      const first = await claimBuffers(runner);
      const later = [await claimBuffers(runner), await claimBuffers(runner), await claimBuffers(runner)];
      expect(first).toBeGreaterThan(100); // the dead entries are there to be found
      for (const buffers of later) expect(buffers).toBeLessThan(50);
      // And the claim itself still finds new rows behind them.
      await dataSource.query(/* sql */ `
        INSERT INTO outbox_messages (id, topic, message_key, key_hash, event_type, event_version, tenant_id, payload, headers)
        VALUES (gen_random_uuid(), 'e2e.claim', 'key-new', 7, 'RelayProbe', 1, 't', '{}', '{}')`);
      await runner.startTransaction();
      const rows = await claimBatch(runner.manager, { shards: Array.from({ length: 16 }, (_, i) => i), shardCount: 16, limit: 500 });
      await runner.rollbackTransaction();
      expect(rows.map((row) => row.message_key)).toEqual(['key-new']);
    } finally {
      await runner.release();
    }
  });
});

/**
 * A table never analyzed (its first minute, before autovacuum's first analyze; a cluster just upgraded
 * with pg_upgrade, which carries no statistics over; autovacuum turned off): the planner guesses that
 * most rows are parked and reads the parked keys with a sequential scan of the whole table, once per
 * claim that finds a row. At a trickle that is a scan per commit, growing with every row the table
 * keeps (the real relay at ~270 commits/s: 0.9 to 6.8 ms per claim over 4 minutes). The relay's
 * session plans without sequential scans, so the parked keys come from their own index whatever the
 * statistics say.
 */
describe('the relay claim on a table never analyzed', () => {
  const db = outboxOfItsOwn('claimnostats', async (dataSource) => {
    await insertProbes(dataSource, 50_000, { published: true });
    await insertProbes(dataSource, 1);
  });

  it('finds the new row without reading the published ones', async () => {
    const runner = db().createQueryRunner();
    try {
      await prepareRelaySession(runner.manager);
      // A sequential scan reads every page of the 50,000 published rows (1,024 buffers on the code before).
      expect(await claimBuffers(runner)).toBeLessThan(50);
      await runner.startTransaction();
      const rows = await claimBatch(runner.manager, { shards: Array.from({ length: 16 }, (_, i) => i), shardCount: 16, limit: 500 });
      await runner.rollbackTransaction();
      expect(rows).toHaveLength(1);
    } finally {
      await runner.release();
    }
  });
});

/**
 * A published row's entry in the unpublished index goes only when a vacuum cleans the indexes; until then
 * every claim walks the index pages holding such entries. On a table that keeps days of published rows,
 * a drained backlog (a broker outage's) is a small fraction of its pages, and PostgreSQL's vacuum skips
 * cleaning the indexes when fewer than 2 % of the table's pages have dead rows ("index scan bypassed"):
 * the walk would stay until enough other rows die, a CPU cost on every claim at a trickle. The outbox
 * table asks every vacuum to clean its indexes (`vacuum_index_cleanup`), so the one after a backlog ends it.
 */
describe('the relay claim after a drained backlog was vacuumed on a large table', () => {
  const db = outboxOfItsOwn(
    'claimvacuum',
    async (dataSource) => {
      // Days of published rows, vacuumed: none of them in the unpublished index.
      await insertProbes(dataSource, 200_000, { published: true });
      await dataSource.query(/* sql */ `VACUUM ANALYZE outbox_messages`);
      // A backlog of 1,000 rows committed unpublished, then published: well under 2 % of the table's pages.
      await insertProbes(dataSource, 1000);
      await publishAsTheRelayDoes(dataSource);
    },
    90_000,
  );

  it('leaves the claim nothing to walk once a vacuum ran', async () => {
    const dataSource = db();
    // What autovacuum does when it comes (it is off on this table so that the test decides when).
    await dataSource.query(/* sql */ `VACUUM outbox_messages`);
    const runner = dataSource.createQueryRunner();
    try {
      await prepareRelaySession(runner.manager);
      // Left in the index, the 1,000 dead entries send the claim to each of their rows' ~20 heap pages (27
      // buffers on the code before); cleaned, it reads the index's one page and finds nothing to claim.
      expect(await claimBuffers(runner)).toBeLessThan(10);
    } finally {
      await runner.release();
    }
  });
});

/**
 * In a backlog the relay claims the next batch while one is in flight, passing over the in-flight ids,
 * which are the first unpublished rows the claim's index scan meets. The claim runs as a prepared
 * statement, and after five runs PostgreSQL settles on its generic plan, where a parameter array is not
 * a constant it can hash: each of those rows must still be checked against the ids by a hash, not
 * against every one of them in turn (500 x 500 comparisons per claim).
 */
describe('the relay claim passing over the batch in flight', () => {
  const db = outboxOfItsOwn('claimflight', async (dataSource) => {
    await insertProbes(dataSource, 1500);
    await dataSource.query(/* sql */ `ANALYZE outbox_messages`);
  });

  it('skips the in-flight ids by a hash in the generic plan, and claims the rows after them in order', async () => {
    const runner = db().createQueryRunner();
    try {
      await prepareRelaySession(runner.manager);
      const ordered = await runner.query(/* sql */ `SELECT id, sequence FROM outbox_messages ORDER BY sequence`);
      const inFlight: string[] = ordered.slice(0, 500).map((row: { id: string }) => row.id);
      const shards = `'{${Array.from({ length: 16 }, (_, i) => i).join(',')}}'`;
      await runner.query(/* sql */ `PREPARE claim_probe(int, int[], int, uuid[], bigint) AS ${CLAIM}`);
      await runner.query(/* sql */ `SET plan_cache_mode = force_generic_plan`);
      await runner.startTransaction();
      const explained = await runner.query(
        `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE claim_probe(16, ${shards}, 500, '{${inFlight.join(',')}}', 0)`,
      );
      const claimed = await runner.query(`EXECUTE claim_probe(16, ${shards}, 500, '{${inFlight.join(',')}}', 0)`);
      await runner.rollbackTransaction();
      const plan = JSON.stringify(explained[0]['QUERY PLAN']);
      expect(plan).toContain('hashed SubPlan');
      expect(plan).not.toMatch(/<> ALL/);
      expect(claimed.map((row: { sequence: string }) => row.sequence)).toEqual(
        ordered.slice(500, 1000).map((row: { sequence: string }) => row.sequence),
      );
    } finally {
      await runner.query(/* sql */ `DEALLOCATE ALL`).catch(() => undefined);
      await runner.query(/* sql */ `RESET plan_cache_mode`).catch(() => undefined);
      await runner.release();
    }
  });
});

/**
 * The relay's session prepares its claim and, after five runs, PostgreSQL may keep one generic plan made
 * from the statistics of that moment until the table's next analyze. A relay that started on an empty
 * outbox (a new deployment, a quiet start) has such a plan from an empty table; a broker outage's
 * backlog then meets it. (The notifier's claim, planned so, read its pending-order index whole for
 * every candidate: webhook-claim-skips-what-it-delivered.)
 */
describe('the relay claim planned while the outbox was empty', () => {
  const db = outboxOfItsOwn('claimempty', async () => undefined);

  it('claims a batch of a 20,000-row backlog through the unpublished index', async () => {
    const session = await DedicatedSession.open(db());
    try {
      await prepareRelaySession(session.manager); // as the relay opens its session
      const client = session.connection;
      const shards = Array.from({ length: 16 }, (_, i) => i);
      const claim = () => claimBatch(client, { shards, shardCount: 16, limit: 500 });
      for (let poll = 0; poll < 10; poll++) expect(await claim()).toEqual([]); // the relay's polls, before any commit
      const [plan] = await preparedOnSession(client, CLAIM);
      expect(plan.genericPlans).toBeGreaterThan(0); // the case at hand: a plan made from the empty table, kept

      await insertProbes(db(), 20_000); // the backlog
      const claimed = await explainPrepared(client, plan.name, `16, '{${shards.join(',')}}', 500, '{}', 0`);
      expect(claimed.rows).toBe(500);
      // 500 rows in the index's order, each locked: about 500 buffers. A plan reading every unpublished
      // row (a scan of another index and a sort, or a scan of the parked keys per row) reads the whole backlog.
      expect(claimed.buffers).toBeLessThan(3_000);
    } finally {
      await session.close();
    }
  });
});
