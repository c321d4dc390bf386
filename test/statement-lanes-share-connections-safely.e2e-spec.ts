import { Pool } from 'pg';
import { DataSource } from 'typeorm';
import {
  isDatabaseUnreachable,
  postgresOptions,
  postgresPool,
  queryThenCommit,
  retryOnLostSession,
  sqlState,
  StatementLanes,
  StatementSession,
} from '@app/platform';
import { eventually } from './support/eventually';
import { testEnv } from './support/test-env';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const APP = 'e2e-statement-lanes';

interface Answer {
  id: number;
  pid: number;
  xid: string;
}

/**
 * StatementLanes multiplexes many callers' one-statement transactions over a few pipelined connections
 * (the command path's decided statements). Sharing a connection must not cost what sharing usually
 * costs: an answer delivered to the wrong caller, a failure spreading to the statements written with
 * it, a statement seeing another's work as part of its transaction, or a dead connection kept in use.
 */
describe('StatementLanes', () => {
  const dataSource = new DataSource(
    postgresOptions({ url: testEnv.ordersUrl, applicationName: APP, poolSize: 6, pipeline: true, lockTimeoutMs: 300 }),
  );
  const observer = new DataSource(postgresOptions({ url: testEnv.ordersUrl, applicationName: 'e2e-observer', poolSize: 2 }));
  const table = `statement_lanes_probe_${process.pid}`;
  let pool: Pool;

  beforeAll(async () => {
    await Promise.all([dataSource.initialize(), observer.initialize()]);
    pool = postgresPool(dataSource);
    await observer.query(`CREATE TABLE IF NOT EXISTS ${table} (id int PRIMARY KEY)`);
  });
  beforeEach(() => observer.query(`TRUNCATE ${table}`));
  afterAll(async () => {
    await observer.query(`DROP TABLE IF EXISTS ${table}`);
    await Promise.all([dataSource.destroy(), observer.destroy()]);
  });

  /** Inserts `id` (nothing if it is there) and answers with it, the backend and the transaction that ran it. */
  const insert = (db: StatementSession, id: number, sleepMs = 0) =>
    queryThenCommit<Answer>(
      db,
      `WITH inserted AS (INSERT INTO ${table} (id) SELECT $1 FROM pg_sleep($2::float8 / 1000) ON CONFLICT (id) DO NOTHING)
       SELECT $1::int AS id, pg_backend_pid() AS pid, pg_current_xact_id()::text AS xid`,
      [id, sleepMs],
    ).then(({ rows }) => rows[0]);
  const ids = async () => (await observer.query(`SELECT id FROM ${table} ORDER BY id`)).map((row: { id: number }) => row.id);
  const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i);
  /** The backends of the lanes' pool running a statement now, in random order. */
  const activeLanePids = async (): Promise<number[]> =>
    (
      await observer.query(`SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND state = 'active' ORDER BY random()`, [APP])
    ).map((row: { pid: number }) => row.pid);

  it('shares at most `lanes` connections among many callers, each statement a transaction of its own with its own answer', async () => {
    const lanes = new StatementLanes(pool, 2);
    let widest = 0;
    const answers = await Promise.all(
      range(1, 300).map((id) =>
        lanes.run(async (db) => {
          widest = Math.max(widest, lanes.load.length);
          // Some works wait before their statement: works sharing a connection interleave, each with its own handle.
          if (id % 2) await pause(Math.random() * 3);
          return insert(db, id);
        }),
      ),
    );
    expect(answers.map((answer) => answer.id)).toEqual(range(1, 300));
    expect(new Set(answers.map((answer) => answer.pid)).size).toBeLessThanOrEqual(2);
    expect(widest).toBe(2);
    expect(new Set(answers.map((answer) => answer.xid)).size).toBe(300);
    expect(await ids()).toEqual(range(1, 300));
    // Every lane went back to the pool when its last work settled, with no transaction open on it.
    expect(lanes.load).toEqual([]);
    expect(pool.idleCount).toBe(pool.totalCount);
    const [{ open }] = await observer.query(
      `SELECT count(*)::int AS open FROM pg_stat_activity WHERE application_name = $1 AND state <> 'idle'`,
      [APP],
    );
    expect(open).toBe(0);
  });

  it('fails a failing statement alone: those written with it commit, and its lane keeps serving', async () => {
    const lanes = new StatementLanes(pool, 1);
    // Every fifth statement divides by zero (ids from 1000): a statement error on a live session.
    const outcomes = await Promise.all(
      range(1, 50).map((n) =>
        lanes
          .run((db) =>
            queryThenCommit<{ pid: number }>(
              db,
              `INSERT INTO ${table} (id) SELECT $1 WHERE 1 / CASE WHEN $1 >= 1000 THEN 0 ELSE 1 END = 1 RETURNING pg_backend_pid() AS pid`,
              [n % 5 === 0 ? 1000 + n / 5 - 1 : n],
            ),
          )
          .then(
            ({ rows }) => rows[0].pid,
            (error: unknown) => sqlState(error),
          ),
      ),
    );
    const failed = outcomes.filter((outcome) => outcome === '22012');
    const pids = new Set(outcomes.filter((outcome) => typeof outcome === 'number'));
    expect(failed).toHaveLength(10);
    expect(pids.size).toBe(1);
    expect(await ids()).toEqual(range(1, 50).filter((n) => n % 5 !== 0));
    const [lane] = pids;
    const [{ alive }] = await observer.query(`SELECT count(*)::int AS alive FROM pg_stat_activity WHERE pid = $1`, [lane]);
    expect(alive).toBe(1); // pooled again, not destroyed
    expect((await lanes.run((db) => insert(db, 2000))).id).toBe(2000);
  });

  it('holds up the statements behind a waiting one on its lane, no longer than lock_timeout, and the lane stays sound', async () => {
    const lanes = new StatementLanes(pool, 1);
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(`INSERT INTO ${table} (id) VALUES (1)`); // uncommitted: a claim of id 1 waits for it
      const started = Date.now();
      const waiting = lanes.run((db) => insert(db, 1)).catch((error: unknown) => sqlState(error));
      const behind = lanes.run((db) => insert(db, 2)).then(() => Date.now() - started);
      expect(await waiting).toBe('55P03'); // lock_timeout (300 ms): IDEMPOTENCY.IN_PROGRESS on the command path
      expect(await behind).toBeGreaterThanOrEqual(250);
      expect(await behind).toBeLessThan(2_000);
      await holder.query('ROLLBACK');
    } finally {
      holder.release();
    }
    expect(await lanes.run((db) => insert(db, 1)).then((answer) => answer.id)).toBe(1);
    expect(await ids()).toEqual([1, 2]);
  });

  it('gives no work to a lane whose session is known lost, though its other works have yet to fail', async () => {
    const lanes = new StatementLanes(pool, 1);
    // Eight statements in flight on the one lane; its backend is terminated. The first learns it at once
    // (57P01), the others only when the socket closes, milliseconds later: a work given to the lane in
    // between (here, the moment the first failure is seen) must get a live connection, not that socket.
    let joined: Promise<Answer> | undefined;
    const inFlight = range(1, 8).map((id) =>
      lanes
        .run((db) => insert(db, id, 2_000))
        .catch((error: unknown) => {
          joined ??= lanes.run((db) => insert(db, 100));
          throw error;
        }),
    );
    const settled = Promise.allSettled(inFlight);
    const [victim] = await eventually(activeLanePids, (pids) => pids.length === 1, {
      timeoutMs: 10_000,
      intervalMs: 2,
      what: 'the lane running the eight statements',
    });
    await observer.query('SELECT pg_terminate_backend($1)', [victim]);
    const outcomes = await settled;
    expect(outcomes.map((outcome) => outcome.status)).toEqual(range(1, 8).map(() => 'rejected'));
    expect(outcomes.every((outcome) => outcome.status === 'rejected' && isDatabaseUnreachable(outcome.reason))).toBe(true);
    const answer = await joined;
    expect(answer).toEqual(expect.objectContaining({ id: 100 }));
    expect(answer?.pid).not.toBe(victim);
    expect(await ids()).toEqual([100]);
  });

  it('under lane sessions terminated at random moments, no answer is crossed, nothing is lost, and no dead connection is kept', async () => {
    const lanes = new StatementLanes(pool, 2);
    const killed = new Set<number>();
    let answered = 0;
    let killing = true;
    // Kills come at random moments, but only after some statements were answered since the last one:
    // the rate follows the machine's progress, so a slow machine is not killed faster than it can
    // reconnect, and every caller's retries (30 within 5 s) outlast the kills that can reach it.
    const killer = (async () => {
      while (killing) {
        const mark = answered;
        await eventually(
          () => answered,
          (count) => count >= mark + 8 || !killing,
          { timeoutMs: 10_000, intervalMs: 2, what: '8 statements answered since the last kill' },
        );
        await pause(Math.random() * 20);
        const [victim] = await activeLanePids();
        if (victim) {
          killed.add(victim);
          await observer.query('SELECT pg_terminate_backend($1)', [victim]);
        }
      }
    })();
    let crossed = 0;
    const unreachable: number[] = [];
    const settled: ('answered' | 'unreachable')[] = [];
    // 400 callers, 40 at a time, each statement 1 ms long: kills land before, during and after statements.
    for (const wave of range(0, 10)) {
      const outcomes = await Promise.all(
        range(wave * 40 + 1, 40).map((id) =>
          retryOnLostSession(
            () =>
              lanes.run(async (db) => {
                const answer = await insert(db, id, 1);
                if (answer.id !== id) crossed += 1;
                answered += 1;
                return 'answered' as const;
              }),
            { pausesMs: [0, 5, 20] },
          ).catch((error: unknown) => {
            if (!isDatabaseUnreachable(error)) throw error;
            unreachable.push(id); // out of attempts: its outcome is unknown, so it is not counted against the table below
            return 'unreachable' as const;
          }),
        ),
      );
      settled.push(...outcomes);
    }
    killing = false;
    await killer;
    // The last kill may have landed as its lane's statement was answered: the backend's FATAL then
    // reaches the client after the lane went back to the pool. Once the backend is gone and the client
    // has read its socket, the pool drops that connection; before, a new statement could still get it.
    await eventually(
      async () => (await observer.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ANY($1)`, [[...killed]]))[0].n,
      (n) => n === 0,
      { timeoutMs: 5_000, what: 'the killed backends gone' },
    );
    await pause(50);
    expect(killed.size).toBeGreaterThan(5);
    expect(crossed).toBe(0);
    expect(unreachable).toEqual([]);
    const committed = new Set(await ids());
    expect(range(1, 400).filter((id, i) => settled[i] === 'answered' && !committed.has(id))).toEqual([]);
    // After the kills: every work is answered on its first run (no lane kept a dead connection), and the
    // pool holds live sessions only.
    const after = await Promise.all(range(1000, 40).map((id) => lanes.run((db) => insert(db, id))));
    expect(after.map((answer) => answer.id)).toEqual(range(1000, 40));
    const [{ live }] = await observer.query(`SELECT count(*)::int AS live FROM pg_stat_activity WHERE application_name = $1`, [APP]);
    expect(live).toBe(pool.totalCount);
  });

  it('refuses a pool not in pipeline mode, and a lane count that is not a positive integer', async () => {
    const plain = new DataSource(postgresOptions({ url: testEnv.ordersUrl, applicationName: `${APP}-plain`, poolSize: 1 }));
    await plain.initialize();
    try {
      const lanes = new StatementLanes(postgresPool(plain), 1);
      await expect(lanes.run((db) => insert(db, 1))).rejects.toThrow(/not in pg pipeline mode/);
      expect(await ids()).toEqual([]);
      expect(postgresPool(plain).idleCount).toBe(1); // the connection went back
    } finally {
      await plain.destroy();
    }
    expect(() => new StatementLanes(pool, 0)).toThrow(/lanes must be a positive integer/);
  });
});
