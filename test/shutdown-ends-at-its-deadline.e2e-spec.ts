import fc from 'fast-check';
import { startApp, stopWithin } from './support/apps';
import { eventually } from './support/eventually';
import { OrdersDb } from './support/orders-db';
import { searchSettings } from './support/search';
import { TcpProxy } from './support/tcp-proxy';
import { testEnv } from './support/test-env';

const DEADLINE_SECONDS = 2;
/** The deadline, plus the time a process takes to log and exit on a loaded machine. */
const EXIT_WITHIN_MS = DEADLINE_SECONDS * 1000 + 8_000;

/**
 * A graceful shutdown waits for work in flight, and work in flight can wait on a dependency that
 * stops answering: here the network to PostgreSQL freezes (nothing reset, nothing closed, nothing
 * arrives), so the relay's last statements — finishing its batch, giving its shards back — never get
 * an answer. SHUTDOWN_TIMEOUT_SECONDS bounds that: past it the process logs why and exits 1, as an
 * orchestrator's SIGKILL would end it anyway, only without a word. The partition starts at a random
 * moment before the SIGTERM (or Ctrl-C's SIGINT).
 */
describe('a shutdown that cannot finish ends at SHUTDOWN_TIMEOUT_SECONDS', () => {
  const db = new OrdersDb();
  afterAll(() => db.close());

  /** A relay reaching PostgreSQL through `proxy`, once it owns shards. */
  async function startRelay(proxy: TcpProxy) {
    const url = new URL(testEnv.ordersUrl);
    url.port = String(proxy.port);
    const relay = await startApp('outbox-relay', {
      ORDERS_DATABASE_URL: url.toString(),
      SHUTDOWN_TIMEOUT_SECONDS: String(DEADLINE_SECONDS),
      RELAY_POLL_INTERVAL_MS: '100',
    });
    const owning = async () =>
      (
        await db.pool.query(
          `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
           WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = 'outbox-relay' AND a.datname = current_database()`,
        )
      ).rows[0].n;
    await eventually(owning, (shards) => shards > 0, { timeoutMs: 15_000, intervalMs: 20, what: 'the relay owning shards' });
    return relay;
  }

  const proxyToPostgres = () => {
    const url = new URL(testEnv.ordersUrl);
    return TcpProxy.start({ host: url.hostname, port: Number(url.port || 5432) });
  };

  it('the relay exits 1 with a reason when its database stops answering before or while it stops', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 0, max: 1_500 }),
        fc.constantFrom('SIGTERM' as const, 'SIGINT' as const),
        async (signalAfterMs, signal) => {
          const proxy = await proxyToPostgres();
          const relay = await startRelay(proxy);
          try {
            proxy.freeze();
            await new Promise((resolve) => setTimeout(resolve, signalAfterMs));
            const { outcome } = await stopWithin(relay, EXIT_WITHIN_MS, signal);
            expect({ signalAfterMs, signal, outcome }).toEqual({ signalAfterMs, signal, outcome: { code: 1, signal: null } });
            expect(relay.output()).toMatch(new RegExp(`shutdown did not finish within ${DEADLINE_SECONDS} s of ${signal}`));
          } finally {
            await relay.stop('SIGKILL');
            await proxy.cut();
          }
        },
      ),
      // Ctrl-C's SIGINT once in every run, whatever the draws.
      { ...searchSettings({ fast: 3, long: 20 }), examples: [[700, 'SIGINT']] },
    );
  });
});
