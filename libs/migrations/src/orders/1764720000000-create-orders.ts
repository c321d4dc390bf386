import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateOrders1764720000000 implements MigrationInterface {
  name = 'CreateOrders1764720000000';

  async up(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `
      CREATE TABLE orders (
        id            uuid PRIMARY KEY,
        tenant_id     text NOT NULL,
        sku           text NOT NULL,
        quantity      integer NOT NULL CHECK (quantity BETWEEN 1 AND 10000),
        customer_ref  text,
        status        text NOT NULL CHECK (status IN ('placed', 'cancelled')),
        cancel_reason text,
        created_at    timestamptz NOT NULL DEFAULT now(),
        cancelled_at  timestamptz
      )`);
    // A business rule that must hold forever lives on the business table, not in a receipt that expires.
    await db.query(/* sql */ `
      CREATE UNIQUE INDEX orders_tenant_customer_ref_key ON orders (tenant_id, customer_ref)
      WHERE customer_ref IS NOT NULL`);
    await db.query(/* sql */ `CREATE INDEX orders_tenant_created_idx ON orders (tenant_id, created_at)`);
  }

  async down(db: QueryRunner): Promise<void> {
    await db.query(/* sql */ `DROP TABLE orders`);
  }
}
