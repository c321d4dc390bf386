import type { Pool, PoolClient } from 'pg';
import { DataSource } from 'typeorm';

/** The pg pool behind a TypeORM data source: one pool, one connection limit, for both ways in. */
export function postgresPool(dataSource: DataSource): Pool {
  const pool = (dataSource.driver as unknown as { master?: Pool }).master;
  if (!pool) throw new Error('the data source has no PostgreSQL pool: is it initialised, and is it postgres?');
  return pool;
}

/**
 * Runs `work` in one transaction on a connection of the data source's pool, through the bare pg
 * client: BEGIN, the work's statements, COMMIT — what `dataSource.transaction` does, without its
 * query runner, entity manager and event broadcasting on the hot path. An exception rolls back and
 * propagates. A connection whose ROLLBACK fails (the session was lost, or is in an unknown state) is
 * destroyed, never handed to the next borrower.
 */
export async function inTransaction<T>(dataSource: DataSource, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await postgresPool(dataSource).connect();
  // pg-pool listens for errors only on idle clients: a session that dies while this one is borrowed
  // and between statements emits 'error' with nobody listening, which would crash the process. The
  // failure surfaces anyway in the next statement or the ROLLBACK, which destroys the connection.
  client.on('error', ignoreUntilNextStatement);
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch((rollbackFailed: Error) => (broken = rollbackFailed));
    throw error;
  } finally {
    client.removeListener('error', ignoreUntilNextStatement);
    client.release(broken);
  }
}

function ignoreUntilNextStatement(): void {}
