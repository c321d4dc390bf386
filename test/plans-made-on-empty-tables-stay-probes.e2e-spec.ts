import { Client } from 'pg';
import { runWorkload } from './workload/driver';
import { WorkloadStack } from './workload/stack';
import { PrivatePostgres } from './support/private-postgres';

/** What pg_stat_statements counted for one statement over a phase. */
interface Counted {
  database: string;
  queryid: string;
  query: string;
  calls: number;
  buffers: number;
}

/**
 * Every statement the services prepare is planned once per session, and PostgreSQL may keep that plan
 * until the table is next analyzed. A deployment that starts on empty tables plans on empty tables, and
 * a plan that was cheap there can be a scan of a whole table once the table has grown (three such
 * checks were found one by one: docs/performance.md, "Plans a session keeps"). This suite looks for the
 * next one wherever it is: the whole chain (command API, two relays, fulfillment, notifier) on a
 * PostgreSQL server of its own, where every statement keeps the plan of its first run
 * (`plan_cache_mode = force_generic_plan`, the plan PostgreSQL may keep) and nothing analyzes a table
 * (autovacuum off). Commands are planned on the empty tables, then grow every table the chain writes;
 * then each statement's buffers per call (pg_stat_statements) under those old plans are compared with
 * the same statement's after an ANALYZE, when each plan is made again on the grown tables. Counted in
 * buffers, not milliseconds: the same on a loaded machine.
 */
describe('plans made while the tables were empty', () => {
  const postgres = new PrivatePostgres(29_770, {
    shared_preload_libraries: 'pg_stat_statements',
    'pg_stat_statements.max': '5000',
    autovacuum: 'off',
    plan_cache_mode: 'force_generic_plan',
  });
  const unavailable = postgres.unavailable();
  const stack = new WorkloadStack(29_760, 'plans', postgres);
  let admin: Client;

  beforeAll(async () => {
    if (unavailable) return;
    await stack.start();
    admin = new Client({ connectionString: postgres.url('postgres') });
    await admin.connect();
    await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  }, 300_000);
  afterAll(async () => {
    await admin?.end();
    await stack.stop(); // its broker and PostgreSQL server too
  }, 120_000);

  const databases = () => [stack.dbs.ordersUrl, stack.dbs.fulfillmentUrl, stack.dbs.notifierUrl];
  const databaseNames = () => databases().map((url) => decodeURIComponent(new URL(url).pathname.slice(1)));

  /**
   * `count` commands through the real API (retries and cancels among them), then the whole chain drained.
   * At `ratePerSecond`, with the webhook receiver down while they are sent: the notifier's claims then
   * run on a backlog of pending deliveries, as after a receiver's outage.
   */
  async function commands(count: number, ratePerSecond?: number): Promise<void> {
    const { tenantId, apiKey } = await stack.orders.tenant();
    if (ratePerSecond) stack.receiver.failFor((count / ratePerSecond) * 1_000);
    const history = await runWorkload({ apiUrl: () => stack.apiUrl, apiKey, tenantId, commands: count, concurrency: 32, ratePerSecond });
    expect(history.attempts.filter((a) => a.status === undefined || a.status >= 500)).toEqual([]);
    const deadline = Date.now() + 120_000;
    while (!(await stack.drained(tenantId))) {
      if (Date.now() > deadline) throw new Error(`the chain did not drain ${count} commands within 120 s`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  /** Each statement's calls and buffers while `work` ran. */
  async function counted(work: () => Promise<void>): Promise<Map<string, Counted>> {
    await admin.query('SELECT pg_stat_statements_reset()');
    await work();
    const { rows } = await admin.query<Counted>(
      /* sql */ `
      SELECT d.datname AS database, s.queryid::text, s.query, s.calls::int, (s.shared_blks_hit + s.shared_blks_read)::int AS buffers
      FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
      WHERE d.datname = ANY($1)`,
      [databaseNames()],
    );
    return new Map(rows.map((row) => [`${row.database}/${row.queryid}`, row]));
  }

  async function analyzeAll(): Promise<void> {
    for (const url of databases()) {
      const client = new Client({ connectionString: url });
      await client.connect();
      await client.query('ANALYZE').finally(() => client.end()); // every plan is made again, on what the tables hold
    }
  }

  /** Buffers per call of each statement run at least 10 times in both phases, the largest growth first (printed). */
  function compare(before: Map<string, Counted>, after: Map<string, Counted>, heading: string) {
    const compared = [...before.entries()]
      .filter(([id, b]) => b.calls >= 10 && (after.get(id)?.calls ?? 0) >= 10)
      .map(([id, b]) => {
        const a = after.get(id)!;
        return {
          statement: `${b.database}: ${b.query.replace(/\s+/g, ' ').slice(0, 300)}`,
          before: b.buffers / b.calls,
          after: a.buffers / a.calls,
        };
      })
      .sort((x, y) => y.after / (y.before + 1) - x.after / (x.before + 1));
    console.log(
      [heading, ...compared.slice(0, 12).map((c) => `${c.after.toFixed(1)} / ${c.before.toFixed(1)}: ${c.statement.slice(0, 150)}`)].join(
        '\n',
      ),
    );
    return compared;
  }

  it('read no more per call than the plans made on the grown tables', async () => {
    if (unavailable) {
      console.log(`plans made on empty tables: not run, it needs a PostgreSQL server of its own and ${unavailable}`);
      return;
    }
    await commands(200); // every statement planned on the empty tables
    await commands(6_000); // the tables grow; nothing analyzes them
    // A cancellation marker is left only by a cancel that overtook its order's placement, which a healthy
    // chain rarely sees: the markers a long-lived deployment gathers, written here.
    const fulfillment = new Client({ connectionString: stack.dbs.fulfillmentUrl });
    await fulfillment.connect();
    await fulfillment
      .query(
        /* sql */ `INSERT INTO cancelled_orders (tenant_id, order_id, message_id)
         SELECT 't-markers', gen_random_uuid(), gen_random_uuid() FROM generate_series(1, 20000)`,
      )
      .finally(() => fulfillment.end());
    const stale = await counted(() => commands(1_000, 200));
    await analyzeAll();
    const fresh = await counted(() => commands(1_000, 200));

    const compared = compare(fresh, stale, 'buffers per call under the plans made on empty tables / made anew:');
    expect(compared.length).toBeGreaterThan(20);
    // A probe reads a few pages under either plan; a scan of a grown table reads hundreds.
    expect(compared.filter((c) => c.after > 4 * c.before + 20)).toEqual([]);
  }, 600_000);

  it('cost no more per call once the tables hold three times as much, nothing vacuumed', async () => {
    if (unavailable) return;
    await analyzeAll();
    const small = await counted(() => commands(1_000, 200));
    await commands(14_000);
    await analyzeAll();
    const large = await counted(() => commands(1_000, 200));
    const compared = compare(small, large, 'buffers per call on the larger tables / the smaller:');
    expect(compared.length).toBeGreaterThan(20);
    expect(compared.filter((c) => c.after > 2 * c.before + 10)).toEqual([]);
  }, 600_000);
});
