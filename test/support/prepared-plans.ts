import type { ClientBase } from 'pg';

/**
 * The session's prepared statements whose text contains `fragment`: each one's name and how many of its
 * runs so far used a generic plan (pg_prepared_statements: per session, so ask on the session itself).
 */
export async function preparedOnSession(client: ClientBase, fragment: string): Promise<{ name: string; genericPlans: number }[]> {
  const { rows } = await client.query<{ name: string; genericPlans: number }>(
    /* sql */ `SELECT name, generic_plans::int AS "genericPlans" FROM pg_prepared_statements WHERE strpos(statement, $1) > 0`,
    [fragment],
  );
  return rows;
}

/**
 * Runs the session's prepared statement `name` with `literals` (its parameters, as SQL) with the plan the
 * session holds for it, under EXPLAIN ANALYZE in a transaction rolled back: the rows its top node returned
 * and the buffers it read (counted, not timed: the same on a loaded machine).
 */
export async function explainPrepared(client: ClientBase, name: string, literals: string): Promise<{ rows: number; buffers: number }> {
  await client.query('BEGIN');
  try {
    const { rows } = await client.query<{ 'QUERY PLAN': { Plan: Record<string, number> }[] }>(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE ${name}(${literals})`,
    );
    const root = rows[0]['QUERY PLAN'][0].Plan;
    return { rows: root['Actual Rows'], buffers: root['Shared Hit Blocks'] + root['Shared Read Blocks'] };
  } finally {
    await client.query('ROLLBACK');
  }
}
