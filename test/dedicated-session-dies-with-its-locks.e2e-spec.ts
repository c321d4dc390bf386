import { DataSource } from 'typeorm';
import { DedicatedSession, postgresOptions } from '@app/platform';
import { testEnv } from './support/test-env';
import { eventually } from './support/eventually';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function backendPid(session: DedicatedSession): Promise<number> {
  const [{ pid }] = await session.manager.query('SELECT pg_backend_pid() AS pid');
  return pid;
}

/** The connection the relay keeps its shard locks and LISTEN on, against the real PostgreSQL. */
describe('a dedicated session', () => {
  // One connection in the pool: a session handed back alive would be the next one's connection.
  const dataSource = new DataSource(postgresOptions({ url: testEnv.ordersUrl, applicationName: 'e2e-dedicated-session', poolSize: 1 }));
  /** Looks at pg_locks and terminates backends from outside that pool. */
  const observer = new DataSource(postgresOptions({ url: testEnv.ordersUrl, applicationName: 'e2e-observer', poolSize: 1 }));
  beforeAll(() => Promise.all([dataSource.initialize(), observer.initialize()]));
  afterAll(() => Promise.all([dataSource.destroy(), observer.destroy()]));

  async function locksOf(pid: number): Promise<number> {
    const [{ n }] = await observer.query(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = $1`, [pid]);
    return n;
  }

  it('is closed by destroying its connection: its locks go with it and the pool never hands it out again', async () => {
    const first = await DedicatedSession.open(dataSource);
    const pid = await backendPid(first);
    await first.manager.query('SELECT pg_advisory_lock(4242, 1)');
    await first.manager.query('LISTEN dedicated_session_test');
    await first.close();
    await first.close(); // a second close is a no-op, never a second release to the pool

    const second = await DedicatedSession.open(dataSource);
    try {
      expect(await backendPid(second)).not.toBe(pid);
      expect(await locksOf(pid)).toBe(0);
      const [{ locked }] = await second.manager.query('SELECT pg_try_advisory_lock(4242, 1) AS locked');
      expect(locked).toBe(true);
    } finally {
      await second.close();
    }
  });

  it('is marked lost when its backend is terminated, and a lost old session cannot mark the new one', async () => {
    let lostEvents = 0;
    const first = await DedicatedSession.open(dataSource, { onLost: () => lostEvents++ });
    const pid = await backendPid(first);
    await observer.query('SELECT pg_terminate_backend($1)', [pid]);
    await eventually(() => first.lost, Boolean, { timeoutMs: 2_500, intervalMs: 50, what: 'the session noticing it was lost' });
    expect(lostEvents).toBe(1);

    const second = await DedicatedSession.open(dataSource);
    try {
      await first.close();
      await pause(200);
      expect(second.lost).toBe(false);
      expect(await backendPid(second)).not.toBe(pid);
    } finally {
      await second.close();
    }
  });
});
