import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { notifierDatabase } from '../apps/notifier/src/database';
import { inOneStatement, postgresPool } from '@app/platform';
import { CLAIM_DUE, claimDue, NO_FLOOR, SETTLE, settleParameters } from '../apps/notifier/src/webhooks/delivery-store';
import { deliveredAtFirstAttempt, deliveriesOfTheirOwn, deliverAllDue } from './support/deliveries-of-their-own';
import { explainPrepared, preparedOnSession } from './support/prepared-plans';
import { deadToEverySnapshot } from './support/snapshots';

const DELIVERED = 5_000;

/** What the consumer records: `count` pending deliveries of orders of their own, due now. */
async function recordPending(db: DataSource, count: number): Promise<void> {
  await db.query(
    /* sql */ `
    INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, url, event_type, payload, state, next_attempt_at)
    SELECT gen_random_uuid(), 't', gen_random_uuid(), 'http://127.0.0.1:1/hook', 'OrderPlaced', '{}', 'pending', now()
    FROM generate_series(1, $1)`,
    [count],
  );
}

/**
 * One claim on a session of the notifier's pool, from the index's beginning (as the dispatcher's looks
 * for its floor read it, and its first claim), run by EXPLAIN ANALYZE and rolled back: the rows it
 * found and the buffers it read. `prepared`: as the dispatcher sends it, a prepared statement, planned
 * once for any parameters (the generic plan PostgreSQL settles on after five runs).
 */
function claimOnce(dataSource: DataSource, prepared: boolean): Promise<{ rows: number; buffers: number; scans: string[] }> {
  return explainOnce(dataSource, CLAIM_DUE, [randomUUID(), 60_000, 64, NO_FLOOR], prepared);
}

/** `sql` with `parameters` on a session of the notifier's pool, under EXPLAIN ANALYZE, rolled back (claimOnce). */
async function explainOnce(
  dataSource: DataSource,
  sql: string,
  parameters: unknown[],
  prepared: boolean,
): Promise<{ rows: number; buffers: number; scans: string[] }> {
  const runner = dataSource.createQueryRunner();
  await runner.startTransaction();
  try {
    const explain = `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`;
    let explained: { 'QUERY PLAN': any[] }[];
    if (prepared) {
      await runner.query(/* sql */ `SET LOCAL plan_cache_mode = force_generic_plan`);
      await runner.query(`PREPARE explained AS ${sql}`);
      // EXECUTE takes its parameters as SQL: each one as pg sends it (arrays included), quoted by PostgreSQL.
      const literals: string[] = [];
      for (const value of parameters) literals.push((await runner.query(`SELECT quote_nullable($1::text) AS l`, [value]))[0].l);
      explained = await runner.query(`${explain} EXECUTE explained(${literals.join(', ')})`);
      await runner.query(/* sql */ `DEALLOCATE explained`);
    } else {
      explained = await runner.query(`${explain} ${sql}`, parameters);
    }
    const root = explained[0]['QUERY PLAN'][0].Plan;
    return { rows: root['Actual Rows'], buffers: root['Shared Hit Blocks'] + root['Shared Read Blocks'], scans: scansOf(root) };
  } finally {
    await runner.rollbackTransaction();
    await runner.release();
  }
}

/** The scans of a plan, `Index Scan on webhook_deliveries_due_idx` for instance. */
function scansOf(node: { 'Node Type': string; 'Index Name'?: string; Plans?: unknown[] }): string[] {
  const own = node['Node Type'].endsWith('Scan') ? [`${node['Node Type']}${node['Index Name'] ? ` on ${node['Index Name']}` : ''}`] : [];
  return [...own, ...(node.Plans ?? []).flatMap((child) => scansOf(child as typeof node))];
}

/**
 * The dispatcher claims due deliveries through the index of pending ones (ordered by next_attempt_at),
 * at 200 events/s about once per event. A delivered row's entry stays in that index until a vacuum,
 * which autovacuum runs at most once a minute and, on a table keeping INBOX_RETENTION_SECONDS (14 days)
 * of deliveries, after a fifth of its rows changed. A bitmap scan, which the planner picks on a table
 * it has no statistics for (its first minutes) or statistics from a backlog, visits every such row's
 * heap page again on every claim and never marks it: each claim cost as much as all the deliveries
 * since the last vacuum (5.7 ms and 1,000 buffers after one minute at 200 events/s), and the notifier's
 * claims tripled the p99 of commit -> fulfillment effect on the same machine. An index scan marks the
 * dead entries it meets (kill_prior_tuple): the next claims step over them in the index's pages.
 * (The dispatcher's claims now start at a floor, webhook-claims-start-at-a-floor; what lies below it,
 * its looks for the floor read, from the index's beginning, as these claims do.)
 */
describe('the dispatcher claim after deliveries it has not vacuumed away', () => {
  // Autovacuum off: the claims must stay cheap in the minute (or the hours) before it comes.
  const db = deliveriesOfTheirOwn('wqclaim');

  it.each([
    ['on a table never analyzed (its first minutes)', false, false],
    ['with statistics taken during a backlog', true, false],
    ['prepared, as the dispatcher sends it, on a table never analyzed', false, true],
    ['prepared, as the dispatcher sends it, with statistics taken during a backlog', true, true],
  ])(
    'reads each delivered row once, not on every claim: %s',
    async (_case, analyzedDuringBacklog, prepared) => {
      const dataSource = db();
      await dataSource.query(/* sql */ `TRUNCATE webhook_deliveries`);
      await recordPending(dataSource, DELIVERED);
      if (analyzedDuringBacklog) await dataSource.query(/* sql */ `ANALYZE webhook_deliveries`);
      await deadToEverySnapshot(dataSource, async (manager) => expect(await deliverAllDue(manager, 500)).toBe(DELIVERED));
      await recordPending(dataSource, 1);

      const first = await claimOnce(dataSource, prepared);
      const second = await claimOnce(dataSource, prepared);
      expect(first.rows).toBe(1);
      expect(second.rows).toBe(1);
      // The due deliveries in the index's order, never a bitmap of all of them (which reads every row).
      expect(second.scans).toContain('Index Scan on webhook_deliveries_due_idx');
      expect(second.scans.filter((scan) => scan.startsWith('Bitmap') || scan.startsWith('Seq'))).toEqual([]);
      // 5,000 dead entries fill about a dozen pages of the index; their rows, about 200 pages of the table.
      expect(second.buffers).toBeLessThan(40);
    },
    90_000,
  );

  it("plans the notifier's sessions for queues also when the database URL carries startup options of its own", async () => {
    // libpq-style `options` in NOTIFIER_DATABASE_URL (a search_path, a work_mem): pg lets the URL's
    // parameters override the pool's, so the queue settings must travel in the URL with them.
    const url = new URL((db().options as { url: string }).url);
    url.searchParams.set('options', '-c work_mem=5MB');
    const dataSource = await new DataSource(notifierDatabase({ url: url.toString(), poolSize: 1 })).initialize();
    try {
      const [settings] =
        await dataSource.query(/* sql */ `SELECT current_setting('work_mem') AS work_mem, current_setting('enable_bitmapscan') AS bitmap,
                          current_setting('enable_seqscan') AS seq, current_setting('jit') AS jit,
                          current_setting('plan_cache_mode') AS plans`);
      expect(settings).toEqual({ work_mem: '5MB', bitmap: 'off', seq: 'off', jit: 'off', plans: 'force_generic_plan' });
    } finally {
      await dataSource.destroy();
    }
  });
});

/**
 * A session plans a prepared statement for the values at hand on its first five runs, then may keep one
 * generic plan, made from the statistics of that moment, until the table's next ANALYZE. A notifier
 * that started on an empty queue (a new deployment, a quiet hour) has such plans from an empty table.
 * Written as an anti-join, the claim's check for an earlier pending delivery of the same order was then
 * planned as a scan of the whole pending-order index for every candidate row, with the order as a
 * filter: on a backlog of 5,000 (a receiver back from an outage) ~54,000 buffers and ~100 ms per claim
 * of 64 (auto_explain in `bench webhooks`), until autovacuum analyzed the table. The check is a probe
 * of that index by order, whatever the statistics said when the plan was made.
 */
describe('the dispatcher claim planned while the queue was empty', () => {
  const db = deliveriesOfTheirOwn('wqempty');

  it('probes the order of each candidate once a backlog arrives', async () => {
    // One session, as each of the notifier's pooled sessions runs the dispatcher's statements.
    const url = (db().options as { url: string }).url;
    const dataSource = await new DataSource(notifierDatabase({ url, poolSize: 1 })).initialize();
    try {
      // The dispatcher's claims on an empty queue (it claims at every poll and every notification).
      for (let poll = 0; poll < 10; poll++) {
        expect(await inOneStatement(dataSource, (client) => claimDue(client, randomUUID(), 60_000, 64))).toEqual([]);
      }
      // The session (the pool's one) holds the claim prepared, with the plan PostgreSQL keeps for it.
      const session = await postgresPool(dataSource).connect();
      try {
        const [claim] = await preparedOnSession(session, CLAIM_DUE);
        expect(claim.genericPlans).toBeGreaterThan(0); // the case at hand: a plan made from the empty table, kept

        // A backlog, recorded on another session: 5,000 due deliveries, a fifth of them behind an earlier
        // one of their order.
        await recordPending(db(), 4_000);
        await db().query(/* sql */ `
          INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, url, event_type, payload, state, next_attempt_at)
          SELECT gen_random_uuid(), 't', order_id, url, 'OrderCancelled', '{}', 'pending', now()
          FROM webhook_deliveries ORDER BY sequence LIMIT 1000`);

        const claimed = await explainPrepared(session, claim.name, `'${randomUUID()}', 60000, 64, '${NO_FLOOR}'`);
        expect(claimed.rows).toBe(64);
        // 64 rows claimed, each checked by a probe of its order: about 1,200 buffers. A scan of the
        // pending-order index per candidate reads tens of thousands.
        expect(claimed.buffers).toBeLessThan(3_000);
      } finally {
        session.release();
      }
    } finally {
      await dataSource.destroy();
    }
  });
});

/**
 * Autovacuum analyzes the webhook queue while there is no backlog (its usual state: every delivery made
 * within milliseconds), so the statistics say both indexes of pending deliveries are empty. On those
 * statistics a scan of the whole due-time index costs the planner no more than a probe of the
 * pending-order index, and the check for an earlier pending delivery of the candidate's order took
 * it: a walk of every pending delivery for every candidate. After a receiver's outage, a backlog of
 * 1,000 made each claim 36 ms and 51,782 buffers in the chain-wide search
 * (plans-made-on-empty-tables-stay-probes), and the table keeps those statistics until a tenth of it
 * changes: days of deliveries. The check reads only the pending-order index now, whatever the statistics.
 */
describe('the dispatcher claim planned on statistics taken without a backlog', () => {
  const db = deliveriesOfTheirOwn('wqnobacklog', async (dataSource) => {
    // Days of deliveries, all made, analyzed: what autovacuum sees between outages.
    await recordPending(dataSource, DELIVERED);
    await deliverAllDue(dataSource.manager, 500);
    await dataSource.query(/* sql */ `ANALYZE webhook_deliveries`);
  });

  /**
   * A receiver's outage: 4,000 due deliveries and 1,000 behind an earlier one of their order, due at
   * scattered times over the last minute (retries come due at their own times), so the due index's
   * order is not the order of the rows on their pages.
   */
  async function backlog(): Promise<void> {
    await db().query(/* sql */ `DELETE FROM webhook_deliveries WHERE state = 'pending'`);
    await db().query(/* sql */ `
      INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, url, event_type, payload, state, next_attempt_at)
      SELECT gen_random_uuid(), 't', gen_random_uuid(), 'http://127.0.0.1:1/hook', 'OrderPlaced', '{}', 'pending',
             now() - random() * interval '1 minute'
      FROM generate_series(1, 4000)`);
    await db().query(/* sql */ `
      INSERT INTO webhook_deliveries (message_id, tenant_id, order_id, url, event_type, payload, state, next_attempt_at)
      SELECT gen_random_uuid(), 't', order_id, url, 'OrderCancelled', '{}', 'pending', now() - random() * interval '1 minute'
      FROM webhook_deliveries WHERE state = 'pending' ORDER BY sequence LIMIT 1000`);
  }

  it.each([false, true])('probes the order of each candidate once a backlog arrives (prepared: %s)', async (prepared) => {
    await backlog();
    const claimed = await claimOnce(db(), prepared);
    expect(claimed.rows).toBe(64);
    // Each candidate's check is a probe of its order in the pending-order index: about 1,200 buffers in
    // all. It was a walk of the due index per candidate: the whole backlog, for each of them.
    expect(claimed.scans).toEqual(expect.arrayContaining([expect.stringMatching(/Scan on webhook_deliveries_pending_order_idx$/)]));
    expect(claimed.buffers).toBeLessThan(3_000);
  });

  it.each([false, true])('settles each result by its message id once a backlog arrives (prepared: %s)', async (prepared) => {
    await backlog();
    const claimed = await claimDue(db().manager, randomUUID(), 60_000, 64);
    expect(claimed).toHaveLength(64);
    const settled = await explainOnce(db(), SETTLE, settleParameters(deliveredAtFirstAttempt(claimed)), prepared);
    // 64 rows found by their primary key and updated (a new version and index entries each): under
    // 2,000 buffers. A join over every pending delivery reads the backlog once per settle.
    expect(settled.scans).toEqual(expect.arrayContaining([expect.stringMatching(/Scan on webhook_deliveries_pkey$/)]));
    expect(settled.scans.filter((scan) => /pending_order_idx|due_idx/.test(scan))).toEqual([]);
    expect(settled.buffers).toBeLessThan(2_000);
  });
});
