import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Asks every vacuum of `table` to clean its indexes (`vacuum_index_cleanup = on`). For a queue whose
 * claim walks an index of pending rows: a done row's entry there goes only when a vacuum cleans the
 * indexes, and PostgreSQL skips that step when fewer than 2 % of the table's pages have dead rows
 * ("index scan bypassed"), which a drained backlog is on a table keeping days of done rows. Cleaning
 * costs a pass over each index per vacuum, which autovacuum's thresholds keep rare.
 */
export abstract class VacuumsCleanIndexes implements MigrationInterface {
  abstract readonly name: string;
  protected abstract readonly table: string;

  async up(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `ALTER TABLE ${this.table} SET (vacuum_index_cleanup = on)`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `ALTER TABLE ${this.table} RESET (vacuum_index_cleanup)`);
  }
}
