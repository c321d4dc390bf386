import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `ops audit` asks "which orders were placed or cancelled inside the outbox retention?": without
 * these, that question scans every order ever placed (orders are kept forever).
 */
export class IndexOrdersByTime1764720000030 implements MigrationInterface {
  name = 'IndexOrdersByTime1764720000030';

  async up(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `CREATE INDEX orders_created_idx ON orders (created_at)`);
    await db.query(/* sql */ `CREATE INDEX orders_cancelled_idx ON orders (cancelled_at) WHERE cancelled_at IS NOT NULL`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `DROP INDEX orders_cancelled_idx`);
    await db.query(/* sql */ `DROP INDEX orders_created_idx`);
  }
}
