import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The index of due deliveries now holds only rows whose due time is set (every pending one: a CHECK
 * says so), so a statement can use it only when it asks for a due time. The dispatcher's claim reads it
 * by due time, as before; its check for an earlier pending delivery of the candidate's order asks for
 * none, so it can no longer take a walk of this index instead of a probe of the pending-order index.
 * It did on statistics taken without a backlog (autovacuum's usual view of this table), where the two
 * indexes look equally empty: after a receiver's outage every candidate walked every pending delivery
 * (test/webhook-claim-skips-what-it-delivered.e2e-spec.ts).
 *
 * Built CONCURRENTLY (outside a transaction), so the notifier keeps recording and delivering meanwhile;
 * an interrupted run leaves at most an invalid `…_due_idx_next`, which the next run drops first.
 */
export class WebhookDueIndexNamesItsDueTime1764720000420 implements MigrationInterface {
  readonly name = 'WebhookDueIndexNamesItsDueTime1764720000420';
  readonly transaction = false;

  async up(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `DROP INDEX CONCURRENTLY IF EXISTS webhook_deliveries_due_idx_next`);
    await db.query(/* sql */ `
      CREATE INDEX CONCURRENTLY webhook_deliveries_due_idx_next ON webhook_deliveries (next_attempt_at)
      WHERE state = 'pending' AND next_attempt_at IS NOT NULL`);
    await db.query(/* sql */ `DROP INDEX CONCURRENTLY IF EXISTS webhook_deliveries_due_idx`);
    await db.query(/* sql */ `ALTER INDEX webhook_deliveries_due_idx_next RENAME TO webhook_deliveries_due_idx`);
  }

  /** Not concurrently: TypeORM runs a revert in a transaction whatever `transaction` says. */
  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `DROP INDEX webhook_deliveries_due_idx`);
    await db.query(/* sql */ `CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE state = 'pending'`);
  }
}
