import fc from 'fast-check';
import { Client } from 'pg';
import { expectCommitted, isDatabaseUnreachable, pipelined, queryRows } from '@app/platform';
import { searchSettings } from './support/search';
import { testEnv } from './support/test-env';

/**
 * `pipelined()` is how the relay writes BEGIN, the floor's look and the claim at once, and the mark
 * with COMMIT (and how `inTransaction` writes BEGIN and COMMIT beside the work's statements): several
 * statements in one write, answered in order. Generated lists of statements, some failing, sent in a
 * transaction block or each a transaction of its own, on a client in pg's pipeline mode (the relay's
 * and the command path's pools; pg deprecates queueing statements on a client that is not), must give
 * each statement's answer in order, reject with the first failure only once
 * every statement is answered, commit nothing of a transaction with a failure in it (COMMIT answers
 * ROLLBACK, which `expectCommitted` refuses), and leave the session idle, out of any transaction.
 */

/** A statement of a generated list: an insert of its id, a read of a value, or a failure naming its marker. */
type Step = { kind: 'insert'; id: number } | { kind: 'read'; value: number } | { kind: 'fail'; marker: number };

const INSERT = 'INSERT INTO %t (id) VALUES ($1) RETURNING id';
const READ = 'SELECT $1::int AS value';
/** Fails in PostgreSQL (22P02) with the marker in its message: `invalid input syntax for type integer: "fail-<marker>"`. */
const FAIL = `SELECT ('fail-' || $1::text)::int AS never`;

const steps = fc
  .array(
    fc.oneof(
      { weight: 3, arbitrary: fc.constant('insert' as const) },
      { weight: 2, arbitrary: fc.constant('read' as const) },
      { weight: 1, arbitrary: fc.constant('fail' as const) },
    ),
    { minLength: 1, maxLength: 8 },
  )
  .map((kinds) =>
    kinds.map((kind, i): Step =>
      kind === 'insert' ? { kind, id: i + 1 } : kind === 'read' ? { kind, value: i * 7 } : { kind, marker: i },
    ),
  );

describe('pipelined() on a client in pg pipeline mode', () => {
  const table = `pipelined_probe_${process.pid}`;
  const observer = new Client({ connectionString: testEnv.ordersUrl, application_name: 'e2e-pipelined-observer' });
  const connect = async () => {
    const client = new Client({ connectionString: testEnv.ordersUrl, application_name: 'e2e-pipelined', pipeline: true } as never);
    client.on('error', () => undefined); // a terminated session reports through its statements too
    await client.connect();
    return client;
  };
  let client: Client;

  beforeAll(async () => {
    await observer.connect();
    await observer.query(`CREATE TABLE IF NOT EXISTS ${table} (id int PRIMARY KEY)`);
    client = await connect();
  });
  afterAll(async () => {
    await client.end().catch(() => undefined);
    await observer.query(`DROP TABLE IF EXISTS ${table}`);
    await observer.end();
  });

  const committedIds = async () => (await observer.query<{ id: number }>(`SELECT id FROM ${table} ORDER BY id`)).rows.map((row) => row.id);
  const sessionState = async (of: Client) => {
    const { rows } = await observer.query<{ state: string }>('SELECT state FROM pg_stat_activity WHERE pid = $1', [
      (of as unknown as { processID: number }).processID,
    ]);
    return rows[0]?.state;
  };
  const statement = (on: Client, step: Step) =>
    step.kind === 'insert'
      ? queryRows(on, INSERT.replace('%t', table), [step.id])
      : step.kind === 'read'
        ? queryRows(on, READ, [step.value])
        : queryRows(on, FAIL, [step.marker]);

  it('answers each statement in order, rejects with the first failure once all are answered, and commits a failed transaction not at all', async () => {
    await fc.assert(
      fc.asyncProperty(steps, fc.boolean(), async (list, inBlock) => {
        await observer.query(`TRUNCATE ${table}`);
        const settled: boolean[] = [];
        let sent: Promise<unknown>[] = [];
        const outcome = await pipelined(client, () => {
          sent = [
            ...(inBlock ? [client.query('BEGIN')] : []),
            ...list.map((step) => statement(client, step)),
            ...(inBlock ? [client.query('COMMIT')] : []),
          ];
          sent.forEach((promise, i) =>
            promise.then(
              () => (settled[i] = true),
              () => (settled[i] = true),
            ),
          );
          return sent;
        }).then(
          (answers) => ({ answers }),
          (error: Error) => ({ error, settledWhenRejected: sent.map((_, i) => settled[i] === true) }),
        );
        const failures = list.filter((step) => step.kind === 'fail');
        const inserted = list.flatMap((step) => (step.kind === 'insert' ? [step.id] : []));

        if (!failures.length) {
          if (!('answers' in outcome)) throw outcome.error;
          const answers = outcome.answers.slice(inBlock ? 1 : 0, inBlock ? -1 : undefined);
          expect(answers.map((answer) => (answer as { rows: unknown[] }).rows)).toEqual(
            list.map((step) => (step.kind === 'insert' ? [{ id: step.id }] : [{ value: (step as { value: number }).value }])),
          );
          if (inBlock) expectCommitted(outcome.answers.at(-1) as never);
          expect(await committedIds()).toEqual(inserted);
        } else {
          if (!('error' in outcome)) throw new Error(`resolved although ${failures.length} statement(s) failed`);
          expect(outcome.error.message).toContain(`"fail-${failures[0].marker}"`);
          // Nothing is left unanswered on the connection when it rejects.
          expect(outcome.settledWhenRejected.every(Boolean)).toBe(true);
          if (inBlock) {
            // PostgreSQL turned the COMMIT into a rollback: an answer, not an error, that expectCommitted refuses.
            const ended = await (sent.at(-1) as Promise<Parameters<typeof expectCommitted>[0]>);
            expect(ended.command).toBe('ROLLBACK');
            expect(() => expectCommitted(ended)).toThrow(/rolled back at COMMIT/);
            expect(await committedIds()).toEqual([]);
          } else {
            // Each statement was a transaction of its own: the inserts around the failure are committed.
            expect(await committedIds()).toEqual(inserted);
          }
        }
        // The session answers, then is idle: out of any transaction. Asked in this order because pg settles
        // a failed statement at its error, which PostgreSQL sends before it reads the Sync behind it and
        // reports the session idle; a statement that succeeds settles at ReadyForQuery, sent after that
        // report. Asked the other way, a backend descheduled between the two read as 'active' (seen once).
        expect((await client.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
        expect(await sessionState(client)).toBe('idle');
      }),
      // Each run is a few statements on one session: cheap enough to shrink a counterexample.
      { ...searchSettings({ fast: 60, long: 600 }), endOnFailure: false },
    );
  });

  it('commits a transaction written at once entirely or not at all when its session is terminated at a random moment', async () => {
    const outcomes: ('committed' | 'lost')[] = [];
    /** The transaction written at once: BEGIN, an insert per id, COMMIT. */
    const transaction = (on: Client, ids: number[]) =>
      pipelined(on, () => [on.query('BEGIN'), ...ids.map((id) => queryRows(on, INSERT.replace('%t', table), [id])), on.query('COMMIT')]);
    await fc.assert(
      // The moment is a fraction of how long the same transaction just took uncut on this session, so
      // the search lands before, during and after it however loaded the machine is (a fixed range of
      // milliseconds cut every transaction on a busy CI host).
      fc.asyncProperty(fc.integer({ min: 2, max: 6 }), fc.double({ min: 0, max: 2, noNaN: true }), async (rows, killAt) => {
        const ids = Array.from({ length: rows }, (_, i) => i + 1);
        await observer.query(`TRUNCATE ${table}`);
        const started = performance.now();
        expectCommitted((await transaction(client, ids)).at(-1) as never);
        const took = performance.now() - started;
        await observer.query(`TRUNCATE ${table}`);

        const victim = client;
        const pid = (victim as unknown as { processID: number }).processID;
        let settled = false;
        let termination: Promise<unknown> | undefined;
        const terminate = () => {
          if (!settled) termination = observer.query('SELECT pg_terminate_backend($1)', [pid]);
        };
        const pending = transaction(victim, ids);
        // A timer waits at least a millisecond, about as long as the whole transaction takes here, so a
        // moment within the first millisecond is reached by terminating once the transaction is written.
        const delay = killAt * took;
        if (delay < 1) setImmediate(terminate);
        else setTimeout(terminate, delay);
        const outcome = await pending.then(
          (answers) => {
            expectCommitted(answers.at(-1) as never);
            return 'committed' as const;
          },
          (error: unknown) => {
            if (!isDatabaseUnreachable(error)) throw error;
            return 'lost' as const;
          },
        );
        settled = true;
        await termination; // one sent as the transaction settled has reached PostgreSQL too
        outcomes.push(outcome);
        const committed = await committedIds();
        // A lost session may have committed before it died; a committed transaction has every row.
        expect(committed).toEqual(outcome === 'committed' || committed.length ? ids : []);
        if (!termination) {
          // Never cut off: committed, and the session is idle, ready for the next run.
          expect(outcome).toBe('committed');
          expect(await sessionState(victim)).toBe('idle');
          return;
        }
        // Terminated, or about to be even if it committed first: never used again.
        await victim.end().catch(() => undefined);
        client = await connect();
      }),
      searchSettings({ fast: 40, long: 400 }),
    );
    // The property must have been searched where it matters: some transactions were cut off, some not.
    expect(outcomes).toContain('lost');
    expect(outcomes).toContain('committed');
  });
});
