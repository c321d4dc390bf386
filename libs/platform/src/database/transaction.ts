import { DatabaseError } from 'pg';
import type { Client, ClientBase, Pool, PoolClient, QueryResult } from 'pg';
import { DataSource, EntityManager } from 'typeorm';
import { isDatabaseUnreachable } from './database-errors';
import { Queryable, queryRows, thrownByStatement } from './query-rows';

/** The pg pool behind a TypeORM data source: one pool, one connection limit, for both ways in. */
export function postgresPool(dataSource: DataSource): Pool {
  const pool = (dataSource.driver as unknown as { master?: Pool }).master;
  if (!pool) throw new Error('the data source has no PostgreSQL pool: is it initialised, and is it postgres?');
  return pool;
}

export interface TransactionOptions<T> {
  /**
   * Called with the work's result just before COMMIT; a throw rolls everything back. With it, COMMIT
   * is always a statement of its own (`queryThenCommit` runs only its statement), so nothing is
   * committed before it has run.
   */
  beforeCommit?: (result: T) => void;
}

interface OpenTransaction {
  /** `queryThenCommit` may write COMMIT with its statement. */
  commitAhead: boolean;
  /** No transaction block (`inOneStatement`): `queryThenCommit`'s statement is a transaction of its own. */
  autocommit?: boolean;
  /** COMMIT has been sent (by `queryThenCommit`): the transaction is over, whatever came back. */
  ended: boolean;
}

const open = new WeakMap<Queryable, OpenTransaction>();

/**
 * Runs `work` in one transaction on a connection of the data source's pool, through the bare pg
 * client: BEGIN, the work's statements, COMMIT — what `dataSource.transaction` does, without its
 * query runner, entity manager and event broadcasting on the hot path. An exception rolls back and
 * propagates. A connection whose ROLLBACK fails (the session was lost, or is in an unknown state) is
 * destroyed, never handed to the next borrower. A transaction that PostgreSQL rolled back at COMMIT
 * (an earlier statement failed and the work carried on) rejects: it never reads as committed.
 *
 * On a pool in pg's pipeline mode (`postgresOptions({ pipeline: true })`) it takes two round trips
 * fewer: BEGIN is written together with the work's first statement (when the work sends one before
 * its first `await`), and the work may end with `queryThenCommit`, whose statement travels with
 * COMMIT. PostgreSQL answers them in order, each as if sent alone. Pipelining BEGIN changes nothing
 * a transaction can observe: BEGIN fails only on a session that is lost or inside an aborted
 * transaction, and there the statement written behind it fails too.
 */
export async function inTransaction<T>(
  dataSource: DataSource,
  work: (client: PoolClient) => Promise<T>,
  options: TransactionOptions<T> = {},
): Promise<T> {
  const client = await postgresPool(dataSource).connect();
  // pg-pool listens for errors only on idle clients: a session that dies while this one is borrowed
  // and between statements emits 'error' with nobody listening, which would crash the process. The
  // failure surfaces anyway in the next statement or the ROLLBACK, which destroys the connection.
  client.on('error', ignoreUntilNextStatement);
  const transaction: OpenTransaction = { commitAhead: client.pipeline && !options.beforeCommit, ended: false };
  open.set(client, transaction);
  let broken: Error | undefined;
  try {
    const result = client.pipeline ? await beganWith(client, work) : await client.query('BEGIN').then(() => work(client));
    if (!transaction.ended) {
      options.beforeCommit?.(result);
      transaction.ended = true;
      expectCommitted(await client.query('COMMIT'));
    }
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch((rollbackFailed: Error) => (broken = rollbackFailed));
    throw error;
  } finally {
    open.delete(client);
    client.removeListener('error', ignoreUntilNextStatement);
    client.release(broken);
  }
}

/**
 * Runs `work`, whose one statement is sent by `queryThenCommit`, on a connection of the data source's
 * pool without BEGIN and COMMIT: PostgreSQL runs a statement sent outside a transaction block as a
 * transaction of its own, as atomic as any (all of its CTEs commit or none does, its now() is one
 * instant). For work that is one statement, what `inTransaction` would commit, with two statements of
 * protocol fewer for the server and the driver: a replay read from the database 7,700 -> 10,300 per
 * second through the bare driver here. The work must write nothing before or after that statement
 * (each statement would be a transaction of its own; a read after it, such as `claimDecided`'s look
 * for a receipt committed while its statement waited, reads what is committed by then); a second
 * `queryThenCommit` is refused, and work that returns without one rejects. A connection whose
 * statement failed other than by an error PostgreSQL reported on a live session is destroyed, never
 * handed to the next borrower.
 */
export async function inOneStatement<T>(dataSource: DataSource, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await postgresPool(dataSource).connect();
  client.on('error', ignoreUntilNextStatement); // as in inTransaction
  let broken: Error | undefined;
  try {
    return await asOneStatement(client, () => inOneWrite(client, () => work(client)));
  } catch (error) {
    if (leavesSessionInDoubt(error)) broken = error as Error;
    throw error;
  } finally {
    client.removeListener('error', ignoreUntilNextStatement);
    client.release(broken);
  }
}

/**
 * Runs `work` as a statement sent outside a transaction block on `db` (`inOneStatement`'s rules): its
 * `queryThenCommit` is the transaction, a second one is refused, and work that returns without one
 * rejects. `db` is the work's own handle, even where the connection behind it serves other work too.
 */
export async function asOneStatement<T>(db: Queryable, work: () => Promise<T>): Promise<T> {
  const statement: OpenTransaction = { commitAhead: false, autocommit: true, ended: false };
  open.set(db, statement);
  try {
    const result = await work();
    if (!statement.ended) throw new Error('inOneStatement: the work sent no statement through queryThenCommit');
    return result;
  } finally {
    open.delete(db);
  }
}

/**
 * True when a statement's failure leaves its session in doubt: it failed other than by an error
 * PostgreSQL reported on a live session. A throw of the work's own (IDEMPOTENCY.IN_PROGRESS from a
 * lock timeout, say) leaves it sound.
 */
export function leavesSessionInDoubt(error: unknown): boolean {
  return isDatabaseUnreachable(error) || (thrownByStatement(error) && !(error instanceof DatabaseError));
}

/**
 * The last statement of `inTransaction`'s work, then COMMIT: on a pipelined pool both are written at
 * once and answered in order (one round trip); the transaction is over when this resolves, and the
 * work must send nothing after it. Elsewhere (a TypeORM manager, a pool not pipelined, a
 * `beforeCommit` hook) it runs the statement alone and the surrounding transaction commits as before;
 * under `inOneStatement`, the statement is the transaction. If the statement fails, PostgreSQL turns
 * the COMMIT behind it into a rollback: nothing is committed.
 */
export async function queryThenCommit<T = Record<string, unknown>>(
  db: Queryable,
  sql: string,
  parameters: unknown[] = [],
): Promise<{ rows: T[]; affected: number }> {
  const transaction = db instanceof EntityManager ? undefined : open.get(db);
  if (transaction?.ended) throw new Error('queryThenCommit: this transaction has already ended');
  if (transaction?.autocommit) transaction.ended = true;
  if (!transaction?.commitAhead) return queryRows<T>(db, sql, parameters);
  const client = db as Client;
  transaction.ended = true;
  const [ran, ended] = await pipelined(client, () => [queryRows<T>(client, sql, parameters), client.query('COMMIT')] as const);
  expectCommitted(ended);
  return ran;
}

/** BEGIN and the work's first statement in one write; the work's own result, or the first failure. */
async function beganWith<T>(client: PoolClient, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const [, worked] = await pipelined(client, () => [client.query('BEGIN'), work(client)] as const);
  return worked;
}

/**
 * The statements `send` starts (without awaiting any) go out in one write on a client in pg's pipeline
 * mode: PostgreSQL runs them in order, each as if sent alone, and answers them in order. Resolves to
 * every result once all are answered, or rejects with the first failure (in sending order) once all
 * are: a statement behind a failed one inside a transaction fails too, and nothing is left unanswered
 * on the connection. Meant for clients in pipeline mode (the command path's and the relay's pools): on
 * one that is not, pg queues each behind the answer to the one before, which pg 8 deprecates.
 */
export async function pipelined<T extends readonly Promise<unknown>[]>(
  client: ClientBase,
  send: () => T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const settled = await Promise.allSettled(inOneWrite(client as Client, send));
  const failed = settled.find((outcome) => outcome.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((outcome) => (outcome as PromiseFulfilledResult<unknown>).value) as { -readonly [K in keyof T]: Awaited<T[K]> };
}

/** What `send` writes to a pipelining client's socket goes out in one write (one system call). */
function inOneWrite<T>(client: Client, send: () => T): T {
  const socket = client.connection.stream;
  socket.cork();
  try {
    return send();
  } finally {
    socket.uncork();
  }
}

/** COMMIT of a transaction PostgreSQL had already aborted answers ROLLBACK, not an error. */
export function expectCommitted(result: QueryResult): void {
  if (result.command !== 'COMMIT') {
    throw new Error(`the transaction was rolled back at COMMIT (the server answered ${result.command}): a statement in it had failed`);
  }
}

function ignoreUntilNextStatement(): void {}
