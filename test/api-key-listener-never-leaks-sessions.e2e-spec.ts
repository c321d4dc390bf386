import { connect, createServer, Server, Socket } from 'node:net';
import fc from 'fast-check';
import { migrate } from '@app/migrations';
import { RunningApp, startApp } from './support/apps';
import { ApiClientSession } from './support/command-api';
import { eventually } from './support/eventually';
import { freePort } from './support/free-port';
import { recreate } from './support/global-setup';
import { OrdersDb } from './support/orders-db';
import { PrivatePostgres } from './support/private-postgres';
import { searchSettings } from './support/search';
import { testEnv } from './support/test-env';

const APP = `application_name = 'command-api' AND datname = current_database()`;
/** The API-key cache's sessions: the one listening, and any whose LISTEN failed (its last statement all the same). */
const LISTENING = `${APP} AND query = 'LISTEN api_clients_changed'`;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function pids(db: OrdersDb, where: string): Promise<number[]> {
  return (await db.pool.query(`SELECT pid FROM pg_stat_activity WHERE ${where} ORDER BY pid`)).rows.map((row) => row.pid);
}

/** Terminates the backends `where` selects; how many. */
async function terminate(db: OrdersDb, where: string, params: unknown[] = []): Promise<number> {
  const { rows } = await db.pool.query(
    `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE ${where}`,
    params,
  );
  return rows[0].n;
}

/** Authenticates with a fresh key (then cached), revokes it, and expects the next request refused. */
async function authenticatesAndRevokes(db: OrdersDb, api: RunningApp, concurrency = 1): Promise<void> {
  const { tenantId, apiKey, clientId } = await db.tenant();
  const client = new ApiClientSession(api.url, apiKey);
  const probe = async () => (await client.get(`/v1/idempotency-receipts/orders.create/probe-${tenantId}`)).status;
  // Authenticated (no such receipt), `concurrency` at once: a pool short of connections answers 503.
  expect(await Promise.all(Array.from({ length: concurrency }, probe))).toEqual(Array(concurrency).fill(404));
  await db.pool.query('UPDATE api_clients SET revoked_at = now() WHERE id = $1', [clientId]);
  await eventually(probe, (status) => status === 401, { timeoutMs: 1_000, intervalMs: 50, what: 'the revoked key refused' });
}

/**
 * The command API's API-key cache keeps a session of its own that runs `LISTEN api_clients_changed`
 * and opens another when it is lost. Each failure must cost one session, closed, and one reconnect:
 * a session whose LISTEN failed was left checked out of the pool (one connection per failure, until
 * the pool was used up and every request answered 503), and a connection that died during LISTEN
 * scheduled two reconnects (the statement's failure and the loss), leaving a second session
 * listening that nothing would close, not even shutdown.
 */
describe('the API-key cache never leaks its listening sessions', () => {
  describe('on a standby, where PostgreSQL refuses LISTEN on a live connection', () => {
    let postgres: PrivatePostgres | undefined;
    let unavailable: string | undefined;
    beforeAll(async () => {
      postgres = new PrivatePostgres(await freePort());
      unavailable = postgres.unavailable();
      if (!unavailable) await postgres.start();
    }, 120_000);
    afterAll(() => postgres?.destroy());

    it('closes each session it could not listen on, keeps serving requests, and listens once the server is promoted', async () => {
      if (unavailable || !postgres)
        return console.log(`LISTEN refused by a standby: not run, it needs a PostgreSQL server of its own and ${unavailable}`);
      const url = postgres.url('orders_standby_test');
      await recreate(url);
      await migrate('orders', url);
      const db = new OrdersDb(url);
      let api: RunningApp | undefined;
      try {
        const { tenantId, apiKey } = await db.tenant();
        // Restarted with standby.signal in its data directory, the server is a hot standby: it serves
        // reads, and refuses LISTEN ("cannot execute LISTEN during recovery").
        const { data_directory } = (await db.pool.query('SHOW data_directory')).rows[0];
        await db.pool.query(`COPY (SELECT WHERE false) TO '${data_directory}/standby.signal'`);
        await postgres.restart('fast');
        expect((await db.pool.query('SELECT pg_is_in_recovery() AS standby')).rows[0].standby).toBe(true);

        // A pool of 3: three sessions left open would be all of it.
        api = await startApp('command-api', {
          ORDERS_DATABASE_URL: url,
          DATABASE_POOL_SIZE: '3',
          API_KEY_CACHE_SECONDS: '600',
          RECEIPT_SWEEP_INTERVAL_SECONDS: '0',
        });
        const running = api;
        const refusals = () => running.output().split('cannot listen for API client changes').length - 1;
        await eventually(refusals, (n) => n >= 4, { timeoutMs: 20_000, intervalMs: 20, what: 'four LISTENs refused' });
        expect(api.output()).toContain('cannot execute LISTEN during recovery');
        // At most the one attempt in flight; each refused session is closed.
        expect((await pids(db, LISTENING)).length).toBeLessThanOrEqual(1);
        const client = new ApiClientSession(api.url, apiKey);
        expect((await client.get(`/v1/idempotency-receipts/orders.create/probe-${tenantId}`)).status).toBe(404);

        await db.pool.query('SELECT pg_promote()');
        const listener = await eventually(
          () => pids(db, LISTENING),
          (p) => p.length === 1,
          { timeoutMs: 20_000, intervalMs: 20, what: 'one session listening after the promotion' },
        );
        await sleep(500); // a refused session lives for one round trip; a listening one stays
        expect(await pids(db, LISTENING)).toEqual(listener);
        await authenticatesAndRevokes(db, api, 2);

        await api.stop();
        expect(await pids(db, APP)).toEqual([]);
      } finally {
        await api?.stop('SIGKILL');
        await db.close();
      }
    }, 90_000);
  });

  describe('its listening connection killed at random moments, during LISTEN too', () => {
    const db = new OrdersDb();
    let gate: ListenGate;
    let api: RunningApp;
    beforeAll(async () => {
      const url = new URL(testEnv.ordersUrl);
      gate = await ListenGate.start({ host: url.hostname, port: Number(url.port || 5432) });
      url.port = String(gate.port);
      // A pool of 4: a listening session left behind at each loss during LISTEN would soon be all of it.
      api = await startApp('command-api', {
        ORDERS_DATABASE_URL: url.toString(),
        DATABASE_POOL_SIZE: '4',
        API_KEY_CACHE_SECONDS: '600',
        RATE_LIMIT_UNAUTHENTICATED_REQUESTS: '0',
      });
    });
    afterAll(async () => {
      await api?.stop();
      await gate?.stop();
      await db.close();
    });

    /** Kills the listening session, and holds the LISTEN of the session that replaces it. */
    async function reconnectHeld(): Promise<HeldListen> {
      const held = gate.next();
      await terminate(db, LISTENING);
      return held;
    }

    type Step = { kill: 'listening' } | { kill: 'during-listen'; releaseAfterMs: number } | { kill: 'just-after-listen'; afterMs: number };
    const step: fc.Arbitrary<Step> = fc.oneof(
      fc.constant({ kill: 'listening' as const }),
      fc.record({ kill: fc.constant('during-listen' as const), releaseAfterMs: fc.integer({ min: 0, max: 20 }) }),
      fc.record({ kill: fc.constant('just-after-listen' as const), afterMs: fc.integer({ min: 0, max: 3 }) }),
    );

    async function run(s: Step): Promise<void> {
      if (s.kill === 'listening') {
        await terminate(db, LISTENING);
        return;
      }
      const held = await reconnectHeld();
      const backend = `${APP} AND client_port = $1`;
      if (s.kill === 'during-listen') {
        expect(await terminate(db, backend, [held.clientPort])).toBe(1); // while its client waits for LISTEN's answer
        await sleep(s.releaseAfterMs);
        held.release();
      } else {
        held.release();
        await sleep(s.afterMs);
        await terminate(db, backend, [held.clientPort]);
      }
    }

    it('one session listens after every loss; authentication and revocation keep working', async () => {
      await eventually(
        () => pids(db, LISTENING),
        (p) => p.length === 1,
        { timeoutMs: 15_000, intervalMs: 20, what: 'the command API listening' },
      );
      await fc.assert(
        fc.asyncProperty(
          // Every run loses a connection during LISTEN at least once.
          fc.record({ releaseAfterMs: fc.integer({ min: 0, max: 20 }) }),
          fc.array(step, { maxLength: 2 }),
          async ({ releaseAfterMs }, more) => {
            for (const s of [{ kill: 'during-listen' as const, releaseAfterMs }, ...more]) {
              await run(s);
              await eventually(
                () => pids(db, LISTENING),
                (p) => p.length > 0,
                { timeoutMs: 15_000, intervalMs: 20, what: 'the command API listening again' },
              );
              await sleep(600); // past any other reconnect the loss scheduled (its first backoff is 100-200 ms)
              expect({ step: s, listening: (await pids(db, LISTENING)).length }).toEqual({ step: s, listening: 1 });
            }
            await authenticatesAndRevokes(db, api, 4);
          },
        ),
        searchSettings({ fast: 4, long: 20 }),
      );
    }, 90_000);
  });
});

interface HeldListen {
  /** The port of its connection as PostgreSQL sees it (pg_stat_activity.client_port). */
  clientPort: number;
  /** Sends the LISTEN on to the server (nothing happens if the connection is gone). */
  release(): void;
}

/**
 * A TCP relay in front of the real PostgreSQL that can hold the next LISTEN a client sends, so the
 * test can act while the client waits for its answer. Every other byte passes as it is.
 */
class ListenGate {
  private waiting?: (held: HeldListen) => void;
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(target: { host: string; port: number }): Promise<ListenGate> {
    const server = createServer((client) => gate.relay(client, connect(target.port, target.host)));
    const gate = new ListenGate(server, await freePort());
    await new Promise<void>((resolve) => server.listen(gate.port, '127.0.0.1', resolve));
    return gate;
  }

  /** The next LISTEN any client sends, held until `release()`. */
  next(): Promise<HeldListen> {
    return new Promise((resolve) => (this.waiting = resolve));
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private relay(client: Socket, upstream: Socket): void {
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      socket.on('error', () => undefined);
      socket.on('close', () => {
        this.sockets.delete(socket);
        client.destroy();
        upstream.destroy();
      });
    }
    upstream.pipe(client);
    client.on('data', (chunk: Buffer) => {
      const waiting = this.waiting;
      if (!waiting || !chunk.includes('LISTEN api_clients_changed')) return void upstream.write(chunk);
      this.waiting = undefined;
      client.pause(); // whatever the client sends next goes after the LISTEN
      waiting({
        clientPort: upstream.localPort!,
        release: () => {
          upstream.write(chunk);
          client.resume();
        },
      });
    });
  }
}
