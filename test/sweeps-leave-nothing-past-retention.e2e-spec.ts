import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { sweepInbox } from '@app/inbox';
import { deletePublishedBefore } from '@app/outbox';
import { postgresOptions } from '@app/platform';
import { privateDatabases } from './support/private-stack';
import { testEnv } from './support/test-env';

const HOUR = 3600;

/**
 * A retention is what the table holds: once a periodic sweep has run, no row past the retention is
 * left, however many there were. Until 2026-12-07 the consumers' inbox sweep and the relay's outbox
 * cleanup stopped after 100 batches of 1,000 rows: 100,000 rows an hour for the inbox (its default
 * interval), about 28 a second, so a consumer receiving more kept message-ids for ever longer than it
 * declared, and the outbox published rows past OUTBOX_RETENTION_SECONDS above 333 a second. Both now
 * sweep batch after batch until one comes back short (the ops CLI always did). Backlogs from just over
 * one batch to past the old cap; each sweep runs once.
 */
describe('a sweep leaves nothing past the retention, whatever the backlog', () => {
  const backlogs = [1_001, 100_500];

  describe('the inbox', () => {
    let db: DataSource;
    beforeAll(async () => {
      db = await new DataSource(postgresOptions({ url: testEnv.fulfillmentUrl, applicationName: 'e2e-sweeps', poolSize: 2 })).initialize();
    });
    afterAll(() => db?.destroy());

    it.each(backlogs)(
      'forgets all of %i expired message-ids in one sweep, and keeps the current ones',
      async (expired) => {
        const consumer = `sweep-${randomUUID().slice(0, 8)}`;
        const insert = (count: number, age: string) =>
          db.query(
            `INSERT INTO inbox_messages (consumer, message_id, topic, kafka_partition, kafka_offset, outcome, received_at)
           SELECT $1, gen_random_uuid(), 'orders.order-events.v1', 0, n, 'applied', now() - $3::interval FROM generate_series(1, $2) n`,
            [consumer, count, age],
          );
        await insert(expired, '2 hours');
        await insert(10, '59 minutes');
        const deleted = await sweepInbox(db.manager, { consumer, retentionSeconds: HOUR });
        const [left] = await db.query(`SELECT count(*)::int AS n FROM inbox_messages WHERE consumer = $1`, [consumer]);
        expect({ deleted, left: left.n }).toEqual({ deleted: expired, left: 10 });
        await db.query(`DELETE FROM inbox_messages WHERE consumer = $1`, [consumer]);
      },
      120_000,
    );
  });

  describe('the outbox', () => {
    let db: DataSource;
    beforeAll(async () => {
      // A database of its own: the cleanup deletes every tenant's old rows, and other suites keep some on purpose.
      const { ordersUrl } = await privateDatabases('sweeps');
      db = await new DataSource(postgresOptions({ url: ordersUrl, applicationName: 'e2e-sweeps', poolSize: 2 })).initialize();
    }, 120_000);
    afterAll(() => db?.destroy());

    it.each(backlogs)(
      'deletes all of %i published rows past the retention in one cleanup, and keeps the rest',
      async (expired) => {
        const insert = (count: number, published: string | null) =>
          db.query(
            `INSERT INTO outbox_messages (id, topic, message_key, key_hash, event_type, event_version, tenant_id, payload, created_at, published_at)
           SELECT gen_random_uuid(), 'orders.order-events.v1', 'k-' || n, n, 'RelayProbe', 1, 't-sweeps', '{}',
                  now() - interval '3 hours', now() - $2::interval
           FROM generate_series(1, $1) n`,
            [count, published],
          );
        await insert(expired, '2 hours');
        await insert(10, '59 minutes');
        await insert(10, null); // never published: kept whatever its age
        const deleted = await deletePublishedBefore(db.manager, { retentionSeconds: HOUR });
        const [left] = await db.query(`SELECT count(*)::int AS n FROM outbox_messages`);
        expect({ deleted, left: left.n }).toEqual({ deleted: expired, left: 20 });
        await db.query(`DELETE FROM outbox_messages`);
      },
      120_000,
    );
  });
});
