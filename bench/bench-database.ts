import { Client, escapeIdentifier } from 'pg';
import { DatabaseName, migrate } from '@app/migrations';
import { UsageError } from './section';

/** The database name of `url`, if it is one the bench may drop: a plain identifier containing "bench". */
export function benchDatabaseName(url: string): string | undefined {
  const name = decodeURIComponent(new URL(url).pathname.slice(1));
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) && name.includes('bench') ? name : undefined;
}

/** Drops and recreates a bench database (through the server's `postgres` database), then migrates it as `schema`. */
export async function recreateBenchDatabase(url: string, name: string, schema: DatabaseName = 'orders'): Promise<void> {
  const maintenance = new URL(url);
  maintenance.pathname = '/postgres';
  const client = new Client({ connectionString: maintenance.toString(), application_name: 'bench' });
  await client.connect();
  try {
    await client.query(/* sql */ `DROP DATABASE IF EXISTS ${escapeIdentifier(name)} WITH (FORCE)`);
    await client.query(/* sql */ `CREATE DATABASE ${escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
  await migrate(schema, url);
}

/**
 * Drops, recreates and migrates a benchmark's databases, each given as [url, the variable that sets
 * it, its schema]; refuses (bad usage) to touch any whose name is not a bench database's. Returns the names.
 */
export async function prepareBenchDatabases(databases: [url: string, variable: string, schema: DatabaseName][]): Promise<string[]> {
  const names = databases.map(([url]) => benchDatabaseName(url));
  const wrong = databases.filter((_, i) => !names[i]).map(([, variable]) => variable);
  if (wrong.length) {
    throw new UsageError(`${wrong.join(' and ')} must name databases of their own containing "bench" (they are dropped)`);
  }
  for (const [i, [url, , schema]] of databases.entries()) await recreateBenchDatabase(url, names[i]!, schema);
  return names as string[];
}

/** What the numbers depend on: server version and the settings that bound the commit rate. */
export async function describeServer(url: string): Promise<string> {
  const client = new Client({ connectionString: url, application_name: 'bench' });
  await client.connect();
  try {
    const { rows } = await client.query<{
      version: string;
      fsync: string;
      sync: string;
    }>(/* sql */ `SELECT current_setting('server_version') AS version, current_setting('fsync') AS fsync,
                        current_setting('synchronous_commit') AS sync`);
    return `PostgreSQL ${rows[0].version.split(' ')[0]} (fsync ${rows[0].fsync}, synchronous_commit ${rows[0].sync})`;
  } finally {
    await client.end();
  }
}
