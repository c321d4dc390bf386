import { DataSource } from 'typeorm';
import { failureKind, fromHandler } from '../libs/inbox/src/failure-kind';
import {
  inOneStatement,
  inTransaction,
  isDatabaseUnreachable,
  postgresOptions,
  queryRows,
  queryThenCommit,
  thrownByStatement,
} from '@app/platform';
import { testEnv } from './support/test-env';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `attempt(id)` for ids 100-139, each unit writing rows id * 10 + 1..3 while its session is
 * terminated at a random moment, and checks that every unit committed all three rows or none: a lost
 * one may still have committed (0 or 3), a committed one has its three. Some units must have been lost.
 */
async function eachAllOrNone(attempt: (id: number) => Promise<unknown>, committedIds: () => Promise<number[]>): Promise<void> {
  const outcomes: ('committed' | 'lost')[] = [];
  for (let id = 100; id < 140; id++) {
    outcomes.push(
      await attempt(id).then(
        () => 'committed' as const,
        (error) => {
          if (!isDatabaseUnreachable(error)) throw error;
          return 'lost' as const;
        },
      ),
    );
    await pause(10); // the termination, if it came late, lands before the next unit starts
  }
  const perUnit = new Map<number, number>();
  for (const id of await committedIds()) perUnit.set(Math.floor(id / 10), (perUnit.get(Math.floor(id / 10)) ?? 0) + 1);
  expect([...perUnit.values()].every((n) => n === 3)).toBe(true);
  outcomes.forEach((outcome, i) => {
    if (outcome === 'committed') expect(perUnit.get(100 + i)).toBe(3);
  });
  expect(outcomes).toContain('lost');
}

/**
 * inTransaction is the command path's transaction on a bare pg client with prepared statements: a
 * connection must go back to the pool clean (no open transaction) or not at all. Each case runs on a
 * plain pool and on one in pg's pipeline mode, where BEGIN and COMMIT travel with the statements.
 */
describe.each([
  ['one statement per round trip', false],
  ['pipelined: BEGIN and COMMIT ride with statements', true],
])('inTransaction (%s)', (_mode, pipeline) => {
  // One connection in the pool: whatever the last transaction left behind is the next one's connection.
  const dataSource = new DataSource(
    postgresOptions({ url: testEnv.ordersUrl, applicationName: 'e2e-in-transaction', poolSize: 1, pipeline }),
  );
  const observer = new DataSource(postgresOptions({ url: testEnv.ordersUrl, applicationName: 'e2e-observer', poolSize: 1 }));
  const table = `in_transaction_probe_${process.pid}_${pipeline ? 'p' : 's'}`;

  beforeAll(async () => {
    await Promise.all([dataSource.initialize(), observer.initialize()]);
    await observer.query(`CREATE TABLE IF NOT EXISTS ${table} (id int PRIMARY KEY, step int NOT NULL)`);
  });
  afterAll(async () => {
    await observer.query(`DROP TABLE IF EXISTS ${table}`);
    await Promise.all([dataSource.destroy(), observer.destroy()]);
  });

  const pid = (db: Parameters<typeof queryRows>[0]) =>
    queryRows<{ pid: number }>(db, 'SELECT pg_backend_pid() AS pid').then(({ rows }) => rows[0].pid);

  it('rolls back on a statement error and hands the same connection back, out of the failed transaction', async () => {
    await observer.query(`TRUNCATE ${table}`);
    let first = 0;
    await expect(
      inTransaction(dataSource, async (db) => {
        first = await pid(db);
        await queryRows(db, `INSERT INTO ${table} (id, step) VALUES (1, 1)`);
        await queryRows(db, `INSERT INTO ${table} (id, step) VALUES (1, 2)`); // unique violation
      }),
    ).rejects.toMatchObject({ code: '23505' });
    const [again, { rows }] = await inTransaction(
      dataSource,
      async (db) => [await pid(db), await queryRows(db, `SELECT * FROM ${table}`)] as const,
    );
    expect(again).toBe(first);
    expect(rows).toEqual([]);
  });

  it('destroys a connection whose session died inside the transaction: the next borrower gets a new one', async () => {
    let killed = 0;
    const error = await inTransaction(dataSource, async (db) => {
      killed = await pid(db);
      await queryRows(db, `INSERT INTO ${table} (id, step) VALUES (2, 1)`);
      await observer.query('SELECT pg_terminate_backend($1)', [killed]);
      await pause(50);
      await queryRows(db, `INSERT INTO ${table} (id, step) VALUES (2, 2)`);
    }).catch((caught: unknown) => caught);
    expect(isDatabaseUnreachable(error)).toBe(true);
    // A consumer's handler that met it waits the outage out: it is the database's, not an outside call's.
    expect(thrownByStatement(error)).toBe(true);
    expect(failureKind(fromHandler(error))).toBe('unreachable');
    const next = await inTransaction(dataSource, (db) => pid(db));
    expect(next).not.toBe(killed);
    expect(await observer.query(`SELECT * FROM ${table} WHERE id = 2`)).toEqual([]);
  });

  it('under sessions terminated at random moments, each transaction commits all of its rows or none, and the pool keeps working', async () => {
    await observer.query(`TRUNCATE ${table}`);
    await eachAllOrNone(
      (id) =>
        inTransaction(dataSource, async (db) => {
          const backend = await pid(db);
          // ms: before, between or after the statements, or during COMMIT (alone or with the last)
          setTimeout(() => void observer.query('SELECT pg_terminate_backend($1)', [backend]), Math.random() * 6);
          for (let step = 1; step <= 2; step++)
            await queryRows(db, `INSERT INTO ${table} (id, step) VALUES ($1, $2)`, [id * 10 + step, step]);
          await queryThenCommit(db, `INSERT INTO ${table} (id, step) VALUES ($1, $2)`, [id * 10 + 3, 3]);
        }),
      async () => (await observer.query(`SELECT id FROM ${table}`)).map((row: { id: number }) => row.id),
    );
    // And the pool still serves: a clean transaction on a working connection.
    expect(await inTransaction(dataSource, (db) => queryRows(db, 'SELECT 1 AS one').then(({ rows: r }) => r[0]))).toEqual({ one: 1 });
  });

  it('commits the work whose last statement carried COMMIT, and refuses a statement after it', async () => {
    await observer.query(`TRUNCATE ${table}`);
    let after: unknown;
    await inTransaction(dataSource, async (db) => {
      await queryRows(db, `INSERT INTO ${table} (id, step) VALUES (3, 1)`);
      await queryThenCommit(db, `INSERT INTO ${table} (id, step) VALUES (4, 2)`);
      after = await queryThenCommit(db, `INSERT INTO ${table} (id, step) VALUES (5, 3)`).catch((caught: unknown) => caught);
    });
    const rows: { id: number }[] = await observer.query(`SELECT id FROM ${table} ORDER BY id`);
    if (pipeline) {
      expect(after).toEqual(new Error('queryThenCommit: this transaction has already ended'));
      expect(rows.map((row) => row.id)).toEqual([3, 4]);
    } else {
      // Without pipelining it is a statement like any other; inTransaction commits after the work.
      expect(after).toMatchObject({ rows: [] });
      expect(rows.map((row) => row.id)).toEqual([3, 4, 5]);
    }
  });

  it('commits nothing when the statement carrying COMMIT fails, and hands back a clean connection', async () => {
    await observer.query(`TRUNCATE ${table}`);
    let first = 0;
    await expect(
      inTransaction(dataSource, async (db) => {
        first = await pid(db);
        await queryRows(db, `INSERT INTO ${table} (id, step) VALUES (6, 1)`);
        await queryThenCommit(db, `INSERT INTO ${table} (id, step) VALUES (6, 2)`); // unique violation
      }),
    ).rejects.toMatchObject({ code: '23505' });
    expect(await observer.query(`SELECT * FROM ${table}`)).toEqual([]);
    expect(await inTransaction(dataSource, (db) => pid(db))).toBe(first);
    expect(await observer.query(`SELECT count(*)::int AS open FROM pg_stat_activity WHERE pid = $1 AND state <> 'idle'`, [first])).toEqual([
      { open: 0 },
    ]);
  });

  it('rejects a transaction PostgreSQL rolled back at COMMIT because the work carried on past a failed statement', async () => {
    await observer.query(`TRUNCATE ${table}`);
    const outcome = inTransaction(dataSource, async (db) => {
      await queryRows(db, `INSERT INTO ${table} (id, step) VALUES (7, 1)`);
      await queryRows(db, `INSERT INTO ${table} (id, step) VALUES (7, 2)`).catch(() => undefined); // swallowed
      return 'done';
    });
    await expect(outcome).rejects.toThrow(/rolled back at COMMIT/);
    expect(await observer.query(`SELECT * FROM ${table}`)).toEqual([]);
  });

  it('runs beforeCommit before anything is committed: its throw leaves nothing, even after queryThenCommit', async () => {
    await observer.query(`TRUNCATE ${table}`);
    const seen: string[] = [];
    await expect(
      inTransaction(
        dataSource,
        async (db) => {
          await queryRows(db, `INSERT INTO ${table} (id, step) VALUES (8, 1)`);
          await queryThenCommit(db, `INSERT INTO ${table} (id, step) VALUES (9, 2)`);
          return 'written';
        },
        {
          beforeCommit: (result) => {
            seen.push(result);
            throw new Error('injected before COMMIT');
          },
        },
      ),
    ).rejects.toThrow('injected before COMMIT');
    expect(seen).toEqual(['written']);
    expect(await observer.query(`SELECT * FROM ${table}`)).toEqual([]);
  });
});

/**
 * inOneStatement sends a decided command's one statement outside a transaction block: PostgreSQL makes
 * it a transaction of its own. It must be as atomic as inTransaction's, and pool connections as cleanly.
 */
describe.each([
  ['one statement per round trip', false],
  ['pipelined', true],
])('inOneStatement (%s)', (_mode, pipeline) => {
  const dataSource = new DataSource(
    postgresOptions({ url: testEnv.ordersUrl, applicationName: 'e2e-in-one-statement', poolSize: 1, pipeline }),
  );
  const observer = new DataSource(postgresOptions({ url: testEnv.ordersUrl, applicationName: 'e2e-observer', poolSize: 1 }));
  const table = `in_one_statement_probe_${process.pid}_${pipeline ? 'p' : 's'}`;
  /** Three rows in one statement, the last of them `third`: with a duplicate id, the statement fails as a whole. */
  const threeRows = `WITH a AS (INSERT INTO ${table} (id, step) VALUES ($1, 1)), b AS (INSERT INTO ${table} (id, step) VALUES ($2, 2))
    INSERT INTO ${table} (id, step) VALUES ($3, 3) RETURNING pg_backend_pid() AS pid`;

  beforeAll(async () => {
    await Promise.all([dataSource.initialize(), observer.initialize()]);
    await observer.query(`CREATE TABLE IF NOT EXISTS ${table} (id int PRIMARY KEY, step int NOT NULL)`);
  });
  beforeEach(() => observer.query(`TRUNCATE ${table}`));
  afterAll(async () => {
    await observer.query(`DROP TABLE IF EXISTS ${table}`);
    await Promise.all([dataSource.destroy(), observer.destroy()]);
  });

  const statement = (ids: [number, number, number]) =>
    inOneStatement(dataSource, (db) => queryThenCommit<{ pid: number }>(db, threeRows, ids).then(({ rows }) => rows[0].pid));
  const ids = async () => (await observer.query(`SELECT id FROM ${table} ORDER BY id`)).map((row: { id: number }) => row.id);

  it('commits the statement as a transaction of its own, with no transaction left open on the connection', async () => {
    const pid = await statement([1, 2, 3]);
    expect(await ids()).toEqual([1, 2, 3]);
    const [activity] = await observer.query(`SELECT state, backend_xid FROM pg_stat_activity WHERE pid = $1`, [pid]);
    expect(activity).toEqual({ state: 'idle', backend_xid: null });
  });

  it('commits nothing of a statement that fails in its last part, and hands the same connection back', async () => {
    const first = await statement([1, 2, 3]);
    await expect(statement([4, 5, 1])).rejects.toMatchObject({ code: '23505' }); // 1 exists: 4 and 5 must not stay
    expect(await ids()).toEqual([1, 2, 3]);
    expect(await statement([6, 7, 8])).toBe(first);
  });

  it("hands the connection back when the work's own code throws after its statement, which stays committed", async () => {
    let first = 0;
    await expect(
      inOneStatement(dataSource, async (db) => {
        first = (await queryThenCommit<{ pid: number }>(db, threeRows, [1, 2, 3])).rows[0].pid;
        throw new Error('refused after the statement');
      }),
    ).rejects.toThrow('refused after the statement');
    expect(await ids()).toEqual([1, 2, 3]);
    expect(await statement([4, 5, 6])).toBe(first);
  });

  it('destroys a connection whose session was lost while borrowed: the next borrower gets a new one', async () => {
    let killed = 0;
    const error = await inOneStatement(dataSource, async (db) => {
      killed = (db as unknown as { processID: number }).processID;
      await observer.query('SELECT pg_terminate_backend($1)', [killed]);
      await pause(50);
      return queryThenCommit(db, threeRows, [4, 5, 6]);
    }).catch((caught: unknown) => caught);
    expect(isDatabaseUnreachable(error)).toBe(true);
    expect(await statement([7, 8, 9])).not.toBe(killed);
    expect(await ids()).toEqual([7, 8, 9]);
  });

  it('under sessions terminated at random moments, each statement commits all of its rows or none, and the pool keeps working', async () => {
    // The third row waits 2 ms: a termination 0-4 ms after the statement is sent lands before, during or after it.
    const slowThreeRows = `WITH a AS (INSERT INTO ${table} (id, step) VALUES ($1, 1)), b AS (INSERT INTO ${table} (id, step) VALUES ($2, 2))
      INSERT INTO ${table} (id, step) SELECT $3, 3 FROM pg_sleep(0.002)`;
    await eachAllOrNone(
      (id) =>
        inOneStatement(dataSource, (db) => {
          const backend = (db as unknown as { processID: number }).processID;
          setTimeout(() => void observer.query('SELECT pg_terminate_backend($1)', [backend]), Math.random() * 4);
          return queryThenCommit(db, slowThreeRows, [id * 10 + 1, id * 10 + 2, id * 10 + 3]);
        }),
      ids,
    );
    expect(await statement([1, 2, 3])).toEqual(expect.any(Number));
  });

  it('refuses work that sends no statement through queryThenCommit, or a second one', async () => {
    await expect(inOneStatement(dataSource, async () => 'nothing sent')).rejects.toThrow(/sent no statement through queryThenCommit/);
    const second = await inOneStatement(dataSource, async (db) => {
      await queryThenCommit(db, `INSERT INTO ${table} (id, step) VALUES (1, 1)`);
      return queryThenCommit(db, `INSERT INTO ${table} (id, step) VALUES (2, 1)`).catch((caught: unknown) => caught);
    });
    expect(second).toEqual(new Error('queryThenCommit: this transaction has already ended'));
    expect(await ids()).toEqual([1]);
  });
});
