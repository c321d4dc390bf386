import { DataSource, EntityManager } from 'typeorm';
import { eventually } from './eventually';

/**
 * Runs `change` in a transaction, then waits until the row versions it left behind are dead to every
 * snapshot. An index scan marks an entry dead, and a vacuum removes a row, only then, and PostgreSQL
 * judges that by the oldest transaction running in any database: one that began before the change
 * (another suite's, on a busy machine) keeps them. The apps' later claims would wait for the same.
 */
export async function deadToEverySnapshot(dataSource: DataSource, change: (manager: EntityManager) => Promise<unknown>): Promise<void> {
  const xid = await dataSource.transaction(async (manager) => {
    await change(manager);
    const [{ xid }] = await manager.query(/* sql */ `SELECT pg_current_xact_id()::text AS xid`);
    return BigInt(xid);
  });
  await eventually(
    async () => BigInt((await dataSource.query(/* sql */ `SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin`))[0].xmin),
    (xmin) => xmin > xid,
    { timeoutMs: 40_000, what: 'every transaction older than the change to end' },
  );
}
