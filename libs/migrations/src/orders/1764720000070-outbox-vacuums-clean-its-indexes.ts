import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every vacuum of the outbox cleans its indexes. A published row's entry in the unpublished index (the
 * relay's claim walks it in sequence order) goes only when a vacuum cleans the indexes, and PostgreSQL's
 * vacuum skips that step when fewer than 2 % of the table's pages have dead rows (`vacuum_index_cleanup
 * = auto`, "index scan bypassed"). On a table keeping days of published rows, the rows of a drained
 * backlog are such a fraction: every claim would keep walking their entries until enough other rows
 * died. Cleaning costs a pass over each index per vacuum, which autovacuum's thresholds keep rare.
 */
export class OutboxVacuumsCleanItsIndexes1764720000070 implements MigrationInterface {
  name = 'OutboxVacuumsCleanItsIndexes1764720000070';

  async up(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `ALTER TABLE outbox_messages SET (vacuum_index_cleanup = on)`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `ALTER TABLE outbox_messages RESET (vacuum_index_cleanup)`);
  }
}
