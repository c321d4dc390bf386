import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Tombstones (docs/idempotency.md, "After expiry"): an operation may keep an expired receipt until
 * `tombstone_until`, refusing its key rather than running it anew. Set when the receipt is claimed and
 * stored on the row, so the API, its sweeper and `ops receipts:sweep` need not agree on configuration.
 * `compacted_at`: when a sweep dropped the stored response of a receipt kept as a tombstone.
 */
export class ReceiptTombstones1764720000050 implements MigrationInterface {
  name = 'ReceiptTombstones1764720000050';

  async up(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `
      ALTER TABLE idempotency_receipts
        ADD COLUMN tombstone_until timestamptz,
        ADD COLUMN compacted_at timestamptz`);
    // A receipt may be deleted once its expiry and its tombstone (if any) are both over. The sweep walks
    // this order, so a batch never scans past the tombstones it must keep. It takes the place of the index
    // on expires_at alone (nothing else searched by it): still one index entry per receipt.
    await db.query(/* sql */ `
      CREATE INDEX idempotency_receipts_forget_idx ON idempotency_receipts ((GREATEST(expires_at, tombstone_until)))`);
    await db.query(/* sql */ `DROP INDEX idempotency_receipts_expires_idx`);
    // Tombstones whose stored response a sweep has not dropped yet, by expiry. Keyed on compacted_at and not
    // on the response columns: an index on those would cost every command's completion its HOT update.
    await db.query(/* sql */ `
      CREATE INDEX idempotency_receipts_compact_idx ON idempotency_receipts (expires_at)
      WHERE tombstone_until IS NOT NULL AND compacted_at IS NULL`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `DROP INDEX idempotency_receipts_compact_idx`);
    await db.query(/* sql */ `CREATE INDEX idempotency_receipts_expires_idx ON idempotency_receipts (expires_at)`);
    await db.query(/* sql */ `DROP INDEX idempotency_receipts_forget_idx`);
    await db.query(/* sql */ `ALTER TABLE idempotency_receipts DROP COLUMN compacted_at, DROP COLUMN tombstone_until`);
  }
}
