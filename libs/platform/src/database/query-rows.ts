import { EntityManager } from 'typeorm';

/**
 * Runs one SQL statement on `manager`'s connection (its transaction, if it has one) and returns the
 * rows — also for UPDATE/DELETE … RETURNING, whose shape TypeORM's `manager.query` changes — and the
 * affected row count.
 */
export async function queryRows<T = Record<string, unknown>>(
  manager: EntityManager,
  sql: string,
  parameters: unknown[] = [],
): Promise<{ rows: T[]; affected: number }> {
  const runner = manager.queryRunner ?? manager.connection.createQueryRunner();
  try {
    const result = await runner.query(sql, parameters, true);
    return { rows: result.records as T[], affected: result.affected ?? result.records.length };
  } finally {
    if (!manager.queryRunner) await runner.release();
  }
}
