import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The two indexes of pending deliveries each hold only rows with the column they are read by set: the
 * due index rows with a due time, the pending-order index rows with an order (every pending row has
 * both: a CHECK and NOT NULL say so, so the rows are the same). A statement can then use each only when
 * it asks for that column. Before, both covered plain `state = 'pending'`, and on statistics taken
 * without a backlog (autovacuum's usual view of this table, kept until a tenth of it changes) both
 * looked empty, so a walk of either cost the planner no more than a probe: after a receiver's outage
 * the dispatcher's check of each candidate's order walked the due index, and its settle joined its
 * results with a walk of the pending-order index, every pending delivery each time
 * (test/webhook-claim-skips-what-it-delivered.e2e-spec.ts). Now the check asks for an order and
 * probes the pending-order index; the settle asks for neither and finds each row by its message id;
 * the claim's scan and the floor's look ask for due times and read the due index.
 *
 * Built CONCURRENTLY (outside a transaction), so the notifier keeps recording and delivering meanwhile;
 * an interrupted run leaves at most an invalid `…_next` index, which the next run drops first.
 */
export class WebhookQueueIndexesNameTheirColumns1764720000420 implements MigrationInterface {
  readonly name = 'WebhookQueueIndexesNameTheirColumns1764720000420';
  readonly transaction = false;

  async up(db: QueryRunner): Promise<void> {
    await rebuild(db, 'webhook_deliveries_due_idx', `(next_attempt_at) WHERE state = 'pending' AND next_attempt_at IS NOT NULL`);
    await rebuild(db, 'webhook_deliveries_pending_order_idx', `(order_id, sequence) WHERE state = 'pending' AND order_id IS NOT NULL`);
  }

  /** Not concurrently: TypeORM runs a revert in a transaction whatever `transaction` says. */
  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `DROP INDEX webhook_deliveries_due_idx, webhook_deliveries_pending_order_idx`);
    await db.query(/* sql */ `CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE state = 'pending'`);
    await db.query(
      /* sql */ `CREATE INDEX webhook_deliveries_pending_order_idx ON webhook_deliveries (order_id, sequence) WHERE state = 'pending'`,
    );
  }
}

/** Replaces the index `name` of webhook_deliveries with one on `definition`, concurrently. */
async function rebuild(db: QueryRunner, name: string, definition: string): Promise<void> {
  await db.query(/* sql */ `DROP INDEX CONCURRENTLY IF EXISTS ${name}_next`);
  await db.query(/* sql */ `CREATE INDEX CONCURRENTLY ${name}_next ON webhook_deliveries ${definition}`);
  await db.query(/* sql */ `DROP INDEX CONCURRENTLY IF EXISTS ${name}`);
  await db.query(/* sql */ `ALTER INDEX ${name}_next RENAME TO ${name}`);
}
