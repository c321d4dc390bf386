import { Pool, PoolClient } from 'pg';

/**
 * BEGIN, `work`, COMMIT on a client of `pool`, ROLLBACK on a throw: the transaction as a bare `pg`
 * program writes it, for the baselines (nothing of the project's own transaction helper).
 */
export async function bareTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
