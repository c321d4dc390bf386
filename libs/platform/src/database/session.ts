import type { PoolClient } from 'pg';
import { DataSource, EntityManager, QueryRunner } from 'typeorm';

/**
 * A connection of its own for session-scoped state (advisory locks, LISTEN) that lives and dies with
 * that state: it is never handed back to the pool alive, so no lock or LISTEN can outlive its owner in
 * another borrower's hands. `lost` belongs to this connection only: a late event of an older session
 * cannot mark a newer one lost.
 */
export class DedicatedSession {
  lost = false;
  private closed = false;
  private readonly listeners: [event: 'error' | 'end' | 'notification', listener: () => void][] = [];

  private constructor(
    private readonly runner: QueryRunner,
    private readonly client: PoolClient,
  ) {}

  /** `onLost` runs once if the connection errors or ends; `onNotification` for each NOTIFY it receives. */
  static async open(
    dataSource: DataSource,
    { onLost, onNotification }: { onLost?: () => void; onNotification?: () => void } = {},
  ): Promise<DedicatedSession> {
    const runner = dataSource.createQueryRunner();
    const client = (await runner.connect()) as PoolClient;
    const session = new DedicatedSession(runner, client);
    const lost = () => {
      if (session.lost || session.closed) return;
      session.lost = true;
      onLost?.();
    };
    session.listen('error', lost);
    session.listen('end', lost);
    if (onNotification) session.listen('notification', onNotification);
    return session;
  }

  get manager(): EntityManager {
    return this.runner.manager;
  }

  /**
   * The connection itself, for `queryRows`: its statements are prepared once per connection and then
   * only bound and executed. They run in whatever transaction is open on it (one connection): one the
   * caller began with BEGIN on it, as the relay's loop does, or the runner's.
   */
  get connection(): PoolClient {
    return this.client;
  }

  /**
   * Closes the connection: the pool removes a client released with an error instead of reusing it, and
   * PostgreSQL releases every session lock with the backend. Safe to call more than once.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const [event, listener] of this.listeners) (this.client as NodeJS.EventEmitter).removeListener(event, listener);
    // TypeORM 0.3 has no public "release and destroy"; its releasePostgresConnection(err) passes the
    // error to pg-pool's release, which then ends the connection. A no-op if TypeORM already released it.
    const release = (this.runner as unknown as { releasePostgresConnection?: (err: Error) => Promise<void> }).releasePostgresConnection;
    if (typeof release !== 'function') throw new Error('TypeORM no longer has releasePostgresConnection: DedicatedSession must be updated');
    await release.call(this.runner, new Error('dedicated session closed: the connection is destroyed, never pooled'));
  }

  private listen(event: 'error' | 'end' | 'notification', listener: () => void): void {
    (this.client as NodeJS.EventEmitter).on(event, listener);
    this.listeners.push([event, listener]);
  }
}
