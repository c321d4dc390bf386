import fc from 'fast-check';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { migrate, migrationSets } from '@app/migrations';
import { postgresOptions } from '@app/platform';
import { eventually } from './support/eventually';
import { recreate } from './support/global-setup';
import { searchSettings, searchTimeout } from './support/search';
import { testEnv } from './support/test-env';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `…/notifier_test` -> `…/notifier_<suffix>_test`. */
function notifierUrl(suffix: string): string {
  const target = new URL(testEnv.notifierUrl);
  target.pathname = target.pathname.replace(/_test$/, `_${suffix}_test`);
  return target.toString();
}

const names = migrationSets.notifier.map((migration) => migration.name);
/** The notifier's migration that builds its indexes CONCURRENTLY, outside a transaction. */
const concurrent = names.indexOf('WebhookQueueIndexesNameTheirColumns1764720000420');

/** A fresh database at `url` with the first `count` of the notifier's migrations applied. */
async function migratedUpTo(url: string, count: number): Promise<void> {
  await recreate(url);
  const dataSource = new DataSource(
    postgresOptions({ url, applicationName: 'e2e-migrace', migrations: [...migrationSets.notifier.slice(0, count)], poolSize: 1 }),
  );
  await dataSource.initialize();
  try {
    await dataSource.runMigrations({ transaction: 'each' });
  } finally {
    await dataSource.destroy();
  }
}

/** `migrate('notifier', url)` (what `ops db:migrate` runs), once per delay, each after its own; the migrations applied and why any failed. */
async function race(url: string, delays: number[], onWaiting?: () => void): Promise<{ applied: string[]; failures: string[] }> {
  const results = await Promise.allSettled(
    delays.map(async (delay) => {
      await sleep(delay);
      return migrate('notifier', url, onWaiting);
    }),
  );
  return {
    applied: results.flatMap((result) => (result.status === 'fulfilled' ? result.value : [])).sort(),
    failures: results.flatMap((result) => (result.status === 'rejected' ? [whyFailed(result.reason)] : [])),
  };
}

function whyFailed(error: { code?: string; message: string }): string {
  return error.code ? `${error.code}: ${error.message}` : error.message;
}

/** What a migration leaves behind: every column and index of the public schema, the migrations applied, and any invalid index. */
async function schemaOf(url: string) {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const columns = await client.query(/* sql */ `
      SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns
      WHERE table_schema = 'public' ORDER BY table_name, column_name`);
    const indexes = await client.query(
      /* sql */ `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY indexname`,
    );
    const invalid = await client.query(/* sql */ `SELECT indexrelid::regclass::text AS name FROM pg_index WHERE NOT indisvalid`);
    const applied = await client.query(/* sql */ `SELECT name FROM typeorm_migrations ORDER BY id`);
    return {
      columns: columns.rows,
      indexes: indexes.rows,
      invalidIndexes: invalid.rows.map((row) => row.name),
      applied: applied.rows.map((row) => row.name),
    };
  } finally {
    await client.end();
  }
}

/**
 * A deploy may start `ops db:migrate` in every pod at once. The migrators queue on an advisory lock; the
 * first applies what is pending and the others find nothing left. The notifier's index rebuild runs
 * CREATE INDEX CONCURRENTLY, which waits for every transaction of the database with an older snapshot:
 * a migrator queued inside a statement (`SELECT pg_advisory_lock(…)`) is one, and waits for the first
 * in turn, so PostgreSQL broke the cycle by failing the first (40P01, "deadlock detected"), its `…_next`
 * index left invalid for the next to drop. Every migrator succeeds here, each migration applied by one of them.
 */
describe('racing migrators all succeed', () => {
  const url = notifierUrl('migrace');
  const aloneUrl = notifierUrl('migrace_alone');
  let alone: Awaited<ReturnType<typeof schemaOf>>;

  beforeAll(async () => {
    await recreate(aloneUrl);
    await migrate('notifier', aloneUrl);
    alone = await schemaOf(aloneUrl);
    expect(alone.invalidIndexes).toEqual([]);
  }, 60_000);

  it('three queued on the lock while the concurrent index build is pending: all succeed, the schema complete', async () => {
    await migratedUpTo(url, concurrent);
    // The test holds the migrators' lock until all three are queued on it, then lets them go.
    const holder = new Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query(/* sql */ `SELECT pg_advisory_lock(hashtext('typeorm_migrations'))`);
      let waited = 0;
      const racing = race(url, [0, 0, 0], () => waited++);
      await eventually(
        async () =>
          (
            await holder.query(/* sql */ `
              SELECT count(*)::int AS n FROM pg_stat_activity
              WHERE datname = current_database() AND application_name = 'migrate-notifier' AND query LIKE '%advisory_lock%'`)
          ).rows[0].n,
        (n) => n === 3,
        { timeoutMs: 15_000, intervalMs: 20, what: 'three migrators queued on the lock' },
      );
      await holder.query(/* sql */ `SELECT pg_advisory_unlock(hashtext('typeorm_migrations'))`);
      const { applied, failures } = await racing;
      expect(failures).toEqual([]);
      expect(applied).toEqual(names.slice(concurrent).sort());
      expect(waited).toBe(3);
    } finally {
      await holder.end();
    }
    expect(await schemaOf(url)).toEqual(alone);
  }, 60_000);

  it(
    'any number started at any moment from any point: all succeed, each migration applied once (search)',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 0, max: names.length - 1 }),
          fc.array(fc.integer({ min: 0, max: 40 }), { minLength: 2, maxLength: 4 }),
          async (from, delays) => {
            await migratedUpTo(url, from);
            const { applied, failures } = await race(url, delays);
            expect(failures).toEqual([]);
            expect(applied).toEqual(names.slice(from).sort());
            expect(await schemaOf(url)).toEqual(alone);
          },
        ),
        searchSettings({ fast: 6, long: 40 }),
      );
    },
    searchTimeout(120_000),
  );
});
