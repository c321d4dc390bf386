import { startApp, stopWithin } from './support/apps';
import { eventually } from './support/eventually';
import { OrdersDb } from './support/orders-db';
import { privateDatabases } from './support/private-stack';

const DEADLINE_SECONDS = 2;
/** About 5 s of sweeping here (1,000-row batches of about 10 ms each): well past the deadline. */
const BACKLOG = 500_000;
/** The deadline, plus the time a process takes to log and exit on a loaded machine. */
const EXIT_WITHIN_MS = DEADLINE_SECONDS * 1000 + 8_000;

/**
 * The command API's receipt sweeper runs up to 1,000 batches of deletes, then as many of compactions,
 * each its own statement. A SIGTERM during a sweep waits for the batch in flight, not for the rest:
 * the rows left are the next sweep's, and the shutdown ends in moments instead of running into
 * SHUTDOWN_TIMEOUT_SECONDS (exit 1, requests in flight cut). A backlog of expired receipts in a
 * database of the suite's own (the sweep takes every tenant's), the SIGTERM as soon as a sweep runs.
 */
describe('a shutdown stops a receipt sweep between two batches', () => {
  let db: OrdersDb;
  let env: Record<string, string>;
  beforeAll(async () => {
    ({ env } = await privateDatabases('sweepstop'));
    db = new OrdersDb(env.ORDERS_DATABASE_URL);
  }, 120_000);
  afterAll(async () => {
    await db?.pool.query('TRUNCATE idempotency_receipts');
    await db?.close();
  });

  it('the API exits by the signal, well within its deadline, leaving the rest of the backlog', async () => {
    await db.pool.query(
      /* sql */ `
      INSERT INTO idempotency_receipts (tenant_id, operation, idempotency_key, fingerprint, fingerprint_version, region,
                                        response_status, response_headers, response_body, completed_at, expires_at)
      SELECT 't-sweepstop', 'orders.create', 'k-' || n, 'f', 1, 'local', 201, '{}', '{}', now() - interval '2 days', now() - interval '1 day'
      FROM generate_series(1, $1) n`,
      [BACKLOG],
    );
    const api = await startApp('command-api', {
      ...env,
      SHUTDOWN_TIMEOUT_SECONDS: String(DEADLINE_SECONDS),
      RECEIPT_SWEEP_INTERVAL_SECONDS: '1',
    });
    try {
      const sweeping = async () =>
        (
          await db.pool.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity
             WHERE application_name = 'command-api' AND query LIKE '%DELETE FROM idempotency_receipts%' AND datname = current_database()`,
          )
        ).rows[0].n;
      await eventually(sweeping, (n) => n > 0, { timeoutMs: 15_000, intervalMs: 20, what: 'the API sweeping receipts' });
      expect(await stopWithin(api, EXIT_WITHIN_MS)).toEqual({ outcome: { code: null, signal: 'SIGTERM' }, deadline: false });
      const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM idempotency_receipts`);
      expect(rows[0].n).toBeGreaterThan(0);
    } finally {
      await api.stop('SIGKILL');
    }
  });
});
