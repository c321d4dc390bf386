import { DataSource } from 'typeorm';
import { migrate } from '@app/migrations';
import { claimBatch } from '@app/outbox';
import { postgresOptions } from '@app/platform';
import { recreate } from './support/global-setup';
import { testEnv } from './support/test-env';

/**
 * A backlog arrives faster than autovacuum analyzes: right after a burst of commits the planner still
 * believes there are almost no unpublished rows. The claim must not pick a plan that is only good for
 * an empty queue (the parked-key check scanning every unpublished row once per claimed row: seconds
 * per batch at 20,000 rows).
 */
describe('the relay claim with statistics from before a burst', () => {
  const url = (() => {
    const target = new URL(testEnv.ordersUrl);
    target.pathname = target.pathname.replace(/_test$/, '_claimstats_test');
    return target.toString();
  })();
  let dataSource: DataSource;

  beforeAll(async () => {
    await recreate(url);
    await migrate('orders', url);
    dataSource = await new DataSource(postgresOptions({ url, applicationName: 'e2e-claim', poolSize: 2 })).initialize();
    await dataSource.query(/* sql */ `ALTER TABLE outbox_messages SET (autovacuum_enabled = false)`);
    const insert = (n: number, published: boolean) =>
      dataSource.query(
        /* sql */ `
        INSERT INTO outbox_messages (id, topic, message_key, key_hash, event_type, event_version, tenant_id, payload, headers, published_at)
        SELECT gen_random_uuid(), 'e2e.claim', 'key-' || i, i, 'RelayProbe', 1, 't', jsonb_build_object('n', i), '{}', CASE WHEN $2 THEN now() END
        FROM generate_series(1, $1) AS i`,
        [n, published],
      );
    await insert(200, true);
    await dataSource.query(/* sql */ `ANALYZE outbox_messages`);
    await insert(20_000, false);
  });

  afterAll(async () => {
    await dataSource?.destroy();
  });

  it('claims a full batch of a 20,000-row burst in well under a second', async () => {
    const shards = Array.from({ length: 16 }, (_, i) => i);
    const runner = dataSource.createQueryRunner();
    await runner.startTransaction();
    try {
      const started = performance.now();
      const rows = await claimBatch(runner.manager, { shards, shardCount: 16, limit: 500 });
      const ms = performance.now() - started;
      expect(rows).toHaveLength(500);
      expect(rows.map((row) => Number(row.sequence))).toEqual([...rows.map((row) => Number(row.sequence))].sort((a, b) => a - b));
      expect(ms).toBeLessThan(300);
    } finally {
      await runner.rollbackTransaction();
      await runner.release();
    }
  });
});
