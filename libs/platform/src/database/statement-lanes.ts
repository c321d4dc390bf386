import type { Pool, PoolClient, QueryConfig, QueryResult } from 'pg';
import { StatementSession } from './query-rows';
import { asOneStatement, leavesSessionInDoubt } from './transaction';

/**
 * `inOneStatement` for many callers at once: their statements, each a transaction of its own (sent
 * outside a transaction block), share a few connections of the pool in pg's pipeline mode instead of
 * borrowing one each. What the callers send in one turn of the event loop goes out in one write per
 * connection, and PostgreSQL reads it in one wake-up and answers the statements in order, each as if
 * sent alone: a statement behind a failed one still runs (each has its own Sync), and none sees
 * another's uncommitted writes (each commits before the next starts).
 *
 * On this 2-CPU machine, 16 callers each sending a prepared one-row read: 17,000–27,000 statements/s
 * over a connection each, 42,000–53,000/s over two lanes, the machine's CPU per statement 65–96 µs ->
 * 29–36 µs (most of what a connection of its own costs is the kernel waking a backend per statement).
 *
 * - Up to `lanes` works in flight, each borrows a lane of its own (as `inOneStatement` would); past
 *   that, a work joins the open lane with the fewest in flight. A lane goes back to the pool as soon
 *   as it has no work in flight.
 * - The price of sharing: a statement that waits (for a lock, up to the session's `lock_timeout`)
 *   holds up the statements written behind it on its lane. Only work whose statement waits at most
 *   briefly belongs here: the command path's decided statement waits only for a racing duplicate's
 *   claim (docs/idempotency.md).
 * - A statement whose failure leaves its session in doubt (`leavesSessionInDoubt`: the connection was
 *   lost) fails every work on its lane with it; the lane takes no new work from then on, and its
 *   connection is destroyed, not pooled, once they have settled. The caller reruns such work
 *   (`retryOnLostSession`) on another lane.
 */
export class StatementLanes {
  private readonly open: Lane[] = [];

  /** @param lanes the most connections its works share (each is a backend, so at most one CPU of the server). */
  constructor(
    private readonly pool: Pool,
    private readonly lanes: number,
  ) {
    if (!Number.isInteger(lanes) || lanes < 1) throw new Error(`StatementLanes: lanes must be a positive integer, got ${lanes}`);
  }

  /** Runs `work`, whose one statement is sent by `queryThenCommit`, as `inOneStatement` does, on a shared lane. */
  async run<T>(work: (session: StatementSession) => Promise<T>): Promise<T> {
    const lane = this.pick();
    lane.works += 1;
    try {
      const session = await lane.session();
      return await asOneStatement(session, () => work(session));
    } catch (error) {
      if (leavesSessionInDoubt(error)) this.retire(lane, error as Error);
      throw error;
    } finally {
      lane.works -= 1;
      if (lane.works === 0) this.close(lane);
    }
  }

  /** Lanes open now, and the works in flight on each (for tests and metrics). */
  get load(): number[] {
    return this.open.map((lane) => lane.works);
  }

  private pick(): Lane {
    // An open lane always has work in flight (it closes when its last work settles): below `lanes`, a new one.
    if (this.open.length < this.lanes) {
      const lane = new Lane(this.pool.connect());
      this.open.push(lane);
      return lane;
    }
    return this.open.reduce((idlest, lane) => (lane.works < idlest.works ? lane : idlest));
  }

  /**
   * A lane whose session is lost takes no more work: the first statement to fail says so (57P01 from a
   * terminated backend), while the rest of its works fail only when the socket closes, milliseconds
   * later; a work given to it in between (a retry, a new request) would fail as well. Its connection is
   * destroyed, not pooled, when its last work settles.
   */
  private retire(lane: Lane, error: Error): void {
    lane.broken ??= error;
    this.forget(lane);
  }

  private close(lane: Lane): void {
    this.forget(lane);
    lane.release();
  }

  private forget(lane: Lane): void {
    const at = this.open.indexOf(lane);
    if (at >= 0) this.open.splice(at, 1);
  }
}

/** A pooled connection in pipeline mode, and the works it carries. */
class Lane {
  works = 0;
  broken?: Error;
  private corked = false;
  private readonly client: Promise<PoolClient>;

  constructor(connecting: Promise<PoolClient>) {
    this.client = connecting.then((client) => {
      if (!client.pipeline) {
        client.release();
        throw new Error('StatementLanes: the pool is not in pg pipeline mode (postgresOptions({ pipeline: true }))');
      }
      // As in inTransaction: pg-pool listens for errors only on idle clients; a lost session surfaces in
      // the statements in flight, which mark the lane broken.
      client.on('error', ignoreUntilNextStatement);
      return client;
    });
    // A lane that could not connect fails the works given to it (each sees the error); nothing to release.
    this.client.catch(() => undefined);
  }

  /** A handle of one work's own: what it sends is corked until the loop's turn ends, with its lane-mates'. */
  async session(): Promise<StatementSession> {
    const client = await this.client;
    return {
      query: ((config: QueryConfig): Promise<QueryResult> => {
        this.corkUntilTurnEnds(client);
        return client.query(config);
      }) as StatementSession['query'],
    };
  }

  release(): void {
    void this.client.then(
      (client) => {
        client.removeListener('error', ignoreUntilNextStatement);
        client.release(this.broken);
      },
      () => undefined,
    );
  }

  /** The statements of one event-loop turn go out in one write: uncorked after the turn's I/O callbacks (setImmediate). */
  private corkUntilTurnEnds(client: PoolClient): void {
    if (this.corked) return;
    const socket = client.connection.stream;
    this.corked = true;
    socket.cork();
    setImmediate(() => {
      this.corked = false;
      socket.uncork();
    });
  }
}

function ignoreUntilNextStatement(): void {}
