import { DataSource } from 'typeorm';
import { migrate } from '@app/migrations';
import { postgresOptions } from '@app/platform';
import { recreate } from './global-setup';
import { deadToEverySnapshot } from './snapshots';
import { testEnv } from './test-env';

/** The URL of a suite's own orders database, `orders_<name>_test` (worker 1's name; one per suite). */
export function ordersUrlOfItsOwn(name: string): string {
  const target = new URL(testEnv.ordersUrl);
  target.pathname = target.pathname.replace(/_test$/, `_${name}_test`);
  return target.toString();
}

/**
 * An orders database of the suite's own (`orders_<name>_test`, or `url` on another server), migrated,
 * with autovacuum off on the outbox so that the statistics and dead entries stay what the test made
 * them, then `seed`ed; the data source is destroyed after the suite. Returns it, for the tests (set
 * once the suite's beforeAll ran).
 */
export function outboxOfItsOwn(
  name: string,
  seed: (dataSource: DataSource) => Promise<void>,
  timeoutMs?: number,
  url = ordersUrlOfItsOwn(name),
): () => DataSource {
  let dataSource: DataSource;
  beforeAll(async () => {
    await recreate(url);
    await migrate('orders', url);
    dataSource = await new DataSource(postgresOptions({ url, applicationName: `e2e-${name}`, poolSize: 2 })).initialize();
    await dataSource.query(/* sql */ `ALTER TABLE outbox_messages SET (autovacuum_enabled = false)`);
    await seed(dataSource);
  }, timeoutMs);
  afterAll(async () => {
    await dataSource?.destroy();
  });
  return () => dataSource;
}

/** `count` outbox rows on `topic` of keys key-1…key-count (key_hash = i), unpublished or already published. */
export function insertProbes(
  dataSource: DataSource,
  count: number,
  { published = false, topic = 'e2e.claim', tenantId = 't' } = {},
): Promise<unknown> {
  return dataSource.query(
    /* sql */ `
    INSERT INTO outbox_messages (id, topic, message_key, key_hash, event_type, event_version, tenant_id, payload, headers, published_at)
    SELECT gen_random_uuid(), $3, 'key-' || i, i, 'RelayProbe', 1, $4, jsonb_build_object('n', i), '{}', CASE WHEN $2 THEN now() END
    FROM generate_series(1, $1) AS i`,
    [count, published, topic, tenantId],
  );
}

/** Marks every unpublished row published as the relay does (an UPDATE: its unpublished-index entry left dead). */
export function publishAsTheRelayDoes(dataSource: DataSource): Promise<void> {
  return deadToEverySnapshot(dataSource, (manager) =>
    manager.query(/* sql */ `UPDATE outbox_messages SET published_at = now() WHERE published_at IS NULL`),
  );
}
