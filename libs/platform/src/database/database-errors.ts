import type { Pool, PoolClient } from 'pg';
import { DataSource, QueryFailedError, QueryRunnerAlreadyReleasedError, QueryRunnerProviderAlreadyReleasedError } from 'typeorm';

/**
 * SQLSTATEs meaning "no session can be served now": the connection is gone or cannot be had, or the
 * server is in trouble that no statement of ours caused. Disk full (53100) belongs here: every write
 * fails alike until an operator frees space, whatever the message. Out of memory (53200) does not: a
 * server that answers with it refused one backend's allocation, which the statement's own size can
 * cause; real server-wide memory exhaustion ends in the OOM killer and a restart, seen as 57P02 or a
 * lost connection.
 */
const UNREACHABLE_SQLSTATE = [
  /^08/, // connection exception
  /^57P0[1-3]$/, // admin shutdown (pg_terminate_backend too), crash shutdown, cannot connect now
  /^57P05$/, // idle_session_timeout: the server closed the session
  /^53100$/, // disk_full
  /^53300$/, // too_many_connections
];
/** The server answered, but this statement or transaction failed; running it again may succeed, or fail the same way. */
const STATEMENT_SQLSTATE = [
  /^53/, // the rest of insufficient resources: out of memory, configuration limit exceeded
  /^57014$/, // query_canceled: statement_timeout
  /^55P03$/, // lock_not_available: lock_timeout
  /^40001$/, // serialization_failure
  /^40P01$/, // deadlock_detected
  /^25P04$/, // transaction_timeout
];
const UNREACHABLE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'EAI_AGAIN']);
const UNREACHABLE_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection is not established|terminating connection/i;

export function sqlState(error: unknown): string | undefined {
  const candidate = error instanceof QueryFailedError ? error.driverError : error;
  const code = (candidate as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * True when `error` says the database could not be reached or could not serve any session: the
 * connection was refused, lost or terminated, the server is shutting down, full or out of connections.
 * Nothing a message or request did causes this; waiting is the only answer, so consumers wait without
 * counting an attempt. A statement that timed out or deadlocked is not this: see `isDatabaseUnavailable`.
 */
export function isDatabaseUnreachable(error: unknown): boolean {
  // TypeORM releases a query runner whose connection emitted an error; nothing else here releases one
  // inside its transaction, so the next statement failing this way means the connection died.
  if (error instanceof QueryRunnerAlreadyReleasedError || error instanceof QueryRunnerProviderAlreadyReleasedError) return true;
  const code = sqlState(error);
  if (code && (UNREACHABLE_NODE_CODES.has(code) || UNREACHABLE_SQLSTATE.some((pattern) => pattern.test(code)))) return true;
  const message = error instanceof Error ? error.message : '';
  return UNREACHABLE_MESSAGES.test(message) || (error instanceof AggregateError && error.errors.some(isDatabaseUnreachable));
}

/**
 * True when `error` says the database could not answer now: unreachable (above), or this statement
 * timed out, waited too long for a lock, deadlocked or lost a serialization race. Its outcome is unknown
 * or it did not run, and a retry later is the answer — for an HTTP caller a 503, never a "not found".
 * A consumer counts the second kind as attempts: a message that always times out must end.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  const code = sqlState(error);
  if (isDatabaseUnreachable(error) || (code && STATEMENT_SQLSTATE.some((pattern) => pattern.test(code)))) return true;
  return error instanceof AggregateError && error.errors.some(isDatabaseUnavailable);
}

const guarded = new WeakSet<object>();

/**
 * pg emits 'error' on a client whose session ends while no query runs, and an 'error' nobody listens
 * to crashes the process. For a new connection pg-pool drops its own listener before handing the
 * client over, and TypeORM attaches its listener a microtask later: a FATAL read in the same chunk as
 * the connection's first ReadyForQuery (pg_terminate_backend, a server shutdown) finds no listener.
 * This listener, attached as each client connects, closes that gap; the client is unusable anyway, and
 * its owner's next statement fails as a lost connection, which the owner retries.
 */
export function keepLateConnectionErrorsFromCrashing(dataSource: DataSource): void {
  const pool = (dataSource.driver as unknown as { master?: Pool }).master;
  if (!pool || guarded.has(pool)) return;
  guarded.add(pool);
  pool.on('connect', (client: PoolClient) => client.on('error', () => undefined));
}
