// Jest's moduleNameMapper does not apply to globalSetup, so resolve @app/* aliases from tsconfig here.
import 'tsconfig-paths/register';
import { Client } from 'pg';
import { DatabaseName, migrate } from '@app/migrations';
import { buildForTests } from './build';
import { baseEnv, workerDatabaseUrl } from './test-env';

/**
 * Builds the apps once for the processes the suites spawn, then recreates every worker's test
 * databases from nothing and migrates them, so every run proves the migrations too.
 */
export default async function globalSetup(globalConfig: { maxWorkers: number }): Promise<void> {
  buildForTests();
  const databases: [DatabaseName, string][] = [
    ['orders', baseEnv.ordersUrl],
    ['fulfillment', baseEnv.fulfillmentUrl],
    ['notifier', baseEnv.notifierUrl],
    ['receiver', baseEnv.receiverUrl],
  ];
  // One set per worker that has a broker (test-infra.sh starts one per TEST_WORKERS); --runInBand uses the first.
  let count = 1;
  while (count < globalConfig.maxWorkers && process.env[`TEST_KAFKA_BROKERS_${count + 1}`]) count++;
  const workers = Array.from({ length: count }, (_, i) => i + 1);
  await Promise.all(
    workers.map(async (worker) => {
      for (const [name, url] of databases) {
        await recreate(workerDatabaseUrl(url, worker));
        await migrate(name, workerDatabaseUrl(url, worker));
      }
    }),
  );
}

/** Drops and recreates the database of `url` (only one whose name ends in `_test`). */
export async function recreate(url: string): Promise<void> {
  const target = new URL(url);
  const database = decodeURIComponent(target.pathname.slice(1));
  if (!/_test$/.test(database)) {
    throw new Error(`refusing to recreate ${database}: test databases must end in _test`);
  }
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
    await client.query(`CREATE DATABASE "${database}"`);
  } finally {
    await client.end();
  }
}
