import fc from 'fast-check';
import { startApp } from './support/apps';
import { eventually } from './support/eventually';
import { OrdersDb } from './support/orders-db';
import { searchSettings } from './support/search';
import { TcpProxy } from './support/tcp-proxy';
import { testEnv } from './support/test-env';

const LISTENING = `application_name = 'command-api' AND query = 'LISTEN api_clients_changed' AND datname = current_database()`;
const EXIT_WITHIN_MS = 15_000;

/**
 * The command API keeps a session of its own listening for API-client changes, and opens it again
 * when it is lost. A SIGTERM that arrives while that session is being opened must still end the
 * process: the session the reconnection opens after shutdown began is closed, not left checked out of
 * the pool (whose end would wait for it forever). The API reaches PostgreSQL through a proxy that
 * keeps the reconnection's connection waiting; it is let through at a random moment after the SIGTERM.
 */
describe('shutdown closes a session that connects while the app is stopping', () => {
  const db = new OrdersDb();
  afterAll(() => db.close());

  it('the command API exits although its listening session was reconnecting, whenever the connection goes through', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 1_500 }), async (releaseAfterMs) => {
        const url = new URL(testEnv.ordersUrl);
        const proxy = await TcpProxy.start({ host: url.hostname, port: Number(url.port || 5432) });
        url.port = String(proxy.port);
        const api = await startApp('command-api', { ORDERS_DATABASE_URL: url.toString() });
        try {
          const listening = async () =>
            (await db.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE ${LISTENING}`)).rows[0].n;
          await eventually(listening, (n) => n === 1, {
            timeoutMs: 15_000,
            intervalMs: 20,
            what: 'the command API listening for API-client changes',
          });
          proxy.hold();
          await db.pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE ${LISTENING}`);
          await eventually(
            () => proxy.waiting,
            (n) => n > 0,
            { timeoutMs: 15_000, intervalMs: 20, what: 'the command API reconnecting its listening session' },
          );
          const exited = api.stop('SIGTERM');
          await new Promise((resolve) => setTimeout(resolve, releaseAfterMs));
          proxy.release();
          let timer: NodeJS.Timeout | undefined;
          const outcome = await Promise.race([
            exited.then(() => 'exited'),
            new Promise((resolve) => (timer = setTimeout(() => resolve('still running'), EXIT_WITHIN_MS))),
          ]);
          clearTimeout(timer);
          expect({ releaseAfterMs, outcome }).toEqual({ releaseAfterMs, outcome: 'exited' });
          expect(await listening()).toBe(0);
        } finally {
          await api.stop('SIGKILL');
          await proxy.cut();
        }
      }),
      searchSettings({ fast: 3, long: 20 }),
    );
  });
});
