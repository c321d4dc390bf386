import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every vacuum of the webhook queue cleans its indexes, as every vacuum of the outbox does (orders
 * migration 070): a delivered row's entry in the index of pending rows, which the dispatcher's claim
 * walks, goes only when a vacuum cleans the indexes, and PostgreSQL skips that step when fewer than
 * 2 % of the table's pages have dead rows. On a table keeping days of deliveries, a receiver outage's
 * backlog is such a fraction.
 */
export class WebhookQueueVacuumsCleanItsIndexes1764720000410 implements MigrationInterface {
  name = 'WebhookQueueVacuumsCleanItsIndexes1764720000410';

  async up(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `ALTER TABLE webhook_deliveries SET (vacuum_index_cleanup = on)`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `ALTER TABLE webhook_deliveries RESET (vacuum_index_cleanup)`);
  }
}
